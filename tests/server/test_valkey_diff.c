/*
 * test_valkey_diff.c - the Valkey store against the embedded store, and the
 * fixed window on the server's own clock.
 *
 * Differential part. Sliding-counter and sliding-log are pure functions of
 * (state, now, request), written twice: in C (src/algo_*.c, run by the
 * embedded store) and in Lua (src/lua/, run by a real redis-server). Both
 * stores are opened on one virtual clock (the Valkey store with
 * ?clock=caller), and a seeded random trace of hits, peeks and resets over
 * about thirty keys goes to both; every decision must be identical in every
 * field. The traces cover gaps of 0, of exactly a window and of many windows,
 * costs from 1 to max, limits such as max 1 and window 1, keys switched
 * between limits, and values near the documented bounds (max 2^53 - 1 for
 * the log, max x window = 2^53 for the counter, clocks near 2^53), which is
 * where Lua's doubles would first lose an integer.
 *
 * The server expires keys on its own real clock (PEXPIRE), while the trace
 * runs on virtual time, so after each admitted hit the test reads the key's
 * PTTL (it must be the state's remaining life: reset_after_ms, less the real
 * time the call took) and then removes it with PERSIST, so that only the
 * script's own arithmetic decides. If a key with a tiny window expired in
 * real time before the test could look, both stores forget that key and the
 * trace goes on (counted as a resync; it is not a library fault).
 *
 * Fixed-window part. The fixed window's clock is the server's expiry clock,
 * whatever clock the store was given, so it is checked on the server with
 * short real windows (the only sleeps in this file): the first hit arms
 * PTTL = window, later hits never move it, a refusal's retry_after_ms is the
 * PTTL, after expiry a fresh window starts, 2 x max - 1 are admitted across
 * the seam in a short span, a counter left without a TTL gets one, and a key
 * holding something that is not a counter answers SLUICE_EPROTO.
 *
 * Usage: test_valkey_diff [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "store/store.h" /* sluice__key_build */
#include "test.h"
#include "rng.h"
#include "server.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* ---- Decisions ----------------------------------------------------------- */

static int decision_equal(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms &&
           a->fallback == b->fallback;
}

static void decision_print(const char *who, int rc, const sluice_decision *d)
{
    fprintf(stderr,
            "      %-8s rc=%d (%s) allowed=%d limit=%" PRIu64
            " remaining=%" PRIu64 " retry_after_ms=%" PRIu64
            " reset_after_ms=%" PRIu64 " fallback=%d\n",
            who, rc, sluice_err_name(rc), d->allowed, d->limit, d->remaining,
            d->retry_after_ms, d->reset_after_ms, d->fallback);
}

/* ---- The differential run ------------------------------------------------ */

typedef struct limit_cfg {
    uint64_t max;
    uint64_t window_ms;
} limit_cfg;

/*
 * How costs are drawn. SMALL: mostly 1, sometimes up to max. HUGE_REFUSED:
 * small costs, and costs of about max that are expected to be refused (an
 * admitted cost of that size would make the log hold billions of members, so
 * such a cost is replaced by 1 when the embedded store says it would pass).
 */
enum { COSTS_SMALL, COSTS_ANY, COSTS_HUGE_REFUSED };

typedef struct diff_run {
    const char *label;
    sluice_algo algo;
    const limit_cfg *cfgs;
    int ncfg;
    int nkeys;
    int nsteps;
    uint64_t start_ms;
    int costs;
} diff_run;

typedef struct diff_totals {
    long steps, hits, peeks, resets, admitted, refused, resyncs, errors;
} diff_totals;

#define MAX_MISMATCHES_PRINTED 10

/* The largest cost the log may admit without an enormous ZADD. */
#define LOG_ADMIT_COST_CAP 2000u

/*
 * The follow-up after an admitted hit: the key's PTTL, then PERSIST, in one
 * atomic round trip so nothing runs in between.
 */
static const char persist_script[] =
    "local t = redis.call('PTTL', KEYS[1]) "
    "if t >= 0 then redis.call('PERSIST', KEYS[1]) end "
    "return t";

static uint64_t gap_for(uint64_t w)
{
    unsigned p = (unsigned)(rng_next() % 100);

    if (p < 35)
        return 0;
    if (p < 60)
        return rng_range(1, 3);
    if (p < 80)
        return rng_range(1, w / 4 > 1 ? w / 4 : 1);
    if (p < 90)
        return rng_range(w / 2, w + 1);
    if (p < 95)
        return w; /* exactly a window */
    if (p < 99)
        return rng_range(w, 3 * w);
    return rng_range(10 * w, 40 * w); /* long idle */
}

static uint64_t cost_for(int mode, uint64_t max)
{
    unsigned p = (unsigned)(rng_next() % 100);

    switch (mode) {
    case COSTS_SMALL:
        if (p < 70 || max == 1)
            return 1;
        if (p < 92)
            return rng_range(1, max / 4 > 1 ? max / 4 : 1);
        return rng_range(1, max);
    case COSTS_ANY:
        if (p < 30)
            return rng_range(1, 3 < max ? 3 : max);
        if (p < 60)
            return rng_range(1, max);
        if (p < 80)
            return max - rng_range(0, max / 1000); /* near max */
        return max / rng_range(2, 64) + 1;
    default: /* COSTS_HUGE_REFUSED */
        if (p < 85)
            return rng_range(1, 5);
        return max - rng_range(0, 8);
    }
}

static void do_diff_run(const diff_run *run, uint64_t seed, diff_totals *tot)
{
    sluice_vclock *clock = NULL;
    sluice_store *mem = NULL, *vk = NULL;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    char url[160];
    int mismatches = 0;
    uint64_t now;

    rng_state = seed;
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK_OK(sluice_vclock_new(&clock, run->start_ms));
    if (clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000&refused_cache=off",
             server.url);
    CHECK_OK(sluice_store_open(&mem, "mem://", &opts));
    CHECK_OK(sluice_store_open(&vk, url, &opts));
    if (mem == NULL || vk == NULL)
        exit(2);
    now = run->start_ms;

    for (int step = 0; step < run->nsteps; step++) {
        int k = (int)(rng_next() % (uint64_t)run->nkeys);
        const limit_cfg *cfg = &run->cfgs[k % run->ncfg];
        sluice_limit limit = {0};
        sluice_decision dm, dv;
        char key[32];
        size_t klen;
        uint64_t cost, gap, t0_us, t1_us;
        unsigned op = (unsigned)(rng_next() % 100);
        int rm, rv;
        const char *opname;

        if (rng_pct(3)) {
            /* The same key asked under another limit. For the log, only
               one with the same window: the embedded store may drop a log
               whose newest entry is older than the window last asked with,
               and the server drops it when its TTL (the window of the last
               admitted hit) runs out, and this test removes TTLs. */
            const limit_cfg *other =
                &run->cfgs[rng_next() % (uint64_t)run->ncfg];

            if (run->algo != SLUICE_SLIDING_LOG ||
                other->window_ms == cfg->window_ms)
                cfg = other;
        }
        limit.algo = run->algo;
        limit.max = cfg->max;
        limit.window_ms = cfg->window_ms;
        klen = (size_t)snprintf(key, sizeof(key), "user:%d", k);

        gap = gap_for(cfg->window_ms);
        if (now + gap > SLUICE_NOW_MAX_MS)
            gap = 0;
        now += gap;
        sluice_vclock_set(clock, now);

        cost = cost_for(run->costs, limit.max);
        if (rng_pct(1)) /* an invalid request: both refuse it alike */
            cost = rng_pct(50) || limit.max == SLUICE_MAX_MAX ? 0
                                                              : limit.max + 1;
        if (run->algo == SLUICE_SLIDING_LOG && cost > LOG_ADMIT_COST_CAP &&
            cost <= limit.max) {
            sluice_decision probe;

            if (sluice_peek(&probe, mem, &limit, key, klen, cost) ==
                    SLUICE_OK &&
                probe.allowed)
                cost = 1;
        }

        tot->steps++;
        if (op < 1) {
            opname = "reset";
            tot->resets++;
            rm = sluice_reset(mem, &limit, key, klen);
            rv = sluice_reset(vk, &limit, key, klen);
            memset(&dm, 0, sizeof(dm));
            memset(&dv, 0, sizeof(dv));
        } else if (op < 31) {
            opname = "peek";
            tot->peeks++;
            rm = sluice_peek(&dm, mem, &limit, key, klen, cost);
            rv = sluice_peek(&dv, vk, &limit, key, klen, cost);
        } else {
            opname = "hit";
            tot->hits++;
            rm = sluice_hit(&dm, mem, &limit, key, klen, cost);
            t0_us = rs_mono_us();
            rv = sluice_hit(&dv, vk, &limit, key, klen, cost);
            if (rv == SLUICE_OK && dv.allowed) {
                /* Check the key's life, then take it away (see the top). */
                char kbuf[128];
                size_t kl;
                char *kn = sluice__key_build(kbuf, sizeof(kbuf), &kl, "sluice",
                                             key, klen,
                                             sluice_algo_name(run->algo));
                const char *argv[] = {"EVAL", persist_script, "1", kn};
                size_t lens[] = {4, strlen(persist_script), 1, kl};
                redisReply *r = rs_cmdargv(&server, 4, argv, lens);
                uint64_t took_ms;

                t1_us = rs_mono_us();
                took_ms = (t1_us - t0_us) / 1000 + 1;
                if (!CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER)) {
                    if (r != NULL)
                        freeReplyObject(r);
                    break;
                }
                if (r->integer == -2) {
                    /* Expired in real time before we looked: only possible
                       when its whole life was shorter than the call. */
                    CHECK(dv.reset_after_ms <= took_ms);
                    tot->resyncs++;
                    sluice_reset(mem, &limit, key, klen);
                    sluice_reset(vk, &limit, key, klen);
                } else if (!CHECK(r->integer >= 0 &&
                                  (uint64_t)r->integer <= dv.reset_after_ms &&
                                  dv.reset_after_ms - (uint64_t)r->integer <=
                                      took_ms)) {
                    fprintf(stderr,
                            "    %s step %d key %s: PTTL %lld after an admit "
                            "with reset_after_ms %" PRIu64 " (call took "
                            "<= %" PRIu64 " ms)\n",
                            run->label, step, key, r->integer,
                            dv.reset_after_ms, took_ms);
                }
                freeReplyObject(r);
            }
        }
        if (rv == SLUICE_OK && op >= 1)
            (dv.allowed ? tot->admitted++ : tot->refused++);
        if (rv != SLUICE_OK)
            tot->errors++;

        if (rm != rv || (rm == SLUICE_OK && !decision_equal(&dm, &dv))) {
            CHECK(!"the embedded and the Valkey store disagree");
            if (mismatches++ < MAX_MISMATCHES_PRINTED) {
                fprintf(stderr,
                        "    %s seed %" PRIu64 " step %d: t=%" PRIu64
                        " %s key=%s cost=%" PRIu64 " limit=%s/%" PRIu64
                        "/%" PRIu64 "ms\n",
                        run->label, seed, step, now, opname, key, cost,
                        sluice_algo_name(limit.algo), limit.max,
                        limit.window_ms);
                decision_print("embedded", rm, &dm);
                decision_print("valkey", rv, &dv);
                if (rv < 0)
                    fprintf(stderr, "      valkey error: %s\n",
                            sluice_last_error());
            }
        }
    }
    if (mismatches > 0)
        fprintf(stderr, "    %s: %d mismatches\n", run->label, mismatches);
    sluice_store_free(vk);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
}

static void test_differential(uint64_t seed)
{
    /* Several limits side by side, keys spread over them. */
    static const limit_cfg mixed[] = {
        {1, 1},     {1, 1000}, {5, 1},    {10, 1000}, {3, 7},
        {100, 60000}, {50, 250}, {1000, 10}, {2, 3},   {7, 100},
    };
    /* Near the bounds: the log's largest max; the counter's max x window
       at (or just under) 2^53. */
    static const limit_cfg log_big[] = {
        {9007199254740991ULL, 1000},
        {9007199254740991ULL, 1},
        {9007199254740991ULL, 1099511627776ULL},
        {9007199254740990ULL, 60000},
        {9007199254740000ULL, 1099511627776ULL},
        {9007199254740991ULL, 60000},
    };
    static const limit_cfg counter_big[] = {
        {8589934592ULL, 1048576},            /* 2^33 x 2^20 = 2^53 */
        {9007199254740ULL, 1000},            /* just under 2^53 */
        {9007199254740991ULL, 1},            /* 2^53 - 1 */
        {8192, 1099511627776ULL},            /* 2^13 x 2^40 = 2^53 */
        {6004799503160661ULL, 1},            /* odd values */
        {3002399751580330ULL, 3},
    };
    const uint64_t epoch = 1700000000000ULL;
    const uint64_t near_top = SLUICE_NOW_MAX_MS - 100000000ULL;
    const diff_run runs[] = {
        {"counter/mixed", SLUICE_SLIDING_COUNTER, mixed, 10, 30, 3000, epoch,
         COSTS_SMALL},
        {"log/mixed", SLUICE_SLIDING_LOG, mixed, 10, 30, 3000, epoch,
         COSTS_SMALL},
        {"counter/mixed@0", SLUICE_SLIDING_COUNTER, mixed, 10, 30, 1000, 0,
         COSTS_SMALL},
        {"log/mixed@0", SLUICE_SLIDING_LOG, mixed, 10, 30, 1000, 0,
         COSTS_SMALL},
        {"counter/big", SLUICE_SLIDING_COUNTER, counter_big, 6, 30, 1500,
         epoch, COSTS_ANY},
        {"counter/big@2^53", SLUICE_SLIDING_COUNTER, counter_big, 6, 30, 500,
         near_top, COSTS_ANY},
        {"log/big", SLUICE_SLIDING_LOG, log_big, 6, 30, 1500, epoch,
         COSTS_HUGE_REFUSED},
        {"log/big@2^53", SLUICE_SLIDING_LOG, log_big, 6, 30, 500, near_top,
         COSTS_HUGE_REFUSED},
        {"log/mixed@2^53", SLUICE_SLIDING_LOG, mixed, 10, 30, 800, near_top,
         COSTS_SMALL},
    };

    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        diff_totals tot;
        uint64_t t0 = rs_mono_ms();

        memset(&tot, 0, sizeof(tot));
        test_context("differential run %s, seed %" PRIu64, runs[i].label,
                     seed + i);
        do_diff_run(&runs[i], seed + i, &tot);
        printf("  %-18s %5ld steps: %ld hits, %ld peeks, %ld resets; "
               "%ld admitted, %ld refused, %ld errors (invalid requests), "
               "%ld resyncs; %" PRIu64 " ms\n",
               runs[i].label, tot.steps, tot.hits, tot.peeks, tot.resets,
               tot.admitted, tot.refused, tot.errors, tot.resyncs,
               rs_mono_ms() - t0);
        /* Both outcomes must have been seen, or the trace tested little. */
        CHECK(tot.admitted > 0);
        CHECK(tot.refused > 0);
        /* Only keys of a few ms can expire before the test looks. */
        CHECK(tot.resyncs * 2 <= tot.hits);
    }
    test_context(NULL);
}

/*
 * Costs as large as the documented range allows, 2^50: every count stays
 * exact through the server's Lua doubles and the commands it sends. The
 * fixed window and the sliding counter keep a count, so any cost is one
 * command; the sliding log keeps a member per unit, so it is left out. Both
 * stores, one virtual clock, the same answers.
 */
static void test_large_costs(void)
{
    const uint64_t MAX = SLUICE_MAX_MAX, COST = (uint64_t)1 << 50;
    const sluice_limit lims[2] = {SLUICE_LIMIT(SLUICE_FIXED, MAX, 60000),
                                  SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, MAX, 1)};
    sluice_vclock *clock = NULL;
    sluice_store *st[2] = {NULL, NULL};
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_decision d[2];
    char url[160];

    test_context("costs of 2^50");
    CHECK_OK(sluice_vclock_new(&clock, 5000000));
    if (clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000&refused_cache=off",
             server.url);
    CHECK_OK(sluice_store_open(&st[0], "mem://", &opts));
    CHECK_OK(sluice_store_open(&st[1], url, &opts));
    if (st[0] == NULL || st[1] == NULL)
        exit(2);
    for (int l = 0; l < 2; l++) {
        test_context("costs of 2^50, %s", sluice_algo_name(lims[l].algo));
        for (int i = 0; i < 2; i++)
            CHECK_OK(sluice_reset(st[i], &lims[l], "big", 3));
        /* 7 x 2^50 fit in 2^53 - 1; the 8th does not. */
        for (uint64_t hit = 1; hit <= 8; hit++) {
            for (int i = 0; i < 2; i++)
                CHECK_OK(sluice_hit(&d[i], st[i], &lims[l], "big", 3, COST));
            CHECK_EQ_U64(d[1].allowed, hit <= 7);
            CHECK_EQ_U64(d[1].remaining, hit <= 7 ? MAX - hit * COST
                                                  : MAX - 7 * COST);
            CHECK_EQ_U64(d[0].allowed, d[1].allowed);
            CHECK_EQ_U64(d[0].remaining, d[1].remaining);
            /* The fixed window's waits are the server's own PTTL, on its
               clock: only the sliding counter's follow the virtual one. */
            if (lims[l].algo == SLUICE_SLIDING_COUNTER)
                CHECK(memcmp(&d[0], &d[1], sizeof(d[0])) == 0);
        }
    }
    for (int i = 0; i < 2; i++)
        sluice_store_free(st[i]);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * A scripted trace at the very top of the documented bounds, where a sum of
 * two in-range numbers passes 2^53 and a double rounds it: max 2^53 - 1, a
 * window of 2^40 ms, a clock near 2^53, and costs of about max (refused).
 * The exact answers are spelled out, not only compared.
 */
static void test_log_top_of_range(void)
{
    const uint64_t MAX = SLUICE_MAX_MAX, W = SLUICE_WINDOW_MAX_MS;
    /* Entries made at T live past 2^53 (T + W > 2^53). */
    const uint64_t T = SLUICE_NOW_MAX_MS - W + 500;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, MAX, W);
    sluice_vclock *clock = NULL;
    sluice_store *st[2] = {NULL, NULL};
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_decision d;
    char url[160];

    test_context("sliding-log at the top of the documented range");
    CHECK_OK(sluice_vclock_new(&clock, T));
    if (clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000&refused_cache=off",
             server.url);
    CHECK_OK(sluice_store_open(&st[0], "mem://", &opts));
    CHECK_OK(sluice_store_open(&st[1], url, &opts));
    if (st[0] == NULL || st[1] == NULL)
        exit(2);
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "embedded" : "valkey";

        test_context("sliding-log at the top of the range, %s store", name);
        sluice_vclock_set(clock, T);
        CHECK_OK(sluice_reset(st[i], &lim, "top", 3));
        CHECK_OK(sluice_hit(&d, st[i], &lim, "top", 3, 1));
        CHECK(d.allowed);
        sluice_vclock_set(clock, T + 221);
        CHECK_OK(sluice_hit(&d, st[i], &lim, "top", 3, 2));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, MAX - 3);
        /* Only peeks from here: were a cost of about max admitted by
           mistake, a hit would make the server add 2^53 members. */
        sluice_vclock_set(clock, T + 1000);
        /* total 3 + cost (max - 1) passes 2^53: the 2nd oldest entry (at
           T + 221) must leave, not the oldest. */
        CHECK_OK(sluice_peek(&d, st[i], &lim, "top", 3, MAX - 1));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.remaining, MAX - 3);
        CHECK_EQ_U64(d.retry_after_ms, W + 221 - 1000);
        CHECK_EQ_U64(d.reset_after_ms, W + 221 - 1000);
        CHECK_OK(sluice_peek(&d, st[i], &lim, "top", 3, MAX - 2));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.retry_after_ms, W - 1000); /* the oldest one */
        /* At the clock's last allowed reading, T + W is past 2^53, where
           a double holds only even numbers: 507 and 728 are exact only if
           the difference is taken before the window is added. */
        sluice_vclock_set(clock, SLUICE_NOW_MAX_MS - 7);
        CHECK_OK(sluice_peek(&d, st[i], &lim, "top", 3, MAX));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.retry_after_ms, 728); /* all three must leave */
        CHECK_EQ_U64(d.reset_after_ms, 728);
        CHECK_OK(sluice_peek(&d, st[i], &lim, "top", 3, MAX - 2));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.retry_after_ms, 507); /* only the oldest */
        CHECK_EQ_U64(d.reset_after_ms, 728);
        CHECK_OK(sluice_peek(&d, st[i], &lim, "top", 3, MAX - 3));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 0);
        CHECK_OK(sluice_hit(&d, st[i], &lim, "top", 3, 4));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, MAX - 7);
    }
    sluice_store_free(st[0]);
    sluice_store_free(st[1]);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* ---- The fixed window on the server's clock ------------------------------ */

/* The fixed counter's key for 'id'. */
static void fixed_key(char *buf, size_t cap, const char *id)
{
    size_t len;
    char *k = sluice__key_build(buf, cap, &len, "sluice", id, strlen(id),
                                "fixed");

    if (k != buf) {
        fprintf(stderr, "key too long\n");
        exit(2);
    }
    buf[len] = '\0';
}

/* Waits until 'key' is gone (its window expired), up to 'limit_ms'. */
static int wait_gone(const char *key, uint64_t limit_ms)
{
    uint64_t deadline = rs_mono_ms() + limit_ms;

    while (rs_mono_ms() < deadline) {
        if (rs_int(&server, "EXISTS %s", key) == 0)
            return 1;
        rs_sleep_ms(5);
    }
    return 0;
}

/* Runs a hit and, right after it, reads PTTL; 'took' is the span in ms. */
static int hit_then_pttl(sluice_decision *d, sluice_store *st,
                         const sluice_limit *lim, const char *id,
                         const char *key, long long *pttl, uint64_t *took)
{
    uint64_t t0 = rs_mono_us();
    int rc = sluice_hit(d, st, lim, id, strlen(id), 1);

    *pttl = rs_int(&server, "PTTL %s", key);
    *took = (rs_mono_us() - t0) / 1000 + 1;
    return rc;
}

static void test_fixed_server_clock(void)
{
    const uint64_t W = 300;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 3, W);
    sluice_store *st = NULL;
    sluice_vclock *clock = NULL;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_decision d;
    char key[128], url[160];
    long long pttl, prev;
    uint64_t took;

    test_context("fixed window on the server's clock");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    /* A caller clock that never moves: the fixed window must not care. */
    CHECK_OK(sluice_vclock_new(&clock, 5));
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000&refused_cache=off",
             server.url);
    CHECK_OK(sluice_store_open(&st, url, &opts));
    if (st == NULL)
        exit(2);
    fixed_key(key, sizeof(key), "fx");

    /* The first hit arms the window: PTTL = window, as the reply says. */
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.retry_after_ms, 0);
    CHECK_EQ_U64(d.reset_after_ms, W);
    CHECK(pttl > 0 && (uint64_t)pttl <= W && W - (uint64_t)pttl <= took);
    prev = pttl;

    /* Later hits never move it: the PTTL only goes down. */
    rs_sleep_ms(40);
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 1);
    CHECK(pttl > 0 && pttl < prev);
    CHECK(d.reset_after_ms >= (uint64_t)pttl &&
          d.reset_after_ms - (uint64_t)pttl <= took);
    prev = pttl;
    rs_sleep_ms(20);
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 0);
    CHECK(pttl > 0 && pttl < prev);

    /* Refused: the wait is the PTTL, and a refusal changes nothing. */
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.remaining, 0);
    CHECK(pttl > 0 && d.retry_after_ms >= (uint64_t)pttl &&
          d.retry_after_ms - (uint64_t)pttl <= took);
    CHECK_EQ_U64(d.retry_after_ms, d.reset_after_ms);
    CHECK(d.retry_after_ms <= W);
    {
        redisReply *r = rs_cmd(&server, "GET %s", key);

        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, "3") == 0);
        if (r != NULL)
            freeReplyObject(r);
    }
    /* A peek says the same and arms nothing. */
    CHECK_OK(sluice_peek(&d, st, &lim, "fx", 2, 1));
    CHECK(!d.allowed);

    /* After expiry: a fresh window, armed again by its first hit. */
    CHECK(wait_gone(key, 5 * W));
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.reset_after_ms, W);
    CHECK(pttl > 0 && W - (uint64_t)pttl <= took);

    /* A peek on a fresh key creates nothing. */
    CHECK_OK(sluice_peek(&d, st, &lim, "fx-none", 7, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.reset_after_ms, W);
    {
        char k2[128];

        fixed_key(k2, sizeof(k2), "fx-none");
        CHECK(rs_int(&server, "EXISTS %s", k2) == 0);
    }

    /* A cost above 1 counts as that many units. */
    {
        sluice_limit l10 = SLUICE_LIMIT(SLUICE_FIXED, 10, 5000);

        CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 7));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 3);
        CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 4));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.remaining, 3);
        CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 3));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 0);
    }

    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * The seam: one hit arms a window; near its end max - 1 more are admitted;
 * right after it expires max more are. 2 x max - 1 admitted in a span much
 * shorter than a window, while each window held max.
 */
static void test_fixed_seam(void)
{
    const uint64_t W = 300, MAX = 5;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, MAX, W);
    sluice_store *st = NULL;
    sluice_decision d;
    char key[128], url[160];
    long long pttl;
    uint64_t burst_start, burst_end, deadline;
    int admitted = 0;

    test_context("fixed window: the seam");
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    fixed_key(key, sizeof(key), "seam");
    CHECK(rs_ok(&server, "DEL %s", key) == 0);

    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    CHECK(d.allowed);
    /* Wait for the last 60 ms of the window. */
    deadline = rs_mono_ms() + 5 * W;
    while ((pttl = rs_int(&server, "PTTL %s", key)) > 60 &&
           rs_mono_ms() < deadline)
        rs_sleep_ms(5);
    burst_start = rs_mono_ms();
    for (uint64_t i = 0; i < MAX - 1; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
        admitted += d.allowed;
    }
    /* The window's last moment: the one after max is refused, unless the
       machine was so slow that the window already rolled. */
    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    if (d.allowed) {
        printf("  seam: the window rolled during the burst (slow machine); "
               "skipped the exact count\n");
        sluice_store_free(st);
        test_context(NULL);
        return;
    }
    CHECK(wait_gone(key, 5 * W));
    for (uint64_t i = 0; i < MAX; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
        admitted += d.allowed;
    }
    burst_end = rs_mono_ms();
    CHECK_EQ_U64(admitted, 2 * MAX - 1);
    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    CHECK(!d.allowed);
    printf("  seam: %d admitted in %" PRIu64 " ms across the seam (window "
           "%" PRIu64 " ms, max %" PRIu64 ")\n",
           admitted, burst_end - burst_start, W, MAX);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * The instant of expiry. The server deletes a key once its clock has passed
 * the expiry time; during that very millisecond the key is still there and
 * PTTL answers 0. The C reference (algo_fixed.c) counts the window as over
 * from expires_ms on (now >= expires_ms), so a request then is admitted in
 * a fresh window. Whatever the script does then, it must not refuse with
 * retry_after_ms 0: a refusal promises a wait of at least 1 ms. Peeks are
 * sent back to back through the last milliseconds of a full window, so
 * that millisecond is sampled many times over.
 */
static void test_fixed_expiry_instant(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 4, 200);
    sluice_store *st = NULL;
    sluice_decision d;
    char key[128], url[160];
    long refused = 0, refused_now = 0, calls = 0;
    uint64_t deadline;

    test_context("fixed window: the millisecond of expiry");
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    fixed_key(key, sizeof(key), "instant");
    for (int round = 0; round < 3; round++) {
        CHECK(rs_ok(&server, "SET %s 4 PX 120", key) == 0);
        deadline = rs_mono_ms() + 3000;
        while (rs_int(&server, "PTTL %s", key) > 15 && rs_mono_ms() < deadline)
            rs_sleep_ms(3);
        for (;;) {
            int rc = sluice_peek(&d, st, &lim, "instant", 7, 1);

            calls++;
            if (!CHECK_OK(rc) || d.allowed || rs_mono_ms() > deadline)
                break;
            refused++;
            if (d.retry_after_ms == 0)
                refused_now++;
        }
        CHECK(d.allowed);
    }
    if (!CHECK_EQ_U64(refused_now, 0))
        fprintf(stderr, "    %ld of %ld refusals said retry_after_ms 0 "
                "(the key's PTTL was 0)\n", refused_now, refused);
    printf("  expiry instant: %ld peeks, %ld refused, %ld with a wait of 0\n",
           calls, refused, refused_now);
    sluice_store_free(st);
    test_context(NULL);
}

/* Keys the script did not write: no TTL, or not a counter at all. */
static void test_fixed_foreign_values(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 4000);
    sluice_limit counter = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 5, 4000);
    sluice_limit logl = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 4000);
    sluice_store *st = NULL;
    sluice_decision d;
    char key[128], url[160];
    long long pttl;

    test_context("fixed window: values written by hand");
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);

    /* A counter without a TTL gets one on the next call, admitted or not. */
    fixed_key(key, sizeof(key), "nottl");
    CHECK(rs_ok(&server, "SET %s 2", key) == 0);
    CHECK(rs_int(&server, "PTTL %s", key) == -1);
    CHECK_OK(sluice_hit(&d, st, &lim, "nottl", 5, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.reset_after_ms, 4000);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);

    fixed_key(key, sizeof(key), "nottl-full");
    CHECK(rs_ok(&server, "SET %s 5", key) == 0);
    CHECK_OK(sluice_hit(&d, st, &lim, "nottl-full", 10, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.retry_after_ms, 4000);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);

    /* Even a peek repairs it: otherwise the key would block forever. */
    fixed_key(key, sizeof(key), "nottl-peek");
    CHECK(rs_ok(&server, "SET %s 5", key) == 0);
    CHECK_OK(sluice_peek(&d, st, &lim, "nottl-peek", 10, 1));
    CHECK(!d.allowed);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);

    /* Not a number: a protocol error, never a crash or a decision. */
    fixed_key(key, sizeof(key), "junk");
    CHECK(rs_ok(&server, "SET %s abc", key) == 0);
    memset(&d, 0x5a, sizeof(d));
    CHECK_RC(sluice_hit(&d, st, &lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK(d.allowed == 0);
    CHECK(strstr(sluice_last_error(), "number") != NULL);
    CHECK_RC(sluice_peek(&d, st, &lim, "junk", 4, 1), SLUICE_EPROTO);
    {
        redisReply *r = rs_cmd(&server, "GET %s", key);

        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, "abc") == 0);
        if (r != NULL)
            freeReplyObject(r);
    }
    /* A fractional count is not a counter either: INCRBY refuses it. */
    fixed_key(key, sizeof(key), "frac");
    CHECK(rs_ok(&server, "SET %s 1.5", key) == 0);
    CHECK_RC(sluice_hit(&d, st, &lim, "frac", 4, 1), SLUICE_EPROTO);
    /* The wrong type: a hash where a counter should be, and so on. */
    fixed_key(key, sizeof(key), "hash");
    CHECK(rs_ok(&server, "HSET %s a 1", key) == 0);
    CHECK_RC(sluice_hit(&d, st, &lim, "hash", 4, 1), SLUICE_EPROTO);
    {
        char k2[128];
        size_t len;

        sluice__key_build(k2, sizeof(k2), &len, "sluice", "str", 3,
                          "sliding-counter");
        k2[len] = '\0';
        CHECK(rs_ok(&server, "SET %s x", k2) == 0);
        CHECK_RC(sluice_hit(&d, st, &counter, "str", 3, 1), SLUICE_EPROTO);
        sluice__key_build(k2, sizeof(k2), &len, "sluice", "str", 3,
                          "sliding-log");
        k2[len] = '\0';
        CHECK(rs_ok(&server, "SET %s x", k2) == 0);
        CHECK_RC(sluice_hit(&d, st, &logl, "str", 3, 1), SLUICE_EPROTO);
    }
    /* The store is still fine afterwards. */
    CHECK_OK(sluice_hit(&d, st, &lim, "after", 5, 1));
    CHECK(d.allowed);
    sluice_store_free(st);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    uint64_t t0 = rs_mono_ms();

    printf("test_valkey_diff: seed %" PRIu64 "\n", seed);
    fflush(stdout);

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_diff: cannot start redis-server\n");
        return 1;
    }
    printf("  server %s (pid %d)\n", server.url, (int)server.pid);
    test_differential(seed);
    test_log_top_of_range();
    test_large_costs();
    test_fixed_server_clock();
    test_fixed_seam();
    test_fixed_expiry_instant();
    test_fixed_foreign_values();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_diff");
}
