/*
 * model.c - the sliding counter's reference model (src/algo/model.h), for
 * the tests: a map from window index (now / window) to the units admitted
 * in that window; the estimate cur + prev x (window - elapsed) / window is
 * compared in exact rationals (everything multiplied by window).
 */
#include "algo/model.h"

#include <stdio.h>
#include <stdlib.h>

#define WINDOWS 8 /* windows a model remembers */

typedef unsigned __int128 u128;

typedef struct counter_model {
    struct {
        uint64_t idx;
        uint64_t units;
    } win[WINDOWS];
    int nwin;
} counter_model;

SLUICE__MODEL_FITS(counter_model);

/* The units admitted in window 'idx'. */
static uint64_t units_in(const sluice__model *m, uint64_t idx)
{
    const counter_model *c = SLUICE__MODEL_STATE(const counter_model, m);

    for (int i = 0; i < c->nwin; i++)
        if (c->win[i].idx == idx)
            return c->win[i].units;
    return 0;
}

/* The estimate at 't', times the window (exact). */
static u128 estimate_w(const sluice__model *m, uint64_t t)
{
    uint64_t w = m->limit.window_ms;
    uint64_t idx = t / w;
    uint64_t elapsed = t - idx * w;
    uint64_t cur = units_in(m, idx);
    uint64_t prev = idx == 0 ? 0 : units_in(m, idx - 1);

    return (u128)cur * w + (u128)prev * (w - elapsed);
}

static bool admits(const sluice__model *m, uint64_t t, uint64_t cost)
{
    uint64_t w = m->limit.window_ms;

    return estimate_w(m, t) + (u128)cost * w <= (u128)m->limit.max * w;
}

static void count(sluice__model *m, uint64_t t, uint64_t cost)
{
    counter_model *c = SLUICE__MODEL_STATE(counter_model, m);
    uint64_t idx = t / m->limit.window_ms;
    int i, kept = 0;

    /* Windows before idx - 1 can never count again (time only moves
       forward), so the map keeps at most two. */
    for (i = 0; i < c->nwin; i++)
        if (c->win[i].idx + 1 >= idx)
            c->win[kept++] = c->win[i];
    c->nwin = kept;
    for (i = 0; i < c->nwin; i++)
        if (c->win[i].idx == idx)
            break;
    if (i == c->nwin) {
        if (c->nwin == WINDOWS) {
            fprintf(stderr, "model: too many windows\n");
            exit(2);
        }
        c->win[i].idx = idx;
        c->win[i].units = 0;
        c->nwin++;
    }
    c->win[i].units += cost;
}

static uint64_t remaining(const sluice__model *m, uint64_t t)
{
    uint64_t max = m->limit.max, w = m->limit.window_ms;
    u128 est = estimate_w(m, t);

    return est >= (u128)max * w ? 0 : (uint64_t)(((u128)max * w - est) / w);
}

static bool whole(const sluice__model *m, uint64_t t)
{
    return estimate_w(m, t) == 0;
}

/*
 * A span [s, s + w) starting p ms into window k - 1 (1 <= p <= w - 1)
 * holds at most all of that window's count c <= max, plus what window k
 * admitted before elapsed p - 1; the last of those was admitted only if
 * its window's count c_k plus c x (w - e) / w stayed within max, with
 * e <= p - 1 <= w - 2. So
 *     total <= c + max - ceil(c x 2 / w) <= 2 max - ceil(2 max / w),
 * which is reached by max requests in the last ms of a window followed by
 * a greedy client. With w = 1 every span is one window: max. With w = 2 it
 * is max too.
 */
static uint64_t span_bound(uint64_t max, uint64_t w)
{
    if (w == 1)
        return max;
    return 2 * max - (2 * max + w - 1) / w;
}

const sluice__model_ops sluice__model_sliding_counter = {
    .init = NULL,
    .admits = admits,
    .count = count,
    .remaining = remaining,
    .whole = whole,
    .span_bound = span_bound,
    .server_clock = false,
};
