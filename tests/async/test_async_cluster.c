/*
 * test_async_cluster.c - the async API on a real Redis Cluster: calls go
 * to the master of their key's slot, and follow MOVED and ASK while slots
 * move under calls in flight.
 *
 * On the cluster of the ctest run (cluster.h: three masters with a replica
 * each). It moves one slot away and back, so it runs among the tests that
 * change the cluster (tests/CMakeLists.txt), leaving the map as it found
 * it.
 *
 *   1. Differential. A seeded trace of hits and peeks over thirty ids, ten
 *      served by each master, goes through the async API to the cluster and
 *      through the blocking calls to the embedded store, both on one
 *      virtual clock; each id has one limit, of an algorithm that runs on
 *      the caller's clock. Each batch holds every id once (so no two calls of a
 *      batch on one key race each other) and leaves in one loop turn; the
 *      clock moves between batches. Every decision must be the embedded
 *      store's in every field, for the algorithms that run on the caller's
 *      clock on a server.
 *   1b. hit_all and peek_all through the async API (one script call on the
 *      id's master) answer as the embedded store's blocking calls do.
 *   2. MOVED in flight. Rounds of hits on ids, four of them in one slot S;
 *      each round's calls are written, then, before their replies are read,
 *      one step of moving S by hand (SETSLOT IMPORTING/MIGRATING, MIGRATE
 *      one id's keys, SETSLOT NODE), so replies meet ASK and then MOVED.
 *      S is moved to another master and back. Every callback runs exactly
 *      once and none has an error; each tight limit (max 20, 30 attempts)
 *      admits exactly 20; the store counted redirects, and the masters
 *      ASKING.
 *
 * Usage: test_async_cluster [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "algo/model.h" /* which algorithms run on the caller's clock */
#include "cluster.h"
#include "compare.h"
#include "rng.h"
#include "route_loop.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rc_cluster cluster;

#define DIFF_IDS 30
#define DIFF_BATCHES 60
#define DRAIN_MS 10000

/* ---- 1. Differential -------------------------------------------------------- */

/* Thirty ids, ten served by each of the three masters. */
static void pick_ids(char ids[DIFF_IDS][16])
{
    int m[RC_MAX_NODES], per[RC_MAX_NODES] = {0}, n = 0;

    if (!CHECK(rc_masters_by_slot(&cluster, m) == 3))
        exit(1);
    for (int i = 0; n < DIFF_IDS; i++) {
        char id[16];
        int owner;

        snprintf(id, sizeof(id), "ad%d", i);
        owner = cluster.owner[test_slot_of_id(id)];
        for (int k = 0; k < 3; k++)
            if (owner == m[k] && per[k] < DIFF_IDS / 3) {
                per[k]++;
                memcpy(ids[n++], id, sizeof(id));
            }
    }
}

/* One batch: every id once, a hit or a peek of a random exact algorithm,
   started on the handle and decided at once by the embedded store. */
static int diff_batch(sluice_async *a, rl_loop *l, sluice_store *mem,
                      char ids[DIFF_IDS][16], uint64_t seed, int batch)
{
    static sluice_algo exact[TEST_ALGO_N];
    static rl_answer ans[DIFF_IDS];
    sluice_decision want[DIFF_IDS];
    int peek[DIFF_IDS], nexact = 0, bad = 0;
    sluice_limit lim[DIFF_IDS];

    for (int k = 0; k < TEST_ALGO_N; k++)
        if (!sluice__models[k]->server_clock)
            exact[nexact++] = (sluice_algo)k;
    for (int i = 0; i < DIFF_IDS; i++) {
        uint64_t cost = rng_range(1, 2);

        /* Each id keeps one limit, as the blocking differential does: a
           state read under another window is no shared contract. */
        lim[i] = SLUICE_LIMIT(exact[(size_t)i % (size_t)nexact],
                              3 + (uint64_t)i % 6,
                              60000 * (1 + (uint64_t)i % 3));
        peek[i] = rng_pct(25);
        memset(&ans[i], 0, sizeof(ans[i]));
        CHECK_OK((peek[i] ? sluice_peek : sluice_hit)(
            &want[i], mem, &lim[i], ids[i], strlen(ids[i]), cost));
        CHECK_OK((peek[i] ? sluice_async_peek : sluice_async_hit)(
            a, &lim[i], ids[i], strlen(ids[i]), cost, rl_on_decision,
            &ans[i]));
    }
    CHECK(rl_drain(a, l, DRAIN_MS) == 0);
    for (int i = 0; i < DIFF_IDS; i++) {
        CHECK_EQ_U64(ans[i].calls, 1);
        if (!CHECK_OK(ans[i].err))
            fprintf(stderr, "    %s\n", ans[i].msg);
        else if (!CHECK(decision_same(&want[i], &ans[i].d)) && bad++ < 3) {
            fprintf(stderr, "    seed %" PRIu64 " batch %d: %s %s %s\n",
                    seed, batch, peek[i] ? "peek" : "hit",
                    sluice_algo_name(lim[i].algo), ids[i]);
            decision_print("embedded", 0, &want[i]);
            decision_print("async cluster", ans[i].err, &ans[i].d);
        }
    }
    return bad;
}

static void test_diff(uint64_t seed)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1700000000000ULL);
    sluice_store *mem = test_store_open("mem://", "", &opts);
    sluice_store *cl = test_store_open(cluster.url, TEST_CALLER_QUERY, &opts);
    static char ids[DIFF_IDS][16];
    sluice_async_hooks hooks;
    sluice_async *a = NULL;
    rl_loop l;
    int bad = 0;

    test_context("async differential on the cluster (seed %" PRIu64 ")",
                 seed);
    CHECK(rc_flush(&cluster) == 0);
    rng_state = seed;
    pick_ids(ids);
    rl_init(&l, &hooks);
    if (CHECK_OK(sluice_async_new(&a, cl, &hooks))) {
        for (int b = 0; b < DIFF_BATCHES; b++) {
            bad += diff_batch(a, &l, mem, ids, seed, b);
            sluice_vclock_advance(clock, rng_range(0, 20000));
        }
        sluice_async_free(a);
    }
    CHECK(!l.overflow);
    printf("  async differential: %d batches of %d calls over 3 masters, "
           "%d mismatches (seed %" PRIu64 ")\n", DIFF_BATCHES, DIFF_IDS, bad,
           seed);
    sluice_store_free(cl);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* ---- 1b. hit_all and peek_all ------------------------------------------------- */

static void on_all(sluice_async *a, int err, const sluice_decision *out,
                   const sluice_decision *each, size_t n, void *user)
{
    rl_answer *ans = user;

    (void)a;
    (void)each;
    (void)n;
    ans->calls++;
    ans->err = err;
    if (out != NULL)
        ans->d = *out;
    if (err != 0)
        snprintf(ans->msg, sizeof(ans->msg), "%s", sluice_last_error());
}

/*
 * sluice_async_hit_all() and _peek_all() on the cluster: one script call
 * per request, on the master of the id's slot; every combined decision is
 * the embedded store's sluice_hit_all() / sluice_peek_all() on the same
 * virtual clock.
 */
static void test_all(void)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1700000000000ULL);
    sluice_store *mem = test_store_open("mem://", "", &opts);
    sluice_store *cl = test_store_open(cluster.url, TEST_CALLER_QUERY, &opts);
    sluice_limit lims[2] = {SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 60000),
                            SLUICE_LIMIT(SLUICE_SLIDING_LOG, 8, 600000)};
    static char ids[DIFF_IDS][16];
    sluice_async_hooks hooks;
    sluice_async *a = NULL;
    int same = 0;
    rl_loop l;

    test_context("async hit_all on the cluster");
    CHECK(rc_flush(&cluster) == 0);
    pick_ids(ids);
    rl_init(&l, &hooks);
    if (!CHECK_OK(sluice_async_new(&a, cl, &hooks)))
        goto out;
    for (int round = 0; round < 12; round++) {
        static rl_answer ans[DIFF_IDS];
        sluice_decision want[DIFF_IDS];
        int peek = round % 4 == 3;

        for (int i = 0; i < DIFF_IDS; i++) {
            memset(&ans[i], 0, sizeof(ans[i]));
            CHECK_OK((peek ? sluice_peek_all : sluice_hit_all)(
                &want[i], NULL, mem, lims, 2, ids[i], strlen(ids[i]), 1));
            CHECK_OK((peek ? sluice_async_peek_all : sluice_async_hit_all)(
                a, lims, 2, ids[i], strlen(ids[i]), 1, on_all, &ans[i]));
        }
        CHECK(rl_drain(a, &l, DRAIN_MS) == 0);
        for (int i = 0; i < DIFF_IDS; i++) {
            CHECK_EQ_U64(ans[i].calls, 1);
            if (!CHECK_OK(ans[i].err))
                fprintf(stderr, "    %s\n", ans[i].msg);
            else
                same += CHECK(decision_same(&want[i], &ans[i].d));
        }
        sluice_vclock_advance(clock, 7000);
    }
    sluice_async_free(a);
    printf("  async hit_all: %d of %d combined decisions the embedded "
           "store's\n", same, 12 * DIFF_IDS);
out:
    sluice_store_free(cl);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* ---- 2. MOVED in flight ------------------------------------------------------- */

#define MOVE_ROUNDS 30
#define TIGHT_MAX 20
#define SLOT_IDS 4
#define OTHER_IDS 12
#define TRACKS (2 * (SLOT_IDS + OTHER_IDS))

typedef struct track {
    char id[24];
    sluice_limit lim;
    long attempts, admitted;
} track;

static track tracks[TRACKS];

/* SLOT_IDS ids in one slot (its number into '*slot'), then OTHER_IDS
   others; each with a fixed and a sliding-log limit of TIGHT_MAX an hour. */
static void make_tracks(unsigned *slot)
{
    int n = 0;

    *slot = test_slot_of_id("mv0");
    for (long i = 0; n < SLOT_IDS + OTHER_IDS; i++) {
        char id[24];
        unsigned s;

        snprintf(id, sizeof(id), "mv%ld", i);
        s = test_slot_of_id(id);
        if ((n < SLOT_IDS) != (s == *slot))
            continue;
        for (int k = 0; k < 2; k++) {
            track *t = &tracks[2 * n + k];

            snprintf(t->id, sizeof(t->id), "%s", id);
            t->lim = SLUICE_LIMIT(k ? SLUICE_SLIDING_LOG : SLUICE_FIXED,
                                  TIGHT_MAX, 3600000);
        }
        n++;
    }
}

/* Moves the keys of one hashtag of 'slot' from master 'from' to 'to';
   1 when one was moved, 0 when none is left, -1 on a failure. */
static int migrate_one_id(int slot, int from, int to)
{
    redisReply *r = rs_cmd(&cluster.nodes[from].srv,
                           "CLUSTER GETKEYSINSLOT %d 10", slot);
    const char *keys[10];
    size_t lens[10], n = 0;
    int rc = -1;

    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        goto out;
    rc = 0;
    for (size_t i = 0; i < r->elements && n < 10; i++) {
        const char *open = memchr(r->element[0]->str, '}', r->element[0]->len);
        size_t tag = open ? (size_t)(open - r->element[0]->str) : 0;

        if (r->element[i]->len > tag &&
            memcmp(r->element[i]->str, r->element[0]->str, tag + 1) == 0) {
            keys[n] = r->element[i]->str;
            lens[n++] = r->element[i]->len;
        }
    }
    if (n > 0)
        rc = rc_migrate(&cluster, from, to, keys, lens, n) == 0 ? 1 : -1;
out:
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/*
 * The move's step for round 'round' (of moving 'slot' from 'from' to
 * 'to', starting at round 'first'): open the slot, move one id's keys a
 * round while any is left, then give the slot to 'to'. 1 once done.
 */
static int move_step(int round, int first, int slot, int from, int to)
{
    if (round < first)
        return 0;
    if (round == first)
        return CHECK(rc_slot_open(&cluster, slot, from, to) == 0) ? 0 : 1;
    switch (migrate_one_id(slot, from, to)) {
    case 1:
        return 0;
    case 0:
        CHECK(rc_slot_close(&cluster, slot, from, to) == 0);
        return 1;
    default:
        CHECK(0);
        return 1;
    }
}

/* Where the move of the slot stands: state 0 moving it from m0 to m1
   from round 'first' on, 1 moving it back from round 'first' on, 2 done. */
typedef struct move_state {
    int state, first, slot, m0, m1;
} move_state;

/* One round: a hit on every track, written; one step of the move; then
   every reply read. */
static void move_round(sluice_async *a, rl_loop *l, int round, move_state *m)
{
    static rl_answer ans[TRACKS];

    for (int i = 0; i < TRACKS; i++) {
        memset(&ans[i], 0, sizeof(ans[i]));
        CHECK_OK(sluice_async_hit(a, &tracks[i].lim, tracks[i].id,
                                  strlen(tracks[i].id), 1, rl_on_decision,
                                  &ans[i]));
    }
    rl_turn(a, l, 0); /* written, or connecting: in flight either way */
    rl_turn(a, l, 0);
    if (m->state < 2 &&
        move_step(round, m->first, m->slot, m->state ? m->m1 : m->m0,
                  m->state ? m->m0 : m->m1)) {
        m->state++;
        m->first = round + 2;
    }
    CHECK(rl_drain(a, l, DRAIN_MS) == 0);
    for (int i = 0; i < TRACKS; i++) {
        CHECK_EQ_U64(ans[i].calls, 1);
        if (!CHECK_OK(ans[i].err)) {
            fprintf(stderr, "    round %d, %s %s: %s\n", round,
                    sluice_algo_name(tracks[i].lim.algo), tracks[i].id,
                    ans[i].msg);
            continue;
        }
        tracks[i].attempts++;
        tracks[i].admitted += ans[i].d.allowed;
    }
}

/* How often the live nodes ran 'command' since CONFIG RESETSTAT. */
static long node_calls(const char *command)
{
    long total = 0;

    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead)
            total += (long)rs_calls(&cluster.nodes[i].srv, command);
    return total;
}

static void test_moved_in_flight(void)
{
    sluice_store *cl = test_store_open(cluster.url, "timeout=5000", NULL);
    sluice_async_hooks hooks;
    sluice_async *a = NULL;
    sluice_store_stats stats;
    move_state m = {0, 3, 0, 0, 0};
    long rereads;
    unsigned slot;
    int from, to;
    rl_loop l;

    test_context("async: MOVED and ASK in flight");
    CHECK(rc_flush(&cluster) == 0);
    make_tracks(&slot);
    from = cluster.owner[slot];
    to = rc_first_live(&cluster, 1);
    for (int i = 0; to == from && i < cluster.n; i++)
        if (!cluster.nodes[i].dead && cluster.nodes[i].is_master)
            to = i;
    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead)
            rs_ok(&cluster.nodes[i].srv, "CONFIG RESETSTAT");
    rl_init(&l, &hooks);
    if (!CHECK(from >= 0 && to != from) ||
        !CHECK_OK(sluice_async_new(&a, cl, &hooks))) {
        sluice_store_free(cl);
        return;
    }
    m.slot = (int)slot;
    m.m0 = from;
    m.m1 = to;
    for (int round = 0; round < MOVE_ROUNDS; round++)
        move_round(a, &l, round, &m);
    /* MOVED marked the map stale: the handle reread it (nothing else
       here asks CLUSTER SLOTS). */
    rereads = node_calls("cluster|slots");
    CHECK(rereads > 0);
    sluice_async_free(a);
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    CHECK(m.state == 2 && cluster.owner[slot] == from);
    for (int i = 0; i < TRACKS; i++) {
        test_context("async: MOVED and ASK in flight: %s %s",
                     sluice_algo_name(tracks[i].lim.algo), tracks[i].id);
        CHECK_EQ_U64(tracks[i].attempts, MOVE_ROUNDS);
        CHECK_EQ_U64(tracks[i].admitted, TIGHT_MAX);
    }
    test_context("async: MOVED and ASK in flight");
    CHECK_OK(sluice_store_stats_get(&stats, cl));
    CHECK(stats.redirects > 0);
    CHECK(node_calls("asking") > 0);
    printf("  MOVED in flight: slot %u moved from node %d to %d and back "
           "under %d rounds of %d calls; %" PRIu64 " redirects followed, "
           "%ld ASKING, %ld map rereads\n", slot, from, to, MOVE_ROUNDS,
           TRACKS, stats.redirects, node_calls("asking"), rereads);
    sluice_store_free(cl);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    const char *env = getenv("SLUICE_TEST_SEED");
    uint64_t seed = argc > 1   ? strtoull(argv[1], NULL, 10)
                    : env      ? strtoull(env, NULL, 10)
                               : (uint64_t)rs_mono_ms();

    if (rc_shared_begin(&cluster, "test_async_cluster") < 0)
        return 1;
    printf("  seed %" PRIu64 "\n", seed);
    test_diff(seed);
    test_all();
    test_moved_in_flight();
    rc_shared_close(&cluster);
    return test_summary("test_async_cluster");
}
