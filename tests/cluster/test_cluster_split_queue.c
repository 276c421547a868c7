/*
 * test_cluster_split_queue.c - a queue whose two keys a migration has
 * split: the cluster store gives up on the two-key read within bounds, and
 * follows ASK for what it can.
 *
 * On the cluster of the ctest run (cluster.h). It moves one slot by hand,
 * so it runs after the tests that only read the cluster (see
 * tests/CMakeLists.txt), and picks the slot from the map it finds.
 *
 * The queue's limiter has moved, its meta hash has not. The source answers
 * the two-key read TRYAGAIN for as long as the split lasts; the store tries
 * again a bounded number of times (today MAX_SENDS in src/valkey/cluster.c,
 * with short sleeps: about 75 ms in all), within the command timeout, and
 * then gives up with SLUICE_ECONN. The one-key increment meanwhile follows
 * ASK to the limiter's new node. Once both keys have moved, the read
 * follows ASK too.
 */
#include "cluster.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A call must come back within its timeout plus this much slack. */
#define CALL_SLACK_MS 1700

static rc_cluster cluster;

/* The queue, the slot it lives in and the masters it moves between. */
typedef struct split {
    int from, to, slot;
    char q[24], lim[128], meta[128];
    size_t llen, mlen;
    sluice_store *st;
} split;

/* A queue served by 'from', its keys, a first increment and a cap of 5. */
static void split_setup(split *s)
{
    uint64_t count = 0;

    for (int i = 0;; i++) {
        snprintf(s->q, sizeof(s->q), "split%d", i);
        if (cluster.owner[test_slot_of_queue(s->q)] == s->from)
            break;
    }
    s->slot = (int)test_slot_of_queue(s->q);
    s->llen = test_key_of(s->lim, sizeof(s->lim), "emq", s->q, strlen(s->q),
                          "limiter");
    s->mlen = test_key_of(s->meta, sizeof(s->meta), "emq", s->q,
                          strlen(s->q), "meta");
    s->st = test_store_open(cluster.url, "timeout=2000", NULL);
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, s->st, s->q, strlen(s->q),
                                     3600000));
    CHECK_EQ_U64(count, 1);
    CHECK(rc_hset(&cluster, s->meta, s->mlen, "max", "5") == 0);
    CHECK(rc_hset(&cluster, s->meta, s->mlen, "duration", "3600000") == 0);
}

/* Moves one key of the queue to 'to' (its slot open). */
static void move_key(const split *s, const char *key, size_t len)
{
    const char *keys[] = {key};

    CHECK(rc_migrate(&cluster, s->from, s->to, keys, &len, 1) == 0);
}

/* See the top of this file. */
static void test_split_queue(void)
{
    int m[RC_MAX_NODES], rc;
    split s;
    uint64_t wait = 7, count = 0, t0, took_ms;
    long tryagain;

    test_context("a queue split by a migration");
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    if (!CHECK(rc_masters_by_slot(&cluster, m) == 3))
        return;
    s.from = m[0];
    s.to = m[1];
    split_setup(&s);
    CHECK(rc_slot_open(&cluster, s.slot, s.from, s.to) == 0);
    move_key(&s, s.lim, s.llen);
    rs_ok(&cluster.nodes[s.from].srv, "CONFIG RESETSTAT");
    /* Split: the two-key read meets TRYAGAIN until the store gives up. */
    t0 = rs_mono_us();
    rc = sluice_emq_rate_limit_ttl(&wait, s.st, s.q, strlen(s.q), 0);
    took_ms = (rs_mono_us() - t0) / 1000;
    tryagain = (long)rs_info_count(&cluster.nodes[s.from].srv, "errorstats",
                                   "errorstat_TRYAGAIN:count=");
    CHECK_RC(rc, SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    CHECK(took_ms < 2000 + CALL_SLACK_MS);
    CHECK(tryagain >= 5); /* at least MAX_SENDS tries, within the timeout */
    /* The one-key increment follows ASK to where the limiter is. */
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, s.st, s.q, strlen(s.q),
                                     3600000));
    CHECK_EQ_U64(count, 2);
    /* Both keys moved: the read follows ASK as well. */
    move_key(&s, s.meta, s.mlen);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, s.st, s.q, strlen(s.q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(rc_slot_close(&cluster, s.slot, s.from, s.to) == 0);
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, s.st, s.q, strlen(s.q), 2));
    CHECK(wait > 0); /* 2 of a cap of 2, read at its new home */
    printf("  split queue: the two-key read gave up after %ld TRYAGAIN in "
           "%" PRIu64 " ms (%s); the increment and, once both keys had "
           "moved, the read followed ASK\n",
           tryagain, took_ms, sluice_err_name(rc));
    sluice_store_free(s.st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rc_shared_begin(&cluster, "test_cluster_split_queue") < 0)
        return 1;
    test_split_queue();
    rc_shared_close(&cluster);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_split_queue");
}
