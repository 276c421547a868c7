/*
 * bench_mem.c - how fast, and how large, the embedded store ("mem://") is.
 *
 * Every case calls sluice_hit() in a tight loop on a store opened with the
 * defaults, so the monotonic clock (sluice_clock_monotonic_ms) is read on
 * every call, as it is in production. The cases, for each algorithm:
 *
 *   hot key, 1 thread             one key, a limit that admits everything
 *   hot key, 2 threads            each thread on its own key
 *   hot key, 2 threads, same key  both threads on one key (contended)
 *   refused, 1 thread             one key over a small limit: nearly every
 *                                 hit is refused, which is the attack path
 *   refused, 2 threads, same key  the same, from two threads
 *   100,000 keys, 1 thread        keys chosen by a cheap PRNG
 *   100,000 keys, 2 threads       each thread on 100,000 keys of its own
 *
 * Method. Keys are strings like "user:12345", made before any timing. Each
 * thread first touches its own keys (so entries come from its own malloc
 * arena, as in a server whose threads own their requests), waits at a barrier,
 * then calls sluice_hit() until its deadline. The monotonic clock is read
 * once per CHECK_EVERY calls, so the loop measures the store and not itself.
 * A case's rate is the sum over its threads of calls / elapsed.
 *
 * Noise. Since the machine may be shared, every case runs 'repeats' times
 * and the median is reported. The runs are interleaved (pass 1 runs every
 * case once, then pass 2, ...), so a slow spell of the machine spoils one run
 * of several cases, which the median drops, rather than every run of one
 * case. Each run has a fresh store, with a fresh hash seed, so two keys that
 * happen to share a lock in one run do not in the others. The "cpu" column
 * (the threads' CPU time over their elapsed time) tells a row measured
 * without a whole CPU per thread, and the "cpu ns" column (the threads' CPU
 * time per call) is the figure a busy machine moves least.
 *
 * Reference. After each pass, the time of one load from memory (a chase of
 * dependent loads over 64 MiB, memory_latency_ns()), so that the 100,000-key
 * rows, which mostly pay for what misses the caches, stand beside what one
 * miss costs on this machine at this moment; the lock-free path's targets
 * (a hot key, 100,000 keys, one key from two threads) are printed with it.
 *
 * Memory: stats bytes per key after one hit on each of 100,000 keys, the
 * growth of the resident set per key (which adds malloc's overhead), and the
 * process's peak resident set.
 *
 * Benchmarks measure; they never pass or fail. The program exits 0 whether a
 * target is met or not, 1 if the store fails, and 2 on a bad option.
 */
#include "sluice.h"
#include "bench_options.h"
#include "bench_keys.h"
#include "bench_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MANY_KEYS 100000u
#define CHECK_EVERY 1024u   /* calls between two reads of the clock */
#define WARM_HITS 100000u   /* calls on a hot key before timing */
#define MAX_THREADS 2u
#define MAX_REPEATS 99u
#define DEFAULT_SECONDS 1.0
#define DEFAULT_REPEATS 3u
#define WINDOW_MS 1000u
/* Admitting limits: 10^12 per second is never reached. It also keeps the
   sliding counter's max x window_ms (10^15) under its bound of 2^53. */
#define ADMIT_MAX 1000000000000ULL
/* Refusing limits: the first REFUSE_MAX hits of a window pass, then none. */
#define REFUSE_MAX 10u

/* The targets the figures are compared with. */
#define TARGET_FIXED_HOT_PER_S 10e6
#define TARGET_FIXED_HOT_NS 100.0
#define TARGET_TWO_THREAD_RATIO 1.6
/* The lock-free path's (issue 13): a hot key, 100,000 keys, one key from
   two threads. */
#define TARGET_FAST_HOT_NS 40.0
#define TARGET_FAST_MANY_NS 200.0
#define TARGET_FAST_SAME_RATIO 1.0

/* The memory load the 100,000-key rows are set beside: a chase of
   dependent loads over LATENCY_BYTES, far more than the caches hold. */
#define LATENCY_BYTES ((size_t)64 << 20)
#define LATENCY_LOADS 2000000u

/* ---- Cases ------------------------------------------------------------------ */

typedef struct bench_case {
    const char *id;    /* stable name, for --json */
    const char *label; /* for the table */
    unsigned threads;
    size_t nkeys;      /* keys per key set */
    bool same_keys;    /* every thread on the first key set (contended) */
    bool refuse;       /* a small max, so nearly every hit is refused */
} bench_case;

enum {
    HOT_1T,
    HOT_2T,
    HOT_2T_SAME,
    REFUSED_1T,
    REFUSED_2T_SAME,
    MANY_1T,
    MANY_2T,
    NCASES
};

static const bench_case cases[NCASES] = {
    [HOT_1T] = {"hot_1t", "hot key, 1 thread", 1, 1, false, false},
    [HOT_2T] = {"hot_2t_distinct", "hot key, 2 threads, a key each", 2, 1,
                false, false},
    [HOT_2T_SAME] = {"hot_2t_same", "hot key, 2 threads, same key", 2, 1,
                     true, false},
    [REFUSED_1T] = {"refused_1t", "refused hot key, 1 thread", 1, 1, false,
                    true},
    [REFUSED_2T_SAME] = {"refused_2t_same", "refused hot key, 2 thr, same key",
                         2, 1, true, true},
    [MANY_1T] = {"many_1t", "100,000 keys, 1 thread", 1, MANY_KEYS, false,
                 false},
    [MANY_2T] = {"many_2t_distinct", "100,000 keys each, 2 threads", 2,
                 MANY_KEYS, false, false},
};

/* What one case measured: a rate per repeat and their median. */
typedef struct case_result {
    double runs[MAX_REPEATS]; /* decisions per second, all threads */
    double cpu_runs[MAX_REPEATS]; /* ns of thread CPU time per call */
    uint64_t calls;           /* over all runs */
    uint64_t admitted_calls;  /* over all runs */
    double cpu_s, wall_s;     /* over all runs and threads */
    double median;            /* decisions per second */
    double ns_per_call;       /* one thread's time per call, at the median */
    double cpu_ns;            /* median of cpu_runs */
    double admitted;          /* fraction of decisions admitted, all runs */
    double cpu_share;         /* CPU time / elapsed time, all threads */
} case_result;

/* ---- Timing ----------------------------------------------------------------- */

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* One thread of a case: its inputs, then what it measured. */
typedef struct worker {
    sluice_store *store;
    const sluice_limit *limit;
    const keyset *keys;
    uint64_t rng;
    double seconds;
    pthread_barrier_t *start;
    uint64_t calls;
    uint64_t admitted;
    double elapsed_s;
    double cpu_s; /* the thread's CPU time over 'elapsed_s' */
    int err;
} worker;

/*
 * Touches every key of the worker's set once (and a hot key WARM_HITS
 * times), then, after the barrier, calls sluice_hit() until 'seconds' have
 * passed. The clock is read once per CHECK_EVERY calls, and the next key is
 * chosen, and prefetched, one call ahead.
 */
static void *worker_main(void *arg)
{
    worker *w = arg;
    const keyset *ks = w->keys;
    size_t warm = ks->n > WARM_HITS ? ks->n : WARM_HITS;
    uint64_t calls = 0, admitted = 0;
    size_t next = 0;
    sluice_decision d;
    double start, now, cpu_start;
    int err = SLUICE_OK;

    for (size_t i = 0; i < warm && err == SLUICE_OK; i++) {
        size_t k = i % ks->n;

        err = sluice_hit(&d, w->store, w->limit, key_at(ks, k),
                         key_len(ks, k), 1);
    }
    /* Everyone waits here, even after a failure, so no thread is left
       waiting for a partner that has already left. */
    pthread_barrier_wait(w->start);
    cpu_start = clock_s(CLOCK_THREAD_CPUTIME_ID);
    start = now = now_s();
    while (err == SLUICE_OK && now - start < w->seconds) {
        for (unsigned i = 0; i < CHECK_EVERY; i++) {
            size_t k = next;

            if (ks->n > 1) {
                next = pick_key(&w->rng, ks->n);
                key_prefetch(ks, next);
            }
            err = sluice_hit(&d, w->store, w->limit, key_at(ks, k),
                             key_len(ks, k), 1);
            if (err != SLUICE_OK)
                break;
            admitted += (uint64_t)d.allowed;
        }
        calls += CHECK_EVERY;
        now = now_s();
    }
    w->calls = calls;
    w->admitted = admitted;
    w->elapsed_s = now - start;
    w->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    w->err = err;
    return NULL;
}

/*
 * Runs case 'c' once for 'algo' on a fresh store, as run number 'run' of
 * 'r'. 'sets' holds one key set per thread, of the case's size. Records the
 * rate (decisions per second over all threads) and adds up the counts.
 */
static int run_once(case_result *r, unsigned run, sluice_algo algo,
                    const bench_case *c, const keyset *sets, double seconds)
{
    sluice_limit limit = SLUICE_LIMIT(
        algo, c->refuse ? REFUSE_MAX : bench_max_for(algo, ADMIT_MAX),
        WINDOW_MS);
    worker w[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    pthread_barrier_t start;
    sluice_store *store;
    double run_cpu_s = 0, run_calls = 0;
    int err;

    if ((err = sluice_store_open(&store, "mem://", NULL)) < 0) {
        fprintf(stderr, "sluice_bench_mem: cannot open the store: %s (%s)\n",
                sluice_strerror(err), sluice_last_error());
        return -1;
    }
    if (pthread_barrier_init(&start, NULL, c->threads) != 0) {
        fprintf(stderr, "sluice_bench_mem: cannot make a barrier\n");
        exit(1);
    }
    for (unsigned t = 0; t < c->threads; t++) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].store = store;
        w[t].limit = &limit;
        w[t].keys = c->same_keys ? &sets[0] : &sets[t];
        w[t].rng = (((uint64_t)run << 8 | t) * 0x9e3779b97f4a7c15ULL) | 1;
        w[t].seconds = seconds;
        w[t].start = &start;
        if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
            fprintf(stderr, "sluice_bench_mem: cannot start a thread\n");
            exit(1);
        }
    }
    r->runs[run] = 0;
    for (unsigned t = 0; t < c->threads; t++) {
        pthread_join(tid[t], NULL);
        if (w[t].err != SLUICE_OK && err >= 0) {
            fprintf(stderr, "sluice_bench_mem: sluice_hit failed: %s\n",
                    sluice_strerror(w[t].err));
            err = -1;
        }
        r->runs[run] += (double)w[t].calls / w[t].elapsed_s;
        r->calls += w[t].calls;
        r->admitted_calls += w[t].admitted;
        r->cpu_s += w[t].cpu_s;
        r->wall_s += w[t].elapsed_s;
        run_cpu_s += w[t].cpu_s;
        run_calls += (double)w[t].calls;
    }
    r->cpu_runs[run] = run_calls > 0 ? run_cpu_s * 1e9 / run_calls : 0;
    pthread_barrier_destroy(&start);
    sluice_store_free(store);
    return err < 0 ? -1 : 0;
}

static double median(const double *v, unsigned n)
{
    double s[MAX_REPEATS];

    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Sums up case 'c' once its 'repeats' runs are in. */
static void case_finish(case_result *r, const bench_case *c, unsigned repeats)
{
    r->median = median(r->runs, repeats);
    r->ns_per_call = r->median > 0 ? c->threads * 1e9 / r->median : 0;
    r->cpu_ns = median(r->cpu_runs, repeats);
    r->admitted =
        r->calls ? (double)r->admitted_calls / (double)r->calls : 0;
    r->cpu_share = r->wall_s > 0 ? r->cpu_s / r->wall_s : 0;
}

/* ---- Memory ----------------------------------------------------------------- */

typedef struct mem_result {
    uint64_t keys;
    double stats_bytes_per_key;
    double rss_bytes_per_key; /* negative when /proc/self/statm is missing */
} mem_result;

/*
 * Loads MANY_KEYS keys (one admitted hit each) into a fresh store per
 * algorithm. Every store stays open until the end, so the growth of the
 * resident set is each store's own and not memory freed by the one before.
 */
static int measure_memory(mem_result *out, const keyset *keys)
{
    sluice_store *stores[BENCH_ALGO_N] = {NULL};
    int err = 0;

    for (unsigned a = 0; a < BENCH_ALGO_N && err == 0; a++) {
        /* A limit under which one hit keeps every key until it is counted:
           at ADMIT_MAX per window, gcra's TAT would be 10^-9 ms ahead and
           its keys idle (dropped) within a ms; at 10 per minute, 6 s. */
        sluice_limit limit = SLUICE_LIMIT((sluice_algo)a, 10, 60000);
        sluice_store_stats st;
        sluice_decision d;
        long long before, after;

        if (sluice_store_open(&stores[a], "mem://", NULL) < 0) {
            err = -1;
            break;
        }
        before = rss_now_bytes();
        for (size_t i = 0; i < keys->n && err == 0; i++)
            if (sluice_hit(&d, stores[a], &limit, key_at(keys, i),
                           key_len(keys, i), 1) < 0)
                err = -1;
        after = rss_now_bytes();
        if (err == 0 && sluice_store_stats_get(&st, stores[a]) < 0)
            err = -1;
        if (err == 0) {
            out[a].keys = st.keys;
            out[a].stats_bytes_per_key =
                st.keys ? (double)st.bytes / (double)st.keys : 0;
            out[a].rss_bytes_per_key =
                before < 0 || after < 0 || st.keys == 0
                    ? -1
                    : (double)(after - before) / (double)st.keys;
        }
    }
    if (err < 0)
        fprintf(stderr, "sluice_bench_mem: loading keys failed: %s\n",
                sluice_last_error());
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        sluice_store_free(stores[a]);
    return err;
}

static long max_rss_kib(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return ru.ru_maxrss; /* kibibytes on Linux */
}

/* ---- Report ----------------------------------------------------------------- */

/*
 * The ratios the targets refer to, and a few more without a target. For
 * each, the case measured ('num') over the case it is compared with ('den').
 */
typedef struct ratio {
    const char *id;
    const char *label;
    int num, den;
    double target; /* 0 when there is none */
} ratio;

static const ratio ratios[] = {
    {"hot_2t_distinct_over_1t",
     "2 threads distinct keys / 1 thread (hot key)", HOT_2T, HOT_1T,
     TARGET_TWO_THREAD_RATIO},
    {"many_2t_distinct_over_1t",
     "2 threads distinct keys / 1 thread (100,000 keys)", MANY_2T, MANY_1T,
     TARGET_TWO_THREAD_RATIO},
    {"hot_2t_same_over_1t", "2 threads same hot key / 1 thread",
     HOT_2T_SAME, HOT_1T, 0},
    {"refused_over_admitted_1t", "refused / admitted hot key, 1 thread",
     REFUSED_1T, HOT_1T, 0},
    {"refused_2t_same_over_1t", "refused hot key, 2 threads same key / 1",
     REFUSED_2T_SAME, REFUSED_1T, 0},
    {"many_over_hot_1t", "100,000 keys / hot key, 1 thread", MANY_1T, HOT_1T,
     0},
};

#define NRATIOS (sizeof(ratios) / sizeof(ratios[0]))

typedef struct report {
    double seconds;
    unsigned repeats;
    long cpus;
    case_result res[BENCH_ALGO_N][NCASES];
    mem_result mem[BENCH_ALGO_N];
    long max_rss_kib;
    double latency_runs[MAX_REPEATS]; /* memory_latency_ns(), per pass */
    double latency_ns;                /* their median */
} report;

/* Algorithm 'a's case 'num' over its case 'den', in decisions per second. */
static double case_ratio(const report *rp, unsigned a, int num, int den)
{
    double d = rp->res[a][den].median;

    return d > 0 ? rp->res[a][num].median / d : 0;
}

static double ratio_of(const report *rp, unsigned a, const ratio *q)
{
    return case_ratio(rp, a, q->num, q->den);
}

static bool fixed_hot_met(const report *rp)
{
    return rp->res[SLUICE_FIXED][HOT_1T].median >= TARGET_FIXED_HOT_PER_S;
}

static const char *met(bool yes)
{
    return yes ? "met" : "not met";
}

static void print_header(const report *rp)
{
    printf("sluice %s embedded store (mem://) benchmark\n", SLUICE_VERSION);
    printf("%.3g s per case, median of %u run%s; %ld CPU%s online; default "
           "clock (CLOCK_MONOTONIC, read on every call)\n",
           rp->seconds, rp->repeats, rp->repeats == 1 ? "" : "s", rp->cpus,
           rp->cpus == 1 ? "" : "s");
    printf("limits: admitting max %llu per %u ms; refusing max %u per %u ms; "
           "keys \"user:N\"\n\n",
           (unsigned long long)ADMIT_MAX, WINDOW_MS, REFUSE_MAX, WINDOW_MS);
    printf("%-16s %-33s %8s %8s %8s %5s %7s  %s\n", "algorithm", "case",
           "M dec/s", "ns/call", "admitted", "cpu", "cpu ns", "runs (M dec/s)");
}

static void print_row(const report *rp, unsigned a, unsigned c)
{
    const case_result *r = &rp->res[a][c];

    printf("%-16s %-33s %8.2f %8.1f %7.2f%% %4.0f%% %7.1f ",
           sluice_algo_name((sluice_algo)a), cases[c].label, r->median / 1e6,
           r->ns_per_call, r->admitted * 100, r->cpu_share * 100, r->cpu_ns);
    for (unsigned i = 0; i < rp->repeats; i++)
        printf(" %.2f", r->runs[i] / 1e6);
    printf("\n");
}

/*
 * The rows whose threads, not waiting for one another's lock, still had
 * less than BUSY_CPU_SHARE of a CPU each: the machine was busy elsewhere.
 */
#define BUSY_CPU_SHARE 0.9

static unsigned busy_rows(const report *rp)
{
    unsigned n = 0;

    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned c = 0; c < NCASES; c++)
            if (!cases[c].same_keys &&
                rp->res[a][c].cpu_share < BUSY_CPU_SHARE)
                n++;
    return n;
}

/* The word algorithms: those the lock-free path serves. */
static const sluice_algo fast_algos[] = {SLUICE_FIXED, SLUICE_GCRA};
#define NFAST (sizeof(fast_algos) / sizeof(fast_algos[0]))

/*
 * The lock-free path's targets, for each algorithm it serves; the
 * 100,000-key rows beside a hot key plus one load from memory, measured in
 * the same run, which is what a lookup that misses once costs.
 */
static void print_fast_targets(const report *rp)
{
    printf("\nTargets of the lock-free path (fixed and gcra)\n");
    for (unsigned i = 0; i < NFAST; i++) {
        const case_result *r = rp->res[fast_algos[i]];
        const char *name = sluice_algo_name(fast_algos[i]);
        double same = case_ratio(rp, fast_algos[i], HOT_2T_SAME, HOT_1T);

        printf("  %s hot key, 1 thread: %.1f ns \u2014 target \u2264 %.0f "
               "ns: %s\n", name, r[HOT_1T].ns_per_call, TARGET_FAST_HOT_NS,
               met(r[HOT_1T].ns_per_call <= TARGET_FAST_HOT_NS));
        printf("  %s 100,000 keys, 1 thread: %.1f ns \u2014 target \u2264 "
               "%.0f ns: %s\n", name, r[MANY_1T].ns_per_call,
               TARGET_FAST_MANY_NS,
               met(r[MANY_1T].ns_per_call <= TARGET_FAST_MANY_NS));
        printf("  %s 2 threads same hot key / 1 thread: %.2f\u00d7 \u2014 "
               "target \u2265 %.1f\u00d7: %s\n", name, same,
               TARGET_FAST_SAME_RATIO, met(same >= TARGET_FAST_SAME_RATIO));
    }
    if (rp->latency_ns > 0)
        printf("  reference: one load from memory here %.1f ns (a chase "
               "over %zu MiB, median of %u);\n  a hot key plus one load: "
               "fixed %.1f ns, gcra %.1f ns\n", rp->latency_ns,
               LATENCY_BYTES >> 20, rp->repeats,
               rp->res[SLUICE_FIXED][HOT_1T].ns_per_call + rp->latency_ns,
               rp->res[SLUICE_GCRA][HOT_1T].ns_per_call + rp->latency_ns);
}

static void print_summary(const report *rp)
{
    const case_result *fh = &rp->res[SLUICE_FIXED][HOT_1T];
    unsigned busy = busy_rows(rp);

    printf("\nns/call: the time one thread spends per call "
           "(threads x 10^9 / rate).\n"
           "cpu: the threads' CPU time over their elapsed time. Under 100%% "
           "a thread was\nnot running: it waited for the lock (the same-key "
           "rows) or for a CPU that the\nmachine gave to something else "
           "(then the row is low for that reason).\n"
           "cpu ns: the threads' CPU time per call (median of the runs): a "
           "thread is not\ncharged while descheduled, so a busy machine "
           "moves it less than the rate.\n");
    if (busy > 0)
        printf("warning: %u row%s without a shared key had less than %.0f%% "
               "of a CPU per thread;\nthe machine was busy, and their "
               "figures and ratios are low. Run again, or\nwith more "
               "--repeats.\n",
               busy, busy == 1 ? "" : "s", BUSY_CPU_SHARE * 100);
    printf("\nTargets\n");
    printf("  fixed hot key 1 thread: %.2f M decisions/s (%.1f ns) \u2014 "
           "target \u2265 %.0f M/s (\u2264 %.0f ns): %s\n",
           fh->median / 1e6, fh->ns_per_call, TARGET_FIXED_HOT_PER_S / 1e6,
           TARGET_FIXED_HOT_NS, met(fixed_hot_met(rp)));
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned q = 0; q < NRATIOS; q++) {
            double v = ratio_of(rp, a, &ratios[q]);

            if (ratios[q].target == 0)
                continue;
            printf("  %s %s: %.2f\u00d7 \u2014 target \u2265 %.1f\u00d7: "
                   "%s\n",
                   sluice_algo_name((sluice_algo)a), ratios[q].label, v,
                   ratios[q].target, met(v >= ratios[q].target));
        }
    print_fast_targets(rp);
    printf("\nOther ratios (no target)\n");
    for (unsigned q = 0; q < NRATIOS; q++) {
        if (ratios[q].target != 0)
            continue;
        printf("  %-44s", ratios[q].label);
        for (unsigned a = 0; a < BENCH_ALGO_N; a++)
            printf("  %s %.2f\u00d7", sluice_algo_name((sluice_algo)a),
                   ratio_of(rp, a, &ratios[q]));
        printf("\n");
    }
    printf("\nMemory after one hit on each of %u keys\n", MANY_KEYS);
    for (unsigned a = 0; a < BENCH_ALGO_N; a++) {
        const mem_result *m = &rp->mem[a];

        printf("  %-16s stats %6.1f bytes/key; resident set grew ",
               sluice_algo_name((sluice_algo)a), m->stats_bytes_per_key);
        if (m->rss_bytes_per_key < 0)
            printf("n/a\n");
        else
            printf("%6.1f bytes/key\n", m->rss_bytes_per_key);
    }
    printf("  process max RSS: %ld KiB\n", rp->max_rss_kib);
}

/* Every case of every algorithm, with its runs, as JSON objects. */
static void json_cases(const report *rp)
{
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned c = 0; c < NCASES; c++) {
            const case_result *r = &rp->res[a][c];

            printf("%s\n    {\"algo\": \"%s\", \"case\": \"%s\", "
                   "\"threads\": %u, \"keys_per_thread\": %zu, "
                   "\"same_keys\": %s, \"max\": %llu, "
                   "\"decisions_per_s\": %.0f, \"ns_per_call\": %.2f, "
                   "\"admitted_fraction\": %.6f, \"cpu_share\": %.3f, "
                   "\"cpu_ns_per_call\": %.2f, \"runs\": [",
                   a + c == 0 ? "" : ",", sluice_algo_name((sluice_algo)a),
                   cases[c].id, cases[c].threads, cases[c].nkeys,
                   cases[c].same_keys ? "true" : "false",
                   (unsigned long long)(cases[c].refuse ? REFUSE_MAX
                                                        : ADMIT_MAX),
                   r->median, r->ns_per_call, r->admitted, r->cpu_share,
                   r->cpu_ns);
            for (unsigned i = 0; i < rp->repeats; i++)
                printf("%s%.0f", i ? ", " : "", r->runs[i]);
            printf("]}");
        }
}

/*
 * The ratios of every algorithm that have a target ('targets') or that
 * have none, as JSON objects; the first after a comma unless 'first'.
 */
static void json_ratios(const report *rp, bool targets, bool first)
{
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned q = 0; q < NRATIOS; q++) {
            double v = ratio_of(rp, a, &ratios[q]);

            if ((ratios[q].target != 0) != targets)
                continue;
            printf("%s\n    {\"name\": \"%s_%s\", \"value\": %.4f",
                   first ? "" : ",", sluice_algo_name((sluice_algo)a),
                   ratios[q].id, v);
            if (targets)
                printf(", \"target_min\": %.2f, \"met\": %s",
                       ratios[q].target,
                       v >= ratios[q].target ? "true" : "false");
            printf("}");
            first = false;
        }
}

static void json_memory(const report *rp)
{
    for (unsigned a = 0; a < BENCH_ALGO_N; a++) {
        const mem_result *m = &rp->mem[a];

        printf("%s\n    {\"algo\": \"%s\", \"keys\": %llu, "
               "\"stats_bytes_per_key\": %.1f, ",
               a ? "," : "", sluice_algo_name((sluice_algo)a),
               (unsigned long long)m->keys, m->stats_bytes_per_key);
        if (m->rss_bytes_per_key < 0)
            printf("\"rss_bytes_per_key\": null}");
        else
            printf("\"rss_bytes_per_key\": %.1f}", m->rss_bytes_per_key);
    }
}

/* print_fast_targets()'s targets, as JSON objects after a comma. */
static void json_fast_targets(const report *rp)
{
    for (unsigned i = 0; i < NFAST; i++) {
        const case_result *r = rp->res[fast_algos[i]];
        const char *name = sluice_algo_name(fast_algos[i]);
        double same = case_ratio(rp, fast_algos[i], HOT_2T_SAME, HOT_1T);

        printf(",\n    {\"name\": \"%s_hot_1t_ns_per_call\", \"value\": "
               "%.2f, \"target_ns_max\": %.0f, \"met\": %s}", name,
               r[HOT_1T].ns_per_call, TARGET_FAST_HOT_NS,
               r[HOT_1T].ns_per_call <= TARGET_FAST_HOT_NS ? "true" : "false");
        printf(",\n    {\"name\": \"%s_many_1t_ns_per_call\", \"value\": "
               "%.2f, \"target_ns_max\": %.0f, \"met\": %s}", name,
               r[MANY_1T].ns_per_call, TARGET_FAST_MANY_NS,
               r[MANY_1T].ns_per_call <= TARGET_FAST_MANY_NS ? "true"
                                                             : "false");
        printf(",\n    {\"name\": \"%s_hot_2t_same_over_1t\", \"value\": "
               "%.4f, \"target_min\": %.2f, \"met\": %s}", name, same,
               TARGET_FAST_SAME_RATIO,
               same >= TARGET_FAST_SAME_RATIO ? "true" : "false");
    }
}

static void print_json(const report *rp)
{
    const case_result *fh = &rp->res[SLUICE_FIXED][HOT_1T];

    printf("{\n  \"version\": \"%s\",\n  \"store\": \"mem://\",\n"
           "  \"clock\": \"monotonic\",\n  \"seconds\": %g,\n"
           "  \"repeats\": %u,\n  \"cpus\": %ld,\n",
           SLUICE_VERSION, rp->seconds, rp->repeats, rp->cpus);
    printf("  \"window_ms\": %u,\n  \"admit_max\": %llu,\n"
           "  \"refuse_max\": %u,\n  \"cases\": [",
           WINDOW_MS, (unsigned long long)ADMIT_MAX, REFUSE_MAX);
    json_cases(rp);
    printf("\n  ],\n  \"targets\": [\n");
    printf("    {\"name\": \"fixed_hot_1t_decisions_per_s\", \"value\": %.0f, "
           "\"target_min\": %.0f, \"ns_per_call\": %.2f, "
           "\"target_ns_max\": %.0f, \"met\": %s}",
           fh->median, TARGET_FIXED_HOT_PER_S, fh->ns_per_call,
           TARGET_FIXED_HOT_NS, fixed_hot_met(rp) ? "true" : "false");
    json_ratios(rp, true, false);
    json_fast_targets(rp);
    printf("\n  ],\n  \"ratios\": [");
    json_ratios(rp, false, true);
    printf("\n  ],\n  \"memory\": [");
    json_memory(rp);
    printf("\n  ],\n  \"memory_latency_ns\": %.1f,\n"
           "  \"max_rss_kib\": %ld,\n  \"busy_rows\": %u\n}\n",
           rp->latency_ns, rp->max_rss_kib, busy_rows(rp));
}

static void print_text(const report *rp)
{
    print_header(rp);
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned c = 0; c < NCASES; c++)
            print_row(rp, a, c);
    print_summary(rp);
}

/* ---- Options and main --------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice_bench_mem [--seconds S] [--repeats N] [--json]\n"
            "\n"
            "Measures decisions per second of the embedded store for each\n"
            "algorithm (1 and 2 threads, a hot key and %u keys, admitted and\n"
            "refused), and its memory per key. Needs nothing but this build\n"
            "(no server). Benchmarks never fail: the exit status is 0\n"
            "whether the targets are met or not.\n"
            "\n"
            "  --seconds S   run each case for S seconds (default %.0f)\n"
            "  --repeats N   run each case N times, report the median\n"
            "                (default %u, at most %u)\n"
            "  --json        write the results as JSON to standard output\n"
            "  --help        show this text\n",
            MANY_KEYS, DEFAULT_SECONDS, DEFAULT_REPEATS, MAX_REPEATS);
}

static int bad_option(const char *fmt, const char *arg)
{
    fprintf(stderr, "sluice_bench_mem: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

/*
 * Reads the options into 'rp' and '*json': -1 to go on, else the exit
 * status (0 after --help, 2 after a bad option).
 */
static int options_parse(report *rp, bool *json, int argc, char **argv)
{
    rp->seconds = DEFAULT_SECONDS;
    rp->repeats = DEFAULT_REPEATS;
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;
        char *end;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            *json = true;
        } else if ((v = option_value(argc, argv, &i, "--seconds",
                                     &missing)) != NULL) {
            errno = 0;
            rp->seconds = strtod(v, &end);
            if (*v == '\0' || *end != '\0' || errno != 0 ||
                !(rp->seconds > 0 && rp->seconds <= 3600))
                return bad_option("--seconds wants a number of seconds "
                                  "above 0 and at most 3600, not '%s'", v);
        } else if ((v = option_value(argc, argv, &i, "--repeats",
                                     &missing)) != NULL) {
            unsigned long n;

            errno = 0;
            n = strtoul(v, &end, 10);
            if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 ||
                n < 1 || n > MAX_REPEATS)
                return bad_option("--repeats wants a whole number from 1 "
                                  "to 99, not '%s'", v);
            rp->repeats = (unsigned)n;
        } else if (missing) {
            return bad_option("%s needs a value", argv[i]);
        } else {
            return bad_option("unknown option '%s'", argv[i]);
        }
    }
    return -1;
}

/* ---- The memory's latency --------------------------------------------------- */

/*
 * The time of one load from memory, in ns: a chase through LATENCY_BYTES
 * in 64-byte steps, each load's address read by the one before it, in one
 * random cycle (Sattolo's shuffle), so neither the caches nor the
 * prefetchers help. A lookup that misses once costs about this much more
 * than a hot key; the 100,000-key rows are set beside it. -1 if out of
 * memory.
 */
static double memory_latency_ns(uint64_t seed)
{
    size_t lines = LATENCY_BYTES / 64, *next = malloc(LATENCY_BYTES), at = 0;
    size_t *order = malloc(lines * sizeof(*order));
    double start;

    if (next == NULL || order == NULL) {
        free(next);
        free(order);
        return -1;
    }
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j, t;

        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        j = (size_t)(seed >> 33) % i; /* j < i: one cycle through all */
        t = order[i], order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        next[order[i] * 8] = order[(i + 1) % lines] * 8;
    free(order);
    for (unsigned i = 0; i < LATENCY_LOADS / 8; i++) /* warm the TLB */
        at = next[at];
    start = clock_s(CLOCK_MONOTONIC);
    for (unsigned i = 0; i < LATENCY_LOADS; i++)
        at = next[at];
    start = (clock_s(CLOCK_MONOTONIC) - start) * 1e9 / LATENCY_LOADS;
    free(next);
    /* 'at' depends on every load: the loop cannot be dropped. */
    return at == (size_t)-1 ? 0 : start;
}

/*
 * Runs every case of every algorithm 'repeats' times, interleaved, on the
 * key sets 'hot' and 'many' (one per thread), then takes the medians.
 */
static int run_cases(report *rp, const keyset *hot, const keyset *many)
{
    bool progress = isatty(STDERR_FILENO);

    for (unsigned run = 0; run < rp->repeats; run++) {
        for (unsigned a = 0; a < BENCH_ALGO_N; a++)
            for (unsigned c = 0; c < NCASES; c++)
                if (run_once(&rp->res[a][c], run, (sluice_algo)a, &cases[c],
                             cases[c].nkeys == 1 ? hot : many,
                             rp->seconds) < 0)
                    return -1;
        rp->latency_runs[run] = memory_latency_ns(run + 1);
        if (progress)
            fprintf(stderr, "sluice_bench_mem: pass %u of %u done\n",
                    run + 1, rp->repeats);
    }
    for (unsigned a = 0; a < BENCH_ALGO_N; a++)
        for (unsigned c = 0; c < NCASES; c++)
            case_finish(&rp->res[a][c], &cases[c], rp->repeats);
    rp->latency_ns = median(rp->latency_runs, rp->repeats);
    return 0;
}

int main(int argc, char **argv)
{
    static report rp;
    bool json = false;
    keyset hot[MAX_THREADS], many[MAX_THREADS];
    int status;

    if ((status = options_parse(&rp, &json, argc, argv)) >= 0)
        return status;
    rp.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (unsigned t = 0; t < MAX_THREADS; t++)
        if (keyset_make(&hot[t], t, 1) < 0 ||
            keyset_make(&many[t], (size_t)t * MANY_KEYS, MANY_KEYS) < 0) {
            fprintf(stderr, "sluice_bench_mem: out of memory for keys\n");
            return 1;
        }
    /* Memory first, while the heap is fresh. */
    if (measure_memory(rp.mem, &many[0]) < 0 ||
        run_cases(&rp, hot, many) < 0)
        return 1;
    rp.max_rss_kib = max_rss_kib();
    if (json)
        print_json(&rp);
    else
        print_text(&rp);
    for (unsigned t = 0; t < MAX_THREADS; t++) {
        keyset_free(&hot[t]);
        keyset_free(&many[t]);
    }
    return 0;
}
