/*
 * test_async_engine.c - the engine through the async API: the module where
 * the server has it, the scripts where it has not, and a module that goes
 * away while a handle's connection is open.
 *
 * A private redis-server with sluice.so loaded and MODULE allowed
 * (--enable-module-command yes), so the test can unload and load it again:
 *
 *   auto       engine=auto sends a batch of hits started in one loop
 *              iteration as one SLUICE.HITMANY (INFO commandstats), no
 *              EVALSHA; the store counts module calls
 *   lost       MODULE UNLOAD with the connection open: the next batch is
 *              refused by the server ("unknown command"), noted, and sent
 *              again as the script on the same connection: every hit
 *              decided, none an error, the count going on where the module
 *              left it (one key format for both)
 *   module     engine=module on the server without the module: SLUICE_ENOTSUP
 *              (never the policy's answer, even with on_error=open); once
 *              the module is loaded again, the handle connects again after
 *              its back-off and decides through it
 *   lua        engine=lua asks the server nothing of the module
 */
#include "server.h"
#include "stores.h"
#include "test.h"

#include "sluice/adapters/poll.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 20

static rs_server server;

typedef struct rec {
    int fired;
    int err;
    sluice_decision d;
    char msg[200];
} rec;

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    rec *r = user;

    (void)a;
    r->fired++;
    r->err = err;
    if (d != NULL)
        r->d = *d;
    else
        snprintf(r->msg, sizeof(r->msg), "%s", sluice_last_error());
}

static void drain(sluice_poll_loop *loop, sluice_async *a)
{
    uint64_t until = rs_mono_ms() + 10000;

    while (sluice_async_pending(a) > 0 && rs_mono_ms() < until)
        if (sluice_poll_run(loop, a, 50) < 0)
            break;
    CHECK(sluice_async_pending(a) == 0);
}

/* 'n' hits of key 'key' started together, then called back. */
static void batch(sluice_poll_loop *loop, sluice_async *a,
                  const sluice_limit *lim, const char *key, rec *recs,
                  size_t n)
{
    memset(recs, 0, n * sizeof(*recs));
    for (size_t i = 0; i < n; i++)
        CHECK_OK(sluice_async_hit(a, lim, key, strlen(key), 1, on_decision,
                                  &recs[i]));
    drain(loop, a);
    for (size_t i = 0; i < n; i++)
        CHECK(recs[i].fired == 1);
}

static sluice_async *handle_open(sluice_store **st, sluice_poll_loop *loop,
                                 const char *query)
{
    sluice_async *a = NULL;

    *st = test_store_open(server.url, query, NULL);
    if (!CHECK_OK(sluice_async_poll_new(&a, *st, loop))) {
        sluice_store_free(*st);
        return NULL;
    }
    return a;
}

/* ---- engine=auto, then the module unloaded under it ------------------------------ */

static void auto_then_lost(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 100, 3600 * 1000);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    rec recs[BATCH];
    long long hitmany, evalsha;

    test_context("engine=auto");
    if ((a = handle_open(&st, &loop, "engine=auto&prefix=auto")) == NULL)
        return;
    batch(&loop, a, &lim, "warm", recs, 1); /* connected: the module known */
    hitmany = rs_calls(&server, "sluice.hitmany");
    evalsha = rs_calls(&server, "evalsha");
    batch(&loop, a, &lim, "k", recs, BATCH);
    for (size_t i = 0; i < BATCH; i++)
        CHECK(recs[i].err == 0 && recs[i].d.remaining == 100 - 1 - i);
    CHECK(rs_calls(&server, "sluice.hitmany") == hitmany + 1);
    CHECK(rs_calls(&server, "evalsha") == evalsha);
    test_check_engine_used(st, "module");

    test_context("engine=auto, the module unloaded under an open connection");
    if (!CHECK(rs_ok(&server, "MODULE UNLOAD sluice") == 0))
        goto out;
    batch(&loop, a, &lim, "k", recs, BATCH);
    for (size_t i = 0; i < BATCH; i++) {
        test_context("after MODULE UNLOAD, hit %zu: %s", i, recs[i].msg);
        CHECK_RC(recs[i].err, SLUICE_OK);
        CHECK(recs[i].d.fallback == SLUICE_ANSWERED &&
              recs[i].d.remaining == 100 - 1 - BATCH - i);
    }
    CHECK(rs_calls(&server, "evalsha") > evalsha);
    /* Noted: the next batch goes to the script at once. */
    evalsha = rs_calls(&server, "evalsha");
    batch(&loop, a, &lim, "k", recs, BATCH);
    for (size_t i = 0; i < BATCH; i++)
        CHECK(recs[i].err == 0 &&
              recs[i].d.remaining == 100 - 1 - 2 * BATCH - i);
    CHECK(rs_calls(&server, "evalsha") == evalsha + 1);
out:
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- engine=module without the module, then with it ----------------------------------- */

static void module_back(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_GCRA, 10, 1000);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    rec r;
    uint64_t until;
    bool back = false;

    test_context("engine=module, no module on the server");
    if ((a = handle_open(&st, &loop, "engine=module&on_error=open&"
                         "prefix=mod")) == NULL)
        return;
    for (int i = 0; i < 3; i++) {
        batch(&loop, a, &lim, "m", &r, 1);
        test_context("engine=module, no module: %s", r.msg);
        CHECK_RC(r.err, SLUICE_ENOTSUP);
    }
    test_context("engine=module, the module loaded again");
    CHECK(rs_ok(&server, "MODULE LOAD %s", rs_module_path()) == 0);
    until = rs_mono_ms() + 5000; /* the back-off is 2 s at most */
    while (!back && rs_mono_ms() < until) {
        batch(&loop, a, &lim, "m", &r, 1);
        back = r.err == 0;
        if (!back) {
            CHECK_RC(r.err, SLUICE_ENOTSUP);
            rs_sleep_ms(50);
        }
    }
    CHECK(back && r.d.allowed && r.d.fallback == SLUICE_ANSWERED);
    test_check_engine_used(st, "module");
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- engine=lua -------------------------------------------------------------------- */

static void lua_only(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 10, 1000);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    long long version = rs_calls(&server, "sluice.version");
    long long hitmany = rs_calls(&server, "sluice.hitmany");
    rec recs[BATCH];

    test_context("engine=lua");
    if ((a = handle_open(&st, &loop, "engine=lua&prefix=lua")) == NULL)
        return;
    batch(&loop, a, &lim, "l", recs, BATCH);
    for (size_t i = 0; i < BATCH; i++)
        CHECK(recs[i].err == 0 && recs[i].d.allowed == (i < 10));
    CHECK(rs_calls(&server, "sluice.version") == version);
    CHECK(rs_calls(&server, "sluice.hitmany") == hitmany);
    test_check_engine_used(st, "lua");
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    const char *args[] = {"--enable-module-command", "yes", "--loadmodule",
                          rs_module_path(), NULL};

    if (rs_module_path() == NULL) {
        fprintf(stderr, "test_async_engine: this build has no sluice.so\n");
        return TEST_SKIP;
    }
    if (rs_start(&server, args) < 0)
        return TEST_SKIP;
    auto_then_lost();
    module_back();
    lua_only();
    rs_stop(&server);
    return test_summary("test_async_engine");
}
