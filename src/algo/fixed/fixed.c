/*
 * fixed.c - the fixed window.
 *
 * One counter per key. The first admitted request, at t0, creates it and arms
 * its expiry at t0 + window; the expiry is never moved. From that instant on
 * (now >= t0 + window) the counter is gone and the next admitted request
 * starts a fresh window. A request of 'cost' is admitted iff
 * count + cost <= max; only admitted requests add to the count.
 *
 *        t0                      t0 + window
 *        |<------- window ------->|
 *   hits ^  ^ ^    ^      ^   x x |^ <- fresh window, count = cost
 *        count grows to max, then refusals wait (t0 + window - now) ms
 *
 * This is the reference design's INCR + PEXPIRE-once + PTTL, kept in memory:
 * 'expires_ms' is the key's expiry, and (expires_ms - now) its PTTL.
 */
#include "algo/algo.h"

typedef struct fixed_state {
    uint64_t count;      /* units admitted in the live window; 0 = no key */
    uint64_t expires_ms; /* t0 + window: when the key vanishes */
} fixed_state;

static void fixed_init(void *state)
{
    fixed_state *s = state;

    s->count = 0;
    s->expires_ms = 0;
}

static int fixed_decide(void *state, const sluice_limit *limit,
                        uint64_t now_ms, uint64_t cost, bool consume,
                        sluice_decision *out)
{
    fixed_state *s = state;
    uint64_t count = s->count;
    uint64_t expires_ms = s->expires_ms;

    if (count > 0 && now_ms >= expires_ms)
        count = 0; /* the key has expired */
    if (count == 0)
        expires_ms = now_ms + limit->window_ms; /* would be armed by this hit */

    out->limit = limit->max;
    /* 'count' <= max (or a lowered max) and cost <= max: no overflow. */
    if (count + cost <= limit->max) {
        out->allowed = 1;
        out->remaining = limit->max - count - cost;
        out->retry_after_ms = 0;
        out->reset_after_ms = expires_ms - now_ms;
        if (consume) {
            s->count = count + cost;
            s->expires_ms = expires_ms;
        }
    } else {
        /* Refused: wait for the PTTL. At expires_ms the key is gone and the
           request (cost <= max) fits a fresh window; one ms before, the
           count is unchanged and it does not. */
        out->allowed = 0;
        out->remaining = count >= limit->max ? 0 : limit->max - count;
        out->retry_after_ms = expires_ms - now_ms;
        out->reset_after_ms = expires_ms - now_ms;
    }
    return SLUICE_OK;
}

static uint64_t fixed_idle_at(const void *state, const sluice_limit *limit)
{
    (void)limit;
    const fixed_state *s = state;

    return s->count == 0 ? 0 : s->expires_ms;
}

static size_t fixed_bytes(const void *state)
{
    (void)state;
    return 0;
}

static void fixed_release(void *state)
{
    (void)state;
}

/* ---- The word (algo.h's lock-free form) ------------------------------------ */

/*
 * The state in one word, for the embedded store's lock-free path:
 *
 *   bit 63      62 ........................ 24   23 ............. 0
 *   | store's | expires_ms - base_ms (39 bits) | count (24 bits) |
 *
 * Word 0 is the fresh state (no key). The range: max < 2^24 (16,777,216)
 * and an expiry within 2^39 ms (about 17 years) of the key's base; beyond
 * either, decide() answers SLUICE__WORD_RANGE and the store decides on the
 * struct under its lock, which gives the same answer.
 */
#define WORD_COUNT_BITS 24
#define WORD_COUNT_MAX (((uint64_t)1 << WORD_COUNT_BITS) - 1)
#define WORD_EXPIRES_MAX (((uint64_t)1 << 39) - 1)

static void fixed_word_load(uint64_t word, uint64_t base_ms, void *state)
{
    fixed_state *s = state;

    s->count = word & WORD_COUNT_MAX;
    s->expires_ms = s->count == 0 ? 0 : base_ms + (word >> WORD_COUNT_BITS);
}

static bool fixed_word_store(const void *state, uint64_t base_ms,
                             uint64_t *word)
{
    const fixed_state *s = state;

    if (s->count == 0) {
        *word = 0;
        return true;
    }
    if (s->count > WORD_COUNT_MAX || s->expires_ms < base_ms ||
        s->expires_ms - base_ms > WORD_EXPIRES_MAX)
        return false;
    *word = (s->expires_ms - base_ms) << WORD_COUNT_BITS | s->count;
    return true;
}

/*
 * fixed_decide() on the word: the same arithmetic, on the word's fields. The
 * expiry of a live word is >= base_ms, and 'now_ms' >= base_ms, so the
 * differences below do not wrap.
 */
static int fixed_word_decide(uint64_t word, uint64_t base_ms,
                             const sluice_limit *limit, uint64_t now_ms,
                             uint64_t cost, bool consume, uint64_t *next,
                             sluice_decision *out)
{
    uint64_t count = word & WORD_COUNT_MAX;
    uint64_t expires_ms = base_ms + (word >> WORD_COUNT_BITS);

    if (limit->max > WORD_COUNT_MAX)
        return SLUICE__WORD_RANGE;
    if (count > 0 && now_ms >= expires_ms)
        count = 0;
    if (count == 0)
        expires_ms = now_ms + limit->window_ms;
    out->limit = limit->max;
    *next = word;
    if (count + cost <= limit->max) {
        out->allowed = 1;
        out->remaining = limit->max - count - cost;
        out->retry_after_ms = 0;
        out->reset_after_ms = expires_ms - now_ms;
        if (consume) {
            if (expires_ms - base_ms > WORD_EXPIRES_MAX)
                return SLUICE__WORD_RANGE;
            *next = (expires_ms - base_ms) << WORD_COUNT_BITS | (count + cost);
        }
    } else {
        out->allowed = 0;
        out->remaining = count >= limit->max ? 0 : limit->max - count;
        out->retry_after_ms = expires_ms - now_ms;
        out->reset_after_ms = expires_ms - now_ms;
    }
    return SLUICE_OK;
}

static const sluice__word_ops fixed_word = {
    .load = fixed_word_load,
    .store = fixed_word_store,
    .decide = fixed_word_decide,
};

const sluice__algo sluice__algo_fixed = {
    .name = "fixed",
    .script = &sluice__script_fixed,
    .server_value = "a number",
    /* Its count only grows until the key expires: a refusal stands. */
    .refused_cache_default = true,
    /* Its reset is the key's PTTL, which a key given a longer life by
       something else may pass: no bound. */
    .reset_windows = 0,
    .state_size = sizeof(fixed_state),
    .init = fixed_init,
    .decide = fixed_decide,
    .idle_at = fixed_idle_at,
    .bytes = fixed_bytes,
    .release = fixed_release,
    .word = &fixed_word,
};
