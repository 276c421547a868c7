/*
 * bench_hit_all.c - what one sluice_hit_all() over n limits costs, beside
 * the n sluice_hit() calls that would check the same limits one by one
 * (which are not all or nothing: the point is what atomicity costs, or
 * saves).
 *
 * On a private redis-server (started with sluice_launcher) and on the
 * embedded store, one thread, for n = 1, 2, 4, 8: the limits cycle through
 * the algorithms (fixed, sliding-counter, sliding-log, ...), one-hour
 * windows of their own and a max no run reaches, so every call is admitted
 * and does the whole work. Prints, for each, calls a second and the
 * microseconds of one call of each kind (a hit_all, and n hits).
 *
 *   ./build-bench/bench/sluice_bench_hit_all [--calls N]  (default 20000)
 */
#include "server.h"
#include "sluice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds for 'calls' rounds on id 'id': one hit_all, or n hits. */
static double run(sluice_store *st, const sluice_limit *l, size_t n,
                  const char *id, int all, long calls)
{
    double t0 = now_s();

    for (long c = 0; c < calls; c++) {
        sluice_decision d;
        int rc = SLUICE_OK;

        if (all) {
            rc = sluice_hit_all(&d, NULL, st, l, n, id, strlen(id), 1);
        } else {
            for (size_t i = 0; i < n && rc == SLUICE_OK; i++) {
                char key[64];

                /* A key per limit, as one must without hit_all. */
                snprintf(key, sizeof(key), "%s:%zu", id, i);
                rc = sluice_hit(&d, st, &l[i], key, strlen(key), 1);
            }
        }
        if (rc != SLUICE_OK || !d.allowed) {
            fprintf(stderr, "bench_hit_all: %s\n", rc != SLUICE_OK
                                                       ? sluice_last_error()
                                                       : "refused");
            exit(1);
        }
    }
    return now_s() - t0;
}

static void bench_store(const char *kind, sluice_store *st, long calls)
{
    static const size_t ns[] = {1, 2, 4, 8};
    sluice_limit l[8];

    for (size_t i = 0; i < 8; i++)
        l[i] = SLUICE_LIMIT((sluice_algo)(i % sluice_algo_count()),
                            1000000, 3600000 * (uint64_t)(i + 1));
    printf("%s store, %ld calls each, one thread:\n", kind, calls);
    printf("  %2s  %14s  %10s  %14s  %10s  %6s\n", "n", "hit_all/s",
           "us/call", "n x hit /s", "us/round", "ratio");
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        char id[32];
        double ta, th;

        snprintf(id, sizeof(id), "bench%zu", ns[k]);
        ta = run(st, l, ns[k], id, 1, calls);
        th = run(st, l, ns[k], id, 0, calls);
        printf("  %2zu  %14.0f  %10.2f  %14.0f  %10.2f  %6.2f\n", ns[k],
               calls / ta, ta / calls * 1e6, calls / th, th / calls * 1e6,
               th / ta);
    }
}

int main(int argc, char **argv)
{
    long calls = 20000;
    rs_server server;
    sluice_store *st;

    if (argc == 3 && strcmp(argv[1], "--calls") == 0)
        calls = atol(argv[2]);
    if (calls <= 0) {
        fprintf(stderr, "usage: sluice_bench_hit_all [--calls N]\n");
        return 2;
    }
    if (sluice_store_open(&st, "mem://", NULL) != SLUICE_OK)
        return 1;
    bench_store("embedded", st, calls * 10);
    sluice_store_free(st);
    if (rs_start(&server, NULL) < 0)
        return 1;
    if (sluice_store_open(&st, server.url, NULL) != SLUICE_OK) {
        fprintf(stderr, "bench_hit_all: %s\n", sluice_last_error());
        rs_stop(&server);
        return 1;
    }
    bench_store("server", st, calls);
    sluice_store_free(st);
    rs_stop(&server);
    return 0;
}
