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
 * A key takes at most KEY_CALLS calls, then the next one is used: the
 * compact log holds at most 16384 units per window, and a refusal would
 * stop the run.
 *
 *   ./build-bench/bench/sluice_bench_hit_all [--calls N]  (default 20000)
 */
#include "server.h"
#include "sluice.h"
#include "bench_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_CALLS 20000L
#define MAX_CALLS 100000000L
#define KEY_CALLS 10000L /* under the compact log's largest max, 16384 */
#define PROG "sluice_bench_hit_all"

static const char usage[] =
    "usage: " PROG " [--calls N]\n"
    "\n"
    "What one sluice_hit_all() over n limits costs (n = 1, 2, 4, 8, cycling\n"
    "through the algorithms, every call admitted) beside the n sluice_hit()\n"
    "calls that check the same limits one by one: calls a second and us per\n"
    "call of each, on the embedded store (10 x N calls) and then on a private\n"
    "redis-server it starts on a free loopback port (N calls). Needs\n"
    "redis-server on PATH (or $SLUICE_TEST_SERVER). Benchmarks never fail:\n"
    "the exit status is 0 whatever the figures (1 if the store fails).\n"
    "\n"
    "  --calls N   calls per row on the server, 1..100000000 (default 20000)\n"
    "  --help      show this text\n";

/* Reads the options into '*calls': -1 if they are good, else the exit
   status. */
static int options(int argc, char **argv, long *calls)
{
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v = option_value(argc, argv, &i, "--calls", &missing);
        char *end;

        if (v != NULL) {
            *calls = strtol(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end != '\0' || *calls < 1 ||
                *calls > MAX_CALLS)
                return bench_usage_error(PROG, usage, "--calls wants 1..%ld, "
                                         "not '%s'", MAX_CALLS, v);
        } else {
            return bench_usage_error(PROG, usage, "%s '%s'", missing
                                         ? "a value is missing after"
                                         : "unknown option", argv[i]);
        }
    }
    return -1;
}

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
        char base[64];

        snprintf(base, sizeof(base), "%s.%ld", id, c / KEY_CALLS);
        if (all) {
            rc = sluice_hit_all(&d, NULL, st, l, n, base, strlen(base), 1);
        } else {
            for (size_t i = 0; i < n && rc == SLUICE_OK; i++) {
                char key[96];

                /* A key per limit, as one must without hit_all. */
                snprintf(key, sizeof(key), "%s:%zu", base, i);
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

    for (size_t i = 0; i < 8; i++) {
        l[i] = SLUICE_LIMIT((sluice_algo)(i % sluice_algo_count()),
                            1000000, 3600000 * (uint64_t)(i + 1));
        /* An algorithm with a smaller bound (the compact log's 16384) gets
           KEY_CALLS, all that one key is asked. */
        if (sluice_limit_check(&l[i]) != SLUICE_OK)
            l[i].max = KEY_CALLS;
    }
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
    long calls = DEFAULT_CALLS;
    rs_server server;
    sluice_store *st;
    int status;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if ((status = options(argc, argv, &calls)) >= 0)
        return status;
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
