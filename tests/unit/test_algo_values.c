/*
 * test_algo_values.c - each algorithm's exact decision, every field of it,
 * at and around its window boundaries, through the embedded store on a
 * virtual clock (no test here ever sleeps): the fixed window armed by its
 * first admission, the sliding counter's aligned windows and weighted
 * estimate, the sliding log's entries leaving one by one; costs above 1,
 * windows of 1 ms, max 1, the clock's zero; and a clock that goes
 * backwards, clamped per key.
 */
#include "mem_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Fixed window -------------------------------------------------------- */

static void test_fixed_window(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_FIXED, 3, 100);

    fx_open(&fx, 1000);
    /* The first admitted request, at t0 = 1000, arms the expiry at 1100. */
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 2, 0, 100);
    fx_at(&fx, 1050);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 1, 0, 50);
    fx_at(&fx, 1099); /* t0 + window - 1: still the same window */
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    EXPECT(PEEK(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 0, 0, 1, 1);
    fx_at(&fx, 1100); /* t0 + window: gone, a fresh window */
    EXPECT(PEEK(&fx, &l, "f", 1), &l, 1, 2, 0, 100);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 1, 0, 0, 100);
    fx_at(&fx, 1150);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 50, 50);
    fx_at(&fx, 1199);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 1200);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 1, 1, 0, 100);

    /* A refused hit changes nothing, and later hits never move the expiry. */
    fx_at(&fx, 1250);
    EXPECT(HIT(&fx, &l, "f", 3), &l, 0, 1, 50, 50);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 0, 1, 50, 50);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 0, 0, 50);
    fx_at(&fx, 1299);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 1300);
    EXPECT(HIT(&fx, &l, "f", 1), &l, 1, 2, 0, 100);

    /* A request long after the window is a fresh one. */
    fx_at(&fx, 99999);
    EXPECT(HIT(&fx, &l, "f", 2), &l, 1, 1, 0, 100);

    /* window 1 ms: every millisecond is its own window. */
    l = limit_of(SLUICE_FIXED, 2, 1);
    fx_at(&fx, 5000);
    EXPECT(HIT(&fx, &l, "f1", 2), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 5001);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 1, 1, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "f1", 1), &l, 0, 0, 1, 1);

    /* max 1. */
    l = limit_of(SLUICE_FIXED, 1, 10);
    fx_at(&fx, 7);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 10);
    fx_at(&fx, 16);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 17);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 10);

    /* The clock's zero is an ordinary instant. */
    l = limit_of(SLUICE_FIXED, 2, 10);
    fx_at(&fx, 0);
    EXPECT(HIT(&fx, &l, "zero", 2), &l, 1, 0, 0, 10);
    EXPECT(HIT(&fx, &l, "zero", 1), &l, 0, 0, 10, 10);
    fx_at(&fx, 10);
    EXPECT(HIT(&fx, &l, "zero", 1), &l, 1, 1, 0, 10);
    fx_close(&fx);
}

/* ---- Sliding counter ----------------------------------------------------- */

static void test_counter_values(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_SLIDING_COUNTER, 10, 100);

    /* Windows are [1000, 1100), [1100, 1200), ...: aligned to the clock's
       zero, not to the first request. */
    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "c", 4), &l, 1, 6, 0, 200);
    fx_at(&fx, 1050);
    EXPECT(HIT(&fx, &l, "c", 6), &l, 1, 0, 0, 150);
    /* Refused: in [1100, 1200) the estimate is 10 x (100 - e) / 100, and
       it + 1 <= 10 from e = 10 on, i.e. at 1110, 60 ms from now. */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 0, 0, 60, 150);
    fx_at(&fx, 1099);
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 11, 101);
    fx_at(&fx, 1100); /* estimate 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 10, 100);
    fx_at(&fx, 1101); /* estimate 9.9: 9.9 + 1 > 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 9, 99);
    fx_at(&fx, 1109); /* estimate 9.1: 9.1 + 1 > 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 0, 0, 1, 91);
    fx_at(&fx, 1110); /* estimate 9: 9 + 1 <= 10 */
    EXPECT(PEEK(&fx, &l, "c", 1), &l, 1, 0, 0, 190);
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 190);
    fx_at(&fx, 1150); /* estimate 1 + 10 x 50 / 100 = 6 */
    EXPECT(PEEK(&fx, &l, "c", 5), &l, 0, 4, 10, 150);
    EXPECT(HIT(&fx, &l, "c", 4), &l, 1, 0, 0, 150);
    fx_at(&fx, 1160); /* estimate 5 + 4 = 9: cost 2 fits at 1170 */
    EXPECT(PEEK(&fx, &l, "c", 2), &l, 0, 1, 10, 140);
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 140);
    fx_at(&fx, 1170); /* estimate 6 + 3 = 9 */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 0, 0, 130);
    fx_at(&fx, 1200); /* estimate 0 + 7 x 100 / 100 = 7 */
    EXPECT(PEEK(&fx, &l, "c", 4), &l, 0, 3, 15, 100); /* 7 r <= 600: r 85 */
    EXPECT(HIT(&fx, &l, "c", 1), &l, 1, 2, 0, 200);
    /* At 1201 the estimate is 1 + 7 x 99 / 100 = 7.93: cost 2 fits
       (9.93 <= 10) and leaves floor(0.07) = 0; cost 3 (10.93) does not,
       until 1 + 7 r / 100 + 3 <= 10, i.e. r <= 85, at e = 15. */
    fx_at(&fx, 1201);
    EXPECT(PEEK(&fx, &l, "c", 2), &l, 1, 0, 0, 199);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 0, 2, 14, 199);
    fx_at(&fx, 1214);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 0, 2, 1, 186);
    fx_at(&fx, 1215);
    EXPECT(PEEK(&fx, &l, "c", 3), &l, 1, 0, 0, 185);
    /* Two windows later everything is forgotten. */
    fx_at(&fx, 1400);
    EXPECT(PEEK(&fx, &l, "c", 10), &l, 1, 0, 0, 200);

    /* window 1 ms: the previous window counts in full for its 1 ms. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 3, 1);
    fx_at(&fx, 5);
    EXPECT(HIT(&fx, &l, "c1", 3), &l, 1, 0, 0, 2);
    EXPECT(HIT(&fx, &l, "c1", 1), &l, 0, 0, 2, 2);
    fx_at(&fx, 6);
    EXPECT(HIT(&fx, &l, "c1", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 7);
    EXPECT(HIT(&fx, &l, "c1", 3), &l, 1, 0, 0, 2);

    /* max 1: the previous window's one request keeps the key busy until
       the very end of the current window. */
    l = limit_of(SLUICE_SLIDING_COUNTER, 1, 10);
    fx_at(&fx, 109);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 11);
    fx_at(&fx, 110);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 10, 10);
    fx_at(&fx, 119); /* estimate 1 x 1 / 10 = 0.1: 1.1 > 1 */
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 120);
    EXPECT(HIT(&fx, &l, "m1", 1), &l, 1, 0, 0, 20);
    fx_close(&fx);
}

/* ---- Sliding log --------------------------------------------------------- */

/* The sliding log's figures, which compact-log must answer too, field for
   field (test_compact_log holds the two to each other on random traces). */
static void test_log_values(sluice_algo algo)
{
    fixture fx;
    sluice_limit l = limit_of(algo, 3, 100);

    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 2, 0, 100);
    fx_at(&fx, 1040);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 1, 0, 100);
    fx_at(&fx, 1080);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    fx_at(&fx, 1090); /* the entry of 1000 leaves at 1100 */
    EXPECT(HIT(&fx, &l, "l", 1), &l, 0, 0, 10, 90);
    fx_at(&fx, 1099);
    EXPECT(PEEK(&fx, &l, "l", 1), &l, 0, 0, 1, 81);
    fx_at(&fx, 1100); /* live: 1040, 1080; cost 2 needs 1040 gone too */
    EXPECT(HIT(&fx, &l, "l", 2), &l, 0, 1, 40, 80);
    EXPECT(HIT(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    fx_at(&fx, 1140); /* live: 1080, 1100 */
    EXPECT(PEEK(&fx, &l, "l", 1), &l, 1, 0, 0, 100);
    EXPECT(PEEK(&fx, &l, "l", 2), &l, 0, 1, 40, 60);
    EXPECT(PEEK(&fx, &l, "l", 3), &l, 0, 1, 60, 60);
    fx_at(&fx, 1199);
    EXPECT(PEEK(&fx, &l, "l", 3), &l, 0, 2, 1, 1);
    fx_at(&fx, 1200);
    EXPECT(HIT(&fx, &l, "l", 3), &l, 1, 0, 0, 100);

    /* Several entries at one instant leave together; cost counts units. */
    l = limit_of(algo, 5, 10);
    fx_at(&fx, 2000);
    EXPECT(HIT(&fx, &l, "u", 2), &l, 1, 3, 0, 10);
    EXPECT(HIT(&fx, &l, "u", 2), &l, 1, 1, 0, 10);
    fx_at(&fx, 2003);
    EXPECT(HIT(&fx, &l, "u", 1), &l, 1, 0, 0, 10);
    EXPECT(HIT(&fx, &l, "u", 1), &l, 0, 0, 7, 10);
    EXPECT(HIT(&fx, &l, "u", 5), &l, 0, 0, 10, 10);
    fx_at(&fx, 2010);
    EXPECT(HIT(&fx, &l, "u", 5), &l, 0, 4, 3, 3);
    EXPECT(HIT(&fx, &l, "u", 4), &l, 1, 0, 0, 10);

    /* window 1 ms and max 1. */
    l = limit_of(algo, 1, 1);
    fx_at(&fx, 3000);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 1, 0, 0, 1);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 0, 0, 1, 1);
    fx_at(&fx, 3001);
    EXPECT(HIT(&fx, &l, "w1", 1), &l, 1, 0, 0, 1);
    fx_close(&fx);
}


/* ---- A clock that goes backwards ----------------------------------------- */

/*
 * The store clamps time per key: a key asked about at t answers every later
 * question as of t at least, and a wait it answers then holds on the
 * caller's clock: it adds how far that clock is behind. Nothing crashes,
 * nothing is admitted twice.
 */
static void test_clock_backwards(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 2, 100);
        uint64_t admitted = 0;
        bool gcra = a == SLUICE_GCRA;
        uint64_t reset_1000 = a == SLUICE_SLIDING_COUNTER ? 200 : 100;
        /* gcra spaces units 50 ms apart: TAT 1050, then 1100; at 1050 one
           unit fits again, at 1049 not. */
        uint64_t later = gcra ? 1040 : 1050, top = gcra ? 1049 : 1099;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        fx_at(&fx, 1000);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 1, 1, 0, gcra ? 50 : reset_1000);
        /* At 900 (for the counter, an earlier window), answered as of 1000,
           its reset 100 ms further off on the caller's clock. */
        fx_at(&fx, 900);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 1, 0, 0, reset_1000 + 100);
        fx_at(&fx, 500);
        EXPECT(HIT(&fx, &l, "back", 1), &l, 0, 0,
               (a == SLUICE_SLIDING_COUNTER ? 150 : gcra ? 50 : 100) + 500,
               reset_1000 + 500);
        fx_at(&fx, 0);
        CHECK(!HIT(&fx, &l, "back", 1).allowed);
        fx_at(&fx, later);
        CHECK(!PEEK(&fx, &l, "back", 1).allowed);
        {
            sluice_decision d_later = PEEK(&fx, &l, "back", 1);

            fx_at(&fx, 3);
            d_later.retry_after_ms += later - 3;
            d_later.reset_after_ms += later - 3;
            CHECK_SAME(PEEK(&fx, &l, "back", 1), d_later);
        }
        /* Flailing back and forth within the window admits nothing more. */
        for (uint64_t t = top; t > 900; t -= 7) {
            fx_at(&fx, t);
            if (HIT(&fx, &l, "back", 1).allowed)
                admitted++;
        }
        CHECK_EQ_U64(admitted, 0);
        /* Later, the key is usable again. */
        fx_at(&fx, 5000);
        CHECK(HIT(&fx, &l, "back", 2).allowed);
        /* A jump far ahead, then back: no crash, no second budget. */
        fx_at(&fx, SLUICE_NOW_MAX_MS);
        CHECK(HIT(&fx, &l, "back", 2).allowed);
        fx_at(&fx, 1);
        CHECK(!HIT(&fx, &l, "back", 1).allowed);
        CHECK_RC(sluice_reset(fx.store, &l, "back", 4), 1);
    }
    test_context(NULL);
    fx_close(&fx);
}


int main(void)
{
    test_fixed_window();
    test_counter_values();
    test_log_values(SLUICE_SLIDING_LOG);
    test_log_values(SLUICE_COMPACT_LOG);
    test_clock_backwards();
    return test_summary("test_algo_values");
}
