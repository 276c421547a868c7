/*
 * test_valkey_skew.c - a server whose module lacks one algorithm (version
 * skew, as in a rolling upgrade, or an algorithm added since the module was
 * built): sluice_skew.so, the build's module without the glue of
 * SLUICE_SKEW_OMIT (the top CMakeLists.txt; sliding-log by default), on one
 * server and on a cluster of three masters of its own. The engine is chosen
 * per algorithm (src/valkey/engine.c), so on both:
 *
 *   1. SLUICE.VERSION names every algorithm but the omitted one (and
 *      those without a module.c, which sluice.so does not decide either:
 *      skew_decides()).
 *   2. engine=auto: a seeded trace of hits, peeks and batches of every
 *      algorithm decides exactly as the embedded store on one virtual clock
 *      (the fixed window, on the server's own clock, is only answered):
 *      the omitted algorithm by its script, with no SLUICE.HITMANY sent at
 *      all (INFO commandstats) and no module call counted; the others by
 *      the module.
 *   3. engine=module: the omitted algorithm is SLUICE_ENOTSUP, saying the
 *      module does not decide it, and writes nothing; the others decide.
 *   4. sluice_hit_all() mixing the omitted algorithm with module ones: as
 *      the embedded store.
 *   5. A module that lost the algorithm since the store's note: the servers
 *      start with sluice.so, a store notes it, then sluice.so is replaced by
 *      sluice_skew.so under the live connections (MODULE UNLOAD, MODULE
 *      LOAD). The next call of the omitted algorithm is answered "no module
 *      glue", and goes again as the script: no error reaches the caller
 *      (before, SLUICE_EPROTO), the decision is exact, and the calls after
 *      it send no SLUICE.HITMANY for it.
 *
 * Usage: test_valkey_skew [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "algo/model.h" /* which algorithms run on a server's own clock */
#include "cluster.h"
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The servers of this part: one, or a cluster's masters. */
static rs_server *servers[RC_MAX_NODES];
static int nservers;
static const char *url;   /* their store URL */
static const char *where; /* "server" or "cluster", for messages and ids */
static sluice_algo omitted;

/* Whether sluice_skew.so decides 'a': sluice.so does (its folder has a
   module.c, which is optional: SLUICE_TEST_MODULE_ALGOS), and it is not
   the omitted one. */
static bool skew_decides(int a)
{
    char word[64];

    snprintf(word, sizeof(word), " %s ", sluice_algo_name((sluice_algo)a));
    return a != (int)omitted &&
           strstr(SLUICE_TEST_MODULE_ALGOS, word) != NULL;
}

static uint64_t module_calls(sluice_store *st)
{
    sluice_store_stats stats;

    CHECK_OK(sluice_store_stats_get(&stats, st));
    return stats.module_calls;
}

/* The SLUICE.HITMANY calls every server has run since its module loaded. */
static long long hitmany_calls(void)
{
    long long n = 0;

    for (int i = 0; i < nservers; i++)
        n += rs_calls(servers[i], "sluice.hitmany");
    return n;
}

/* The embedded store and a server store with 'engine', on one clock. */
typedef struct pair {
    sluice_vclock *clock;
    sluice_store *mem, *vk;
    uint64_t now;
} pair;

static void pair_open(pair *p, const char *engine)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    char query[160];

    p->now = 5000000;
    p->clock = test_vclock_opts(&opts, p->now);
    p->mem = test_store_open("mem://", "", &opts);
    snprintf(query, sizeof(query), TEST_CALLER_QUERY "&engine=%s", engine);
    p->vk = test_store_open(url, query, &opts);
}

static void pair_close(pair *p)
{
    sluice_store_free(p->vk);
    sluice_store_free(p->mem);
    sluice_vclock_free(p->clock);
}

/* Moves the pair's clock on by 0 to 20 s (a quarter of the time, none). */
static void pair_step(pair *p)
{
    p->now += rng_pct(25) ? 0 : rng_range(1, 20000);
    sluice_vclock_set(p->clock, p->now);
}

/* The limit a trace of 'algo' runs under: windows of a minute, so that no
   key expires in real time while the trace runs on virtual time. */
static sluice_limit trace_limit(sluice_algo algo)
{
    sluice_limit lim = SLUICE_LIMIT(algo, 5, 60000);

    if (algo == SLUICE_GCRA)
        lim.burst = 3;
    return lim;
}

/* The server store's answer 'dv' (rc 'rv') against the embedded store's. */
static void compare(const sluice_limit *lim, int rm, const sluice_decision *dm,
                    int rv, const sluice_decision *dv)
{
    CHECK_RC(rv, SLUICE_OK);
    CHECK_RC(rm, SLUICE_OK);
    if (sluice__models[lim->algo]->server_clock)
        return; /* its waits are the server's expiry clock's */
    if (!decision_same(dm, dv)) {
        CHECK(decision_same(dm, dv));
        decision_print("embedded", rm, dm);
        decision_print("server", rv, dv);
    }
}

/* A batch of four requests on the trace's ids, on both stores. */
static void trace_batch(pair *p, const sluice_limit *lim, const char *ids[])
{
    sluice_request qm[4], qv[4];

    for (int i = 0; i < 4; i++) {
        const char *id = ids[rng_below(12)];

        qm[i] = (sluice_request){id, strlen(id), rng_range(1, 3), 0, {0}};
        qv[i] = qm[i];
    }
    CHECK_OK(sluice_hit_many(p->mem, lim, qm, 4));
    CHECK_OK(sluice_hit_many(p->vk, lim, qv, 4));
    for (int i = 0; i < 4; i++)
        compare(lim, qm[i].err, &qm[i].decision, qv[i].err, &qv[i].decision);
}

/* A seeded trace of 'algo' on 'p': hits and peeks of costs 1..3 on twelve
   ids, and every fifth step a batch; 'tag' keeps its ids apart. */
static void trace(pair *p, sluice_algo algo, const char *tag)
{
    sluice_limit lim = trace_limit(algo);
    char names[12][48];
    const char *ids[12];

    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof(names[i]), "%s:%s:%s:%d", where, tag,
                 sluice_algo_name(algo), i);
        ids[i] = names[i];
    }
    for (int step = 0; step < 200; step++) {
        const char *id = ids[rng_below(12)];
        uint64_t cost = rng_range(1, 3);
        sluice_decision dm, dv;
        int rm, rv;

        pair_step(p);
        if (step % 5 == 4) {
            trace_batch(p, &lim, ids);
        } else if (rng_pct(20)) {
            rm = sluice_peek(&dm, p->mem, &lim, id, strlen(id), cost);
            rv = sluice_peek(&dv, p->vk, &lim, id, strlen(id), cost);
            compare(&lim, rm, &dm, rv, &dv);
        } else {
            rm = sluice_hit(&dm, p->mem, &lim, id, strlen(id), cost);
            rv = sluice_hit(&dv, p->vk, &lim, id, strlen(id), cost);
            compare(&lim, rm, &dm, rv, &dv);
        }
    }
}

/* ---- The parts ----------------------------------------------------------- */

/* 1. What the module says it decides. */
static void test_version(void)
{
    for (int i = 0; i < nservers; i++) {
        redisReply *r = rs_cmd(servers[i], "SLUICE.VERSION");
        char want[64];

        test_context("%s: SLUICE.VERSION of node %d", where, i);
        if (!CHECK(r != NULL && r->type == REDIS_REPLY_STRING)) {
            if (r != NULL)
                freeReplyObject(r);
            continue;
        }
        CHECK(strstr(r->str, " api 1 algos ") != NULL);
        for (int a = 0; a < TEST_ALGO_N; a++) {
            snprintf(want, sizeof(want), " %s", sluice_algo_name(a));
            CHECK((strstr(r->str, want) != NULL) == skew_decides(a));
        }
        freeReplyObject(r);
    }
    test_context(NULL);
}

/* 2. engine=auto: every algorithm exact, each by its engine. */
static void test_auto(void)
{
    pair p;

    pair_open(&p, "auto");
    for (int a = 0; a < TEST_ALGO_N; a++) {
        long long sent = hitmany_calls();
        uint64_t counted = module_calls(p.vk);

        test_context("%s: engine=auto, %s", where, sluice_algo_name(a));
        trace(&p, (sluice_algo)a, "auto");
        if (!skew_decides(a)) {
            CHECK_EQ_U64(module_calls(p.vk), counted);
            CHECK(hitmany_calls() == sent);
        } else {
            CHECK(module_calls(p.vk) > counted);
            CHECK(hitmany_calls() > sent);
        }
    }
    pair_close(&p);
    test_context(NULL);
}

/* A call of the omitted algorithm under engine=module: refused, saying
   why, and nothing written. */
static void check_refused(int rc, const char *what)
{
    char want[64];

    snprintf(want, sizeof(want), "does not decide %s",
             sluice_algo_name(omitted));
    test_context("%s: engine=module, %s of %s", where, what,
                 sluice_algo_name(omitted));
    if (!CHECK_RC(rc, SLUICE_ENOTSUP) ||
        !CHECK(strstr(sluice_last_error(), want) != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
}

/* 3. engine=module: the omitted algorithm refused, the others decided. */
static void test_module(void)
{
    sluice_limit lim = trace_limit(omitted);
    sluice_request reqs[2] = {{"m1", 2, 1, 0, {0}}, {"m2", 2, 1, 0, {0}}};
    sluice_decision d;
    pair p;
    long long keys = 0;

    for (int i = 0; i < nservers; i++)
        CHECK(rs_ok(servers[i], "FLUSHALL") == 0);
    pair_open(&p, "module");
    /* The first call meets the module's reply; the next, the note. */
    for (int i = 0; i < 2; i++)
        check_refused(sluice_hit(&d, p.vk, &lim, "m0", 2, 1), "a hit");
    check_refused(sluice_peek(&d, p.vk, &lim, "m0", 2, 1), "a peek");
    sluice_hit_many(p.vk, &lim, reqs, 2);
    for (int i = 0; i < 2; i++)
        check_refused(reqs[i].err, "a batch");
    for (int i = 0; i < nservers; i++)
        keys += rs_int(servers[i], "DBSIZE");
    test_context("%s: engine=module writes nothing it refused", where);
    CHECK(keys == 0);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        if (!skew_decides(a))
            continue;
        test_context("%s: engine=module, %s", where, sluice_algo_name(a));
        trace(&p, (sluice_algo)a, "module");
    }
    CHECK(module_calls(p.vk) > 0);
    pair_close(&p);
    test_context(NULL);
}

/* 4. sluice_hit_all() with the omitted algorithm among module ones. */
static void test_hit_all(void)
{
    sluice_limit lims[3] = {trace_limit(omitted),
                            SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 8, 60000),
                            SLUICE_LIMIT(SLUICE_GCRA, 6, 30000)};
    pair p;

    if (omitted == SLUICE_SLIDING_COUNTER || omitted == SLUICE_GCRA)
        lims[omitted == SLUICE_GCRA ? 2 : 1].algo = SLUICE_COMPACT_LOG;
    pair_open(&p, "auto");
    test_context("%s: sluice_hit_all(), %s with module algorithms", where,
                 sluice_algo_name(omitted));
    for (int step = 0; step < 150; step++) {
        char id[48];
        sluice_decision dm, dv, em[3], ev[3];
        uint64_t cost = rng_range(1, 3);
        int rm, rv;

        snprintf(id, sizeof(id), "%s:all:%d", where, (int)rng_below(6));
        pair_step(&p);
        rm = sluice_hit_all(&dm, em, p.mem, lims, 3, id, strlen(id), cost);
        rv = sluice_hit_all(&dv, ev, p.vk, lims, 3, id, strlen(id), cost);
        compare(&lims[0], rm, &dm, rv, &dv);
        for (int i = 0; i < 3; i++)
            compare(&lims[i], rm, &em[i], rv, &ev[i]);
    }
    pair_close(&p);
    test_context(NULL);
}

/* Replaces sluice.so with sluice_skew.so on every server, under the
   connections that stores hold. */
static void swap_module(void)
{
    for (int i = 0; i < nservers; i++) {
        CHECK(rs_ok(servers[i], "MODULE UNLOAD sluice") == 0);
        CHECK(rs_ok(servers[i], "MODULE LOAD %s", rs_skew_path()) == 0);
    }
}

/* 5. The module loses the algorithm after the store's note. */
static void test_lost(void)
{
    pair p;
    uint64_t counted;
    long long sent;

    pair_open(&p, "auto");
    test_context("%s: the module loses %s under a live store", where,
                 sluice_algo_name(omitted));
    trace(&p, omitted, "lost-before");
    CHECK(module_calls(p.vk) > 0); /* sluice.so decided it */
    swap_module();
    /* Every connection of the store noted the old module: the first
       calls meet "no module glue", and go again as the script. */
    trace(&p, omitted, "lost-after");
    counted = module_calls(p.vk);
    sent = hitmany_calls();
    trace(&p, omitted, "lost-noted");
    CHECK_EQ_U64(module_calls(p.vk), counted);
    CHECK(hitmany_calls() == sent);
    pair_close(&p);
    test_context(NULL);
}

static void run_all(void)
{
    test_lost(); /* first: it begins on sluice.so, and ends on the skew */
    test_version();
    test_auto();
    test_module();
    test_hit_all();
}

/* Every server starts with sluice.so, its MODULE command allowed. */
static const char *const *module_args(void)
{
    static const char *args[5];

    args[0] = "--loadmodule";
    args[1] = rs_module_path();
    args[2] = "--enable-module-command";
    args[3] = "yes";
    args[4] = NULL;
    return args;
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    static rs_server single;
    static rc_cluster cluster;

    printf("seed %" PRIu64 " (test_valkey_skew %" PRIu64 " repeats it)\n",
           seed, seed);
    rng_state = seed;
    if (rs_module_path() == NULL || rs_skew_path() == NULL ||
        sluice_algo_parse(&omitted, rs_skew_omit()) < 0) {
        printf("  NOTE: this build made no module: nothing to test\n");
        return test_summary("test_valkey_skew");
    }
    if (rs_start(&single, module_args()) < 0) {
        fprintf(stderr, "test_valkey_skew: cannot start redis-server\n");
        return 1;
    }
    servers[0] = &single;
    nservers = 1;
    url = single.url;
    where = "server";
    run_all();
    rs_stop(&single);
    if (rc_start(&cluster, 3, 0, module_args()) < 0) {
        fprintf(stderr, "test_valkey_skew: cannot start a cluster\n");
        return 1;
    }
    for (nservers = 0; nservers < cluster.n; nservers++)
        servers[nservers] = &cluster.nodes[nservers].srv;
    url = cluster.url;
    where = "cluster";
    run_all();
    rc_stop(&cluster);
    return test_summary("test_valkey_skew");
}
