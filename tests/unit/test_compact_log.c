/*
 * test_compact_log.c - the compact log against the sliding log.
 *
 * compact-log must answer exactly what sliding-log answers, every field of
 * every decision, on every trace. The same seeded random trace (hits, peeks
 * and resets over a dozen keys, costs from 1 to max, bursts at one instant,
 * gaps of exactly a window and of many, keys asked under another max now
 * and then) goes to two embedded stores on virtual clocks (no test here
 * sleeps), one asked with sliding-log and one with compact-log; and a
 * wilder one (other windows too, the clock stepping back) to the two
 * algorithms' tables, which must also agree on when a state is idle. Then hand-worked figures at the
 * window's edges and across the ring's wrap, the bound on max, and the
 * memory the state holds (8 bytes per admitted unit).
 *
 * Usage: test_compact_log [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "algo/algo.h"
#include "mem_fixture.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The differential trace ---------------------------------------------- */

enum { KEYS = 12, STEPS = 40000, PRINTED = 10 };

/* One request of the trace: a reset (op < 1), a peek (< 30) or a hit. */
typedef struct step {
    unsigned op;
    int k;
    uint64_t max, window_ms, cost, at_ms;
} step;

/* The trace, and what one store answered to each step. */
typedef struct run {
    const step *steps;
    sluice_algo algo;
    int rc[STEPS];
    sluice_decision d[STEPS];
    uint64_t idle[STEPS]; /* idle_at() after each step (run_tables()) */
} run;

static const uint64_t maxes[] = {1, 2, 3, 5, 10, 64, 300, 4096};
static const uint64_t windows[] = {1, 7, 100, 1000, 60000};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t gap_for(uint64_t w)
{
    unsigned p = (unsigned)rng_below(100);

    if (p < 40)
        return 0; /* a burst at one instant */
    if (p < 65)
        return rng_range(1, 3);
    if (p < 82)
        return rng_range(1, w / 4 > 1 ? w / 4 : 1);
    if (p < 90)
        return rng_range(w / 2, w + 1);
    if (p < 95)
        return w; /* exactly a window */
    return rng_range(w, 4 * w);
}

static uint64_t cost_for(uint64_t max)
{
    unsigned p = (unsigned)rng_below(100);

    if (p < 65 || max == 1)
        return 1;
    if (p < 92)
        return rng_range(1, max / 4 > 1 ? max / 4 : 1);
    return rng_range(1, max);
}

/*
 * The trace: key k's own limit, now and then another max; when 'wild',
 * another window too, and now and then the caller's clock 50 ms behind.
 * The embedded store drops a key once it is idle, at a moment that depends
 * on its hash (seeded per store), and a dropped key forgets the longer
 * window and the later time it had seen: so the trace run on two stores is
 * tame (one window per key, a clock that never steps back), and the wild
 * one runs on the algorithms' own tables (run_tables()).
 */
static void make_trace(step *steps, uint64_t seed, bool wild)
{
    uint64_t now = 1700000000000ULL;

    rng_state = seed;
    for (int i = 0; i < STEPS; i++) {
        step *s = &steps[i];

        s->k = (int)rng_below(KEYS);
        s->op = (unsigned)rng_below(100);
        s->max = maxes[(size_t)s->k % NELEM(maxes)];
        s->window_ms = windows[(size_t)s->k % NELEM(windows)];
        if (rng_pct(4))
            s->max = maxes[rng_below(NELEM(maxes))];
        if (wild && rng_pct(1))
            s->window_ms = windows[rng_below(NELEM(windows))];
        s->cost = cost_for(s->max);
        now += gap_for(s->window_ms);
        s->at_ms = wild && rng_pct(2) ? now - 50 : now;
    }
}

/*
 * Runs the trace on the algorithm's table alone, a state per key, as a
 * store would: the time clamped per key (a wait then adds the step), the
 * state released on a reset. Also compares idle_at().
 */
static void run_tables(run *r)
{
    const sluice__algo *algo = sluice__algos[r->algo];
    _Alignas(max_align_t) unsigned char state[KEYS][64];
    uint64_t last[KEYS] = {0};

    if (algo->state_size > sizeof(state[0]))
        exit(2);
    for (int k = 0; k < KEYS; k++)
        algo->init(state[k]);
    for (int i = 0; i < STEPS; i++) {
        const step *s = &r->steps[i];
        sluice_limit l = limit_of(r->algo, s->max, s->window_ms);
        uint64_t t = s->at_ms > last[s->k] ? s->at_ms : last[s->k];
        sluice_decision *d = &r->d[i];

        memset(d, 0, sizeof(*d));
        if (s->op < 1) {
            algo->release(state[s->k]);
            r->rc[i] = SLUICE_OK;
            continue;
        }
        last[s->k] = t;
        r->rc[i] = algo->decide(state[s->k], &l, t, s->cost, s->op >= 30, d);
        if (d->retry_after_ms > 0)
            d->retry_after_ms += t - s->at_ms;
        if (d->reset_after_ms > 0)
            d->reset_after_ms += t - s->at_ms;
        r->idle[i] = algo->idle_at(state[s->k], &l);
    }
    for (int k = 0; k < KEYS; k++)
        algo->release(state[k]);
}

/*
 * Runs the trace on a store of its own, in a thread of its own: the
 * embedded store's sweep counts a thread's calls (over every store), so
 * each run must start from the same count to drop keys at the same steps.
 */
static void *run_trace(void *arg)
{
    run *r = arg;
    fixture fx;

    fx_open(&fx, r->steps[0].at_ms);
    for (int i = 0; i < STEPS; i++) {
        const step *s = &r->steps[i];
        sluice_limit l = limit_of(r->algo, s->max, s->window_ms);
        char key[16];
        size_t klen = (size_t)snprintf(key, sizeof(key), "k%d", s->k);

        fx_at(&fx, s->at_ms);
        memset(&r->d[i], 0, sizeof(r->d[i]));
        if (s->op < 1) {
            /* Whether it removed a count (1 or 0) is test_algo_store's;
               here the reset is held against the pure run's release. */
            int rc = sluice_reset(fx.store, &l, key, klen);

            r->rc[i] = rc > 0 ? SLUICE_OK : rc;
        }
        else if (s->op < 30)
            r->rc[i] = sluice_peek(&r->d[i], fx.store, &l, key, klen, s->cost);
        else
            r->rc[i] = sluice_hit(&r->d[i], fx.store, &l, key, klen, s->cost);
    }
    fx_close(&fx);
    return NULL;
}

static void run_alone(run *r)
{
    pthread_t th;

    if (pthread_create(&th, NULL, run_trace, r) != 0)
        exit(2);
    pthread_join(th, NULL);
}

static void test_differential(uint64_t seed, bool wild)
{
    step *steps = calloc(STEPS, sizeof(*steps));
    run *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    long admitted = 0, refused = 0, mismatches = 0;

    if (steps == NULL || a == NULL || b == NULL)
        exit(2);
    test_context("differential trace, %s, seed %" PRIu64,
                 wild ? "tables" : "embedded stores", seed);
    make_trace(steps, seed, wild);
    *a = (run){.steps = steps, .algo = SLUICE_SLIDING_LOG};
    *b = (run){.steps = steps, .algo = SLUICE_COMPACT_LOG};
    if (wild) {
        run_tables(a);
        run_tables(b);
    } else {
        run_alone(a);
        run_alone(b);
    }
    for (int i = 0; i < STEPS; i++) {
        const step *s = &steps[i];

        if (a->rc[i] == SLUICE_OK && s->op >= 1)
            (a->d[i].allowed ? admitted++ : refused++);
        if (a->rc[i] == b->rc[i] && decision_same(&a->d[i], &b->d[i]) &&
            a->idle[i] == b->idle[i])
            continue;
        CHECK(!"compact-log and sliding-log disagree");
        if (mismatches++ >= PRINTED)
            continue;
        fprintf(stderr, "    step %d: t=%" PRIu64 " op %u key %d cost %"
                PRIu64 " max %" PRIu64 " window %" PRIu64 "\n", i, s->at_ms,
                s->op, s->k, s->cost, s->max, s->window_ms);
        decision_print("sliding-log", a->rc[i], &a->d[i]);
        decision_print("compact-log", b->rc[i], &b->d[i]);
        fprintf(stderr, "      idle_at %" PRIu64 " and %" PRIu64 "\n",
                a->idle[i], b->idle[i]);
    }
    printf("  %s, seed %" PRIu64 ": %d steps, %ld admitted, %ld refused, "
           "%ld mismatches\n", wild ? "tables" : "embedded stores", seed,
           STEPS, admitted, refused, mismatches);
    /* Both outcomes must have been seen, or the trace tested little. */
    CHECK(admitted > STEPS / 10);
    CHECK(refused > STEPS / 20);
    test_context(NULL);
    free(steps);
    free(a);
    free(b);
}

/* ---- Hand-worked figures -------------------------------------------------- */

/*
 * Units leave at exactly t + window; a refusal waits for the
 * (live + cost - max)'th oldest; the reset is the newest's t + window.
 * (test_algo_values holds compact-log to the sliding log's hand figures:
 * units of one instant, a 1 ms window.)
 */
static void test_edges(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_COMPACT_LOG, 3, 100);

    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "e", 1), &l, 1, 2, 0, 100);
    fx_at(&fx, 1040);
    EXPECT(HIT(&fx, &l, "e", 1), &l, 1, 1, 0, 100);
    fx_at(&fx, 1080);
    EXPECT(HIT(&fx, &l, "e", 1), &l, 1, 0, 0, 100);
    fx_at(&fx, 1099); /* the unit of 1000 leaves at 1100, not before */
    EXPECT(HIT(&fx, &l, "e", 1), &l, 0, 0, 1, 81);
    EXPECT(PEEK(&fx, &l, "e", 3), &l, 0, 0, 81, 81);
    fx_at(&fx, 1100); /* live: 1040, 1080; cost 2 needs 1040 gone too */
    EXPECT(HIT(&fx, &l, "e", 2), &l, 0, 1, 40, 80);
    EXPECT(HIT(&fx, &l, "e", 1), &l, 1, 0, 0, 100);
    fx_at(&fx, 1180); /* live: 1100 only */
    EXPECT(PEEK(&fx, &l, "e", 3), &l, 0, 2, 20, 20);
    fx_at(&fx, 1200); /* all gone: whole again */
    EXPECT(HIT(&fx, &l, "e", 3), &l, 1, 0, 0, 100);

    fx_close(&fx);
}

/*
 * The ring wraps: max 8 and a unit a ms over many windows, then costs
 * that run past the ring's end. The oldest live unit, wherever it sits in
 * the ring, gives the wait.
 */
static void test_wrap(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_COMPACT_LOG, 8, 8);

    fx_open(&fx, 0);
    for (uint64_t t = 0; t < 100; t++) {
        fx_at(&fx, t);
        EXPECT(HIT(&fx, &l, "r", 1), &l, 1, t < 7 ? 7 - t : 0, 0, 8);
    }
    /* Live: 92..99. A cost of 3 waits for 94 to leave, at 102. */
    EXPECT(PEEK(&fx, &l, "r", 3), &l, 0, 0, 3, 8);
    fx_at(&fx, 102); /* live 95..99: 5 */
    EXPECT(HIT(&fx, &l, "r", 3), &l, 1, 0, 0, 8);
    fx_at(&fx, 105); /* live 98, 99, 102 x 3: a cost of 4 waits for 98 */
    EXPECT(HIT(&fx, &l, "r", 4), &l, 0, 3, 1, 5);
    EXPECT(HIT(&fx, &l, "r", 3), &l, 1, 0, 0, 8);
    fx_at(&fx, 107); /* 99 leaves at 107: live 102 x 3, 105 x 3 */
    EXPECT(PEEK(&fx, &l, "r", 8), &l, 0, 2, 6, 6);
    EXPECT(PEEK(&fx, &l, "r", 4), &l, 0, 2, 3, 6);
    fx_close(&fx);
}

/* A max lowered below what is live refuses until enough leaves; raised
   again, the log takes more than it held before. */
static void test_max_changes(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_COMPACT_LOG, 10, 100);
    sluice_limit low = limit_of(SLUICE_COMPACT_LOG, 4, 100);
    sluice_limit high = limit_of(SLUICE_COMPACT_LOG, 40, 100);

    fx_open(&fx, 0);
    for (uint64_t t = 0; t < 10; t++) {
        fx_at(&fx, t * 5);
        EXPECT(HIT(&fx, &l, "m", 1), &l, 1, 9 - t, 0, 100);
    }
    /* Live 0, 5, ..., 45 (10 units); max 4: the 7th oldest (30) must go. */
    fx_at(&fx, 50);
    EXPECT(HIT(&fx, &low, "m", 1), &low, 0, 0, 80, 95);
    EXPECT(HIT(&fx, &high, "m", 30), &high, 1, 0, 0, 100);
    EXPECT(HIT(&fx, &high, "m", 1), &high, 0, 0, 50, 100);
    fx_close(&fx);
}

/* ---- Bounds and memory ----------------------------------------------------- */

static void test_bounds(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_COMPACT_LOG, SLUICE_COMPACT_LOG_MAX, 1000);
    sluice_decision d;

    fx_open(&fx, 1000);
    CHECK_OK(sluice_limit_check(&l));
    CHECK(HIT(&fx, &l, "b", SLUICE_COMPACT_LOG_MAX).allowed);
    CHECK(!HIT(&fx, &l, "b", 1).allowed);
    l.max = SLUICE_COMPACT_LOG_MAX + 1;
    CHECK_RC(sluice_limit_check(&l), SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "compact-log") != NULL &&
          strstr(sluice_last_error(), "16384") != NULL);
    CHECK_RC(sluice_hit(&d, fx.store, &l, "c", 1, 1), SLUICE_ERANGE);
    CHECK_RC(sluice_peek(&d, fx.store, &l, "c", 1, 1), SLUICE_ERANGE);
    /* sliding-log takes the same limit. */
    l.algo = SLUICE_SLIDING_LOG;
    CHECK_OK(sluice_limit_check(&l));
    fx_close(&fx);
}

/* The bytes of state of 'store' beyond 'empty'. */
static uint64_t held(sluice_store *store, uint64_t empty)
{
    sluice_store_stats st;

    CHECK_OK(sluice_store_stats_get(&st, store));
    return st.bytes - empty;
}

/*
 * 8 bytes per admitted unit, and the ring at most twice what is live (plus
 * the key's entry): 1000 units at 1000 instants, then at one instant.
 */
static void test_memory(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_COMPACT_LOG, 1000, 100000);
    sluice_store_stats st;
    uint64_t empty, one, n;

    fx_open(&fx, 0);
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    empty = st.bytes;
    CHECK(HIT(&fx, &l, "m", 1).allowed);
    one = held(fx.store, empty); /* the key, and a ring of 8 */
    for (uint64_t t = 1; t < 1000; t++) {
        fx_at(&fx, t);
        CHECK(HIT(&fx, &l, "m", 1).allowed);
    }
    n = held(fx.store, empty);
    printf("  1000 units at 1000 instants: %" PRIu64 " bytes (one unit: %"
           PRIu64 ")\n", n, one);
    CHECK(n - one >= 8 * 1000 - 8 * 8 && n - one <= 8 * 1024);
    CHECK(HIT(&fx, &l, "s", 1000).allowed);
    CHECK(held(fx.store, empty) - n <= one + 8 * 1024);
    /* Whole again: dropped, every byte returned. */
    fx_at(&fx, 1000000);
    CHECK_RC(sluice_reset(fx.store, &l, "m", 1), 0);
    CHECK_RC(sluice_reset(fx.store, &l, "s", 1), 0);
    CHECK_EQ_U64(held(fx.store, empty), 0);
    fx_close(&fx);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    printf("test_compact_log: seed %" PRIu64 "\n", seed);
    test_differential(seed, false);
    test_differential(seed + 1, false);
    test_differential(seed + 2, true);
    test_differential(seed + 3, true);
    test_edges();
    test_wrap();
    test_max_changes();
    test_bounds();
    test_memory();
    return test_summary("test_compact_log");
}
