/*
 * compact_log.c - the compact sliding log.
 *
 * The same decisions as the sliding log (src/algo/sliding_log/), field for
 * field: a unit admitted at time t counts against every request in
 * [t, t + window); on each request, units with t + window <= now leave, the
 * rest are the live count, and a request of 'cost' is admitted iff
 * live + cost <= max, which then records 'cost' units at now. A refusal
 * waits until the oldest (live + cost - max) units have left: the last of
 * them leaves at its t + window. The budget is whole again when the newest
 * unit leaves.
 *
 * What differs is the state: one time per admitted unit, 8 bytes each, in a
 * ring ordered by time (the clock never goes backwards on a state):
 *
 *     head                         head + len - 1   (mod cap)
 *      v                                v
 *   [ t0  t1  t2 ... ti ... ] ... [ ... tn ]        t0 <= t1 <= ... <= tn
 *
 * so the c-th oldest live unit is one index away (O(1)), the newest too,
 * and the units that leave are a prefix, found by galloping from the
 * oldest and bisecting (one look when none leaves, O(log k) when k do).
 * On a server (compact_log.lua) the ring is a string read and written 8
 * bytes at a time with GETRANGE and SETRANGE, never whole; here it is an
 * array that grows by doubling and halves when it is mostly empty.
 *
 * Bound: max <= SLUICE_COMPACT_LOG_MAX (2^14), so a key's ring is at most
 * 128 KiB, and a request of cost c is one write of 8c bytes (clog_check()):
 * on a server about a millisecond at most, even where the ring is laid out
 * again (Lua makes a string of 512 KiB in 3-5 ms; 2^20 took 160 ms).
 */
#include "algo/compact_log/compact_log.h"

#include <stdlib.h>
#include <string.h>

typedef struct clog_state {
    uint64_t *t;              /* the ring: a time per admitted unit */
    uint32_t head, len, cap;  /* cap is 0 or a power of two */
} clog_state;

#define CLOG_MIN_CAP 8u

/* The ring bounds max: a ring of 2^14 times is 128 KiB. */
static int clog_check(const sluice_limit *limit)
{
    if (limit->max > SLUICE_COMPACT_LOG_MAX)
        return sluice__error(SLUICE_ERANGE,
                             "compact-log needs max <= %llu (max %llu): it "
                             "keeps 8 bytes per unit in the window",
                             (unsigned long long)SLUICE_COMPACT_LOG_MAX,
                             (unsigned long long)limit->max);
    return SLUICE_OK;
}

static void clog_init(void *state)
{
    clog_state *s = state;

    s->t = NULL;
    s->head = s->len = s->cap = 0;
}

/* The time of the i'th oldest live unit (0 <= i < len). */
#define CLOG_AT(s, i) ((s)->t[((s)->head + (i)) & ((s)->cap - 1)])

/* Moves the live units into a ring of 'cap' (a power of two >= len). */
static int clog_resize(clog_state *s, uint32_t cap)
{
    uint64_t *t = malloc((size_t)cap * sizeof(*t));

    if (t == NULL)
        return sluice__error(SLUICE_ENOMEM,
                             "cannot grow a compact log to %u units", cap);
    if (s->len > 0) {
        /* The live units, oldest first: up to the ring's end, then on from
           its start. */
        uint32_t first = s->cap - s->head < s->len ? s->cap - s->head : s->len;

        memcpy(t, s->t + s->head, (size_t)first * sizeof(*t));
        memcpy(t + first, s->t, (size_t)(s->len - first) * sizeof(*t));
    }
    free(s->t);
    s->t = t;
    s->head = 0;
    s->cap = cap;
    return SLUICE_OK;
}

/* The decision (compact_log.h), on the array. */
SLUICE__CLOG_DEFINE(clog_exact, clog_state, CLOG_AT)

/* Drops the oldest 'gone' units. */
static void clog_drop(clog_state *s, uint32_t gone)
{
    if (gone > 0) {
        s->head = (s->head + gone) & (s->cap - 1);
        s->len -= gone;
    }
}

/* Drops the units that have left the span. */
static void clog_trim(clog_state *s, uint64_t window_ms, uint64_t now_ms)
{
    clog_drop(s, clog_exact_gone(s, s->len, window_ms, now_ms));
}

/* Gives back what the ring no longer needs (after the decision has
   appended): all of it when empty, half when an eighth full. */
static void clog_settle(clog_state *s)
{
    if (s->len == 0 && s->t != NULL) {
        free(s->t);
        clog_init(s);
    } else if (s->cap > 4 * CLOG_MIN_CAP && s->len <= s->cap / 8) {
        (void)clog_resize(s, s->cap / 2); /* a failed shrink changes nothing */
    }
}

/* Sets the 'n' times from 't' to 'now_ms'. */
static void fill(uint64_t *t, uint32_t n, uint64_t now_ms)
{
    for (uint32_t i = 0; i < n; i++)
        t[i] = now_ms;
}

/* Appends 'cost' units at 'now'; the state is unchanged on failure.
   len + cost <= max <= 2^14 (checked by the caller and clog_check()). */
static int clog_append(clog_state *s, uint64_t now_ms, uint64_t cost)
{
    uint32_t need = s->len + (uint32_t)cost;
    uint32_t cap = s->cap == 0 ? CLOG_MIN_CAP : s->cap;
    uint32_t tail, first;
    int err;

    while (cap < need)
        cap *= 2;
    if (cap != s->cap && (err = clog_resize(s, cap)) < 0)
        return err;
    /* From the tail to the ring's end, then on from its start: two plain
       runs of stores, which the compiler vectorizes. */
    tail = (s->head + s->len) & (s->cap - 1);
    first = s->cap - tail < (uint32_t)cost ? s->cap - tail : (uint32_t)cost;
    fill(s->t + tail, first, now_ms);
    fill(s->t, (uint32_t)cost - first, now_ms);
    s->len = need;
    return SLUICE_OK;
}

static int clog_decide(void *state, const sluice_limit *limit,
                       uint64_t now_ms, uint64_t cost, bool consume,
                       sluice_decision *out)
{
    clog_state *s = state;
    int err;

    clog_drop(s, clog_exact_decide(s, s->len, limit, &now_ms, cost, out));
    if (out->allowed && consume && (err = clog_append(s, now_ms, cost)) < 0) {
        clog_settle(s);
        return err;
    }
    clog_settle(s);
    return SLUICE_OK;
}

/*
 * Makes room, so that a hit of 'cost' at 'now' that is admitted cannot fail
 * for memory (sluice_hit_all() reserves every limit before counting in
 * any). Changes no decision.
 */
static int clog_reserve(void *state, const sluice_limit *limit,
                        uint64_t now_ms, uint64_t cost)
{
    clog_state *s = state;
    uint32_t need, cap;

    clog_trim(s, limit->window_ms, now_ms);
    if (s->len + cost > limit->max)
        return SLUICE_OK; /* refused: nothing will be appended */
    need = s->len + (uint32_t)cost;
    cap = s->cap == 0 ? CLOG_MIN_CAP : s->cap;
    while (cap < need)
        cap *= 2;
    return cap == s->cap ? SLUICE_OK : clog_resize(s, cap);
}

static uint64_t clog_idle_at(const void *state, const sluice_limit *limit)
{
    const clog_state *s = state;

    /* Every unit leaves no later than the newest one. */
    return s->len == 0 ? 0 : CLOG_AT(s, s->len - 1) + limit->window_ms;
}

static size_t clog_bytes(const void *state)
{
    const clog_state *s = state;

    return (size_t)s->cap * sizeof(*s->t);
}

static void clog_release(void *state)
{
    clog_state *s = state;

    free(s->t);
    clog_init(s);
}

const sluice__algo sluice__algo_compact_log = {
    .name = "compact-log",
    .check = clog_check,
    .state_size = sizeof(clog_state),
    .init = clog_init,
    .decide = clog_decide,
    .idle_at = clog_idle_at,
    .bytes = clog_bytes,
    .release = clog_release,
    .reserve = clog_reserve,
};

const sluice__algo_server sluice__algo_server_compact_log = {
    .value = "a compact log (a string)",
    /* What it counts only leaves at its time: a refusal stands. */
    .refused_cache_default = true,
    .reset_windows = 1, /* the newest unit's t + window - now */
};
