/*
 * number.h - the two kinds of number an algorithm's one decision is made
 * for, where it computes with the values a key holds (fixed.h,
 * sliding_counter.h and sliding_log.h write it once, as a macro of its
 * number type, and make it for both):
 *
 *   exact  uint64_t, the embedded store's: its states hold what the library
 *          writes, within the bounds it checks, and its hot path stays in
 *          integers;
 *   lua    double, as the Lua scripts compute, the server module's: so that
 *          a value only a script meets on a key (a negative count, "6e4", a
 *          fraction, "inf") gets the script's figures. The module links no
 *          libm.
 *
 * On every state the store holds the two give the same figures: every
 * number is a whole one below 2^53, exact in a double (the differential
 * tests check it, module against script against the embedded store).
 * FIGURE turns a number into a reply's field, FDIV and CDIV divide
 * rounding down and up.
 */
#ifndef SLUICE_ALGO_NUMBER_H
#define SLUICE_ALGO_NUMBER_H

#include <stdint.h>

#define SLUICE__EXACT_FIGURE(v) ((uint64_t)(v))
#define SLUICE__EXACT_FDIV(a, b) ((a) / (b))
#define SLUICE__EXACT_CDIV(a, b) (((a) + (b) - 1) / (b))

/* A Lua number as the server replies it: a C cast, truncating; LLONG_MIN
   (x86-64's cast) beyond a long long, or for NaN. */
static inline uint64_t sluice__lua_figure(double d)
{
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return (uint64_t)(long long)d;
    return (uint64_t)1 << 63;
}

/*
 * Lua's math.fmod, exact for the whole numbers below 2^63 that sluice's
 * values hold (it writes them below 2^53); other values, which only
 * another writer leaves, get a - b * trunc(a / b).
 */
static inline double sluice__lua_fmod(double a, double b)
{
    const double big = 9.2e18;
    double q;

    if (a > -big && a < big && b > -big && b < big && b != 0 &&
        (double)(long long)a == a && (double)(long long)b == b)
        return (double)((long long)a % (long long)b);
    q = a / b;
    if (!(q > -big && q < big))
        return 0;
    return a - b * (double)(long long)q;
}

/* The scripts' fdiv and cdiv (src/algo/prelude.lua). */
static inline double sluice__lua_fdiv(double a, double b)
{
    return (a - sluice__lua_fmod(a, b)) / b;
}

static inline double sluice__lua_cdiv(double a, double b)
{
    double r = sluice__lua_fmod(a, b);

    return r == 0 ? a / b : (a - r) / b + 1;
}

#define SLUICE__LUA_FIGURE(v) sluice__lua_figure(v)
#define SLUICE__LUA_FDIV(a, b) sluice__lua_fdiv(a, b)
#define SLUICE__LUA_CDIV(a, b) sluice__lua_cdiv(a, b)

#endif /* SLUICE_ALGO_NUMBER_H */
