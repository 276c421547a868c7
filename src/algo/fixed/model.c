/*
 * model.c - the fixed window's reference model (src/algo/model.h), for the
 * tests: a count and the instant t0 that opened its window; the window is
 * [t0, t0 + window).
 */
#include "algo/model.h"

typedef struct fixed_model {
    bool has_window;
    uint64_t t0;
    uint64_t count;
} fixed_model;

SLUICE__MODEL_FITS(fixed_model);

/* The units counted at 't'. */
static uint64_t count_at(const sluice__model *m, uint64_t t)
{
    const fixed_model *f = SLUICE__MODEL_STATE(const fixed_model, m);

    if (f->has_window && t < f->t0 + m->limit.window_ms)
        return f->count;
    return 0;
}

static bool admits(const sluice__model *m, uint64_t t, uint64_t cost)
{
    return count_at(m, t) + cost <= m->limit.max;
}

static void count(sluice__model *m, uint64_t t, uint64_t cost)
{
    fixed_model *f = SLUICE__MODEL_STATE(fixed_model, m);

    if (count_at(m, t) == 0) {
        f->has_window = true;
        f->t0 = t;
        f->count = 0;
    }
    f->count += cost;
}

static uint64_t remaining(const sluice__model *m, uint64_t t)
{
    uint64_t used = count_at(m, t);

    return used >= m->limit.max ? 0 : m->limit.max - used;
}

static bool whole(const sluice__model *m, uint64_t t)
{
    return count_at(m, t) == 0;
}

/* A span of w ms meets at most two windows, and if it holds the first
   instant of the earlier one it misses the later one; so it holds at most
   max - 1 of the earlier one: 2 max - 1. */
static uint64_t span_bound(uint64_t max, uint64_t window_ms)
{
    (void)window_ms;
    return 2 * max - 1;
}

const sluice__model_ops sluice__model_fixed = {
    .init = NULL,
    .admits = admits,
    .count = count,
    .remaining = remaining,
    .whole = whole,
    .span_bound = span_bound,
    /* fixed.lua: the window is the key's life, armed with PEXPIRE. */
    .server_clock = true,
};
