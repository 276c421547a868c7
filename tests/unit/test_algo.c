/*
 * test_algo.c - unit tests of the three algorithms through the embedded
 * store, on a virtual clock (no test here ever sleeps).
 *
 * What is pinned, per algorithm: the exact decision at and around window
 * boundaries; the seam (the most a span one window long can admit); costs
 * above 1; that retry_after_ms is exact (the same request is admitted at
 * now + retry and refused at now + retry - 1), that reset_after_ms is exact
 * (the budget is whole at now + reset and not one ms before), and that
 * 'remaining' is the largest cost that would be admitted now, over thousands
 * of random scenarios; that peek never counts; reset; the independence of
 * algorithms and keys (binary keys, the empty key); the clamp of a clock that
 * goes backwards; documented bounds and every argument error; the error
 * names; sluice_duration_parse().
 *
 * The embedded store clamps time per key: once a key has been asked about at
 * time t, asking about it at an earlier time answers as of t. So a probe "in
 * the future" is made on a copy of the key, built by replaying the same
 * requests under another key name, never on the key itself.
 *
 * Usage: test_algo [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "test.h"
#include "rng.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Fixture ------------------------------------------------------------- */

/* A virtual clock and an embedded store that reads it. */
typedef struct fixture {
    sluice_vclock *clock;
    sluice_store *store;
} fixture;

static void fx_open(fixture *fx, uint64_t start_ms)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    fx->clock = NULL;
    fx->store = NULL;
    CHECK_OK(sluice_vclock_new(&fx->clock, start_ms));
    if (fx->clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = fx->clock;
    CHECK_OK(sluice_store_open(&fx->store, "mem://", &opts));
    if (fx->store == NULL)
        exit(2);
}

static void fx_close(fixture *fx)
{
    sluice_store_free(fx->store);
    sluice_vclock_free(fx->clock);
}

static void at(fixture *fx, uint64_t now_ms)
{
    sluice_vclock_set(fx->clock, now_ms);
}

static sluice_limit limit_of(sluice_algo algo, uint64_t max,
                             uint64_t window_ms)
{
    sluice_limit l = {0};

    l.algo = algo;
    l.max = max;
    l.window_ms = window_ms;
    return l;
}

/* ---- Decisions ----------------------------------------------------------- */

/*
 * Asks the store (a hit when 'consume', else a peek) and checks that the call
 * succeeded, reporting the caller's 'file':'line'. The decision is poisoned
 * first, so a field the store forgets to set shows up.
 */
static sluice_decision decide_at(fixture *fx, const sluice_limit *limit,
                                 const char *key, size_t key_len,
                                 uint64_t cost, int consume, const char *file,
                                 int line)
{
    sluice_decision d;
    int rc;

    memset(&d, 0xA5, sizeof(d));
    if (consume)
        rc = sluice_hit(&d, fx->store, limit, key, key_len, cost);
    else
        rc = sluice_peek(&d, fx->store, limit, key, key_len, cost);
    test_check_rc_at(rc, SLUICE_OK, file, line,
                     consume ? "sluice_hit()" : "sluice_peek()");
    return d;
}

/* 'key' must be a string literal here (it may hold NUL bytes). */
#define HIT(fx, l, key, cost) \
    decide_at((fx), (l), "" key "", sizeof("" key "") - 1, (cost), 1, \
              __FILE__, __LINE__)
#define PEEK(fx, l, key, cost) \
    decide_at((fx), (l), "" key "", sizeof("" key "") - 1, (cost), 0, \
              __FILE__, __LINE__)
#define HITN(fx, l, key, len, cost) \
    decide_at((fx), (l), (key), (len), (cost), 1, __FILE__, __LINE__)
#define PEEKN(fx, l, key, len, cost) \
    decide_at((fx), (l), (key), (len), (cost), 0, __FILE__, __LINE__)

static void format_decision(char *buf, size_t n, const sluice_decision *d)
{
    snprintf(buf, n,
             "{allowed %d, limit %" PRIu64 ", remaining %" PRIu64
             ", retry %" PRIu64 ", reset %" PRIu64 "}",
             d->allowed, d->limit, d->remaining, d->retry_after_ms,
             d->reset_after_ms);
}

static int same_decision(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms;
}

static int check_same_at(sluice_decision a, sluice_decision b,
                         const char *file, int line, const char *ea,
                         const char *eb)
{
    char sa[160], sb[160], what[512];

    if (same_decision(&a, &b))
        return test_check_at(1, file, line, NULL);
    format_decision(sa, sizeof(sa), &a);
    format_decision(sb, sizeof(sb), &b);
    snprintf(what, sizeof(what), "%s == %s: %s != %s", ea, eb, sa, sb);
    return test_check_at(0, file, line, what);
}

#define CHECK_SAME(a, b) check_same_at((a), (b), __FILE__, __LINE__, #a, #b)

/* Checks every field of 'd' against the expected values. */
static int expect_at(sluice_decision d, const sluice_limit *limit,
                     int allowed, uint64_t remaining, uint64_t retry_ms,
                     uint64_t reset_ms, const char *file, int line)
{
    sluice_decision want;

    memset(&want, 0, sizeof(want));
    want.allowed = allowed;
    want.limit = limit->max;
    want.remaining = remaining;
    want.retry_after_ms = retry_ms;
    want.reset_after_ms = reset_ms;
    return check_same_at(d, want, file, line, "decision", "expected");
}

#define EXPECT(d, l, allowed, remaining, retry, reset) \
    expect_at((d), (l), (allowed), (remaining), (retry), (reset), __FILE__, \
              __LINE__)

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
    static const int unknown[] = {1, 7, -12, -13, -100, 1000, INT32_MIN};
    size_t n = sizeof(codes) / sizeof(codes[0]);

    CHECK_EQ_U64(n, 11);
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
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        CHECK(strcmp(sluice_strerror(unknown[i]), "unknown error") == 0);
        CHECK(strcmp(sluice_err_name(unknown[i]), "UNKNOWN") == 0);
    }
}

static void test_algo_names(void)
{
    static const char *const names[] = {"fixed", "sliding-counter",
                                        "sliding-log"};
    sluice_algo a;

    CHECK_EQ_U64(sluice_algo_count(), TEST_ALGO_N);
    for (int i = 0; i < TEST_ALGO_N; i++) {
        const char *name = sluice_algo_name((sluice_algo)i);

        CHECK(name != NULL && strcmp(name, names[i]) == 0);
        a = (sluice_algo)99;
        CHECK_OK(sluice_algo_parse(&a, names[i]));
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
    static const struct {
        const char *text;
        uint64_t ms;
    } good[] = {
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
    static const struct {
        const char *text;
        int err;
    } bad[] = {
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
        {"1d", SLUICE_EINVAL},
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

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        test_context("duration \"%s\"", good[i].text);
        ms = 0;
        CHECK_OK(sluice_duration_parse(&ms, good[i].text));
        CHECK_EQ_U64(ms, good[i].ms);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        test_context("duration \"%s\"", bad[i].text);
        CHECK_FAILS(sluice_duration_parse(&ms, bad[i].text), bad[i].err);
    }
    test_context(NULL);
    CHECK_FAILS(sluice_duration_parse(NULL, "1s"), SLUICE_EINVAL);
    CHECK_FAILS(sluice_duration_parse(&ms, NULL), SLUICE_EINVAL);
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

static void test_argument_errors(void)
{
    fixture fx;
    sluice_decision d;
    sluice_limit l = {0};
    char big[16] = "k";
    const char *msg;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit ok = limit_of((sluice_algo)a, 10, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        /* Missing arguments. */
        CHECK_FAILS(sluice_hit(NULL, fx.store, &ok, "k", 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_hit(&d, NULL, &ok, "k", 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_hit(&d, fx.store, NULL, "k", 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_hit(&d, fx.store, &ok, NULL, 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_peek(NULL, fx.store, &ok, "k", 1, 1),
                    SLUICE_EINVAL);
        CHECK_FAILS(sluice_peek(&d, NULL, &ok, "k", 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_peek(&d, fx.store, NULL, "k", 1, 1),
                    SLUICE_EINVAL);
        CHECK_FAILS(sluice_peek(&d, fx.store, &ok, NULL, 1, 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_reset(NULL, &ok, "k", 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_reset(fx.store, NULL, "k", 1), SLUICE_EINVAL);
        CHECK_FAILS(sluice_reset(fx.store, &ok, NULL, 1), SLUICE_EINVAL);
        if ((uint64_t)SIZE_MAX > UINT32_MAX) {
            /* Refused on its length alone: the bytes are never read. */
            size_t huge = (size_t)UINT32_MAX + 1;

            CHECK_FAILS(sluice_hit(&d, fx.store, &ok, big, huge, 1),
                        SLUICE_ERANGE);
            CHECK_FAILS(sluice_reset(fx.store, &ok, big, huge),
                        SLUICE_ERANGE);
        }

        /* max and window. */
        l = ok;
        l.max = 0;
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        CHECK_FAILS(sluice_peek(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        CHECK_FAILS(sluice_reset(fx.store, &l, "k", 1), SLUICE_ERANGE);
        CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
        l.max = SLUICE_MAX_MAX + 1; /* 2^53 */
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        l.max = UINT64_MAX;
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        l = ok;
        l.window_ms = 0;
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
        l.window_ms = SLUICE_WINDOW_MAX_MS + 1;
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        l.window_ms = UINT64_MAX;
        CHECK_FAILS(sluice_peek(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
        l = ok;
        l.window_ms = SLUICE_WINDOW_MAX_MS;
        CHECK_OK(sluice_limit_check(&l));
        l = ok;
        l.max = SLUICE_MAX_MAX;
        l.window_ms = 1;
        CHECK_OK(sluice_limit_check(&l));

        /* cost: at least 1, at most max (else ECOST, not a refusal). */
        for (int consume = 0; consume <= 1; consume++) {
            int rc;

            error_marker();
            rc = consume ? sluice_hit(&d, fx.store, &ok, "k", 1, 0)
                         : sluice_peek(&d, fx.store, &ok, "k", 1, 0);
            CHECK(rc == SLUICE_ERANGE || rc == SLUICE_EINVAL);
            check_fresh_error_at(__FILE__, __LINE__, "cost 0");
        }
        CHECK_FAILS(sluice_hit(&d, fx.store, &ok, "k", 1, 11), SLUICE_ECOST);
        msg = sluice_last_error();
        CHECK(strstr(msg, "11") != NULL && strstr(msg, "10") != NULL);
        CHECK_FAILS(sluice_peek(&d, fx.store, &ok, "k", 1, 11), SLUICE_ECOST);
        CHECK_FAILS(sluice_hit(&d, fx.store, &ok, "k", 1, UINT64_MAX),
                    SLUICE_ECOST);
        l = limit_of((sluice_algo)a, 1, 1);
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 2), SLUICE_ECOST);
        /* A failed call fills 'out' with no admission. */
        memset(&d, 0xA5, sizeof(d));
        (void)sluice_hit(&d, fx.store, &ok, "k", 1, 11);
        CHECK(d.allowed == 0);
        /* None of that counted: the key is untouched. */
        EXPECT(PEEK(&fx, &ok, "k", 10), &ok, 1, 0, 0,
               a == SLUICE_SLIDING_COUNTER ? 2000 : 1000);
    }
    test_context(NULL);

    /* An unknown algorithm. */
    l = limit_of((sluice_algo)TEST_ALGO_N, 10, 1000);
    CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_reset(fx.store, &l, "k", 1), SLUICE_EINVAL);
    l.algo = (sluice_algo)-1;
    CHECK_FAILS(sluice_peek(&d, fx.store, &l, "k", 1, 1), SLUICE_EINVAL);
    CHECK_FAILS(sluice_limit_check(NULL), SLUICE_EINVAL);

    /* A burst: none of these algorithms has one, so only 0 is taken. */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        l = limit_of((sluice_algo)a, 10, 1000);
        CHECK_OK(sluice_limit_check(&l));
        l.burst = 10;
        CHECK_FAILS(sluice_limit_check(&l), SLUICE_EINVAL);
        CHECK(strstr(sluice_last_error(), "burst") != NULL);
        CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_EINVAL);
        CHECK(SLUICE_LIMIT((sluice_algo)a, 10, 1000).burst == 0);
    }

    /* The sliding counter's product bound: max x window <= 2^53. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 1u << 13, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l)); /* exactly 2^53 */
    l.max = (1u << 13) + 1;
    CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_limit_check(&l), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, SLUICE_MAX_MAX, 2);
    CHECK_FAILS(sluice_hit(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, SLUICE_MAX_MAX,
                 SLUICE_WINDOW_MAX_MS); /* the product overflows 64 bits */
    CHECK_FAILS(sluice_peek(&d, fx.store, &l, "k", 1, 1), SLUICE_ERANGE);
    l = limit_of(SLUICE_SLIDING_COUNTER, 3, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l));
    /* The bound is the counter's alone. */
    l = limit_of(SLUICE_FIXED, SLUICE_MAX_MAX, SLUICE_WINDOW_MAX_MS);
    CHECK_OK(sluice_limit_check(&l));
    l.algo = SLUICE_SLIDING_LOG;
    CHECK_OK(sluice_limit_check(&l));

    /* A clock past 2^53 ms is refused, not wrapped. */
    l = limit_of(SLUICE_FIXED, 10, 1000);
    at(&fx, SLUICE_NOW_MAX_MS);
    CHECK_OK(sluice_hit(&d, fx.store, &l, "late", 4, 1));
    at(&fx, SLUICE_NOW_MAX_MS + 1);
    CHECK_FAILS(sluice_hit(&d, fx.store, &l, "late", 4, 1), SLUICE_ERANGE);
    CHECK_FAILS(sluice_hit(&d, fx.store, &l, "later", 5, 1), SLUICE_ERANGE);
    at(&fx, UINT64_MAX);
    CHECK_FAILS(sluice_peek(&d, fx.store, &l, "late", 4, 1), SLUICE_ERANGE);
    fx_close(&fx);
}

/* ---- Fixed window -------------------------------------------------------- */

static void test_fixed_window(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_FIXED, 3, 100);

    fx_open(&fx, 1000);
    /* The first admitted request, at t0 = 1000, arms the expiry at 1100. */
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 2, 0, 100);
    at(&fx, 1050);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 1, 0, 50);
    at(&fx, 1099); /* t0 + window - 1: still the same window */
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    EXPECT(PEEK(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 0, 0, 1, 1);
    at(&fx, 1100); /* t0 + window: gone, a fresh window */
    EXPECT(PEEK(&fx, &l, "f", 1), &l, 1, 2, 0, 100);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 1, 0, 0, 100);
    at(&fx, 1150);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 50, 50);
    at(&fx, 1199);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    at(&fx, 1200);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 1, 1, 0, 100);

    /* A refused hit changes nothing, and later hits never move the expiry. */
    at(&fx, 1250);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 0, 1, 50, 50);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 0, 1, 50, 50);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 0, 0, 50);
    at(&fx, 1299);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    at(&fx, 1300);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 2, 0, 100);

    /* A request long after the window is a fresh one. */
    at(&fx, 99999);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 1, 1, 0, 100);

    /* window 1 ms: every millisecond is its own window. */
    l = limit_of(SLUICE_FIXED, 2, 1);
    at(&fx, 5000);
    EXPECT(HIT(&fx, &l, "f1", 2), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 0, 0, 1, 1);
    at(&fx, 5001);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 1, 1, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 0, 0, 1, 1);

    /* max 1. */
    l = limit_of(SLUICE_FIXED, 1, 10);
    at(&fx, 7);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 10);
    at(&fx, 16);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 1, 1);
    at(&fx, 17);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 10);

    /* The clock's zero is an ordinary instant. */
    l = limit_of(SLUICE_FIXED, 2, 10);
    at(&fx, 0);
    EXPECT(HIT(&fx, &l, "zero", 2), &l, 1, 0, 0, 10);
    EXPECT(HIT(&fx, &l, "zero", 1), &l, 0, 0, 10, 10);
    at(&fx, 10);
    EXPECT(HIT(&fx, &l, "zero", 1), &l, 1, 1, 0, 10);
    fx_close(&fx);
}

/* ---- Sliding counter ----------------------------------------------------- */

static void test_counter_values(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_SLIDING_COUNTER, 10, 100);

    /* Windows are [1000, 1100), [1100, 1200), ...: aligned to the clock's
       zero, not to the first request. */
    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "c", 4), &l, 1, 6, 0, 200);
    at(&fx, 1050);
    EXPECT(HIT(&fx, &l, "c", 6), &l, 1, 0, 0, 150);
    /* Refused: in [1100, 1200) the estimate is 10 x (100 - e) / 100, and
       it + 1 <= 10 from e = 10 on, i.e. at 1110, 60 ms from now. */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 0, 0, 60, 150);
    at(&fx, 1099);
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 11, 101);
    at(&fx, 1100); /* estimate 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 10, 100);
    at(&fx, 1101); /* estimate 9.9: 9.9 + 1 > 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 9, 99);
    at(&fx, 1109); /* estimate 9.1: 9.1 + 1 > 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 1, 91);
    at(&fx, 1110); /* estimate 9: 9 + 1 <= 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 1, 0, 0, 190);
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 190);
    at(&fx, 1150); /* estimate 1 + 10 x 50 / 100 = 6 */
    EXPECT(PEEK(&fx, &l, "c", 5), &l, 0, 4, 10, 150);
    EXPECT(HIT(&fx, &l, "c", 4), &l, 1, 0, 0, 150);
    at(&fx, 1160); /* estimate 5 + 4 = 9: cost 2 fits at 1170 */
    EXPECT(PEEK(&fx, &l, "c", 2), &l, 0, 1, 10, 140);
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 140);
    at(&fx, 1170); /* estimate 6 + 3 = 9 */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 130);
    at(&fx, 1200); /* estimate 0 + 7 x 100 / 100 = 7 */
    EXPECT(PEEK(&fx, &l, "c", 4), &l, 0, 3, 15, 100); /* 7 r <= 600: r 85 */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 2, 0, 200);
    /* At 1201 the estimate is 1 + 7 x 99 / 100 = 7.93: cost 2 fits
       (9.93 <= 10) and leaves floor(0.07) = 0; cost 3 (10.93) does not,
       until 1 + 7 r / 100 + 3 <= 10, i.e. r <= 85, at e = 15. */
    at(&fx, 1201);
    EXPECT(PEEK(&fx, &l, "c", 2), &l, 1, 0, 0, 199);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 0, 2, 14, 199);
    at(&fx, 1214);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 0, 2, 1, 186);
    at(&fx, 1215);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 1, 0, 0, 185);
    /* Two windows later everything is forgotten. */
    at(&fx, 1400);
    EXPECT(PEEK(&fx, &l, "c", 10), &l, 1, 0, 0, 200);

    /* window 1 ms: the previous window counts in full for its 1 ms. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 3, 1);
    at(&fx, 5);
    EXPECT(HIT(&fx, &l, "c1", 3), &l, 1, 0, 0, 2);
    EXPECT(HIT(&fx, &l, "c1", 1), &l, 0, 0, 2, 2);
    at(&fx, 6);
    EXPECT(HIT(&fx, &l, "c1", 1), &l, 0, 0, 1, 1);
    at(&fx, 7);
    EXPECT(HIT(&fx, &l, "c1", 3), &l, 1, 0, 0, 2);

    /* max 1: the previous window's one request keeps the key busy until
       the very end of the current window. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 1, 10);
    at(&fx, 109);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 11);
    at(&fx, 110);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 10, 10);
    at(&fx, 119); /* estimate 1 x 1 / 10 = 0.1: 1.1 > 1 */
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 1, 1);
    at(&fx, 120);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 20);
    fx_close(&fx);
}

/* ---- Sliding log --------------------------------------------------------- */

static void test_log_values(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_SLIDING_LOG, 3, 100);

    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 2, 0, 100);
    at(&fx, 1040);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 1, 0, 100);
    at(&fx, 1080);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    at(&fx, 1090); /* the entry of 1000 leaves at 1100 */
    EXPECT(HIT(&fx, &l, "l", 1), &l, 0, 0, 10, 90);
    at(&fx, 1099);
    EXPECT(PEEK(&fx, &l, "l", 1), &l, 0, 0, 1, 81);
    at(&fx, 1100); /* live: 1040, 1080; cost 2 needs 1040 gone too */
    EXPECT(HIT(&fx, &l, "l", 2), &l, 0, 1, 40, 80);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    at(&fx, 1140); /* live: 1080, 1100 */
    EXPECT(PEEK(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    EXPECT(PEEK(&fx, &l, "l", 2), &l, 0, 1, 40, 60);
    EXPECT(PEEK(&fx, &l, "l", 3), &l, 0, 1, 60, 60);
    at(&fx, 1199);
    EXPECT(PEEK(&fx, &l, "l", 3), &l, 0, 2, 1, 1);
    at(&fx, 1200);
    EXPECT(HIT(&fx, &l, "l", 3), &l, 1, 0, 0, 100);

    /* Several entries at one instant leave together; cost counts units. */
    l = limit_of(SLUICE_SLIDING_LOG, 5, 10);
    at(&fx, 2000);
    EXPECT(HIT(&fx, &l, "u", 2), &l, 1, 3, 0, 10);
    EXPECT(HIT(&fx, &l, "u", 2), &l, 1, 1, 0, 10);
    at(&fx, 2003);
    EXPECT(HIT(&fx, &l, "u", 1), &l, 1, 0, 0, 10);
    EXPECT(HIT(&fx, &l, "u", 1), &l, 0, 0, 7, 10);
    EXPECT(HIT(&fx, &l, "u", 5), &l, 0, 0, 10, 10);
    at(&fx, 2010);
    EXPECT(HIT(&fx, &l, "u", 5), &l, 0, 4, 3, 3);
    EXPECT(HIT(&fx, &l, "u", 4), &l, 1, 0, 0, 10);

    /* window 1 ms and max 1. */
    l = limit_of(SLUICE_SLIDING_LOG, 1, 1);
    at(&fx, 3000);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 0, 0, 1, 1);
    at(&fx, 3001);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 1, 0, 0, 1);
    fx_close(&fx);
}

/* ---- The seam: the most a span one window long can admit ----------------- */

/*
 * The sliding counter's bound. A span [s, s + w) starting p ms into window
 * k - 1 (1 <= p <= w - 1) holds at most all of that window's count c <= max,
 * plus what window k admitted before elapsed p - 1; the last of those was
 * admitted only if its window's count c_k plus c x (w - e) / w stayed within
 * max, with e <= p - 1 <= w - 2. So
 *     total <= c + max - ceil(c x 2 / w) <= 2 max - ceil(2 max / w),
 * which is reached by max requests in the last ms of a window followed by a
 * greedy client. With w = 1 every span is one window: max. With w = 2 it
 * is max too.
 */
static uint64_t counter_span_bound(uint64_t max, uint64_t w)
{
    if (w == 1)
        return max;
    return 2 * max - (2 * max + w - 1) / w;
}

/* The fixed window's bound: a span of w ms meets at most two windows, and
   if it holds the first instant of the earlier one it misses the later one;
   so it holds at most max - 1 of the earlier one: 2 max - 1. */
static uint64_t span_bound(sluice_algo algo, uint64_t max, uint64_t w)
{
    switch (algo) {
    case SLUICE_FIXED:
        return 2 * max - 1;
    case SLUICE_SLIDING_COUNTER:
        return counter_span_bound(max, w);
    default:
        return max;
    }
}

/* The most units admitted in any span of 'w' ms, from units per ms. */
static uint64_t max_span(const uint64_t *per_ms, size_t n, uint64_t w)
{
    uint64_t sum = 0, best = 0;

    for (size_t i = 0; i < n; i++) {
        sum += per_ms[i];
        if (i >= w)
            sum -= per_ms[i - w];
        if (sum > best)
            best = sum;
    }
    return best;
}

/*
 * A random but dense client: window by window it picks a pattern (idle,
 * sparse, greedy, or only the window's last instants) and, where active,
 * asks until refused with random costs. Returns the most units admitted in
 * any span of one window, which must stay within the algorithm's bound.
 */
static uint64_t random_dense_trace(sluice_algo algo, uint64_t max, uint64_t w,
                                   unsigned id)
{
    fixture fx;
    sluice_limit l = limit_of(algo, max, w);
    size_t n = (size_t)(40 * w + 40);
    uint64_t *per_ms = calloc(n, sizeof(*per_ms));
    uint64_t start = 1000 * w + rng_below(3) * (w / 2); /* aligned, or not */
    unsigned pattern = 0;
    char key[32];
    uint64_t best;

    if (per_ms == NULL)
        exit(2);
    snprintf(key, sizeof(key), "dense-%u", id);
    fx_open(&fx, start);
    for (size_t i = 0; i < n; i++) {
        int active;

        if ((start + i) % w == 0 || i == 0)
            pattern = (unsigned)rng_below(5);
        switch (pattern) {
        case 0:
            active = 0;
            break;
        case 1:
            active = rng_pct(10);
            break;
        case 2:
            active = 1;
            break;
        case 3: /* the last 2 ms of each aligned window */
            active = (start + i) % w + 2 >= w;
            break;
        default:
            active = rng_pct(50);
            break;
        }
        if (!active)
            continue;
        at(&fx, start + i);
        for (int tries = 0; tries < 64; tries++) {
            uint64_t cost = rng_pct(70) ? 1 : 1 + rng_below(max);
            sluice_decision d = HITN(&fx, &l, key, strlen(key), cost);

            if (d.allowed)
                per_ms[i] += cost;
            else if (cost == 1)
                break;
        }
    }
    best = max_span(per_ms, n, w);
    free(per_ms);
    fx_close(&fx);
    return best;
}

static void test_seam(void)
{
    static const uint64_t maxes[] = {1, 2, 3, 5, 10, 17};
    static const uint64_t windows[] = {1, 2, 3, 5, 10, 40, 100};
    fixture fx;
    sluice_limit l = {0};
    uint64_t per_ms[300];
    unsigned id = 0;

    fx_open(&fx, 0);

    /* fixed: 2 x max in w + 1 ms, 2 x max - 1 in 2 ms. */
    l = limit_of(SLUICE_FIXED, 5, 1000);
    at(&fx, 10000);
    EXPECT(HIT(&fx, &l, "seam-a", 5), &l, 1, 0, 0, 1000);
    at(&fx, 11000);
    EXPECT(HIT(&fx, &l, "seam-a", 5), &l, 1, 0, 0, 1000);
    at(&fx, 20000);
    EXPECT(HIT(&fx, &l, "seam-b", 1), &l, 1, 4, 0, 1000);
    at(&fx, 20999);
    EXPECT(HIT(&fx, &l, "seam-b", 4), &l, 1, 0, 0, 1);
    at(&fx, 21000);
    EXPECT(HIT(&fx, &l, "seam-b", 5), &l, 1, 0, 0, 1000);

    /* sliding-log: max in the last ms of a window, then nothing for a
       whole window. */
    l = limit_of(SLUICE_SLIDING_LOG, 5, 1000);
    at(&fx, 30999);
    EXPECT(HIT(&fx, &l, "seam-l", 5), &l, 1, 0, 0, 1000);
    for (uint64_t t = 31000; t < 31999; t += 111) {
        at(&fx, t);
        EXPECT(HIT(&fx, &l, "seam-l", 1), &l, 0, 0, 31999 - t, 31999 - t);
    }
    at(&fx, 31998);
    EXPECT(HIT(&fx, &l, "seam-l", 1), &l, 0, 0, 1, 1);
    at(&fx, 31999);
    EXPECT(HIT(&fx, &l, "seam-l", 5), &l, 1, 0, 0, 1000);

    /* sliding-counter: the adversary reaches its bound exactly. max
       requests at the last ms of window k - 1, then a greedy client in
       window k; count the span [k w - 1, k w - 1 + w). */
    for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
        for (size_t j = 0; j < sizeof(windows) / sizeof(windows[0]); j++) {
            uint64_t max = maxes[i], w = windows[j];
            uint64_t k = 1000 / w + 3, total = 0;
            char key[32];

            if (w < 2)
                continue;
            l = limit_of(SLUICE_SLIDING_COUNTER, max, w);
            snprintf(key, sizeof(key), "adv-%u", id++);
            test_context("adversary: max %" PRIu64 " window %" PRIu64, max,
                         w);
            at(&fx, k * w - 1);
            CHECK(HITN(&fx, &l, key, strlen(key), max).allowed);
            total = max;
            for (uint64_t e = 0; e + 2 <= w; e++) {
                at(&fx, k * w + e);
                while (PEEKN(&fx, &l, key, strlen(key), 1).allowed &&
                       HITN(&fx, &l, key, strlen(key), 1).allowed)
                    total++;
            }
            CHECK_EQ_U64(total, counter_span_bound(max, w));
        }
    }
    test_context(NULL);
    fx_close(&fx);

    /* Dense random clients never pass the bound (and the log's and the
       counter's bounds are met by some). */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
            for (size_t j = 0; j < sizeof(windows) / sizeof(windows[0]);
                 j++) {
                uint64_t max = maxes[i], w = windows[j];
                uint64_t bound = span_bound((sluice_algo)a, max, w);
                uint64_t best = 0;

                test_context("dense trace: %s max %" PRIu64
                             " window %" PRIu64 " bound %" PRIu64,
                             sluice_algo_name((sluice_algo)a), max, w, bound);
                for (int rep = 0; rep < 3; rep++) {
                    uint64_t got = random_dense_trace((sluice_algo)a, max, w,
                                                      id++);

                    CHECK(got <= bound);
                    if (got > best)
                        best = got;
                }
                if (a == SLUICE_SLIDING_LOG)
                    CHECK_EQ_U64(best, max);
                else
                    CHECK(best >= max);
            }
        }
    }
    test_context(NULL);

    /* Fixed: a span of w ms reaches 2 max - 1. */
    memset(per_ms, 0, sizeof(per_ms));
    fx_open(&fx, 50000);
    l = limit_of(SLUICE_FIXED, 4, 100);
    CHECK(HIT(&fx, &l, "fx", 1).allowed);
    per_ms[0] += 1;
    at(&fx, 50099);
    CHECK(HIT(&fx, &l, "fx", 3).allowed);
    per_ms[99] += 3;
    at(&fx, 50100);
    CHECK(HIT(&fx, &l, "fx", 4).allowed);
    per_ms[100] += 4;
    CHECK_EQ_U64(max_span(per_ms, 300, 100), 7);
    fx_close(&fx);
}

/* ---- Peek, reset, independence ------------------------------------------- */

static void test_peek_does_not_consume(void)
{
    fixture fx;

    fx_open(&fx, 777);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 3, 100);
        sluice_decision first, p, h;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        first = PEEK(&fx, &l, "p", 1);
        CHECK(first.allowed);
        CHECK_EQ_U64(first.remaining, 2);
        for (int i = 0; i < 100; i++) {
            p = PEEK(&fx, &l, "p", 1 + (uint64_t)i % 3);
            CHECK(p.allowed);
        }
        CHECK_SAME(PEEK(&fx, &l, "p", 1), first);
        /* A hit answers what the peek before it said. */
        for (int i = 0; i < 4; i++) {
            p = PEEK(&fx, &l, "p", 1);
            h = HIT(&fx, &l, "p", 1);
            CHECK_SAME(p, h);
        }
        CHECK(!PEEK(&fx, &l, "p", 1).allowed);
        /* A peek at an unknown key keeps nothing. */
        CHECK_SAME(PEEK(&fx, &l, "never-hit", 2),
                   PEEK(&fx, &l, "never-hit", 2));
    }
    test_context(NULL);
    fx_close(&fx);
}

static void test_reset(void)
{
    fixture fx;
    sluice_store_stats st;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 2, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        CHECK(HIT(&fx, &l, "other", 2).allowed);
        CHECK(!HIT(&fx, &l, "r", 1).allowed);
        CHECK_OK(sluice_reset(fx.store, &l, "r", 1));
        EXPECT(PEEK(&fx, &l, "r", 2), &l, 1, 0, 0,
               a == SLUICE_SLIDING_COUNTER ? 2000 : 1000);
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        /* Only that key was forgotten. */
        CHECK(!HIT(&fx, &l, "other", 1).allowed);
        /* Forgetting an unknown key is fine, and so is doing it twice. */
        CHECK_OK(sluice_reset(fx.store, &l, "unknown", 7));
        CHECK_OK(sluice_reset(fx.store, &l, "r", 1));
        CHECK_OK(sluice_reset(fx.store, &l, "r", 1));
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        CHECK_OK(sluice_reset(fx.store, &l, "r", 1));
        CHECK_OK(sluice_reset(fx.store, &l, "other", 5));
    }
    test_context(NULL);
    /* Nothing is left. */
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK_EQ_U64(st.keys, 0);
    fx_close(&fx);
}

static void test_algorithms_independent(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit full = limit_of((sluice_algo)a, 5, 1000);

        test_context("filled %s", sluice_algo_name((sluice_algo)a));
        CHECK(HIT(&fx, &full, "shared", 5).allowed);
        CHECK(!PEEK(&fx, &full, "shared", 1).allowed);
        for (int b = a + 1; b < TEST_ALGO_N; b++) {
            sluice_limit other = limit_of((sluice_algo)b, 5, 1000);

            EXPECT(PEEK(&fx, &other, "shared", 5), &other, 1, 0, 0,
                   b == SLUICE_SLIDING_COUNTER ? 2000 : 1000);
        }
    }
    /* Resetting one algorithm's state leaves the others'. */
    {
        sluice_limit f = limit_of(SLUICE_FIXED, 5, 1000);
        sluice_limit c = limit_of(SLUICE_SLIDING_COUNTER, 5, 1000);
        sluice_limit g = limit_of(SLUICE_SLIDING_LOG, 5, 1000);

        CHECK_OK(sluice_reset(fx.store, &f, "shared", 6));
        CHECK(PEEK(&fx, &f, "shared", 5).allowed);
        CHECK(!PEEK(&fx, &c, "shared", 1).allowed);
        CHECK(!PEEK(&fx, &g, "shared", 1).allowed);
    }
    test_context(NULL);
    fx_close(&fx);
}

/* Different limits of one algorithm on one key share one budget. */
static void test_shared_budget(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit big = limit_of((sluice_algo)a, 10, 100);
        sluice_limit small = limit_of((sluice_algo)a, 5, 100);
        sluice_decision d;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        CHECK(HIT(&fx, &big, "budget", 5).allowed);
        d = PEEK(&fx, &small, "budget", 1);
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.limit, 5);
        CHECK_EQ_U64(d.remaining, 0);
        d = HIT(&fx, &big, "budget", 5);
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 0);
        CHECK(!HIT(&fx, &small, "budget", 1).allowed);
    }
    test_context(NULL);
    fx_close(&fx);
}

static void test_binary_keys(void)
{
    static const struct {
        const char *bytes;
        size_t len;
    } keys[] = {
        {"", 0},          {"\0", 1},        {"\0\0", 2},     {"a", 1},
        {"a\0", 2},       {"a\0b", 3},      {"a\0c", 3},     {"\0a", 2},
        {"ab", 2},        {"abcdefg", 7},   {"abcdefgh", 8}, {"abcdefgi", 8},
        {"abcdefgh\0", 9}, {"abcdefghi", 9}, {"\xff", 1},     {"\xff\xfe", 2},
    };
    size_t n = sizeof(keys) / sizeof(keys[0]);
    char *longkey;
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 1, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        /* Each key has a budget of its own: one admission each. */
        for (size_t i = 0; i < n; i++)
            CHECK(HITN(&fx, &l, keys[i].bytes, keys[i].len, 1).allowed);
        for (size_t i = 0; i < n; i++)
            CHECK(!HITN(&fx, &l, keys[i].bytes, keys[i].len, 1).allowed);
        /* The empty key may be given as NULL. */
        CHECK(!HITN(&fx, &l, NULL, 0, 1).allowed);
        CHECK_OK(sluice_reset(fx.store, &l, NULL, 0));
        CHECK(PEEKN(&fx, &l, "", 0, 1).allowed);
        CHECK(HITN(&fx, &l, NULL, 0, 1).allowed);
        /* Resetting "a\0b" leaves "a\0c" and "a". */
        CHECK_OK(sluice_reset(fx.store, &l, "a\0b", 3));
        CHECK(PEEKN(&fx, &l, "a\0b", 3, 1).allowed);
        CHECK(!PEEKN(&fx, &l, "a\0c", 3, 1).allowed);
        CHECK(!PEEKN(&fx, &l, "a", 1, 1).allowed);
    }

    /* Keys of every length up to 40 that differ only in their last byte,
       and a long one; the key is copied, so the caller's buffer may change. */
    longkey = malloc(100000);
    if (longkey == NULL)
        exit(2);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 1, 1000);

        test_context("algo %s, generated keys",
                     sluice_algo_name((sluice_algo)a));
        memset(longkey, 'k', 100000);
        for (size_t len = 1; len <= 40; len++) {
            longkey[len - 1] = 'x';
            CHECK(HITN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'y';
            CHECK(HITN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'k';
        }
        for (size_t len = 1; len <= 40; len++) {
            longkey[len - 1] = 'x';
            CHECK(!PEEKN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'k';
        }
        CHECK(HITN(&fx, &l, longkey, 100000, 1).allowed);
        longkey[99999] = 'z';
        CHECK(HITN(&fx, &l, longkey, 100000, 1).allowed);
        CHECK(!HITN(&fx, &l, longkey, 100000, 1).allowed);
        longkey[99999] = 'k';
        CHECK(!HITN(&fx, &l, longkey, 100000, 1).allowed);
    }
    test_context(NULL);
    free(longkey);
    fx_close(&fx);
}

/* ---- A clock that goes backwards ----------------------------------------- */

/*
 * The store clamps time per key: a key asked about at t answers every later
 * question as of t at least. Nothing crashes, nothing is admitted twice.
 */
static void test_clock_backwards(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 2, 100);
        uint64_t admitted = 0;
        uint64_t reset_1000 = a == SLUICE_SLIDING_COUNTER ? 200 : 100;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        at(&fx, 1000);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 1, 1, 0, reset_1000);
        /* At 900 (for the counter, an earlier window), answered as of 1000. */
        at(&fx, 900);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 1, 0, 0, reset_1000);
        at(&fx, 500);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 0, 0,
               a == SLUICE_SLIDING_COUNTER ? 150 : 100, reset_1000);
        at(&fx, 0);
        CHECK(!HIT(&fx, &l, "back", 1).allowed);
        at(&fx, 1050);
        CHECK(!PEEK(&fx, &l, "back", 1).allowed);
        {
            sluice_decision d1050 = PEEK(&fx, &l, "back", 1);

            at(&fx, 3);
            CHECK_SAME(PEEK(&fx, &l, "back", 1), d1050);
        }
        /* Flailing back and forth within the window admits nothing more. */
        for (uint64_t t = 1099; t > 900; t -= 7) {
            at(&fx, t);
            if (HIT(&fx, &l, "back", 1).allowed)
                admitted++;
        }
        CHECK_EQ_U64(admitted, 0);
        /* Later, the key is usable again. */
        at(&fx, 5000);
        CHECK(HIT(&fx, &l, "back", 2).allowed);
        /* A jump far ahead, then back: no crash, no second budget. */
        at(&fx, SLUICE_NOW_MAX_MS);
        CHECK(HIT(&fx, &l, "back", 2).allowed);
        at(&fx, 1);
        CHECK(!HIT(&fx, &l, "back", 1).allowed);
        CHECK_OK(sluice_reset(fx.store, &l, "back", 4));
    }
    test_context(NULL);
    fx_close(&fx);
}

/* ---- Documented bounds reached ------------------------------------------- */

static void test_large_values(void)
{
    fixture fx;
    const uint64_t W = SLUICE_WINDOW_MAX_MS, T = 1ULL << 52;
    sluice_limit l = {0};

    fx_open(&fx, T);
    for (int a = 0; a < TEST_ALGO_N; a += 2) { /* fixed, log */
        l = limit_of((sluice_algo)a, SLUICE_MAX_MAX, W);
        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        at(&fx, T);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX - 1), &l, 1, 1, 0, W);
        EXPECT(HIT(&fx, &l, "big", 2), &l, 0, 1, W, W);
        EXPECT(HIT(&fx, &l, "big", 1), &l, 1, 0, 0, W);
        EXPECT(HIT(&fx, &l, "big", 1), &l, 0, 0, W, W);
        at(&fx, T + W - 1);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX), &l, 0, 0, 1, 1);
        at(&fx, T + W);
        EXPECT(HIT(&fx, &l, "big", SLUICE_MAX_MAX), &l, 1, 0, 0, W);
        EXPECT(PEEK(&fx, &l, "fresh", SLUICE_MAX_MAX), &l, 1, 0, 0, W);
    }

    /* The counter at its product bound, max 2^13 and window 2^40. After a
       full window the next one admits 1 when 2^13 r / 2^40 + 1 <= 2^13,
       i.e. r <= 8191 x 2^27, 2^27 ms into it. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 1u << 13, W);
    test_context("algo sliding-counter");
    at(&fx, 5 * W);
    EXPECT(HIT(&fx, &l, "big", 1u << 13), &l, 1, 0, 0, 2 * W);
    EXPECT(HIT(&fx, &l, "big", 1), &l, 0, 0, W + (1ULL << 27), 2 * W);
    CHECK(HIT(&fx, &l, "big-a", 1u << 13).allowed);
    CHECK(HIT(&fx, &l, "big-b", 1u << 13).allowed);
    at(&fx, 6 * W + (1ULL << 27) - 1);
    EXPECT(PEEK(&fx, &l, "big-a", 1), &l, 0, 0, 1, W - (1ULL << 27) + 1);
    at(&fx, 6 * W + (1ULL << 27));
    EXPECT(PEEK(&fx, &l, "big-b", 1), &l, 1, 0, 0, 2 * W - (1ULL << 27));
    test_context(NULL);
    fx_close(&fx);
}

/* ---- Random scenarios: retry, reset and remaining are exact -------------- */

#define SCN_STEPS 16

/*
 * A scenario: a limit, a start time, and requests (gap since the previous
 * one, cost); the last request is the one whose decision is examined.
 */
typedef struct scenario {
    sluice_limit limit;
    uint64_t start_ms;
    int n; /* requests, the examined one included: 1 .. SCN_STEPS */
    uint64_t gap_ms[SCN_STEPS];
    uint64_t cost[SCN_STEPS];
} scenario;

static uint64_t pick(const uint64_t *v, size_t n)
{
    return v[rng_below(n)];
}

static uint64_t random_gap(uint64_t w)
{
    unsigned r = (unsigned)rng_below(100);

    if (r < 30)
        return 0;
    if (r < 45)
        return 1;
    if (r < 70)
        return rng_below(w);
    if (r < 85)
        return w - 1 + rng_below(3);
    if (r < 95)
        return rng_below(2 * w + 2);
    return 1 + rng_below(5 * w);
}

static uint64_t random_cost(uint64_t max)
{
    unsigned r = (unsigned)rng_below(100);

    if (r < 40)
        return 1;
    if (r < 55)
        return max;
    if (r < 65)
        return max / 2 + 1;
    return 1 + rng_below(max);
}

static void make_scenario(scenario *s, sluice_algo algo)
{
    static const uint64_t windows[] = {1, 2, 3, 7, 10, 16, 100, 1000, 60000,
                                       86400000, 1ULL << 30,
                                       SLUICE_WINDOW_MAX_MS};
    static const uint64_t maxes[] = {1, 2, 3, 5, 10, 100, 1000, 1ULL << 20,
                                     SLUICE_MAX_MAX};
    uint64_t w;

    do {
        s->limit = limit_of(algo, pick(maxes, 9), pick(windows, 12));
        if (rng_pct(30))
            s->limit.window_ms = 1 + rng_below(50);
        if (rng_pct(30))
            s->limit.max = 1 + rng_below(12);
    } while (sluice_limit_check(&s->limit) != SLUICE_OK);
    w = s->limit.window_ms;
    switch (rng_below(4)) {
    case 0:
        s->start_ms = rng_below(3);
        break;
    case 1:
        s->start_ms = rng_below(100000);
        break;
    case 2: /* at, or next to, an aligned window's start */
        s->start_ms = w * (1 + rng_below(1000)) + rng_below(3) - 1;
        break;
    default:
        s->start_ms = rng_below(1ULL << 50);
        break;
    }
    s->n = 1 + (int)rng_below(SCN_STEPS);
    for (int i = 0; i < s->n; i++) {
        s->gap_ms[i] = random_gap(w);
        s->cost[i] = random_cost(s->limit.max);
    }
}

static void scenario_context(const scenario *s, unsigned id)
{
    char steps[1024];
    size_t used = 0;

    steps[0] = '\0';
    for (int i = 0; i < s->n && used < sizeof(steps) - 64; i++)
        used += (size_t)snprintf(steps + used, sizeof(steps) - used,
                                 " +%" PRIu64 "/%" PRIu64, s->gap_ms[i],
                                 s->cost[i]);
    test_context("scenario %u (seed in the first line): %s max %" PRIu64
                 " window %" PRIu64 " start %" PRIu64 ", requests +gap/cost:%s",
                 id, sluice_algo_name(s->limit.algo), s->limit.max,
                 s->limit.window_ms, s->start_ms, steps);
}

/*
 * Replays every request of 's' as hits on 'key' and returns the time of the
 * last one; '*last' gets its decision.
 */
static uint64_t replay(fixture *fx, const scenario *s, const char *key,
                       sluice_decision *last)
{
    uint64_t t = s->start_ms;
    size_t len = strlen(key);

    for (int i = 0; i < s->n; i++) {
        t += s->gap_ms[i];
        at(fx, t);
        *last = HITN(fx, &s->limit, key, len, s->cost[i]);
    }
    return t;
}

/* After replaying 's' on 'key', is the budget whole at 'when'? */
static int whole_at(fixture *fx, const scenario *s, const char *key,
                    uint64_t when)
{
    sluice_decision d;

    replay(fx, s, key, &d);
    at(fx, when);
    d = PEEKN(fx, &s->limit, key, strlen(key), 1);
    return d.allowed && d.remaining == s->limit.max - 1;
}

/* After replaying 's' on 'key', would its last request be admitted at
   'when'? */
static int admitted_at(fixture *fx, const scenario *s, const char *key,
                       uint64_t when)
{
    sluice_decision d;

    replay(fx, s, key, &d);
    at(fx, when);
    return PEEKN(fx, &s->limit, key, strlen(key), s->cost[s->n - 1]).allowed;
}

/* How many examined requests were admitted and refused, to show coverage. */
static unsigned long scenarios_admitted, scenarios_refused;

static void run_scenario(fixture *fx, const scenario *s, unsigned id)
{
    uint64_t max = s->limit.max, cost = s->cost[s->n - 1];
    sluice_decision before, d, p;
    scenario history = *s;
    char key[64];
    uint64_t t;

    scenario_context(s, id);
    /* Up to the examined request, then a peek and the hit itself. */
    history.n = s->n - 1;
    snprintf(key, sizeof(key), "scn-%u-main", id);
    t = replay(fx, &history, key, &before) + s->gap_ms[s->n - 1];
    at(fx, t);
    p = PEEKN(fx, &s->limit, key, strlen(key), cost);
    d = HITN(fx, &s->limit, key, strlen(key), cost);
    CHECK_SAME(p, d);
    CHECK_EQ_U64(d.limit, max);

    /* 'remaining' is the largest cost that would be admitted now. */
    if (d.remaining >= 1)
        CHECK(PEEKN(fx, &s->limit, key, strlen(key), d.remaining).allowed);
    if (d.remaining < max)
        CHECK(!PEEKN(fx, &s->limit, key, strlen(key), d.remaining + 1)
                   .allowed);

    /* retry_after_ms: 0 if admitted; else admitted at t + retry and not
       at t + retry - 1. */
    if (d.allowed)
        scenarios_admitted++;
    else
        scenarios_refused++;
    if (d.allowed) {
        CHECK_EQ_U64(d.retry_after_ms, 0);
    } else if (CHECK(d.retry_after_ms >= 1)) {
        snprintf(key, sizeof(key), "scn-%u-retry-early", id);
        CHECK(!admitted_at(fx, s, key, t + d.retry_after_ms - 1));
        snprintf(key, sizeof(key), "scn-%u-retry", id);
        CHECK(admitted_at(fx, s, key, t + d.retry_after_ms));
    }

    /* reset_after_ms: whole at t + reset, not at t + reset - 1. */
    if (CHECK(d.reset_after_ms >= 1)) {
        snprintf(key, sizeof(key), "scn-%u-reset-early", id);
        CHECK(!whole_at(fx, s, key, t + d.reset_after_ms - 1));
        snprintf(key, sizeof(key), "scn-%u-reset", id);
        CHECK(whole_at(fx, s, key, t + d.reset_after_ms));
    }
}

static void test_random_scenarios(unsigned per_algo)
{
    unsigned id = 0;

    for (int a = 0; a < TEST_ALGO_N; a++) {
        fixture fx;

        fx_open(&fx, 0);
        for (unsigned i = 0; i < per_algo; i++) {
            scenario s;
            long failed_before = atomic_load(&test_failures);

            make_scenario(&s, (sluice_algo)a);
            run_scenario(&fx, &s, id++);
            if (atomic_load(&test_failures) > failed_before + 20)
                break; /* one broken scenario is enough to read */
        }
        fx_close(&fx);
    }
    test_context(NULL);
    printf("test_algo: %u random scenarios, %lu admitted and %lu refused "
           "at the examined request\n", id, scenarios_admitted,
           scenarios_refused);
}

/* ---- Main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, 20240601);

    rng_state = seed;
    printf("test_algo: seed %" PRIu64 " (rerun: test_algo %" PRIu64 ")\n",
           seed, seed);

    test_error_names();
    test_algo_names();
    test_duration_parse();
    test_free_null();
    test_store_open_errors();
    test_argument_errors();
    test_fixed_window();
    test_counter_values();
    test_log_values();
    test_seam();
    test_peek_does_not_consume();
    test_reset();
    test_algorithms_independent();
    test_shared_budget();
    test_binary_keys();
    test_clock_backwards();
    test_large_values();
    test_random_scenarios(10000);
    return test_summary("test_algo");
}
