/*
 * test_async_sentinel.c - the async API on a store found through Sentinel
 * (valkey+sentinel://): the master the sentinel names is found without
 * blocking and used, and after SENTINEL FAILOVER calls reach the new one.
 *
 * A master, its replica and one redis-sentinel (server.h's rs_sentinel).
 *
 *   1. Found and used. Hits on a limit of max 5 (eight per id, over ten
 *      ids) all answered exactly once, with no error; five admitted per id,
 *      and the master the sentinel names holds each id's count (5).
 *   2. After SENTINEL FAILOVER (the old master demoted to a replica: it
 *      answers READONLY, or its connection is dropped), the same handle's
 *      calls reach the new master: every callback exactly once; after the
 *      first round no call fails; the new master holds the keys written
 *      after the failover, and its count for a fresh id is what was
 *      admitted.
 */
#include "route_loop.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDS 10
#define HITS 8
#define MAX 5
#define DRAIN_MS 10000

static rs_sentinel st;

/* The count GET answers for 'id''s fixed-window key on node 'n'; -1 if
   none. */
static long long count_on(rs_server *n, const char *id)
{
    char key[128];
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, 0};
    redisReply *r;
    long long v = -1;

    lens[1] = test_key_of(key, sizeof(key), "sluice", id, strlen(id),
                          "fixed");
    r = rs_cmdargv(n, 2, argv, lens);
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/*
 * One round: HITS hits on each of the IDS ids "PREFIX<i>", all started
 * at once, then answered. Returns how many failed; admissions per id into
 * 'admitted'.
 */
static int round_of_hits(sluice_async *a, rl_loop *l, const char *prefix,
                         long admitted[IDS])
{
    static rl_answer ans[IDS * HITS];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, MAX, 3600000);
    char ids[IDS][32];
    int failed = 0;

    for (int i = 0; i < IDS; i++)
        snprintf(ids[i], sizeof(ids[i]), "%s%d", prefix, i);
    for (int k = 0; k < IDS * HITS; k++) {
        memset(&ans[k], 0, sizeof(ans[k]));
        CHECK_OK(sluice_async_hit(a, &lim, ids[k % IDS], strlen(ids[k % IDS]),
                                  1, rl_on_decision, &ans[k]));
    }
    CHECK(rl_drain(a, l, DRAIN_MS) == 0);
    for (int k = 0; k < IDS * HITS; k++) {
        CHECK_EQ_U64(ans[k].calls, 1);
        if (ans[k].err != 0) {
            if (failed++ == 0)
                printf("    %s: %s: %s\n", prefix, sluice_err_name(ans[k].err),
                       ans[k].msg);
            continue;
        }
        admitted[k % IDS] += ans[k].d.allowed;
    }
    return failed;
}

static void test_found_and_used(sluice_async *a, rl_loop *l)
{
    long admitted[IDS] = {0};
    rs_server *m = rs_sentinel_master(&st);

    test_context("async sentinel: the master found and used");
    CHECK_EQ_U64(round_of_hits(a, l, "s", admitted), 0);
    for (int i = 0; i < IDS; i++) {
        char id[32];

        snprintf(id, sizeof(id), "s%d", i);
        CHECK_EQ_U64(admitted[i], MAX);
        if (CHECK(m != NULL))
            CHECK_EQ_U64(count_on(m, id), MAX);
    }
    test_context(NULL);
}

/* Waits (up to 10 s) until node 'n' says it is a replica; 0 or -1. */
static int wait_replica(rs_server *n)
{
    for (uint64_t end = rs_mono_ms() + 10000; rs_mono_ms() < end;) {
        redisReply *r = rs_cmd(n, "ROLE");
        int replica = r != NULL && r->type == REDIS_REPLY_ARRAY &&
                      r->elements > 0 &&
                      r->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[0]->str, "slave") == 0;

        if (r != NULL)
            freeReplyObject(r);
        if (replica)
            return 0;
        rs_sleep_ms(50);
    }
    return -1;
}

static void test_after_failover(sluice_async *a, rl_loop *l)
{
    rs_server *old = rs_sentinel_master(&st);
    long admitted[IDS] = {0}, later[IDS] = {0};
    rs_server *m;
    int port, failed;

    test_context("async sentinel: after SENTINEL FAILOVER");
    port = rs_sentinel_failover(&st);
    if (!CHECK(port > 0) || !CHECK(old != NULL && old->port != port) ||
        !CHECK(wait_replica(old) == 0))
        return;
    /* The first round may meet the change (READONLY, a dropped
       connection): each call still answered once. */
    failed = round_of_hits(a, l, "f", admitted);
    printf("  after SENTINEL FAILOVER (new master on port %d): %d of %d "
           "calls of the first round failed\n", port, failed, IDS * HITS);
    /* Then every call reaches the new master. */
    CHECK_EQ_U64(round_of_hits(a, l, "g", later), 0);
    m = rs_sentinel_master(&st);
    if (CHECK(m != NULL && m->port == port))
        for (int i = 0; i < IDS; i++) {
            char id[32];

            snprintf(id, sizeof(id), "g%d", i);
            CHECK_EQ_U64(later[i], MAX);
            CHECK_EQ_U64(count_on(m, id), MAX);
        }
    test_context(NULL);
}

int main(void)
{
    sluice_async_hooks hooks;
    sluice_async *a = NULL;
    sluice_store *s;
    rl_loop l;

    if (rs_sentinel_start(&st, NULL, NULL) < 0) {
        fprintf(stderr, "test_async_sentinel: cannot start the sentinel "
                "setup\n");
        return 1;
    }
    printf("  %s\n", st.url);
    s = test_store_open(st.url, "timeout=3000", NULL);
    rl_init(&l, &hooks);
    if (CHECK_OK(sluice_async_new(&a, s, &hooks))) {
        test_found_and_used(a, &l);
        test_after_failover(a, &l);
        sluice_async_free(a);
    }
    CHECK(!l.overflow);
    sluice_store_free(s);
    rs_sentinel_stop(&st);
    return test_summary("test_async_sentinel");
}
