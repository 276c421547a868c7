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
#include "algo/fixed/fixed.h"

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

/*
 * The decision on 's' (count, expires_ms) at 'now_ms', into 'out', for the
 * struct and the word alike: the fixed window's own (fixed.h), on the
 * counter that 's' stands for -- a key while its count is above 0, its
 * PTTL expires_ms - now. Answers whether the request is admitted; '*s' is
 * then the state with it counted (else undefined: the caller keeps its
 * own).
 */
static inline bool fixed_step(fixed_state *s, const sluice_limit *limit,
                              uint64_t now_ms, uint64_t cost,
                              sluice_decision *out)
{
    long long ttl_ms = now_ms >= s->expires_ms
                           ? 0 : (long long)(s->expires_ms - now_ms);
    unsigned did = sluice__fixed_exact_decide(&s->count, &ttl_ms,
                                              s->count > 0, limit, cost,
                                              true, out);

    if (!(did & SLUICE__FIXED_COUNTED))
        return false;
    if (did & SLUICE__FIXED_ARMED)
        s->expires_ms = now_ms + limit->window_ms;
    return true;
}

static int fixed_decide(void *state, const sluice_limit *limit,
                        uint64_t now_ms, uint64_t cost, bool consume,
                        sluice_decision *out)
{
    fixed_state *s = state;
    fixed_state next = *s;

    if (fixed_step(&next, limit, now_ms, cost, out) && consume)
        *s = next;
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
 * The state in one word, for the embedded store's lock-free path. The count
 * takes as many bits as it needs ('n', the count's bit length, 0 for a
 * fresh state), and the expiry, relative to the key's base, the rest:
 *
 *   bit 63     62 ... 57   56 ............... n   n - 1 ....... 0
 *   | store's | n (6 bits) | expires_ms - base_ms | count (n bits) |
 *
 * Word 0 is the fresh state (no key). The range: an expiry less than
 * 2^(57 - n) ms after the key's base (with a count under 2^27, say, more
 * than 12 days); a state beyond it stays in the struct, under the store's
 * lock, which gives the same answer (the store then moves the key's base up
 * to the present, so it fits again unless the window itself is too long).
 */
#define WORD_BITS 57
#define WORD_MASK (((uint64_t)1 << WORD_BITS) - 1)

static unsigned bit_length(uint64_t v)
{
    return v == 0 ? 0 : 64u - (unsigned)__builtin_clzll(v);
}

static void fixed_word_load(uint64_t word, uint64_t base_ms, void *state)
{
    fixed_state *s = state;
    unsigned n = (unsigned)(word >> WORD_BITS);

    s->count = word & (((uint64_t)1 << n) - 1);
    s->expires_ms = s->count == 0 ? 0 : base_ms + ((word & WORD_MASK) >> n);
}

/* The word of (count, expires_ms), if it fits; count > 0. */
static bool word_of(uint64_t count, uint64_t expires_ms, uint64_t base_ms,
                    uint64_t *word)
{
    unsigned n = bit_length(count);

    if (expires_ms < base_ms || n > WORD_BITS ||
        expires_ms - base_ms >= (uint64_t)1 << (WORD_BITS - n))
        return false;
    *word = (uint64_t)n << WORD_BITS | (expires_ms - base_ms) << n | count;
    return true;
}

static bool fixed_word_store(const void *state, uint64_t base_ms,
                             uint64_t *word)
{
    const fixed_state *s = state;

    if (s->count == 0) {
        *word = 0;
        return true;
    }
    return word_of(s->count, s->expires_ms, base_ms, word);
}

/*
 * fixed_decide() on the word: the same step, on the word's fields.
 * 'now_ms' >= base_ms; a new expiry that does not fit is SLUICE__WORD_RANGE.
 */
static int fixed_word_decide(uint64_t word, uint64_t base_ms,
                             const sluice_limit *limit, uint64_t now_ms,
                             uint64_t cost, bool consume, uint64_t *next,
                             sluice_decision *out)
{
    unsigned n = (unsigned)(word >> WORD_BITS);
    fixed_state s = {.count = word & (((uint64_t)1 << n) - 1),
                     .expires_ms = base_ms + ((word & WORD_MASK) >> n)};

    *next = word;
    if (fixed_step(&s, limit, now_ms, cost, out) && consume &&
        !word_of(s.count, s.expires_ms, base_ms, next))
        return SLUICE__WORD_RANGE;
    return SLUICE_OK;
}

static const sluice__word_ops fixed_word = {
    .load = fixed_word_load,
    .store = fixed_word_store,
    .decide = fixed_word_decide,
};

const sluice__algo sluice__algo_fixed = {
    .name = "fixed",
    .state_size = sizeof(fixed_state),
    .init = fixed_init,
    .decide = fixed_decide,
    .idle_at = fixed_idle_at,
    .bytes = fixed_bytes,
    .release = fixed_release,
    .word = &fixed_word,
};

const sluice__algo_server sluice__algo_server_fixed = {
    .value = "a number",
    /* Its count only grows until the key expires: a refusal stands. */
    .refused_cache_default = true,
    /* Its reset is the key's PTTL, which a key given a longer life by
       something else may pass: no bound. */
    .reset_windows = 0,
};
