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
 * refused request fits is found in closed form (sliding_counter.h), not by
 * search.
 */
#include "algo/sliding_counter/sliding_counter.h"

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

/*
 * The decision is sliding_counter.h's, the module's too, on the struct's
 * fields: the state's index and counts when it was made with this window.
 */
static int counter_decide(void *state, const sluice_limit *limit,
                          uint64_t now_ms, uint64_t cost, bool consume,
                          sluice_decision *out)
{
    counter_state *s = state;
    bool same_window = s->window_ms == limit->window_ms;
    uint64_t next[4], ttl_ms;

    /* 1 when admitted; never SLUICE_EPROTO: the struct has both counts. */
    if (sluice__counter_exact_decide(now_ms, same_window ? &s->idx : NULL,
                                     &s->cur, &s->prev, limit, cost, next,
                                     &ttl_ms, out) == 1 && consume) {
        s->window_ms = next[0];
        s->idx = next[1];
        s->cur = next[2];
        s->prev = next[3];
    }
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
