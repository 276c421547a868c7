/*
 * compact_log.h - the compact log's one decision, shared by the embedded
 * store (compact_log.c, on its array) and the server module (module.c, on
 * the string that compact_log.lua keeps).
 *
 * Both hold the same state, a ring of times, one per admitted unit, oldest
 * first from 'head' (mod 'cap'); they differ in where a slot's 8 bytes are
 * (a native array, or a little-endian string after a 16-byte header) and
 * in how a ring grows. The decision reads the ring through a slot reader,
 * AT(ring, i) for the time of its i'th oldest unit, and answers what to do
 * to it -- how many units left the span, whether the request is admitted,
 * the clock it counts at --, which each side then does its own way. It is
 * written once, as a macro of the ring's type and reader, and made for
 * each side (compact_log.c, module.c): no indirect call on the store's hot
 * path.
 */
#ifndef SLUICE_ALGO_COMPACT_LOG_H
#define SLUICE_ALGO_COMPACT_LOG_H

#include "algo/algo.h"

/*
 * NAME_gone()    how many of the 'len' live units of 'r' have left the
 *                span at 'now' (t <= now - window): a prefix, since times
 *                only grow. Galloping from the oldest, then bisecting,
 *                finds the k that left in O(log k) looks: one look when
 *                none has.
 * NAME_decide()  the decision on 'r' of 'len' live units: holds '*now_ms'
 *                at the newest unit when the clock reads earlier; answers
 *                into 'out' whether 'cost' more fits, with the figures; and
 *                returns how many units left the span (all 'len' of them
 *                when the newest has). The caller then drops them and, when
 *                'out' admits and it consumes, appends 'cost' units at
 *                '*now_ms'.
 */
#define SLUICE__CLOG_DEFINE(NAME, ring_t, AT)                                 \
    static inline bool NAME##_left(const ring_t *r, uint32_t i,               \
                                   uint64_t window_ms, uint64_t now_ms)       \
    {                                                                         \
        return now_ms >= window_ms && AT(r, i) <= now_ms - window_ms;         \
    }                                                                         \
                                                                              \
    static inline uint32_t NAME##_gone(const ring_t *r, uint32_t len,         \
                                       uint64_t window_ms, uint64_t now_ms)   \
    {                                                                         \
        uint32_t lo = 0, hi, step = 1; /* lo has left, hi has not */          \
                                                                              \
        if (len == 0 || !NAME##_left(r, 0, window_ms, now_ms))                \
            return 0;                                                         \
        if (NAME##_left(r, len - 1, window_ms, now_ms))                       \
            return len;                                                       \
        hi = len - 1;                                                         \
        while (lo + step < hi &&                                              \
               NAME##_left(r, lo + step, window_ms, now_ms)) {                \
            lo += step;                                                       \
            step *= 2;                                                        \
        }                                                                     \
        if (lo + step < hi)                                                   \
            hi = lo + step;                                                   \
        while (hi - lo > 1) {                                                 \
            uint32_t mid = lo + (hi - lo) / 2;                                \
                                                                              \
            if (NAME##_left(r, mid, window_ms, now_ms))                       \
                lo = mid;                                                     \
            else                                                              \
                hi = mid;                                                     \
        }                                                                     \
        return hi;                                                            \
    }                                                                         \
                                                                              \
    static inline uint32_t NAME##_decide(const ring_t *r, uint32_t len,       \
                                         const sluice_limit *limit,           \
                                         uint64_t *now_ms, uint64_t cost,     \
                                         sluice_decision *out)                \
    {                                                                         \
        uint64_t w = limit->window_ms, max = limit->max, newest = 0;          \
        uint32_t gone = 0, live;                                              \
                                                                              \
        if (len > 0) {                                                        \
            newest = AT(r, len - 1);                                          \
            if (newest > *now_ms)                                             \
                *now_ms = newest;                                             \
            gone = NAME##_gone(r, len, w, *now_ms);                           \
        }                                                                     \
        live = len - gone;                                                    \
        out->limit = max;                                                     \
        if (live + cost <= max) {                                             \
            out->allowed = 1;                                                 \
            out->remaining = max - live - cost;                               \
            out->retry_after_ms = 0;                                          \
            out->reset_after_ms = w; /* the new units' life */                \
            return gone;                                                      \
        }                                                                     \
        /* The (live + cost - max)'th oldest live unit is the last that       \
           must leave; live + cost > max >= cost, so it is a live one. */     \
        out->allowed = 0;                                                     \
        out->remaining = live < max ? max - live : 0;                         \
        out->retry_after_ms =                                                 \
            AT(r, gone + (uint32_t)(live + cost - max) - 1) + w - *now_ms;    \
        out->reset_after_ms = newest + w - *now_ms;                           \
        return gone;                                                          \
    }

#endif /* SLUICE_ALGO_COMPACT_LOG_H */
