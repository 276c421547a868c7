/*
 * sliding_counter.c - the sliding-window counter.
 *
 * Windows are aligned to multiples of 'window' (w) from the clock's zero. The
 * state is the current window's index and the current and previous windows'
 * counts. At 'now', 'elapsed' = now - start of the current window, and the
 * part of the previous window still inside the rolling span [now - w, now)
 * is (w - elapsed) / w of it:
 *
 *        previous window          current window
 *   |-------------------------|-------------------------|
 *               [=============|=======]  <- rolling span, w long, ends now
 *                 w - elapsed   elapsed
 *
 *   estimate = cur + prev * (w - elapsed) / w
 *
 * A request of 'cost' is admitted iff estimate + cost <= max. The estimate is
 * a rational number; all of it is decided in exact integers:
 *
 *   - since max, cur and cost are integers, a real y is <= the integer
 *     max - cur - cost iff ceil(y) is:
 *     cur + prev*r/w + cost <= max  <=>  cur + ceil(prev*r/w) + cost <= max;
 *   - remaining = floor(max - estimate) = max - cur - ceil(prev*r/w);
 *   - prev*r <= max*w <= 2^53 (checked by counter_check()), so no product
 *     overflows, here or in a double in Lua.
 *
 * The estimate never increases while no request is admitted (it falls within
 * a window and does not jump up at the seam), so the least wait before a
 * refused request fits is found in closed form below, not by search.
 */
#include "algo/algo.h"

typedef struct counter_state {
    uint64_t window_ms; /* the window the counts were made with; 0 = fresh */
    uint64_t idx;       /* current window's index: start = idx * window_ms */
    uint64_t cur;       /* units admitted in window idx */
    uint64_t prev;      /* units admitted in window idx - 1 */
} counter_state;

/* Every product prev x r <= max x window must stay exact in a double. */
static int counter_check(const sluice_limit *limit)
{
    return sluice__product_check(limit, "sliding-counter");
}

static void counter_init(void *state)
{
    counter_state *s = state;

    s->window_ms = 0;
    s->idx = 0;
    s->cur = 0;
    s->prev = 0;
}

/* The largest r with prev * r <= x, for prev >= 1. */
static uint64_t largest_within(uint64_t prev, uint64_t x)
{
    return x / prev;
}

/*
 * The least wait before 'cost' fits, given that it does not fit now. 'cur' and
 * 'prev' are the counts of the current window, 'elapsed' ms into it.
 */
static uint64_t counter_retry(uint64_t max, uint64_t w, uint64_t cur,
                              uint64_t prev, uint64_t elapsed, uint64_t cost)
{
    uint64_t r, e_next;

    /* Later in this window: needs ceil(prev*r/w) <= A = max - cur - cost,
       i.e. prev*r <= A*w, with r = w - elapsed' >= 1. */
    if (cur + cost <= max && prev > 0) {
        r = largest_within(prev, (max - cur - cost) * w);
        if (r >= 1)
            return (w - r) - elapsed; /* r < w - elapsed, since refused now */
    }
    /* In the next window, 'cur' becomes the previous count and nothing is
       current: needs ceil(cur*r/w) <= max - cost. */
    if (cur == 0)
        return w - elapsed;
    r = largest_within(cur, (max - cost) * w);
    e_next = r >= w ? 0 : w - r; /* w - r == w: the start of idx + 2 */
    return (w - elapsed) + e_next;
}

static int counter_decide(void *state, const sluice_limit *limit,
                          uint64_t now_ms, uint64_t cost, bool consume,
                          sluice_decision *out)
{
    counter_state *s = state;
    uint64_t w = limit->window_ms;
    uint64_t idx = now_ms / w;
    uint64_t cur = 0, prev = 0;
    uint64_t elapsed = now_ms - idx * w;
    uint64_t r = w - elapsed; /* 1..w */
    uint64_t weighted_ceil, used;

    if (s->window_ms == w) {
        if (s->idx == idx) {
            cur = s->cur;
            prev = s->prev;
        } else if (s->idx + 1 == idx) {
            prev = s->cur;
        }
    }
    weighted_ceil = (prev * r + w - 1) / w;

    out->limit = limit->max;
    if (cur + weighted_ceil + cost <= limit->max) {
        out->allowed = 1;
        out->retry_after_ms = 0;
        cur += cost;
        if (consume) {
            s->window_ms = w;
            s->idx = idx;
            s->cur = cur;
            s->prev = prev;
        }
    } else {
        out->allowed = 0;
        out->retry_after_ms =
            counter_retry(limit->max, w, cur, prev, elapsed, cost);
    }
    used = cur + weighted_ceil;
    out->remaining = used >= limit->max ? 0 : limit->max - used;
    if (cur > 0)
        out->reset_after_ms = 2 * w - elapsed;
    else if (prev > 0)
        out->reset_after_ms = w - elapsed;
    else
        out->reset_after_ms = 0;
    return SLUICE_OK;
}

static uint64_t counter_idle_at(const void *state,
                                const sluice_limit *limit)
{
    (void)limit;
    const counter_state *s = state;

    if (s->cur > 0)
        return (s->idx + 2) * s->window_ms;
    if (s->prev > 0)
        return (s->idx + 1) * s->window_ms;
    return 0;
}

static size_t counter_bytes(const void *state)
{
    (void)state;
    return 0;
}

static void counter_release(void *state)
{
    (void)state;
}

const sluice__algo sluice__algo_sliding_counter = {
    .name = "sliding-counter",
    .check = counter_check,
    .state_size = sizeof(counter_state),
    .init = counter_init,
    .decide = counter_decide,
    .idle_at = counter_idle_at,
    .bytes = counter_bytes,
    .release = counter_release,
};

const sluice__algo_server sluice__algo_server_sliding_counter = {
    .value = "a hash",
    /* Its refusals are remembered only when asked (refused_cache=all). */
    .refused_cache_default = false,
    .reset_windows = 2, /* 2 x window - elapsed */
};
