/*
 * test_cluster_failover.c - a master stalled, then another killed, while
 * threads call the cluster store: calls for its slots fail fast and only
 * until its replica has taken over; calls for other slots never fail.
 *
 * On the cluster of the ctest run (cluster.h), last of the tests that
 * change it (tests/CMakeLists.txt): it leaves a master dead for good. It
 * takes the cluster as the earlier tests left it (slots moved, roles
 * swapped): each victim is chosen from the map and the roles it reads.
 *
 * A master is stopped (SIGSTOP: calls time out), and later another is
 * killed (SIGKILL: calls are refused), while threads call ids of its slots
 * and ids of other masters' slots (?timeout=300&connect_timeout=300).
 * Calls for its slots fail with SLUICE_ECONN or SLUICE_ETIMEDOUT, each
 * within the timeout plus slack, only until its replica has been promoted
 * (bounded: 30 s), then succeed; calls for other slots succeed throughout.
 * The gap, the failed calls and the slowest call for other slots are
 * printed. The stopped master is resumed afterwards and rejoins as a
 * replica. Budgets are not checked across a failover: replication is
 * asynchronous, so a promoted replica may lack the last writes.
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

/* A call must come back within its timeout plus this much slack. */
#define CALL_SLACK_MS 1700
/* After a promotion, the store may need this long to find the new master:
   gossip, a map reread (at most one per 100 ms), a slow machine. */
#define PROMOTION_SLACK_MS 5000
#define FAILOVER_BOUND_MS 30000
#define TIMEOUT_MS 300 /* the store's command and connect timeouts */

static rc_cluster cluster;

/* ---- The calling threads ------------------------------------------------- */

#define FO_THREADS 4
#define FO_MAX_CALLS 200000

typedef struct call_rec {
    uint64_t start_us, end_us;
    int rc;
} call_rec;

typedef struct fo_thread {
    sluice_store *st;
    char (*ids)[24];
    int nids;
    atomic_int *stop;
    atomic_uint_fast64_t *last_ok_us;
    call_rec *calls;
    size_t n;
    char first_err[256]; /* the first failure's message, for the report */
} fo_thread;

/*
 * One thread of the failover run: hits its ids in turn, recording when
 * each call started and ended and what it answered, and the end of its
 * latest success in '*last_ok_us' (if given).
 */
static void *fo_run(void *arg)
{
    fo_thread *t = arg;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000000, 3600000);
    int i = 0;

    while (!atomic_load(t->stop) && t->n < FO_MAX_CALLS) {
        call_rec *c = &t->calls[t->n++];
        const char *id = t->ids[i++ % t->nids];
        sluice_decision d;

        c->start_us = rs_mono_us();
        c->rc = sluice_hit(&d, t->st, &lim, id, strlen(id), 1);
        c->end_us = rs_mono_us();
        if (c->rc == SLUICE_OK && t->last_ok_us != NULL)
            atomic_store(t->last_ok_us, c->end_us);
        if (c->rc != SLUICE_OK && t->first_err[0] == '\0')
            snprintf(t->first_err, sizeof(t->first_err), "%s after %llu ms: "
                     "%s", sluice_err_name(c->rc),
                     (unsigned long long)(c->end_us - c->start_us) / 1000,
                     sluice_last_error());
        /* A steady stream, not a spin: failures come back at once. */
        rs_sleep_ms(c->rc == SLUICE_OK ? 1 : 5);
    }
    return NULL;
}

/* ---- The run, step by step ----------------------------------------------- */

#define FO_IDS 16

/* One run: the victim, the ids of its slots and of others', the threads. */
typedef struct failover {
    int stall, victim, promoted;
    char dead_ids[FO_IDS][24], live_ids[FO_IDS][24];
    fo_thread th[FO_THREADS];
    pthread_t tid[FO_THREADS];
    atomic_int stop;
    atomic_uint_fast64_t dead_ok_us;
    sluice_store *st;
    uint64_t kill_us, promoted_us;
} failover;

/* What the calls answered, and when. */
typedef struct fo_tally {
    uint64_t first_ok_after_us, worst_fail_us, worst_live_us;
    uint64_t last_fail_end_us;
    long dead_failed, dead_ok, live_ok, live_failed, bad, late_fail, slow;
    long live_over_100ms;
} fo_tally;

/*
 * A master with a replica: the first in the seed list when stalled (the
 * store asks the seeds for the map in order), the last when killed. -1 if
 * there is none.
 */
static int pick_victim(int stall)
{
    int victim = -1;

    for (int i = 0; i < cluster.n; i++) {
        int has_replica = 0;

        for (int k = 0; k < cluster.n; k++)
            has_replica |=
                !cluster.nodes[k].dead && cluster.nodes[k].master == i;
        if (cluster.nodes[i].is_master && !cluster.nodes[i].dead &&
            has_replica && (victim < 0 || !stall))
            victim = i;
    }
    return victim;
}

/* Ids of the victim's slots and of other masters' slots; the store, warm
   (its connections and its map). */
static void pick_ids(failover *f)
{
    int nd = 0, nl = 0;

    for (int i = 0; nd < FO_IDS || nl < FO_IDS; i++) {
        char id[24];
        int owner;

        snprintf(id, sizeof(id), "f%d", i);
        owner = cluster.owner[test_slot_of_id(id)];
        if (owner == f->victim && nd < FO_IDS)
            snprintf(f->dead_ids[nd++], 24, "%s", id);
        else if (owner != f->victim && nl < FO_IDS)
            snprintf(f->live_ids[nl++], 24, "%s", id);
    }
    f->st = test_store_open(cluster.url, "timeout=300&connect_timeout=300",
                            NULL);
    for (int i = 0; i < FO_IDS; i++) {
        sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000000, 3600000);
        sluice_decision d;

        CHECK_OK(sluice_hit(&d, f->st, &lim, f->dead_ids[i],
                            strlen(f->dead_ids[i]), 1));
        CHECK_OK(sluice_hit(&d, f->st, &lim, f->live_ids[i],
                            strlen(f->live_ids[i]), 1));
    }
}

/* Half the threads call the victim's ids, half the others'. */
static void start_threads(failover *f)
{
    atomic_init(&f->stop, 0);
    atomic_init(&f->dead_ok_us, 0);
    for (int i = 0; i < FO_THREADS; i++) {
        int dead = i < FO_THREADS / 2;
        fo_thread *t = &f->th[i];

        t->st = f->st;
        t->ids = dead ? f->dead_ids : f->live_ids;
        t->nids = FO_IDS;
        t->stop = &f->stop;
        t->last_ok_us = dead ? &f->dead_ok_us : NULL;
        t->n = 0;
        t->calls = calloc(FO_MAX_CALLS, sizeof(call_rec));
        if (t->calls == NULL)
            exit(2);
        pthread_create(&f->tid[i], NULL, fo_run, t);
    }
}

/*
 * Stalls (SIGSTOP) or kills (SIGKILL) the victim mid-run, waits for a
 * replica to take over and for calls of its slots to succeed again
 * (bounded), then stops the threads and resumes a stalled victim, which
 * rejoins as a replica.
 */
static void strike(failover *f)
{
    uint64_t deadline;

    rs_sleep_ms(300);
    f->kill_us = rs_mono_us();
    if (f->stall) {
        rs_pause(&cluster.nodes[f->victim].srv);
        cluster.nodes[f->victim].dead = 1; /* the helpers leave it alone */
    } else {
        rc_kill(&cluster, f->victim);
    }
    f->promoted = rc_wait_promoted(&cluster, f->victim, FAILOVER_BOUND_MS);
    if (CHECK(f->promoted >= 0)) {
        f->promoted_us = rs_mono_us();
        /* Until calls for its slots succeed again, bounded. */
        deadline = rs_mono_ms() + PROMOTION_SLACK_MS;
        while (atomic_load(&f->dead_ok_us) < f->promoted_us &&
               rs_mono_ms() < deadline)
            rs_sleep_ms(10);
        rs_sleep_ms(500);
    }
    atomic_store(&f->stop, 1);
    for (int i = 0; i < FO_THREADS; i++)
        pthread_join(f->tid[i], NULL);
    if (f->stall) {
        rs_resume(&cluster.nodes[f->victim].srv);
        cluster.nodes[f->victim].dead = 0;
    }
}

/* Counts one call of a thread on the victim's slots. */
static void tally_dead_call(const failover *f, const call_rec *c,
                            uint64_t took, fo_tally *t)
{
    if (c->rc == SLUICE_OK) {
        t->dead_ok++;
        if (c->start_us > f->kill_us &&
            (t->first_ok_after_us == 0 || c->end_us < t->first_ok_after_us))
            t->first_ok_after_us = c->end_us;
        return;
    }
    t->dead_failed++;
    t->worst_fail_us = took > t->worst_fail_us ? took : t->worst_fail_us;
    t->last_fail_end_us =
        c->end_us > t->last_fail_end_us ? c->end_us : t->last_fail_end_us;
    /* Only "unreachable", only after the kill, only until the replica took
       over (and the store could learn it). */
    t->bad += c->rc != SLUICE_ECONN && c->rc != SLUICE_ETIMEDOUT;
    t->bad += c->end_us < f->kill_us;
    t->late_fail += f->promoted_us != 0 &&
                    c->start_us > f->promoted_us + PROMOTION_SLACK_MS * 1000u;
}

/* Counts every recorded call, and frees the records. */
static void tally(failover *f, fo_tally *t)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < FO_THREADS; i++) {
        int dead = i < FO_THREADS / 2;

        for (size_t j = 0; j < f->th[i].n; j++) {
            const call_rec *c = &f->th[i].calls[j];
            uint64_t took = c->end_us - c->start_us;

            if (took > (TIMEOUT_MS + CALL_SLACK_MS) * 1000)
                t->slow++;
            if (dead) {
                tally_dead_call(f, c, took, t);
                continue;
            }
            t->worst_live_us = took > t->worst_live_us ? took
                                                       : t->worst_live_us;
            t->live_over_100ms += took > 100000;
            c->rc == SLUICE_OK ? t->live_ok++ : t->live_failed++;
        }
        free(f->th[i].calls);
    }
}

static void print_run(const failover *f, const fo_tally *t)
{
    uint64_t k = f->kill_us;

    printf("  failover: master :%d %s; replica :%d promoted after %" PRIu64
           " ms; calls for its slots failed for %" PRIu64 " ms (%ld failed, "
           "worst %" PRIu64 " ms), first success %" PRIu64 " ms after the "
           "kill; other masters: %ld calls, %ld failed, %ld over 100 ms, "
           "worst %" PRIu64 " ms\n",
           cluster.nodes[f->victim].srv.port,
           f->stall ? "stalled" : "killed",
           f->promoted >= 0 ? cluster.nodes[f->promoted].srv.port : -1,
           f->promoted_us ? (f->promoted_us - k) / 1000 : 0,
           t->last_fail_end_us > k ? (t->last_fail_end_us - k) / 1000 : 0,
           t->dead_failed, t->worst_fail_us / 1000,
           t->first_ok_after_us > k ? (t->first_ok_after_us - k) / 1000 : 0,
           t->live_ok + t->live_failed, t->live_failed, t->live_over_100ms,
           t->worst_live_us / 1000);
}

/*
 * 'stall' 0: the master is killed (SIGKILL). 1: it is stopped (SIGSTOP):
 * it keeps its sockets and answers nothing, so calls time out instead of
 * being refused; once its replica has taken over it is resumed, and
 * rejoins as a replica.
 */
static void test_failover(int stall)
{
    static failover f;
    int m[RC_MAX_NODES];
    sluice_store_stats stats;
    fo_tally t;

    memset(&f, 0, sizeof(f));
    f.stall = stall;
    f.promoted = -1;
    test_context(stall ? "a master stalled mid-run" : "a master killed "
                 "mid-run");
    CHECK(rc_wait_stable(&cluster, RC_READY_TIMEOUT_MS) == 0);
    if (!CHECK(rc_masters_by_slot(&cluster, m) == 3))
        return;
    if (!CHECK((f.victim = pick_victim(stall)) >= 0))
        return;
    pick_ids(&f);
    start_threads(&f);
    strike(&f);
    tally(&f, &t);
    CHECK_EQ_U64(t.live_failed, 0);
    CHECK_EQ_U64(t.bad, 0);
    CHECK_EQ_U64(t.late_fail, 0);
    CHECK_EQ_U64(t.slow, 0);
    CHECK(t.dead_failed > 0);
    CHECK(t.first_ok_after_us > f.kill_us);
    CHECK_OK(sluice_store_stats_get(&stats, f.st));
    CHECK_EQ_U64(stats.errors, t.dead_failed);
    print_run(&f, &t);
    for (int i = FO_THREADS / 2; i < FO_THREADS; i++)
        if (f.th[i].first_err[0] != '\0')
            printf("  a call for another master failed: %s\n",
                   f.th[i].first_err);
    sluice_store_free(f.st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rc_shared_begin(&cluster, "test_cluster_failover") < 0)
        return 1;
    test_failover(1);
    fflush(stdout);
    test_failover(0);
    rc_shared_close(&cluster);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_failover");
}
