/*
 * bench_clock.c - what one reading of the monotonic clock costs: the
 * library's sluice_clock_monotonic_ms() (on x86-64 Linux, a per-thread
 * cache read with the TSC: src/core/clock.c) against clock_gettime() and
 * sluice_clock_realtime_ms(), in nanoseconds of the thread's CPU time per
 * call (so a thread that the machine deschedules is not charged for it).
 *
 * Each clock is read in a loop of 'calls' calls, 'repeats' times,
 * alternated; the minimum and the median of the repeats are printed. The
 * cache's counts (answers from the cache, readings of the clock) show how
 * often the cached clock read the real one. Benchmarks measure; they never
 * pass or fail: the exit status is 0, or 2 on a bad option.
 */
#include "core/core.h"
#include "bench_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPEATS 99
#define DEFAULT_CALLS 10000000L
#define DEFAULT_REPEATS 5

static const char usage[] =
    "usage: sluice_bench_clock [CALLS [REPEATS]]\n"
    "\n"
    "What one reading of the monotonic clock costs: the library's\n"
    "sluice_clock_monotonic_ms() (on x86-64 Linux a per-thread cache read\n"
    "with the TSC, src/core/clock.c) beside clock_gettime(CLOCK_MONOTONIC)\n"
    "and sluice_clock_realtime_ms(), in ns of the thread's CPU time per call\n"
    "(min and median of the repeats), and how often the cache read the real\n"
    "clock. Needs nothing but this build (no server). Benchmarks never\n"
    "fail: the exit status is 0 whatever the figures.\n"
    "\n"
    "  CALLS      calls per loop (default 10000000)\n"
    "  REPEATS    loops per clock, alternated, 1..99 (default 5)\n"
    "  --help     show this text\n";

/* A whole number from 'text' in 1..'max' into '*out'; false if not one. */
static bool whole(const char *text, long max, long *out)
{
    char *end;

    *out = strtol(text, &end, 10);
    return text[0] >= '0' && text[0] <= '9' && *end == '\0' && *out >= 1 &&
           *out <= max;
}

/* Reads CALLS and REPEATS: -1 if they are good, else the exit status. */
static int options(int argc, char **argv, long *calls, long *repeats)
{
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-')
            return bench_usage_error("sluice_bench_clock", usage,
                                     "unknown option '%s'", argv[i]);
    if (argc > 3)
        return bench_usage_error("sluice_bench_clock", usage,
                                 "unexpected argument '%s'", argv[3]);
    if (argc > 1 && !whole(argv[1], 1000000000000L, calls))
        return bench_usage_error("sluice_bench_clock", usage,
                                 "CALLS wants a whole number >= 1, not '%s'",
                                 argv[1]);
    if (argc > 2 && !whole(argv[2], MAX_REPEATS, repeats))
        return bench_usage_error("sluice_bench_clock", usage,
                                 "REPEATS wants 1..%d, not '%s'", MAX_REPEATS,
                                 argv[2]);
    return -1;
}

static double cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t gettime_ms(void *payload)
{
    struct timespec ts;

    (void)payload;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

typedef struct clock_case {
    const char *name;
    sluice_clock_ms_fn fn;
    double ns[MAX_REPEATS];
} clock_case;

/* ns of CPU time per call of 'fn' over 'calls' calls. */
static double per_call_ns(sluice_clock_ms_fn fn, long calls)
{
    volatile uint64_t sink = 0;
    double start = cpu_s();

    for (long i = 0; i < calls; i++)
        sink += fn(NULL);
    (void)sink;
    return (cpu_s() - start) * 1e9 / (double)calls;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    clock_case cases[] = {
        {"clock_gettime(CLOCK_MONOTONIC)", gettime_ms, {0}},
        {"sluice_clock_monotonic_ms", sluice_clock_monotonic_ms, {0}},
        {"sluice_clock_realtime_ms", sluice_clock_realtime_ms, {0}},
    };
    long calls = DEFAULT_CALLS, nrepeats = DEFAULT_REPEATS;
    int repeats, status;
    sluice__clock_stats st;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if ((status = options(argc, argv, &calls, &nrepeats)) >= 0)
        return status;
    repeats = (int)nrepeats;
    per_call_ns(sluice_clock_monotonic_ms, 10000000); /* measures the rate */
    for (int r = 0; r < repeats; r++)
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
            cases[c].ns[r] = per_call_ns(cases[c].fn, calls);
    printf("%ld calls x %d repeats, ns of thread CPU time per call\n", calls,
           repeats);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        qsort(cases[c].ns, (size_t)repeats, sizeof(double), cmp_double);
        printf("  %-32s min %6.2f  median %6.2f\n", cases[c].name,
               cases[c].ns[0], cases[c].ns[repeats / 2]);
    }
    sluice__clock_stats_get(&st);
    printf("TSC cache: %s%s; this thread: %llu answers from it, %llu "
           "readings of the clock\n", st.on ? "on" : "off: ",
           st.on ? "" : st.off_why, (unsigned long long)st.cached,
           (unsigned long long)st.read);
    return 0;
}
