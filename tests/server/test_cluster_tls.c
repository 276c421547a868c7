/*
 * test_cluster_tls.c - a cluster over TLS (tls-cluster yes, tls-replication
 * yes, client certificates required) reached with one seed of
 * rediss+cluster://: the store reaches every master it discovers with the
 * URL's TLS settings, decisions land on each key's own master, a batch
 * over every slot's keys and sluice_hit_all() are answered, and a node of
 * it named by a plain rediss:// URL answers MOVED: SLUICE_ECONFIG.
 */
#include "cluster.h"
#include "valkey/valkey.h" /* sluice__key_slot() */
#include "stores.h"
#include "test.h"
#include "tls_certs.h"

#include <stdio.h>
#include <string.h>

#define KEYS 60

static rc_cluster cluster;

static void test_every_master(const rs_certs *c)
{
    const sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 2, 60000);
    sluice_store *st = NULL;
    sluice_request reqs[KEYS];
    char url[1600], ids[KEYS][16];
    size_t seed_len = strcspn(cluster.url, ",");
    bool used[RC_MAX_NODES] = {false};
    int masters = 0;

    test_context("every master over TLS, from one seed");
    /* One seed only: the others are found, and reached with the same
       settings (the client certificate included). */
    snprintf(url, sizeof(url), "%.*s?tls_ca=%s&tls_cert=%s&tls_key=%s",
             (int)seed_len, cluster.url, c->ca_cert, c->client_cert,
             c->client_key);
    if (!CHECK_OK(sluice_store_open(&st, url, NULL)))
        return;
    for (int i = 0; i < KEYS; i++) {
        sluice_decision d;

        snprintf(ids[i], sizeof(ids[i]), "tls%d", i);
        CHECK_OK(sluice_hit(&d, st, &lim, ids[i], strlen(ids[i]), 1));
        CHECK(d.allowed);
        reqs[i] = (sluice_request){ids[i], strlen(ids[i]), 1, 0, {0}};
    }
    /* A batch over all of them: the second unit each, then refusals. */
    CHECK_OK(sluice_hit_many(st, &lim, reqs, KEYS));
    for (int i = 0; i < KEYS; i++)
        CHECK(reqs[i].err == 0 && reqs[i].decision.allowed);
    CHECK_OK(sluice_hit_many(st, &lim, reqs, KEYS));
    for (int i = 0; i < KEYS; i++)
        CHECK(reqs[i].err == 0 && !reqs[i].decision.allowed);
    /* Each key is on the master of its slot: they spread over all. */
    CHECK(rc_refresh(&cluster) == 0);
    for (int i = 0; i < KEYS; i++) {
        char key[64];
        int at;

        test_key_of(key, sizeof(key), "sluice", ids[i], strlen(ids[i]),
                    "sliding-log");
        at = cluster.owner[sluice__key_slot(key, strlen(key))];
        if (CHECK(at >= 0) && !used[at]) {
            used[at] = true;
            masters++;
        }
    }
    CHECK_EQ_U64(masters, 3);
    sluice_store_free(st);
    test_context(NULL);
}

/* One node named as a single TLS server: MOVED for another's keys. */
static void test_one_node_url(const rs_certs *c)
{
    const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    sluice_store *st = NULL;
    char url[1600];
    int refused = 0;

    test_context("a TLS cluster node behind rediss://");
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d?tls_ca=%s&tls_cert=%s&"
             "tls_key=%s&on_error=open", cluster.nodes[0].srv.port, c->ca_cert,
             c->client_cert, c->client_key);
    if (!CHECK_OK(sluice_store_open(&st, url, NULL)))
        return;
    for (int i = 0; i < 20; i++) {
        char id[16];
        sluice_decision d;
        int rc;

        snprintf(id, sizeof(id), "one%d", i);
        rc = sluice_hit(&d, st, &lim, id, strlen(id), 1);
        CHECK(rc == 0 || rc == SLUICE_ECONFIG);
        refused += rc == SLUICE_ECONFIG;
        if (rc == SLUICE_ECONFIG)
            CHECK(!d.allowed);
    }
    CHECK(refused > 0); /* 20 keys: most on the other two masters */
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    const rs_certs *c = rs_certs_get();

    if (c == NULL || rc_start_tls(&cluster, 3, 0, "yes", NULL) < 0) {
        fprintf(stderr, "test_cluster_tls: cannot start the TLS cluster\n");
        return 1;
    }
    printf("  %s\n", cluster.url);
    test_every_master(c);
    test_one_node_url(c);
    rc_stop(&cluster);
    return test_summary("test_cluster_tls");
}
