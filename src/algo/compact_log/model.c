/*
 * model.c - the compact log's reference model (src/algo/model.h), for the
 * tests. Its definition is the sliding log's: a unit admitted at t counts
 * at every time in [t, t + window), and a request fits iff the units that
 * count plus its cost are at most max. So the model is a plain list of one
 * time per admitted unit, in the order admitted, scanned whole each time.
 */
#include "algo/model.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct clog_model {
    uint64_t when[SLUICE__MODEL_MAX];
    size_t n;
} clog_model;

SLUICE__MODEL_FITS(clog_model);

/* Does the unit admitted at 'when' count at 't'? */
static bool counts(const sluice__model *m, uint64_t when, uint64_t t)
{
    return when <= t && t < when + m->limit.window_ms;
}

/* How many admitted units count at 't'. */
static uint64_t counted(const sluice__model *m, uint64_t t)
{
    const clog_model *c = SLUICE__MODEL_STATE(const clog_model, m);
    uint64_t n = 0;

    for (size_t i = 0; i < c->n; i++)
        n += counts(m, c->when[i], t);
    return n;
}

static bool admits(const sluice__model *m, uint64_t t, uint64_t cost)
{
    return counted(m, t) + cost <= m->limit.max;
}

static void count(sluice__model *m, uint64_t t, uint64_t cost)
{
    clog_model *c = SLUICE__MODEL_STATE(clog_model, m);
    size_t kept = 0;

    /* A unit that no longer counts never will again (time only grows). */
    for (size_t i = 0; i < c->n; i++)
        if (counts(m, c->when[i], t))
            c->when[kept++] = c->when[i];
    c->n = kept;
    if (c->n + cost > SLUICE__MODEL_MAX) {
        fprintf(stderr, "model: compact log overflow (more than max units)\n");
        exit(2);
    }
    while (cost-- > 0)
        c->when[c->n++] = t;
}

static uint64_t remaining(const sluice__model *m, uint64_t t)
{
    uint64_t used = counted(m, t);

    return used >= m->limit.max ? 0 : m->limit.max - used;
}

static bool whole(const sluice__model *m, uint64_t t)
{
    return counted(m, t) == 0;
}

/* Any span one window long is one window of the log: at most max. */
static uint64_t span_bound(uint64_t max, uint64_t window_ms)
{
    (void)window_ms;
    return max;
}

const sluice__model_ops sluice__model_compact_log = {
    .init = NULL,
    .admits = admits,
    .count = count,
    .remaining = remaining,
    .whole = whole,
    .span_bound = span_bound,
    .server_clock = false,
};
