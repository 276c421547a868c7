/*
 * test_cluster.c - the cluster store on a real Redis Cluster: the same
 * decisions as one server and as the embedded store, the queue limiter, a
 * live reshard under traffic, a queue split by a migration, and a master
 * stalled, then another killed, mid-run.
 *
 * The test starts its own cluster (redis_cluster.h: six redis-servers on
 * free loopback ports, three masters with a replica each, made by
 * `redis-cli --cluster create`) and a separate private single server, and
 * stops them all on every way out.
 *
 *   1. Differential. One seeded random trace of hits, peeks and resets over
 *      thirty ids, ten served by each master, goes to the embedded store,
 *      the single server and the cluster, all three on one virtual clock
 *      (?clock=caller). Sliding-counter and sliding-log decisions must be
 *      identical in every field, line by line. The fixed window runs on
 *      each server's own expiry clock, so the two servers must agree on
 *      'allowed' and 'remaining' exactly and on the waits within the real
 *      time between the two calls. Windows are a minute or more, so nothing
 *      expires in real time during the run. Afterwards each master must
 *      hold keys, each key on the master that serves its slot (by the
 *      server's own CLUSTER KEYSLOT), and the masters together exactly the
 *      keys the single server holds.
 *   2. Queue limiter. emq:{q}:limiter and emq:{q}:meta share a slot; the
 *      cap is written with HSET through a cluster-aware raw command, and
 *      sluice_emq_rate_limit_ttl() / sluice_emq_limiter_incr() answer on
 *      the cluster as on the single server.
 *   3. Live reshard. Four threads hit many ids (fixed and sliding-log,
 *      one-hour windows; two of them in batches of up to 8 ids with
 *      sluice_hit_many(), whose per-slot calls are queued together and,
 *      when redirected, sent again alone) and a fifth reads and counts
 *      queues, while slots
 *      move: redis-cli --cluster reshard moves 400 slots from one master to
 *      another; four slots are then moved by hand (SETSLOT IMPORTING and
 *      MIGRATING, a pause, MIGRATE one id's keys at a time with pauses, a
 *      pause with every key gone, SETSLOT NODE), so calls meet ASK; and
 *      redis-cli moves the first 400 slots on again. No call may fail;
 *      "tight" limits (max 20) admit exactly 20 of their many attempts;
 *      "wide" ones (max 1000, fewer than 1000 attempts) admit every one; the
 *      servers' counters equal what was admitted and counted; each key ends
 *      on the master that serves its slot; the store counted redirects, and
 *      the servers counted ASKING.
 *   4. A queue split by a migration (its limiter moved, its meta hash not):
 *      the two-key read meets TRYAGAIN and the store gives up after a
 *      bounded number of tries with SLUICE_ECONN; the one-key increment
 *      follows ASK; once both keys have moved, the read follows ASK too.
 *   5. Failover, twice. A master is stopped (SIGSTOP: calls time out), and
 *      later another is killed (SIGKILL: calls are refused), while threads
 *      call ids of its slots and ids of other masters' slots
 *      (?timeout=300&connect_timeout=300). Calls for its slots fail with
 *      SLUICE_ECONN or SLUICE_ETIMEDOUT, each within the timeout plus
 *      slack, only until its replica has been promoted (bounded: 30 s),
 *      then succeed; calls for other slots succeed throughout. The gap, the
 *      failed calls and the slowest call for other slots are printed. The
 *      stopped master is resumed afterwards and rejoins as a replica.
 *      Budgets are not checked across a failover: replication is
 *      asynchronous, so a promoted replica may lack the last writes.
 *
 * Usage: test_cluster [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */
#include "test.h"
#include "rng.h"
#include "cluster.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call must come back within its timeout plus this much slack. */
#define CALL_SLACK_MS 1700
/* After a promotion, the store may need this long to find the new master:
   gossip, a map reread (at most one per 100 ms), a slow machine. */
#define PROMOTION_SLACK_MS 5000
#define FAILOVER_BOUND_MS 30000

static rc_cluster cluster;
static rs_server single;

/* ---- Helpers ------------------------------------------------------------- */

/* The server key of 'id' for algorithm (or queue key) 'suffix'. */
static size_t key_of(char *out, size_t cap, const char *prefix,
                     const char *id, size_t id_len, const char *suffix)
{
    size_t len;

    if (sluice__key_build(out, cap - 1, &len, prefix, id, id_len, suffix) !=
        out)
        exit(2);
    out[len] = '\0';
    return len;
}

/* The slot of id 'id' (all its keys share it; test_cluster_slots checks). */
static unsigned slot_of_id(const char *id)
{
    char k[128];
    size_t len = key_of(k, sizeof(k), "sluice", id, strlen(id), "fixed");

    return sluice__key_slot(k, len);
}

/* The slot of id "user:N". */
static unsigned slot_of_id_n(int n)
{
    char id[32];

    snprintf(id, sizeof(id), "user:%d", n);
    return slot_of_id(id);
}

static sluice_store *open_store(const char *base, const char *query,
                                const sluice_store_opts *opts)
{
    sluice_store *st = NULL;
    char url[600];

    snprintf(url, sizeof(url), "%s%s%s", base, query[0] ? "?" : "", query);
    CHECK_OK(sluice_store_open(&st, url, opts));
    if (st == NULL)
        exit(2);
    return st;
}

/* The live masters, in the order of the lowest slot each serves. */
static int masters_by_slot(int *out)
{
    int n = 0;

    for (int s = 0; s < RC_SLOTS; s++) {
        int o = cluster.owner[s], seen = 0;

        for (int i = 0; i < n; i++)
            seen |= out[i] == o;
        if (o >= 0 && !seen && n < RC_MAX_NODES)
            out[n++] = o;
    }
    return n;
}

/* Runs a command at node 'i' only (no redirection); NULL on failure. */
static redisReply *at_node(int i, int argc, const char **argv,
                           const size_t *lens)
{
    return rs_cmdargv(&cluster.nodes[i].srv, argc, argv, lens);
}

/* An integer reply of a cluster-aware command on one key; -1 if none. */
static long long cluster_int(const char *cmd, const char *key)
{
    const char *argv[] = {cmd, key};
    size_t lens[] = {strlen(cmd), strlen(key)};
    redisReply *r = rc_cmdargv(&cluster, -1, 2, argv, lens, NULL);
    long long v = -1;

    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r != NULL && r->type == REDIS_REPLY_NIL)
        v = 0;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

static int decisions_equal(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms &&
           a->fallback == b->fallback;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

static void decision_print(const char *who, int rc, const sluice_decision *d)
{
    fprintf(stderr,
            "      %-8s rc=%s allowed=%d remaining=%" PRIu64
            " retry_after_ms=%" PRIu64 " reset_after_ms=%" PRIu64 "\n",
            who, sluice_err_name(rc), d->allowed, d->remaining,
            d->retry_after_ms, d->reset_after_ms);
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
             rs_free_port(), cluster.nodes[1].srv.port);
    st = open_store(base, "timeout=2000", NULL);
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
#define FIXED_TOLERANCE_MS 2000

/* Empties the single server and every live master. */
static void flush_all(void)
{
    CHECK(rs_ok(&single, "FLUSHALL") == 0);
    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead && cluster.nodes[i].is_master)
            CHECK(rs_ok(&cluster.nodes[i].srv, "FLUSHALL") == 0);
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
    for (int i = 0; i < cluster.n; i++) {
        const char *argv[] = {"KEYS", "*"};
        size_t lens[] = {4, 1};
        redisReply *r;

        if (cluster.nodes[i].dead || !cluster.nodes[i].is_master)
            continue;
        r = at_node(i, 2, argv, lens);
        if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY)) {
            if (r != NULL)
                freeReplyObject(r);
            continue;
        }
        CHECK(r->elements > 0);
        for (size_t k = 0; k < r->elements; k++) {
            int slot = rc_keyslot(&cluster, r->element[k]->str,
                                  r->element[k]->len);

            misplaced += slot < 0 || cluster.owner[slot] != i;
        }
        total += (long)r->elements;
        used += (size_t)snprintf(line + used, sizeof(line) - used, " %d:%zu",
                                 cluster.nodes[i].srv.port, r->elements);
        CHECK_EQ_U64(rs_int(&cluster.nodes[i].srv, "DBSIZE"), r->elements);
        freeReplyObject(r);
    }
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
static long batch_step(sluice_store *mem, sluice_store *one, sluice_store *cl,
                       sluice_algo algo, uint64_t seed, int step,
                       long *admitted, long *refused)
{
    /* One limit per algorithm, so each key keeps its window. */
    static const uint64_t maxes[] = {6, 5, 4};
    sluice_limit lim = SLUICE_LIMIT(algo, maxes[algo], 120000);
    sluice_request qm[BATCH_MAX], q1[BATCH_MAX], qc[BATCH_MAX];
    char keys[BATCH_MAX][24];
    size_t n = (size_t)rng_range(1, BATCH_MAX);
    long bad = 0;
    int r1, rc;

    for (size_t i = 0; i < n; i++) {
        size_t klen = (size_t)snprintf(keys[i], sizeof(keys[i]), "batch:%d",
                                       (int)(rng_next() % BATCH_IDS));
        uint64_t cost = rng_next() % 100 < 80 ? 1 : rng_range(1, lim.max);

        if (rng_next() % 100 < 2)
            cost = lim.max + 1; /* fails alone */
        qm[i] = (sluice_request){keys[i], klen, cost, 0, {0}};
        q1[i] = qc[i] = qm[i];
    }
    if (algo != SLUICE_FIXED)
        for (size_t i = 0; i < n; i++)
            qm[i].err = sluice_hit(&qm[i].decision, mem, &lim, qm[i].key,
                                   qm[i].key_len, qm[i].cost);
    r1 = sluice_hit_many(one, &lim, q1, n);
    rc = sluice_hit_many(cl, &lim, qc, n);
    CHECK(r1 == rc);
    for (size_t i = 0; i < n; i++) {
        int same;

        if (algo == SLUICE_FIXED)
            same = q1[i].err == qc[i].err &&
                   q1[i].decision.allowed == qc[i].decision.allowed &&
                   q1[i].decision.remaining == qc[i].decision.remaining &&
                   absdiff(q1[i].decision.retry_after_ms,
                           qc[i].decision.retry_after_ms) <=
                       FIXED_TOLERANCE_MS;
        else
            same = qm[i].err == q1[i].err && q1[i].err == qc[i].err &&
                   decisions_equal(&qm[i].decision, &q1[i].decision) &&
                   decisions_equal(&q1[i].decision, &qc[i].decision);
        if (qc[i].err == SLUICE_OK)
            (qc[i].decision.allowed ? (*admitted)++ : (*refused)++);
        else
            CHECK_RC(qc[i].err, SLUICE_ECOST);
        if (!CHECK(same) && bad++ < 3) {
            fprintf(stderr, "    seed %" PRIu64 " step %d: batch of %zu, "
                    "request %zu: %s %s cost=%" PRIu64 "\n", seed, step, n, i,
                    sluice_algo_name(algo), qc[i].key, qc[i].cost);
            if (algo != SLUICE_FIXED)
                decision_print("embedded", qm[i].err, &qm[i].decision);
            decision_print("single", q1[i].err, &q1[i].decision);
            decision_print("cluster", qc[i].err, &qc[i].decision);
        }
    }
    return bad;
}

static void test_differential(uint64_t seed)
{
    static const limit_cfg cfgs[] = {
        {1, 60000},  {2, 60000},   {3, 90000},   {4, 120000},
        {5, 60000},  {8, 3600000}, {10, 600000}, {20, 86400000},
    };
    const int ncfg = (int)(sizeof(cfgs) / sizeof(cfgs[0]));
    sluice_vclock *clock = NULL;
    sluice_store *mem, *one, *cl;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    long steps[3] = {0}, admitted = 0, refused = 0, mismatches = 0;
    long batches = 0;
    uint64_t now = 1700000000000ULL, t0 = rs_mono_ms();
    int ids[DIFF_IDS], m[RC_MAX_NODES];

    rng_state = seed;
    flush_all();
    /* Ids "user:N", ten served by each master. */
    if (!CHECK(masters_by_slot(m) == 3))
        return;
    for (int i = 0, n = 0; n < DIFF_IDS; i++) {
        char id[32];
        int have = 0, owner;

        snprintf(id, sizeof(id), "user:%d", i);
        owner = cluster.owner[slot_of_id(id)];
        for (int j = 0; j < n; j++)
            have += cluster.owner[slot_of_id_n(ids[j])] == owner;
        if (have < DIFF_IDS / 3)
            ids[n++] = i;
    }
    CHECK_OK(sluice_vclock_new(&clock, now));
    if (clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    mem = open_store("mem://", "", &opts);
    /* The scripts are compared: no local memory of refusals in between. */
    one = open_store(single.url, "clock=caller&timeout=5000&refused_cache=off", &opts);
    cl = open_store(cluster.url, "clock=caller&timeout=5000&refused_cache=off", &opts);

    for (int step = 0; step < DIFF_STEPS; step++) {
        int k = ids[rng_next() % DIFF_IDS];
        unsigned p = (unsigned)(rng_next() % 100);
        sluice_algo algo = p < 40   ? SLUICE_SLIDING_COUNTER
                           : p < 80 ? SLUICE_SLIDING_LOG
                                    : SLUICE_FIXED;
        const limit_cfg *cfg = &cfgs[(k + (int)algo) % ncfg];
        sluice_limit lim = SLUICE_LIMIT(algo, cfg->max, cfg->window_ms);
        sluice_decision dm, d1, dc;
        unsigned op = (unsigned)(rng_next() % 100), g;
        uint64_t cost;
        char key[32];
        size_t klen = (size_t)snprintf(key, sizeof(key), "user:%d", k);
        int rm = SLUICE_OK, r1, rc, same;
        const char *opname;

        /* One clock for all keys: a key sees the sum of the gaps between
           its own steps, about DIFF_IDS x 3 steps apart. */
        g = (unsigned)(rng_next() % 100);
        now += g < 60 ? 0
               : g < 90 ? rng_range(1, 50)
               : g < 99 ? rng_range(50, 1000)
                        : rng_range(1000, 60000);
        sluice_vclock_set(clock, now);
        cost = rng_next() % 100 < 70 ? 1 : rng_range(1, lim.max);
        test_context("differential step %d: %s %s cost %" PRIu64, step,
                     sluice_algo_name(algo), key, cost);
        memset(&dm, 0, sizeof(dm));
        memset(&d1, 0, sizeof(d1));
        memset(&dc, 0, sizeof(dc));
        if (op >= 95) {
            mismatches += batch_step(mem, one, cl, algo, seed, step,
                                     &admitted, &refused);
            batches++;
            continue;
        }
        if (op < 1) {
            opname = "reset";
            if (algo != SLUICE_FIXED)
                rm = sluice_reset(mem, &lim, key, klen);
            r1 = sluice_reset(one, &lim, key, klen);
            rc = sluice_reset(cl, &lim, key, klen);
        } else if (op < 30) {
            opname = "peek";
            if (algo != SLUICE_FIXED)
                rm = sluice_peek(&dm, mem, &lim, key, klen, cost);
            r1 = sluice_peek(&d1, one, &lim, key, klen, cost);
            rc = sluice_peek(&dc, cl, &lim, key, klen, cost);
        } else {
            opname = "hit";
            if (algo != SLUICE_FIXED)
                rm = sluice_hit(&dm, mem, &lim, key, klen, cost);
            r1 = sluice_hit(&d1, one, &lim, key, klen, cost);
            rc = sluice_hit(&dc, cl, &lim, key, klen, cost);
            if (rc == SLUICE_OK)
                (dc.allowed ? admitted++ : refused++);
        }
        if (algo == SLUICE_FIXED) {
            /* Each server's own expiry clock: the waits may differ by the
               real time between the two calls. */
            same = r1 == rc && d1.allowed == dc.allowed &&
                   d1.remaining == dc.remaining && d1.limit == dc.limit &&
                   d1.fallback == dc.fallback &&
                   absdiff(d1.retry_after_ms, dc.retry_after_ms) <=
                       FIXED_TOLERANCE_MS &&
                   absdiff(d1.reset_after_ms, dc.reset_after_ms) <=
                       FIXED_TOLERANCE_MS;
        } else {
            same = rm == r1 && r1 == rc && decisions_equal(&dm, &d1) &&
                   decisions_equal(&d1, &dc);
        }
        CHECK_OK(rc);
        steps[algo]++;
        if (!CHECK(same) && mismatches++ < 10) {
            fprintf(stderr,
                    "    seed %" PRIu64 " step %d: t=%" PRIu64 " %s %s %s "
                    "cost=%" PRIu64 " limit=%" PRIu64 "/%" PRIu64 "ms\n",
                    seed, step, now, opname, sluice_algo_name(algo), key,
                    cost, lim.max, lim.window_ms);
            if (algo != SLUICE_FIXED)
                decision_print("embedded", rm, &dm);
            decision_print("single", r1, &d1);
            decision_print("cluster", rc, &dc);
        }
    }
    printf("  differential: %d steps (counter %ld, log %ld, fixed %ld, "
           "hit_many batches %ld), %ld admitted, %ld refused, %ld "
           "mismatches, %" PRIu64 " ms\n",
           DIFF_STEPS, steps[SLUICE_SLIDING_COUNTER],
           steps[SLUICE_SLIDING_LOG], steps[SLUICE_FIXED], batches, admitted,
           refused, mismatches, rs_mono_ms() - t0);
    test_context(NULL);
    check_spread();
    sluice_store_free(cl);
    sluice_store_free(one);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
}

/* ---- 2. The queue limiter ------------------------------------------------ */

/* HSET emq:{q}:meta max 'max', on the single server and on the cluster. */
static void set_cap(const char *meta, size_t mlen, const char *max)
{
    const char *argv[] = {"HSET", meta, "max", max};
    size_t lens[] = {4, mlen, 3, strlen(max)};
    redisReply *r1 = rs_cmdargv(&single, 4, argv, lens);
    redisReply *rc = rc_cmdargv(&cluster, -1, 4, argv, lens, NULL);

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
    one = open_store(single.url, "timeout=5000", NULL);
    cl = open_store(cluster.url, "timeout=5000", NULL);
    for (size_t i = 0; i < nq; i++) {
        const char *q = queues[i].name;
        size_t qlen = queues[i].len;
        char lim[128], meta[128];
        size_t llen = key_of(lim, sizeof(lim), "emq", q, qlen, "limiter");
        size_t mlen = key_of(meta, sizeof(meta), "emq", q, qlen, "meta");
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
            CHECK(tc > 0 && tc <= W && absdiff(t1, tc) <= FIXED_TOLERANCE_MS);
        }
        /* The cap is reached: wait out the window, on both alike. */
        CHECK_OK(sluice_emq_rate_limit_ttl(&w1, one, q, qlen, 0));
        CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 0));
        CHECK(wc > 0 && wc <= W && absdiff(w1, wc) <= FIXED_TOLERANCE_MS);
        /* An explicit cap overrides the meta hash. */
        CHECK_OK(sluice_emq_rate_limit_ttl(&wc, cl, q, qlen, 4));
        CHECK_EQ_U64(wc, 0);
        /* The keys are where the cluster keeps them. */
        CHECK_EQ_U64(cluster_int("GET", lim), 3);
        CHECK_EQ_U64(cluster_int("EXISTS", meta), 1);
    }
    CHECK(nused >= 2);
    printf("  queue limiter: %zu queues over %d masters agree with the "
           "single server\n", nq, nused);
    sluice_store_free(cl);
    sluice_store_free(one);
    test_context(NULL);
}

/* ---- 3. A live reshard --------------------------------------------------- */

#define TIGHT_MAX 20
#define WIDE_MAX 1000
#define RESHARD_THREADS 4
/* Each thread hits each wide limit at most this often: 4 x 240 < 1000. */
#define WIDE_PER_THREAD 240
#define HAND_SLOTS 4

typedef struct tracked {
    char id[24];
    sluice_limit lim;
    int tight;
    unsigned slot;
    atomic_long attempts, admitted;
} tracked;

static tracked *tracks;
static int ntracks;

typedef struct hammer {
    sluice_store *st;
    int index;
    atomic_int *stop;
    long calls, errors;
    char first_error[256];
    int *wide_hits; /* per track */
} hammer;

#define RESHARD_BATCH 8

/*
 * The batching threads' turn: up to RESHARD_BATCH tracked ids of one limit,
 * from track 'k' on, decided by one sluice_hit_many() (one script call per
 * slot among them, queued together), counted like single hits.
 */
static void hammer_batch(hammer *h, int k)
{
    sluice_request q[RESHARD_BATCH];
    int which[RESHARD_BATCH], n = 0;
    const sluice_limit *lim = &tracks[k].lim;

    for (int j = k; j < ntracks && n < RESHARD_BATCH; j++) {
        tracked *t = &tracks[j];

        if (t->lim.algo != lim->algo || t->lim.max != lim->max ||
            t->lim.window_ms != lim->window_ms ||
            (!t->tight && h->wide_hits[j] >= WIDE_PER_THREAD))
            continue;
        if (!t->tight)
            h->wide_hits[j]++;
        q[n] = (sluice_request){t->id, strlen(t->id), 1, 0, {0}};
        which[n++] = j;
    }
    if (n > 0)
        sluice_hit_many(h->st, lim, q, (size_t)n);
    for (int i = 0; i < n; i++) {
        tracked *t = &tracks[which[i]];

        h->calls++;
        if (q[i].err != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "hit_many: %s: %s", sluice_err_name(q[i].err),
                         sluice_last_error());
            continue;
        }
        atomic_fetch_add(&t->attempts, 1);
        if (q[i].decision.allowed)
            atomic_fetch_add(&t->admitted, 1);
    }
}

/*
 * One thread of traffic: hits every tracked limit in turn (each thread
 * starting elsewhere) until told to stop, a wide limit at most
 * WIDE_PER_THREAD times, and counts attempts, admissions and errors. Odd
 * threads decide batches (hammer_batch).
 */
static void *hammer_run(void *arg)
{
    hammer *h = arg;
    unsigned i = (unsigned)h->index * 7;

    while (!atomic_load(h->stop)) {
        if (h->index % 2 == 1) {
            hammer_batch(h, (int)(i++ % (unsigned)ntracks));
            continue;
        }
        int k = (int)(i++ % (unsigned)ntracks);
        tracked *t = &tracks[k];
        sluice_decision d;
        int rc;

        if (!t->tight && h->wide_hits[k] >= WIDE_PER_THREAD)
            continue;
        if (!t->tight)
            h->wide_hits[k]++;
        rc = sluice_hit(&d, h->st, &t->lim, t->id, strlen(t->id), 1);
        h->calls++;
        if (rc != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "%s: %s", sluice_err_name(rc), sluice_last_error());
            continue;
        }
        atomic_fetch_add(&t->attempts, 1);
        if (d.allowed)
            atomic_fetch_add(&t->admitted, 1);
    }
    return NULL;
}

/*
 * Queues hammered during the reshard: the two-key read (limiter and meta)
 * and the increment. Every successful increment must be counted once.
 */
#define RESHARD_QUEUES 12

typedef struct tracked_queue {
    char name[24];
    unsigned slot;
    atomic_long incrs;
} tracked_queue;

static tracked_queue queues[RESHARD_QUEUES];

/* The queue thread: the read, then the increment, each queue in turn. */
static void *queue_run(void *arg)
{
    hammer *h = arg;
    unsigned i = 0;

    while (!atomic_load(h->stop)) {
        tracked_queue *q = &queues[i++ % RESHARD_QUEUES];
        uint64_t wait = 0, count = 0;
        int rc = sluice_emq_rate_limit_ttl(&wait, h->st, q->name,
                                           strlen(q->name), 0);

        if (rc == SLUICE_OK)
            rc = sluice_emq_limiter_incr(&count, NULL, h->st, q->name,
                                         strlen(q->name), 3600000);
        h->calls++;
        if (rc != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "queue %s: %s: %s", q->name, sluice_err_name(rc),
                         sluice_last_error());
            continue;
        }
        atomic_fetch_add(&q->incrs, 1);
    }
    return NULL;
}

/* The slot of queue 'name' (its limiter key). */
static unsigned slot_of_queue(const char *name)
{
    char k[128];
    size_t len = key_of(k, sizeof(k), "emq", name, strlen(name), "limiter");

    return sluice__key_slot(k, len);
}

/* Sum of ASKING commands the masters have run since CONFIG RESETSTAT. */
static long asking_calls(void)
{
    long total = 0;

    for (int i = 0; i < cluster.n; i++) {
        if (cluster.nodes[i].dead)
            continue;
        total += (long)rs_calls(&cluster.nodes[i].srv, "asking");
    }
    return total;
}

/* MIGRATE of 'n' keys from node 'from' to node 'to' in one atomic step. */
static int migrate_keys(int from, int to, const redisReply *const *keys,
                        size_t n)
{
    char port[16];
    const char *argv[16];
    size_t lens[16];
    int argc = 0;
    redisReply *m;

    if (n > 10)
        return -1;
    snprintf(port, sizeof(port), "%d", cluster.nodes[to].srv.port);
    argv[argc] = "MIGRATE";
    lens[argc++] = 7;
    argv[argc] = "127.0.0.1";
    lens[argc++] = 9;
    argv[argc] = port;
    lens[argc++] = strlen(port);
    argv[argc] = "";
    lens[argc++] = 0;
    argv[argc] = "0";
    lens[argc++] = 1;
    argv[argc] = "5000";
    lens[argc++] = 4;
    argv[argc] = "KEYS";
    lens[argc++] = 4;
    for (size_t i = 0; i < n; i++) {
        argv[argc] = keys[i]->str;
        lens[argc++] = keys[i]->len;
    }
    m = at_node(from, argc, argv, lens);
    if (m == NULL || m->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "    MIGRATE: %s\n", m ? m->str : "no reply");
        if (m != NULL)
            freeReplyObject(m);
        return -1;
    }
    freeReplyObject(m);
    return 0;
}

/* The hashtag of a key ("{...}" with its braces), or the whole key. */
static size_t tag_of(const char *key, size_t len, const char **tag)
{
    const char *open = memchr(key, '{', len), *close;

    *tag = key;
    if (open == NULL ||
        (close = memchr(open, '}', len - (size_t)(open - key))) == NULL)
        return len;
    *tag = open;
    return (size_t)(close - open) + 1;
}

/* SETSLOT NODE 'to' at the target, then the source, then the others. */
static int slot_set_owner(int slot, int from, int to)
{
    if (rs_ok(&cluster.nodes[to].srv, "CLUSTER SETSLOT %d NODE %s", slot,
              cluster.nodes[to].id) < 0 ||
        rs_ok(&cluster.nodes[from].srv, "CLUSTER SETSLOT %d NODE %s", slot,
              cluster.nodes[to].id) < 0)
        return -1;
    for (int i = 0; i < cluster.n; i++)
        if (i != from && i != to && !cluster.nodes[i].dead &&
            cluster.nodes[i].is_master)
            rs_ok(&cluster.nodes[i].srv, "CLUSTER SETSLOT %d NODE %s", slot,
                  cluster.nodes[to].id);
    return 0;
}

/* SETSLOT IMPORTING at the target, then MIGRATING at the source. */
static int slot_open(int slot, int from, int to)
{
    if (rs_ok(&cluster.nodes[to].srv, "CLUSTER SETSLOT %d IMPORTING %s", slot,
              cluster.nodes[from].id) < 0 ||
        rs_ok(&cluster.nodes[from].srv, "CLUSTER SETSLOT %d MIGRATING %s",
              slot, cluster.nodes[to].id) < 0)
        return -1;
    return 0;
}

/*
 * Moves 'slot' from master 'from' to master 'to' by hand, slowly: open
 * the slot and wait (keys that exist are served by the source, new ones
 * meet ASK), move one id at a time (all the keys of one hashtag in one
 * MIGRATE, as redis-cli's batches mostly do) with 'pause_ms' between, wait
 * with every key gone (every call meets ASK), then SETSLOT NODE. Returns
 * the keys moved, or -1.
 */
static int move_slot_by_hand(int slot, int from, int to, uint64_t pause_ms)
{
    int moved = 0;

    if (slot_open(slot, from, to) < 0)
        return -1;
    rs_sleep_ms(pause_ms * 5);
    for (;;) {
        redisReply *r = rs_cmd(&cluster.nodes[from].srv,
                               "CLUSTER GETKEYSINSLOT %d 100", slot);
        const redisReply *batch[10];
        const char *tag, *other;
        size_t tlen, n = 0;

        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            if (r != NULL)
                freeReplyObject(r);
            return -1;
        }
        if (r->elements == 0) {
            freeReplyObject(r);
            break;
        }
        tlen = tag_of(r->element[0]->str, r->element[0]->len, &tag);
        for (size_t i = 0; i < r->elements && n < 10; i++)
            if (tag_of(r->element[i]->str, r->element[i]->len, &other) ==
                    tlen &&
                memcmp(other, tag, tlen) == 0)
                batch[n++] = r->element[i];
        if (migrate_keys(from, to, batch, n) < 0) {
            freeReplyObject(r);
            return -1;
        }
        moved += (int)n;
        freeReplyObject(r);
        rs_sleep_ms(pause_ms);
    }
    rs_sleep_ms(pause_ms * 5);
    if (slot_set_owner(slot, from, to) < 0)
        return -1;
    return moved;
}

/* Adds 'n' tracked ids (fixed and sliding-log each) whose slot 'pick' likes. */
static void track_ids(int n, int tight, int (*pick)(unsigned, void *),
                      void *payload, int *next_candidate)
{
    while (n > 0) {
        char id[24];
        unsigned slot;

        snprintf(id, sizeof(id), "r%d", (*next_candidate)++);
        slot = slot_of_id(id);
        if (!pick(slot, payload))
            continue;
        for (int a = 0; a < 2; a++) {
            tracked *t = &tracks[ntracks++];

            snprintf(t->id, sizeof(t->id), "%s", id);
            t->lim.algo = a == 0 ? SLUICE_FIXED : SLUICE_SLIDING_LOG;
            t->lim.max = tight ? TIGHT_MAX : WIDE_MAX;
            t->lim.window_ms = 3600000;
            t->tight = tight;
            t->slot = slot;
            atomic_init(&t->attempts, 0);
            atomic_init(&t->admitted, 0);
        }
        n--;
    }
}

typedef struct slot_range {
    unsigned lo, hi;
} slot_range;

/* Slot pickers for track_ids(): in a range, in the hand-moved set, or
   in neither. */
static int pick_in_range(unsigned slot, void *p)
{
    const slot_range *r = p;

    return slot >= r->lo && slot <= r->hi;
}

static int pick_in_set(unsigned slot, void *p)
{
    const int *set = p;

    for (int i = 0; i < HAND_SLOTS; i++)
        if ((unsigned)set[i] == slot)
            return 1;
    return 0;
}

static int pick_other(unsigned slot, void *p)
{
    const int *set = p;
    /* Neither among the first 400 slots nor a slot moved by hand. */
    return slot >= 400 && !pick_in_set(slot, (void *)set);
}

/* See the top of this file (3.) for what is moved and what must hold. */
static void test_reshard(void)
{
    int m[RC_MAX_NODES], hand[HAND_SLOTS], candidate = 0;
    slot_range first400;
    hammer hs[RESHARD_THREADS + 1];
    pthread_t tid[RESHARD_THREADS + 1];
    atomic_int stop;
    sluice_store *st;
    sluice_store_stats stats;
    uint64_t t0, t1, t2, t3, t4;
    long calls = 0, errors = 0, tight_ok = 0, wide_ok = 0, by_hand = 0;
    long asking;

    test_context("live reshard");
    flush_all();
    if (!CHECK(masters_by_slot(m) == 3))
        return;
    /* redis-cli moves a master's lowest slots: m[0]'s first 400 go to
       m[1], and later on to m[2]. */
    first400.lo = 0;
    first400.hi = 399;
    CHECK(cluster.owner[0] == m[0] && cluster.owner[399] == m[0]);
    /* Slots moved by hand, from m[2] to m[0]: those of the first ids that
       fall in m[2]'s slots. */
    for (int i = 0, k = 0; k < HAND_SLOTS; i++) {
        char id[24];
        unsigned slot;
        int dup = 0;

        snprintf(id, sizeof(id), "h%d", i);
        slot = slot_of_id(id);
        for (int j = 0; j < k; j++)
            dup |= hand[j] == (int)slot;
        if (cluster.owner[slot] == m[2] && !dup)
            hand[k++] = (int)slot;
    }
    tracks = calloc(2 * (24 + 96), sizeof(*tracks));
    if (tracks == NULL)
        exit(2);
    ntracks = 0;
    track_ids(10, 1, pick_in_range, &first400, &candidate);
    track_ids(6, 1, pick_in_set, hand, &candidate);
    track_ids(8, 1, pick_other, hand, &candidate);
    track_ids(40, 0, pick_in_range, &first400, &candidate);
    track_ids(16, 0, pick_in_set, hand, &candidate);
    track_ids(40, 0, pick_other, hand, &candidate);
    /* Queues: half in the first 400 slots, half in the slots moved by
       hand (their two keys move one at a time there: TRYAGAIN), each with
       a cap in its meta hash that is never reached. */
    for (int i = 0, n = 0; n < RESHARD_QUEUES; i++) {
        tracked_queue *q = &queues[n];
        char meta[128];
        size_t mlen;

        snprintf(q->name, sizeof(q->name), "eq%d", i);
        q->slot = slot_of_queue(q->name);
        if (!(n % 2 == 0 ? q->slot < 400 : pick_in_set(q->slot, hand)))
            continue;
        atomic_init(&q->incrs, 0);
        mlen = key_of(meta, sizeof(meta), "emq", q->name, strlen(q->name),
                      "meta");
        {
            const char *argv[] = {"HSET", meta, "max", "100000000"};
            size_t lens[] = {4, mlen, 3, 9};
            redisReply *r = rc_cmdargv(&cluster, -1, 4, argv, lens, NULL);

            CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
            if (r != NULL)
                freeReplyObject(r);
        }
        n++;
    }
    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead)
            rs_ok(&cluster.nodes[i].srv, "CONFIG RESETSTAT");

    st = open_store(cluster.url, "timeout=5000&connect_timeout=5000&pool=4",
                    NULL);
    atomic_init(&stop, 0);
    for (int i = 0; i < RESHARD_THREADS; i++) {
        memset(&hs[i], 0, sizeof(hs[i]));
        hs[i].st = st;
        hs[i].index = i;
        hs[i].stop = &stop;
        hs[i].wide_hits = calloc((size_t)ntracks, sizeof(int));
        if (hs[i].wide_hits == NULL)
            exit(2);
        pthread_create(&tid[i], NULL, hammer_run, &hs[i]);
    }
    memset(&hs[RESHARD_THREADS], 0, sizeof(hs[0]));
    hs[RESHARD_THREADS].st = st;
    hs[RESHARD_THREADS].stop = &stop;
    pthread_create(&tid[RESHARD_THREADS], NULL, queue_run,
                   &hs[RESHARD_THREADS]);
    t0 = rs_mono_ms();
    rs_sleep_ms(200);
    /* Phase 1: redis-cli moves m[0]'s first 400 slots to m[1]. */
    CHECK(rc_reshard(&cluster, m[0], m[1], 400) == 0);
    CHECK(cluster.owner[0] == m[1] && cluster.owner[399] == m[1]);
    t1 = rs_mono_ms();
    /* Phase 2: a few slots from m[2] to m[0] by hand, slowly (ASK). */
    for (int i = 0; i < HAND_SLOTS; i++) {
        int moved = move_slot_by_hand(hand[i], m[2], m[0], 20);

        CHECK(moved >= 0);
        by_hand += moved;
    }
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    for (int i = 0; i < HAND_SLOTS; i++)
        CHECK(cluster.owner[hand[i]] == m[0]);
    t2 = rs_mono_ms();
    /* Phase 3: redis-cli moves m[1]'s lowest 400 (the same slots) to
       m[2]. */
    CHECK(rc_reshard(&cluster, m[1], m[2], 400) == 0);
    CHECK(cluster.owner[0] == m[2] && cluster.owner[399] == m[2]);
    t3 = rs_mono_ms();
    rs_sleep_ms(200);
    atomic_store(&stop, 1);
    for (int i = 0; i <= RESHARD_THREADS; i++) {
        pthread_join(tid[i], NULL);
        calls += hs[i].calls;
        errors += hs[i].errors;
        if (hs[i].errors > 0)
            fprintf(stderr, "    thread %d: %ld errors, the first: %s\n", i,
                    hs[i].errors, hs[i].first_error);
        free(hs[i].wide_hits);
    }
    t4 = rs_mono_ms();

    /* No error reached the caller; no budget was exceeded. */
    CHECK_EQ_U64(errors, 0);
    for (int i = 0; i < ntracks; i++) {
        tracked *t = &tracks[i];
        long att = atomic_load(&t->attempts), adm = atomic_load(&t->admitted);
        char key[128];
        long long held;

        key_of(key, sizeof(key), "sluice", t->id, strlen(t->id),
               sluice_algo_name(t->lim.algo));
        held = t->lim.algo == SLUICE_FIXED ? cluster_int("GET", key)
                                           : cluster_int("ZCARD", key);
        test_context("live reshard: %s %s (slot %u, %s): %ld admitted of "
                     "%ld, the server holds %lld",
                     sluice_algo_name(t->lim.algo), t->id, t->slot,
                     t->tight ? "tight" : "wide", adm, att, held);
        if (t->tight) {
            CHECK(att > TIGHT_MAX);
            tight_ok += CHECK_EQ_U64(adm, TIGHT_MAX);
        } else {
            CHECK(att > 0 && att < WIDE_MAX);
            wide_ok += CHECK_EQ_U64(adm, att);
        }
        CHECK_EQ_U64(held, adm);
        /* The key is at the master that now serves its slot. */
        {
            const char *argv[] = {"EXISTS", key};
            size_t lens[] = {6, strlen(key)};
            int owner = cluster.owner[t->slot];
            redisReply *r = owner >= 0 ? at_node(owner, 2, argv, lens) : NULL;

            CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER &&
                  r->integer == 1);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    for (int i = 0; i < RESHARD_QUEUES; i++) {
        char lim[128];
        long incrs = atomic_load(&queues[i].incrs);
        long long held;

        key_of(lim, sizeof(lim), "emq", queues[i].name,
               strlen(queues[i].name), "limiter");
        held = cluster_int("GET", lim);
        test_context("live reshard: queue %s (slot %u): %ld increments, the "
                     "server holds %lld", queues[i].name, queues[i].slot,
                     incrs, held);
        CHECK(incrs > 0);
        CHECK_EQ_U64(held, incrs);
    }
    test_context("live reshard");
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK(stats.redirects > 0);
    CHECK_EQ_U64(stats.errors, 0);
    asking = asking_calls();
    CHECK(asking > 0);
    printf("  reshard: %ld calls by %d threads in %" PRIu64 " ms (redis-cli "
           "400 slots %" PRIu64 " ms; by hand %d slots, %ld keys, %" PRIu64
           " ms; redis-cli again %" PRIu64 " ms); %ld errors; %" PRIu64
           " redirects followed, %ld ASKING; tight %ld/%d exact, wide "
           "%ld/%d exact; %ld queue reads and increments\n",
           calls, RESHARD_THREADS, t4 - t0, t1 - t0 - 200, HAND_SLOTS,
           by_hand, t2 - t1, t3 - t2, errors, stats.redirects, asking,
           tight_ok, 2 * 24, wide_ok, 2 * 96, hs[RESHARD_THREADS].calls);
    sluice_store_free(st);
    free(tracks);
    tracks = NULL;
    test_context(NULL);
}

/* ---- 4. A queue split by a migration ------------------------------------- */

/* A counter from INFO errorstats of node 'i' ("errorstat_NAME:count=N"). */
static long error_count(int i, const char *name)
{
    redisReply *r = rs_cmd(&cluster.nodes[i].srv, "INFO errorstats");
    char field[64];
    const char *p;
    long n = 0;

    snprintf(field, sizeof(field), "errorstat_%s:count=", name);
    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, field)) != NULL)
        n = strtol(p + strlen(field), NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/*
 * A queue whose two keys are split by a migration: the limiter has moved,
 * the meta hash has not. The source answers the two-key read TRYAGAIN for
 * as long as the split lasts; the store tries again a bounded number of
 * times (today MAX_HOPS, with short sleeps: about 75 ms in all), within the
 * command timeout, and then gives up with SLUICE_ECONN. The
 * one-key increment meanwhile follows ASK to the limiter's new node. Once
 * both keys have moved, the read follows ASK too.
 */
static void test_split_queue(void)
{
    int m[RC_MAX_NODES], from, to, slot;
    char q[24], lim[128], meta[128];
    size_t llen, mlen;
    sluice_store *st;
    uint64_t wait = 7, count = 0, t0, took_ms;
    redisReply *r;
    int rc;
    long tryagain;

    test_context("a queue split by a migration");
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    if (!CHECK(masters_by_slot(m) == 3))
        return;
    from = m[0];
    to = m[1];
    for (int i = 0;; i++) {
        snprintf(q, sizeof(q), "split%d", i);
        if (cluster.owner[slot_of_queue(q)] == from)
            break;
    }
    slot = (int)slot_of_queue(q);
    llen = key_of(lim, sizeof(lim), "emq", q, strlen(q), "limiter");
    mlen = key_of(meta, sizeof(meta), "emq", q, strlen(q), "meta");
    st = open_store(cluster.url, "timeout=2000", NULL);
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, q, strlen(q), 3600000));
    CHECK_EQ_U64(count, 1);
    {
        const char *argv[] = {"HSET", meta, "max", "5"};
        size_t lens[] = {4, mlen, 3, 1};

        r = rc_cmdargv(&cluster, -1, 4, argv, lens, NULL);
        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
        if (r != NULL)
            freeReplyObject(r);
    }
    CHECK(slot_open(slot, from, to) == 0);
    {
        redisReply lr = {.type = REDIS_REPLY_STRING, .str = lim, .len = llen};
        const redisReply *one[] = {&lr};

        CHECK(migrate_keys(from, to, one, 1) == 0);
    }
    rs_ok(&cluster.nodes[from].srv, "CONFIG RESETSTAT");
    /* Split: the two-key read meets TRYAGAIN until the store gives up. */
    t0 = rs_mono_us();
    rc = sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0);
    took_ms = (rs_mono_us() - t0) / 1000;
    tryagain = error_count(from, "TRYAGAIN");
    CHECK_RC(rc, SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    CHECK(took_ms < 2000 + CALL_SLACK_MS);
    CHECK(tryagain >= 5); /* at least MAX_HOPS tries, within the timeout */
    /* The one-key increment follows ASK to where the limiter is. */
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, q, strlen(q), 3600000));
    CHECK_EQ_U64(count, 2);
    /* Both keys moved: the read follows ASK as well. */
    {
        redisReply mr = {.type = REDIS_REPLY_STRING, .str = meta,
                         .len = mlen};
        const redisReply *one[] = {&mr};

        CHECK(migrate_keys(from, to, one, 1) == 0);
    }
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(slot_set_owner(slot, from, to) == 0);
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 2));
    CHECK(wait > 0); /* 2 of a cap of 2, read at its new home */
    printf("  split queue: the two-key read gave up after %ld TRYAGAIN in "
           "%" PRIu64 " ms (%s); the increment and, once both keys had "
           "moved, the read followed ASK\n",
           tryagain, took_ms, sluice_err_name(rc));
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- 5. A master stalled or killed mid-run ------------------------------- */

#define FO_THREADS 4
#define FO_MAX_CALLS 200000

typedef struct call_rec {
    uint64_t start_us, end_us;
    int rc;
} call_rec;

typedef struct fo_thread {
    sluice_store *st;
    char (*ids)[24];
    int nids;
    atomic_int *stop;
    atomic_uint_fast64_t *last_ok_us;
    call_rec *calls;
    size_t n;
} fo_thread;

/*
 * One thread of the failover run: hits its ids in turn, recording when
 * each call started and ended and what it answered, and the end of its
 * latest success in '*last_ok_us' (if given).
 */
static void *fo_run(void *arg)
{
    fo_thread *t = arg;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000000, 3600000);
    int i = 0;

    while (!atomic_load(t->stop) && t->n < FO_MAX_CALLS) {
        call_rec *c = &t->calls[t->n++];
        const char *id = t->ids[i++ % t->nids];
        sluice_decision d;

        c->start_us = rs_mono_us();
        c->rc = sluice_hit(&d, t->st, &lim, id, strlen(id), 1);
        c->end_us = rs_mono_us();
        if (c->rc == SLUICE_OK && t->last_ok_us != NULL)
            atomic_store(t->last_ok_us, c->end_us);
        /* A steady stream, not a spin: failures come back at once. */
        rs_sleep_ms(c->rc == SLUICE_OK ? 1 : 5);
    }
    return NULL;
}

/*
 * 'stall' 0: the master is killed (SIGKILL). 1: it is stopped (SIGSTOP):
 * it keeps its sockets and answers nothing, so calls time out instead of
 * being refused; once its replica has taken over it is resumed, and
 * rejoins as a replica.
 */
static void test_failover(int stall)
{
    static char dead_ids[16][24], live_ids[16][24];
    int m[RC_MAX_NODES], victim, promoted = -1, nd = 0, nl = 0;
    fo_thread th[FO_THREADS];
    pthread_t tid[FO_THREADS];
    atomic_int stop;
    atomic_uint_fast64_t dead_ok_us;
    sluice_store *st;
    sluice_store_stats stats;
    uint64_t kill_us, promoted_us = 0, deadline, first_ok_after_us = 0;
    uint64_t worst_fail_us = 0, worst_live_us = 0, last_fail_end_us = 0;
    long dead_failed = 0, dead_ok = 0, live_ok = 0, live_failed = 0, bad = 0;
    long late_fail = 0, slow = 0, live_over_100ms = 0;
    const uint64_t timeout_ms = 300;

    test_context(stall ? "a master stalled mid-run" : "a master killed "
                 "mid-run");
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    if (!CHECK(masters_by_slot(m) == 3))
        return;
    /* A master with a replica: the first in the seed list when stalled
       (the store asks the seeds for the map in order), the last when
       killed. */
    victim = -1;
    for (int i = 0; i < cluster.n; i++) {
        int has_replica = 0;

        for (int k = 0; k < cluster.n; k++)
            has_replica |=
                !cluster.nodes[k].dead && cluster.nodes[k].master == i;
        if (cluster.nodes[i].is_master && !cluster.nodes[i].dead &&
            has_replica && (victim < 0 || !stall))
            victim = i;
    }
    if (!CHECK(victim >= 0))
        return;
    for (int i = 0; nd < 16 || nl < 16; i++) {
        char id[24];
        int owner;

        snprintf(id, sizeof(id), "f%d", i);
        owner = cluster.owner[slot_of_id(id)];
        if (owner == victim && nd < 16)
            snprintf(dead_ids[nd++], 24, "%s", id);
        else if (owner != victim && nl < 16)
            snprintf(live_ids[nl++], 24, "%s", id);
    }
    st = open_store(cluster.url, "timeout=300&connect_timeout=300", NULL);
    /* Warm up: connections and the map. */
    for (int i = 0; i < 16; i++) {
        sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000000, 3600000);
        sluice_decision d;

        CHECK_OK(sluice_hit(&d, st, &lim, dead_ids[i], strlen(dead_ids[i]),
                            1));
        CHECK_OK(sluice_hit(&d, st, &lim, live_ids[i], strlen(live_ids[i]),
                            1));
    }
    atomic_init(&stop, 0);
    atomic_init(&dead_ok_us, 0);
    for (int i = 0; i < FO_THREADS; i++) {
        int dead = i < FO_THREADS / 2;

        th[i].st = st;
        th[i].ids = dead ? dead_ids : live_ids;
        th[i].nids = 16;
        th[i].stop = &stop;
        th[i].last_ok_us = dead ? &dead_ok_us : NULL;
        th[i].n = 0;
        th[i].calls = calloc(FO_MAX_CALLS, sizeof(call_rec));
        if (th[i].calls == NULL)
            exit(2);
        pthread_create(&tid[i], NULL, fo_run, &th[i]);
    }
    rs_sleep_ms(300);
    kill_us = rs_mono_us();
    if (stall) {
        rs_pause(&cluster.nodes[victim].srv);
        cluster.nodes[victim].dead = 1; /* the helpers leave it alone */
    } else {
        rc_kill(&cluster, victim);
    }
    promoted = rc_wait_promoted(&cluster, victim, FAILOVER_BOUND_MS);
    if (CHECK(promoted >= 0)) {
        promoted_us = rs_mono_us();
        /* Until calls for its slots succeed again, bounded. */
        deadline = rs_mono_ms() + PROMOTION_SLACK_MS;
        while (atomic_load(&dead_ok_us) < promoted_us &&
               rs_mono_ms() < deadline)
            rs_sleep_ms(10);
        rs_sleep_ms(500);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < FO_THREADS; i++)
        pthread_join(tid[i], NULL);
    if (stall) {
        rs_resume(&cluster.nodes[victim].srv);
        cluster.nodes[victim].dead = 0;
    }

    for (int i = 0; i < FO_THREADS; i++) {
        int dead = i < FO_THREADS / 2;

        for (size_t j = 0; j < th[i].n; j++) {
            const call_rec *c = &th[i].calls[j];
            uint64_t took = c->end_us - c->start_us;

            if (took > (timeout_ms + CALL_SLACK_MS) * 1000)
                slow++;
            if (!dead) {
                worst_live_us = took > worst_live_us ? took : worst_live_us;
                live_over_100ms += took > 100000;
                c->rc == SLUICE_OK ? live_ok++ : live_failed++;
                continue;
            }
            if (c->rc == SLUICE_OK) {
                dead_ok++;
                if (c->start_us > kill_us &&
                    (first_ok_after_us == 0 || c->end_us < first_ok_after_us))
                    first_ok_after_us = c->end_us;
                continue;
            }
            dead_failed++;
            worst_fail_us = took > worst_fail_us ? took : worst_fail_us;
            last_fail_end_us =
                c->end_us > last_fail_end_us ? c->end_us : last_fail_end_us;
            /* Only "unreachable", only after the kill, only until the
               replica took over (and the store could learn it). */
            bad += c->rc != SLUICE_ECONN && c->rc != SLUICE_ETIMEDOUT;
            bad += c->end_us < kill_us;
            late_fail += promoted_us != 0 &&
                         c->start_us > promoted_us +
                                           PROMOTION_SLACK_MS * 1000u;
        }
        free(th[i].calls);
    }
    CHECK_EQ_U64(live_failed, 0);
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(late_fail, 0);
    CHECK_EQ_U64(slow, 0);
    CHECK(dead_failed > 0);
    CHECK(first_ok_after_us > kill_us);
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.errors, dead_failed);
    printf("  failover: master :%d %s; replica :%d promoted after %" PRIu64
           " ms; calls for its slots failed for %" PRIu64 " ms (%ld failed, "
           "worst %" PRIu64 " ms), first success %" PRIu64 " ms after the "
           "kill; other masters: %ld calls, %ld failed, %ld over 100 ms, "
           "worst %" PRIu64 " ms\n",
           cluster.nodes[victim].srv.port, stall ? "stalled" : "killed",
           promoted >= 0 ? cluster.nodes[promoted].srv.port : -1,
           promoted_us ? (promoted_us - kill_us) / 1000 : 0,
           last_fail_end_us > kill_us ? (last_fail_end_us - kill_us) / 1000
                                      : 0,
           dead_failed, worst_fail_us / 1000,
           first_ok_after_us > kill_us ? (first_ok_after_us - kill_us) / 1000
                                       : 0,
           live_ok + live_failed, live_failed, live_over_100ms,
           worst_live_us / 1000);
    sluice_store_free(st);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    uint64_t t0 = rs_mono_ms(), t;

    printf("test_cluster: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (rs_start(&single, NULL) < 0) {
        fprintf(stderr, "test_cluster: cannot start redis-server\n");
        return 1;
    }
    if (rc_start(&cluster, 3, 1, NULL) < 0) {
        fprintf(stderr, "test_cluster: cannot start a cluster\n");
        rs_stop(&single);
        return 1;
    }
    printf("  cluster %s up in %" PRIu64 " ms\n", cluster.url,
           rs_mono_ms() - t0);
    fflush(stdout);
    t = rs_mono_ms();
    test_seed_down();
    test_differential(seed);
    test_queue_limiter();
    printf("  (differential and queue limiter: %" PRIu64 " ms)\n",
           rs_mono_ms() - t);
    fflush(stdout);
    test_reshard();
    test_split_queue();
    fflush(stdout);
    test_failover(1);
    fflush(stdout);
    test_failover(0);
    rc_stop(&cluster);
    rs_stop(&single);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster");
}
