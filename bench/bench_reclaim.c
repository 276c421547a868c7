/*
 * bench_reclaim.c - the embedded store's memory, before and after its keys
 * go idle: does it come back?
 *
 *   sluice_bench_reclaim [--keys N] [--algo NAME] [--json]
 *
 * For each algorithm (or the one named), one store on a virtual clock (so a
 * window passes at once) takes N distinct keys (default 5,000,000), one
 * admitted hit each, with no key cap. Then the clock moves on until every
 * key is idle, and only ONE key is hit from then on, a thousand calls at a
 * time, until the store holds nothing but that key and its tables have
 * shrunk back (or 100 million calls have passed), and then IDLE_CALLS more
 * (what was retired last is freed a grace period later). The resident set
 * (/proc/self/statm) and the store's own count of bytes are printed at each
 * step, and last after the store is freed; the resident set after idle is
 * printed beside its target, TARGET_IDLE_MB.
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
#define IDLE_CALLS 1000000u
#define WINDOW_MS 1000u
#define TARGET_IDLE_MB 5.0

typedef struct step {
    const char *what;
    uint64_t keys, bytes;
    long long rss;
} step;

/* One algorithm's run: its steps, and the calls and time the reclaim took. */
typedef struct run {
    sluice_algo algo;
    step s[4];
    uint64_t calls;
    double secs;
} run;

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

/* Hits one key until the store has reclaimed the rest, then IDLE_CALLS
   more; answers the calls. */
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
        sluice_vclock_advance(clock, 3 * WINDOW_MS);
        sluice_store_stats_get(&s, st);
    } while ((s.keys > 1 || s.bytes > 4 * empty_bytes) && calls < CALLS_MAX);
    for (uint64_t i = 0; i < IDLE_CALLS; i++)
        sluice_hit(&d, st, l, "hot", 3, 1);
    return calls + IDLE_CALLS;
}

/* One algorithm's run on a store of its own; 0, or 1 on a failure. */
static int run_one(run *r, uint64_t keys)
{
    sluice_limit l = SLUICE_LIMIT(r->algo, 10, WINDOW_MS);
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = NULL;
    sluice_store *st = NULL;
    double t0;

    if (sluice_vclock_new(&clock, 1000000) < 0)
        return 1;
    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = clock;
    o.max_keys = SLUICE_NO_KEY_CAP;
    if (sluice_store_open(&st, "mem://", &o) < 0) {
        sluice_vclock_free(clock);
        return 1;
    }
    take(&r->s[0], "empty store", st);
    if (load(st, &l, keys) < 0) {
        fprintf(stderr, "sluice_bench_reclaim: %s\n", sluice_last_error());
        sluice_store_free(st);
        sluice_vclock_free(clock);
        return 1;
    }
    take(&r->s[1], "every key counting", st);
    t0 = now_s();
    r->calls = reclaim(st, &l, clock, r->s[0].bytes);
    r->secs = now_s() - t0;
    take(&r->s[2], "all idle, then calls on one key", st);
    sluice_store_free(st);
    take(&r->s[3], "store freed", NULL);
    sluice_vclock_free(clock);
    return 0;
}

static void print_text(const run *r, int n, uint64_t keys)
{
    printf("sluice %s embedded store: memory before and after %llu keys go "
           "idle\n(one admitted hit a key, no key cap, a virtual clock; "
           "each algorithm on a store of its own)\n", SLUICE_VERSION,
           (unsigned long long)keys);
    for (int a = 0; a < n; a++) {
        const step *s = r[a].s;

        printf("\n%s\n  %-44s %12s %14s %14s\n",
               sluice_algo_name(r[a].algo), "step", "keys", "store bytes",
               "resident set");
        for (int i = 0; i < 4; i++) {
            printf("  %-44s %12llu %14llu ", s[i].what,
                   (unsigned long long)s[i].keys,
                   (unsigned long long)s[i].bytes);
            if (s[i].rss < 0)
                printf("%14s\n", "n/a");
            else
                printf("%11.1f MB\n", (double)s[i].rss / 1e6);
        }
        printf("  reclaimed by %llu calls on one key in %.2f s\n",
               (unsigned long long)r[a].calls, r[a].secs);
    }
    printf("\nResident set after idle (target <= %.0f MB after %llu keys)\n",
           TARGET_IDLE_MB, (unsigned long long)keys);
    for (int a = 0; a < n; a++) {
        double mb = (double)r[a].s[2].rss / 1e6;

        if (r[a].s[2].rss < 0)
            printf("  %-16s n/a\n", sluice_algo_name(r[a].algo));
        else
            printf("  %-16s %6.1f MB (with them %7.1f MB) - target <= %.0f "
                   "MB: %s\n", sluice_algo_name(r[a].algo), mb,
                   (double)r[a].s[1].rss / 1e6, TARGET_IDLE_MB,
                   mb <= TARGET_IDLE_MB ? "met" : "not met");
    }
}

static void print_json(const run *r, int n, uint64_t keys)
{
    printf("{\n  \"keys\": %llu,\n  \"target_idle_mb\": %.1f,\n  "
           "\"algorithms\": [\n", (unsigned long long)keys, TARGET_IDLE_MB);
    for (int a = 0; a < n; a++) {
        printf("    {\"algo\": \"%s\", \"reclaim_calls\": %llu, "
               "\"reclaim_seconds\": %.3f, \"steps\": [\n",
               sluice_algo_name(r[a].algo), (unsigned long long)r[a].calls,
               r[a].secs);
        for (int i = 0; i < 4; i++)
            printf("      {\"step\": \"%s\", \"keys\": %llu, "
                   "\"store_bytes\": %llu, \"rss_bytes\": %lld}%s\n",
                   r[a].s[i].what, (unsigned long long)r[a].s[i].keys,
                   (unsigned long long)r[a].s[i].bytes, r[a].s[i].rss,
                   i + 1 < 4 ? "," : "");
        printf("    ]}%s\n", a + 1 < n ? "," : "");
    }
    printf("  ]\n}\n");
}

static int options(int argc, char **argv, uint64_t *keys, int *algo,
                   bool *json)
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
        } else if (strcmp(argv[i], "--algo") == 0 && i + 1 < argc) {
            sluice_algo a;

            if (sluice_algo_parse(&a, argv[++i]) < 0) {
                fprintf(stderr, "sluice_bench_reclaim: --algo: %s\n",
                        sluice_last_error());
                return 2;
            }
            *algo = (int)a;
        } else {
            fprintf(stderr, "usage: sluice_bench_reclaim [--keys N] "
                    "[--algo NAME] [--json]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    run r[16];
    uint64_t keys = DEFAULT_KEYS;
    bool json = false;
    int algo = -1, n = 0, rc;

    if ((rc = options(argc, argv, &keys, &algo, &json)) >= 0)
        return rc;
    for (unsigned a = 0; a < sluice_algo_count() && n < 16; a++) {
        if (algo >= 0 && (unsigned)algo != a)
            continue;
        r[n].algo = (sluice_algo)a;
        if (run_one(&r[n], keys) != 0)
            return 1;
        n++;
    }
    if (json)
        print_json(r, n, keys);
    else
        print_text(r, n, keys);
    return 0;
}
