/*
 * bench_reclaim.c - the embedded store's memory, before and after its keys
 * go idle: does it come back?
 *
 *   sluice_bench_reclaim [--keys N] [--json]
 *
 * One store on a virtual clock (so a window passes at once) takes N
 * distinct keys (default 5,000,000), one admitted hit each, with no key cap.
 * Then the clock moves on until every key is idle, and only ONE key is hit
 * from then on, a thousand calls at a time, until the store holds nothing
 * but that key and its tables have shrunk back (or 100 million calls have
 * passed). The resident set (/proc/self/statm) and the store's own count
 * of bytes are printed at each step, and last after the store is freed.
 *
 * A benchmark: it prints figures and never fails.
 */
#include "bench_util.h"
#include "sluice.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_KEYS 5000000u
#define CALLS_MAX 100000000u
#define WINDOW_MS 1000u

typedef struct step {
    const char *what;
    uint64_t keys, bytes;
    long long rss;
} step;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void take(step *s, const char *what, sluice_store *st)
{
    sluice_store_stats stats;

    memset(&stats, 0, sizeof(stats));
    if (st != NULL)
        sluice_store_stats_get(&stats, st);
    s->what = what;
    s->keys = stats.keys;
    s->bytes = stats.bytes;
    s->rss = rss_now_bytes();
}

/* Hits 'n' distinct keys once each; 0, or -1 on a failed call. */
static int load(sluice_store *st, const sluice_limit *l, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        char key[24];
        sluice_decision d;
        int len = snprintf(key, sizeof(key), "user:%llu",
                           (unsigned long long)i);

        if (sluice_hit(&d, st, l, key, (size_t)len, 1) < 0)
            return -1;
    }
    return 0;
}

/* Hits one key until the store has reclaimed the rest; answers the calls. */
static uint64_t reclaim(sluice_store *st, const sluice_limit *l,
                        sluice_vclock *clock, uint64_t empty_bytes)
{
    sluice_store_stats s;
    uint64_t calls = 0;
    sluice_decision d;

    sluice_vclock_advance(clock, 10 * WINDOW_MS);
    do {
        for (int i = 0; i < 1000; i++)
            sluice_hit(&d, st, l, "hot", 3, 1);
        calls += 1000;
        sluice_vclock_advance(clock, 2 * WINDOW_MS);
        sluice_store_stats_get(&s, st);
    } while ((s.keys > 1 || s.bytes > 4 * empty_bytes) && calls < CALLS_MAX);
    return calls;
}

static void print_text(const step *s, int n, uint64_t keys, uint64_t calls,
                       double secs)
{
    printf("sluice %s embedded store: memory before and after %llu keys go "
           "idle\n(fixed window, one admitted hit a key, no key cap, a "
           "virtual clock)\n\n", SLUICE_VERSION, (unsigned long long)keys);
    printf("  %-44s %12s %14s %14s\n", "step", "keys", "store bytes",
           "resident set");
    for (int i = 0; i < n; i++) {
        printf("  %-44s %12llu %14llu ", s[i].what,
               (unsigned long long)s[i].keys, (unsigned long long)s[i].bytes);
        if (s[i].rss < 0)
            printf("%14s\n", "n/a");
        else
            printf("%11.1f MB\n", (double)s[i].rss / 1e6);
    }
    printf("\nreclaimed by %llu calls on one key in %.2f s; resident set "
           "after / full: %.2f\n", (unsigned long long)calls, secs,
           s[1].rss > 0 ? (double)s[2].rss / (double)s[1].rss : 0.0);
}

static void print_json(const step *s, int n, uint64_t keys, uint64_t calls,
                       double secs)
{
    printf("{\n  \"keys\": %llu,\n  \"reclaim_calls\": %llu,\n  "
           "\"reclaim_seconds\": %.3f,\n  \"steps\": [\n",
           (unsigned long long)keys, (unsigned long long)calls, secs);
    for (int i = 0; i < n; i++)
        printf("    {\"step\": \"%s\", \"keys\": %llu, \"store_bytes\": %llu, "
               "\"rss_bytes\": %lld}%s\n", s[i].what,
               (unsigned long long)s[i].keys, (unsigned long long)s[i].bytes,
               s[i].rss, i + 1 < n ? "," : "");
    printf("  ]\n}\n");
}

static int options(int argc, char **argv, uint64_t *keys, bool *json)
{
    for (int i = 1; i < argc; i++) {
        char *end;

        if (strcmp(argv[i], "--json") == 0) {
            *json = true;
        } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
            *keys = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || *keys < 1 || *keys > 100000000u) {
                fprintf(stderr, "sluice_bench_reclaim: --keys wants 1.."
                        "100000000\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: sluice_bench_reclaim [--keys N] "
                    "[--json]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 10, WINDOW_MS);
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    uint64_t keys = DEFAULT_KEYS, calls;
    sluice_vclock *clock = NULL;
    sluice_store *st = NULL;
    bool json = false;
    step s[4];
    double t0;
    int rc;

    if ((rc = options(argc, argv, &keys, &json)) >= 0)
        return rc;
    if (sluice_vclock_new(&clock, 1000000) < 0)
        return 1;
    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = clock;
    o.max_keys = (size_t)-1; /* no cap */
    if (sluice_store_open(&st, "mem://", &o) < 0)
        return 1;
    take(&s[0], "empty store", st);
    if (load(st, &l, keys) < 0) {
        fprintf(stderr, "sluice_bench_reclaim: %s\n", sluice_last_error());
        return 1;
    }
    take(&s[1], "every key counting", st);
    t0 = now_s();
    calls = reclaim(st, &l, clock, s[0].bytes);
    take(&s[2], "all idle, then calls on one key", st);
    sluice_store_free(st);
    take(&s[3], "store freed", NULL);
    if (json)
        print_json(s, 4, keys, calls, now_s() - t0);
    else
        print_text(s, 4, keys, calls, now_s() - t0);
    sluice_vclock_free(clock);
    return 0;
}
