/*
 * test_valkey_engine.c - the server store's engine (engine=auto|module|lua,
 * src/valkey/engine.c) on real redis-servers, with and without the native
 * module loaded (--loadmodule sluice.so).
 *
 *   1. A server without the module: engine=auto decides by script, with no
 *      error; engine=module answers SLUICE_ENOTSUP with a message that says
 *      so, and writes nothing; engine=lua never asks (no SLUICE.VERSION:
 *      the server counts no unknown command).
 *   2. A server with the module: engine=lua sends no SLUICE.* command at
 *      all (INFO commandstats); engine=auto and engine=module send the
 *      decisions (SLUICE.HITMANY) and the queue limiter's read and
 *      increment (SLUICE.EMQTTL, SLUICE.EMQINCR) to it. A user denied
 *      SLUICE.VERSION (an ACL) counts as a server without the module.
 *      sluice_hit_all() is a script on every engine.
 *   3. One budget: a Lua client and a module client hitting one key in
 *      turn admit exactly what the embedded store admits, decision by
 *      decision, for every algorithm the module decides.
 *   4. Restarts: a server restarted without the module, then with it again,
 *      is asked again at the reconnect; no call fails on the way.
 *
 * The module parts need the module this build made (rs_module_path()); a
 * build without one prints a note and runs part 1 alone.
 */
#include "algo/model.h" /* which algorithms run on a server's own clock */
#include "compare.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static rs_server plain;  /* no module */
static rs_server moded;  /* the module loaded */
static int glue[TEST_ALGO_N]; /* the algorithms the module decides */

/* The calls of every SLUICE.* command 's' counted since CONFIG RESETSTAT. */
static long long sluice_calls(rs_server *s)
{
    static const char *const cmds[] = {"sluice.version", "sluice.hit",
                                       "sluice.hitmany", "sluice.reset",
                                       "sluice.emqttl", "sluice.emqincr"};
    long long n = 0;

    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        n += rs_calls(s, cmds[i]);
    return n;
}

static uint64_t module_calls(sluice_store *st)
{
    sluice_store_stats stats;

    CHECK_OK(sluice_store_stats_get(&stats, st));
    return stats.module_calls;
}

/* A few of every kind of call: hits and a peek of 'algo', a batch, and
   the queue limiter's increment and read. Every one must be answered. */
static void exercise(sluice_store *st, sluice_algo algo)
{
    sluice_limit lim = SLUICE_LIMIT(algo, 5, 60000);
    sluice_request reqs[3] = {{"b1", 2, 1, 0, {0}}, {"b2", 2, 1, 0, {0}},
                              {"b1", 2, 1, 0, {0}}};
    sluice_decision d;
    uint64_t count = 0, ttl = 0, wait = 0;

    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "k", 1, 1));
        CHECK(d.allowed);
    }
    CHECK_OK(sluice_peek(&d, st, &lim, "k", 1, 2));
    CHECK(d.allowed);
    CHECK_OK(sluice_hit_many(st, &lim, reqs, 3));
    for (int i = 0; i < 3; i++)
        CHECK_OK(reqs[i].err);
    /* b1 counted twice, in turn */
    CHECK(reqs[2].decision.remaining < reqs[0].decision.remaining);
    CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, "q", 1, 60000));
    CHECK(count >= 1 && ttl > 0 && ttl <= 60000);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, "q", 1, 1));
    CHECK(wait > 0 && wait <= 60000); /* the cap of 1 is reached */
}

/* ---- 1. Without the module ------------------------------------------------ */

static void test_no_module(void)
{
    sluice_store *st;
    sluice_decision d;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 3, 60000);
    sluice_request reqs[2] = {{"m1", 2, 1, 0, {0}}, {"m2", 2, 1, 0, {0}}};
    uint64_t count = 0, ttl = 0;

    test_context("no module: engine=auto");
    CHECK(rs_ok(&plain, "FLUSHALL") == 0);
    st = test_store_open(plain.url, "engine=auto", NULL);
    for (int a = 0; a < TEST_ALGO_N; a++)
        exercise(st, (sluice_algo)a);
    CHECK_EQ_U64(module_calls(st), 0);
    CHECK(rs_calls(&plain, "evalsha") > 0);
    sluice_store_free(st);

    test_context("no module: engine=module");
    CHECK(rs_ok(&plain, "FLUSHALL") == 0);
    st = test_store_open(plain.url, "engine=module", NULL);
    for (int i = 0; i < 2; i++) { /* asked again, refused again */
        CHECK_RC(sluice_hit(&d, st, &lim, "k", 1, 1), SLUICE_ENOTSUP);
        if (!CHECK(strstr(sluice_last_error(), "engine=module") != NULL &&
                   strstr(sluice_last_error(), "no sluice module") != NULL))
            fprintf(stderr, "    message: %s\n", sluice_last_error());
    }
    sluice_hit_many(st, &lim, reqs, 2);
    CHECK_RC(reqs[0].err, SLUICE_ENOTSUP);
    CHECK_RC(reqs[1].err, SLUICE_ENOTSUP);
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, st, "q", 1, 1000),
             SLUICE_ENOTSUP);
    CHECK_EQ_U64(rs_int(&plain, "DBSIZE"), 0); /* nothing written */
    sluice_store_free(st);

    test_context("no module: engine=lua asks nothing");
    CHECK(rs_ok(&plain, "CONFIG RESETSTAT") == 0);
    st = test_store_open(plain.url, "engine=lua", NULL);
    exercise(st, SLUICE_SLIDING_LOG);
    sluice_store_free(st);
    /* SLUICE.VERSION to a server without the module is an unknown
       command, which the server counts as an error. */
    CHECK_EQ_U64(rs_info_count(&plain, "errorstats", "errorstat_ERR:count="),
                 0);
    test_context(NULL);
}

/* ---- 2. With the module ----------------------------------------------------- */

static void test_engines_on_module(void)
{
    static const char *const engines[] = {"lua", "auto", "module"};

    for (size_t e = 0; e < 3; e++) {
        char query[32];
        sluice_store *st;
        int algos = 0;

        test_context("module server: engine=%s", engines[e]);
        CHECK(rs_ok(&moded, "FLUSHALL") == 0);
        CHECK(rs_ok(&moded, "CONFIG RESETSTAT") == 0);
        snprintf(query, sizeof(query), "engine=%s", engines[e]);
        st = test_store_open(moded.url, query, NULL);
        /* engine=lua and engine=auto decide every algorithm (auto by
           its script where the module lacks it); engine=module those the
           module decides. */
        for (int a = 0; a < TEST_ALGO_N; a++)
            if (glue[a] || e < 2) {
                exercise(st, (sluice_algo)a);
                algos++;
            }
        CHECK(algos > 0);
        if (e == 0) { /* lua: never a SLUICE.* command */
            CHECK_EQ_U64(sluice_calls(&moded), 0);
            CHECK_EQ_U64(module_calls(st), 0);
            CHECK(rs_calls(&moded, "evalsha") > 0);
        } else {
            CHECK(rs_calls(&moded, "sluice.version") >= 1);
            CHECK(rs_calls(&moded, "sluice.hitmany") > 0);
            CHECK(rs_calls(&moded, "sluice.emqincr") > 0);
            CHECK(rs_calls(&moded, "sluice.emqttl") > 0);
            CHECK(module_calls(st) > 0);
        }
        /* engine=module: every decision and queue call by the module. */
        if (e == 2)
            CHECK_EQ_U64(rs_calls(&moded, "evalsha"), 0);
        sluice_store_free(st);
    }
    test_context(NULL);
}

/*
 * Any other answer to SLUICE.VERSION than the module's means no module: a
 * user the server denies it (NOPERM) decides by script under engine=auto,
 * and gets SLUICE_ENOTSUP naming the denial under engine=module.
 * sluice_hit_all() is a script on every engine.
 */
static void test_version_denied(void)
{
    sluice_limit lims[2] = {SLUICE_LIMIT(SLUICE_FIXED, 5, 60000),
                            SLUICE_LIMIT(SLUICE_GCRA, 5, 60000)};
    sluice_limit lim = lims[0];
    sluice_decision d, each[2];
    sluice_store *st;
    char base[128];

    test_context("SLUICE.VERSION denied");
    CHECK(rs_ok(&moded, "FLUSHALL") == 0);
    CHECK(rs_ok(&moded, "ACL SETUSER nover on >pw ~* &* +@all "
                        "-sluice.version") == 0);
    snprintf(base, sizeof(base), "redis://nover:pw@127.0.0.1:%d", moded.port);
    st = test_store_open(base, "engine=auto", NULL);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "den", 3, 1));
        CHECK(d.allowed && d.remaining == 4 - (uint64_t)i);
    }
    CHECK_EQ_U64(module_calls(st), 0);
    sluice_store_free(st);
    st = test_store_open(base, "engine=module", NULL);
    CHECK_RC(sluice_hit(&d, st, &lim, "den", 3, 1), SLUICE_ENOTSUP);
    if (!CHECK(strstr(sluice_last_error(), "NOPERM") != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    sluice_store_free(st);
    /* hit_all: the script, also with engine=module on a module server. */
    st = test_store_open(moded.url, "engine=module", NULL);
    CHECK_OK(sluice_hit_all(&d, each, st, lims, 2, "all", 3, 1));
    CHECK(d.allowed && each[0].allowed && each[1].allowed);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- 3. One budget ----------------------------------------------------------- */

/* A Lua client and a module client take turns on one key; each decision
   must be the embedded store's for the same hit. */
static void shared_budget(sluice_algo algo)
{
    const uint64_t max = 7;
    sluice_limit lim = SLUICE_LIMIT(algo, max, 60000);
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1700000000000ULL);
    sluice_store *mem = test_store_open("mem://", "", &opts);
    sluice_store *lua = test_store_open(
        moded.url, TEST_CALLER_QUERY "&engine=lua", &opts);
    sluice_store *mod = test_store_open(
        moded.url, TEST_CALLER_QUERY "&engine=module", &opts);
    uint64_t admitted = 0;

    for (int i = 0; i < (int)(2 * max + 3); i++) {
        sluice_store *st = i % 2 == 0 ? lua : mod;
        sluice_decision dm, dv;

        sluice_vclock_advance(clock, i % 3 == 0 ? 1 : 0);
        CHECK_OK(sluice_hit(&dm, mem, &lim, "shared", 6, 1));
        CHECK_OK(sluice_hit(&dv, st, &lim, "shared", 6, 1));
        admitted += dv.allowed;
        if (sluice__models[algo]->server_clock) {
            /* The fixed window's waits are the server's own PTTL. */
            CHECK_EQ_U64(dv.allowed, dm.allowed);
            CHECK_EQ_U64(dv.remaining, dm.remaining);
        } else {
            CHECK_SAME(dm, dv);
        }
    }
    CHECK(admitted >= max && admitted < 2 * max + 3);
    CHECK(module_calls(mod) > 0);
    CHECK_EQ_U64(module_calls(lua), 0);
    sluice_store_free(mod);
    sluice_store_free(lua);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
}

static void test_shared_budget(void)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        test_context("one budget, %s", sluice_algo_name((sluice_algo)a));
        CHECK(rs_ok(&moded, "FLUSHALL") == 0);
        if (glue[a])
            shared_budget((sluice_algo)a);
    }
    test_context(NULL);
}

/* ---- 4. Restarts ------------------------------------------------------------- */

/* Hits on 'st' until a hit has gone by the engine wanted ('module'): at
   most a few, since only the first call after a reconnect may go by the
   engine known before it. Every hit must be answered. */
static void hits_until(sluice_store *st, bool module)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    sluice_decision d;

    for (int i = 0; i < 3; i++) {
        uint64_t before = module_calls(st);

        CHECK_OK(sluice_hit(&d, st, &lim, "r", 1, 1));
        CHECK(d.allowed);
        if (i > 0)
            CHECK_EQ_U64(module_calls(st) > before, module);
    }
}

static void test_restarts(void)
{
    rs_server *s = &moded;
    int with_module = s->nextra;
    sluice_store *st;

    test_context("restarts without, then with the module");
    st = test_store_open(s->url, "engine=auto", NULL);
    hits_until(st, true);
    /* Without the module: its arguments are left out of the restart
       (and put back for the next). */
    rs_kill(s);
    s->nextra = 0;
    CHECK(rs_restart(s) == 0);
    s->nextra = with_module;
    hits_until(st, false);
    CHECK(rs_calls(s, "evalsha") > 0);
    CHECK_EQ_U64(sluice_calls(s), 0);
    rs_kill(s);
    CHECK(rs_restart(s) == 0);
    hits_until(st, true);
    CHECK(rs_calls(s, "sluice.hitmany") > 0);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    if (rs_start(&plain, NULL) < 0) {
        fprintf(stderr, "test_valkey_engine: cannot start redis-server\n");
        return 1;
    }
    test_no_module();
    rs_stop(&plain);
    if (rs_module_path() == NULL) {
        printf("  NOTE: this build made no module (sluice.so): only the "
               "server without it was tested\n");
        return test_summary("test_valkey_engine");
    }
    if (rs_start(&moded, rs_module_args()) < 0) {
        fprintf(stderr, "test_valkey_engine: cannot start redis-server "
                "with %s\n", rs_module_path());
        return 1;
    }
    /* What the module has, asked before any count is taken. */
    for (int a = 0; a < TEST_ALGO_N; a++)
        glue[a] = test_module_glue(&moded, (sluice_algo)a);
    test_engines_on_module();
    test_version_denied();
    test_shared_budget();
    test_restarts();
    rs_stop(&moded);
    return test_summary("test_valkey_engine");
}
