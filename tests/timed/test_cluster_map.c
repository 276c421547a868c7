/*
 * test_cluster_map.c - how the cluster store learns its cluster: cluster
 * URLs, seeds that are down, and CLUSTER SLOTS replies, malformed ones
 * too, against three scripted fake nodes (support/fake_cluster.h). No
 * server runs.
 *
 *   - malformed CLUSTER SLOTS replies: a clear error, no crash, no hang,
 *     and no half-read map used; a map with a hole; a master with an empty
 *     host (or "?") means the node asked;
 *   - URLs: several seeds, /0 and /1 on a cluster, several hosts without
 *     +cluster, empty seeds, 64 seeds and not 65;
 *   - seeds: a first seed that is down, several up (the first answers the
 *     map), every seed down.
 */
#include "fake_cluster.h"
#include "server.h" /* rs_free_port(), rs_sleep_ms() */
#include "test.h"
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Malformed replies --------------------------------------------------- */

static void test_malformed_slots(void)
{
    /* %d is node B's port. */
    static const char *const bad[] = {
        "+OK\r\n",
        "*0\r\n",
        "$3\r\nfoo\r\n",
        ":5\r\n",
        "*-1\r\n",
        "-ERR This instance has cluster support disabled\r\n",
        "*1\r\n:7\r\n",
        "*1\r\n*2\r\n:0\r\n:16383\r\n",
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:-1\r\n:100\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:200\r\n:100\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n$1\r\n0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n$3\r\nabc\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*-1\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*1\r\n$9\r\n127.0.0.1\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n:1\r\n:%d\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n",
        "*2\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
        "+OK\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:70000\r\n",
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:-5\r\n",
        /* B's port + 65536: must not wrap around to B (hiredis writes a
           port of up to five digits, and getaddrinfo() keeps 16 bits) */
        "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
        "?garbage\r\n",
        "*1\r\n*3\r\n:0\r\n", /* cut short: the node hangs up */
    };
    enum { WRAPPED = 21 };
    int n = (int)(sizeof(bad) / sizeof(bad[0]));

    for (int i = 0; i < n; i++) {
        sluice_store *st;
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("malformed CLUSTER SLOTS #%d", i);
        fc_reset();
        fake_lock();
        /* Every node answers it: a node named in a rejected map must not
           be able to stand in with a good one. */
        for (int k = 0; k < NNODES; k++) {
            snprintf(fc_nodes[k].slots, sizeof(fc_nodes[k].slots), bad[i],
                     fc_port(NODE_B) + (i == WRAPPED ? 65536 : 0));
            fc_nodes[k].close_after_slots = i == n - 1;
        }
        fake_unlock();
        st = fc_open_on(NODE_A);
        rc = fc_timed_hit(&d, st, "user1", &ms);
        if (!CHECK(rc == SLUICE_ECONN || rc == SLUICE_EPROTO) ||
            !CHECK(ms < CALL_BOUND_MS) ||
            !CHECK(sluice_last_error()[0] != '\0'))
            fprintf(stderr, "    reply #%d: rc %s, %" PRIu64 " ms, \"%s\"\n",
                    i, sluice_err_name(rc), ms, sluice_last_error());
        /* Nothing was sent to B: no half-read map was used. */
        CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 0);
        if (getenv("SLUICE_TEST_VERBOSE") != NULL)
            printf("  slots #%-2d %-7s %s\n", i, sluice_err_name(rc),
                   sluice_last_error());
        sluice_store_free(st);
    }
    printf("  %d malformed CLUSTER SLOTS replies: each a clear error\n", n);
    test_context(NULL);
}

/* A map that covers some slots only, and a master given with no host. */
static void test_partial_and_empty_host(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char kbuf[64];
    size_t klen;
    unsigned slot;

    test_context("a map with a hole");
    fc_reset();
    sluice__key_build(kbuf, sizeof(kbuf), &klen, "sluice", "user1", 5,
                      "fixed");
    slot = sluice__key_slot(kbuf, klen);
    fake_lock();
    /* Every slot but user1's. */
    snprintf(fc_nodes[NODE_A].slots, sizeof(fc_nodes[NODE_A].slots),
             "*2\r\n*3\r\n:0\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "*3\r\n:%u\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
             slot - 1, fc_port(NODE_A), slot + 1, fc_port(NODE_A));
    fake_unlock();
    st = fc_open_on(NODE_A);
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 0);
    sluice_store_free(st);

    /* Empty, or "?" (an endpoint the node does not know): the host of
       the node asked, with the port given. */
    for (int unknown = 0; unknown < 2; unknown++) {
        test_context("a master with %s host is the node asked",
                     unknown ? "a '?'" : "an empty");
        fc_reset();
        fake_lock();
        snprintf(fc_nodes[NODE_A].slots, sizeof(fc_nodes[NODE_A].slots),
                 "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n%s\r\n:%d\r\n",
                 unknown ? "$1\r\n?" : "$0\r\n", fc_port(NODE_B));
        fake_unlock();
        st = fc_open_on(NODE_A);
        CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
        CHECK(fc_is_decision(&d));
        CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 1);
        CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 0);
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* ---- URLs ---------------------------------------------------------------- */

static void test_urls(void)
{
    static const struct {
        const char *url;
        const char *says;
    } bad[] = {
        {"redis+cluster://127.0.0.1:7000/1", "database 0"},
        {"valkey+cluster://a:1,b:2/3", "database 0"},
        {"redis://a:1,b:2", "cluster"},
        {"valkey://a,b", "cluster"},
        {"redis+cluster://", "host"},
        {"redis+cluster://a:1,,b:2", "host"},
        {"redis+cluster://a:1,", "host"},
        {"redis+cluster://,a:1", "host"},
        {"redis+cluster://a:1,b:0", "port"},
        {"redis+cluster://a:1,b:x", "port"},
        {"redis+cluster://a:1,b c:2", "host"},
        {"redis+cluster://a:1?pool=0", "pool"},
        {"redis++cluster://a:1", "cluster://"},
        {"redis+clusters://a:1", "cluster://"},
    };
    static const char *const good[] = {
        "redis+cluster://127.0.0.1:7000",
        "valkey+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
        "redis+cluster://h1,h2:2,[::1]:3?timeout=10&pool=1",
        "valkey+cluster://u:p@h1:1,h2:2/0?clock=caller",
        "redis+cluster://h/",
    };
    char many[2048];
    size_t len;
    sluice_store *st = NULL;

    test_context("cluster URLs");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sluice_store_open(&st, bad[i].url, NULL);

        if (!CHECK_RC(rc, SLUICE_EURL) ||
            !CHECK(strstr(sluice_last_error(), bad[i].says) != NULL))
            fprintf(stderr, "    url '%s': \"%s\"\n", bad[i].url,
                    sluice_last_error());
        CHECK(st == NULL);
        sluice_store_free(st);
        st = NULL;
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!CHECK_OK(sluice_store_open(&st, good[i], NULL)))
            fprintf(stderr, "    url '%s'\n", good[i]);
        if (st != NULL)
            CHECK(strcmp(sluice_store_kind(st), "valkey-cluster") == 0);
        sluice_store_free(st);
        st = NULL;
    }
    /* 64 seeds are fine, 65 are too many. */
    len = (size_t)snprintf(many, sizeof(many), "redis+cluster://");
    for (int i = 0; i < 65; i++) {
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%sh%d:%d",
                                i ? "," : "", i, 1000 + i);
        if (i == 63) {
            CHECK_OK(sluice_store_open(&st, many, NULL));
            sluice_store_free(st);
            st = NULL;
        }
    }
    CHECK_RC(sluice_store_open(&st, many, NULL), SLUICE_EURL);
    CHECK(strstr(sluice_last_error(), "64") != NULL);
    test_context(NULL);
}

/* Seeds that are down: the store asks the next one. */
static void test_seeds(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char seeds[128];
    int dead1 = rs_free_port(), dead2 = rs_free_port();

    test_context("the first seed is down, the second up");
    fc_reset();
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d", dead1,
             fc_port(NODE_A));
    st = fc_open(seeds, NULL);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "CLUSTER SLOTS"), 1);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    sluice_store_free(st);

    test_context("several seeds, all up: the first one answers the map");
    fc_reset();
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             fc_port(NODE_B), fc_port(NODE_C), fc_port(NODE_A));
    st = fc_open(seeds, NULL);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK_EQ_U64(fc_count(NODE_B, "CLUSTER SLOTS"), 1);
    CHECK_EQ_U64(fc_count(NODE_C, "CLUSTER SLOTS") +
                     fc_count(NODE_A, "CLUSTER SLOTS"),
                 0);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1); /* the map says A */
    sluice_store_free(st);

    test_context("every seed is down");
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d,127.0.0.1:%d", dead1, dead2);
    st = fc_open(seeds, NULL);
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(ms < CALL_BOUND_MS);
    CHECK(strstr(sluice_last_error(), "127.0.0.1") != NULL);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * A node's failure is recent for FAILED_FOR_MS (5 s): map rereads ask it
 * last. One noted after the reread read its clock (another thread's call
 * timing out meanwhile) is the most recent of all: it once wrapped around
 * to "long ago", and a reread then asked a stalled node first and kept
 * every caller of live nodes waiting for a whole timeout.
 */
static void test_failed_recently(void)
{
    test_context("failed lately");
    CHECK(!sluice__vk_failed_recently(0, 1000000));
    CHECK(sluice__vk_failed_recently(1000000, 1000000));
    CHECK(sluice__vk_failed_recently(1000000, 1005000));
    CHECK(!sluice__vk_failed_recently(1000000, 1005001));
    CHECK(sluice__vk_failed_recently(1000001, 1000000)); /* noted after */
    CHECK(sluice__vk_failed_recently(UINT64_MAX, 1));
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    fc_start();
    printf("test_cluster_map: fake nodes A:%d B:%d C:%d\n",
           fc_port(NODE_A), fc_port(NODE_B), fc_port(NODE_C));
    test_malformed_slots();
    test_partial_and_empty_host();
    test_urls();
    test_seeds();
    test_failed_recently();
    fc_stop();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_map");
}
