/*
 * test_cluster_reshard.c - the cluster store under traffic while slots
 * move: no call fails and no budget is exceeded.
 *
 * On the cluster of the ctest run (cluster.h). It moves slots, so it runs
 * after the tests that only read the cluster and before the others that
 * change it (tests/CMakeLists.txt), and it takes the slot map as it finds
 * it: what it moves is chosen from the map it reads first.
 *
 * Four threads hit many ids (fixed and sliding-log, one-hour windows; two
 * of them in batches of up to 8 ids with sluice_hit_many(), whose per-slot
 * calls are queued together and, when redirected, sent again alone) and a
 * fifth reads and counts queues, while slots move: redis-cli --cluster
 * reshard moves 400 slots from one master to another; four slots are then
 * moved by hand (SETSLOT IMPORTING and MIGRATING, a pause, MIGRATE one id's
 * keys at a time with pauses, a pause with every key gone, SETSLOT NODE),
 * so calls meet ASK; and redis-cli moves the first 400 slots on again. No
 * call may fail; "tight" limits (max 20) admit exactly 20 of their many
 * attempts; "wide" ones (max 1000, fewer than 1000 attempts) admit every
 * one; the servers' counters equal what was admitted and counted; each key
 * ends on the master that serves its slot; the store counted redirects,
 * and the servers counted ASKING.
 */
#include "cluster.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rc_cluster cluster;

#define TIGHT_MAX 20
#define WIDE_MAX 1000
#define RESHARD_THREADS 4
/* Each thread hits each wide limit at most this often: 4 x 240 < 1000. */
#define WIDE_PER_THREAD 240
#define HAND_SLOTS 4

typedef struct tracked {
    char id[24];
    sluice_limit lim;
    int tight;
    unsigned slot;
    atomic_long attempts, admitted;
} tracked;

static tracked *tracks;
static int ntracks;

typedef struct hammer {
    sluice_store *st;
    int index;
    atomic_int *stop;
    long calls, errors;
    char first_error[256];
    int *wide_hits; /* per track */
} hammer;

#define RESHARD_BATCH 8

/*
 * The batching threads' turn: up to RESHARD_BATCH tracked ids of one limit,
 * from track 'k' on, decided by one sluice_hit_many() (one script call per
 * slot among them, queued together), counted like single hits.
 */
static void hammer_batch(hammer *h, int k)
{
    sluice_request q[RESHARD_BATCH];
    int which[RESHARD_BATCH], n = 0;
    const sluice_limit *lim = &tracks[k].lim;

    for (int j = k; j < ntracks && n < RESHARD_BATCH; j++) {
        tracked *t = &tracks[j];

        if (t->lim.algo != lim->algo || t->lim.max != lim->max ||
            t->lim.window_ms != lim->window_ms ||
            (!t->tight && h->wide_hits[j] >= WIDE_PER_THREAD))
            continue;
        if (!t->tight)
            h->wide_hits[j]++;
        q[n] = (sluice_request){t->id, strlen(t->id), 1, 0, {0}};
        which[n++] = j;
    }
    if (n > 0)
        sluice_hit_many(h->st, lim, q, (size_t)n);
    for (int i = 0; i < n; i++) {
        tracked *t = &tracks[which[i]];

        h->calls++;
        if (q[i].err != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "hit_many: %s: %s", sluice_err_name(q[i].err),
                         sluice_last_error());
            continue;
        }
        atomic_fetch_add(&t->attempts, 1);
        if (q[i].decision.allowed)
            atomic_fetch_add(&t->admitted, 1);
    }
}

/*
 * One thread of traffic: hits every tracked limit in turn (each thread
 * starting elsewhere) until told to stop, a wide limit at most
 * WIDE_PER_THREAD times, and counts attempts, admissions and errors. Odd
 * threads decide batches (hammer_batch).
 */
static void *hammer_run(void *arg)
{
    hammer *h = arg;
    unsigned i = (unsigned)h->index * 7;

    while (!atomic_load(h->stop)) {
        if (h->index % 2 == 1) {
            hammer_batch(h, (int)(i++ % (unsigned)ntracks));
            continue;
        }
        int k = (int)(i++ % (unsigned)ntracks);
        tracked *t = &tracks[k];
        sluice_decision d;
        int rc;

        if (!t->tight && h->wide_hits[k] >= WIDE_PER_THREAD)
            continue;
        if (!t->tight)
            h->wide_hits[k]++;
        rc = sluice_hit(&d, h->st, &t->lim, t->id, strlen(t->id), 1);
        h->calls++;
        if (rc != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "%s: %s", sluice_err_name(rc), sluice_last_error());
            continue;
        }
        atomic_fetch_add(&t->attempts, 1);
        if (d.allowed)
            atomic_fetch_add(&t->admitted, 1);
    }
    return NULL;
}

/*
 * Queues hammered during the reshard: the two-key read (limiter and meta)
 * and the increment. Every successful increment must be counted once.
 */
#define RESHARD_QUEUES 12

typedef struct tracked_queue {
    char name[24];
    unsigned slot;
    atomic_long incrs;
} tracked_queue;

static tracked_queue queues[RESHARD_QUEUES];

/* The queue thread: the read, then the increment, each queue in turn. */
static void *queue_run(void *arg)
{
    hammer *h = arg;
    unsigned i = 0;

    while (!atomic_load(h->stop)) {
        tracked_queue *q = &queues[i++ % RESHARD_QUEUES];
        uint64_t wait = 0, count = 0;
        int rc = sluice_emq_rate_limit_ttl(&wait, h->st, q->name,
                                           strlen(q->name), 0);

        if (rc == SLUICE_OK)
            rc = sluice_emq_limiter_incr(&count, NULL, h->st, q->name,
                                         strlen(q->name), 3600000);
        h->calls++;
        if (rc != SLUICE_OK) {
            if (h->errors++ == 0)
                snprintf(h->first_error, sizeof(h->first_error),
                         "queue %s: %s: %s", q->name, sluice_err_name(rc),
                         sluice_last_error());
            continue;
        }
        atomic_fetch_add(&q->incrs, 1);
    }
    return NULL;
}

/* Sum of ASKING commands the masters have run since CONFIG RESETSTAT. */
static long asking_calls(void)
{
    long total = 0;

    for (int i = 0; i < cluster.n; i++) {
        if (cluster.nodes[i].dead)
            continue;
        total += (long)rs_calls(&cluster.nodes[i].srv, "asking");
    }
    return total;
}

/* The hashtag of a key ("{...}" with its braces), or the whole key. */
static size_t tag_of(const char *key, size_t len, const char **tag)
{
    const char *open = memchr(key, '{', len), *close;

    *tag = key;
    if (open == NULL ||
        (close = memchr(open, '}', len - (size_t)(open - key))) == NULL)
        return len;
    *tag = open;
    return (size_t)(close - open) + 1;
}

/*
 * Moves 'slot' from master 'from' to master 'to' by hand, slowly: open
 * the slot and wait (keys that exist are served by the source, new ones
 * meet ASK), move one id at a time (all the keys of one hashtag in one
 * MIGRATE, as redis-cli's batches mostly do) with 'pause_ms' between, wait
 * with every key gone (every call meets ASK), then SETSLOT NODE. Returns
 * the keys moved, or -1.
 */
static int move_slot_by_hand(int slot, int from, int to, uint64_t pause_ms)
{
    int moved = 0;

    if (rc_slot_open(&cluster, slot, from, to) < 0)
        return -1;
    rs_sleep_ms(pause_ms * 5);
    for (;;) {
        redisReply *r = rs_cmd(&cluster.nodes[from].srv,
                               "CLUSTER GETKEYSINSLOT %d 100", slot);
        const char *batch[10], *tag, *other;
        size_t lens[10], tlen, n = 0;

        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            if (r != NULL)
                freeReplyObject(r);
            return -1;
        }
        if (r->elements == 0) {
            freeReplyObject(r);
            break;
        }
        tlen = tag_of(r->element[0]->str, r->element[0]->len, &tag);
        for (size_t i = 0; i < r->elements && n < 10; i++)
            if (tag_of(r->element[i]->str, r->element[i]->len, &other) ==
                    tlen &&
                memcmp(other, tag, tlen) == 0) {
                batch[n] = r->element[i]->str;
                lens[n++] = r->element[i]->len;
            }
        if (rc_migrate(&cluster, from, to, batch, lens, n) < 0) {
            freeReplyObject(r);
            return -1;
        }
        moved += (int)n;
        freeReplyObject(r);
        rs_sleep_ms(pause_ms);
    }
    rs_sleep_ms(pause_ms * 5);
    if (rc_slot_close(&cluster, slot, from, to) < 0)
        return -1;
    return moved;
}

/* Adds 'n' tracked ids (fixed and sliding-log each) whose slot 'pick' likes. */
static void track_ids(int n, int tight, int (*pick)(unsigned, void *),
                      void *payload, int *next_candidate)
{
    while (n > 0) {
        char id[24];
        unsigned slot;

        snprintf(id, sizeof(id), "r%d", (*next_candidate)++);
        slot = test_slot_of_id(id);
        if (!pick(slot, payload))
            continue;
        for (int a = 0; a < 2; a++) {
            tracked *t = &tracks[ntracks++];

            snprintf(t->id, sizeof(t->id), "%s", id);
            t->lim.algo = a == 0 ? SLUICE_FIXED : SLUICE_SLIDING_LOG;
            t->lim.max = tight ? TIGHT_MAX : WIDE_MAX;
            t->lim.window_ms = 3600000;
            t->tight = tight;
            t->slot = slot;
            atomic_init(&t->attempts, 0);
            atomic_init(&t->admitted, 0);
        }
        n--;
    }
}

typedef struct slot_range {
    unsigned lo, hi;
} slot_range;

/* Slot pickers for track_ids(): in a range, in the hand-moved set, or
   in neither. */
static int pick_in_range(unsigned slot, void *p)
{
    const slot_range *r = p;

    return slot >= r->lo && slot <= r->hi;
}

static int pick_in_set(unsigned slot, void *p)
{
    const int *set = p;

    for (int i = 0; i < HAND_SLOTS; i++)
        if ((unsigned)set[i] == slot)
            return 1;
    return 0;
}

static int pick_other(unsigned slot, void *p)
{
    const int *set = p;
    /* Neither among the first 400 slots nor a slot moved by hand. */
    return slot >= 400 && !pick_in_set(slot, (void *)set);
}

/* See the top of this file (3.) for what is moved and what must hold. */

/* ---- The run, step by step ----------------------------------------------- */

/* The run: the masters and slots it moves, its threads, and its tallies. */
typedef struct reshard_run {
    int m[RC_MAX_NODES], hand[HAND_SLOTS];
    sluice_store *st;
    hammer hs[RESHARD_THREADS + 1];
    pthread_t tid[RESHARD_THREADS + 1];
    atomic_int stop;
    uint64_t t0, t1, t2, t3, t4;
    long calls, errors, by_hand, tight_ok, wide_ok;
} reshard_run;

/* Slots moved by hand, from m[2] to m[0]: those of the first ids that fall
   in m[2]'s slots. */
static void pick_hand_slots(reshard_run *r)
{
    for (int i = 0, k = 0; k < HAND_SLOTS; i++) {
        char id[24];
        unsigned slot;
        int dup = 0;

        snprintf(id, sizeof(id), "h%d", i);
        slot = test_slot_of_id(id);
        for (int j = 0; j < k; j++)
            dup |= r->hand[j] == (int)slot;
        if (cluster.owner[slot] == r->m[2] && !dup)
            r->hand[k++] = (int)slot;
    }
}

/* The ids the threads hit: tight and wide ones, in the first 400 slots, in
   the slots moved by hand, and elsewhere. */
static void track_all(reshard_run *r)
{
    slot_range first400 = {0, 399};
    int candidate = 0;

    tracks = calloc(2 * (24 + 96), sizeof(*tracks));
    if (tracks == NULL)
        exit(2);
    ntracks = 0;
    track_ids(10, 1, pick_in_range, &first400, &candidate);
    track_ids(6, 1, pick_in_set, r->hand, &candidate);
    track_ids(8, 1, pick_other, r->hand, &candidate);
    track_ids(40, 0, pick_in_range, &first400, &candidate);
    track_ids(16, 0, pick_in_set, r->hand, &candidate);
    track_ids(40, 0, pick_other, r->hand, &candidate);
}

/* Queues: half in the first 400 slots, half in the slots moved by hand
   (their two keys move one at a time there: TRYAGAIN), each with a cap in
   its meta hash that is never reached. */
static void track_queues(reshard_run *r)
{
    for (int i = 0, n = 0; n < RESHARD_QUEUES; i++) {
        tracked_queue *q = &queues[n];
        char meta[128];
        size_t mlen;

        snprintf(q->name, sizeof(q->name), "eq%d", i);
        q->slot = test_slot_of_queue(q->name);
        if (!(n % 2 == 0 ? q->slot < 400 : pick_in_set(q->slot, r->hand)))
            continue;
        atomic_init(&q->incrs, 0);
        mlen = test_key_of(meta, sizeof(meta), "emq", q->name,
                           strlen(q->name), "meta");
        CHECK(rc_hset(&cluster, meta, mlen, "max", "100000000") == 0);
        CHECK(rc_hset(&cluster, meta, mlen, "duration", "3600000") == 0);
        n++;
    }
}

/* The four hitting threads and the queue thread, on one store. */
static void start_traffic(reshard_run *r)
{
    r->st = test_store_open(cluster.url,
                            "timeout=5000&connect_timeout=5000&pool=4", NULL);
    atomic_init(&r->stop, 0);
    for (int i = 0; i < RESHARD_THREADS; i++) {
        memset(&r->hs[i], 0, sizeof(r->hs[i]));
        r->hs[i].st = r->st;
        r->hs[i].index = i;
        r->hs[i].stop = &r->stop;
        r->hs[i].wide_hits = calloc((size_t)ntracks, sizeof(int));
        if (r->hs[i].wide_hits == NULL)
            exit(2);
        pthread_create(&r->tid[i], NULL, hammer_run, &r->hs[i]);
    }
    memset(&r->hs[RESHARD_THREADS], 0, sizeof(r->hs[0]));
    r->hs[RESHARD_THREADS].st = r->st;
    r->hs[RESHARD_THREADS].stop = &r->stop;
    pthread_create(&r->tid[RESHARD_THREADS], NULL, queue_run,
                   &r->hs[RESHARD_THREADS]);
}

/* The three phases of moves, timed. */
static void move_slots(reshard_run *r)
{
    const int *m = r->m;

    r->t0 = rs_mono_ms();
    rs_sleep_ms(200);
    /* Phase 1: redis-cli moves m[0]'s first 400 slots to m[1]. */
    CHECK(rc_reshard(&cluster, m[0], m[1], 400) == 0);
    CHECK(cluster.owner[0] == m[1] && cluster.owner[399] == m[1]);
    r->t1 = rs_mono_ms();
    /* Phase 2: a few slots from m[2] to m[0] by hand, slowly (ASK). */
    for (int i = 0; i < HAND_SLOTS; i++) {
        int moved = move_slot_by_hand(r->hand[i], m[2], m[0], 20);

        CHECK(moved >= 0);
        r->by_hand += moved;
    }
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    for (int i = 0; i < HAND_SLOTS; i++)
        CHECK(cluster.owner[r->hand[i]] == m[0]);
    r->t2 = rs_mono_ms();
    /* Phase 3: redis-cli moves m[1]'s lowest 400 (the same slots) to
       m[2]. */
    CHECK(rc_reshard(&cluster, m[1], m[2], 400) == 0);
    CHECK(cluster.owner[0] == m[2] && cluster.owner[399] == m[2]);
    r->t3 = rs_mono_ms();
    rs_sleep_ms(200);
}

static void stop_traffic(reshard_run *r)
{
    atomic_store(&r->stop, 1);
    for (int i = 0; i <= RESHARD_THREADS; i++) {
        pthread_join(r->tid[i], NULL);
        r->calls += r->hs[i].calls;
        r->errors += r->hs[i].errors;
        if (r->hs[i].errors > 0)
            fprintf(stderr, "    thread %d: %ld errors, the first: %s\n", i,
                    r->hs[i].errors, r->hs[i].first_error);
        free(r->hs[i].wide_hits);
    }
    r->t4 = rs_mono_ms();
}

/* One tracked id: exact admissions, the server's count, the key's home. */
static void check_track(reshard_run *r, const tracked *t)
{
    long att = atomic_load(&t->attempts), adm = atomic_load(&t->admitted);
    char key[128];
    long long held;
    const char *argv[] = {"EXISTS", key};
    size_t lens[] = {6, 0};
    int owner = cluster.owner[t->slot];
    redisReply *rp;

    lens[1] = test_key_of(key, sizeof(key), "sluice", t->id, strlen(t->id),
                          sluice_algo_name(t->lim.algo));
    held = rc_key_int(&cluster, t->lim.algo == SLUICE_FIXED ? "GET" : "ZCARD",
                      key);
    test_context("live reshard: %s %s (slot %u, %s): %ld admitted of %ld, "
                 "the server holds %lld", sluice_algo_name(t->lim.algo), t->id,
                 t->slot, t->tight ? "tight" : "wide", adm, att, held);
    if (t->tight) {
        CHECK(att > TIGHT_MAX);
        r->tight_ok += CHECK_EQ_U64(adm, TIGHT_MAX);
    } else {
        CHECK(att > 0 && att < WIDE_MAX);
        r->wide_ok += CHECK_EQ_U64(adm, att);
    }
    CHECK_EQ_U64(held, adm);
    /* The key is at the master that now serves its slot. */
    rp = owner >= 0 ? rs_cmdargv(&cluster.nodes[owner].srv, 2, argv, lens)
                    : NULL;
    CHECK(rp != NULL && rp->type == REDIS_REPLY_INTEGER && rp->integer == 1);
    if (rp != NULL)
        freeReplyObject(rp);
}

/* Every queue increment was counted once. */
static void check_queues(void)
{
    for (int i = 0; i < RESHARD_QUEUES; i++) {
        char lim[128];
        long incrs = atomic_load(&queues[i].incrs);
        long long held;

        test_key_of(lim, sizeof(lim), "emq", queues[i].name,
                    strlen(queues[i].name), "limiter");
        held = rc_key_int(&cluster, "GET", lim);
        test_context("live reshard: queue %s (slot %u): %ld increments, the "
                     "server holds %lld", queues[i].name, queues[i].slot,
                     incrs, held);
        CHECK(incrs > 0);
        CHECK_EQ_U64(held, incrs);
    }
}

/* No error reached the caller; no budget was exceeded; redirects were
   followed and ASKING sent. */
static void check_run(reshard_run *r)
{
    sluice_store_stats stats;
    long asking;

    CHECK_EQ_U64(r->errors, 0);
    for (int i = 0; i < ntracks; i++)
        check_track(r, &tracks[i]);
    check_queues();
    test_context("live reshard");
    CHECK_OK(sluice_store_stats_get(&stats, r->st));
    CHECK(stats.redirects > 0);
    CHECK_EQ_U64(stats.errors, 0);
    asking = asking_calls();
    CHECK(asking > 0);
    printf("  reshard: %ld calls by %d threads in %" PRIu64 " ms (redis-cli "
           "400 slots %" PRIu64 " ms; by hand %d slots, %ld keys, %" PRIu64
           " ms; redis-cli again %" PRIu64 " ms); %ld errors; %" PRIu64
           " redirects followed, %ld ASKING; tight %ld/%d exact, wide "
           "%ld/%d exact; %ld queue reads and increments\n",
           r->calls, RESHARD_THREADS, r->t4 - r->t0, r->t1 - r->t0 - 200,
           HAND_SLOTS, r->by_hand, r->t2 - r->t1, r->t3 - r->t2, r->errors,
           stats.redirects, asking, r->tight_ok, 2 * 24, r->wide_ok, 2 * 96,
           r->hs[RESHARD_THREADS].calls);
}

/* See the top of this file for what is moved and what must hold. */
static void test_reshard(void)
{
    static reshard_run r;

    test_context("live reshard");
    CHECK(rc_flush(&cluster) == 0);
    if (!CHECK(rc_masters_by_slot(&cluster, r.m) == 3))
        return;
    /* redis-cli moves a master's lowest slots: m[0]'s first 400 go to
       m[1], and later on to m[2]. */
    CHECK(cluster.owner[0] == r.m[0] && cluster.owner[399] == r.m[0]);
    pick_hand_slots(&r);
    track_all(&r);
    track_queues(&r);
    for (int i = 0; i < cluster.n; i++)
        if (!cluster.nodes[i].dead)
            rs_ok(&cluster.nodes[i].srv, "CONFIG RESETSTAT");
    start_traffic(&r);
    move_slots(&r);
    stop_traffic(&r);
    check_run(&r);
    sluice_store_free(r.st);
    free(tracks);
    tracks = NULL;
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rc_shared_begin(&cluster, "test_cluster_reshard") < 0)
        return 1;
    test_reshard();
    rc_shared_close(&cluster);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_reshard");
}
