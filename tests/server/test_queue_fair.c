/*
 * test_queue_fair.c - one flooding queue cannot starve the others, and an
 * idle worker sleeps.
 *
 * Fairness. One queue, chat:big, holds 10,000 jobs under a cap of BIG_CAP
 * per second; beside it 20 queues (chat:s00 .. chat:s19) hold 5 jobs each
 * and have no cap. One worker serves all 21 (named, then again by the
 * pattern "chat:*"), completing every job it gets:
 *
 *   - the 100 small jobs are all done within FAIR_BOUND_MS, and, since the
 *     worker takes one job per queue per round, chat:big has given at most
 *     one job per round until then;
 *   - over the whole run chat:big gives at most BIG_CAP jobs per window
 *     (at most BIG_CAP x the windows that can begin in the run) and no
 *     fewer than the windows that surely ended would allow;
 *   - the pattern worker also serves a queue added while it runs, and never
 *     one that does not match.
 *
 * Sleep and wake-up. A worker on 21 empty queues spends next to no CPU time
 * in a 1 s sluice_worker_next() (getrusage), and wakes promptly when a job
 * is added by another process or another thread (Pub/Sub), or when a
 * delayed job falls due.
 *
 * chat:big is filled by pipelining the library's own add script (adding one
 * at a time with fsync always would take seconds); everything else goes
 * through the API.
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG_JOBS 10000
#define BIG_CAP 50
#define BIG_WINDOW_MS 1000
#define SMALL_QUEUES 20
#define SMALL_JOBS 5
#define FAIR_BOUND_MS 5000
#define RUN_MS 2500
#define IDLE_CPU_MS 100
#define WAKE_BOUND_MS 1000
/* How late a delayed job may come to a sleeping worker (1 s: not woken). */
#define DUE_SLACK_MS 500

static const char *const aof_args[] = {"--appendonly", "yes", "--appendfsync",
                                       "always", NULL};

static rs_server server;
static sluice_store *st;
static char small_names[SMALL_QUEUES][16];
static const char *names[SMALL_QUEUES + 1];

/* ---- Filling ------------------------------------------------------------- */

/* Adds 'n' jobs to 'q' at once: one round trip a batch of 512. */
static void fill_many(const char *q, int n)
{
    sluice_new_job *jobs = calloc((size_t)n, sizeof(*jobs));

    if (jobs == NULL)
        exit(2);
    for (int i = 0; i < n; i++)
        jobs[i] = (sluice_new_job){"big", 3, 0, 0};
    CHECK_OK(sluice_queue_add_many(st, q, strlen(q), jobs, (size_t)n));
    CHECK_EQ_U64(jobs[n - 1].id, n);
    free(jobs);
}

/* chat:big with its cap, the 20 small queues, and "other:x". */
static void fill_all(void)
{
    uint64_t id;

    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    fill_many("chat:big", BIG_JOBS);
    CHECK_OK(sluice_queue_set_cap(st, "chat:big", 8, BIG_CAP, BIG_WINDOW_MS));
    for (int i = 0; i < SMALL_QUEUES; i++)
        for (int j = 0; j < SMALL_JOBS; j++)
            CHECK_OK(sluice_queue_add(&id, st, names[i + 1],
                                      strlen(names[i + 1]), "s", 1, 0));
    CHECK_OK(sluice_queue_add(&id, st, "other:x", 7, "o", 1, 0));
}

/* ---- Fairness ------------------------------------------------------------ */

static void run_fair(sluice_worker *w, int late)
{
    sluice_job job = {0};
    uint64_t t0 = rs_mono_ms(), small_done_ms = 0, now, late_added = 0;
    uint64_t late_ms = 0;
    long small = 0, big = 0, big_at_small_done = -1, other = 0, errors = 0;
    long per_queue[SMALL_QUEUES] = {0};
    sluice_queue_stats s;

    while ((now = rs_mono_ms()) < t0 + RUN_MS) {
        const char *q = NULL;
        int rc = sluice_worker_next(&job, &q, NULL, w, t0 + RUN_MS - now);

        if (rc != 0) {
            if (errors++ < 3)
                fprintf(stderr, "    worker: %s\n", sluice_last_error());
            continue;
        }
        if (job.id == 0)
            continue;
        if (strcmp(q, "chat:big") == 0) {
            big++;
        } else if (strncmp(q, "chat:s", 6) == 0) {
            int i = atoi(q + 6);

            if (i >= 0 && i < SMALL_QUEUES)
                per_queue[i]++;
            if (++small == SMALL_QUEUES * SMALL_JOBS) {
                small_done_ms = rs_mono_ms() - t0;
                big_at_small_done = big;
            }
        } else if (strcmp(q, "chat:late") == 0) {
            late_ms = rs_mono_ms() - late_added;
        } else {
            other++;
        }
        CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
        if (late && small_done_ms > 0 && late_added == 0) {
            uint64_t id;

            late_added = rs_mono_ms();
            CHECK_OK(sluice_queue_add(&id, st, "chat:late", 9, "l", 1, 0));
        }
    }
    sluice_job_clear(&job);
    now = rs_mono_ms() - t0;
    printf("    small jobs done in %" PRIu64 " ms (chat:big gave %ld by "
           "then); chat:big gave %ld in %" PRIu64 " ms\n", small_done_ms,
           big_at_small_done, big, now);

    CHECK_EQ_U64(errors, 0);
    CHECK_EQ_U64(other, 0);
    CHECK_EQ_U64(small, SMALL_QUEUES * SMALL_JOBS);
    for (int i = 0; i < SMALL_QUEUES; i++)
        CHECK_EQ_U64(per_queue[i], SMALL_JOBS);
    CHECK(small_done_ms > 0 && small_done_ms < FAIR_BOUND_MS);
    /* One job per queue per round: 5 rounds, and perhaps a sixth begun. */
    CHECK(big_at_small_done >= 0 && big_at_small_done <= SMALL_JOBS + 1);
    /* The cap: windows begin at least BIG_WINDOW_MS apart. */
    CHECK(big <= BIG_CAP * (long)(now / BIG_WINDOW_MS + 1));
    CHECK(big >= BIG_CAP * (long)(RUN_MS / BIG_WINDOW_MS));
    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, st, "chat:big", 8));
    CHECK(s.count <= BIG_CAP);
    CHECK_EQ_U64(s.waiting, BIG_JOBS - (uint64_t)big);
    CHECK_EQ_U64(s.completed, (uint64_t)big);
    if (late)
        CHECK(late_added > 0 && late_ms > 0 && late_ms < 1500);
}

static void test_fair_named(void)
{
    sluice_worker *w = NULL;
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;

    test_context("fairness, 21 named queues");
    printf("  fairness, named queues:\n");
    fill_all();
    o.lease_ms = 60000;
    CHECK_OK(sluice_worker_new(&w, st, names, NULL, SMALL_QUEUES + 1, &o));
    if (w == NULL)
        return;
    run_fair(w, 0);
    sluice_worker_free(w);
    test_context(NULL);
}

static void test_fair_pattern(void)
{
    sluice_worker *w = NULL;
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;

    test_context("fairness, the pattern chat:*");
    printf("  fairness, pattern chat:*:\n");
    fill_all();
    o.lease_ms = 60000;
    o.pattern = "chat:*";
    CHECK_OK(sluice_worker_new(&w, st, NULL, NULL, 0, &o));
    if (w == NULL)
        return;
    run_fair(w, 1);
    CHECK_EQ_U64(rs_int(&server, "LLEN %s", "emq:{other:x}:wait"), 1);
    sluice_worker_free(w);
    test_context(NULL);
}

/* ---- Sleep and wake-up --------------------------------------------------- */

static uint64_t cpu_ms(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
           (uint64_t)ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
}

typedef struct wake_shared {
    atomic_ullong add_ms; /* monotonic, when the add began */
    atomic_int ok;
} wake_shared;

static void *add_later(void *p)
{
    wake_shared *ws = p;
    uint64_t id;

    rs_sleep_ms(300);
    atomic_store(&ws->add_ms, rs_mono_ms());
    atomic_store(&ws->ok,
                 sluice_queue_add(&id, st, "chat:s11", 8, "t", 1, 0) == 0);
    return NULL;
}

/* Waits in sluice_worker_next() for the job added by a process or thread. */
static void check_wake(sluice_worker *w, wake_shared *ws, const char *want_q,
                       const char *by)
{
    sluice_job job = {0};
    const char *q = NULL;
    uint64_t t0 = rs_mono_ms(), latency;

    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 5000));
    latency = rs_mono_ms() - atomic_load(&ws->add_ms);
    if (!CHECK(job.id != 0 && q != NULL && strcmp(q, want_q) == 0))
        return;
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    printf("    woken %" PRIu64 " ms after an add by another %s (waited %"
           PRIu64 " ms)\n", latency, by, rs_mono_ms() - t0);
    CHECK(latency < WAKE_BOUND_MS);
    sluice_job_clear(&job);
}

/* An add by another process, then by another thread, wakes worker 'w'. */
static void wake_by_adds(sluice_worker *w)
{
    wake_shared *ws;
    uint64_t id;
    pid_t pid;
    pthread_t th;

    /* An add by another process wakes it. */
    ws = mmap(NULL, sizeof(*ws), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ws == MAP_FAILED)
        exit(2);
    atomic_store(&ws->add_ms, 0);
    atomic_store(&ws->ok, 0);
    fflush(NULL);
    if ((pid = fork()) == 0) {
        sluice_store *mine = NULL;
        char url[160];

        snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
        if (sluice_store_open(&mine, url, NULL) != 0)
            _exit(1);
        rs_sleep_ms(300);
        atomic_store(&ws->add_ms, rs_mono_ms());
        atomic_store(&ws->ok, sluice_queue_add(&id, mine, "chat:s07", 8, "p",
                                               1, 0) == 0);
        sluice_store_free(mine);
        _exit(0);
    }
    check_wake(w, ws, "chat:s07", "process");
    waitpid(pid, NULL, 0);
    CHECK(atomic_load(&ws->ok)); /* read once the add has returned */

    /* An add by another thread wakes it. */
    atomic_store(&ws->add_ms, 0);
    atomic_store(&ws->ok, 0);
    pthread_create(&th, NULL, add_later, ws);
    check_wake(w, ws, "chat:s11", "thread");
    pthread_join(th, NULL);
    CHECK(atomic_load(&ws->ok));
    munmap(ws, sizeof(*ws));
}

/*
 * A delayed job wakes a worker when it falls due, also one added just after
 * the worker found every queue empty (so that it would not ask them again
 * for IDLE_RECHECK_MS, 1 s, unless told).
 */
static void wake_when_due(void)
{
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *q = NULL;
    uint64_t t0, took, id;

    CHECK_OK(sluice_worker_new(&w, st, names, NULL, SMALL_QUEUES + 1, NULL));
    if (w == NULL)
        return;
    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 0));
    CHECK_EQ_U64(job.id, 0);
    t0 = rs_mono_ms();
    CHECK_OK(sluice_queue_add(&id, st, "chat:s03", 8, "d", 1, 300));
    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 5000));
    took = rs_mono_ms() - t0;
    printf("    a job delayed 300 ms came after %" PRIu64 " ms\n", took);
    CHECK_EQ_U64(job.id, id);
    CHECK(q != NULL && strcmp(q, "chat:s03") == 0);
    CHECK(took >= 298 && took < 300 + DUE_SLACK_MS);
    if (job.id != 0)
        CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    sluice_job_clear(&job);
    sluice_worker_free(w);
}

static void test_idle_and_wake(void)
{
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *q = NULL;
    uint64_t c0, t0, cpu, took;

    test_context("an idle worker");
    printf("  idle worker:\n");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK_OK(sluice_worker_new(&w, st, names, NULL, SMALL_QUEUES + 1, NULL));
    if (w == NULL)
        return;
    /* Connected and subscribed first, so only the sleep is measured. */
    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 0));
    CHECK_EQ_U64(job.id, 0);

    c0 = cpu_ms();
    t0 = rs_mono_ms();
    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 1000));
    took = rs_mono_ms() - t0;
    cpu = cpu_ms() - c0;
    printf("    1 s on 21 empty queues: %" PRIu64 " ms CPU, returned after %"
           PRIu64 " ms\n", cpu, took);
    CHECK_EQ_U64(job.id, 0);
    CHECK(q == NULL);
    CHECK(took >= 990 && took < 1000 + WAKE_BOUND_MS);
    CHECK(cpu < IDLE_CPU_MS);

    wake_by_adds(w);
    sluice_worker_free(w);
    wake_when_due();
    test_context(NULL);
}

/* ---- Order within a round ------------------------------------------------ */

/* Three queues with work: the worker takes from each in turn. */
static void test_round_robin(void)
{
    const char *const qs[] = {"rr:a", "rr:b", "rr:c"};
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *q = NULL;
    uint64_t id;
    int seen[3] = {0, 0, 0};

    test_context("round robin");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            CHECK_OK(sluice_queue_add(&id, st, qs[i], 4, qs[i], 4, 0));
    /* rr:a has 4 more than the others; that must not matter. */
    for (int j = 0; j < 4; j++)
        CHECK_OK(sluice_queue_add(&id, st, qs[0], 4, qs[0], 4, 0));
    CHECK_OK(sluice_worker_new(&w, st, qs, NULL, 3, NULL));
    if (w == NULL)
        return;
    for (int round = 0; round < 4; round++) {
        int in_round[3] = {0, 0, 0};

        for (int k = 0; k < 3; k++) {
            CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 1000));
            if (!CHECK(job.id != 0 && q != NULL))
                continue;
            for (int i = 0; i < 3; i++)
                if (strcmp(q, qs[i]) == 0) {
                    in_round[i]++;
                    seen[i]++;
                }
            CHECK(job.payload_len == 4 && memcmp(job.payload, q, 4) == 0);
            CHECK_OK(sluice_queue_complete(st, q, 4, job.id, job.lease));
        }
        for (int i = 0; i < 3; i++)
            CHECK_EQ_U64(in_round[i], 1);
    }
    for (int j = 0; j < 4; j++) {
        CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 1000));
        CHECK(job.id != 0 && q != NULL && strcmp(q, "rr:a") == 0);
        if (job.id != 0)
            CHECK_OK(sluice_queue_complete(st, q, 4, job.id, job.lease));
    }
    CHECK_OK(sluice_worker_next(&job, &q, NULL, w, 50));
    CHECK_EQ_U64(job.id, 0);
    sluice_job_clear(&job);
    sluice_worker_free(w);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();
    char url[128];

    names[0] = "chat:big";
    for (int i = 0; i < SMALL_QUEUES; i++) {
        snprintf(small_names[i], sizeof(small_names[i]), "chat:s%02d", i);
        names[i + 1] = small_names[i];
    }
    if (rs_start(&server, aof_args) < 0) {
        fprintf(stderr, "test_queue_fair: cannot start redis-server\n");
        return 1;
    }
    printf("test_queue_fair: server %s (pid %d), AOF, fsync always\n",
           server.url, (int)server.pid);
    snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
    if (sluice_store_open(&st, url, NULL) != 0) {
        fprintf(stderr, "test_queue_fair: %s\n", sluice_last_error());
        return 1;
    }
    test_round_robin();
    test_fair_named();
    test_fair_pattern();
    test_idle_and_wake();
    sluice_store_free(st);
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue_fair");
}
