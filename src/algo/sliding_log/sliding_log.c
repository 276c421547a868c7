/*
 * sliding_log.c - the sliding log.
 *
 * The exact record of what was admitted: a request admitted at time t counts
 * against every request in [t, t + window). On each request, entries with
 * t + window <= now leave, the rest are the live count, and a request of
 * 'cost' is admitted iff live + cost <= max; it then records 'cost' entries
 * at now.
 *
 * Entries at the same millisecond are kept as one run {t, n}, in a ring of
 * runs ordered by time (the clock never goes backwards on a state):
 *
 *     head                        head + len - 1
 *      v                              v
 *   [ {t0,n0} {t1,n1} ... {tk,nk} ... ]    t0 < t1 < ... ,  total = sum n
 *
 * A key never holds more than max entries, so never more than max runs.
 * The ring grows by doubling and halves when it is mostly empty.
 */
#include "algo/sliding_log/sliding_log.h"

#include <stdlib.h>
#include <string.h>

typedef struct log_run {
    uint64_t t;
    uint64_t n;
} log_run;

typedef struct log_state {
    log_run *runs;
    uint32_t head, len, cap;
    uint64_t total; /* sum of n over the live runs */
} log_state;

#define LOG_MIN_CAP 4u
#define LOG_MAX_CAP ((uint32_t)1 << 31)

static void log_init(void *state)
{
    log_state *s = state;

    s->runs = NULL;
    s->head = s->len = s->cap = 0;
    s->total = 0;
}

static log_run *log_at(const log_state *s, uint32_t i)
{
    return &s->runs[(s->head + i) & (s->cap - 1)];
}

/* Moves the runs into a ring of 'cap' (a power of two >= len). */
static int log_resize(log_state *s, uint32_t cap)
{
    log_run *runs = malloc((size_t)cap * sizeof(*runs));

    if (runs == NULL)
        return sluice__error(SLUICE_ENOMEM,
                             "cannot grow a sliding log to %u runs", cap);
    for (uint32_t i = 0; i < s->len; i++)
        runs[i] = *log_at(s, i);
    free(s->runs);
    s->runs = runs;
    s->head = 0;
    s->cap = cap;
    return SLUICE_OK;
}

/* Drops the runs that have left the span: t + window <= now. Frees
   nothing (log_settle() does, once the decision has appended). */
static void log_trim(log_state *s, uint64_t window_ms, uint64_t now_ms)
{
    while (s->len > 0) {
        log_run *run = log_at(s, 0);

        if (run->t + window_ms > now_ms)
            break;
        s->total -= run->n;
        s->head = (s->head + 1) & (s->cap - 1);
        s->len--;
    }
}

/* Gives back what the runs no longer need: all of it when none is left, half
   when they fill an eighth. */
static void log_settle(log_state *s)
{
    if (s->len == 0 && s->runs != NULL) {
        free(s->runs);
        log_init(s);
    } else if (s->cap > 4 * LOG_MIN_CAP && s->len <= s->cap / 8) {
        (void)log_resize(s, s->cap / 2); /* a failed shrink changes nothing */
    }
}

/* Appends 'cost' entries at 'now'; the state is unchanged on failure. */
static int log_append(log_state *s, uint64_t now_ms, uint64_t cost)
{
    int err;

    if (s->len > 0 && log_at(s, s->len - 1)->t == now_ms) {
        log_at(s, s->len - 1)->n += cost;
    } else {
        if (s->len == s->cap) {
            if (s->cap == LOG_MAX_CAP)
                return sluice__error(SLUICE_ENOMEM,
                                     "a sliding log cannot hold more than "
                                     "%u distinct times", LOG_MAX_CAP);
            err = log_resize(s, s->cap == 0 ? LOG_MIN_CAP : s->cap * 2);
            if (err < 0)
                return err;
        }
        *log_at(s, s->len) = (log_run){now_ms, cost};
        s->len++;
    }
    s->total += cost;
    return SLUICE_OK;
}

/* ---- The decision (sliding_log.h), on the ring --------------------------- */

/* The newest run's time, if there is one. */
static inline int log_newest(const log_state *s, bool *found, uint64_t *t)
{
    *found = s->len > 0;
    *t = *found ? log_at(s, s->len - 1)->t : 0;
    return SLUICE_OK;
}

static inline int log_total(const log_state *s, uint64_t *total)
{
    *total = s->total;
    return SLUICE_OK;
}

/* The time of the k'th oldest live unit, 1 <= k <= total: the run that
   the running count of units reaches k in. */
static inline int log_kth(const log_state *s, uint64_t k, uint64_t *t)
{
    uint64_t seen = 0;
    uint32_t i = 0;

    for (;; i++) {
        seen += log_at(s, i)->n;
        if (seen >= k)
            break;
    }
    *t = log_at(s, i)->t;
    return SLUICE_OK;
}

#define LOG_TRIM(s, now_ms, window_ms) log_trim(s, window_ms, now_ms)
SLUICE__LOG_DEFINE(log_exact, log_state, uint64_t, SLUICE__EXACT_FIGURE,
                   log_newest, LOG_TRIM, log_total, log_kth, log_append)

static int log_decide(void *state, const sluice_limit *limit, uint64_t now_ms,
                      uint64_t cost, bool consume, sluice_decision *out)
{
    log_state *s = state;
    int err = log_exact_decide(s, limit, now_ms, cost, consume, out);

    log_settle(s);
    return err;
}

/*
 * Makes room, so that a hit of 'cost' at 'now' that is admitted cannot fail
 * for memory (sluice_hit_all() reserves every limit before counting in
 * any). Changes no decision.
 */
static int log_reserve(void *state, const sluice_limit *limit,
                       uint64_t now_ms, uint64_t cost)
{
    log_state *s = state;

    log_trim(s, limit->window_ms, now_ms);
    if (s->total + cost > limit->max || /* refused: nothing appended */
        (s->len > 0 && log_at(s, s->len - 1)->t == now_ms) ||
        s->len < s->cap)
        return SLUICE_OK;
    if (s->cap == LOG_MAX_CAP)
        return sluice__error(SLUICE_ENOMEM, "a sliding log cannot hold more "
                             "than %u distinct times", LOG_MAX_CAP);
    return log_resize(s, s->cap == 0 ? LOG_MIN_CAP : s->cap * 2);
}

static uint64_t log_idle_at(const void *state, const sluice_limit *limit)
{
    const log_state *s = state;

    /* Every run leaves no later than the newest one. */
    return s->len == 0 ? 0 : log_at(s, s->len - 1)->t + limit->window_ms;
}

static size_t log_bytes(const void *state)
{
    const log_state *s = state;

    return (size_t)s->cap * sizeof(log_run);
}

static void log_release(void *state)
{
    log_state *s = state;

    free(s->runs);
    log_init(s);
}

const sluice__algo sluice__algo_sliding_log = {
    .name = "sliding-log",
    .state_size = sizeof(log_state),
    .init = log_init,
    .decide = log_decide,
    .idle_at = log_idle_at,
    .bytes = log_bytes,
    .release = log_release,
    .reserve = log_reserve,
};

const sluice__algo_server sluice__algo_server_sliding_log = {
    .value = "a sorted set",
    /* What it counts only leaves at its time: a refusal stands. */
    .refused_cache_default = true,
    .reset_windows = 1, /* the newest entry's t + window - now */
};
