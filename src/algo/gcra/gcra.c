/*
 * gcra.c - the generic cell rate algorithm (GCRA): a token bucket kept as
 * one number, the theoretical arrival time (TAT), by virtual scheduling
 * (after redis-cell's CL.THROTTLE and Rust's governor).
 *
 * A limit of 'max' per 'window' (w) spaces units T = w / max ms apart, and
 * lets a burst of up to 'burst' (b, 1..max; 0 means max) units through at
 * once. TAT is when the bucket would be full again if nothing else came; a
 * fresh key has TAT <= now. A request of 'cost' (c) at 'now' is admitted iff
 *
 *   max(TAT, now) + c x T - now <= b x T,   and then   TAT = max(TAT, now) + c x T
 *
 *        now                      TAT      now + b x T
 *   ------|------------------------|------------|------> time
 *         |<------- debt D ------->|<- room --->|   admits c iff c x T <= room
 *
 * A refusal changes nothing. T is a rational number, so everything is
 * decided in exact integers, in units of 1/max ms (where T is w units):
 *
 *   - the state is TAT as whole ms 'tat_ms' plus a remainder 'rem' in
 *     1/max ms (0 <= rem < max): TAT x max = tat_ms x max + rem;
 *   - the debt D = (TAT - now) x max, 0 when TAT <= now; admitted iff
 *     D <= (b - c) x w, and then D becomes D + c x w;
 *   - remaining = floor((b x w - D) / w): the whole units admissible right
 *     after the decision;
 *   - retry_after_ms = ceil((D - (b - c) x w) / max): the least whole ms
 *     after which the refused request is admitted if nothing else arrives;
 *   - reset_after_ms = ceil(D / max): the least whole ms until TAT <= now,
 *     when the bucket is full again and the key may go (idle_at()).
 *
 * Bounds. D <= b x w <= max x w while the clock does not go back, and
 * gcra_check() refuses max x w > 2^53, so no debt, cost or room passes
 * 2^53 and the doubles of gcra.lua hold every one of them exactly. TAT's
 * whole ms may pass 2^53 (now <= 2^53, plus up to a window): gcra.lua
 * reads and writes them in two parts, above and below 10^6. A clock that
 * reads more than a window before TAT (it went back) is held at TAT - w
 * (D = max x w), as in gcra.lua; the embedded store never lets it go back.
 * A key asked under another max reads 'rem' in that max's units, a 'rem'
 * >= max counting as one whole ms: a change of max moves TAT by less than
 * 1 ms. A change of window or burst keeps TAT as it is.
 *
 * The state is the one number TAT x max held as quotient and remainder (so
 * that Lua stays exact); in the embedded store it is also one 64-bit word
 * (below), decided on with a compare-and-swap and no lock.
 */
#include "algo/algo.h"
#include "algo/gcra/gcra.h"

typedef sluice__gcra_state gcra_state;

/* Every figure, up to max x window, must stay exact in a double. */
static int gcra_check(const sluice_limit *limit)
{
    if (sluice__product_check(limit, "gcra") < 0)
        return SLUICE_ERANGE;
    if (limit->burst > limit->max)
        return sluice__error(SLUICE_ERANGE,
                             "gcra's burst %llu is out of range 1..max (%llu; "
                             "0 means max)",
                             (unsigned long long)limit->burst,
                             (unsigned long long)limit->max);
    return SLUICE_OK;
}

static void gcra_init(void *state)
{
    gcra_state *s = state;

    s->tat_ms = 0;
    s->rem = 0;
}

/* The debt D = (TAT - now) x max at 'now': 0 when TAT <= now, at most
   max x w (a clock more than a window before TAT is held at TAT - w). */
static uint64_t gcra_debt(const gcra_state *s, uint64_t max, uint64_t w,
                          uint64_t now_ms)
{
    uint64_t tat_ms = s->tat_ms, rem = s->rem, ahead;

    if (rem >= max) { /* written under a smaller max */
        tat_ms++;
        rem = 0;
    }
    if (tat_ms < now_ms || (tat_ms == now_ms && rem == 0))
        return 0;
    ahead = tat_ms - now_ms;
    if (ahead > w || (ahead == w && rem > 0))
        return max * w;
    return ahead * max + rem;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/*
 * 'cost' has been checked: 1 <= cost <= burst (sluice__request_check()).
 */
static int gcra_decide(void *state, const sluice_limit *limit,
                       uint64_t now_ms, uint64_t cost, bool consume,
                       sluice_decision *out)
{
    gcra_state *s = state;
    uint64_t max = limit->max, w = limit->window_ms;
    uint64_t b = sluice__limit_burst(limit);
    uint64_t debt = gcra_debt(s, max, w, now_ms);

    out->limit = max;
    if (debt <= (b - cost) * w) {
        out->allowed = 1;
        out->retry_after_ms = 0;
        debt += cost * w;
        if (consume) {
            s->tat_ms = now_ms + debt / max;
            s->rem = debt % max;
        }
    } else {
        out->allowed = 0;
        out->retry_after_ms = ceil_div(debt - (b - cost) * w, max);
    }
    out->remaining = debt < b * w ? (b * w - debt) / w : 0;
    out->reset_after_ms = ceil_div(debt, max);
    return SLUICE_OK;
}

/* When TAT <= now: TAT rounded up to whole ms; 0 when fresh. */
static uint64_t gcra_idle_at(const void *state, const sluice_limit *limit)
{
    (void)limit;
    const gcra_state *s = state;

    return s->tat_ms + (s->rem != 0);
}

static size_t gcra_bytes(const void *state)
{
    (void)state;
    return 0;
}

static void gcra_release(void *state)
{
    (void)state;
}

/* ---- The word (algo.h's lock-free form) ------------------------------------ */

/*
 * TAT in one word, for the embedded store's lock-free path, laid out as the
 * fixed window's: the remainder takes as many bits as it needs ('n', its bit
 * length), TAT's whole ms, relative to the key's base, the rest:
 *
 *   bit 63     62 ... 57   56 ............... n   n - 1 ....... 0
 *   | store's | n (6 bits) | tat_ms - base_ms    | rem (n bits)   |
 *
 * Word 0 is the fresh state. So is every TAT <= base: the store passes no
 * time before the base, and at any later time such a TAT gives a debt of 0,
 * as a fresh state does. A TAT more than 2^(57 - n) ms past the base (with
 * max under 2^27, say, more than 12 days) stays in the struct, under the
 * store's lock, which gives the same answer.
 */
#define WORD_BITS 57
#define WORD_MASK (((uint64_t)1 << WORD_BITS) - 1)

static void gcra_word_load(uint64_t word, uint64_t base_ms, void *state)
{
    gcra_state *s = state;
    unsigned n = (unsigned)(word >> WORD_BITS);

    if (word == 0) {
        gcra_init(s);
        return;
    }
    s->rem = word & (((uint64_t)1 << n) - 1);
    s->tat_ms = base_ms + ((word & WORD_MASK) >> n);
}

static bool gcra_word_store(const void *state, uint64_t base_ms,
                            uint64_t *word)
{
    const gcra_state *s = state;
    unsigned n = s->rem == 0 ? 0 : 64u - (unsigned)__builtin_clzll(s->rem);

    if (s->tat_ms < base_ms || (s->tat_ms == base_ms && s->rem == 0)) {
        *word = 0; /* TAT <= base: as fresh from now on */
        return true;
    }
    if (n > WORD_BITS ||
        s->tat_ms - base_ms >= (uint64_t)1 << (WORD_BITS - n))
        return false;
    *word = (uint64_t)n << WORD_BITS | (s->tat_ms - base_ms) << n | s->rem;
    return true;
}

/*
 * The decision on a word: load(), gcra_decide() and store(), as
 * sluice__word_decide() runs them, in one function the compiler inlines
 * (no indirect calls on the lock-free path). 'out' is written only when the
 * new state fits a word.
 */
static int gcra_word_decide(uint64_t word, uint64_t base_ms,
                            const sluice_limit *limit, uint64_t now_ms,
                            uint64_t cost, bool consume, uint64_t *next,
                            sluice_decision *out)
{
    gcra_state s;
    sluice_decision d = *out;
    int err;

    gcra_word_load(word, base_ms, &s);
    if ((err = gcra_decide(&s, limit, now_ms, cost, consume, &d)) < 0)
        return err;
    if (!gcra_word_store(&s, base_ms, next))
        return SLUICE__WORD_RANGE;
    *out = d;
    return SLUICE_OK;
}

static const sluice__word_ops gcra_word = {
    .load = gcra_word_load,
    .store = gcra_word_store,
    .decide = gcra_word_decide,
};

const sluice__algo sluice__algo_gcra = {
    .name = "gcra",
    .has_burst = true,
    .check = gcra_check,
    .state_size = sizeof(gcra_state),
    .init = gcra_init,
    .decide = gcra_decide,
    .idle_at = gcra_idle_at,
    .bytes = gcra_bytes,
    .release = gcra_release,
    .word = &gcra_word,
};

const sluice__algo_server sluice__algo_server_gcra = {
    .value = "a string: the TAT in ms, and ':' and its remainder "
             "in 1/max ms when it has one",
    /* TAT only moves forward while a refusal waits: a refusal stands. */
    .refused_cache_default = true,
    .reset_windows = 1, /* ceil(D / max) <= window */
};
