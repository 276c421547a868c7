/*
 * model.c - the sliding log's reference model (src/algo/model.h), for the
 * tests: the time of every admitted unit, oldest first; those with
 * t > now - window count.
 */
#include "algo/model.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct log_model {
    uint64_t stamp[SLUICE__MODEL_MAX];
    size_t nstamp;
} log_model;

SLUICE__MODEL_FITS(log_model);

/* The units admitted in (t - window, t]. */
static uint64_t live(const sluice__model *m, uint64_t t)
{
    const log_model *g = SLUICE__MODEL_STATE(const log_model, m);
    uint64_t n = 0;

    for (size_t i = 0; i < g->nstamp; i++)
        if (g->stamp[i] + m->limit.window_ms > t)
            n++;
    return n;
}

static bool admits(const sluice__model *m, uint64_t t, uint64_t cost)
{
    return live(m, t) + cost <= m->limit.max;
}

static void count(sluice__model *m, uint64_t t, uint64_t cost)
{
    log_model *g = SLUICE__MODEL_STATE(log_model, m);
    size_t kept = 0;

    /* Units that have left can never count again. */
    for (size_t i = 0; i < g->nstamp; i++)
        if (g->stamp[i] + m->limit.window_ms > t)
            g->stamp[kept++] = g->stamp[i];
    g->nstamp = kept;
    if (g->nstamp + cost > SLUICE__MODEL_MAX) {
        fprintf(stderr, "model: log overflow (more than max entries)\n");
        exit(2);
    }
    for (uint64_t i = 0; i < cost; i++)
        g->stamp[g->nstamp++] = t;
}

static uint64_t remaining(const sluice__model *m, uint64_t t)
{
    uint64_t used = live(m, t);

    return used >= m->limit.max ? 0 : m->limit.max - used;
}

static bool whole(const sluice__model *m, uint64_t t)
{
    const log_model *g = SLUICE__MODEL_STATE(const log_model, m);

    /* The newest unit is the last to leave; the list is in time order. */
    return g->nstamp == 0 ||
           g->stamp[g->nstamp - 1] + m->limit.window_ms <= t;
}

/* Every span of one window is one window of the log: max. */
static uint64_t span_bound(uint64_t max, uint64_t window_ms)
{
    (void)window_ms;
    return max;
}

const sluice__model_ops sluice__model_sliding_log = {
    .init = NULL,
    .admits = admits,
    .count = count,
    .remaining = remaining,
    .whole = whole,
    .span_bound = span_bound,
    .server_clock = false,
};
