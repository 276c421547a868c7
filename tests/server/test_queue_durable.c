/*
 * test_queue_durable.c - no job lost, none done twice: workers killed, the
 * server restarted.
 *
 * The server runs with --appendonly yes --appendfsync always, so a reply
 * means the write is on disk. Workers are processes (forked; each opens its
 * own store and keeps it: after a restart the store reconnects by itself).
 * Every worker records in shared memory each job whose complete answered
 * SLUICE_OK. A complete that answered SLUICE_ELEASE is not counted: the
 * job's lease ran out and it was served again.
 *
 * Killed workers. N_KILL jobs, lease 500 ms, 4 worker processes. One takes
 * HOLD jobs and is killed with SIGKILL while it holds them; another sleeps
 * past its lease once, so its complete must answer SLUICE_ELEASE. Every job
 * is completed exactly once, the held ones by other workers at attempt 2 or
 * later, and the queue ends empty with 'completed' = N_KILL on the server.
 *
 * Server restarts. An adder process adds N_RESTART jobs one at a time while
 * 3 workers take and complete them; meanwhile the server is killed
 * (SIGKILL) and later stopped (SIGTERM), and each time started again on the
 * same port and directory after a pause. Every call that meets the outage
 * answers SLUICE_ECONN or SLUICE_ETIMEDOUT and is tried again. The outage
 * makes two things uncertain, and both are allowed for:
 *
 *   - an add that failed may still have been written (its reply was lost):
 *     tried again, it makes a second job, whose id nobody was told. Such a
 *     job must still be done, at most once;
 *   - a complete that failed may still have been done: tried again, it
 *     answers SLUICE_ELEASE. Such a job counts as "perhaps done by us".
 *
 * So: every acknowledged add's id is completed exactly once, or, for the
 * few whose complete met the outage, at most once with such a complete; no
 * id is ever completed twice; the server's 'completed' equals the number of
 * jobs it numbered ('seq'), and nothing is left waiting, active, delayed or
 * failed. Every worker completes jobs after the last restart with the store
 * it opened at the start; one of them is a sluice_worker (its Pub/Sub
 * subscription breaks with each restart), the others call take themselves.
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */

#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_KILL 2000
#define N_RESTART 1500
#define MAX_ID 8192
#define KILL_WORKERS 4
#define RESTART_WORKERS 3
#define HOLD 5
#define LEASE_MS 500
#define SLOW_MS 900
#define DOWN_MS 400
#define RUN_BOUND_MS 60000

static const char *const aof_args[] = {"--appendonly", "yes", "--appendfsync",
                                       "always", NULL};

typedef struct shared {
    atomic_int confirmed[MAX_ID]; /* completes that answered SLUICE_OK */
    atomic_int perhaps[MAX_ID];   /* a failed complete, then SLUICE_ELEASE */
    atomic_int attempt[MAX_ID];   /* the attempt that completed it */
    atomic_char acked[MAX_ID];    /* the adder was told this id */
    atomic_long total;            /* confirmed completes */
    atomic_long lost;             /* completes that answered SLUICE_ELEASE */
    atomic_long slow_lost;        /* ... by the worker that slept */
    atomic_long unavailable;      /* calls that met the outage */
    atomic_long errors;           /* anything else */
    atomic_long nacked;
    atomic_int adder_done;
    atomic_int epoch;             /* restarts so far */
    atomic_long after_last[8];    /* per worker, completes in the last epoch */
    atomic_int held[HOLD];
    atomic_int holding;
} shared;

static rs_server server;
static shared *sh;
static const char *const Q = "durable";

static int unavailable(int rc)
{
    return rc == SLUICE_ECONN || rc == SLUICE_ETIMEDOUT;
}

static sluice_store *child_store(void)
{
    sluice_store *st = NULL;
    char url[128];

    snprintf(url, sizeof(url), "%s?timeout=2000&connect_timeout=500",
             server.url);
    if (sluice_store_open(&st, url, NULL) != 0) {
        fprintf(stderr, "    child: %s\n", sluice_last_error());
        _exit(1);
    }
    return st;
}

/*
 * Completes 'job', trying again while the server is away. A complete that
 * failed and then answers SLUICE_ELEASE may have been done by the failed
 * try: it is recorded as "perhaps".
 */
static void complete(sluice_store *st, const sluice_job *job, int worker,
                     int slow)
{
    int failed_before = 0;

    for (int tries = 0; tries < 1000; tries++) {
        int rc = sluice_queue_complete(st, Q, strlen(Q), job->id, job->lease);

        if (rc == SLUICE_OK) {
            if (job->id < MAX_ID) {
                atomic_fetch_add(&sh->confirmed[job->id], 1);
                atomic_store(&sh->attempt[job->id], (int)job->attempt);
            }
            atomic_fetch_add(&sh->total, 1);
            if (worker >= 0 && worker < 8 &&
                atomic_load(&sh->epoch) == 2)
                atomic_fetch_add(&sh->after_last[worker], 1);
            return;
        }
        if (rc == SLUICE_ELEASE) {
            if (failed_before && job->id < MAX_ID)
                atomic_fetch_add(&sh->perhaps[job->id], 1);
            else
                atomic_fetch_add(&sh->lost, 1);
            if (slow)
                atomic_fetch_add(&sh->slow_lost, 1);
            return;
        }
        if (!unavailable(rc)) {
            fprintf(stderr, "    complete: %s\n", sluice_last_error());
            atomic_fetch_add(&sh->errors, 1);
            return;
        }
        atomic_fetch_add(&sh->unavailable, 1);
        failed_before = 1;
        rs_sleep_ms(20);
    }
    atomic_fetch_add(&sh->errors, 1);
}

/* True when the adder is done and nothing is waiting, active or delayed. */
static int all_done(sluice_store *st)
{
    sluice_queue_stats s;

    if (!atomic_load(&sh->adder_done))
        return 0;
    memset(&s, 0, sizeof(s));
    return sluice_queue_stats_get(&s, st, Q, strlen(Q)) == 0 &&
           s.waiting == 0 && s.active == 0 && s.delayed == 0;
}

/*
 * A worker made with sluice_worker_new(), kept across the restarts: its
 * subscription breaks with the server and must be made again.
 */
static void api_worker(int me)
{
    sluice_store *st = child_store();
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *const names[] = {Q};
    uint64_t deadline = rs_mono_ms() + RUN_BOUND_MS;

    o.lease_ms = LEASE_MS;
    if (sluice_worker_new(&w, st, names, NULL, 1, &o) != 0) {
        atomic_fetch_add(&sh->errors, 1);
        _exit(1);
    }
    while (rs_mono_ms() < deadline) {
        const char *q = NULL;
        int rc = sluice_worker_next(&job, &q, NULL, w, 200);

        if (unavailable(rc)) {
            atomic_fetch_add(&sh->unavailable, 1);
            rs_sleep_ms(20);
            continue;
        }
        if (rc != 0) {
            fprintf(stderr, "    worker_next: %s\n", sluice_last_error());
            atomic_fetch_add(&sh->errors, 1);
            rs_sleep_ms(20);
            continue;
        }
        if (job.id != 0)
            complete(st, &job, me, 0);
        else if (all_done(st))
            break;
    }
    if (rs_mono_ms() >= deadline)
        atomic_fetch_add(&sh->errors, 1);
    sluice_job_clear(&job);
    sluice_worker_free(w);
    sluice_store_free(st);
    _exit(0);
}

/*
 * A worker: takes and completes until the queue is empty (nothing waiting,
 * delayed or active) and, with 'until_added', the adder is done. Worker
 * 'hold' takes HOLD jobs and waits to be killed; worker 'slow' sleeps past
 * its lease once.
 */
static void worker(int me, int hold, int slow, int until_added)
{
    sluice_store *st = child_store();
    sluice_job job = {0};
    uint64_t deadline = rs_mono_ms() + RUN_BOUND_MS;
    long taken = 0;

    while (rs_mono_ms() < deadline) {
        sluice_take_status status = 0;
        uint64_t wait = 0;
        int rc = sluice_queue_take(&status, &wait, &job, st, Q, strlen(Q),
                                   LEASE_MS);

        if (unavailable(rc)) {
            atomic_fetch_add(&sh->unavailable, 1);
            rs_sleep_ms(20);
            continue;
        }
        if (rc != 0) {
            fprintf(stderr, "    take: %s\n", sluice_last_error());
            atomic_fetch_add(&sh->errors, 1);
            rs_sleep_ms(20);
            continue;
        }
        if (status != SLUICE_TAKE_JOB) {
            if (status == SLUICE_TAKE_EMPTY && wait == 0 &&
                (!until_added || atomic_load(&sh->adder_done)))
                break;
            rs_sleep_ms(wait > 0 && wait < 20 ? wait : 5);
            continue;
        }
        taken++;
        if (hold) {
            atomic_store(&sh->held[taken - 1], (int)job.id);
            if (taken == HOLD) {
                atomic_store(&sh->holding, 1);
                for (;;)
                    pause(); /* until SIGKILL */
            }
            continue;
        }
        if (slow && taken == 10) {
            rs_sleep_ms(SLOW_MS);
            complete(st, &job, me, 1);
            continue;
        }
        complete(st, &job, me, 0);
    }
    if (rs_mono_ms() >= deadline)
        atomic_fetch_add(&sh->errors, 1);
    sluice_job_clear(&job);
    sluice_store_free(st);
    _exit(0);
}

/* Forks worker 'me'; 'hold' -1 makes it an api_worker(). */
static pid_t spawn(int me, int hold, int slow, int until_added)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0 && hold < 0)
        api_worker(me);
    if (pid == 0)
        worker(me, hold, slow, until_added);
    return pid;
}

static void wait_child(pid_t pid, const char *what)
{
    int status = 0;

    waitpid(pid, &status, 0);
    if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fprintf(stderr, "    %s: status %#x\n", what, status);
}

/* The server's figures for the queue: all done, nothing left. */
static void check_drained(sluice_store *st, uint64_t jobs)
{
    sluice_queue_stats s;
    redisReply *r = rs_cmd(&server, "HGET %s seq", "emq:{durable}:meta");
    uint64_t seq = r != NULL && r->type == REDIS_REPLY_STRING
                       ? strtoull(r->str, NULL, 10)
                       : 0;

    if (r != NULL)
        freeReplyObject(r);
    memset(&s, 0xee, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, st, Q, strlen(Q)));
    CHECK(seq >= jobs);
    CHECK_EQ_U64(s.completed, seq);
    CHECK_EQ_U64(s.waiting, 0);
    CHECK_EQ_U64(s.active, 0);
    CHECK_EQ_U64(s.delayed, 0);
    CHECK_EQ_U64(s.failed, 0);
    CHECK_EQ_U64(rs_int(&server, "HLEN %s", "emq:{durable}:data"), 0);
}

/* ---- Killed workers ------------------------------------------------------ */

static void test_killed_worker(sluice_store *st)
{
    pid_t pids[KILL_WORKERS];
    uint64_t t0 = rs_mono_ms(), id;
    long once = 0, twice = 0, never = 0;

    test_context("a worker killed while it holds jobs");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    memset(sh, 0, sizeof(*sh));
    for (int i = 1; i <= N_KILL; i++) {
        CHECK_OK(sluice_queue_add(&id, st, Q, strlen(Q), "k", 1, 0));
        CHECK_EQ_U64(id, (uint64_t)i);
    }
    /* The holder starts first, so it is sure to get its jobs. */
    pids[0] = spawn(0, 1, 0, 0);
    while (!atomic_load(&sh->holding) && rs_mono_ms() < t0 + 20000)
        rs_sleep_ms(2);
    CHECK(atomic_load(&sh->holding));
    for (int w = 1; w < KILL_WORKERS; w++)
        pids[w] = spawn(w, 0, w == 1, 0);
    rs_sleep_ms(50);
    kill(pids[0], SIGKILL);
    waitpid(pids[0], NULL, 0);
    for (int w = 1; w < KILL_WORKERS; w++)
        wait_child(pids[w], "worker");

    for (int i = 1; i <= N_KILL; i++) {
        int n = atomic_load(&sh->confirmed[i]);

        once += n == 1;
        twice += n > 1;
        never += n == 0;
    }
    printf("  killed worker: %d jobs, %ld done once, %ld twice, %ld never; "
           "%ld completes lost their lease; %" PRIu64 " ms\n", N_KILL, once,
           twice, never, atomic_load(&sh->lost), rs_mono_ms() - t0);
    CHECK_EQ_U64(once, N_KILL);
    CHECK_EQ_U64(atomic_load(&sh->total), N_KILL);
    CHECK_EQ_U64(atomic_load(&sh->errors), 0);
    CHECK_EQ_U64(atomic_load(&sh->unavailable), 0);
    /* The sleeper's lease ran out and another worker did its job. */
    CHECK_EQ_U64(atomic_load(&sh->slow_lost), 1);
    /* The killed worker's jobs were done by others, on a later attempt. */
    for (int h = 0; h < HOLD; h++) {
        int held = atomic_load(&sh->held[h]);

        CHECK(held > 0 && held <= N_KILL);
        if (held > 0 && held <= N_KILL) {
            CHECK_EQ_U64(atomic_load(&sh->confirmed[held]), 1);
            CHECK(atomic_load(&sh->attempt[held]) >= 2);
        }
    }
    check_drained(st, N_KILL);
    test_context(NULL);
}

/* ---- Server restarts ----------------------------------------------------- */

static void adder(void)
{
    sluice_store *st = child_store();

    for (int i = 0; i < N_RESTART; i++) {
        for (int tries = 0;; tries++) {
            uint64_t id = 0;
            int rc = sluice_queue_add(&id, st, Q, strlen(Q), "r", 1, 0);

            if (rc == 0) {
                if (id < MAX_ID)
                    atomic_store(&sh->acked[id], 1);
                else
                    atomic_fetch_add(&sh->errors, 1);
                atomic_fetch_add(&sh->nacked, 1);
                break;
            }
            if (!unavailable(rc) || tries > 1000) {
                fprintf(stderr, "    add: %s\n", sluice_last_error());
                atomic_fetch_add(&sh->errors, 1);
                break;
            }
            atomic_fetch_add(&sh->unavailable, 1);
            rs_sleep_ms(20);
        }
        if (i % 4 == 0)
            rs_sleep_ms(1); /* spread the adds over the restarts */
    }
    atomic_store(&sh->adder_done, 1);
    sluice_store_free(st);
    _exit(0);
}

/* Waits until 'n' adds were acknowledged. */
static void wait_acked(long n)
{
    uint64_t deadline = rs_mono_ms() + RUN_BOUND_MS;

    while (atomic_load(&sh->nacked) < n && rs_mono_ms() < deadline)
        rs_sleep_ms(5);
}

/*
 * Every add acknowledged, and every acknowledged job done once (or perhaps
 * done, by a complete that met the outage), none twice; printed with the
 * time since 't0'.
 */
static void check_restart_tally(uint64_t t0)
{
    long acked = 0, acked_once = 0, acked_perhaps = 0, dup = 0, missing = 0;
    long extra = 0;

    for (int i = 1; i < MAX_ID; i++) {
        int n = atomic_load(&sh->confirmed[i]);
        int p = atomic_load(&sh->perhaps[i]);

        if (atomic_load(&sh->acked[i])) {
            acked++;
            acked_once += n == 1;
            acked_perhaps += n == 0 && p > 0;
            if (n == 0 && p == 0 && missing++ < 5)
                fprintf(stderr, "    job %d: acknowledged, never done\n", i);
        } else if (n > 0) {
            extra++;
        }
        if (n > 1 && dup++ < 5)
            fprintf(stderr, "    job %d: done %d times\n", i, n);
    }
    printf("  restarts: %ld adds acknowledged; %ld done once, %ld perhaps "
           "done by a complete that met the outage; %ld jobs made by an add "
           "that met it; %ld calls met the outage, %ld completes lost their "
           "lease; %" PRIu64 " ms\n", acked, acked_once, acked_perhaps, extra,
           atomic_load(&sh->unavailable), atomic_load(&sh->lost),
           rs_mono_ms() - t0);
    CHECK_EQ_U64(acked, N_RESTART);
    CHECK_EQ_U64(atomic_load(&sh->nacked), N_RESTART);
    CHECK_EQ_U64(missing, 0);
    CHECK_EQ_U64(dup, 0);
    CHECK_EQ_U64(acked_once + acked_perhaps, N_RESTART);
    CHECK(acked_perhaps <= 2 * RESTART_WORKERS);
}

static void test_restarts(sluice_store *st)
{
    pid_t pids[RESTART_WORKERS], add_pid;
    uint64_t t0 = rs_mono_ms();

    test_context("the server restarted while jobs flow");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    memset(sh, 0, sizeof(*sh));
    /* Worker 0 is a sluice_worker; the others call take themselves. */
    for (int w = 0; w < RESTART_WORKERS; w++)
        pids[w] = spawn(w, w == 0 ? -1 : 0, 0, 1);
    fflush(NULL);
    if ((add_pid = fork()) == 0)
        adder();

    /* A crash: SIGKILL (every acknowledged write is on disk). */
    wait_acked(N_RESTART / 3);
    rs_kill(&server);
    rs_sleep_ms(DOWN_MS);
    if (!CHECK(rs_restart(&server) == 0))
        exit(2);
    atomic_store(&sh->epoch, 1);

    /* A shutdown: SIGTERM, the same port and directory. */
    wait_acked(2 * N_RESTART / 3);
    rs_terminate(&server, SIGTERM, 5000);
    rs_sleep_ms(DOWN_MS);
    if (!CHECK(rs_launch(&server, 0) == 0))
        exit(2);
    atomic_store(&sh->epoch, 2);

    wait_child(add_pid, "adder");
    for (int w = 0; w < RESTART_WORKERS; w++)
        wait_child(pids[w], "worker");

    check_restart_tally(t0);
    CHECK_EQ_U64(atomic_load(&sh->errors), 0);
    /* The outage was met, and every store carried on after it. */
    CHECK(atomic_load(&sh->unavailable) > 0);
    for (int w = 0; w < RESTART_WORKERS; w++)
        if (!CHECK(atomic_load(&sh->after_last[w]) > 0))
            fprintf(stderr, "    worker %d completed nothing after the last "
                    "restart\n", w);
    check_drained(st, N_RESTART);
    test_context(NULL);
}

int main(void)
{
    sluice_store *st = NULL;
    uint64_t t0 = rs_mono_ms();
    char url[128];

    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (rs_start(&server, aof_args) < 0) {
        fprintf(stderr, "test_queue_durable: cannot start redis-server\n");
        return 1;
    }
    printf("test_queue_durable: server %s (pid %d), AOF, fsync always\n",
           server.url, (int)server.pid);
    snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
    if (sluice_store_open(&st, url, NULL) != 0) {
        fprintf(stderr, "test_queue_durable: %s\n", sluice_last_error());
        return 1;
    }
    test_killed_worker(st);
    test_restarts(st);
    sluice_store_free(st);
    rs_stop(&server);
    munmap(sh, sizeof(*sh));
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue_durable");
}
