/*
 * test_gcra.c - GCRA's figures, worked by hand (src/algo/gcra/gcra.c):
 * bursts, the steady rate, costs above 1 and above the burst, refusals and
 * peeks that change nothing, waits exact to the ms at intervals that are
 * not whole ms (3 per 1000 ms: 333 1/3 ms; 7 per 100 ms: 14 2/7 ms), burst
 * 1 (pure pacing), a change of max, and the bounds.
 *
 * Through the embedded store on a virtual clock: no test here sleeps.
 */
#include "mem_fixture.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static sluice_limit gcra(uint64_t max, uint64_t window_ms, uint64_t burst)
{
    sluice_limit l = limit_of(SLUICE_GCRA, max, window_ms);

    l.burst = burst;
    return l;
}

/*
 * 3 per 1000 ms, burst 3: T = 333 1/3 ms. Three at once leave TAT 1000 ms
 * ahead. A fourth owes 1000 - 2 x 333 1/3 = 333 1/3 ms: retry 334, and at
 * +333 it is still refused (1/3 ms to go: retry 1), at +334 admitted.
 */
static void burst_and_boundary(void)
{
    fixture fx;
    sluice_limit l = gcra(3, 1000, 0);

    fx_open(&fx, 10000);
    /* TAT 10333 1/3: reset ceil(333 1/3) = 334. */
    EXPECT(HIT(&fx, &l, "b", 1), &l, 1, 2, 0, 334);
    EXPECT(HIT(&fx, &l, "b", 1), &l, 1, 1, 0, 667); /* 666 2/3 */
    EXPECT(HIT(&fx, &l, "b", 1), &l, 1, 0, 0, 1000);
    EXPECT(HIT(&fx, &l, "b", 1), &l, 0, 0, 334, 1000);
    /* Waiting retry - 1 refuses: 666 2/3 ms owed, 2/3 ms too many. */
    fx_at(&fx, 10333);
    EXPECT(HIT(&fx, &l, "b", 1), &l, 0, 0, 1, 667);
    /* Waiting retry admits: TAT 11000 - 334 + 333 1/3 - ... = 11333 1/3,
       999 1/3 ms ahead: reset 1000. */
    fx_at(&fx, 10334);
    EXPECT(HIT(&fx, &l, "b", 1), &l, 1, 0, 0, 1000);
    /* The bucket is full again at ceil(11333 1/3) = 11334, not before. */
    fx_at(&fx, 11333);
    EXPECT(PEEK(&fx, &l, "b", 3), &l, 0, 2, 1, 1);
    fx_at(&fx, 11334);
    EXPECT(PEEK(&fx, &l, "b", 3), &l, 1, 0, 0, 1000);
    fx_close(&fx);
}

/*
 * 7 per 100 ms with the default burst (7): once the burst is spent, the
 * k-th unit after it is admitted at ceil(k x 100/7) ms, no drift: exactly
 * 70 in the next 1000 ms, asking every ms. Each admission at t is refused
 * at t - 1.
 */
static void steady_rate(void)
{
    fixture fx;
    sluice_limit l = gcra(7, 100, 0);
    const uint64_t t0 = 20000;
    uint64_t k = 0;

    fx_open(&fx, t0);
    EXPECT(HIT(&fx, &l, "s", 7), &l, 1, 0, 0, 100);
    for (uint64_t t = t0 + 1; t <= t0 + 1000; t++) {
        fx_at(&fx, t);
        if (HIT(&fx, &l, "s", 1).allowed) {
            k++;
            /* The k-th at ceil(k x 100 / 7). */
            CHECK_EQ_U64(t - t0, (k * 100 + 6) / 7);
        }
    }
    CHECK_EQ_U64(k, 70);
    /* After the 70th, at t0 + 1000: TAT t0 + 1100, full again then. */
    EXPECT(PEEK(&fx, &l, "s", 1), &l, 0, 0, 15, 100); /* 14 2/7 */
    fx_close(&fx);
}

/*
 * Burst 1 is pure pacing: 7 per 100 ms, one unit at a time, 14 2/7 ms
 * apart from the last admission. The first at 30000 sets TAT 30014 2/7;
 * at +14 2/7 ms are owed, 2/7 too many: retry 1; at +15 admitted.
 */
static void pure_pacing(void)
{
    fixture fx;
    sluice_limit l = gcra(7, 100, 1);

    fx_open(&fx, 30000);
    EXPECT(HIT(&fx, &l, "p", 1), &l, 1, 0, 0, 15);
    EXPECT(PEEK(&fx, &l, "p", 1), &l, 0, 0, 15, 15);
    fx_at(&fx, 30014);
    EXPECT(HIT(&fx, &l, "p", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 30015);
    /* TAT 30029 2/7: 14 2/7 ahead again. */
    EXPECT(HIT(&fx, &l, "p", 1), &l, 1, 0, 0, 15);
    fx_at(&fx, 30029);
    EXPECT(HIT(&fx, &l, "p", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 30030);
    EXPECT(HIT(&fx, &l, "p", 1), &l, 1, 0, 0, 15);
    fx_close(&fx);
}

/*
 * Costs above 1: 10 per 1000 ms (T = 100 ms), burst 4 (400 ms of room).
 */
static void costs(void)
{
    fixture fx;
    sluice_limit l = gcra(10, 1000, 4);
    sluice_decision before;

    fx_open(&fx, 40000);
    /* 300 ms owed: 1 more fits; full again in 300 ms. */
    EXPECT(HIT(&fx, &l, "c", 3), &l, 1, 1, 0, 300);
    /* 2 more would owe 500 > 400: wait 100 ms. A refusal changes nothing:
       the peek after it answers as the peek before it. */
    before = PEEK(&fx, &l, "c", 2);
    EXPECT(before, &l, 0, 1, 100, 300);
    EXPECT(HIT(&fx, &l, "c", 2), &l, 0, 1, 100, 300);
    CHECK_SAME(PEEK(&fx, &l, "c", 2), before);
    /* A peek answers what the hit answers, without counting it. */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 1, 0, 0, 400);
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 400);
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 100, 400);
    /* 250 ms later, 150 ms owed: a cost of 2 owes 350, fits. */
    fx_at(&fx, 40250);
    EXPECT(HIT(&fx, &l, "c", 2), &l, 1, 0, 0, 350);
    /* The whole burst at once, 4, waits for a full bucket: 350 ms. */
    EXPECT(PEEK(&fx, &l, "c", 4), &l, 0, 0, 350, 350);
    fx_at(&fx, 40600);
    EXPECT(HIT(&fx, &l, "c", 4), &l, 1, 0, 0, 400);
    fx_close(&fx);
}

/*
 * A cost above the burst can never be admitted: SLUICE_ECOST, as a cost
 * above max is, and the key is left as it was.
 */
static void cost_above_burst(void)
{
    fixture fx;
    sluice_limit l = gcra(10, 1000, 4);
    sluice_decision d;

    fx_open(&fx, 50000);
    CHECK_RC(sluice_hit(&d, fx.store, &l, "x", 1, 5), SLUICE_ECOST);
    CHECK(strstr(sluice_last_error(), "exceeds burst 4") != NULL);
    CHECK_RC(sluice_peek(&d, fx.store, &l, "x", 1, 5), SLUICE_ECOST);
    CHECK_RC(sluice_hit(&d, fx.store, &l, "x", 1, 11), SLUICE_ECOST);
    CHECK(strstr(sluice_last_error(), "exceeds max 10") != NULL);
    CHECK_RC(sluice_hit(&d, fx.store, &l, "x", 1, 0), SLUICE_ERANGE);
    EXPECT(HIT(&fx, &l, "x", 4), &l, 1, 0, 0, 400);
    /* Burst 0 is max: a cost of 10 fits a fresh key. */
    l.burst = 0;
    EXPECT(HIT(&fx, &l, "y", 10), &l, 1, 0, 0, 1000);
    fx_close(&fx);
}

/*
 * The key is dropped once the bucket is full again (idle_at: TAT rounded
 * up to the ms), and answers as fresh from then on.
 */
static void reclaimed(void)
{
    fixture fx;
    sluice_limit l = gcra(3, 1000, 2);
    sluice_store_stats st;

    fx_open(&fx, 60000);
    EXPECT(HIT(&fx, &l, "r", 1), &l, 1, 1, 0, 334);
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK_EQ_U64(st.keys, 1);
    fx_at(&fx, 60333);
    EXPECT(PEEK(&fx, &l, "r", 2), &l, 0, 1, 1, 1);
    fx_at(&fx, 60334);
    EXPECT(PEEK(&fx, &l, "r", 2), &l, 1, 0, 0, 667);
    /* A hit on another key sweeps the idle one away (or it is gone). */
    EXPECT(HIT(&fx, &l, "r2", 1), &l, 1, 1, 0, 334);
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK(st.keys <= 2);
    fx_close(&fx);
}

/*
 * A change of max: TAT's remainder is read in the new max's units, one
 * >= max counting as a whole ms. 3 per 1000 at 70000 leaves TAT 70333 1/3
 * (remainder 1). Under 2 per 1000 (T = 500): 70333 1/2, 333 1/2 owed, a
 * unit fits (833 1/2 <= 1000): reset 834. Under 1 per 1000, burst 1: the
 * remainder 1 >= 1 is a whole ms, TAT 70334: wait 334.
 */
static void max_changed(void)
{
    fixture fx;
    sluice_limit three = gcra(3, 1000, 0), two = gcra(2, 1000, 0);
    sluice_limit one = gcra(1, 1000, 0), seven = gcra(7, 100, 0);
    sluice_limit two100 = gcra(2, 100, 0);

    fx_open(&fx, 70000);
    EXPECT(HIT(&fx, &three, "m", 1), &three, 1, 2, 0, 334);
    EXPECT(PEEK(&fx, &two, "m", 1), &two, 1, 0, 0, 834);
    EXPECT(PEEK(&fx, &one, "m", 1), &one, 0, 0, 334, 334);
    /* 3 of 7 per 100 ms at 80000: TAT 80042 6/7 (remainder 6). Under 2
       per 100 ms the remainder 6 >= 2 is one whole ms (not 6/2 = 3):
       TAT 80043, 43 ms owed, one unit more owes 93 <= 100. */
    fx_at(&fx, 80000);
    EXPECT(HIT(&fx, &seven, "m7", 3), &seven, 1, 4, 0, 43);
    EXPECT(PEEK(&fx, &two100, "m7", 1), &two100, 1, 0, 0, 93);
    fx_close(&fx);
}

/*
 * The seam: a full bucket spent at s, then one unit an interval: the
 * span s .. s + w - 1 admits max + floor((w - 1) x max / w) (the model's
 * span_bound, which dense random clients never pass: test_algo_seam).
 * 5 per 10 ms: 5 + 4 = 9; 7 per 100 ms: 7 + 6 = 13; 3 per 1000: 3 + 2.
 */
static void seam(void)
{
    static const uint64_t cases[][3] = {{5, 10, 9}, {7, 100, 13},
                                        {3, 1000, 5}, {1, 1, 1}};
    fixture fx;

    fx_open(&fx, 90000);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_limit l = gcra(cases[i][0], cases[i][1], 0);
        uint64_t s = 100000 * (i + 1), total = 0;
        char key[16];

        snprintf(key, sizeof(key), "seam-%zu", i);
        for (uint64_t t = s; t < s + cases[i][1]; t++) {
            fx_at(&fx, t);
            while (HITN(&fx, &l, key, strlen(key), 1).allowed)
                total++;
        }
        CHECK_EQ_U64(total, cases[i][2]);
    }
    fx_close(&fx);
}

/* The bounds: burst 1..max (0: max), max x window <= 2^53. */
static void bounds(void)
{
    sluice_limit l = gcra(10, 1000, 10);

    CHECK_OK(sluice_limit_check(&l));
    l.burst = 1;
    CHECK_OK(sluice_limit_check(&l));
    l.burst = 11;
    CHECK_RC(sluice_limit_check(&l), SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "burst 11") != NULL);
    l = gcra(1ULL << 13, 1ULL << 40, 0); /* 2^53 exactly */
    CHECK_OK(sluice_limit_check(&l));
    l.max++;
    CHECK_RC(sluice_limit_check(&l), SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "2^53") != NULL);
    l = gcra(SLUICE_MAX_MAX, 1, 0);
    CHECK_OK(sluice_limit_check(&l));
    l.window_ms = 2;
    CHECK_RC(sluice_limit_check(&l), SLUICE_ERANGE);
    /* A burst is gcra's alone. */
    l = limit_of(SLUICE_FIXED, 10, 1000);
    l.burst = 5;
    CHECK_RC(sluice_limit_check(&l), SLUICE_EINVAL);
    CHECK(strcmp(sluice_algo_name(SLUICE_GCRA), "gcra") == 0);
}

int main(void)
{
    burst_and_boundary();
    steady_rate();
    pure_pacing();
    costs();
    cost_above_burst();
    reclaimed();
    max_changed();
    seam();
    bounds();
    return test_summary("test_gcra");
}
