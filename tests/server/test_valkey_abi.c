/*
 * test_valkey_abi.c - a server store's decisions write 0 into their
 * reserved slots (sluice.h, "How sluice_limit and sluice_decision grow"),
 * on every path that answers one:
 *
 *   - decided by the scripts (engine=lua) and by the native module
 *     (engine=module, when the build made it): hit, peek, hit_many,
 *     hit_all and peek_all with 'each', admitted and refused;
 *   - refused locally, from the refused cache, without asking the server;
 *   - answered by the failure policy (on_error=open, on_error=closed) for
 *     a server that is not there.
 * Every decision is filled with junk before the call. A limit with a
 * reserved slot set is refused before anything is sent. The embedded
 * store: tests/unit/test_abi.c.
 */
#include "server.h"
#include "stores.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

static rs_server server;

static void junk(void *p, size_t n)
{
    memset(p, 0xA5, n);
}

static int zero(const sluice_decision *d)
{
    return d->reserved[0] == 0 && d->reserved[1] == 0;
}

/* Admitted, then refused: every call's decisions come back zeroed. */
static void decisions_on(sluice_store *st, const char *what)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 1, 60000);
    sluice_limit two[2] = {SLUICE_LIMIT(SLUICE_FIXED, 1, 60000),
                           SLUICE_LIMIT(SLUICE_GCRA, 3, 60000)};
    sluice_request reqs[2] = {{"m", 1, 1, 0, {0}}, {"m", 1, 1, 0, {0}}};
    sluice_decision d, each[2];

    test_context("%s", what);
    CHECK_RESET(sluice_reset(st, &l, "k", 1));
    CHECK_RESET(sluice_reset(st, &l, "m", 1));
    CHECK_OK(sluice_reset_all(st, two, 2, "k", 1));
    for (int round = 0; round < 2; round++) {
        junk(&d, sizeof(d));
        CHECK_OK(sluice_hit(&d, st, &l, "k", 1, 1));
        CHECK(zero(&d) && d.allowed == (round == 0));
        junk(&d, sizeof(d));
        CHECK_OK(sluice_peek(&d, st, &l, "k", 1, 1));
        CHECK(zero(&d));
        junk(&d, sizeof(d));
        junk(each, sizeof(each));
        CHECK_OK(sluice_hit_all(&d, each, st, two, 2, "k", 1, 1));
        CHECK(zero(&d) && zero(&each[0]) && zero(&each[1]));
        CHECK(d.allowed == (round == 0));
        junk(&d, sizeof(d));
        junk(each, sizeof(each));
        CHECK_OK(sluice_peek_all(&d, each, st, two, 2, "k", 1, 1));
        CHECK(zero(&d) && zero(&each[0]) && zero(&each[1]));
    }
    junk(&reqs[0].decision, sizeof(reqs[0].decision));
    junk(&reqs[1].decision, sizeof(reqs[1].decision));
    CHECK_OK(sluice_hit_many(st, &l, reqs, 2));
    CHECK(reqs[0].decision.allowed && !reqs[1].decision.allowed);
    CHECK(zero(&reqs[0].decision) && zero(&reqs[1].decision));
    test_context(NULL);
}

/* A refusal from the refused cache (fixed: cached by default). */
static void test_local_refusal(void)
{
    sluice_store *st = test_store_open(server.url, "", NULL);
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 1, 60000);
    sluice_store_stats stats;
    sluice_decision d;

    test_context("refused locally");
    CHECK_RESET(sluice_reset(st, &l, "c", 1));
    CHECK_OK(sluice_hit(&d, st, &l, "c", 1, 1));
    CHECK_OK(sluice_hit(&d, st, &l, "c", 1, 1)); /* the server refuses */
    junk(&d, sizeof(d));
    CHECK_OK(sluice_hit(&d, st, &l, "c", 1, 1)); /* and now this process */
    CHECK(!d.allowed && zero(&d));
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.local_refusals, 1);
    sluice_store_free(st);
    test_context(NULL);
}

/* The failure policy's decisions, for a server that is not there. */
static void test_fallbacks(void)
{
    static const char *const policies[] = {"open", "closed"};
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    char url[160];

    for (int i = 0; i < 2; i++) {
        sluice_store *st = NULL;
        sluice_decision d;
        int port = rs_free_port();

        test_context("on_error=%s", policies[i]);
        snprintf(url, sizeof(url),
                 "valkey://127.0.0.1:%d?on_error=%s&timeout=200"
                 "&connect_timeout=200", port, policies[i]);
        CHECK_OK(sluice_store_open(&st, url, NULL));
        if (st == NULL)
            continue;
        junk(&d, sizeof(d));
        CHECK_OK(sluice_hit(&d, st, &l, "f", 1, 1));
        CHECK_EQ_U64(d.fallback, i == 0 ? SLUICE_FELL_OPEN
                                        : SLUICE_FELL_CLOSED);
        CHECK(zero(&d));
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* A limit with a reserved slot set never reaches the server. */
static void test_reserved_refused(sluice_store *st)
{
    sluice_limit bad = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    sluice_decision d;
    long long calls = rs_calls(&server, "evalsha") +
                      rs_calls(&server, "sluice.hit");

    bad.reserved[3] = 1;
    CHECK_RC(sluice_hit(&d, st, &bad, "r", 1, 1), SLUICE_EINVAL);
    CHECK(strstr(sluice_last_error(), "reserved[3]") != NULL);
    CHECK(zero(&d));
    CHECK_EQ_U64(rs_calls(&server, "evalsha") +
                     rs_calls(&server, "sluice.hit"),
                 calls);
}

int main(void)
{
    sluice_store *lua, *module = NULL;
    int with_module = rs_module_args()[0] != NULL;

    if (rs_start(&server, rs_module_args()) < 0) {
        fprintf(stderr, "test_valkey_abi: cannot start redis-server\n");
        return 1;
    }
    lua = test_store_open(server.url, "engine=lua", NULL);
    decisions_on(lua, "engine=lua");
    if (with_module) {
        module = test_store_open(server.url, "engine=module", NULL);
        decisions_on(module, "engine=module");
        test_check_engine_used(module, "module");
    } else {
        printf("test_valkey_abi: no sluice.so in this build: the scripts "
               "alone\n");
    }
    test_local_refusal();
    test_fallbacks();
    test_reserved_refused(lua);
    sluice_store_free(module);
    sluice_store_free(lua);
    rs_stop(&server);
    return test_summary("test_valkey_abi");
}
