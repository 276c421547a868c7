/*
 * model.c - what the reference models share (src/algo/model.h): their
 * table, from SLUICE_ALGO_MAP, and the decision found by stepping a model
 * forward one millisecond at a time. Each model is in
 * src/algo/FOLDER/model.c.
 */
#include "algo/model.h"

#include <string.h>

#define MODEL_ENTRY(name, val, folder) \
    [SLUICE_##name] = &sluice__model_##folder,
const sluice__model_ops *const sluice__models[] = {
    SLUICE_ALGO_MAP(MODEL_ENTRY)
};
#undef MODEL_ENTRY

#define NOT_FOUND UINT64_MAX

void sluice__model_init(sluice__model *m, const sluice_limit *limit)
{
    sluice_limit l = *limit; /* 'limit' may be m's own */

    memset(m, 0, sizeof(*m));
    m->limit = l;
    m->ops = sluice__models[l.algo];
    if (m->ops->init != NULL)
        m->ops->init(m);
}

/* The least d >= 1 at which the request would be admitted, by search. */
static uint64_t brute_retry(const sluice__model *m, uint64_t now,
                            uint64_t cost)
{
    uint64_t bound = 2 * m->limit.window_ms + 1;

    for (uint64_t d = 1; d <= bound; d++)
        if (m->ops->admits(m, now + d, cost))
            return d;
    return NOT_FOUND;
}

/* The least d >= 0 at which the state holds nothing, by search. */
static uint64_t brute_reset(const sluice__model *after, uint64_t now)
{
    uint64_t bound = 2 * after->limit.window_ms + 1;

    for (uint64_t d = 0; d <= bound; d++)
        if (after->ops->whole(after, now + d))
            return d;
    return NOT_FOUND;
}

void sluice__model_decide(sluice__model *m, uint64_t now, uint64_t cost,
                          bool consume, sluice_decision *out)
{
    sluice__model after = *m;

    memset(out, 0, sizeof(*out));
    out->limit = m->limit.max;
    if (m->ops->admits(m, now, cost)) {
        out->allowed = 1;
        out->retry_after_ms = 0;
        after.ops->count(&after, now, cost);
    } else {
        out->allowed = 0;
        out->retry_after_ms = brute_retry(m, now, cost);
    }
    out->remaining = after.ops->remaining(&after, now);
    out->reset_after_ms = brute_reset(&after, now);
    if (consume)
        *m = after;
}
