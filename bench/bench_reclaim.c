/*
 * bench_reclaim.c - the embedded store's memory, before and after its keys
 * go idle: does it come back?
 *
 *   sluice_bench_reclaim [--keys N] [--algo NAME] [--cap-only] [--json]
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
 * printed beside its target, TARGET_IDLE_MB. Each call of the reclaim is
 * timed: the longest one is printed (and how many took over a ms) beside
 * the heap's trims, which this program's malloc_trim() times on their way
 * to the C library's: how many, the longest, and how many of them ran on
 * the thread that calls the store (inside a call) rather than another.
 *
 * Then new keys at the key cap: a store capped at a million keys (the
 * default), and one at 100,000, is filled with live keys (the fixed window,
 * an hour), and REFUSALS new keys are hit, the virtual clock a millisecond
 * on before each (a store-wide sweep was once allowed a millisecond apart,
 * so each of these calls swept it all). Each is refused with SLUICE_EFULL;
 * the time per refusal is printed beside TARGET_CAP_US. --cap-only runs
 * this part alone.
 *
 * A benchmark: it prints figures and never fails.
 */
#include "bench_options.h"
#include "bench_util.h"
#include "sluice.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define DEFAULT_KEYS 5000000u
#define CALLS_MAX 100000000u
#define IDLE_CALLS 1000000u
#define WINDOW_MS 1000u
#define TARGET_IDLE_MB 5.0
#define REFUSALS 20000u
#define TARGET_CAP_US 10.0

typedef struct step {
    const char *what;
    uint64_t keys, bytes;
    long long rss;
} step;

/* The heap's trims while a store ran: how many, the longest, and how many
   ran on the thread that calls the store. */
typedef struct trims {
    uint64_t n, on_caller;
    double longest_ms;
} trims;

/*
 * One algorithm's run: its steps, the calls and time the reclaim took, its
 * longest call and the calls over a ms, and the trims.
 */
typedef struct run {
    sluice_algo algo;
    step s[4];
    uint64_t calls, calls_over_ms;
    double secs, call_max_ms;
    trims t;
} run;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- The heap's trims ----------------------------------------------------- */

static pthread_t caller; /* the thread that calls the stores */
static atomic_ullong trim_n, trim_on_caller, trim_longest_ns;

#ifdef __GLIBC__
static int (*libc_trim)(size_t);

/*
 * This program's malloc_trim() comes before the C library's, for the store
 * too: it times each trim, notes whether it ran on the stores' caller, and
 * trims as the library's does.
 */
int malloc_trim(size_t pad)
{
    double t0 = now_s();
    int r = libc_trim != NULL ? libc_trim(pad) : 0;
    unsigned long long ns = (unsigned long long)((now_s() - t0) * 1e9);
    unsigned long long most = atomic_load(&trim_longest_ns);

    while (ns > most &&
           !atomic_compare_exchange_weak(&trim_longest_ns, &most, ns))
        ;
    atomic_fetch_add(&trim_n, 1);
    if (pthread_equal(pthread_self(), caller))
        atomic_fetch_add(&trim_on_caller, 1);
    return r;
}
#endif

/* Finds the C library's malloc_trim() for the one above. */
static void trims_init(void)
{
    caller = pthread_self();
#ifdef __GLIBC__
    *(void **)&libc_trim = dlsym(RTLD_NEXT, "malloc_trim");
#endif
}

/* The trims since the last call (a store's free has waited for its own). */
static trims trims_take(void)
{
    trims t;

    t.n = atomic_exchange(&trim_n, 0);
    t.on_caller = atomic_exchange(&trim_on_caller, 0);
    t.longest_ms = (double)atomic_exchange(&trim_longest_ns, 0) / 1e6;
    return t;
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

/* One hit on the hot key, timed into the run's longest call. */
static void hot_hit(run *r, sluice_store *st, const sluice_limit *l)
{
    sluice_decision d;
    double t0 = now_s(), ms;

    sluice_hit(&d, st, l, "hot", 3, 1);
    ms = (now_s() - t0) * 1e3;
    if (ms > r->call_max_ms)
        r->call_max_ms = ms;
    r->calls_over_ms += ms > 1.0;
}

/* Hits one key until the store has reclaimed the rest, then IDLE_CALLS
   more; counts the calls in the run, and times each. */
static void reclaim(run *r, sluice_store *st, const sluice_limit *l,
                    sluice_vclock *clock, uint64_t empty_bytes)
{
    sluice_store_stats s;
    uint64_t calls = 0;

    sluice_vclock_advance(clock, 10 * WINDOW_MS);
    do {
        for (int i = 0; i < 1000; i++)
            hot_hit(r, st, l);
        calls += 1000;
        sluice_vclock_advance(clock, 3 * WINDOW_MS);
        sluice_store_stats_get(&s, st);
    } while ((s.keys > 1 || s.bytes > 4 * empty_bytes) && calls < CALLS_MAX);
    for (uint64_t i = 0; i < IDLE_CALLS; i++)
        hot_hit(r, st, l);
    r->calls = calls + IDLE_CALLS;
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
    trims_take();
    r->call_max_ms = 0;
    r->calls_over_ms = 0;
    t0 = now_s();
    reclaim(r, st, &l, clock, r->s[0].bytes);
    r->secs = now_s() - t0;
    take(&r->s[2], "all idle, then calls on one key", st);
    sluice_store_free(st);
    r->t = trims_take();
    take(&r->s[3], "store freed", NULL);
    sluice_vclock_free(clock);
    return 0;
}

/* New keys at a cap of 'cap': the time per refusal in µs ('*us'); 0, or 1
   on a failure (a call that is not SLUICE_EFULL included). */
static int cap_run(size_t cap, double *us)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 10, 3600000);
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = NULL;
    sluice_store *st = NULL;
    sluice_decision d;
    double t0;
    int rc = 0;

    if (sluice_vclock_new(&clock, 1000000) < 0)
        return 1;
    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = clock;
    o.max_keys = cap;
    if (sluice_store_open(&st, "mem://", &o) < 0 || load(st, &l, cap) < 0) {
        fprintf(stderr, "sluice_bench_reclaim: %s\n", sluice_last_error());
        rc = 1;
    }
    t0 = now_s();
    for (unsigned i = 0; i < REFUSALS && rc == 0; i++) {
        char key[24];
        int len = snprintf(key, sizeof(key), "new:%u", i);

        sluice_vclock_advance(clock, 1);
        if (sluice_hit(&d, st, &l, key, (size_t)len, 1) != SLUICE_EFULL) {
            fprintf(stderr, "sluice_bench_reclaim: a new key at the cap was "
                    "not refused with SLUICE_EFULL\n");
            rc = 1;
        }
    }
    *us = (now_s() - t0) / REFUSALS * 1e6;
    sluice_store_free(st);
    sluice_vclock_free(clock);
    return rc;
}

static void print_cap(const size_t *caps, const double *us, int n)
{
    printf("\nNew keys at the key cap (every key live; %u new keys a ms "
           "apart, each refused with SLUICE_EFULL)\n", REFUSALS);
    for (int i = 0; i < n; i++)
        printf("  cap %8zu: %8.2f us per refused new key - target <= %.0f "
               "us: %s\n", caps[i], us[i], TARGET_CAP_US,
               us[i] <= TARGET_CAP_US ? "met" : "not met");
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
        printf("  longest call %.3f ms (%llu calls over 1 ms); %llu trims, "
               "the longest %.1f ms, %llu of them inside a call\n",
               r[a].call_max_ms, (unsigned long long)r[a].calls_over_ms,
               (unsigned long long)r[a].t.n, r[a].t.longest_ms,
               (unsigned long long)r[a].t.on_caller);
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

static void print_json(const run *r, int n, uint64_t keys,
                       const size_t *caps, const double *us, int ncaps)
{
    printf("{\n  \"keys\": %llu,\n  \"target_idle_mb\": %.1f,\n  "
           "\"algorithms\": [\n", (unsigned long long)keys, TARGET_IDLE_MB);
    for (int a = 0; a < n; a++) {
        printf("    {\"algo\": \"%s\", \"reclaim_calls\": %llu, "
               "\"reclaim_seconds\": %.3f, \"call_max_ms\": %.3f, "
               "\"calls_over_1ms\": %llu, \"trims\": %llu, "
               "\"trim_max_ms\": %.1f, \"trims_in_a_call\": %llu, "
               "\"steps\": [\n",
               sluice_algo_name(r[a].algo), (unsigned long long)r[a].calls,
               r[a].secs, r[a].call_max_ms,
               (unsigned long long)r[a].calls_over_ms,
               (unsigned long long)r[a].t.n, r[a].t.longest_ms,
               (unsigned long long)r[a].t.on_caller);
        for (int i = 0; i < 4; i++)
            printf("      {\"step\": \"%s\", \"keys\": %llu, "
                   "\"store_bytes\": %llu, \"rss_bytes\": %lld}%s\n",
                   r[a].s[i].what, (unsigned long long)r[a].s[i].keys,
                   (unsigned long long)r[a].s[i].bytes, r[a].s[i].rss,
                   i + 1 < 4 ? "," : "");
        printf("    ]}%s\n", a + 1 < n ? "," : "");
    }
    printf("  ],\n  \"target_cap_us\": %.1f,\n  \"caps\": [\n",
           TARGET_CAP_US);
    for (int i = 0; i < ncaps; i++)
        printf("    {\"cap\": %zu, \"refusals\": %u, "
               "\"us_per_refusal\": %.2f}%s\n", caps[i], REFUSALS, us[i],
               i + 1 < ncaps ? "," : "");
    printf("  ]\n}\n");
}

#define PROG "sluice_bench_reclaim"

static const char usage[] =
    "usage: " PROG " [--keys N] [--algo NAME] [--cap-only] [--json]\n"
    "\n"
    "The embedded store's memory before and after its keys go idle: N keys\n"
    "with one hit each, then the clock moves on and one key is hit until the\n"
    "store has given the rest back; prints the resident set and the store's\n"
    "bytes at each step, the longest call and the heap's trims. Then the key\n"
    "cap: the time to refuse a new key (SLUICE_EFULL) in a full store of a\n"
    "million keys, and of 100000. Needs nothing but this build (no server),\n"
    "and memory for N keys, 100 to 200 bytes each (about 1 GB at the\n"
    "default N). Benchmarks never fail: the exit status is 0 whatever the\n"
    "figures.\n"
    "\n"
    "  --keys N      keys made, 1..100000000 (default 5000000)\n"
    "  --algo NAME   only this algorithm (default: each in turn)\n"
    "  --cap-only    only the key cap's part\n"
    "  --json        the results as JSON on standard output\n"
    "  --help        show this text\n";

static int options(int argc, char **argv, uint64_t *keys, int *algo,
                   bool *cap_only, bool *json)
{
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;
        char *end;

        if (strcmp(argv[i], "--json") == 0) {
            *json = true;
        } else if (strcmp(argv[i], "--cap-only") == 0) {
            *cap_only = true;
        } else if ((v = option_value(argc, argv, &i, "--keys", &missing))) {
            *keys = strtoull(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end != '\0' || *keys < 1 ||
                *keys > 100000000u)
                return bench_usage_error(PROG, usage, "--keys wants "
                                         "1..100000000, not '%s'", v);
        } else if ((v = option_value(argc, argv, &i, "--algo", &missing))) {
            sluice_algo a;

            if (sluice_algo_parse(&a, v) < 0)
                return bench_usage_error(PROG, usage, "--algo: %s",
                                         sluice_last_error());
            *algo = (int)a;
        } else {
            return bench_usage_error(PROG, usage, "%s '%s'", missing
                                         ? "a value is missing after"
                                         : "unknown option", argv[i]);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    static const size_t caps[] = {1000000, 100000};
    double us[2];
    run r[16];
    uint64_t keys = DEFAULT_KEYS;
    bool json = false, cap_only = false;
    int algo = -1, n = 0, rc;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if ((rc = options(argc, argv, &keys, &algo, &cap_only, &json)) >= 0)
        return rc;
    trims_init();
    for (unsigned a = 0; a < sluice_algo_count() && n < 16 && !cap_only;
         a++) {
        if (algo >= 0 && (unsigned)algo != a)
            continue;
        r[n].algo = (sluice_algo)a;
        if (run_one(&r[n], keys) != 0)
            return 1;
        n++;
    }
    for (int i = 0; i < 2; i++)
        if (cap_run(caps[i], &us[i]) != 0)
            return 1;
    if (json) {
        print_json(r, n, keys, caps, us, 2);
        return 0;
    }
    if (n > 0)
        print_text(r, n, keys);
    print_cap(caps, us, 2);
    return 0;
}
