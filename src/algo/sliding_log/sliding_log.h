/*
 * sliding_log.h - the sliding log's one decision, shared by the embedded
 * store (sliding_log.c, on its ring of runs) and the server module
 * (module.c, on the sorted set that sliding_log.lua keeps).
 *
 * The decision runs over a log of primitives, as a sorted set offers them:
 *
 *   NEWEST(v, &found, &t)  the newest entry's time, if there is one
 *   TRIM(v, now, w)        drops what left the span (t <= now - w)
 *   TOTAL(v, &total)       the units live in the log
 *   KTH(v, k, &t)          the time of the k'th oldest live unit
 *   ADD(v, now, cost)      records 'cost' units at 'now'
 *
 * each answering 0, or a nonzero code that ends the decision as it is (the
 * store's SLUICE_ENOMEM; the module's SLUICE__MODULE_FOREIGN, for a member
 * the log never writes). The store's log is a ring of {t, n} runs with a
 * running total; the module's is the set of members 'A'/'B..' carrying the
 * set's running total, read from its two ends, the k'th unit found by
 * bisecting its ranks, one ZADD a request.
 *
 * It is written once, as a macro of the log's type, its time's number type
 * (the store's exact uint64_t; the module's double, the scores the script
 * reads, see number.h) and the five primitives, and made for each side: no
 * indirect call on the store's hot path.
 */
#ifndef SLUICE_ALGO_SLIDING_LOG_H
#define SLUICE_ALGO_SLIDING_LOG_H

#include "algo/algo.h"
#include "algo/number.h"

/*
 * NAME_decide() answers a request of 'cost' at 'now' into 'out': the
 * clock held at the newest entry when it reads earlier, what left the span
 * trimmed, and the request admitted iff live + cost <= max, then recorded
 * when 'consume' is true. A refusal waits until the (live + cost - max)'th
 * oldest unit leaves, at its t + window; the budget is whole again when
 * the newest entry leaves. Returns 0, or the code of a primitive that
 * stopped it (where ADD stopped it, 'out' holds the answer it would
 * have been).
 */
#define SLUICE__LOG_DEFINE(NAME, log_t, num, FIGURE, NEWEST, TRIM, TOTAL,    \
                           KTH, ADD)                                          \
    static inline int NAME##_decide(log_t *v, const sluice_limit *limit,      \
                                    num now, uint64_t cost, bool consume,     \
                                    sluice_decision *out)                     \
    {                                                                         \
        num w = (num)limit->window_ms, newest, leaving;                       \
        uint64_t max = limit->max, total;                                     \
        bool found;                                                           \
        int rc;                                                               \
                                                                              \
        if ((rc = NEWEST(v, &found, &newest)) != 0)                           \
            return rc;                                                        \
        if (found && newest > now)                                            \
            now = newest;                                                     \
        TRIM(v, now, w);                                                      \
        if ((rc = TOTAL(v, &total)) != 0)                                     \
            return rc;                                                        \
        out->limit = max;                                                     \
        if (total + cost <= max) {                                            \
            out->allowed = 1;                                                 \
            out->remaining = max - total - cost;                              \
            out->retry_after_ms = 0;                                          \
            out->reset_after_ms = limit->window_ms; /* the new entries' */    \
            return consume ? ADD(v, now, cost) : 0;                           \
        }                                                                     \
        /* total + cost > max >= cost: the log is not empty. */               \
        if ((rc = KTH(v, total + cost - max, &leaving)) != 0 ||               \
            (rc = NEWEST(v, &found, &newest)) != 0)                           \
            return rc;                                                        \
        out->allowed = 0;                                                     \
        out->remaining = total < max ? max - total : 0;                       \
        out->retry_after_ms = FIGURE(leaving - now + w);                      \
        out->reset_after_ms = FIGURE(newest - now + w);                       \
        return 0;                                                             \
    }

#endif /* SLUICE_ALGO_SLIDING_LOG_H */
