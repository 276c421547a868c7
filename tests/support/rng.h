/*
 * rng.h - the tests' random numbers: splitmix64, small, fast, and every
 * seed a good one. Each test file that includes it has its own generator;
 * set rng_state to the seed, and a run can be repeated exactly.
 */
#ifndef SLUICE_TEST_RNG_H
#define SLUICE_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A number in 0 .. n - 1 (0 when n is 0). */
static inline uint64_t rng_below(uint64_t n)
{
    return n == 0 ? 0 : rng_next() % n;
}

/* A number in lo .. hi, both included (lo when hi <= lo). */
static inline uint64_t rng_range(uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    if (hi - lo == UINT64_MAX)
        return rng_next();
    return lo + rng_next() % (hi - lo + 1);
}

/* True with probability 'percent' percent. */
static inline int rng_pct(unsigned percent)
{
    return rng_below(100) < percent;
}

#endif
