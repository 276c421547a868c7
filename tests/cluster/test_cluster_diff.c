/*
 * test_cluster_diff.c - the cluster store on a real Redis Cluster decides
 * as one server does and as the embedded store does, and its queue limiter
 * answers as one server's.
 *
 * It runs on the cluster of the ctest run (cluster.h: six redis-servers on
 * free loopback ports, three masters with a replica each), beside a
 * private single server of its own. It changes no slot and no node, so it
 * runs before the tests that do (tests/CMakeLists.txt).
 *
 *   0. Seeds. A first seed that is down: the store asks the next one.
 *   1. Differential. One seeded random trace of hits, peeks and resets over
 *      thirty ids, ten served by each master, goes to the embedded store,
 *      the single server and the cluster, all three on one virtual clock
 *      (?clock=caller). Sliding-counter and sliding-log decisions must be
 *      identical in every field, line by line. The fixed window runs on
 *      each server's own expiry clock, so the two servers must agree on
 *      'allowed' and 'remaining' exactly and on the waits within the real
 *      time between the two calls. Windows are a minute or more, so nothing
 *      expires in real time during the run. One step in twenty is a
 *      sluice_hit_many() batch, decided by the embedded store one hit at a
 *      time. Afterwards each master must hold keys, each key on the master
 *      that serves its slot (by the server's own CLUSTER KEYSLOT), and the
 *      masters together exactly the keys the single server holds.
 *      The whole trace runs once for each engine of the server stores
 *      (engine=lua, then engine=module: every node of the cluster and the
 *      single server have the native module loaded); the module pass skips,
 *      with a printed note, the steps of an algorithm it does not decide
 *      yet, and must have gone by the module (stats module_calls).
 *   2. Queue limiter (by script, then by the module). emq:{q}:limiter and emq:{q}:meta share a slot; the
 *      cap is written with HSET through a cluster-aware raw command, and
 *      sluice_emq_rate_limit_ttl() / sluice_emq_limiter_incr() answer on
 *      the cluster as on the single server.
 *
 * Usage: test_cluster_diff [SEED] (or SLUICE_TEST_SEED=N); the seed is
 * printed.
 */
#include "algo/model.h" /* which algorithms run on a server's own clock */
#include "cluster.h"
#include "compare.h"
#include "rng.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXED_TOLERANCE_MS 2000

/*
 * Whether 'algo' runs on the caller's clock on a server, so that the
 * embedded store, the single server and the cluster must agree exactly.
 * The fixed window runs on each server's own expiry clock instead: the
 * servers agree on it within FIXED_TOLERANCE_MS, and the embedded store,
 * on the virtual clock, is not asked.
 */
static int exact(sluice_algo algo)
{
    return !sluice__models[algo]->server_clock;
}

static rc_cluster cluster;
static rs_server single;

/* The engine of this pass (engine=lua, engine=module), and the algorithms
   the module decides (asked of the single server, which loads the same
   module as every node). */
static const char *engine = "lua";
static int glue[TEST_ALGO_N];

static int engine_runs(sluice_algo algo)
{
    return strcmp(engine, "module") != 0 || glue[algo];
}

/* 'base' (a query without the engine) and this pass's engine. */
static const char *engine_query(const char *base)
{
    static char query[160];

    snprintf(query, sizeof(query), "%s&engine=%s", base, engine);
    return query;
}

/* Empties the single server and every live master. */
static void flush_all(void)
{
    CHECK(rs_ok(&single, "FLUSHALL") == 0);
    CHECK(rc_flush(&cluster) == 0);
}

/* ---- 0. Seeds ------------------------------------------------------------ */

/* A first seed that is down: the store asks the next one. */
static void test_seed_down(void)
{
    sluice_store *st;
    sluice_decision d;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    char base[600];

    test_context("the first seed is down");
    snprintf(base, sizeof(base), "redis+cluster://127.0.0.1:%d,127.0.0.1:%d",
             rs_free_port(),
             cluster.nodes[rc_first_live(&cluster, 0)].srv.port);
    st = test_store_open(base, "timeout=2000", NULL);
    CHECK(strcmp(sluice_store_kind(st), "valkey-cluster") == 0);
    for (int i = 0; i < 20; i++) {
        char id[16];

        snprintf(id, sizeof(id), "seed%d", i);
        CHECK_OK(sluice_hit(&d, st, &lim, id, strlen(id), 1));
        CHECK(d.allowed);
    }
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- 1. Differential ----------------------------------------------------- */

typedef struct limit_cfg {
    uint64_t max, window_ms;
} limit_cfg;

#define DIFF_IDS 30 /* 10 on each master */
#define DIFF_STEPS 4000

/* The trace's three stores on one clock, and what it has seen. */
typedef struct diff_run {
    uint64_t seed, now;
    int ids[DIFF_IDS];
    sluice_vclock *clock;
    sluice_store *mem, *one, *cl;
    long steps[TEST_ALGO_N], admitted, refused, mismatches, batches;
} diff_run;

/* The keys one master holds: each on the master serving its slot, counted
   into '*total' and '*misplaced'; its count appended to 'line'. */
static void check_master_keys(int i, long *total, long *misplaced, char *line,
                              size_t cap, size_t *used)
{
    const char *argv[] = {"KEYS", "*"};
    size_t lens[] = {4, 1};
    redisReply *r = rs_cmdargv(&cluster.nodes[i].srv, 2, argv, lens);

    if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY)) {
        if (r != NULL)
            freeReplyObject(r);
        return;
    }
    CHECK(r->elements > 0);
    for (size_t k = 0; k < r->elements; k++) {
        int slot = rc_keyslot(&cluster, r->element[k]->str,
                              r->element[k]->len);

        *misplaced += slot < 0 || cluster.owner[slot] != i;
    }
    *total += (long)r->elements;
    *used += (size_t)snprintf(line + *used, cap - *used, " %d:%zu",
                              cluster.nodes[i].srv.port, r->elements);
    CHECK_EQ_U64(rs_int(&cluster.nodes[i].srv, "DBSIZE"), r->elements);
    freeReplyObject(r);
}

/* Each master holds keys, each on the right master; together the single
   server's. */
static void check_spread(void)
{
    long total = 0, misplaced = 0;
    long long single_keys = rs_int(&single, "DBSIZE");
    char line[256];
    size_t used = 0;

    test_context("keys spread over the masters");
    line[0] = '\0';
    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead && cluster.nodes[i].is_master)
            check_master_keys(i, &total, &misplaced, line, sizeof(line),
                              &used);
    CHECK_EQ_U64(misplaced, 0);
    CHECK_EQ_U64(total, single_keys);
    printf("  keys per master (port:keys):%s; single server %lld\n", line,
           single_keys);
    test_context(NULL);
}

#define BATCH_MAX 40
#define BATCH_IDS 24 /* "batch:N", spread over the masters by their slots */

/*
 * One sluice_hit_many() of up to BATCH_MAX requests over BATCH_IDS ids
 * (named twice or more, often) against one limit: decided by the single
 * server and by the cluster (one script call per slot among the keys) with
 * hit_many, and by the embedded store one hit at a time; every request's
 * answer must match. Answers the mismatches.
 */
static long batch_step(diff_run *r, sluice_algo algo, int step)
{
    /* One limit per algorithm, so each key keeps its window. */
    static const uint64_t maxes[] = {6, 5, 4};
    const int nmax = (int)(sizeof(maxes) / sizeof(maxes[0]));
    sluice_limit lim = SLUICE_LIMIT(algo, maxes[algo % nmax], 120000);
    sluice_request qm[BATCH_MAX], q1[BATCH_MAX], qc[BATCH_MAX];
    uint64_t cap;
    char keys[BATCH_MAX][24];
    size_t n = (size_t)rng_range(1, BATCH_MAX);
    long bad = 0;
    int r1, rc;

    if (algo == SLUICE_GCRA) {
        lim.burst = lim.max - 1; /* a burst below max: costs up to it */
        lim.window_ms++;         /* an interval of no whole ms */
    }
    cap = lim.burst != 0 ? lim.burst : lim.max;
    for (size_t i = 0; i < n; i++) {
        size_t klen = (size_t)snprintf(keys[i], sizeof(keys[i]), "batch:%d",
                                       (int)(rng_next() % BATCH_IDS));
        uint64_t cost = rng_next() % 100 < 80 ? 1 : rng_range(1, cap);

        if (rng_next() % 100 < 2)
            cost = lim.max + 1; /* fails alone */
        qm[i] = (sluice_request){keys[i], klen, cost, 0, {0}};
        q1[i] = qc[i] = qm[i];
    }
    if (exact(algo))
        for (size_t i = 0; i < n; i++)
            qm[i].err = sluice_hit(&qm[i].decision, r->mem, &lim, qm[i].key,
                                   qm[i].key_len, qm[i].cost);
    r1 = sluice_hit_many(r->one, &lim, q1, n);
    rc = sluice_hit_many(r->cl, &lim, qc, n);
    CHECK(r1 == rc);
    for (size_t i = 0; i < n; i++) {
        int same;

        if (!exact(algo))
            same = q1[i].err == qc[i].err &&
                   q1[i].decision.allowed == qc[i].decision.allowed &&
                   q1[i].decision.remaining == qc[i].decision.remaining &&
                   u64_distance(q1[i].decision.retry_after_ms,
                                qc[i].decision.retry_after_ms) <=
                       FIXED_TOLERANCE_MS;
        else
            same = qm[i].err == q1[i].err && q1[i].err == qc[i].err &&
                   decision_same(&qm[i].decision, &q1[i].decision) &&
                   decision_same(&q1[i].decision, &qc[i].decision);
        if (qc[i].err == SLUICE_OK)
            (qc[i].decision.allowed ? r->admitted++ : r->refused++);
        else
            CHECK_RC(qc[i].err, SLUICE_ECOST);
        if (!CHECK(same) && bad++ < 3) {
            fprintf(stderr, "    seed %" PRIu64 " step %d: batch of %zu, "
                    "request %zu: %s %s cost=%" PRIu64 "\n", r->seed, step, n,
                    i, sluice_algo_name(algo), qc[i].key, qc[i].cost);
            if (exact(algo))
                decision_print("embedded", qm[i].err, &qm[i].decision);
            decision_print("single", q1[i].err, &q1[i].decision);
            decision_print("cluster", qc[i].err, &qc[i].decision);
        }
    }
    return bad;
}

/* Ids "user:N", ten served by each master, into r->ids. */
static void pick_ids(diff_run *r)
{
    for (int i = 0, n = 0; n < DIFF_IDS; i++) {
        char id[32];
        int have = 0, owner;

        snprintf(id, sizeof(id), "user:%d", i);
        owner = cluster.owner[test_slot_of_id(id)];
        for (int j = 0; j < n; j++) {
            snprintf(id, sizeof(id), "user:%d", r->ids[j]);
            have += cluster.owner[test_slot_of_id(id)] == owner;
        }
        if (have < DIFF_IDS / 3)
            r->ids[n++] = i;
    }
}

/* The three stores, on one virtual clock at 'r->now'. */
static void diff_open(diff_run *r)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    r->clock = test_vclock_opts(&opts, r->now);
    r->mem = test_store_open("mem://", "", &opts);
    /* The scripts are compared: no local memory of refusals in between. */
    r->one = test_store_open(single.url, engine_query(TEST_CALLER_QUERY),
                             &opts);
    r->cl = test_store_open(cluster.url, engine_query(TEST_CALLER_QUERY),
                            &opts);
}

static void diff_close(diff_run *r)
{
    test_check_engine_used(r->one, engine);
    test_check_engine_used(r->cl, engine);
    sluice_store_free(r->cl);
    sluice_store_free(r->one);
    sluice_store_free(r->mem);
    sluice_vclock_free(r->clock);
}

/* One request of the trace, and what each store answered. */
typedef struct diff_call {
    const char *opname;
    sluice_limit lim;
    char key[32];
    size_t klen;
    uint64_t cost;
    int rm, r1, rc;
    sluice_decision dm, d1, dc;
} diff_call;

/* Sends 'c' (a reset when 'op' < 1, a peek below 30, else a hit) to the
   three stores; the embedded one is not asked for the fixed window. */
static void diff_send(diff_run *r, diff_call *c, unsigned op)
{
    int mem = exact(c->lim.algo);

    c->rm = SLUICE_OK;
    memset(&c->dm, 0, sizeof(c->dm));
    memset(&c->d1, 0, sizeof(c->d1));
    memset(&c->dc, 0, sizeof(c->dc));
    if (op < 1) {
        c->opname = "reset";
        /* Each store's own clock says whether a count was there (two
           servers' keys expire each in its own real time): all must have
           done it. */
        if (mem)
            c->rm = test_reset_rc(sluice_reset(r->mem, &c->lim, c->key,
                                               c->klen));
        c->r1 = test_reset_rc(sluice_reset(r->one, &c->lim, c->key, c->klen));
        c->rc = test_reset_rc(sluice_reset(r->cl, &c->lim, c->key, c->klen));
    } else if (op < 30) {
        c->opname = "peek";
        if (mem)
            c->rm = sluice_peek(&c->dm, r->mem, &c->lim, c->key, c->klen,
                                c->cost);
        c->r1 = sluice_peek(&c->d1, r->one, &c->lim, c->key, c->klen, c->cost);
        c->rc = sluice_peek(&c->dc, r->cl, &c->lim, c->key, c->klen, c->cost);
    } else {
        c->opname = "hit";
        if (mem)
            c->rm = sluice_hit(&c->dm, r->mem, &c->lim, c->key, c->klen,
                               c->cost);
        c->r1 = sluice_hit(&c->d1, r->one, &c->lim, c->key, c->klen, c->cost);
        c->rc = sluice_hit(&c->dc, r->cl, &c->lim, c->key, c->klen, c->cost);
        if (c->rc == SLUICE_OK)
            (c->dc.allowed ? r->admitted++ : r->refused++);
    }
}

/* Checks that the stores agreed on 'c', and prints the first mismatches. */
static void diff_check(diff_run *r, const diff_call *c, int step)
{
    int same;

    if (!exact(c->lim.algo))
        /* Each server's own expiry clock: the waits may differ by the real
           time between the two calls. */
        same = c->r1 == c->rc &&
               decision_close(&c->d1, &c->dc, FIXED_TOLERANCE_MS);
    else
        same = c->rm == c->r1 && c->r1 == c->rc &&
               decision_same(&c->dm, &c->d1) && decision_same(&c->d1, &c->dc);
    CHECK_OK(c->rc);
    r->steps[c->lim.algo]++;
    if (!CHECK(same) && r->mismatches++ < 10) {
        fprintf(stderr,
                "    seed %" PRIu64 " step %d: t=%" PRIu64 " %s %s %s "
                "cost=%" PRIu64 " limit=%" PRIu64 "/%" PRIu64 "ms\n",
                r->seed, step, r->now, c->opname,
                sluice_algo_name(c->lim.algo), c->key, c->cost, c->lim.max,
                c->lim.window_ms);
        if (exact(c->lim.algo))
            decision_print("embedded", c->rm, &c->dm);
        decision_print("single", c->r1, &c->d1);
        decision_print("cluster", c->rc, &c->dc);
    }
}

/*
 * The algorithm of a step, from 'p' in 0 .. 99: those compared exactly
 * take twice the share of the others, and come first. For the three of
 * today: sliding-counter below 40, sliding-log below 80, fixed above.
 */
static sluice_algo pick_algo(unsigned p)
{
    unsigned total = 0, upto = 0;
    int last = 0;

    for (int a = 0; a < TEST_ALGO_N; a++)
        total += exact((sluice_algo)a) ? 2 : 1;
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < TEST_ALGO_N; a++) {
            if (exact((sluice_algo)a) != (pass == 0))
                continue;
            upto += 100 * (exact((sluice_algo)a) ? 2 : 1) / total;
            if (p < upto)
                return (sluice_algo)a;
            last = a;
        }
    return (sluice_algo)last;
}

/* One step of the trace: a random id, algorithm, gap, cost and request. */
static void diff_step(diff_run *r, int step)
{
    static const limit_cfg cfgs[] = {
        {1, 60000},  {2, 60000},   {3, 90000},   {4, 120000},
        {5, 60000},  {8, 3600000}, {10, 600000}, {20, 86400000},
    };
    const int ncfg = (int)(sizeof(cfgs) / sizeof(cfgs[0]));
    int k = r->ids[rng_next() % DIFF_IDS];
    unsigned p = (unsigned)(rng_next() % 100);
    sluice_algo algo = pick_algo(p);
    const limit_cfg *cfg = &cfgs[(k + (int)algo) % ncfg];
    unsigned op = (unsigned)(rng_next() % 100), g;
    diff_call c = {.lim = SLUICE_LIMIT(algo, cfg->max, cfg->window_ms)};

    c.klen = (size_t)snprintf(c.key, sizeof(c.key), "user:%d", k);
    /* gcra: each key its own burst, 1..max, and intervals of no whole
       ms (window / max), where a wait is rounded up. */
    if (algo == SLUICE_GCRA) {
        c.lim.burst = 1 + (uint64_t)k % c.lim.max;
        c.lim.window_ms++;
    }
    /* One clock for all keys: a key sees the sum of the gaps between its
       own steps, about DIFF_IDS x 3 steps apart. */
    g = (unsigned)(rng_next() % 100);
    r->now += g < 60   ? 0
              : g < 90 ? rng_range(1, 50)
              : g < 99 ? rng_range(50, 1000)
                       : rng_range(1000, 60000);
    sluice_vclock_set(r->clock, r->now);
    c.cost = rng_next() % 100 < 70
                 ? 1
                 : rng_range(1, c.lim.burst != 0 ? c.lim.burst : c.lim.max);
    test_context("differential step %d (engine=%s): %s %s cost %" PRIu64,
                 step, engine, sluice_algo_name(algo), c.key, c.cost);
    if (!engine_runs(algo))
        return;
    if (op >= 95) {
        r->mismatches += batch_step(r, algo, step);
        r->batches++;
        return;
    }
    diff_send(r, &c, op);
    diff_check(r, &c, step);
}

static void test_differential(uint64_t seed)
{
    int m[RC_MAX_NODES];
    diff_run r = {.seed = seed, .now = 1700000000000ULL};
    uint64_t t0 = rs_mono_ms();

    rng_state = seed;
    flush_all();
    if (!CHECK(rc_masters_by_slot(&cluster, m) == 3))
        return;
    pick_ids(&r);
    diff_open(&r);
    for (int step = 0; step < DIFF_STEPS; step++)
        diff_step(&r, step);
    printf("  differential, engine=%s: %d steps (", engine, DIFF_STEPS);
    for (int a = 0; a < TEST_ALGO_N; a++)
        printf("%s %ld, ", sluice_algo_name((sluice_algo)a), r.steps[a]);
    printf("hit_many batches %ld), %ld admitted, %ld refused, %ld "
           "mismatches, %" PRIu64 " ms\n", r.batches, r.admitted, r.refused,
           r.mismatches, rs_mono_ms() - t0);
    test_context(NULL);
    check_spread();
    diff_close(&r);
}
/* ---- 1b. One budget, two engines ----------------------------------------- */

/*
 * A Lua client and a module client of the cluster take turns on the same
 * ids (thirty, over the three masters), every algorithm the module
 * decides: each decision must be the embedded store's for the same hit
 * (the fixed window: 'allowed' and 'remaining', its waits being the
 * servers' own PTTL).
 */
static void test_shared_budget(void)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1700000000000ULL);
    sluice_store *mem = test_store_open("mem://", "", &opts), *st[2];
    long admitted = 0, bad = 0;

    test_context("one budget: Lua and module clients of the cluster");
    flush_all();
    st[0] = test_store_open(cluster.url, TEST_CALLER_QUERY "&engine=lua",
                            &opts);
    st[1] = test_store_open(cluster.url, TEST_CALLER_QUERY "&engine=module",
                            &opts);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit lim = SLUICE_LIMIT((sluice_algo)a, 4, 600000);

        for (int i = 0; glue[a] && i < 300; i++) {
            char id[16];
            size_t n = (size_t)snprintf(id, sizeof(id), "shared:%d", i % 30);
            sluice_decision dm, dv;

            sluice_vclock_advance(clock, (uint64_t)(i % 7 == 0));
            CHECK_OK(sluice_hit(&dm, mem, &lim, id, n, 1));
            CHECK_OK(sluice_hit(&dv, st[i % 2], &lim, id, n, 1));
            admitted += dv.allowed;
            if (!CHECK(exact(lim.algo) ? decision_same(&dm, &dv)
                                       : dm.allowed == dv.allowed &&
                                             dm.remaining == dv.remaining) &&
                bad++ < 3) {
                decision_print("embedded", 0, &dm);
                decision_print(i % 2 ? "module" : "lua", 0, &dv);
            }
        }
    }
    CHECK(admitted > 0);
    {
        sluice_store_stats lua, mod;

        CHECK_OK(sluice_store_stats_get(&lua, st[0]));
        CHECK_OK(sluice_store_stats_get(&mod, st[1]));
        CHECK_EQ_U64(lua.module_calls, 0);
        CHECK(mod.module_calls > 0);
    }
    printf("  one budget: Lua and module clients took turns, %ld admitted, "
           "%ld mismatches\n", admitted, bad);
    sluice_store_free(st[1]);
    sluice_store_free(st[0]);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* ---- 2. The queue limiter ------------------------------------------------ */

/* HSET emq:{q}:meta max 'max' duration 60000 (a cap read from the hash
   needs both), on the single server and on the cluster. */
static void set_cap(const char *meta, size_t mlen, const char *max)
{
    const char *argv[] = {"HSET", meta, "max", max, "duration", "60000"};
    size_t lens[] = {4, mlen, 3, strlen(max), 8, 5};
    redisReply *r1 = rs_cmdargv(&single, 6, argv, lens);
    redisReply *rc = rc_cmdargv(&cluster, -1, 6, argv, lens, NULL);

    CHECK(r1 != NULL && r1->type == REDIS_REPLY_INTEGER);
    CHECK(rc != NULL && rc->type == REDIS_REPLY_INTEGER);
    if (r1 != NULL)
        freeReplyObject(r1);
    if (rc != NULL)
        freeReplyObject(rc);
}

static void test_queue_limiter(void)
{
    static const struct {
        const char *name;
        size_t len;
    } queues[] = {
        {"q0", 2}, {"q1", 2}, {"q2", 2}, {"q3", 2}, {"q4", 2}, {"q5", 2},
        {"q6", 2}, {"q7", 2}, {"mail", 4}, {"a{b}", 4}, {"", 0},
        {"\xff\0x", 3}, {"{}", 2}, {"jobs:high", 9},
    };
    const size_t nq = sizeof(queues) / sizeof(queues[0]);
    const uint64_t W = 60000;
    sluice_store *one, *cl;
    int used[RC_MAX_NODES] = {0}, nused = 0;

    test_context("the queue limiter on the cluster");
    one = test_store_open(single.url, engine_query("timeout=5000"), NULL);
    cl = test_store_open(cluster.url, engine_query("timeout=5000"), NULL);
    for (size_t i = 0; i < nq; i++) {
        const char *q = queues[i].name;
        size_t qlen = queues[i].len;
        char lim[128], meta[128];
        size_t llen = test_key_of(lim, sizeof(lim), "emq", q, qlen, "limiter");
        size_t mlen = test_key_of(meta, sizeof(meta), "emq", q, qlen, "meta");
        int slot = rc_keyslot(&cluster, lim, llen);
        uint64_t w1 = 1, wc = 1, c1 = 0, cc = 0, t1 = 0, tc = 0;

        test_context("queue limiter: queue #%zu", i);
        /* One slot for both keys, by the server's reckoning. */
        CHECK(slot >= 0 && slot == rc_keyslot(&cluster, meta, mlen));
        if (slot >= 0 && cluster.owner[slot] >= 0 &&
            used[cluster.owner[slot]]++ == 0)
            nused++;
        /* No cap known: admit. */
        CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 0));
        CHECK_EQ_U64(wc, 0);
        set_cap(meta, mlen, "3");
        for (uint64_t n = 1; n <= 3; n++) {
            CHECK_OK(sluice_emq_rate_limit_ttl(&w1, one, q, qlen, 0));
            CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 0));
            CHECK_EQ_U64(w1, 0);
            CHECK_EQ_U64(wc, 0);
            CHECK_OK(sluice_emq_limiter_incr(&c1, &t1, one, q, qlen, W));
            CHECK_OK(sluice_emq_limiter_incr(&cc, &tc, cl, q, qlen, W));
            CHECK_EQ_U64(c1, n);
            CHECK_EQ_U64(cc, n);
            if (n == 1) {
                CHECK_EQ_U64(t1, W);
                CHECK_EQ_U64(tc, W);
            }
            CHECK(tc > 0 && tc <= W &&
                  u64_distance(t1, tc) <= FIXED_TOLERANCE_MS);
        }
        /* The cap is reached: wait out the window, on both alike. */
        CHECK_OK(sluice_emq_rate_limit_ttl(&w1, one, q, qlen, 0));
        CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 0));
        CHECK(wc > 0 && wc <= W && u64_distance(w1, wc) <= FIXED_TOLERANCE_MS);
        /* An explicit cap overrides the meta hash. */
        CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 4));
        CHECK_EQ_U64(wc, 0);
        /* The keys are where the cluster keeps them. */
        CHECK_EQ_U64(rc_key_intn(&cluster, "GET", lim, llen), 3);
        CHECK_EQ_U64(rc_key_intn(&cluster, "EXISTS", meta, mlen), 1);
    }
    CHECK(nused >= 2);
    printf("  queue limiter, engine=%s: %zu queues over %d masters agree "
           "with the single server\n", engine, nq, nused);
    test_check_engine_used(one, engine);
    test_check_engine_used(cl, engine);
    sluice_store_free(cl);
    sluice_store_free(one);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    uint64_t t0 = rs_mono_ms();

    printf("test_cluster_diff: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (rs_start(&single, rs_module_args()) < 0) {
        fprintf(stderr, "test_cluster_diff: cannot start redis-server\n");
        return 1;
    }
    if (rc_shared_begin(&cluster, "test_cluster_diff") < 0) {
        rs_stop(&single);
        return 1;
    }
    test_seed_down();
    for (int a = 0; a < TEST_ALGO_N; a++)
        glue[a] = rs_module_path() != NULL &&
                  test_module_glue(&single, (sluice_algo)a);
    for (int e = 0; e < 2; e++) {
        engine = e == 0 ? "lua" : "module";
        if (e == 1 && rs_module_path() == NULL) {
            printf("  NOTE: this build made no module: engine=module is not "
                   "compared\n");
            break;
        }
        test_differential(seed);
    }
    if (rs_module_path() != NULL)
        test_shared_budget();
    /* The queue limiter: by script, then by the module. */
    for (int e = 0; e < 2 && (e == 0 || rs_module_path() != NULL); e++) {
        engine = e == 0 ? "lua" : "module";
        flush_all();
        test_queue_limiter();
    }
    rc_shared_close(&cluster);
    rs_stop(&single);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_diff");
}
