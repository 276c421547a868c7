/*
 * test_engine_fake.c - what the store makes of a server's answer to
 * SLUICE.VERSION at connect (src/valkey/engine.c), with answers no real
 * server of ours gives: fake cluster nodes (fake_cluster.h), every slot on
 * node A, whose EVALSHA decides.
 *
 *   LOADING           the server cannot answer now: the call fails with
 *                     SLUICE_ECONN (an outage), not with a verdict on the
 *                     module
 *   another version   no module: engine=auto decides by script, silently;
 *                     engine=module fails with SLUICE_ENOTSUP naming the
 *                     version it found
 *   this version      the module: the calls go as SLUICE.HITMANY, and
 *                     their replies are read (and checked) as the
 *                     scripts' are
 *   this version, a list of algorithms without the fixed window
 *                     the fixed window's calls go to its script
 *                     (engine=auto), or are SLUICE_ENOTSUP naming it
 *                     (engine=module), with no SLUICE.HITMANY sent
 *   "no module glue"  a module that said it decides the fixed window but
 *                     does not: under engine=auto the call goes again as
 *                     the script, and the next ones go there at once;
 *                     under engine=module SLUICE_ENOTSUP, never EPROTO
 */
#include "fake_cluster.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* The bulk reply "sluice.so VERSION api 1". */
static void version_reply(char *out, size_t cap, const char *version)
{
    char text[48];

    snprintf(text, sizeof(text), "sluice.so %.20s api 1", version);
    snprintf(out, cap, "$%zu\r\n%s\r\n", strlen(text), text);
}

static uint64_t module_calls(sluice_store *st)
{
    sluice_store_stats stats;

    CHECK_OK(sluice_store_stats_get(&stats, st));
    return stats.module_calls;
}

static sluice_store *open_on_a(const char *engine)
{
    char seed[32], query[96];

    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(NODE_A));
    snprintf(query, sizeof(query),
             "timeout=1000&connect_timeout=1000&engine=%s", engine);
    return fc_open(seed, query);
}

static void test_loading(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("SLUICE.VERSION answers LOADING");
    fc_reset();
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.VERSION",
                 "-LOADING Redis is loading the dataset in memory\r\n");
    st = open_on_a("auto");
    CHECK_RC(fc_timed_hit(&d, st, "k", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "LOADING") != NULL);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 0);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_other_version(void)
{
    char reply[96];
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("SLUICE.VERSION answers another version");
    fc_reset();
    version_reply(reply, sizeof(reply), "9.9.9");
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.VERSION", reply);
    st = open_on_a("module");
    CHECK_RC(fc_timed_hit(&d, st, "k", &ms), SLUICE_ENOTSUP);
    if (!CHECK(strstr(sluice_last_error(), "9.9.9") != NULL &&
               strstr(sluice_last_error(), "engine=module") != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    sluice_store_free(st);
    st = open_on_a("auto");
    for (int i = 0; i < 3; i++) {
        CHECK_OK(fc_timed_hit(&d, st, "k", &ms));
        CHECK(fc_is_decision(&d));
    }
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_count(NODE_A, "SLUICE.HITMANY"), 0);
    CHECK_EQ_U64(module_calls(st), 0);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_this_version(void)
{
    char reply[96];
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("SLUICE.VERSION answers this library's version");
    fc_reset();
    version_reply(reply, sizeof(reply), SLUICE_VERSION);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.VERSION", reply);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.HITMANY",
                 "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n");
    st = open_on_a("auto");
    for (int i = 0; i < 4; i++) {
        CHECK_OK(fc_timed_hit(&d, st, "k", &ms));
        CHECK(fc_is_decision(&d));
    }
    /* A cluster store reads the map first (CLUSTER SLOTS), on a
       connection whose connect asked: so even the first call goes to the
       module. */
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 0);
    CHECK_EQ_U64(fc_count(NODE_A, "SLUICE.HITMANY"), 4);
    CHECK_EQ_U64(module_calls(st), 4);
    sluice_store_free(st);
    /* A reply that breaks what every algorithm answers is refused, from
       the module as from a script. */
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.HITMANY",
                 "*4\r\n:1\r\n:99\r\n:0\r\n:60000\r\n");
    st = open_on_a("module");
    CHECK_RC(fc_timed_hit(&d, st, "k", &ms), SLUICE_EPROTO);
    sluice_store_free(st);
    test_context(NULL);
}

/* The checks of a store on A whose module does not decide the fixed
   window: by script under 'auto', refused under 'module'. 'hitmany' is
   how many SLUICE.HITMANY calls the auto store sends, on its one
   connection (each connect asks SLUICE.VERSION again, and notes what it
   answers). */
static void check_by_script(uint64_t hitmany)
{
    sluice_store *st = open_on_a("auto&pool=1");
    sluice_decision d;
    uint64_t ms;

    for (int i = 0; i < 3; i++) {
        CHECK_OK(fc_timed_hit(&d, st, "k", &ms));
        CHECK(fc_is_decision(&d));
    }
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_count(NODE_A, "SLUICE.HITMANY"), hitmany);
    CHECK_EQ_U64(module_calls(st), 0);
    sluice_store_free(st);
    st = open_on_a("module");
    CHECK_RC(fc_timed_hit(&d, st, "k", &ms), SLUICE_ENOTSUP);
    if (!CHECK(strstr(sluice_last_error(), "does not decide fixed") != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    sluice_store_free(st);
}

static void test_algorithms(void)
{
    char text[96], reply[128];

    test_context("SLUICE.VERSION names the algorithms, not fixed");
    fc_reset();
    snprintf(text, sizeof(text), "sluice.so %s api 1 algos sliding-log "
             "GCRA unknown-one", SLUICE_VERSION);
    snprintf(reply, sizeof(reply), "$%zu\r\n%s\r\n", strlen(text), text);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.VERSION", reply);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.HITMANY",
                 "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n");
    check_by_script(0);
    test_context("SLUICE.HITMANY answers no module glue");
    fc_reset();
    version_reply(reply, sizeof(reply), SLUICE_VERSION);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.VERSION", reply);
    fake_node_on(fc_nodes[NODE_A].fake, "SLUICE.HITMANY",
                 "-ERR sluice: no module glue for algorithm fixed\r\n");
    check_by_script(1);
    test_context(NULL);
}

int main(void)
{
    fc_start();
    test_loading();
    test_other_version();
    test_this_version();
    test_algorithms();
    fc_stop();
    return test_summary("test_engine_fake");
}
