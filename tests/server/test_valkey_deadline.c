/*
 * test_valkey_deadline.c - one deadline per call, under load, against a
 * real redis-server that is stopped (SIGSTOP: it keeps its sockets, and
 * the kernel still accepts connections for it, but it answers nothing).
 * Issue 19, D3.
 *
 * 50 threads hit one store at timeout=200 while the server runs, then
 * while it is stopped for 1.5 s, then after it resumes. A call that meets
 * the stopped server times out; its connection is closed, and the next
 * call on it connects again (which succeeds: the kernel queues it) and
 * asks SLUICE.VERSION, which gets no answer either. Half the threads
 * switch, at the stop, to a store that has never connected, so their
 * calls also send every SCRIPT LOAD. Each step used to get a timeout of
 * its own (400 ms and more for a call at timeout=200); now the call's one
 * deadline covers them all, and no call may take longer than the timeout
 * plus 10%. The test prints the calls' latencies (percentiles, maximum).
 *
 * The machine is shared: a thread that is ready may not run for tens of
 * milliseconds. So a canary thread that sleeps 1 ms at a time measures the
 * longest such lag of the run, and the bound is the timeout + 10% + that
 * lag (printed too); the old code's second timeout (400 ms) is far beyond.
 * The canary does not see every stall of 50 threads on 2 CPUs, so a run
 * over the bound is made again, twice at most: a path with a second
 * timeout is over it every time, a stall of the machine is not.
 */
#include "server.h"
#include "test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 50
#define TIMEOUT_MS 200
#define BOUND_US (TIMEOUT_MS * 1100u) /* the timeout plus 10% */
#define MAX_CALLS 4000                /* a thread's record */

static rs_server server;

typedef struct worker {
    int index;
    sluice_store *warm, *fresh;
    atomic_int *stalled, *stop;
    uint64_t *took_us; /* each call's latency */
    size_t n, failed;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000000, 60000);
    char key[16];

    snprintf(key, sizeof(key), "d%d", w->index);
    while (!atomic_load(w->stop) && w->n < MAX_CALLS) {
        sluice_store *st = w->index % 2 && atomic_load(w->stalled) ? w->fresh
                                                                   : w->warm;
        sluice_decision d;
        uint64_t t0 = rs_mono_us();
        int rc = sluice_hit(&d, st, &lim, key, strlen(key), 1);

        w->took_us[w->n++] = rs_mono_us() - t0;
        if (rc != SLUICE_OK) {
            w->failed++;
            if (rc != SLUICE_ETIMEDOUT && rc != SLUICE_ECONN)
                CHECK_RC(rc, SLUICE_ETIMEDOUT); /* an outage, nothing else */
        }
        if (rc == SLUICE_OK)
            rs_sleep_ms(2); /* a steady stream while the server answers */
    }
    return NULL;
}

/* The canary: the longest a 1 ms sleep overslept, until 'stop'. */
typedef struct canary {
    atomic_int *stop;
    uint64_t lag_us;
} canary;

static void *sing(void *arg)
{
    canary *c = arg;

    while (!atomic_load(c->stop)) {
        uint64_t t0 = rs_mono_us(), slept;

        rs_sleep_ms(1);
        slept = rs_mono_us() - t0;
        if (slept > 1000 && slept - 1000 > c->lag_us)
            c->lag_us = slept - 1000;
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* One run; answers whether every call kept within the bound. */
static bool stopped_under_load(void)
{
    static worker w[THREADS];
    pthread_t tid[THREADS], canary_tid;
    canary lag = {0};
    atomic_int stalled, stop;
    sluice_store *warm = NULL, *fresh = NULL;
    uint64_t *all, over = 0;
    size_t total = 0, failed = 0;
    char url[128];
    bool within;

    test_context("50 threads, the server stopped for 1.5 s");
    snprintf(url, sizeof(url), "%s?timeout=%d", server.url, TIMEOUT_MS);
    if (!CHECK_OK(sluice_store_open(&warm, url, NULL)) ||
        !CHECK_OK(sluice_store_open(&fresh, url, NULL)))
        exit(1);
    atomic_init(&stalled, 0);
    atomic_init(&stop, 0);
    lag.stop = &stop;
    pthread_create(&canary_tid, NULL, sing, &lag);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.index = i, .warm = warm, .fresh = fresh,
                        .stalled = &stalled, .stop = &stop,
                        .took_us = calloc(MAX_CALLS, sizeof(uint64_t))};
        if (w[i].took_us == NULL)
            exit(2);
        pthread_create(&tid[i], NULL, work, &w[i]);
    }
    rs_sleep_ms(300);
    rs_pause(&server);
    atomic_store(&stalled, 1);
    rs_sleep_ms(1500);
    rs_resume(&server);
    rs_sleep_ms(500);
    atomic_store(&stop, 1);
    pthread_join(canary_tid, NULL);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        total += w[i].n;
        failed += w[i].failed;
    }
    if ((all = malloc(total * sizeof(*all))) == NULL)
        exit(2);
    total = 0;
    for (int i = 0; i < THREADS; i++) {
        memcpy(all + total, w[i].took_us, w[i].n * sizeof(*all));
        total += w[i].n;
        free(w[i].took_us);
    }
    qsort(all, total, sizeof(*all), by_value);
    for (size_t i = 0; i < total; i++)
        over += all[i] > BOUND_US + lag.lag_us;
    printf("  %d threads, timeout=%d, server stopped 1.5 s: %zu calls, %zu "
           "failed; latency p50 %.1f ms, p90 %.1f, p99 %.1f, max %.1f "
           "(bound %.1f: timeout + 10%% + the machine's lag, %.1f); %" PRIu64
           " over the bound\n",
           THREADS, TIMEOUT_MS, total, failed, all[total / 2] / 1000.0,
           all[total * 9 / 10] / 1000.0, all[total * 99 / 100] / 1000.0,
           all[total - 1] / 1000.0, (BOUND_US + lag.lag_us) / 1000.0,
           lag.lag_us / 1000.0, over);
    CHECK(failed > 0); /* the stop was met */
    CHECK(total > failed); /* and calls were answered around it */
    within = all[total - 1] <= BOUND_US + lag.lag_us;
    free(all);
    sluice_store_free(fresh);
    sluice_store_free(warm);
    test_context(NULL);
    return within;
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_deadline: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_deadline: server %s (pid %d)\n", server.url,
           (int)server.pid);
    for (int attempt = 1;; attempt++) {
        if (stopped_under_load())
            break;
        if (attempt == 3) {
            CHECK(!"a call took longer than the timeout + 10% in 3 runs");
            break;
        }
        printf("  NOTE: run %d had a call over the bound: once more\n",
               attempt);
    }
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_deadline");
}
