/*
 * test_queue_limit.c - the queue's budget, enforced at the dequeue point.
 *
 * Enforcement. A queue capped at MAX jobs per WINDOW_MS holds exactly
 * WINDOWS x MAX jobs; 3 worker processes (forked, each opening its own
 * store) x 2 threads take from it as fast as the cap lets them, sleeping the
 * answered wait when deferred, until it is empty. Two records are kept:
 *
 *   - the server's own order of events. The server runs with keyspace
 *     notifications for the limiter counter (incrby, expire, expired, del)
 *     and the wait list (rpop), and the parent is subscribed to both
 *     channels. Pub/Sub delivers them in the order the server executed
 *     them, so the jobs taken in one window are exactly the RPOPs between
 *     two expiries of the counter: no clock is involved;
 *   - every take in shared memory: the job id and the server's time of the
 *     take (the job's lease deadline, read with ZSCORE, minus the lease).
 *
 * Then: every window took at most MAX jobs, and exactly MAX (jobs were
 * waiting in every one of them); each take incremented the counter once;
 * the expiry was armed once per window; and, by the server's clock, one
 * window's takes span at most WINDOW_MS while the next window begins at
 * least WINDOW_MS after the previous one began. Jobs are taken in id order
 * (FIFO, and no lease runs out), so the events' counts say which ids each
 * window took.
 *
 * Deferral. An over-budget take takes nothing and answers a wait equal to
 * the counter's PTTL read right after (give or take the time both calls
 * took); after that wait the job is taken. Each deferred take, also one made
 * by a worker, emits "emq.rate_limit.hit" once with delay_ms equal to the
 * wait it answered and the queue, "fixed" and the cap as metadata; other
 * takes emit nothing. A deferral is no refused hit: "sluice.hit.refused"
 * never fires for one.
 *
 * The seam. A take in the counter's last millisecond (PTTL 0: the key still
 * exists, its expiry is this very millisecond) must not take a job into the
 * window that is ending: either it waits, or the window is over and the job
 * starts a new one, as the fixed-window algorithm of sluice_hit() does.
 *
 * Threads are created only after fork() (TSan); a child ends with _exit().
 */
#define _DEFAULT_SOURCE 1 /* MAP_ANONYMOUS */

#include "queue_fixture.h" /* queue_wait_is_pttl() */
#include "server.h"
#include "test.h"

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

#define PROCS 3
#define THREADS 2
#define MAX 20
#define WINDOW_MS 500
#define WINDOWS 6
#define JOBS (MAX * WINDOWS)
#define LEASE_MS 60000
#define MAX_DEFERRALS 100000

static const char *const server_args[] = {
    "--appendonly", "yes", "--appendfsync", "always",
    /* K: keyspace channels; g: del, expire; $: incrby; l: rpop; x: expired */
    "--notify-keyspace-events", "Kg$lx", NULL};

static const char *const FLOOD = "flood";
#define FLOOD_LIMITER "emq:{flood}:limiter"
#define FLOOD_WAIT "emq:{flood}:wait"
#define FLOOD_ACTIVE "emq:{flood}:active"

typedef struct take_rec {
    uint64_t id;
    int64_t server_ms; /* the server's clock at the take */
} take_rec;

typedef struct shared {
    atomic_int ready;
    atomic_int go;
    atomic_long ntakes;
    atomic_long ndeferred;
    atomic_long nempty;
    atomic_long errors;
    atomic_long bad;
    take_rec takes[JOBS + 16];
} shared;

static rs_server server;
static shared *sh;

/* ---- The workers (children) ---------------------------------------------- */

typedef struct worker_arg {
    sluice_store *store;
} worker_arg;

static void *worker_thread(void *p)
{
    worker_arg *a = p;
    struct timeval tv = {5, 0};
    redisContext *raw = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    uint64_t deadline;
    sluice_job job = {0};

    if (raw == NULL || raw->err) {
        atomic_fetch_add(&sh->errors, 1);
        atomic_fetch_add(&sh->ready, 1);
        return NULL;
    }
    redisSetTimeout(raw, tv);
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go))
        rs_sleep_ms(1);
    deadline = rs_mono_ms() + 20000;
    while (rs_mono_ms() < deadline) {
        sluice_take_status status = 0;
        uint64_t wait = 0;
        int rc = sluice_queue_take(&status, &wait, &job, a->store, FLOOD,
                                   strlen(FLOOD), LEASE_MS);

        if (rc != 0) {
            fprintf(stderr, "    take: %s\n", sluice_last_error());
            atomic_fetch_add(&sh->errors, 1);
            break;
        }
        if (status == SLUICE_TAKE_EMPTY) {
            atomic_fetch_add(&sh->nempty, 1);
            break;
        }
        if (status == SLUICE_TAKE_DEFERRED) {
            atomic_fetch_add(&sh->ndeferred, 1);
            if (wait == 0 || wait > WINDOW_MS)
                atomic_fetch_add(&sh->bad, 1);
            rs_sleep_ms(wait);
            continue;
        }
        {
            redisReply *r = redisCommand(raw, "ZSCORE %s %llu", FLOOD_ACTIVE,
                                         (unsigned long long)job.id);
            long i = atomic_fetch_add(&sh->ntakes, 1);

            if (i < JOBS + 16) {
                sh->takes[i].id = job.id;
                sh->takes[i].server_ms =
                    r != NULL && r->type == REDIS_REPLY_STRING
                        ? strtoll(r->str, NULL, 10) - LEASE_MS
                        : -1;
            }
            if (r != NULL)
                freeReplyObject(r);
        }
        if (sluice_queue_complete(a->store, FLOOD, strlen(FLOOD), job.id,
                                  job.lease) != 0) {
            fprintf(stderr, "    complete: %s\n", sluice_last_error());
            atomic_fetch_add(&sh->errors, 1);
        }
    }
    sluice_job_clear(&job);
    redisFree(raw);
    return NULL;
}

static void child(void)
{
    pthread_t th[THREADS];
    worker_arg arg;
    char url[128];

    snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
    if (sluice_store_open(&arg.store, url, NULL) != 0) {
        fprintf(stderr, "    child: %s\n", sluice_last_error());
        atomic_fetch_add(&sh->errors, 1);
        atomic_fetch_add(&sh->ready, THREADS);
        _exit(1);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker_thread, &arg);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    sluice_store_free(arg.store);
    _exit(0);
}

/* ---- The server's order of events ---------------------------------------- */

typedef struct window_count {
    long rpops, incrs, arms;
} window_count;

/*
 * Reads the keyspace events up to the sentinel and splits them into the
 * counter's windows; returns how many windows took anything.
 */
static int read_windows(redisContext *sub, window_count *w, int cap)
{
    window_count cur = {0, 0, 0};
    int n = 0;

    for (;;) {
        redisReply *r = NULL;
        const char *chan, *ev;

        if (redisGetReply(sub, (void **)&r) != REDIS_OK || r == NULL) {
            CHECK(!"the keyspace events ended before the sentinel");
            break;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
            r->element[2]->type != REDIS_REPLY_STRING) {
            freeReplyObject(r);
            continue;
        }
        chan = r->element[1]->str;
        ev = r->element[2]->str;
        if (strcmp(ev, "sentinel") == 0) {
            freeReplyObject(r);
            break;
        }
        if (strstr(chan, ":wait") != NULL) {
            if (strcmp(ev, "rpop") == 0)
                cur.rpops++;
        } else if (strcmp(ev, "incrby") == 0) {
            cur.incrs++;
        } else if (strcmp(ev, "expire") == 0) {
            cur.arms++;
        } else if (strcmp(ev, "expired") == 0 || strcmp(ev, "del") == 0) {
            if ((cur.rpops > 0 || cur.incrs > 0) && n < cap)
                w[n++] = cur;
            memset(&cur, 0, sizeof(cur));
        }
        freeReplyObject(r);
    }
    if ((cur.rpops > 0 || cur.incrs > 0) && n < cap)
        w[n++] = cur;
    return n;
}

static uint64_t stats_completed(sluice_store *st)
{
    sluice_queue_stats s;

    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, st, FLOOD, strlen(FLOOD)));
    return s.completed;
}

static int by_id(const void *a, const void *b)
{
    const take_rec *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* Subscribes a connection of its own to the keyspace events of the
   limiter counter and the wait list (see the top); exits if it cannot. */
static redisContext *subscribe(void)
{
    struct timeval tv = {10, 0};
    redisContext *sub = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    redisReply *r;

    if (sub == NULL || sub->err) {
        CHECK(!"cannot connect the subscriber");
        exit(2);
    }
    redisSetTimeout(sub, tv);
    r = redisCommand(sub, "SUBSCRIBE __keyspace@0__:%s __keyspace@0__:%s",
                     FLOOD_LIMITER, FLOOD_WAIT);
    if (r != NULL)
        freeReplyObject(r);
    r = NULL;
    if (redisGetReply(sub, (void **)&r) == REDIS_OK && r != NULL)
        freeReplyObject(r); /* the second subscription's confirmation */
    return sub;
}

/* The worker processes: started together, and each must end well. */
static void run_workers(uint64_t t0)
{
    pid_t pids[PROCS];

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
    while (atomic_load(&sh->ready) < PROCS * THREADS &&
           rs_mono_ms() < t0 + 20000)
        rs_sleep_ms(5);
    atomic_store(&sh->go, 1);
    for (int p = 0; p < PROCS; p++) {
        int status = 0;

        waitpid(pids[p], &status, 0);
        if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            fprintf(stderr, "    child %d: status %#x\n", p, status);
    }
}

/* The server's order: at most MAX per window, and exactly MAX. */
static void check_windows(const window_count *w, int nw)
{
    CHECK_EQ_U64(nw, WINDOWS);
    for (int k = 0; k < nw; k++) {
        int ok = CHECK(w[k].rpops <= MAX);

        ok &= CHECK_EQ_U64(w[k].rpops, MAX);
        ok &= CHECK_EQ_U64(w[k].incrs, w[k].rpops);
        ok &= CHECK_EQ_U64(w[k].arms, 1);
        if (!ok)
            fprintf(stderr, "    window %d: %ld jobs taken, %ld counted, "
                    "armed %ld times\n", k, w[k].rpops, w[k].incrs,
                    w[k].arms);
    }
}

/* The server's clock: ids in order, window by window. */
static void check_takes(const window_count *w, int nw, long ntakes)
{
    long i = 0;
    int64_t prev_start = -1;

    if (ntakes > JOBS)
        ntakes = JOBS;
    qsort(sh->takes, (size_t)ntakes, sizeof(take_rec), by_id);
    for (int k = 0; k < nw && i < ntakes; k++) {
        long end = i + w[k].rpops < ntakes ? i + w[k].rpops : ntakes;
        int64_t start = sh->takes[i].server_ms;
        int64_t last = sh->takes[end - 1].server_ms;

        if (!CHECK(start >= 0 && last - start <= WINDOW_MS + 1))
            fprintf(stderr, "    window %d: takes from %" PRId64
                    " to %" PRId64 " ms\n", k, start, last);
        if (prev_start >= 0 && !CHECK(start - prev_start >= WINDOW_MS - 1))
            fprintf(stderr, "    window %d began %" PRId64 " ms after the "
                    "previous one\n", k, start - prev_start);
        prev_start = start;
        i = end;
    }
    for (long j = 0; j < ntakes; j++)
        if (!CHECK_EQ_U64(sh->takes[j].id, (uint64_t)j + 1))
            break;
}

static void test_enforcement(sluice_store *st)
{
    window_count w[WINDOWS * 4];
    redisContext *sub;
    uint64_t t0 = rs_mono_ms(), id;
    long ntakes;
    int nw;

    test_context("enforcement: %d per %d ms, %d processes x %d threads", MAX,
                 WINDOW_MS, PROCS, THREADS);
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    memset(sh, 0, sizeof(*sh));
    CHECK_OK(sluice_queue_set_cap(st, FLOOD, strlen(FLOOD), MAX, WINDOW_MS));
    for (int i = 1; i <= JOBS; i++) {
        CHECK_OK(sluice_queue_add(&id, st, FLOOD, strlen(FLOOD), "j", 1, 0));
        CHECK_EQ_U64(id, (uint64_t)i);
    }
    sub = subscribe();
    run_workers(t0);
    CHECK(rs_ok(&server, "PUBLISH __keyspace@0__:%s sentinel",
                FLOOD_LIMITER) == 0);
    nw = read_windows(sub, w, WINDOWS * 4);
    redisFree(sub);

    ntakes = atomic_load(&sh->ntakes);
    printf("  enforcement: %ld takes, %ld deferred, %d windows, %" PRIu64
           " ms\n", ntakes, atomic_load(&sh->ndeferred), nw,
           rs_mono_ms() - t0);
    CHECK_EQ_U64(atomic_load(&sh->errors), 0);
    CHECK_EQ_U64(atomic_load(&sh->bad), 0);
    CHECK_EQ_U64(ntakes, JOBS);
    CHECK_EQ_U64(atomic_load(&sh->nempty), PROCS * THREADS);
    /* Demand was above the budget, or nothing was shown. */
    CHECK(atomic_load(&sh->ndeferred) >= WINDOWS - 1);
    CHECK_EQ_U64(stats_completed(st), JOBS);
    check_windows(w, nw);
    check_takes(w, nw, ntakes);
    test_context(NULL);
}

/* ---- Deferral and telemetry ---------------------------------------------- */

typedef struct hits {
    long n;
    double delay_ms;
    int queue_ok;
    int algorithm_ok;
    int limit_ok;
} hits;

static void on_hit(const sluice_event *ev, void *payload)
{
    hits *h = payload;

    h->n++;
    h->delay_ms = -1;
    for (size_t i = 0; i < ev->n_measurements; i++)
        if (strcmp(ev->measurements[i].name, "delay_ms") == 0)
            h->delay_ms = ev->measurements[i].value;
    h->queue_ok = h->algorithm_ok = h->limit_ok = 0;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        const sluice_metadata *m = &ev->metadata[i];

        if (strcmp(m->name, "queue") == 0)
            h->queue_ok = m->value_len == 5 && memcmp(m->value, "defer", 5) == 0;
        if (strcmp(m->name, "algorithm") == 0)
            h->algorithm_ok =
                m->value_len == 5 && memcmp(m->value, "fixed", 5) == 0;
        if (strcmp(m->name, "limit") == 0) /* the cap, 3 */
            h->limit_ok = m->value_len == 1 && m->value[0] == '3';
    }
}

/* One take; checks the event count against the status. */
static sluice_take_status take_counted(uint64_t *wait, sluice_job *job,
                                       sluice_store *st, hits *h)
{
    sluice_take_status status = 0;
    long before = h->n;

    CHECK_OK(sluice_queue_take(&status, wait, job, st, "defer", 5, 30000));
    if (status == SLUICE_TAKE_DEFERRED) {
        CHECK_EQ_U64(h->n, before + 1);
        CHECK(h->delay_ms == (double)*wait);
        CHECK(h->queue_ok && h->algorithm_ok && h->limit_ok);
    } else {
        CHECK_EQ_U64(h->n, before);
    }
    return status;
}

/* A worker's deferred take emits too (its wait at most 'wait'); it then
   skips the queue. */
static void worker_deferred(sluice_store *st, hits *h, uint64_t wait)
{
    const char *const names[] = {"defer"};
    const char *qname = NULL;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    long before = h->n;

    CHECK_OK(sluice_worker_new(&w, st, names, NULL, 1, NULL));
    if (w == NULL)
        return;
    CHECK_OK(sluice_worker_next(&job, &qname, NULL, w, 100));
    CHECK_EQ_U64(job.id, 0);
    CHECK_EQ_U64(h->n, before + 1);
    CHECK(h->delay_ms > 0 && h->delay_ms <= (double)wait);
    sluice_worker_free(w);
}

/* After the wait answered (and 2 ms for rounding): a job, in a new window
   (the counter at 'lim' is at 1, armed afresh). */
static void taken_after_wait(sluice_store *st, hits *h, sluice_job *job,
                             const char *lim)
{
    uint64_t t0 = rs_mono_us(), wait = 0, wait2 = 0;
    long long pttl;
    redisReply *r;

    CHECK_EQ_U64(take_counted(&wait, job, st, h), SLUICE_TAKE_DEFERRED);
    rs_sleep_ms(wait + 2);
    CHECK_EQ_U64(take_counted(&wait2, job, st, h), SLUICE_TAKE_JOB);
    CHECK(job->id != 0);
    pttl = rs_int(&server, "PTTL %s", lim);
    r = rs_cmd(&server, "GET %s", lim);
    CHECK(pttl > 800 && pttl <= 1000);
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
          strcmp(r->str, "1") == 0);
    if (r != NULL)
        freeReplyObject(r);
    CHECK_OK(sluice_queue_complete(st, "defer", 5, job->id, job->lease));
    CHECK(rs_mono_us() - t0 >= (wait + 2) * 1000);
}

static void test_deferral(sluice_store *st)
{
    const char *lim = "emq:{defer}:limiter";
    hits h = {0, 0, 0, 0, 0}, refused = {0, 0, 0, 0, 0};
    sluice_job job = {0};
    uint64_t wait = 0, wait2 = 0, t0, id;

    test_context("deferral and telemetry");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK_OK(sluice_telemetry_attach("test_queue_limit", "emq.rate_limit.hit",
                                     on_hit, &h));
    CHECK_OK(sluice_telemetry_attach("test_queue_limit.refused",
                                     SLUICE_EVENT_HIT_REFUSED, on_hit,
                                     &refused));
    CHECK_OK(sluice_queue_set_cap(st, "defer", 5, 3, 1000));
    for (int i = 0; i < 10; i++)
        CHECK_OK(sluice_queue_add(&id, st, "defer", 5, "d", 1, 0));

    /* Three jobs, no event; the fourth take is deferred with the PTTL. */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(take_counted(&wait, &job, st, &h), SLUICE_TAKE_JOB);
        CHECK_OK(sluice_queue_complete(st, "defer", 5, job.id, job.lease));
    }
    for (int i = 0; i < 3; i++) {
        t0 = rs_mono_us();
        CHECK_EQ_U64(take_counted(&wait, &job, st, &h), SLUICE_TAKE_DEFERRED);
        CHECK(queue_wait_is_pttl(&server, wait, lim, t0));
        CHECK(wait > 800 && wait <= 1000);
        CHECK_EQ_U64(job.id, 0);
    }
    CHECK_EQ_U64(h.n, 3);

    /* Half-way: still deferred, the wait shrunk by the time gone. */
    rs_sleep_ms(wait / 2);
    t0 = rs_mono_us();
    CHECK_EQ_U64(take_counted(&wait2, &job, st, &h), SLUICE_TAKE_DEFERRED);
    CHECK(wait2 < wait);
    CHECK(queue_wait_is_pttl(&server, wait2, lim, t0));

    worker_deferred(st, &h, wait2);
    taken_after_wait(st, &h, &job, lim);

    /* An empty queue under the cap emits nothing. */
    CHECK_OK(sluice_queue_set_cap(st, "defer", 5, 0, 0));
    CHECK(rs_ok(&server, "DEL emq:{defer}:wait") == 0);
    CHECK_EQ_U64(take_counted(&wait, &job, st, &h), SLUICE_TAKE_EMPTY);
    CHECK_OK(sluice_telemetry_detach("test_queue_limit"));
    CHECK_OK(sluice_telemetry_detach("test_queue_limit.refused"));
    CHECK_EQ_U64(refused.n, 0);
    sluice_job_clear(&job);
    test_context(NULL);
}

/* ---- The seam ------------------------------------------------------------ */

/*
 * The counter holds the cap and expires in 20 ms; takes are made as fast as
 * possible until one is given a job. That job must begin a new window: the
 * counter reads 1 with a fresh expiry. A take made in the counter's last
 * millisecond (PTTL 0, the key not yet dropped) that takes the job into the
 * ending window leaves the counter at cap + 1 with PTTL 0.
 */
static void test_seam(sluice_store *st)
{
    const char *lim = "emq:{seam}:limiter";
    int over = 0;
    uint64_t id;
    long takes = 0;

    test_context("the window's last millisecond");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK_OK(sluice_queue_set_cap(st, "seam", 4, 1, 1000));
    for (int i = 0; i < 30; i++)
        CHECK_OK(sluice_queue_add(&id, st, "seam", 4, "s", 1, 0));
    for (int trial = 0; trial < 30; trial++) {
        sluice_job job = {0};
        sluice_take_status status = 0;
        uint64_t wait, deadline = rs_mono_ms() + 3000;
        long long pttl;
        redisReply *r;

        CHECK(rs_ok(&server, "SET %s 1 PX 20", lim) == 0);
        do {
            takes++;
            if (!CHECK_OK(sluice_queue_take(&status, &wait, &job, st, "seam",
                                            4, 30000)))
                break;
        } while (status != SLUICE_TAKE_JOB && rs_mono_ms() < deadline);
        if (!CHECK_EQ_U64(status, SLUICE_TAKE_JOB))
            break;
        pttl = rs_int(&server, "PTTL %s", lim);
        r = rs_cmd(&server, "GET %s", lim);
        if (!(pttl > 900 && r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, "1") == 0)) {
            if (over++ == 0)
                fprintf(stderr, "    trial %d: after the job, the counter "
                        "reads %s with PTTL %lld ms\n", trial,
                        r != NULL && r->type == REDIS_REPLY_STRING ? r->str
                                                                   : "(none)",
                        pttl);
        }
        if (r != NULL)
            freeReplyObject(r);
        CHECK_OK(sluice_queue_complete(st, "seam", 4, job.id, job.lease));
        sluice_job_clear(&job);
    }
    if (!CHECK_EQ_U64(over, 0))
        fprintf(stderr, "    %d of 30 jobs were taken into a window that "
                "had reached its cap (%ld takes)\n", over, takes);
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
    if (rs_start(&server, server_args) < 0) {
        fprintf(stderr, "test_queue_limit: cannot start redis-server\n");
        return 1;
    }
    printf("test_queue_limit: server %s (pid %d), AOF, fsync always\n",
           server.url, (int)server.pid);
    snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
    if (sluice_store_open(&st, url, NULL) != 0) {
        fprintf(stderr, "test_queue_limit: %s\n", sluice_last_error());
        return 1;
    }
    test_enforcement(st);
    test_deferral(st);
    test_seam(st);
    sluice_store_free(st);
    rs_stop(&server);
    munmap(sh, sizeof(*sh));
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue_limit");
}
