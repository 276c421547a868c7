/*
 * test_algo_api.c - the algorithms' surface through the embedded store:
 * every argument error and documented bound, the error names and
 * messages, the algorithms' names, sluice_duration_parse(), and the
 * largest values the bounds allow, decided exactly.
 *
 * Every failure must leave a detail of its own in sluice_last_error()
 * (CHECK_FAILS). The store runs on a virtual clock (mem_fixture.h).
 */
#include "mem_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Errors: a fresh detail for each failure ----------------------------- */

/* Makes a failure whose detail names a marker, so the next one can be told
   apart from it. */
static void error_marker(void)
{
    sluice_algo a;

    (void)sluice_algo_parse(&a, "marker-xyzzy");
}

static void check_fresh_error_at(const char *file, int line, const char *expr)
{
    const char *msg = sluice_last_error();
    char what[256];

    snprintf(what, sizeof(what), "%s sets a detail in sluice_last_error() "
             "(it reads \"%s\")", expr, msg == NULL ? "(null)" : msg);
    test_check_at(msg != NULL && msg[0] != '\0' &&
                      strstr(msg, "xyzzy") == NULL,
                  file, line, what);
}

/* 'expr' must fail with 'want' and leave a detail of its own. */
#define CHECK_FAILS(expr, want)                                      \
    do {                                                             \
        error_marker();                                              \
        test_check_rc_at((expr), (want), __FILE__, __LINE__, #expr); \
        check_fresh_error_at(__FILE__, __LINE__, #expr);             \
    } while (0)

/* ---- Names, messages, durations ------------------------------------------ */

static void test_error_names(void)
{
    static const struct {
        int code;
        const char *name;
        const char *msg;
    } codes[] = {
#define ROW(name, val, msg) {SLUICE_##name, #name, msg},
        SLUICE_ERRNO_MAP(ROW)
#undef ROW
    };
    static const int unknown[] = {1, 7, -15, -16, -100, 1000, INT32_MIN};
    size_t n = sizeof(codes) / sizeof(codes[0]);

    CHECK_EQ_U64(n, 14);
    CHECK(strcmp(sluice_strerror(SLUICE_OK), "success") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_OK), "OK") == 0);
    for (size_t i = 0; i < n; i++) {
        test_context("code %d (%s)", codes[i].code, codes[i].name);
        CHECK(codes[i].code < 0);
        CHECK(codes[i].code > SLUICE__ERRNO_LAST);
        CHECK(strcmp(sluice_strerror(codes[i].code), codes[i].msg) == 0);
        CHECK(strcmp(sluice_err_name(codes[i].code), codes[i].name) == 0);
        CHECK(strcmp(sluice_strerror(codes[i].code), "unknown error") != 0);
        for (size_t j = 0; j < i; j++) {
            CHECK(codes[i].code != codes[j].code);
            CHECK(strcmp(sluice_strerror(codes[i].code),
                         sluice_strerror(codes[j].code)) != 0);
        }
    }
    test_context(NULL);
    CHECK(strcmp(sluice_err_name(SLUICE_ECOST), "ECOST") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_ENOMEM), "ENOMEM") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_EFULL), "EFULL") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_ECONFIG), "ECONFIG") == 0);
    CHECK(strcmp(sluice_strerror(SLUICE_ECONFIG), "store misconfigured: its "
                 "URL or its servers, no outage") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_EAUTH), "EAUTH") == 0);
    CHECK(strcmp(sluice_err_name(SLUICE_ECANCELED), "ECANCELED") == 0);
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        CHECK(strcmp(sluice_strerror(unknown[i]), "unknown error") == 0);
        CHECK(strcmp(sluice_err_name(unknown[i]), "UNKNOWN") == 0);
    }
}

/* A duration's text and the milliseconds it parses to, or the error it
   fails with. */
typedef struct duration_good {
    const char *text;
    uint64_t ms;
} duration_good;

typedef struct duration_bad {
    const char *text;
    int err;
} duration_bad;

/* Parses each of 'good' (checking its value) and each of 'bad' (checking
   its error). */
static void check_durations(const duration_good *good, size_t ngood,
                            const duration_bad *bad, size_t nbad)
{
    uint64_t ms;

    for (size_t i = 0; i < ngood; i++) {
        test_context("duration \"%s\"", good[i].text);
        ms = 0;
        CHECK_OK(sluice_duration_parse(&ms, good[i].text));
        CHECK_EQ_U64(ms, good[i].ms);
    }
    for (size_t i = 0; i < nbad; i++) {
        test_context("duration \"%s\"", bad[i].text);
        CHECK_FAILS(sluice_duration_parse(&ms, bad[i].text), bad[i].err);
    }
    test_context(NULL);
}

/* Each algorithm's folder (SLUICE_ALGO_MAP): its public name is the
   folder's with '-' for '_' ("sliding_log" is "sliding-log"). */
static const char *const folders[] = {
#define FOLDER(name, val, folder) [SLUICE_##name] = #folder,
    SLUICE_ALGO_MAP(FOLDER)
#undef FOLDER
};

static void test_algo_names(void)
{
    sluice_algo a;

    CHECK_EQ_U64(sluice_algo_count(), TEST_ALGO_N);
    for (int i = 0; i < TEST_ALGO_N; i++) {
        const char *name = sluice_algo_name((sluice_algo)i);
        char want[64];

        snprintf(want, sizeof(want), "%s", folders[i]);
        for (char *p = want; *p != '\0'; p++)
            *p = *p == '_' ? '-' : *p;
        CHECK(name != NULL && strcmp(name, want) == 0);
        a = (sluice_algo)99;
        CHECK_OK(sluice_algo_parse(&a, want));
        CHECK_EQ_U64(a, i);
    }
    CHECK(sluice_algo_name((sluice_algo)TEST_ALGO_N) == NULL);
    CHECK(sluice_algo_name((sluice_algo)-1) == NULL);
    CHECK_FAILS(sluice_algo_parse(&a, "Fixed"), SLUICE_EINVAL);
    CHECK_FAILS(sluice_algo_parse(&a, ""), SLUICE_EINVAL);
    CHECK_FAILS(sluice_algo_parse(&a, "sliding"), SLUICE_EINVAL);
    CHECK_FAILS(sluice_algo_parse(&a, "fixed "), SLUICE_EINVAL);
    CHECK_FAILS(sluice_algo_parse(NULL, "fixed"), SLUICE_EINVAL);
    CHECK_FAILS(sluice_algo_parse(&a, NULL), SLUICE_EINVAL);
}

static void test_duration_parse(void)
{
    static const duration_good good[] = {
        {"250ms", 250},
        {"1s", 1000},
        {"1m", 60000},
        {"1h", 3600000},
        {"42", 42},
        {"1", 1},
        {"1ms", 1},
        {"90s", 90000},
        {"007s", 7000},
        {"24h", 86400000},
        {"1099511627776", 1099511627776ULL}, /* 2^40 ms, the most */
        {"1099511627776ms", 1099511627776ULL},
        {"305419h", 305419ULL * 3600000ULL}, /* the most whole hours */
        {"18325193m", 18325193ULL * 60000ULL},
    };
    static const duration_bad bad[] = {
        {"", SLUICE_EINVAL},
        {"1x", SLUICE_EINVAL},
        {"-1", SLUICE_EINVAL},
        {"+1", SLUICE_EINVAL},
        {"1.5s", SLUICE_EINVAL},
        {" 1s", SLUICE_EINVAL},
        {"1s ", SLUICE_EINVAL},
        {"1 s", SLUICE_EINVAL},
        {"s", SLUICE_EINVAL},
        {"ms", SLUICE_EINVAL},
        {"1S", SLUICE_EINVAL},
        {"1sec", SLUICE_EINVAL},
        {"1msx", SLUICE_EINVAL},
        {"0x10", SLUICE_EINVAL},
        {"0", SLUICE_ERANGE},
        {"0ms", SLUICE_ERANGE},
        {"0h", SLUICE_ERANGE},
        {"1099511627777", SLUICE_ERANGE}, /* 2^40 + 1 */
        {"305420h", SLUICE_ERANGE},
        {"18325194m", SLUICE_ERANGE},
        {"1099511628s", SLUICE_ERANGE},
        {"18446744073709551615", SLUICE_ERANGE}, /* UINT64_MAX */
        {"18446744073709551616", SLUICE_ERANGE}, /* UINT64_MAX + 1 */
        {"99999999999999999999999999999", SLUICE_ERANGE},
        {"18446744073709551615h", SLUICE_ERANGE}, /* overflows x 3600000 */
        {"5124095576030431h", SLUICE_ERANGE},    /* ~2^64 / 3600000 */
    };
    uint64_t ms;

    check_durations(good, sizeof(good) / sizeof(good[0]), bad,
                    sizeof(bad) / sizeof(bad[0]));
    CHECK_FAILS(sluice_duration_parse(NULL, "1s"), SLUICE_EINVAL);
    CHECK_FAILS(sluice_duration_parse(&ms, NULL), SLUICE_EINVAL);
}

/* Days and compound durations: "1h30m", units descending, each once. */
static void test_duration_compound(void)
{
    static const duration_good good[] = {
        {"1d", 86400000},
        {"12725d", 12725ULL * 86400000ULL}, /* the most whole days */
        {"1h30m", 5400000},
        {"1m30s", 90000},
        {"2s500ms", 2500},
        {"1d1h1m1s1ms", 86400000 + 3600000 + 60000 + 1000 + 1},
        {"1d0h", 86400000},
        {"0m1s", 1000},
        {"1h90m", 3600000 + 5400000}, /* a part may exceed its next unit */
        {"12725d19h", 12725ULL * 86400000ULL + 19ULL * 3600000ULL},
    };
    static const duration_bad bad[] = {
        {"1D", SLUICE_EINVAL},
        {"1s1m", SLUICE_EINVAL},  /* ascending */
        {"1m1m", SLUICE_EINVAL},  /* repeated */
        {"1ms1s", SLUICE_EINVAL},
        {"1s1s", SLUICE_EINVAL},
        {"1h1d", SLUICE_EINVAL},
        {"1h30", SLUICE_EINVAL},  /* a bare number only alone */
        {"1hm", SLUICE_EINVAL},   /* an empty part */
        {"1h-30m", SLUICE_EINVAL},
        {"1h 30m", SLUICE_EINVAL},
        {"-1s", SLUICE_EINVAL},
        {"1.5m", SLUICE_EINVAL},
        {"d", SLUICE_EINVAL},
        {"0s0ms", SLUICE_ERANGE},
        {"12726d", SLUICE_ERANGE},  /* past 2^40 ms */
        {"12725d20h", SLUICE_ERANGE},
        {"213503982334601d", SLUICE_ERANGE}, /* the product overflows */
        {"18446744073709551615ms1", SLUICE_EINVAL},
        {"100000000000d100000000000h", SLUICE_ERANGE}, /* the sum is large */
    };
    uint64_t ms;

    check_durations(good, sizeof(good) / sizeof(good[0]), bad,
                    sizeof(bad) / sizeof(bad[0]));
    /* A message names the text and lists the forms taken. */
    CHECK_FAILS(sluice_duration_parse(&ms, "1s1m"), SLUICE_EINVAL);
    CHECK(strstr(sluice_last_error(), "'1s1m'") != NULL);
    CHECK(strstr(sluice_last_error(), "1h30m") != NULL);
    CHECK(strstr(sluice_last_error(), "d, h, m, s, ms") != NULL);
    CHECK_FAILS(sluice_duration_parse(&ms, "12726d"), SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "'12726d'") != NULL);
}

/* ---- Argument errors and bounds ------------------------------------------ */

static void test_free_null(void)
{
    sluice_store_free(NULL);
    sluice_vclock_free(NULL);
    CHECK(sluice_store_kind(NULL) == NULL);
}

static void test_store_open_errors(void)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_store *s = (sluice_store *)&opts; /* must be overwritten */
    sluice_store_stats st;

    CHECK_FAILS(sluice_store_open(NULL, NULL, NULL), SLUICE_EINVAL);
    CHECK_FAILS(sluice_store_open(&s, "nope://localhost", NULL), SLUICE_EURL);
    CHECK(s == NULL);
    s = (sluice_store *)&opts;
    opts.version = 0;
    CHECK_FAILS(sluice_store_open(&s, NULL, &opts), SLUICE_EINVAL);
    CHECK(s == NULL);
    opts.version = SLUICE_STORE_OPTS_VERSION + 1;
    CHECK_FAILS(sluice_store_open(&s, NULL, &opts), SLUICE_EINVAL);
    CHECK(s == NULL);
    /* Every version from 1 up is taken (a caller built against an older
       header keeps working). */
    for (unsigned v = 1; v <= SLUICE_STORE_OPTS_VERSION; v++) {
        opts.version = v;
        CHECK_OK(sluice_store_open(&s, NULL, &opts));
        CHECK(s != NULL);
        sluice_store_free(s);
        s = NULL;
    }
    opts.version = SLUICE_STORE_OPTS_VERSION;

    /* NULL, "" and "mem://" are all the embedded store; opts may be NULL
       (the wall clock). */
    CHECK_OK(sluice_store_open(&s, NULL, NULL));
    CHECK(s != NULL && strcmp(sluice_store_kind(s), "mem") == 0);
    sluice_store_free(s);
    CHECK_OK(sluice_store_open(&s, "", NULL));
    CHECK(s != NULL && strcmp(sluice_store_kind(s), "mem") == 0);
    sluice_store_free(s);
    CHECK_OK(sluice_store_open(&s, "mem://", NULL));
    CHECK(s != NULL && strcmp(sluice_store_kind(s), "mem") == 0);
    memset(&st, 0xA5, sizeof(st));
    CHECK_OK(sluice_store_stats_get(&st, s));
    CHECK_EQ_U64(st.keys, 0);
    CHECK_EQ_U64(st.expired, 0);
    CHECK_EQ_U64(st.full, 0);
    CHECK(st.bytes > 0);
    CHECK_FAILS(sluice_store_stats_get(NULL, s), SLUICE_EINVAL);
    CHECK_FAILS(sluice_store_stats_get(&st, NULL), SLUICE_EINVAL);
    sluice_store_free(s);

    CHECK_FAILS(sluice_vclock_new(NULL, 0), SLUICE_EINVAL);
}

/* Missing arguments, and a key too long to be read at all. */
static void check_missing_arguments(fixture *fx, const sluice_limit *ok)
{
    sluice_decision d;
    char big[16] = "k";

    CHECK_FAILS(sluice_hit(NULL, fx->store, ok, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_hit(&d, NULL, ok, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_hit(&d, fx->store, NULL, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_hit(&d, fx->store, ok, NULL, 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_peek(NULL, fx->store, ok, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_peek(&d, NULL, ok, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_peek(&d, fx->store, NULL, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_peek(&d, fx->store, ok, NULL, 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_reset(NULL, ok, "k", 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_reset(fx->store, NULL, "k", 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_reset(fx->store, ok, NULL, 1), SLUICE_EINVAL);
    if ((uint64_t)SIZE_MAX > UINT32_MAX) {
        /* Refused on its length alone: the bytes are never read. */
        size_t huge = (size_t)UINT32_MAX + 1;

        CHECK_FAILS(sluice_hit(&d, fx->store, ok, big, huge, 1),
                    SLUICE_ERANGE);
        CHECK_FAILS(sluice_reset(fx->store, ok, big, huge), SLUICE_ERANGE);
    }
}

/* max and window: each bound, and just past it. */
static void check_max_and_window(fixture *fx, const sluice_limit *ok)
{
    sluice_decision d;
    sluice_limit l = *ok;

    l.max = 0;
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_peek(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_reset(fx->store, &l, "k", 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
    l.max = SLUICE_MAX_MAX + 1; /* 2^53 */
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l.max = UINT64_MAX;
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = *ok;
    l.window_ms = 0;
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
    l.window_ms = SLUICE_WINDOW_MAX_MS + 1;
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l.window_ms = UINT64_MAX;
    CHECK_FAILS(sluice_peek(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = *ok;
    l.window_ms = SLUICE_WINDOW_MAX_MS;
    CHECK_OK(sluice_limit_check(&l));
    l = *ok;
    /* compact-log keeps 8 bytes a unit: its own bound (test_compact_log). */
    l.max = l.algo == SLUICE_COMPACT_LOG ? SLUICE_COMPACT_LOG_MAX
                                         : SLUICE_MAX_MAX;
    l.window_ms = 1;
    CHECK_OK(sluice_limit_check(&l));
}

/*
 * cost: at least 1, at most max (else ECOST, not a refusal); a failed call
 * fills 'out' with no admission, and counts nothing. 'ok' is max 10 per
 * 1000 ms, at 1000.
 */
static void check_cost(fixture *fx, const sluice_limit *ok)
{
    sluice_decision d;
    sluice_limit l;
    const char *msg;

    for (int consume = 0; consume <= 1; consume++) {
        int rc;

        error_marker();
        rc = consume ? sluice_hit(&d, fx->store, ok, "k", 1, 0)
                     : sluice_peek(&d, fx->store, ok, "k", 1, 0);
        CHECK(rc == SLUICE_ERANGE || rc == SLUICE_EINVAL);
        check_fresh_error_at(__FILE__, __LINE__, "cost 0");
    }
    CHECK_FAILS(sluice_hit(&d, fx->store, ok, "k", 1, 11), SLUICE_ECOST);
    msg = sluice_last_error();
    CHECK(strstr(msg, "11") != NULL && strstr(msg, "10") != NULL);
    CHECK_FAILS(sluice_peek(&d, fx->store, ok, "k", 1, 11), SLUICE_ECOST);
    CHECK_FAILS(sluice_hit(&d, fx->store, ok, "k", 1, UINT64_MAX),
                SLUICE_ECOST);
    l = limit_of(ok->algo, 1, 1);
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 2), SLUICE_ECOST);
    /* A failed call fills 'out' with no admission. */
    memset(&d, 0xA5, sizeof(d));
    (void)sluice_hit(&d, fx->store, ok, "k", 1, 11);
    CHECK(d.allowed == 0);
    /* None of that counted: the key is untouched. */
    CHECK_SAME(PEEK(fx, ok, "k", 10), fx_fresh(ok, 1000, 10));
}

/* An unknown algorithm; a burst, which only gcra has. */
static void check_algo_and_burst(fixture *fx)
{
    sluice_decision d;
    sluice_limit l = limit_of((sluice_algo)TEST_ALGO_N, 10, 1000);

    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_reset(fx->store, &l, "k", 1), SLUICE_EINVAL);
    l.algo = (sluice_algo)-1;
    CHECK_FAILS(sluice_peek(&d, fx->store, &l, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_limit_check(NULL), SLUICE_EINVAL);
    /* A burst: an algorithm without one takes only 0; gcra takes up to
       max (test_gcra has the rest). */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        l = limit_of((sluice_algo)a, 10, 1000);
        CHECK_OK(sluice_limit_check(&l));
        l.burst = 10;
        if (a == SLUICE_GCRA) {
            CHECK_OK(sluice_limit_check(&l));
            l.burst = 11;
            CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
            CHECK(strstr(sluice_last_error(), "burst") != NULL);
            CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1),
                        SLUICE_ERANGE);
            continue;
        }
        CHECK_FAILS(sluice_limit_check(&l), SLUICE_EINVAL);
        CHECK(strstr(sluice_last_error(), "burst") != NULL);
        CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_EINVAL);
        CHECK(SLUICE_LIMIT((sluice_algo)a, 10, 1000).burst == 0);
    }
}

/* The sliding counter's product bound, max x window <= 2^53 (its alone),
   and a clock past 2^53 ms, refused rather than wrapped. */
static void check_product_and_clock(fixture *fx)
{
    sluice_decision d;
    sluice_limit l;

    l = limit_of(SLUICE_SLIDING_COUNTER, 1u << 13, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l)); /* exactly 2^53 */
    l.max = (1u << 13) + 1;
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, SLUICE_MAX_MAX, 2);
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, SLUICE_MAX_MAX,
                 SLUICE_WINDOW_MAX_MS); /* the product overflows 64 bits */
    CHECK_FAILS(sluice_peek(&d, fx->store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, 3, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l));
    /* The bound is the counter's alone. */
    l = limit_of(SLUICE_FIXED, SLUICE_MAX_MAX, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l));
    l.algo = SLUICE_SLIDING_LOG;
    CHECK_OK(sluice_limit_check(&l));

    /* A clock past 2^53 ms is refused, not wrapped. */
    l = limit_of(SLUICE_FIXED, 10, 1000);
    fx_at(fx, SLUICE_NOW_MAX_MS);
    CHECK_OK(sluice_hit(&d, fx->store, &l, "late", 4, 1));
    fx_at(fx, SLUICE_NOW_MAX_MS + 1);
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "late", 4, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_hit(&d, fx->store, &l, "later", 5, 1), SLUICE_ERANGE);
    fx_at(fx, UINT64_MAX);
    CHECK_FAILS(sluice_peek(&d, fx->store, &l, "late", 4, 1), SLUICE_ERANGE);
}

static void test_argument_errors(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit ok = limit_of((sluice_algo)a, 10, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        check_missing_arguments(&fx, &ok);
        check_max_and_window(&fx, &ok);
        check_cost(&fx, &ok);
    }
    test_context(NULL);
    check_algo_and_burst(&fx);
    check_product_and_clock(&fx);
    fx_close(&fx);
}

/* ---- Documented bounds reached ------------------------------------------- */

static void test_large_values(void)
{
    fixture fx;
    const uint64_t W = SLUICE_WINDOW_MAX_MS, T = 1ULL << 52;
    sluice_limit l = {0};

    fx_open(&fx, T);
    /* Every algorithm that takes the largest max with the longest window
       (fixed and log: the sliding counter's product bound refuses it). */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        l = limit_of((sluice_algo)a, SLUICE_MAX_MAX, W);
        if (sluice_limit_check(&l) != SLUICE_OK)
            continue;
        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        fx_at(&fx, T);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX - 1), &l, 1, 1, 0, W);
        EXPECT(HIT(&fx, &l, "big", 2), &l, 0, 1, W, W);
        EXPECT(HIT(&fx, &l, "big", 1), &l, 1, 0, 0, W);
        EXPECT(HIT(&fx, &l, "big", 1), &l, 0, 0, W, W);
        fx_at(&fx, T + W - 1);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX), &l, 0, 0, 1, 1);
        fx_at(&fx, T + W);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX), &l, 1, 0, 0, W);
        EXPECT(PEEK(&fx, &l, "fresh", SLUICE_MAX_MAX), &l, 1, 0, 0, W);
    }

    /* The counter at its product bound, max 2^13 and window 2^40. After a
       full window the next one admits 1 when 2^13 r / 2^40 + 1 <= 2^13,
       i.e. r <= 8191 x 2^27, 2^27 ms into it. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 1u << 13, W);
    test_context("algo sliding-counter");
    fx_at(&fx, 5 * W);
    EXPECT(HIT(&fx, &l, "big", 1u << 13), &l, 1, 0, 0, 2 * W);
    EXPECT(HIT(&fx, &l, "big", 1), &l, 0, 0, W + (1ULL << 27), 2 * W);
    CHECK(HIT(&fx, &l, "big-a", 1u << 13).allowed);
    CHECK(HIT(&fx, &l, "big-b", 1u << 13).allowed);
    fx_at(&fx, 6 * W + (1ULL << 27) - 1);
    EXPECT(PEEK(&fx, &l, "big-a", 1), &l, 0, 0, 1, W - (1ULL << 27) + 1);
    fx_at(&fx, 6 * W + (1ULL << 27));
    EXPECT(PEEK(&fx, &l, "big-b", 1), &l, 1, 0, 0, 2 * W - (1ULL << 27));
    test_context(NULL);
    fx_close(&fx);
}


int main(void)
{
    test_error_names();
    test_algo_names();
    test_duration_parse();
    test_duration_compound();
    test_free_null();
    test_store_open_errors();
    test_argument_errors();
    test_large_values();
    return test_summary("test_algo_api");
}
