/*
 * test_valkey_shared.c - one budget shared by many processes and threads.
 *
 * The point of a server store: every worker that uses the same server and
 * key spends one budget. Here 4 processes (forked, each opening its own
 * store) x 4 threads hammer one key for three and a half windows (window
 * 400 ms, max 50), far above the budget, and every admission is recorded in
 * shared memory. Then:
 *
 *   fixed (the server's clock): each admission's window ends at about
 *   (local time of the call + reset_after_ms); admissions are grouped by
 *   that estimate, and each window admitted exactly max (at most max, for a
 *   window that began too close to the end of the run to be filled);
 *
 *   sliding-log (the caller's clock, real time): the time each call passed to
 *   the script is recorded. A score is that time, or later if the script
 *   held a lagging clock at the newest entry, but never later than the
 *   call's end. So any set of admissions whose [time passed, end] intervals
 *   all fit in one window must number at most max (this can only
 *   under-count, never raise a false alarm). And the admissions come in
 *   bursts one window apart, each exactly max while demand lasts.
 *
 * Threads are created only after fork() (a forked child of a threaded
 * process may not start threads under TSan), and a child ends with _exit(),
 * so it never runs the parent's exit handlers (which stop the server).
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */

#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCS 4
#define THREADS 4
#define WINDOW_MS 400
#define MAX 50
#define RUN_MS (WINDOW_MS * 7 / 2)
#define MAX_RECS 100000
/* A window that starts later than this before the end may not fill. */
#define FILL_MS 100

typedef struct rec {
    uint64_t now_ms;   /* the caller clock passed (log), or local time */
    uint64_t end_ms;   /* local time when the call returned */
    uint64_t reset_ms; /* the decision's reset_after_ms */
} rec;

typedef struct shared {
    atomic_int ready;
    atomic_int go;
    uint64_t start_ms;    /* real time at which the threads begin */
    uint64_t deadline_ms; /* and stop */
    atomic_long nrecs;
    atomic_long calls;
    atomic_long errors;
    atomic_long bad_fields;
    rec recs[MAX_RECS];
} shared;

static rs_server server;
static shared *sh;
static sluice_algo phase_algo;

/* The caller clock: real time, remembered per thread for the record. */
static _Thread_local uint64_t last_now_ms;

static uint64_t recording_clock(void *payload)
{
    last_now_ms = sluice_clock_realtime_ms(payload);
    return last_now_ms;
}

static void *hammer(void *arg)
{
    sluice_store *st = arg;
    sluice_limit lim = SLUICE_LIMIT(phase_algo, MAX, WINDOW_MS);
    sluice_decision d;

    /* Connect and load the scripts before the start. */
    if (sluice_peek(&d, st, &lim, "warm-up", 7, 1) != SLUICE_OK)
        atomic_fetch_add(&sh->errors, 1);
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go))
        rs_sleep_ms(1);
    while (sluice_clock_realtime_ms(NULL) < sh->start_ms)
        rs_sleep_ms(1);
    for (;;) {
        uint64_t before = sluice_clock_realtime_ms(NULL), end;
        int rc;

        if (before >= sh->deadline_ms)
            break;
        rc = sluice_hit(&d, st, &lim, "budget", 6, 1);
        end = sluice_clock_realtime_ms(NULL);
        atomic_fetch_add(&sh->calls, 1);
        if (rc != SLUICE_OK) {
            if (atomic_fetch_add(&sh->errors, 1) < 3)
                fprintf(stderr, "    pid %d: %s: %s\n", (int)getpid(),
                        sluice_err_name(rc), sluice_last_error());
            rs_sleep_ms(5);
            continue;
        }
        if (d.limit != MAX || d.remaining > MAX ||
            d.reset_after_ms > WINDOW_MS) {
            if (atomic_fetch_add(&sh->bad_fields, 1) < 5)
                fprintf(stderr, "    allowed %d remaining %" PRIu64
                        " retry %" PRIu64 " reset %" PRIu64 "\n", d.allowed,
                        d.remaining, d.retry_after_ms, d.reset_after_ms);
        }
        if (d.allowed) {
            long i = atomic_fetch_add(&sh->nrecs, 1);

            if (i < MAX_RECS) {
                sh->recs[i].now_ms =
                    phase_algo == SLUICE_SLIDING_LOG ? last_now_ms : before;
                sh->recs[i].end_ms = end;
                sh->recs[i].reset_ms = d.reset_after_ms;
            }
        } else {
            /* Demand far above the budget, without spinning: wake when the
               budget returns, or in 20 ms at the latest. */
            uint64_t nap = d.retry_after_ms;

            if ((d.retry_after_ms == 0 || d.retry_after_ms > WINDOW_MS) &&
                atomic_fetch_add(&sh->bad_fields, 1) < 5)
                fprintf(stderr, "    refused: remaining %" PRIu64
                        " retry %" PRIu64 " reset %" PRIu64 "\n",
                        d.remaining, d.retry_after_ms, d.reset_after_ms);
            rs_sleep_ms(nap < 1 ? 1 : nap > 20 ? 20 : nap);
        }
    }
    return NULL;
}

/* A child: its own store, its own threads, then _exit(). */
static void child(void)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_store *st = NULL;
    pthread_t tid[THREADS];
    char url[200];

    if (phase_algo == SLUICE_SLIDING_LOG) {
        opts.clock_ms = recording_clock;
        snprintf(url, sizeof(url), "%s?clock=caller&timeout=5000&pool=%d",
                 server.url, THREADS);
    } else {
        snprintf(url, sizeof(url), "%s?timeout=5000&pool=%d", server.url,
                 THREADS);
    }
    if (sluice_store_open(&st, url, &opts) != SLUICE_OK) {
        fprintf(stderr, "    child: %s\n", sluice_last_error());
        _exit(3);
    }
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&tid[i], NULL, hammer, st) != 0)
            _exit(4);
    for (int i = 0; i < THREADS; i++)
        pthread_join(tid[i], NULL);
    sluice_store_free(st);
    _exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int cmp_rec(const void *a, const void *b)
{
    const rec *x = a, *y = b;

    return x->now_ms < y->now_ms ? -1 : x->now_ms > y->now_ms;
}

/* Fixed: group by estimated window end; each group is one window. */
static void check_fixed(rec *recs, long n)
{
    uint64_t *ends = malloc((size_t)n * sizeof(*ends));
    long i = 0;
    int windows = 0, full = 0;

    if (ends == NULL)
        exit(2);
    for (long j = 0; j < n; j++)
        ends[j] = (recs[j].now_ms + recs[j].end_ms) / 2 + recs[j].reset_ms;
    qsort(ends, (size_t)n, sizeof(*ends), cmp_u64);
    while (i < n) {
        long j = i + 1;
        uint64_t start;

        while (j < n && ends[j] - ends[j - 1] < WINDOW_MS / 2)
            j++;
        windows++;
        start = ends[i] - WINDOW_MS;
        /* The ends of one window agree to within the calls' durations. */
        CHECK(ends[j - 1] - ends[i] < WINDOW_MS / 4);
        if (!CHECK(j - i <= MAX))
            fprintf(stderr, "    fixed: window %d admitted %ld > %d\n",
                    windows, j - i, MAX);
        if (start + FILL_MS <= sh->deadline_ms) {
            full++;
            if (!CHECK_EQ_U64(j - i, MAX))
                fprintf(stderr, "    fixed: window %d (from %+" PRId64
                        " ms) admitted %ld\n", windows,
                        (int64_t)(start - sh->start_ms), j - i);
        }
        i = j;
    }
    printf("  fixed: %ld admitted in %d windows (%d full)\n", n, windows,
           full);
    CHECK(full >= 3);
    free(ends);
}

/* Sliding log: no window-long span over max; bursts of exactly max. */
static void check_log(rec *recs, long n)
{
    long worst = 0, bursts = 0, full = 0, i = 0;

    qsort(recs, (size_t)n, sizeof(*recs), cmp_rec);
    for (long a = 0; a < n; a++) {
        long inside = 0;

        /* Admissions whose score is surely in [now_a, now_a + W). */
        for (long b = a; b < n && recs[b].now_ms < recs[a].now_ms + WINDOW_MS;
             b++)
            inside += recs[b].end_ms < recs[a].now_ms + WINDOW_MS;
        worst = inside > worst ? inside : worst;
    }
    if (!CHECK(worst <= MAX))
        fprintf(stderr, "    log: %ld admissions within one window\n", worst);
    while (i < n) {
        long j = i + 1;

        while (j < n && recs[j].now_ms - recs[j - 1].now_ms < WINDOW_MS / 2)
            j++;
        bursts++;
        if (!CHECK(j - i <= MAX))
            fprintf(stderr, "    log: burst %ld admitted %ld\n", bursts, j - i);
        if (recs[i].now_ms + FILL_MS <= sh->deadline_ms) {
            full++;
            if (!CHECK_EQ_U64(j - i, MAX))
                fprintf(stderr, "    log: burst %ld (from %+" PRId64
                        " ms) admitted %ld\n", bursts,
                        (int64_t)(recs[i].now_ms - sh->start_ms), j - i);
        }
        i = j;
    }
    printf("  sliding-log: %ld admitted in %ld bursts (%ld full); at most "
           "%ld surely within one window\n", n, bursts, full, worst);
    CHECK(full >= 3);
}

static void run_phase(sluice_algo algo)
{
    pid_t pids[PROCS];
    uint64_t t0 = rs_mono_ms(), deadline;
    long n;

    test_context("shared budget, %s", sluice_algo_name(algo));
    memset(sh, 0, sizeof(*sh) - sizeof(sh->recs));
    phase_algo = algo;
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (int p = 0; p < PROCS; p++) {
        fflush(NULL);
        pids[p] = fork();
        if (pids[p] < 0) {
            perror("fork");
            exit(2);
        }
        if (pids[p] == 0)
            child();
    }
    /* Start together, once every thread is connected. */
    deadline = rs_mono_ms() + 20000;
    while (atomic_load(&sh->ready) < PROCS * THREADS &&
           rs_mono_ms() < deadline)
        rs_sleep_ms(5);
    CHECK_EQ_U64(atomic_load(&sh->ready), PROCS * THREADS);
    sh->start_ms = sluice_clock_realtime_ms(NULL) + 50;
    sh->deadline_ms = sh->start_ms + RUN_MS;
    atomic_store(&sh->go, 1);
    for (int p = 0; p < PROCS; p++) {
        int status = 0;

        waitpid(pids[p], &status, 0);
        if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            fprintf(stderr, "    child %d: status %#x\n", p, status);
    }
    n = atomic_load(&sh->nrecs);
    CHECK_EQ_U64(atomic_load(&sh->errors), 0);
    CHECK_EQ_U64(atomic_load(&sh->bad_fields), 0);
    CHECK(n <= MAX_RECS);
    if (n > MAX_RECS)
        n = MAX_RECS;
    printf("  %s: %d processes x %d threads, %ld calls, %" PRIu64 " ms\n",
           sluice_algo_name(algo), PROCS, THREADS, atomic_load(&sh->calls),
           rs_mono_ms() - t0);
    /* Demand must have been far above the budget, or nothing was shown. */
    CHECK(atomic_load(&sh->calls) > 4 * n);
    if (algo == SLUICE_FIXED)
        check_fixed(sh->recs, n);
    else
        check_log(sh->recs, n);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_shared: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_shared: server %s (pid %d)\n", server.url,
           (int)server.pid);
    run_phase(SLUICE_FIXED);
    run_phase(SLUICE_SLIDING_LOG);
    rs_stop(&server);
    munmap(sh, sizeof(*sh));
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_shared");
}
