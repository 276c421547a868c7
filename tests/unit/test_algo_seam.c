/*
 * test_algo_seam.c - the seam: the most units a span one window long can
 * admit, per algorithm. The fixed window admits 2 x max - 1 across the seam
 * of two windows, the sliding counter 2 x max - ceil(2 max / w) (reached
 * exactly by an adversary), the sliding log max, gcra (no seam, but a full
 * bucket and the pace) max + floor((w - 1) max / w) (reached in
 * test_gcra.c); dense random clients (seeded) never pass those bounds, and
 * some reach them.
 *
 * Through the embedded store on a virtual clock (no test here ever sleeps).
 *
 * Usage: test_algo_seam [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "algo/model.h" /* each algorithm's seam bound */
#include "mem_fixture.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The seam: the most a span one window long can admit ----------------- */

/*
 * Each algorithm's bound is its model's (span_bound in
 * src/algo/FOLDER/model.c, where it is worked out): 2 max - 1 for the
 * fixed window, 2 max - ceil(2 max / w) for the sliding counter, max for
 * the sliding log, max + floor((w - 1) max / w) for gcra.
 */
static uint64_t span_bound(sluice_algo algo, uint64_t max, uint64_t w)
{
    return sluice__models[algo]->span_bound(max, w);
}

/* The most units admitted in any span of 'w' ms, from units per ms. */
static uint64_t max_span(const uint64_t *per_ms, size_t n, uint64_t w)
{
    uint64_t sum = 0, best = 0;

    for (size_t i = 0; i < n; i++) {
        sum += per_ms[i];
        if (i >= w)
            sum -= per_ms[i - w];
        if (sum > best)
            best = sum;
    }
    return best;
}

/*
 * A random but dense client: window by window it picks a pattern (idle,
 * sparse, greedy, or only the window's last instants) and, where active,
 * asks until refused with random costs. Returns the most units admitted in
 * any span of one window, which must stay within the algorithm's bound.
 */
static uint64_t random_dense_trace(sluice_algo algo, uint64_t max, uint64_t w,
                                   unsigned id)
{
    fixture fx;
    sluice_limit l = limit_of(algo, max, w);
    size_t n = (size_t)(40 * w + 40);
    uint64_t *per_ms = calloc(n, sizeof(*per_ms));
    uint64_t start = 1000 * w + rng_below(3) * (w / 2); /* aligned, or not */
    unsigned pattern = 0;
    char key[32];
    uint64_t best;

    if (per_ms == NULL)
        exit(2);
    snprintf(key, sizeof(key), "dense-%u", id);
    fx_open(&fx, start);
    for (size_t i = 0; i < n; i++) {
        int active;

        if ((start + i) % w == 0 || i == 0)
            pattern = (unsigned)rng_below(5);
        switch (pattern) {
        case 0:
            active = 0;
            break;
        case 1:
            active = rng_pct(10);
            break;
        case 2:
            active = 1;
            break;
        case 3: /* the last 2 ms of each aligned window */
            active = (start + i) % w + 2 >= w;
            break;
        default:
            active = rng_pct(50);
            break;
        }
        if (!active)
            continue;
        fx_at(&fx, start + i);
        for (int tries = 0; tries < 64; tries++) {
            uint64_t cost = rng_pct(70) ? 1 : 1 + rng_below(max);
            sluice_decision d = HITN(&fx, &l, key, strlen(key), cost);

            if (d.allowed)
                per_ms[i] += cost;
            else if (cost == 1)
                break;
        }
    }
    best = max_span(per_ms, n, w);
    free(per_ms);
    fx_close(&fx);
    return best;
}

/* The fixed window and the sliding log, by hand: what crosses the seam. */
static void seam_by_hand(void)
{
    fixture fx;
    sluice_limit l;

    fx_open(&fx, 0);
    /* fixed: 2 x max in w + 1 ms, 2 x max - 1 in 2 ms. */
    l = limit_of(SLUICE_FIXED, 5, 1000);
    fx_at(&fx, 10000);
    EXPECT(HIT(&fx, &l, "seam-a", 5), &l, 1, 0, 0, 1000);
    fx_at(&fx, 11000);
    EXPECT(HIT(&fx, &l, "seam-a", 5), &l, 1, 0, 0, 1000);
    fx_at(&fx, 20000);
    EXPECT(HIT(&fx, &l, "seam-b", 1), &l, 1, 4, 0, 1000);
    fx_at(&fx, 20999);
    EXPECT(HIT(&fx, &l, "seam-b", 4), &l, 1, 0, 0, 1);
    fx_at(&fx, 21000);
    EXPECT(HIT(&fx, &l, "seam-b", 5), &l, 1, 0, 0, 1000);

    /* sliding-log: max in the last ms of a window, then nothing for a
       whole window. */
    l = limit_of(SLUICE_SLIDING_LOG, 5, 1000);
    fx_at(&fx, 30999);
    EXPECT(HIT(&fx, &l, "seam-l", 5), &l, 1, 0, 0, 1000);
    for (uint64_t t = 31000; t < 31999; t += 111) {
        fx_at(&fx, t);
        EXPECT(HIT(&fx, &l, "seam-l", 1), &l, 0, 0, 31999 - t, 31999 - t);
    }
    fx_at(&fx, 31998);
    EXPECT(HIT(&fx, &l, "seam-l", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 31999);
    EXPECT(HIT(&fx, &l, "seam-l", 5), &l, 1, 0, 0, 1000);
    fx_close(&fx);
}

static const uint64_t seam_maxes[] = {1, 2, 3, 5, 10, 17};
static const uint64_t seam_windows[] = {1, 2, 3, 5, 10, 40, 100};
#define NSEAM_MAXES (sizeof(seam_maxes) / sizeof(seam_maxes[0]))
#define NSEAM_WINDOWS (sizeof(seam_windows) / sizeof(seam_windows[0]))

/*
 * sliding-counter: the adversary reaches its bound exactly. max requests
 * at the last ms of window k - 1, then a greedy client in window k; count
 * the span [k w - 1, k w - 1 + w). Keys are "adv-N", N from '*id' on.
 */
static void seam_adversary(unsigned *id)
{
    fixture fx;

    fx_open(&fx, 0);
    for (size_t i = 0; i < NSEAM_MAXES; i++) {
        for (size_t j = 0; j < NSEAM_WINDOWS; j++) {
            uint64_t max = seam_maxes[i], w = seam_windows[j];
            uint64_t k = 1000 / w + 3, total = 0;
            sluice_limit l;
            char key[32];

            if (w < 2)
                continue;
            l = limit_of(SLUICE_SLIDING_COUNTER, max, w);
            snprintf(key, sizeof(key), "adv-%u", (*id)++);
            test_context("adversary: max %" PRIu64 " window %" PRIu64, max,
                         w);
            fx_at(&fx, k * w - 1);
            CHECK(HITN(&fx, &l, key, strlen(key), max).allowed);
            total = max;
            for (uint64_t e = 0; e + 2 <= w; e++) {
                fx_at(&fx, k * w + e);
                while (PEEKN(&fx, &l, key, strlen(key), 1).allowed &&
                       HITN(&fx, &l, key, strlen(key), 1).allowed)
                    total++;
            }
            CHECK_EQ_U64(total, span_bound(SLUICE_SLIDING_COUNTER, max, w));
        }
    }
    test_context(NULL);
    fx_close(&fx);
}

/* Dense random clients never pass the bound (and the log's and the
   counter's bounds are met by some). Keys from '*id' on. */
static void seam_dense(unsigned *id)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        for (size_t i = 0; i < NSEAM_MAXES; i++) {
            for (size_t j = 0; j < NSEAM_WINDOWS; j++) {
                uint64_t max = seam_maxes[i], w = seam_windows[j];
                uint64_t bound = span_bound((sluice_algo)a, max, w);
                uint64_t best = 0;

                test_context("dense trace: %s max %" PRIu64
                             " window %" PRIu64 " bound %" PRIu64,
                             sluice_algo_name((sluice_algo)a), max, w, bound);
                for (int rep = 0; rep < 3; rep++) {
                    uint64_t got = random_dense_trace((sluice_algo)a, max, w,
                                                      (*id)++);

                    CHECK(got <= bound);
                    if (got > best)
                        best = got;
                }
                if (a == SLUICE_SLIDING_LOG)
                    CHECK_EQ_U64(best, max);
                else
                    CHECK(best >= max);
            }
        }
    }
    test_context(NULL);
}

/* Fixed: a span of w ms reaches 2 max - 1. */
static void seam_fixed_span(void)
{
    fixture fx;
    sluice_limit l;
    uint64_t per_ms[300];

    memset(per_ms, 0, sizeof(per_ms));
    fx_open(&fx, 50000);
    l = limit_of(SLUICE_FIXED, 4, 100);
    CHECK(HIT(&fx, &l, "fx", 1).allowed);
    per_ms[0] += 1;
    fx_at(&fx, 50099);
    CHECK(HIT(&fx, &l, "fx", 3).allowed);
    per_ms[99] += 3;
    fx_at(&fx, 50100);
    CHECK(HIT(&fx, &l, "fx", 4).allowed);
    per_ms[100] += 4;
    CHECK_EQ_U64(max_span(per_ms, 300, 100), 7);
    fx_close(&fx);
}

static void test_seam(void)
{
    unsigned id = 0;

    seam_by_hand();
    seam_adversary(&id);
    seam_dense(&id);
    seam_fixed_span();
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, 20240601);

    rng_state = seed;
    printf("test_algo_seam: seed %" PRIu64 " (rerun: test_algo_seam %" PRIu64
           ")\n", seed, seed);
    test_seam();
    return test_summary("test_algo_seam");
}
