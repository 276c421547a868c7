/*
 * test_algo_twins.c - each decision made for two kinds of number
 * (src/algo/number.h) gives the same answer from both, on every state the
 * embedded store can hold: the store's exact integers, and the module's
 * doubles, the scripts' Lua numbers. Seeded random states, near the bounds
 * too (max up to 2^53 - 1, max x window up to 2^53 where it is checked):
 *
 *   - the fixed window (fixed.h): a counter found or not, at its last ms,
 *     without an expiry, at max, hits and peeks;
 *   - the sliding counter (sliding_counter.h): a state of this window or
 *     another, the current window or the previous one, a clock held at a
 *     state ahead of it;
 *   - the sliding log (sliding_log.h), over a small log of runs kept here in
 *     each kind of number: trims, refusals that bisect, the held clock.
 *
 * The compact log's decision has one kind of number (both sides hold the
 * same times); its two readers are held together by the server tests.
 *
 * Usage: test_algo_twins [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "rng.h"
#include "test.h"

#include "algo/fixed/fixed.h"
#include "algo/sliding_counter/sliding_counter.h"
#include "algo/sliding_log/sliding_log.h"

#include <inttypes.h>
#include <stdio.h>

#define ROUNDS 200000
#define TWO53 ((uint64_t)1 << 53)

/* A number now small, now near 'hi': the bounds are where doubles slip. */
static uint64_t some(uint64_t lo, uint64_t hi)
{
    if (rng_pct(30))
        return hi - rng_below(hi - lo < 4 ? hi - lo + 1 : 4);
    if (rng_pct(30))
        return rng_range(lo, lo + 10 < hi ? lo + 10 : hi);
    return rng_range(lo, hi);
}

static void same_decision(const sluice_decision *a, const sluice_decision *b)
{
    CHECK_EQ_U64(a->allowed, b->allowed);
    CHECK_EQ_U64(a->limit, b->limit);
    CHECK_EQ_U64(a->remaining, b->remaining);
    CHECK_EQ_U64(a->retry_after_ms, b->retry_after_ms);
    CHECK_EQ_U64(a->reset_after_ms, b->reset_after_ms);
}

/* ---- The fixed window ------------------------------------------------------ */

static void test_fixed(void)
{
    for (int i = 0; i < ROUNDS; i++) {
        sluice_limit l = {.algo = SLUICE_FIXED};
        sluice_decision de, dl;
        uint64_t count;
        long long te, tl;
        double c;
        bool found, consume = rng_pct(70);
        uint64_t cost;
        unsigned a, b;

        l.max = some(1, SLUICE_MAX_MAX);
        l.window_ms = some(1, SLUICE_WINDOW_MAX_MS);
        cost = some(1, l.max);
        count = rng_pct(20) ? 0 : some(0, l.max);
        found = count > 0 || rng_pct(20);
        te = tl = rng_pct(10) ? -1 : rng_pct(10) ? 0
                                   : (long long)some(1, l.window_ms);
        c = (double)count;
        test_context("fixed %d: count %" PRIu64 " max %" PRIu64 " cost %"
                     PRIu64 " ttl %lld", i, count, l.max, cost, te);
        a = sluice__fixed_exact_decide(&count, &te, found, &l, cost, consume,
                                       &de);
        b = sluice__fixed_decide(&c, &tl, found, &l, cost, consume, &dl);
        same_decision(&de, &dl);
        CHECK_EQ_U64(a, b);
        CHECK_EQ_U64(count, (uint64_t)c);
        CHECK_EQ_U64((uint64_t)te, (uint64_t)tl);
    }
}

/* ---- The sliding counter --------------------------------------------------- */

static void test_counter(void)
{
    for (int i = 0; i < ROUNDS; i++) {
        sluice_limit l = {.algo = SLUICE_SLIDING_COUNTER};
        sluice_decision de, dl;
        uint64_t now, idx, cur, prev, cost, ne[4], te = 0;
        double nl[4], tl = 0, idx_d, cur_d, prev_d;
        bool ours = rng_pct(80);
        int ra, rb;

        l.window_ms = some(1, 1u << 24);
        l.max = some(1, TWO53 / l.window_ms < SLUICE_MAX_MAX
                            ? TWO53 / l.window_ms : SLUICE_MAX_MAX);
        cost = some(1, l.max);
        now = some(2 * l.window_ms, SLUICE_NOW_MAX_MS - 2 * l.window_ms);
        idx = now / l.window_ms - rng_below(3) + (rng_pct(5) ? 3 : 0);
        if (idx > SLUICE_NOW_MAX_MS / l.window_ms) /* a clock's reach */
            idx = SLUICE_NOW_MAX_MS / l.window_ms;
        cur = some(0, l.max);
        prev = some(0, l.max);
        idx_d = (double)idx;
        cur_d = (double)cur;
        prev_d = (double)prev;
        test_context("counter %d: now %" PRIu64 " w %" PRIu64 " max %" PRIu64
                     " idx %" PRIu64 " cur %" PRIu64 " prev %" PRIu64, i, now,
                     l.window_ms, l.max, idx, cur, prev);
        ra = sluice__counter_exact_decide(now, ours ? &idx : NULL, &cur, &prev,
                                          &l, cost, ne, &te, &de);
        rb = sluice__counter_decide((double)now, ours ? &idx_d : NULL, &cur_d,
                                    &prev_d, &l, cost, nl, &tl, &dl);
        CHECK_EQ_U64((uint64_t)ra, (uint64_t)rb);
        same_decision(&de, &dl);
        for (int f = 0; ra == 1 && f < 4; f++)
            CHECK_EQ_U64(ne[f], (uint64_t)nl[f]);
        if (ra == 1)
            CHECK_EQ_U64(te, (uint64_t)tl);
    }
}

/* ---- The sliding log ------------------------------------------------------- */

/* A log of runs {t, n}, oldest first, in either kind of time. */
#define TEST_LOG_DEFINE(NAME, num)                                            \
    typedef struct NAME {                                                     \
        num t[16];                                                            \
        uint64_t n[16];                                                       \
        int first, len;                                                       \
    } NAME;                                                                   \
                                                                              \
    static int NAME##_newest(NAME *g, bool *found, num *t)                    \
    {                                                                         \
        *found = g->len > 0;                                                  \
        *t = *found ? g->t[g->first + g->len - 1] : 0;                        \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    static void NAME##_trim(NAME *g, num now, num w)                          \
    {                                                                         \
        while (g->len > 0 && now >= w && g->t[g->first] <= now - w) {         \
            g->first++;                                                       \
            g->len--;                                                         \
        }                                                                     \
    }                                                                         \
                                                                              \
    static int NAME##_total(NAME *g, uint64_t *total)                         \
    {                                                                         \
        *total = 0;                                                           \
        for (int i = 0; i < g->len; i++)                                      \
            *total += g->n[g->first + i];                                     \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    static int NAME##_kth(NAME *g, uint64_t k, num *t)                        \
    {                                                                         \
        uint64_t seen = 0;                                                    \
        int i = 0;                                                            \
                                                                              \
        while ((seen += g->n[g->first + i]) < k)                              \
            i++;                                                              \
        *t = g->t[g->first + i];                                              \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    static int NAME##_add(NAME *g, num now, uint64_t cost)                    \
    {                                                                         \
        g->t[g->first + g->len] = now;                                        \
        g->n[g->first + g->len++] = cost;                                     \
        return 0;                                                             \
    }

TEST_LOG_DEFINE(log_u, uint64_t)
TEST_LOG_DEFINE(log_d, double)
SLUICE__LOG_DEFINE(twin_exact, log_u, uint64_t, SLUICE__EXACT_FIGURE,
                   log_u_newest, log_u_trim, log_u_total, log_u_kth,
                   log_u_add)
SLUICE__LOG_DEFINE(twin_lua, log_d, double, SLUICE__LUA_FIGURE, log_d_newest,
                   log_d_trim, log_d_total, log_d_kth, log_d_add)

static void test_log(void)
{
    for (int i = 0; i < ROUNDS; i++) {
        sluice_limit l = {.algo = SLUICE_SLIDING_LOG};
        sluice_decision de, dl;
        log_u u = {.first = 0};
        log_d d = {.first = 0};
        uint64_t t, now, cost, room;
        bool consume = rng_pct(70);
        int ra, rb;

        l.window_ms = some(1, SLUICE_WINDOW_MAX_MS);
        l.max = some(1, SLUICE_MAX_MAX);
        room = l.max;
        t = some(0, SLUICE_NOW_MAX_MS - 4 * l.window_ms);
        for (int r = (int)rng_below(8); r > 0 && room > 0; r--) {
            uint64_t n = some(1, room);

            u.t[u.len] = t;
            d.t[d.len] = (double)t;
            u.n[u.len] = d.n[d.len] = n;
            u.len++;
            d.len++;
            room -= n;
            t += rng_below(l.window_ms / 4 + 1);
        }
        now = t + (rng_pct(10) ? 0 : rng_below(2 * l.window_ms));
        if (rng_pct(5) && now > 0)
            now -= rng_below(now < 100 ? now : 100); /* held at the newest */
        cost = some(1, l.max);
        test_context("log %d: %d runs, now %" PRIu64 " w %" PRIu64 " max %"
                     PRIu64 " cost %" PRIu64, i, u.len, now, l.window_ms,
                     l.max, cost);
        ra = twin_exact_decide(&u, &l, now, cost, consume, &de);
        rb = twin_lua_decide(&d, &l, (double)now, cost, consume, &dl);
        CHECK_EQ_U64((uint64_t)ra, (uint64_t)rb);
        same_decision(&de, &dl);
        CHECK_EQ_U64((uint64_t)u.len, (uint64_t)d.len);
        for (int r = 0; r < u.len && r < d.len; r++)
            CHECK_EQ_U64(u.t[u.first + r], (uint64_t)d.t[d.first + r]);
    }
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, 20261202);

    rng_state = seed;
    printf("test_algo_twins: seed %" PRIu64 " (rerun: test_algo_twins %"
           PRIu64 ")\n", seed, seed);
    test_fixed();
    test_counter();
    test_log();
    test_context(NULL);
    return test_summary("test_algo_twins");
}
