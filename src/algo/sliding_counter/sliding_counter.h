/*
 * sliding_counter.h - the sliding-window counter's one decision, shared by
 * the embedded store (sliding_counter.c, on its struct state) and the
 * server module (module.c, on the hash that sliding_counter.lua keeps).
 *
 * The decision sees the state as the hash's fields: the window its counts
 * were made with (w), the current window's index (i), its count (c) and the
 * previous window's (p). It is written once, as a macro of its number type,
 * and made for the two kinds of number.h: the store's exact integers and
 * the script's doubles. See sliding_counter.c for the arithmetic.
 */
#ifndef SLUICE_ALGO_SLIDING_COUNTER_H
#define SLUICE_ALGO_SLIDING_COUNTER_H

#include "algo/algo.h"
#include "algo/number.h"

/*
 * NAME_decide() answers a request of 'cost' at 'now' into 'out', on the
 * state read: 'si' its index, NULL when there is none or it was made with
 * another window (a fresh state); 'c' and 'p' its counts, NULL where one
 * is missing. A clock that reads earlier than the state's window is held
 * at that window's start. Returns 1 when it admits, 'next' then the
 * state with the request counted (w, i, c, p) and '*ttl_ms' the time it
 * lasts (2 x window - elapsed), for the caller to keep if it consumes; 0
 * when it refuses; or SLUICE_EPROTO where the state's window needs a
 * count it lacks (the script's arithmetic fails on nil there).
 *
 * NAME_retry() is the least wait before a refused 'cost' fits: later in
 * this window as the previous window's part slides out, else in the next.
 */
#define SLUICE__COUNTER_DEFINE(NAME, num, FIGURE, FDIV, CDIV)                 \
    static inline num NAME##_retry(num max, num w, num cur, num prev,         \
                                   num elapsed, num cost)                     \
    {                                                                         \
        num retry = 0, rr;                                                    \
                                                                              \
        if (cur + cost <= max && prev > 0) {                                  \
            rr = FDIV((max - cur - cost) * w, prev);                          \
            if (rr >= 1)                                                      \
                retry = (w - rr) - elapsed;                                   \
        }                                                                     \
        if (retry == 0) {                                                     \
            if (cur == 0) {                                                   \
                retry = w - elapsed;                                          \
            } else {                                                          \
                rr = FDIV((max - cost) * w, cur);                             \
                retry = (w - elapsed) + (rr < w ? w - rr : 0);                \
            }                                                                 \
        }                                                                     \
        return retry;                                                         \
    }                                                                         \
                                                                              \
    static inline int NAME##_decide(num now, const num *si, const num *c,     \
                                    const num *p, const sluice_limit *limit,  \
                                    uint64_t cost, num next[4], num *ttl_ms,  \
                                    sluice_decision *out)                     \
    {                                                                         \
        num w = (num)limit->window_ms, max = (num)limit->max;                 \
        num k = (num)cost, idx = FDIV(now, w), cur = 0, prev = 0;             \
        num elapsed, wceil, used;                                             \
        int admitted = 0;                                                     \
                                                                              \
        if (si != NULL) {                                                     \
            if (idx < *si) {                                                  \
                idx = *si;                                                    \
                now = *si * w;                                                \
            }                                                                 \
            if (*si == idx) {                                                 \
                if (c == NULL || p == NULL)                                   \
                    return SLUICE_EPROTO;                                     \
                cur = *c;                                                     \
                prev = *p;                                                    \
            } else if (*si + 1 == idx) {                                      \
                if (c == NULL)                                                \
                    return SLUICE_EPROTO;                                     \
                prev = *c;                                                    \
            }                                                                 \
        }                                                                     \
        elapsed = now - idx * w;                                              \
        wceil = CDIV(prev * (w - elapsed), w);                                \
        out->limit = limit->max;                                              \
        out->retry_after_ms = 0;                                              \
        if (cur + wceil + k <= max) {                                         \
            out->allowed = 1;                                                 \
            admitted = 1;                                                     \
            cur += k;                                                         \
            next[0] = w;                                                      \
            next[1] = idx;                                                    \
            next[2] = cur;                                                    \
            next[3] = prev;                                                   \
            *ttl_ms = 2 * w - elapsed;                                        \
        } else {                                                              \
            out->allowed = 0;                                                 \
            out->retry_after_ms = FIGURE(                                     \
                NAME##_retry(max, w, cur, prev, elapsed, k));                 \
        }                                                                     \
        used = cur + wceil;                                                   \
        out->remaining = used < max ? FIGURE(max - used) : 0;                 \
        out->reset_after_ms = cur > 0    ? FIGURE(2 * w - elapsed)            \
                              : prev > 0 ? FIGURE(w - elapsed)                \
                                         : 0;                                 \
        return admitted;                                                      \
    }

/* sluice__counter_exact_decide(): the embedded store's (sliding_counter.c). */
SLUICE__COUNTER_DEFINE(sluice__counter_exact, uint64_t, SLUICE__EXACT_FIGURE,
                       SLUICE__EXACT_FDIV, SLUICE__EXACT_CDIV)
/* sluice__counter_decide(): the module's (module.c). */
SLUICE__COUNTER_DEFINE(sluice__counter, double, SLUICE__LUA_FIGURE,
                       SLUICE__LUA_FDIV, SLUICE__LUA_CDIV)

#endif /* SLUICE_ALGO_SLIDING_COUNTER_H */
