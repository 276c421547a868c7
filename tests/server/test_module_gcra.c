/*
 * test_module_gcra.c - SLUICE.HIT gcra (sluice.so) against gcra.lua on a
 * real redis-server with the module loaded, on the caller's clock (NOW),
 * so both decide at the very same instant and their figures must be equal
 * to the unit.
 *
 * Two keys are put in the same state (absent; TAT behind and ahead of now,
 * with and without a remainder; a remainder written under a larger max;
 * TAT more than a window ahead; values that are not a TAT: too many
 * digits, a sign, a trailing colon, a list), at a clock of today and at one
 * near 2^53 ms where the script computes TAT in two parts, then random
 * traces with bursts and costs; the four figures must be equal, and so must
 * the key each leaves (value, and PTTL within the moment between calls).
 */
#include "module_fixture.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

#define MARGIN_MS 60

static void same(const mf_answer *m, const mf_answer *l, const char *mkey,
                 const char *lkey)
{
    mf_state ms, ls;

    CHECK(!m->error && !l->error);
    if (m->error || l->error)
        fprintf(stderr, "  module: %s / script: %s\n", m->message, l->message);
    CHECK(m->foreign == l->foreign);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_U64(m->fig[i], l->fig[i]);
    CHECK(mf_state_of(&server, mkey, &ms) == 0);
    CHECK(mf_state_of(&server, lkey, &ls) == 0);
    CHECK(mf_state_same(&ms, &ls, MARGIN_MS));
    if (!mf_state_same(&ms, &ls, MARGIN_MS))
        fprintf(stderr, "  module left %s '%s' pttl %lld, script %s '%s' "
                "pttl %lld\n", ms.type, ms.value, ms.pttl, ls.type, ls.value,
                ls.pttl);
}

static void both(const mf_request *rq)
{
    mf_answer m, l;

    CHECK(mf_module_hit(&server, "m:g", rq, &m) == 0);
    CHECK(mf_script_hit(&server, "l:g", rq, "tok", &l) == 0);
    same(&m, &l, "m:g", "l:g");
}

/* Puts 'value' ("" for no key, "<list>" for a list) in both keys. */
static void put(const char *value)
{
    rs_ok(&server, "DEL m:g l:g");
    if (value[0] == '\0')
        return;
    if (strcmp(value, "<list>") == 0) {
        rs_ok(&server, "RPUSH m:g x");
        rs_ok(&server, "RPUSH l:g x");
        return;
    }
    rs_ok(&server, "SET m:g %s PX 60000", value);
    rs_ok(&server, "SET l:g %s PX 60000", value);
}

static void test_states(long long now)
{
    char values[16][64];
    int n = 0;

    snprintf(values[n++], 64, "%s", "");
    snprintf(values[n++], 64, "%lld", now - 500);
    snprintf(values[n++], 64, "%lld", now);
    snprintf(values[n++], 64, "%lld:1", now);
    snprintf(values[n++], 64, "%lld", now + 300);
    snprintf(values[n++], 64, "%lld:2", now + 999);
    snprintf(values[n++], 64, "%lld:7", now + 200); /* rem >= max */
    snprintf(values[n++], 64, "%lld", now + 5000);  /* > a window ahead */
    snprintf(values[n++], 64, "%lld:1", now + 1000);
    snprintf(values[n++], 64, "%s", "12345678901234567"); /* 17 digits */
    snprintf(values[n++], 64, "%s", "-5");
    snprintf(values[n++], 64, "%lld:", now);
    snprintf(values[n++], 64, "%s", "abc");
    snprintf(values[n++], 64, "%s", "<list>");
    for (int i = 0; i < n; i++) {
        for (int op = 0; op < 4; op++) {
            mf_request rq = {.algo = SLUICE_GCRA, .max = 4, .window_ms = 1000,
                             .now_ms = now, .cost = 1 + (uint64_t)(op % 2),
                             .peek = op >= 2};

            test_context("now %lld, value '%s', op %d", now, values[i], op);
            put(values[i]);
            both(&rq);
            rq.peek = false;
            rq.burst = 2;
            rq.now_ms = now + 10;
            both(&rq);
        }
    }
    test_context(NULL);
}

/*
 * The keys expire on the server's own clock (PX), not the trace's: one
 * about to expire may be gone when the module reads its key and still
 * there a moment later when the script reads its own, or the other way
 * round, and the two then decide on different states. A key within
 * EXPIRE_SOON_MS of its end is taken as expired for both: both are
 * deleted, as that moment would have.
 */
#define EXPIRE_SOON_MS 20

static void expire_both_if_due(void)
{
    mf_state ms, ls;

    if (mf_state_of(&server, "m:g", &ms) == 0 &&
        mf_state_of(&server, "l:g", &ls) == 0 &&
        ((ms.pttl >= 0 && ms.pttl < EXPIRE_SOON_MS) ||
         (ls.pttl >= 0 && ls.pttl < EXPIRE_SOON_MS)))
        rs_ok(&server, "DEL m:g l:g");
}

static void test_traces(uint64_t seed, long long start)
{
    rng_state = seed;
    for (int trace = 0; trace < 20; trace++) {
        mf_request rq = {.algo = SLUICE_GCRA, .now_ms = start};

        rq.max = rng_range(1, 8);
        rq.window_ms = rng_range(1, 3000);
        rs_ok(&server, "DEL m:g l:g");
        for (int step = 0; step < 40; step++) {
            test_context("seed %" PRIu64 " start %lld trace %d step %d", seed,
                         start, trace, step);
            rq.burst = rng_pct(30) ? rng_range(1, rq.max) : 0;
            rq.cost = rng_range(1, rq.burst != 0 ? rq.burst : rq.max);
            rq.peek = rng_pct(20);
            rq.now_ms += (long long)rng_below(rq.window_ms / 2 + 2);
            expire_both_if_due();
            both(&rq);
        }
    }
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    if (mf_start(&server, NULL) < 0) {
        fprintf(stderr, "test_module_gcra: cannot start redis-server with "
                        "the module\n");
        return 1;
    }
    printf("test_module_gcra: server %s, seed %" PRIu64 "\n", server.url,
           seed);
    test_states(1733000000123LL);
    test_states(9007199254700000LL); /* TAT's ms pass 2^53 */
    test_traces(seed, 1733000000000LL);
    test_traces(seed + 1, 9007199254679992LL); /* up to 2^53 */
    rs_stop(&server);
    return test_summary("test_module_gcra");
}
