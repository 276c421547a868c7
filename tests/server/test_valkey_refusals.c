/*
 * test_valkey_refusals.c - the server store's local cache of refused keys.
 *
 * Once the server refuses a key with a wait, the same request (or a costlier
 * one) is refused in this process until the wait ends, without a round trip.
 * Checked against a real redis-server: the server sees no script call for a
 * locally refused hit (INFO commandstats), the local wait counts down and
 * ends exactly when the server's does (virtual caller's clock), a cheaper
 * request and a reset go to the server, the sliding counter is cached only
 * with refused_cache=all, and refused_cache=off turns it off.
 */
#include "algo/algo.h"  /* which algorithms are cached by default */
#include "algo/model.h" /* which run on the server's own clock */
#include "server.h"
#include "test.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

static uint64_t evalsha_calls(void)
{
    return (uint64_t)rs_calls(&server, "evalsha");
}

static sluice_store *open_store(sluice_vclock *clock, const char *options)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_store *st = NULL;
    char url[256];

    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000%s", server.url,
             options);
    CHECK_OK(sluice_store_open(&st, url, &opts));
    if (st == NULL)
        exit(1);
    return st;
}

static uint64_t local_refusals(sluice_store *st)
{
    sluice_store_stats stats;

    CHECK_OK(sluice_store_stats_get(&stats, st));
    return stats.local_refusals;
}

/* A refused key is refused here until its wait ends, then asked again. */
static void test_refused_locally(sluice_algo algo)
{
    const char *name = sluice_algo_name(algo);
    sluice_vclock *clock = NULL;
    sluice_limit lim = SLUICE_LIMIT(algo, 3, 1000);
    sluice_decision d, first;
    sluice_store *st;
    uint64_t calls, part;

    test_context("%s: refused locally", name);
    CHECK_OK(sluice_vclock_new(&clock, 1000000));
    st = open_store(clock, "&prefix=refusals1");
    CHECK_RESET(sluice_reset(st, &lim, "k", 1));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
        CHECK(d.allowed);
    }
    CHECK_OK(sluice_hit(&first, st, &lim, "k", 1, 1));
    CHECK(!first.allowed);
    /* The log's wait is on the virtual clock: exactly the window; gcra's,
       one unit's interval less the two it may owe: 1000 - 2 x 1000/3,
       333.3, so 334. The fixed window's is the key's PTTL on the server's
       own clock. */
    if (algo == SLUICE_GCRA)
        CHECK_EQ_U64(first.retry_after_ms, 334);
    else if (!sluice__models[algo]->server_clock)
        CHECK_EQ_U64(first.retry_after_ms, 1000);
    else
        CHECK(first.retry_after_ms > 900 && first.retry_after_ms <= 1000);
    calls = evalsha_calls();
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
        CHECK(!d.allowed);
    }
    CHECK_EQ_U64(evalsha_calls(), calls); /* the server saw none of them */
    CHECK_EQ_U64(local_refusals(st), 1000);
    /* The wait counts down. */
    part = first.retry_after_ms * 2 / 5;
    sluice_vclock_advance(clock, part);
    CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.retry_after_ms, first.retry_after_ms - part);
    CHECK_EQ_U64(evalsha_calls(), calls);
    /* One ms before the end: still refused here. At the end the server is
       asked again (and the log and gcra, on the virtual clock, admit). */
    sluice_vclock_advance(clock, first.retry_after_ms - part - 1);
    CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.retry_after_ms, 1);
    CHECK_EQ_U64(evalsha_calls(), calls);
    sluice_vclock_advance(clock, 1);
    CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
    if (algo == SLUICE_SLIDING_LOG || algo == SLUICE_GCRA)
        CHECK(d.allowed);
    CHECK_EQ_U64(evalsha_calls(), calls + 1);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* A cheaper request, and a reset, go to the server. */
static void test_cheaper_and_reset(void)
{
    sluice_vclock *clock = NULL;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 1000);
    sluice_decision d;
    sluice_store *st;
    uint64_t calls;

    test_context("a cheaper request and a reset");
    CHECK_OK(sluice_vclock_new(&clock, 2000000));
    st = open_store(clock, "&prefix=refusals2");
    CHECK_RESET(sluice_reset(st, &lim, "c", 1));
    CHECK_OK(sluice_hit(&d, st, &lim, "c", 1, 3));
    CHECK(d.allowed);
    CHECK_OK(sluice_hit(&d, st, &lim, "c", 1, 3)); /* 2 left: refused */
    CHECK(!d.allowed);
    calls = evalsha_calls();
    CHECK_OK(sluice_hit(&d, st, &lim, "c", 1, 2)); /* cheaper: asks */
    CHECK(d.allowed);
    CHECK_EQ_U64(evalsha_calls(), calls + 1);
    CHECK_OK(sluice_hit(&d, st, &lim, "c", 1, 3));
    CHECK(!d.allowed);
    calls = evalsha_calls();
    CHECK_RESET(sluice_reset(st, &lim, "c", 1));
    CHECK_OK(sluice_hit(&d, st, &lim, "c", 1, 3)); /* after a reset: asks */
    CHECK(d.allowed);
    CHECK_EQ_U64(evalsha_calls(), calls + 1);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* Which algorithms are cached under each setting. */
static void test_settings(void)
{
    static const struct {
        const char *options;
        sluice_algo algo;
        bool cached;
    } cases[] = {
        {"", SLUICE_FIXED, true},
        {"", SLUICE_SLIDING_LOG, true},
        {"", SLUICE_SLIDING_COUNTER, false},
        {"&refused_cache=all", SLUICE_SLIDING_COUNTER, true},
        {"&refused_cache=off", SLUICE_FIXED, false},
        {"&refused_cache=off", SLUICE_SLIDING_LOG, false},
        {"&refused_cache=default", SLUICE_SLIDING_COUNTER, false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_vclock *clock = NULL;
        sluice_limit lim = SLUICE_LIMIT(cases[i].algo, 1, 1000);
        sluice_decision d;
        sluice_store *st;
        char options[128];

        test_context("setting '%s' for %s", cases[i].options,
                     sluice_algo_name(cases[i].algo));
        snprintf(options, sizeof(options), "%s&prefix=refusals3-%zu",
                 cases[i].options, i);
        CHECK_OK(sluice_vclock_new(&clock, 3000000));
        st = open_store(clock, options);
        CHECK_RESET(sluice_reset(st, &lim, "s", 1));
        CHECK_OK(sluice_hit(&d, st, &lim, "s", 1, 1));
        CHECK(d.allowed);
        for (int j = 0; j < 10; j++) {
            CHECK_OK(sluice_hit(&d, st, &lim, "s", 1, 1));
            CHECK(!d.allowed);
        }
        CHECK_EQ_U64(local_refusals(st), cases[i].cached ? 9 : 0);
        sluice_store_free(st);
        sluice_vclock_free(clock);
    }
    test_context(NULL);
    {
        sluice_store *st = NULL;
        char url[256];

        snprintf(url, sizeof(url), "%s?refused_cache=sometimes", server.url);
        CHECK_RC(sluice_store_open(&st, url, NULL), SLUICE_EURL);
        CHECK(strstr(sluice_last_error(), "refused_cache") != NULL);
        CHECK(st == NULL);
    }
}

/*
 * A refusal stands for its limit only: gcra at 3 per minute with burst 1
 * refuses a second unit for 20 s, but with burst 3 the same unit fits
 * (20 s owed of 60), so the server is asked.
 */
static void test_other_burst(void)
{
    sluice_vclock *clock = NULL;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_GCRA, 3, 60000);
    sluice_decision d;
    sluice_store *st;
    uint64_t calls;

    test_context("gcra: a refusal under another burst");
    CHECK_OK(sluice_vclock_new(&clock, 3000000));
    st = open_store(clock, "&prefix=refusals3");
    CHECK_RESET(sluice_reset(st, &lim, "g", 1));
    lim.burst = 1;
    CHECK_OK(sluice_hit(&d, st, &lim, "g", 1, 1));
    CHECK(d.allowed);
    CHECK_OK(sluice_hit(&d, st, &lim, "g", 1, 1));
    CHECK(!d.allowed && d.retry_after_ms == 20000);
    calls = evalsha_calls();
    CHECK_OK(sluice_hit(&d, st, &lim, "g", 1, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(evalsha_calls(), calls); /* remembered */
    lim.burst = 3;
    CHECK_OK(sluice_hit(&d, st, &lim, "g", 1, 1));
    CHECK(d.allowed && d.remaining == 1);
    CHECK_EQ_U64(evalsha_calls(), calls + 1);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

int main(void)
{
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_refusals: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_refusals: server %s (pid %d)\n", server.url,
           (int)server.pid);
    /* Every algorithm whose refusals are cached by default (all but
       sliding-counter: fixed, sliding-log, gcra and compact-log). */
    for (int a = 0; a < TEST_ALGO_N; a++)
        if (sluice__algo_servers[a]->refused_cache_default)
            test_refused_locally((sluice_algo)a);
    test_other_burst();
    test_cheaper_and_reset();
    test_settings();
    rs_stop(&server);
    return test_summary("test_valkey_refusals");
}
