/*
 * test_valkey_diff.c - the Valkey store against the embedded store.
 *
 * Sliding-counter, sliding-log, gcra and compact-log are pure functions of
 * (state, now, request), written twice: in C (src/algo/FOLDER/FOLDER.c,
 * run by the embedded store) and in Lua (src/algo/FOLDER/FOLDER.lua, run
 * by a real redis-server). Both stores are opened on one virtual clock (the Valkey
 * store with ?clock=caller), and a seeded random trace of hits, peeks and
 * resets over about thirty keys goes to both; every decision must be
 * identical in every field. The traces cover gaps of 0, of exactly a window
 * and of many windows, costs from 1 to max, limits such as max 1 and window
 * 1, gcra's bursts from 1 to max, keys switched between limits, and values
 * near the documented bounds (max 2^53 - 1 for the log, max x window = 2^53
 * for the counter and gcra, clocks near 2^53), which is where Lua's doubles
 * would first lose an integer.
 * Costs of 2^50, and a scripted trace at the very top of the log's range,
 * are spelled out.
 *
 * The server expires keys on its own real clock (PEXPIRE), while the trace
 * runs on virtual time, so after each admitted hit the test reads the key's
 * PTTL (it must be the state's remaining life: reset_after_ms, less the real
 * time the call took) and then removes it with PERSIST, so that only the
 * script's own arithmetic decides. If a key with a tiny window expired in
 * real time before the test could look, both stores forget that key and the
 * trace goes on (counted as a resync; it is not a library fault).
 *
 * Every trace runs once for each engine of the server store (engine=lua:
 * the scripts; engine=module: the native module, loaded into the server
 * with --loadmodule), each against the embedded store, so all three agree
 * on every decision. An algorithm the module does not decide yet is
 * skipped for the module engine with a printed note.
 *
 * The fixed window runs on the server's own clock: test_valkey_fixed.c.
 *
 * Usage: test_valkey_diff [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "algo/model.h" /* which algorithms run on the caller's clock */
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"
#include "tls_certs.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;
/* The store's URL on 'server', over the run's transport (main()). */
static char base_url[600];
static const char *transport;

/* The engines a server store is compared on, and the one of this pass. */
static const char *const engines[] = {"lua", "module"};
static const char *engine = "lua";
static int glue[TEST_ALGO_N]; /* the algorithms the module decides */

/* Whether this pass runs 'algo' (the module pass: where it has glue). */
static int engine_runs(sluice_algo algo)
{
    return strcmp(engine, "module") != 0 || glue[algo];
}

/* The server store's query for this pass: TEST_CALLER_QUERY and the engine. */
static const char *engine_query(void)
{
    static char query[128];

    snprintf(query, sizeof(query), "%s&engine=%s", TEST_CALLER_QUERY, engine);
    return query;
}

/* ---- The differential run ------------------------------------------------ */

typedef struct limit_cfg {
    uint64_t max;
    uint64_t window_ms;
} limit_cfg;

/* gcra's limits with bursts, from 1 (pure pacing) to max, and none (0:
   max): gcra_bursts[i] with the burst gcra_burst_sizes[i]. */
static const limit_cfg gcra_bursts[] = {
    {10, 1000}, {3, 1000}, {7, 100}, {100, 60000}, {1000, 10},
    {5, 1},     {2, 3},    {1, 1},   {50, 250},    {3, 7},
};
static const uint64_t gcra_burst_sizes[] = {3, 1, 2, 10, 999, 1, 1, 1, 25, 0};

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

/* The largest cost the compact log may admit without writing a large
   string (8 bytes a unit); the sliding log writes one member a request,
   whatever its cost, so it admits any. */
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


/* A run on its way: the two stores on one clock, and what it has seen. */
typedef struct diff_state {
    const diff_run *run;
    uint64_t seed, now;
    sluice_vclock *clock;
    sluice_store *mem, *vk;
    diff_totals *tot;
    int mismatches;
} diff_state;

/* One request of the trace, and what each store answered. */
typedef struct diff_req {
    const char *opname;
    sluice_limit limit;
    char key[32];
    size_t klen;
    uint64_t cost;
    int rm, rv;
    sluice_decision dm, dv;
} diff_req;

static void diff_open(diff_state *ds, const diff_run *run, uint64_t seed,
                      diff_totals *tot)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    memset(ds, 0, sizeof(*ds));
    ds->run = run;
    ds->seed = seed;
    ds->tot = tot;
    rng_state = seed;
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    ds->clock = test_vclock_opts(&opts, run->start_ms);
    ds->mem = test_store_open("mem://", "", &opts);
    ds->vk = test_store_open(base_url, engine_query(), &opts);
    ds->now = run->start_ms;
}

static void diff_close(diff_state *ds)
{
    if (ds->tot->hits > 0)
        test_check_engine_used(ds->vk, engine);
    sluice_store_free(ds->vk);
    sluice_store_free(ds->mem);
    sluice_vclock_free(ds->clock);
}

/* The limit of key 'k': its own, or now and then another one. */
static const limit_cfg *pick_cfg(const diff_run *run, int k)
{
    const limit_cfg *cfg = &run->cfgs[k % run->ncfg];

    if (rng_pct(3)) {
        /* The same key asked under another limit. For the log, only one
           with the same window: the embedded store may drop a log whose
           newest entry is older than the window last asked with, and the
           server drops it when its TTL (the window of the last admitted
           hit) runs out, and this test removes TTLs. */
        const limit_cfg *other = &run->cfgs[rng_next() % (uint64_t)run->ncfg];

        if ((run->algo != SLUICE_SLIDING_LOG &&
             run->algo != SLUICE_COMPACT_LOG) ||
            other->window_ms == cfg->window_ms)
            cfg = other;
    }
    return cfg;
}

/* The cost of 'q': drawn, now and then invalid, and never a huge admitted
   one for the log. */
static uint64_t pick_cost(const diff_state *ds, const diff_req *q)
{
    /* The most a request may cost: the burst, where there is one. */
    uint64_t max = q->limit.burst != 0 ? q->limit.burst : q->limit.max;
    uint64_t cost = cost_for(ds->run->costs, max);

    if (rng_pct(1)) /* an invalid request: both refuse it alike */
        cost = rng_pct(50) || max == SLUICE_MAX_MAX ? 0 : max + 1;
    if (ds->run->algo == SLUICE_COMPACT_LOG && cost > LOG_ADMIT_COST_CAP &&
        cost <= max) {
        sluice_decision probe;

        if (sluice_peek(&probe, ds->mem, &q->limit, q->key, q->klen, cost) ==
                SLUICE_OK &&
            probe.allowed)
            cost = 1;
    }
    return cost;
}

/*
 * After an admitted hit: the key's PTTL must be its reset_after_ms less
 * the call's time ('t0_us' on); then PERSIST takes its life away (see the
 * top). Returns 0 when the server did not answer (the run stops).
 */
static int check_life(diff_state *ds, const diff_req *q, int step,
                      uint64_t t0_us)
{
    char kbuf[128];
    size_t kl = test_key_of(kbuf, sizeof(kbuf), "sluice", q->key, q->klen,
                            sluice_algo_name(ds->run->algo));
    const char *argv[] = {"EVAL", persist_script, "1", kbuf};
    size_t lens[] = {4, strlen(persist_script), 1, kl};
    redisReply *r = rs_cmdargv(&server, 4, argv, lens);
    uint64_t took_ms = (rs_mono_us() - t0_us) / 1000 + 1;
    uint64_t reset = q->dv.reset_after_ms;

    if (!CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER)) {
        if (r != NULL)
            freeReplyObject(r);
        return 0;
    }
    if (r->integer == -2) {
        /* Expired in real time before we looked: only possible when its
           whole life was shorter than the call. */
        CHECK(reset <= took_ms);
        ds->tot->resyncs++;
        sluice_reset(ds->mem, &q->limit, q->key, q->klen);
        sluice_reset(ds->vk, &q->limit, q->key, q->klen);
    } else if (!CHECK(r->integer >= 0 && (uint64_t)r->integer <= reset &&
                      reset - (uint64_t)r->integer <= took_ms)) {
        fprintf(stderr, "    %s step %d key %s: PTTL %lld after an admit "
                "with reset_after_ms %" PRIu64 " (call took <= %" PRIu64
                " ms)\n", ds->run->label, step, q->key, r->integer, reset,
                took_ms);
    }
    freeReplyObject(r);
    return 1;
}

/* Sends 'q' (a reset when 'op' < 1, a peek below 31, else a hit) to both
   stores. Returns 0 when the run must stop. */
static int diff_send(diff_state *ds, diff_req *q, unsigned op, int step)
{
    diff_totals *tot = ds->tot;

    tot->steps++;
    if (op < 1) {
        q->opname = "reset";
        tot->resets++;
        /* Whether a count was there is each store's own clock's (the
           server's keys expire in real time, the embedded store's on the
           virtual clock): the two must both have done it. */
        q->rm = test_reset_rc(sluice_reset(ds->mem, &q->limit, q->key,
                                           q->klen));
        q->rv = test_reset_rc(sluice_reset(ds->vk, &q->limit, q->key,
                                           q->klen));
        memset(&q->dm, 0, sizeof(q->dm));
        memset(&q->dv, 0, sizeof(q->dv));
    } else if (op < 31) {
        q->opname = "peek";
        tot->peeks++;
        q->rm = sluice_peek(&q->dm, ds->mem, &q->limit, q->key, q->klen,
                            q->cost);
        q->rv = sluice_peek(&q->dv, ds->vk, &q->limit, q->key, q->klen,
                            q->cost);
    } else {
        uint64_t t0_us;

        q->opname = "hit";
        tot->hits++;
        q->rm = sluice_hit(&q->dm, ds->mem, &q->limit, q->key, q->klen,
                           q->cost);
        t0_us = rs_mono_us();
        q->rv = sluice_hit(&q->dv, ds->vk, &q->limit, q->key, q->klen,
                           q->cost);
        if (q->rv == SLUICE_OK && q->dv.allowed &&
            !check_life(ds, q, step, t0_us))
            return 0;
    }
    return 1;
}

/* Counts what 'q' answered; both stores must agree on it. */
static void diff_check(diff_state *ds, const diff_req *q, unsigned op,
                       int step)
{
    if (q->rv == SLUICE_OK && op >= 1)
        (q->dv.allowed ? ds->tot->admitted++ : ds->tot->refused++);
    if (q->rv != SLUICE_OK)
        ds->tot->errors++;
    if (q->rm == q->rv && (q->rm != SLUICE_OK || decision_same(&q->dm, &q->dv)))
        return;
    CHECK(!"the embedded and the Valkey store disagree");
    if (ds->mismatches++ >= MAX_MISMATCHES_PRINTED)
        return;
    fprintf(stderr,
            "    %s seed %" PRIu64 " step %d: t=%" PRIu64 " %s key=%s cost=%"
            PRIu64 " limit=%s/%" PRIu64 "/%" PRIu64 "ms burst %" PRIu64 "\n",
            ds->run->label, ds->seed, step, ds->now, q->opname, q->key,
            q->cost, sluice_algo_name(q->limit.algo), q->limit.max,
            q->limit.window_ms, q->limit.burst);
    decision_print("embedded", q->rm, &q->dm);
    decision_print("valkey", q->rv, &q->dv);
    if (q->rv < 0)
        fprintf(stderr, "      valkey error: %s\n", sluice_last_error());
}

/* One step: a random key, limit, gap, cost and request. Returns 0 when the
   run must stop. */
static int diff_step(diff_state *ds, int step)
{
    const diff_run *run = ds->run;
    int k = (int)(rng_next() % (uint64_t)run->nkeys);
    unsigned op;
    const limit_cfg *cfg;
    diff_req q;
    uint64_t gap;

    memset(&q, 0, sizeof(q));
    op = (unsigned)(rng_next() % 100);
    cfg = pick_cfg(run, k);
    q.limit = SLUICE_LIMIT(run->algo, cfg->max, cfg->window_ms);
    if (run->cfgs == gcra_bursts)
        q.limit.burst = gcra_burst_sizes[cfg - gcra_bursts];
    q.klen = (size_t)snprintf(q.key, sizeof(q.key), "user:%d", k);
    gap = gap_for(cfg->window_ms);
    if (ds->now + gap > SLUICE_NOW_MAX_MS)
        gap = 0;
    ds->now += gap;
    sluice_vclock_set(ds->clock, ds->now);
    q.cost = pick_cost(ds, &q);
    if (!diff_send(ds, &q, op, step))
        return 0;
    diff_check(ds, &q, op, step);
    return 1;
}

static void do_diff_run(const diff_run *run, uint64_t seed, diff_totals *tot)
{
    diff_state ds;

    diff_open(&ds, run, seed, tot);
    for (int step = 0; step < run->nsteps; step++)
        if (!diff_step(&ds, step))
            break;
    if (ds.mismatches > 0)
        fprintf(stderr, "    %s: %d mismatches\n", run->label, ds.mismatches);
    diff_close(&ds);
}

/* One run, its figures printed; both outcomes must have been seen. */
static void run_and_check(const diff_run *run, uint64_t seed)
{
    diff_totals tot;
    uint64_t t0 = rs_mono_ms();

    if (!engine_runs(run->algo))
        return;
    memset(&tot, 0, sizeof(tot));
    test_context("differential run %s, engine=%s, seed %" PRIu64, run->label,
                 engine, seed);
    do_diff_run(run, seed, &tot);
    printf("  %-6s %-18s %5ld steps: %ld hits, %ld peeks, %ld resets; "
           "%ld admitted, %ld refused, %ld errors (invalid requests), "
           "%ld resyncs; %" PRIu64 " ms\n",
           engine, run->label, tot.steps, tot.hits, tot.peeks, tot.resets,
           tot.admitted, tot.refused, tot.errors, tot.resyncs,
           rs_mono_ms() - t0);
    /* Both outcomes must have been seen, or the trace tested little. */
    CHECK(tot.admitted > 0);
    CHECK(tot.refused > 0);
    /* Only keys of a few ms can expire before the test looks. */
    CHECK(tot.resyncs * 2 <= tot.hits);
}

/*
 * An algorithm none of the 'runs' names, if a server runs it on the
 * caller's clock, is held to the 'mixed' limits too (there is none today:
 * the fixed window runs on the server's own clock, and has
 * test_valkey_fixed.c).
 */
static void run_unnamed(const diff_run *runs, size_t nruns,
                        const limit_cfg *mixed, uint64_t seed)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        diff_run extra = {sluice_algo_name((sluice_algo)a), (sluice_algo)a,
                          mixed, 10, 30, 3000, 1700000000000ULL, COSTS_SMALL};
        int named = 0;

        for (size_t i = 0; i < nruns; i++)
            named |= runs[i].algo == (sluice_algo)a;
        if (!named && !sluice__models[a]->server_clock)
            run_and_check(&extra, seed + (uint64_t)a);
    }
}

/* Near the compact log's bound: max 2^14. */
static const limit_cfg compact_big[] = {
    {16384, 1000}, {16384, 1}, {16384, 1099511627776ULL},
    {16383, 60000},
};

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
        {"gcra/mixed", SLUICE_GCRA, mixed, 10, 30, 3000, epoch, COSTS_SMALL},
        {"gcra/bursts", SLUICE_GCRA, gcra_bursts, 10, 30, 3000, epoch,
         COSTS_SMALL},
        {"gcra/bursts@0", SLUICE_GCRA, gcra_bursts, 10, 30, 1000, 0,
         COSTS_ANY},
        {"gcra/big", SLUICE_GCRA, counter_big, 6, 30, 1500, epoch,
         COSTS_ANY},
        {"gcra/big@2^53", SLUICE_GCRA, counter_big, 6, 30, 500, near_top,
         COSTS_ANY},
        {"compact/mixed", SLUICE_COMPACT_LOG, mixed, 10, 30, 3000, epoch,
         COSTS_SMALL},
        {"compact/big", SLUICE_COMPACT_LOG, compact_big, 4, 30, 1000, epoch,
         COSTS_HUGE_REFUSED},
        {"compact/@2^53", SLUICE_COMPACT_LOG, mixed, 10, 30, 800, near_top,
         COSTS_SMALL},
    };
    const size_t nruns = sizeof(runs) / sizeof(runs[0]);

    for (size_t i = 0; i < nruns; i++)
        run_and_check(&runs[i], seed + i);
    run_unnamed(runs, nruns, mixed, seed + nruns);
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
    sluice_decision d[8][2];

    test_context("costs of 2^50");
    clock = test_vclock_opts(&opts, 5000000);
    st[0] = test_store_open("mem://", "", &opts);
    st[1] = test_store_open(base_url, engine_query(), &opts);
    for (int l = 0; l < 2; l++) {
        if (!engine_runs(lims[l].algo))
            continue;
        test_context("costs of 2^50, %s, engine=%s",
                     sluice_algo_name(lims[l].algo), engine);
        /* The sliding counter's window of 1 ms (max x window <= 2^53) gives
           its key a TTL of 2 ms on the server's real clock, while the
           virtual one stands still: on a slow machine the server may drop
           the key between two hits, and forget what the embedded store
           (rightly) keeps. A try in which the server expired a key is not
           judged; another is made. */
        for (int tries = 0; tries < 20; tries++) {
            long long expired = rs_info_count(&server, "stats",
                                              "expired_keys:");

            for (int i = 0; i < 2; i++)
                CHECK_RESET(sluice_reset(st[i], &lims[l], "big", 3));
            for (int hit = 0; hit < 8; hit++)
                for (int i = 0; i < 2; i++)
                    CHECK_OK(sluice_hit(&d[hit][i], st[i], &lims[l], "big",
                                        3, COST));
            if (rs_info_count(&server, "stats", "expired_keys:") == expired)
                break;
        }
        /* 7 x 2^50 fit in 2^53 - 1; the 8th does not. */
        for (uint64_t hit = 1; hit <= 8; hit++) {
            const sluice_decision *m = &d[hit - 1][0], *v = &d[hit - 1][1];

            CHECK_EQ_U64(v->allowed, hit <= 7);
            CHECK_EQ_U64(v->remaining, hit <= 7 ? MAX - hit * COST
                                                : MAX - 7 * COST);
            CHECK_EQ_U64(m->allowed, v->allowed);
            CHECK_EQ_U64(m->remaining, v->remaining);
            /* The fixed window's waits are the server's own PTTL, on its
               clock: only the sliding counter's follow the virtual one. */
            if (lims[l].algo == SLUICE_SLIDING_COUNTER)
                CHECK(memcmp(m, v, sizeof(*m)) == 0);
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

    if (!engine_runs(SLUICE_SLIDING_LOG))
        return;
    test_context("sliding-log at the top of the documented range");
    clock = test_vclock_opts(&opts, T);
    st[0] = test_store_open("mem://", "", &opts);
    st[1] = test_store_open(base_url, engine_query(), &opts);
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "embedded" : "valkey";

        test_context("sliding-log at the top of the range, %s store, "
                     "engine=%s", name, engine);
        sluice_vclock_set(clock, T);
        CHECK_RESET(sluice_reset(st[i], &lim, "top", 3));
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

/* The one sliding-log key on the server holds 'members', its newest with
   a running total past 2^53 ('high') or not. */
static void log_wrap_check_set(long long members, bool high)
{
    redisReply *r = rs_cmd(&server, "KEYS *wrap*"), *m;

    if (CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY &&
              r->elements == 1)) {
        CHECK_EQ_U64(rs_int(&server, "ZCARD %s", r->element[0]->str),
                     members);
        m = rs_cmd(&server, "ZRANGE %s -1 -1", r->element[0]->str);
        if (CHECK(m != NULL && m->type == REDIS_REPLY_ARRAY &&
                  m->elements == 1))
            CHECK((m->element[0]->str[0] == 'B') == high);
        freeReplyObject(m);
    }
    freeReplyObject(r);
}

/*
 * The sliding log's members on the server carry the set's running total of
 * units (sliding_log.lua): one member a request whatever its cost, and a
 * total that passes 2^53 (where its low part wraps) while the set lives.
 * The embedded store and the server must agree on every decision across
 * it, and the set holds one member per live request.
 */
static void test_log_wrap(void)
{
    const uint64_t MAX = SLUICE_MAX_MAX, W = 60000, T = 1700000000000ULL;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, MAX, W);
    sluice_vclock *clock = NULL;
    sluice_store *st[2] = {NULL, NULL};
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_decision d[2];
    /* Steps: at T + dt, a hit (or peek) of 'cost'; 'members' is the set's
       size after it. */
    static const struct {
        uint64_t dt, cost;
        bool peek;
        long long members;
    } steps[] = {
        {0, 1, false, 1},
        {1, 0 /* MAX - 1 */, false, 2},   /* the total reaches 2^53 - 1 */
        {2, 1, true, 2},                  /* refused: full */
        {W, 1, false, 2},                 /* the first left; past 2^53 */
        {W, 3, true, 2},                  /* refused: waits for the 2nd */
        {W + 1, 0 /* MAX - 1 */, false, 2}, /* the 2nd left: total max */
        {W + 1, 1, true, 2},
        {2 * W, 1, false, 2},             /* the 3rd left */
        {2 * W + 1, 2, false, 2},         /* the 4th left */
        {2 * W + 1, 2, false, 3},         /* two in one ms */
        {2 * W + 1, 0 /* MAX - 1 */, true, 3}, /* waits for the 3rd unit */
        {2 * W + 2, 0 /* MAX - 9 */, false, 4},
        {2 * W + 2, 5, true, 4},
        {4 * W, 1, false, 1},             /* all left: the total anew */
    };
    const size_t nsteps = sizeof(steps) / sizeof(steps[0]);

    if (!engine_runs(SLUICE_SLIDING_LOG))
        return;
    clock = test_vclock_opts(&opts, T);
    st[0] = test_store_open("mem://", "", &opts);
    st[1] = test_store_open(base_url, engine_query(), &opts);
    for (int i = 0; i < 2; i++)
        CHECK_RESET(sluice_reset(st[i], &lim, "wrap", 4));
    for (size_t k = 0; k < nsteps; k++) {
        uint64_t cost = steps[k].cost;

        if (cost == 0)
            cost = k == 11 ? MAX - 9 : MAX - 1;
        test_context("sliding-log's total past 2^53, engine=%s, step %zu",
                     engine, k);
        sluice_vclock_set(clock, T + steps[k].dt);
        for (int i = 0; i < 2; i++)
            CHECK_OK(steps[k].peek
                         ? sluice_peek(&d[i], st[i], &lim, "wrap", 4, cost)
                         : sluice_hit(&d[i], st[i], &lim, "wrap", 4, cost));
        CHECK_EQ_U64(d[0].allowed, d[1].allowed);
        CHECK_EQ_U64(d[0].remaining, d[1].remaining);
        CHECK_EQ_U64(d[0].retry_after_ms, d[1].retry_after_ms);
        CHECK_EQ_U64(d[0].reset_after_ms, d[1].reset_after_ms);
        /* Past 2^53 the newest member's total has a high part (one
           digit: "B"), until the set empties. */
        log_wrap_check_set(steps[k].members, k >= 3 && k + 1 < nsteps);
    }
    for (int i = 0; i < 2; i++)
        sluice_store_free(st[i]);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * The server of the run, over the transport $SLUICE_TEST_TRANSPORT names:
 * tcp (the default), tls (the run's certificates) or unix; sets base_url.
 */
static int start_server(void)
{
    const rs_certs *c;

    transport = getenv("SLUICE_TEST_TRANSPORT");
    if (transport == NULL || transport[0] == '\0')
        transport = "tcp";
    if (strcmp(transport, "tcp") == 0) {
        if (rs_start(&server, rs_module_args()) < 0)
            return -1;
        snprintf(base_url, sizeof(base_url), "%s", server.url);
    } else if (strcmp(transport, "unix") == 0) {
        if (rs_start_unix(&server, rs_module_args()) < 0)
            return -1;
        snprintf(base_url, sizeof(base_url), "%s", server.url);
    } else if (strcmp(transport, "tls") == 0) {
        if ((c = rs_certs_get()) == NULL ||
            rs_start_tls(&server, "no", rs_module_args()) < 0)
            return -1;
        snprintf(base_url, sizeof(base_url), "%s?tls_ca=%s", server.url,
                 c->ca_cert);
    } else {
        fprintf(stderr, "test_valkey_diff: SLUICE_TEST_TRANSPORT=%s: not "
                "tcp, tls or unix\n", transport);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    uint64_t t0 = rs_mono_ms();

    printf("test_valkey_diff: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (start_server() < 0) {
        fprintf(stderr, "test_valkey_diff: cannot start redis-server\n");
        return 1;
    }
    printf("  server %s over %s (pid %d)\n", base_url, transport,
           (int)server.pid);
    for (int a = 0; a < TEST_ALGO_N; a++)
        glue[a] = rs_module_path() != NULL &&
                  test_module_glue(&server, (sluice_algo)a);
    for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
        engine = engines[e];
        if (strcmp(engine, "module") == 0 && rs_module_path() == NULL) {
            printf("  NOTE: this build made no module: engine=module is not "
                   "compared\n");
            continue;
        }
        test_differential(seed);
        test_log_top_of_range();
        test_log_wrap();
        test_large_costs();
    }
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_diff");
}
