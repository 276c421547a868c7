/*
 * bench_util.h - small helpers the benchmarks share: the max asked of an
 * algorithm, a key picker cheap enough for a timed loop, qsort()'s
 * comparison of doubles, and the process's resident set.
 */
#ifndef SLUICE_BENCH_UTIL_H
#define SLUICE_BENCH_UTIL_H

#include "sluice.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/*
 * The max a benchmark asks of 'algo' for 'max': the same, but at most
 * SLUICE_COMPACT_LOG_MAX (2^14) for compact-log, which keeps 8 bytes per
 * admitted unit and takes no more. A hot key then fills its window and is
 * refused for the rest of it (the admitted share says how much).
 */
static inline uint64_t bench_max_for(sluice_algo algo, uint64_t max)
{
    if (algo == SLUICE_COMPACT_LOG && max > SLUICE_COMPACT_LOG_MAX)
        return SLUICE_COMPACT_LOG_MAX;
    return max;
}

/*
 * A uniform index below 'n' from a xorshift64 generator: a few cycles, so
 * choosing the key does not weigh on the figures.
 */
static inline size_t pick_key(uint64_t *rng, size_t n)
{
    uint64_t x = *rng;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return (size_t)(((x >> 32) * (uint64_t)n) >> 32);
}

/* Orders doubles for qsort(), ascending. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The resident set now, in bytes; -1 where /proc/self/statm is missing. */
static inline long long rss_now_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size, resident;
    int n;

    if (f == NULL)
        return -1;
    n = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

#endif
