/*
 * test_cluster_misconfig.c - a cluster node reached through a plain
 * valkey:// URL (the cluster of the ctest run, cluster.h): a key that
 * another master serves answers MOVED, which is a misconfiguration, never
 * an outage.
 *
 * The store is opened with on_error=open (and again with on_error=closed)
 * on one master. For keys of that master's own slots it decides as usual;
 * for keys of another master's slots every call is SLUICE_ECONFIG, with a
 * message that names the fix (valkey+cluster://), and never a decision: no
 * admission on a max=1 limit (the repro admitted 3 of 3), no
 * fallback counted. A cluster store on the same seed decides the same keys.
 * The test changes no slot and no node.
 */
#include "cluster.h"
#include "stores.h"
#include "test.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static rc_cluster cluster;

/* Writes into 'id' an id whose keys master 'node' serves (with 'other',
   one whose keys another master serves). */
static void find_id(char *id, size_t cap, int node, bool other)
{
    for (int k = 0;; k++) {
        int owner;

        snprintf(id, cap, "mcid%d", k);
        owner = cluster.owner[test_slot_of_id(id)];
        if (owner >= 0 && (owner == node) != other)
            return;
    }
}

static void test_one_node_url(int node, const char *policy)
{
    const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1, 600000);
    char url[128], own[16], far[16];
    sluice_store *st = NULL, *cl = NULL;
    sluice_store_stats stats;
    sluice_decision d;
    int admitted = 0, rc = 0;

    test_context("valkey:// to master %d, on_error=%s", node, policy);
    snprintf(url, sizeof(url), "valkey://127.0.0.1:%d?on_error=%s",
             cluster.nodes[node].srv.port, policy);
    find_id(own, sizeof(own), node, false);
    find_id(far, sizeof(far), node, true);
    if (!CHECK_OK(sluice_store_open(&st, url, NULL)) ||
        !CHECK_OK(sluice_store_open(&cl, cluster.url, NULL)))
        goto out;
    CHECK_RESET(sluice_reset(cl, &lim, own, strlen(own)));
    CHECK_RESET(sluice_reset(cl, &lim, far, strlen(far)));

    /* The node's own keys: decided there, as by any client. */
    CHECK_OK(sluice_hit(&d, st, &lim, own, strlen(own), 1));
    CHECK(d.allowed && d.fallback == SLUICE_ANSWERED);
    CHECK_OK(sluice_hit(&d, st, &lim, own, strlen(own), 1));
    CHECK(!d.allowed && d.fallback == SLUICE_ANSWERED);

    /* Another master's keys: the error, every time, whatever the policy. */
    for (int i = 0; i < 3; i++) {
        rc = sluice_hit(&d, st, &lim, far, strlen(far), 1);
        CHECK_RC(rc, SLUICE_ECONFIG);
        admitted += d.allowed;
        CHECK(d.fallback == SLUICE_ANSWERED);
        if (!CHECK(strstr(sluice_last_error(), "valkey+cluster://") != NULL &&
                   strstr(sluice_last_error(), "MOVED") != NULL))
            fprintf(stderr, "    message: %s\n", sluice_last_error());
    }
    CHECK_EQ_U64(admitted, 0);
    CHECK_RC(sluice_peek(&d, st, &lim, far, strlen(far), 1), SLUICE_ECONFIG);
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.fell_open + stats.fell_closed, 0);
    printf("  on_error=%s: another master's key is %s (%d of 3 admitted): "
           "%s\n", policy, sluice_err_name(rc), admitted,
           sluice_strerror(rc));

    /* The budget was never touched: the cluster store has it whole. */
    CHECK_OK(sluice_hit(&d, cl, &lim, far, strlen(far), 1));
    CHECK(d.allowed);
    CHECK_RESET(sluice_reset(cl, &lim, own, strlen(own)));
    CHECK_RESET(sluice_reset(cl, &lim, far, strlen(far)));
out:
    sluice_store_free(st);
    sluice_store_free(cl);
    test_context(NULL);
}

int main(void)
{
    int node;

    if (rc_shared_begin(&cluster, "test_cluster_misconfig") < 0)
        return 1;
    CHECK(rc_refresh(&cluster) == 0);
    node = rc_first_live(&cluster, 1);
    if (CHECK(node >= 0)) {
        test_one_node_url(node, "open");
        test_one_node_url(node, "closed");
    }
    rc_shared_close(&cluster);
    return test_summary("test_cluster_misconfig");
}
