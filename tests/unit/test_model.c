/*
 * test_model.c - the embedded store against a naive reference model of
 * every algorithm.
 *
 * Each algorithm is written again, independently and as plainly as it can
 * be, from its definition alone, in src/algo/FOLDER/model.c (see
 * src/algo/model.h): the fixed window as a count and the instant that
 * opened its window, the sliding counter as a map from window index to the
 * units admitted in it (its estimate compared in exact rationals), the
 * sliding log as the time of every admitted unit. Nothing about the answer
 * is computed in closed form: retry_after_ms is found by stepping a copy of
 * the model forward 1 ms at a time until the request would be admitted, and
 * reset_after_ms by stepping until the state after the decision holds
 * nothing (at most 2 x window + 1 steps). The test takes the models from
 * their table (sluice__models[]), so a new algorithm is covered with no
 * change here.
 *
 * Random traces (seeded; the seed is printed) of hits, peeks and resets on
 * 50 binary keys, with random costs and gaps (0, small, across a window
 * and far beyond it) and limits down to max = 1 and window = 1, go to both
 * the store and the model, which must agree on every field of every
 * decision. On a mismatch the trace line, both decisions and the seed are
 * printed and the round is abandoned.
 *
 * Usage: test_model [SEED [ROUNDS]] (or SLUICE_TEST_SEED=N).
 */
#include "algo/algo.h"  /* which algorithms take a burst */
#include "algo/model.h" /* the models: src/algo/FOLDER/model.c */
#include "compare.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 50
#define STEPS_PER_ROUND 5000
#define DEFAULT_ROUNDS 100

/* ---- Traces -------------------------------------------------------------- */

typedef struct key {
    char bytes[16];
    size_t len;
} key;

/* Fifty distinct binary keys: the empty key, "\0", and keys holding NULs. */
static void make_keys(key *keys)
{
    for (int i = 0; i < KEYS; i++) {
        key *k = &keys[i];

        memset(k->bytes, 0, sizeof(k->bytes));
        if (i == 0) {
            k->len = 0;
        } else if (i == 1) {
            k->len = 1;
        } else {
            k->bytes[0] = 'k';
            k->bytes[1] = '\0';
            k->bytes[2] = (char)i;
            k->bytes[3] = (char)0xff;
            k->len = 4 + (size_t)(i % 5);
            memset(k->bytes + 4, 'z', (size_t)(i % 5));
        }
    }
}

static const uint64_t maxes[] = {1, 2, 3, 4, 5, 7, 10, 16, 37, 100, 256};
static const uint64_t windows[] = {1, 2, 3, 5, 7, 10, 16, 50, 100, 1000};
#define NMAXES (sizeof(maxes) / sizeof(maxes[0]))
#define NWINDOWS (sizeof(windows) / sizeof(windows[0]))

/*
 * A limit for one (key, algorithm) of a round. 'profile' 0: max 1 and
 * window 1; 1: window 1; 2: max 1; otherwise anything, keeping
 * max x window small enough for the log's brute-force search.
 */
static sluice_limit random_limit(sluice_algo algo, unsigned profile)
{
    sluice_limit l = {0};

    l.algo = algo;
    do {
        /* Mostly small budgets, which run out. */
        l.max = rng_pct(75) ? maxes[rng_below(7)] : maxes[rng_below(NMAXES)];
        l.window_ms = windows[rng_below(NWINDOWS)];
        if (profile == 0 || profile == 1)
            l.window_ms = 1;
        if (profile == 0 || profile == 2)
            l.max = 1;
    } while (l.max * l.window_ms > 25600);
    /* An algorithm with a burst (gcra): half the time one below max. */
    if (sluice__algos[algo]->has_burst && rng_pct(50))
        l.burst = 1 + rng_below(l.max);
    return l;
}

/* The most a request may cost under 'l': its burst, or else its max. */
static uint64_t cost_cap(const sluice_limit *l)
{
    return l->burst != 0 ? l->burst : l->max;
}

/*
 * The gap before the next request. A round's 'tempo' 0 is a dense burst
 * (budgets run out, refusals abound), 1 a medium pace, 2 a sparse one where
 * windows mostly expire between requests; each has rare long jumps.
 */
static uint64_t random_gap(unsigned tempo)
{
    unsigned r = (unsigned)rng_below(100);

    switch (tempo) {
    case 0:
        if (r < 50)
            return 0;
        if (r < 80)
            return 1;
        if (r < 95)
            return 1 + rng_below(5);
        if (r < 99)
            return 1 + rng_below(100);
        return 1000 + rng_below(4000);
    case 1:
        if (r < 35)
            return 0;
        if (r < 50)
            return 1;
        if (r < 70)
            return 1 + rng_below(10);
        if (r < 90)
            return 1 + rng_below(50);
        if (r < 99)
            return 1 + rng_below(500);
        return 1000 + rng_below(4000);
    default:
        if (r < 35)
            return 0;
        if (r < 50)
            return 1;
        if (r < 70)
            return 1 + rng_below(10);
        if (r < 85)
            return 1 + rng_below(100);
        if (r < 96)
            return 1 + rng_below(1000);
        return 1000 + rng_below(4000);
    }
}

static uint64_t random_cost(uint64_t max)
{
    unsigned r = (unsigned)rng_below(100);

    if (r < 35)
        return 1;
    if (r < 80)
        return 1 + rng_below(max);
    if (r < 95)
        return max;
    return max < 2 ? max : 2;
}

static void format_key(char *buf, size_t n, const key *k)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < k->len && used + 4 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%02x",
                                 (unsigned char)k->bytes[i]);
    if (k->len == 0)
        snprintf(buf, n, "(empty)");
}

typedef struct round_stats {
    unsigned long hits, peeks, resets, refused, compared;
} round_stats;

/* One round: its store and clock, its keys, its pace, and the tallies. */
typedef struct round {
    uint64_t seed, now;
    unsigned index, tempo;
    int hot; /* how many keys take most requests */
    key keys[KEYS];
    sluice_vclock *clock;
    sluice_store *store;
    round_stats *st;
} round;

/* A model per (key, algorithm) of the round running. */
static sluice__model models[KEYS][TEST_ALGO_N];

/* Draws the round's pace, start time and limits, and opens its store. */
static void round_open(round *r)
{
    static const int hot_sizes[] = {1, 2, 4, 8};
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    unsigned profile = (unsigned)rng_below(8);

    r->tempo = (unsigned)rng_below(3);
    r->hot = hot_sizes[rng_below(4)];
    switch (rng_below(4)) {
    case 0:
        r->now = 0;
        break;
    case 1:
        r->now = rng_below(10000);
        break;
    case 2:
        r->now = 1000 * (1 + rng_below(1000)) - 1; /* just before seams */
        break;
    default:
        r->now = rng_below(1ULL << 45);
        break;
    }
    make_keys(r->keys);
    for (int k = 0; k < KEYS; k++)
        for (int a = 0; a < TEST_ALGO_N; a++) {
            sluice_limit l = random_limit((sluice_algo)a, profile);

            sluice__model_init(&models[k][a], &l);
        }
    r->clock = NULL;
    r->store = NULL;
    CHECK_OK(sluice_vclock_new(&r->clock, r->now));
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = r->clock;
    CHECK_OK(sluice_store_open(&r->store, NULL, &opts));
    if (r->clock == NULL || r->store == NULL)
        exit(2);
}

/* Prints a mismatch: the trace line, both decisions, how to rerun. */
static void print_mismatch(const round *r, unsigned step, int k, int a,
                           const char *opname, uint64_t cost,
                           const sluice_decision *got,
                           const sluice_decision *want)
{
    const sluice_limit *l = &models[k][a].limit;
    char sg[160], sw[160], sk[40];

    decision_format(sg, sizeof(sg), got);
    decision_format(sw, sizeof(sw), want);
    format_key(sk, sizeof(sk), &r->keys[k]);
    fprintf(stderr,
            "MISMATCH seed %" PRIu64 " round %u step %u: t=%" PRIu64
            " key=%s (#%d) algo=%s max=%" PRIu64 " window=%" PRIu64
            " burst=%" PRIu64 " %s cost=%" PRIu64 "\n"
            "    store: %s\n    model: %s\n"
            "    rerun: test_model %" PRIu64 "\n",
            r->seed, r->index, step, r->now, sk, k,
            sluice_algo_name((sluice_algo)a), l->max, l->window_ms, l->burst,
            opname,
            cost, sg, sw, r->seed);
}

/* One random request to the store and its model. Returns 0 on a
   mismatch. */
static int round_step(round *r, unsigned step)
{
    /* Most requests go to a few hot keys, so budgets run out. */
    int k = rng_pct(75) ? (int)rng_below((uint64_t)r->hot)
                        : (int)rng_below(KEYS);
    int a = (int)rng_below(TEST_ALGO_N);
    sluice__model *m = &models[k][a];
    uint64_t cost = random_cost(cost_cap(&m->limit));
    unsigned op = (unsigned)rng_below(100); /* hit, peek or reset */
    const key *kk = &r->keys[k];
    sluice_decision got, want;
    int rc, hit = op < 70;

    r->now += random_gap(r->tempo);
    sluice_vclock_set(r->clock, r->now);
    if (op < 3) {
        r->st->resets++;
        CHECK(sluice_reset(r->store, &m->limit, kk->bytes, kk->len) >= 0);
        sluice__model_init(m, &m->limit);
        return 1;
    }
    memset(&got, 0xA5, sizeof(got));
    if (hit)
        rc = sluice_hit(&got, r->store, &m->limit, kk->bytes, kk->len, cost);
    else
        rc = sluice_peek(&got, r->store, &m->limit, kk->bytes, kk->len, cost);
    sluice__model_decide(m, r->now, cost, hit, &want);
    *(hit ? &r->st->hits : &r->st->peeks) += 1;
    r->st->compared++;
    if (!want.allowed)
        r->st->refused++;
    if (!CHECK_OK(rc) || !CHECK(decision_same_answer(&got, &want))) {
        print_mismatch(r, step, k, a, hit ? "hit" : "peek", cost, &got,
                       &want);
        return 0;
    }
    return 1;
}

/* Long after, every budget is whole again, in the store as well. Returns
   0 on a mismatch. */
static int round_settle(round *r)
{
    r->now += 2 * 1000 + 1;
    sluice_vclock_set(r->clock, r->now);
    for (int k = 0; k < KEYS; k++)
        for (int a = 0; a < TEST_ALGO_N; a++) {
            sluice__model *m = &models[k][a];
            sluice_decision got, want;

            CHECK_OK(sluice_peek(&got, r->store, &m->limit, r->keys[k].bytes,
                                 r->keys[k].len, 1));
            sluice__model_decide(m, r->now, 1, 0, &want);
            CHECK(want.allowed &&
                  want.remaining == cost_cap(&m->limit) - 1);
            if (!CHECK(decision_same_answer(&got, &want)))
                return 0;
        }
    return 1;
}

/*
 * One round: a fresh store and fresh models, a limit per (key, algorithm),
 * and 'steps' random requests. Returns 0 at the first mismatch.
 */
static int run_round(uint64_t seed, unsigned index, unsigned steps,
                     round_stats *st)
{
    static round r;
    int ok = 1;

    r.seed = seed;
    r.index = index;
    r.st = st;
    round_open(&r);
    for (unsigned step = 0; step < steps && ok; step++)
        ok = round_step(&r, step);
    if (ok)
        ok = round_settle(&r);
    sluice_store_free(r.store);
    sluice_vclock_free(r.clock);
    return ok;
}

/* ---- Self-test of the model ---------------------------------------------- */

/*
 * A few decisions worked out by hand, so that the model is not merely
 * agreeing with the store.
 */
static void test_model_by_hand(void)
{
    sluice_limit l = {0};
    sluice_decision d;
    sluice__model m;

    /* fixed, max 3, window 100, first hit at 1000. */
    l.algo = SLUICE_FIXED;
    l.max = 3;
    l.window_ms = 100;
    sluice__model_init(&m, &l);
    sluice__model_decide(&m, 1000, 3, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 100);
    sluice__model_decide(&m, 1060, 1, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 40 && d.reset_after_ms == 40);
    sluice__model_decide(&m, 1100, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 2 && d.reset_after_ms == 100);

    /* sliding-counter, max 10, window 100: 10 in [1000, 1100); at 1101
       the estimate is 9.9 and 1 more does not fit until 1110 (9 + 1). */
    l.algo = SLUICE_SLIDING_COUNTER;
    l.max = 10;
    sluice__model_init(&m, &l);
    sluice__model_decide(&m, 1000, 10, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 200);
    sluice__model_decide(&m, 1101, 1, 1, &d);
    CHECK(!d.allowed && d.remaining == 0 && d.retry_after_ms == 9 &&
          d.reset_after_ms == 99);
    sluice__model_decide(&m, 1110, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 190);
    /* At 1150: 1 + 10 x 50 / 100 = 6; 1 more fits and leaves 3. */
    sluice__model_decide(&m, 1150, 1, 0, &d);
    CHECK(d.allowed && d.remaining == 3);

    /* sliding-log, max 2, window 10. */
    l.algo = SLUICE_SLIDING_LOG;
    l.max = 2;
    l.window_ms = 10;
    sluice__model_init(&m, &l);
    sluice__model_decide(&m, 0, 1, 1, &d);
    sluice__model_decide(&m, 4, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 10);
    sluice__model_decide(&m, 5, 2, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 9 && d.reset_after_ms == 9);
    sluice__model_decide(&m, 5, 1, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 5);
    sluice__model_decide(&m, 10, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 10);
}

/* ---- Main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, 20240601);
    unsigned rounds = DEFAULT_ROUNDS;
    round_stats st;

    if (argc > 2)
        rounds = (unsigned)strtoul(argv[2], NULL, 0);
    rng_state = seed;
    printf("test_model: seed %" PRIu64 " (rerun: test_model %" PRIu64 ")\n",
           seed, seed);

    test_model_by_hand();
    memset(&st, 0, sizeof(st));
    for (unsigned r = 0; r < rounds; r++)
        if (!run_round(seed, r, STEPS_PER_ROUND, &st))
            break; /* the first mismatch says it all */
    printf("test_model: %lu hits, %lu peeks, %lu resets; %lu decisions "
           "compared, %lu of them refusals\n",
           st.hits, st.peeks, st.resets, st.compared, st.refused);
    return test_summary("test_model");
}
