/*
 * test_http_headers.c - sluice_http_headers(): the RateLimit and
 * RateLimit-Policy fields (draft-ietf-httpapi-ratelimit-headers-11) and
 * Retry-After, checked as exact strings.
 *
 *   - an admission: r what is left, t the reset rounded up, no Retry-After;
 *   - a refusal: r what is left (0), t = Retry-After = the wait rounded up
 *     (1 ms is 1 s, 1000 ms is 1 s, 1001 ms is 2 s, 0 is 0);
 *   - a window under a second, or not whole, is w rounded up;
 *   - numbers past an SF Integer's 15 digits are clamped to 10^15 - 1 in
 *     the SF fields, and written in full in Retry-After;
 *   - a buffer one byte short is SLUICE_ERANGE and no buffer is written;
 *     the exact size works; a NULL buffer is skipped;
 *   - a name that is not an SF Token, a NULL argument or a bad limit is
 *     SLUICE_EINVAL (or the limit check's code), and nothing is written.
 */
#include "test.h"

#include <stdio.h>
#include <string.h>

#define CHECK_STR(got, want)                                            \
    do {                                                                \
        if (!CHECK(strcmp((got), (want)) == 0))                         \
            fprintf(stderr, "    got  '%s'\n    want '%s'\n", (got),   \
                    (want));                                            \
    } while (0)

static sluice_decision decision(int allowed, uint64_t max, uint64_t remaining,
                                uint64_t retry_ms, uint64_t reset_ms)
{
    sluice_decision d;

    memset(&d, 0, sizeof(d));
    d.allowed = allowed;
    d.limit = max;
    d.remaining = remaining;
    d.retry_after_ms = retry_ms;
    d.reset_after_ms = reset_ms;
    return d;
}

typedef struct out {
    char rl[256], pol[256], ra[64];
} out;

/* Fills every buffer with a marker first, so a field left unwritten shows. */
static int headers(out *o, const sluice_decision *d, const sluice_limit *l,
                   const char *name)
{
    strcpy(o->rl, "untouched");
    strcpy(o->pol, "untouched");
    strcpy(o->ra, "untouched");
    return sluice_http_headers(d, l, name, o->rl, sizeof(o->rl), o->pol,
                               sizeof(o->pol), o->ra, sizeof(o->ra));
}

static void test_admitted(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 100, 60000);
    sluice_decision d = decision(1, 100, 50, 0, 30000);
    out o;

    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=50;t=30");
    CHECK_STR(o.pol, "\"default\";q=100;w=60");
    CHECK_STR(o.ra, "");

    /* The reset rounded up: 29,001 ms is 30 s; 1 ms is 1 s; 0 is 0. */
    d.reset_after_ms = 29001;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=50;t=30");
    d.reset_after_ms = 1;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=50;t=1");
    d.reset_after_ms = 0;
    d.remaining = 100;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=100;t=0");

    /* The last unit: remaining 0, still admitted, no Retry-After. */
    d = decision(1, 5, 0, 0, 1000);
    l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    CHECK_OK(headers(&o, &d, &l, "per-ip"));
    CHECK_STR(o.rl, "\"per-ip\";r=0;t=1");
    CHECK_STR(o.pol, "\"per-ip\";q=5;w=1");
    CHECK_STR(o.ra, "");
}

static void test_refused(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    sluice_decision d = decision(0, 5, 0, 400, 400);
    out o;

    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=0;t=1");
    CHECK_STR(o.pol, "\"default\";q=5;w=1");
    CHECK_STR(o.ra, "1");

    /* t is the wait, not the reset, for a refusal. */
    d = decision(0, 10, 3, 1, 59000);
    l = SLUICE_LIMIT(SLUICE_GCRA, 10, 60000);
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=3;t=1");
    CHECK_STR(o.ra, "1");
    d.retry_after_ms = 1000;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=3;t=1");
    CHECK_STR(o.ra, "1");
    d.retry_after_ms = 1001;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=3;t=2");
    CHECK_STR(o.ra, "2");
    /* A refusal with no wait (a fail-closed policy with closed_wait 0). */
    d.retry_after_ms = 0;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=3;t=0");
    CHECK_STR(o.ra, "0");
}

static void test_windows(void)
{
    sluice_decision d = decision(1, 5, 4, 0, 250);
    sluice_limit l = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 250);
    out o;

    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.pol, "\"default\";q=5;w=1");
    l.window_ms = 1500;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.pol, "\"default\";q=5;w=2");
    l.window_ms = 86400000;
    CHECK_OK(headers(&o, &d, &l, "daily"));
    CHECK_STR(o.pol, "\"daily\";q=5;w=86400");
}

static void test_huge(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, SLUICE_MAX_MAX,
                                  SLUICE_WINDOW_MAX_MS);
    sluice_decision d = decision(1, SLUICE_MAX_MAX, SLUICE_MAX_MAX - 1, 0,
                                 UINT64_MAX);
    out o;

    /* 2^53 - 1 has 16 digits: clamped. 2^40 ms is 1,099,511,628 s. */
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.pol, "\"default\";q=999999999999999;w=1099511628");
    CHECK_STR(o.rl, "\"default\";r=999999999999999;t=999999999999999");
    CHECK_STR(o.ra, "");

    d = decision(0, SLUICE_MAX_MAX, 0, UINT64_MAX, UINT64_MAX);
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=0;t=999999999999999");
    /* ceil((2^64 - 1) / 1000), whole: Retry-After is no SF Integer. */
    CHECK_STR(o.ra, "18446744073709552");
    /* Just under the clamp, and at it. */
    d = decision(0, 5, 0, 999999999999999ULL * 1000, 0);
    l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=0;t=999999999999999");
    CHECK_STR(o.ra, "999999999999999");
    d.retry_after_ms = 999999999999999ULL * 1000 + 1;
    CHECK_OK(headers(&o, &d, &l, "default"));
    CHECK_STR(o.rl, "\"default\";r=0;t=999999999999999");
    CHECK_STR(o.ra, "1000000000000000");
}

/* The documented bounds: 64 bytes for Retry-After, 128 plus the name for
   the others, hold the longest values. */
static void test_documented_caps(void)
{
    const char *name = "a-rather-long-policy-name";
    size_t cap = 128 + strlen(name);
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, SLUICE_MAX_MAX,
                                  SLUICE_WINDOW_MAX_MS);
    sluice_decision d = decision(0, SLUICE_MAX_MAX, SLUICE_MAX_MAX,
                                 UINT64_MAX, UINT64_MAX);
    char rl[256], pol[256], ra[64];

    CHECK_OK(sluice_http_headers(&d, &l, name, rl, cap, pol, cap, ra,
                                 sizeof(ra)));
    CHECK(strlen(rl) < cap && strlen(pol) < cap && strlen(ra) < sizeof(ra));
}

/* One byte short of each field in turn: SLUICE_ERANGE and nothing written;
   the exact size is enough. */
static void test_small_buffers(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    sluice_decision d = decision(0, 5, 0, 1500, 1500);
    const char *want_rl = "\"default\";r=0;t=2";
    const char *want_pol = "\"default\";q=5;w=1";
    char rl[64], pol[64], ra[64];
    size_t rl_cap = strlen(want_rl) + 1, pol_cap = strlen(want_pol) + 1;

    for (int which = 0; which < 3; which++) {
        size_t caps[3] = {rl_cap, pol_cap, 2};

        test_context("field %d one byte short", which);
        caps[which]--;
        strcpy(rl, "x");
        strcpy(pol, "x");
        strcpy(ra, "x");
        CHECK_RC(sluice_http_headers(&d, &l, "default", rl, caps[0], pol,
                                     caps[1], ra, caps[2]),
                 SLUICE_ERANGE);
        CHECK_STR(rl, "x");
        CHECK_STR(pol, "x");
        CHECK_STR(ra, "x");
        CHECK(strstr(sluice_last_error(), "needs a buffer") != NULL);
    }
    test_context(NULL);
    CHECK_OK(sluice_http_headers(&d, &l, "default", rl, rl_cap, pol, pol_cap,
                                 ra, 2));
    CHECK_STR(rl, want_rl);
    CHECK_STR(pol, want_pol);
    CHECK_STR(ra, "2");
    /* A zero capacity with a buffer is too small, even for "". */
    d.allowed = 1;
    CHECK_RC(sluice_http_headers(&d, &l, "default", NULL, 0, NULL, 0, ra, 0),
             SLUICE_ERANGE);
    CHECK_OK(sluice_http_headers(&d, &l, "default", NULL, 0, NULL, 0, ra, 1));
    CHECK_STR(ra, "");
}

static void test_null_buffers(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    sluice_decision d = decision(1, 5, 2, 0, 700);
    char pol[64];

    /* Only the policy asked for: the others skipped, their caps unread. */
    CHECK_OK(sluice_http_headers(&d, &l, "default", NULL, 0, pol, sizeof(pol),
                                 NULL, 0));
    CHECK_STR(pol, "\"default\";q=5;w=1");
    CHECK_OK(sluice_http_headers(&d, &l, "default", NULL, 0, NULL, 0, NULL, 0));
}

static void test_bad_names(void)
{
    static const char *const bad[] = {
        "", "1abc", "-x", "two words", "quo\"te", "back\\slash", "semi;colon",
        "com,ma", "eq=ual", "tab\tx", "caf\xc3\xa9", "(paren)", "\x7f",
    };
    static const char *const good[] = {
        "a", "*", "default", "per-ip", "a:b/c", "X_1.2~|`^'&%$#!+*",
    };
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    sluice_decision d = decision(1, 5, 4, 0, 1000);
    out o;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        test_context("bad name '%s'", bad[i]);
        CHECK_RC(headers(&o, &d, &l, bad[i]), SLUICE_EINVAL);
        CHECK_STR(o.rl, "untouched");
        CHECK_STR(o.pol, "untouched");
        CHECK_STR(o.ra, "untouched");
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char want[128];

        test_context("good name '%s'", good[i]);
        CHECK_OK(headers(&o, &d, &l, good[i]));
        snprintf(want, sizeof(want), "\"%s\";q=5;w=1", good[i]);
        CHECK_STR(o.pol, want);
    }
    test_context(NULL);
}

static void test_bad_arguments(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    sluice_decision d = decision(1, 5, 4, 0, 1000);
    out o;

    CHECK_RC(headers(&o, NULL, &l, "default"), SLUICE_EINVAL);
    CHECK_RC(headers(&o, &d, NULL, "default"), SLUICE_EINVAL);
    CHECK_RC(headers(&o, &d, &l, NULL), SLUICE_EINVAL);
    /* A window of 0 would be w=0, which the draft forbids. */
    l.window_ms = 0;
    CHECK(headers(&o, &d, &l, "default") != SLUICE_OK);
    CHECK_STR(o.pol, "untouched");
    l = SLUICE_LIMIT(SLUICE_FIXED, 5, 1000);
    l.reserved[0] = 1;
    CHECK_RC(headers(&o, &d, &l, "default"), SLUICE_EINVAL);
    CHECK_STR(o.rl, "untouched");
}

int main(void)
{
    test_admitted();
    test_refused();
    test_windows();
    test_huge();
    test_documented_caps();
    test_small_buffers();
    test_null_buffers();
    test_bad_names();
    test_bad_arguments();
    return test_summary("test_http_headers");
}
