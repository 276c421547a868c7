/*
 * fixed.h - the fixed window's one decision, shared by the embedded store
 * (fixed.c, on its struct state and its lock-free word) and the server
 * module (module.c, on the key that fixed.lua keeps).
 *
 * The decision sees the window as a server key's primitives: a counter and
 * its expiry -- the count, whether there is a key at all, and its PTTL (0
 * in its last ms, -1 without an expiry). The embedded store makes that view
 * of its (count, expires_ms); the module reads it off the key through
 * src/module/view.h, with the script's own readings of odd values (a
 * negative count, one without a TTL), which the store never holds.
 */
#ifndef SLUICE_ALGO_FIXED_H
#define SLUICE_ALGO_FIXED_H

#include "algo/algo.h"
#include "algo/number.h"

/* What a decision did to the counter (sluice__fixed_roll(),
   sluice__fixed_decide()). */
#define SLUICE__FIXED_ARMED 1u     /* its expiry set to the window */
#define SLUICE__FIXED_RESTARTED 2u /* met at PTTL 0: begun anew */
#define SLUICE__FIXED_COUNTED 4u   /* 'cost' added to the count */

/*
 * The decision, written once and made for two kinds of count (below): the
 * embedded store's exact integers, on its hot path, and the module's
 * doubles, the script's Lua numbers, so that a count only the script meets
 * (negative, past 2^53, a fraction a peek reads) gets its figures. On every
 * count the store holds (0 .. max, max < 2^53) the two are the same.
 *
 * NAME_roll()    the window's turn before a request (counter.lua's
 *                counter_incr()): a counter that is new -- no key, or for a
 *                hit a count of 0, which INCRBY meeting one makes -- is armed
 *                with a fresh window; one met in the last ms of its expiry
 *                starts anew; one without an expiry is given the window, so
 *                it can never block forever. 'consume' is false for a
 *                peek, which reads a count of 0 where it stands.
 * NAME_decide()  the turn, then a request of 'cost' is admitted iff
 *                count + cost <= max -- compared as the script compares, so
 *                a peek's NaN passes --, and counted when 'consume' is
 *                true. A refusal waits for the PTTL (at its end the key is
 *                gone, and cost <= max fits a fresh window) and leaves the
 *                count as it was: only its expiry may be armed.
 *
 * Both update '*count' and '*ttl_ms' (the PTTL: 0 in its last ms, -1 with
 * no expiry; 'found' is whether there is a key) and answer what they did.
 */
#define SLUICE__FIXED_DEFINE(NAME, num, FIGURE)                               \
    static inline unsigned NAME##_roll(num *count, long long *ttl_ms,         \
                                       bool found, uint64_t window_ms,        \
                                       bool consume)                          \
    {                                                                         \
        if (!found || (consume && *count == 0)) {                             \
            *count = 0;                                                       \
            *ttl_ms = (long long)window_ms;                                   \
            return SLUICE__FIXED_ARMED;                                       \
        }                                                                     \
        if (*ttl_ms == 0) {                                                   \
            *count = 0;                                                       \
            *ttl_ms = (long long)window_ms;                                   \
            return SLUICE__FIXED_ARMED | SLUICE__FIXED_RESTARTED;             \
        }                                                                     \
        if (*ttl_ms < 0) {                                                    \
            *ttl_ms = (long long)window_ms;                                   \
            return SLUICE__FIXED_ARMED;                                       \
        }                                                                     \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    static inline unsigned NAME##_decide(num *count, long long *ttl_ms,       \
                                         bool found,                          \
                                         const sluice_limit *limit,           \
                                         uint64_t cost, bool consume,         \
                                         sluice_decision *out)                \
    {                                                                         \
        unsigned did =                                                        \
            NAME##_roll(count, ttl_ms, found, limit->window_ms, consume);     \
        num max = (num)limit->max, k = (num)cost, c = *count;                 \
                                                                              \
        out->limit = limit->max;                                              \
        out->reset_after_ms = FIGURE(*ttl_ms);                                \
        if (!(c + k > max)) {                                                 \
            out->allowed = 1;                                                 \
            out->remaining = FIGURE(max - c - k);                             \
            out->retry_after_ms = 0;                                          \
            if (consume) {                                                    \
                *count = c + k;                                               \
                did |= SLUICE__FIXED_COUNTED;                                 \
            }                                                                 \
            return did;                                                       \
        }                                                                     \
        out->allowed = 0;                                                     \
        out->remaining = c < max ? FIGURE(max - c) : 0;                       \
        out->retry_after_ms = FIGURE(*ttl_ms);                                \
        return did;                                                           \
    }

/* sluice__fixed_exact_roll(), _decide(): the embedded store's (fixed.c). */
SLUICE__FIXED_DEFINE(sluice__fixed_exact, uint64_t, SLUICE__EXACT_FIGURE)
/* sluice__fixed_roll(), sluice__fixed_decide(): the module's (module.c). */
SLUICE__FIXED_DEFINE(sluice__fixed, double, SLUICE__LUA_FIGURE)

#endif /* SLUICE_ALGO_FIXED_H */
