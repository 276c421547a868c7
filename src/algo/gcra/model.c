/*
 * model.c - GCRA's reference model (src/algo/model.h), for the tests:
 * virtual scheduling, read off its definition. The theoretical arrival
 * time is kept as one exact number of 1/max ms (times are multiplied by
 * max, so the emission interval window / max is 'window' of them), in 128
 * bits so that nothing can overflow.
 */
#include "algo/model.h"

typedef unsigned __int128 u128;

typedef struct gcra_model {
    u128 tat; /* the theoretical arrival time, x max */
} gcra_model;

SLUICE__MODEL_FITS(gcra_model);

static uint64_t burst_of(const sluice__model *m)
{
    return m->limit.burst != 0 ? m->limit.burst : m->limit.max;
}

/* max(TAT, t), x max. */
static u128 start_at(const sluice__model *m, uint64_t t)
{
    const gcra_model *g = SLUICE__MODEL_STATE(const gcra_model, m);
    u128 now = (u128)t * m->limit.max;

    return g->tat > now ? g->tat : now;
}

/* Admitted iff max(TAT, t) + cost x T - t <= burst x T. */
static bool admits(const sluice__model *m, uint64_t t, uint64_t cost)
{
    u128 w = m->limit.window_ms;

    return start_at(m, t) + cost * w <=
           (u128)t * m->limit.max + burst_of(m) * w;
}

static void count(sluice__model *m, uint64_t t, uint64_t cost)
{
    gcra_model *g = SLUICE__MODEL_STATE(gcra_model, m);

    g->tat = start_at(m, t) + (u128)cost * m->limit.window_ms;
}

/* The largest cost admitted at 't', by counting up. */
static uint64_t remaining(const sluice__model *m, uint64_t t)
{
    uint64_t n = 0;

    while (n < burst_of(m) && admits(m, t, n + 1))
        n++;
    return n;
}

static bool whole(const sluice__model *m, uint64_t t)
{
    const gcra_model *g = SLUICE__MODEL_STATE(const gcra_model, m);

    return g->tat <= (u128)t * m->limit.max;
}

/*
 * With burst = max (the default): each admission leaves TAT at most
 * 'burst' intervals after its own time, and moves TAT on by at least its
 * cost in intervals from the span's start s. So the units admitted at
 * s .. s + w - 1 are n with s + n x T <= (s + w - 1) + max x T:
 * n <= max + (w - 1) x max / w, i.e. max + floor((w - 1) x max / w).
 * A full bucket spent at once, then one unit per interval, reaches it.
 */
static uint64_t span_bound(uint64_t max, uint64_t w)
{
    return max + (uint64_t)((u128)(w - 1) * max / w);
}

const sluice__model_ops sluice__model_gcra = {
    .init = NULL,
    .admits = admits,
    .count = count,
    .remaining = remaining,
    .whole = whole,
    .span_bound = span_bound,
    /* gcra.lua decides on the clock it is given; the key's PX only drops
       a state that is whole again. */
    .server_clock = false,
};
