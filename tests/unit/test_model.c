/*
 * test_model.c - the embedded store against a naive reference model.
 *
 * Each algorithm is written again here, independently and as plainly as it
 * can be, from its definition alone:
 *
 *   fixed            a count and the instant t0 that opened its window;
 *                    the window is [t0, t0 + window).
 *   sliding-counter  a map from window index (now / window) to the units
 *                    admitted in that window; the estimate
 *                    cur + prev x (window - elapsed) / window is compared in
 *                    exact rationals (everything multiplied by window).
 *   sliding-log      the time of every admitted unit; those with
 *                    t > now - window count.
 *
 * Nothing about the answer is computed in closed form: retry_after_ms is
 * found by stepping a copy of the model forward 1 ms at a time until the
 * request would be admitted, and reset_after_ms by stepping until the state
 * after the decision holds nothing (at most 2 x window + 1 steps).
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
#include "test.h"
#include "rng.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 50
#define MODEL_MAX 256      /* the largest max a trace uses */
#define MODEL_WINDOWS 8    /* counter windows a model remembers */
#define STEPS_PER_ROUND 5000
#define DEFAULT_ROUNDS 100

typedef unsigned __int128 u128;

/* ---- The reference model ------------------------------------------------- */

typedef struct model {
    sluice_limit limit;
    /* fixed */
    int has_window;
    uint64_t t0;
    uint64_t count;
    /* sliding-counter: window index -> units admitted in it */
    struct {
        uint64_t idx;
        uint64_t units;
    } win[MODEL_WINDOWS];
    int nwin;
    /* sliding-log: one time per admitted unit, oldest first */
    uint64_t stamp[MODEL_MAX];
    size_t nstamp;
} model;

static void model_init(model *m, const sluice_limit *limit)
{
    sluice_limit l = *limit; /* 'limit' may be m's own */

    memset(m, 0, sizeof(*m));
    m->limit = l;
}

/* fixed: the units counted at 't'. */
static uint64_t fixed_count_at(const model *m, uint64_t t)
{
    if (m->has_window && t < m->t0 + m->limit.window_ms)
        return m->count;
    return 0;
}

/* sliding-counter: the units admitted in window 'idx'. */
static uint64_t counter_units(const model *m, uint64_t idx)
{
    for (int i = 0; i < m->nwin; i++)
        if (m->win[i].idx == idx)
            return m->win[i].units;
    return 0;
}

/* sliding-counter: the estimate at 't', times the window (exact). */
static u128 counter_estimate_w(const model *m, uint64_t t)
{
    uint64_t w = m->limit.window_ms;
    uint64_t idx = t / w;
    uint64_t elapsed = t - idx * w;
    uint64_t cur = counter_units(m, idx);
    uint64_t prev = idx == 0 ? 0 : counter_units(m, idx - 1);

    return (u128)cur * w + (u128)prev * (w - elapsed);
}

/* sliding-log: the units admitted in (t - window, t]. */
static uint64_t log_live(const model *m, uint64_t t)
{
    uint64_t n = 0;

    for (size_t i = 0; i < m->nstamp; i++)
        if (m->stamp[i] + m->limit.window_ms > t)
            n++;
    return n;
}

/* Would a request of 'cost' be admitted at 't'? */
static int model_admits(const model *m, uint64_t t, uint64_t cost)
{
    uint64_t max = m->limit.max, w = m->limit.window_ms;

    switch (m->limit.algo) {
    case SLUICE_FIXED:
        return fixed_count_at(m, t) + cost <= max;
    case SLUICE_SLIDING_COUNTER:
        return counter_estimate_w(m, t) + (u128)cost * w <= (u128)max * w;
    default:
        return log_live(m, t) + cost <= max;
    }
}

/* Counts an admitted request of 'cost' at 't'. */
static void model_count(model *m, uint64_t t, uint64_t cost)
{
    uint64_t w = m->limit.window_ms;

    switch (m->limit.algo) {
    case SLUICE_FIXED:
        if (fixed_count_at(m, t) == 0) {
            m->has_window = 1;
            m->t0 = t;
            m->count = 0;
        }
        m->count += cost;
        break;
    case SLUICE_SLIDING_COUNTER: {
        uint64_t idx = t / w;
        int i, kept = 0;

        /* Windows before idx - 1 can never count again (time only moves
           forward), so the map keeps at most two. */
        for (i = 0; i < m->nwin; i++)
            if (m->win[i].idx + 1 >= idx)
                m->win[kept++] = m->win[i];
        m->nwin = kept;
        for (i = 0; i < m->nwin; i++)
            if (m->win[i].idx == idx)
                break;
        if (i == m->nwin) {
            if (m->nwin == MODEL_WINDOWS) {
                fprintf(stderr, "model: too many windows\n");
                exit(2);
            }
            m->win[i].idx = idx;
            m->win[i].units = 0;
            m->nwin++;
        }
        m->win[i].units += cost;
        break;
    }
    default: {
        size_t kept = 0;

        /* Units that have left can never count again. */
        for (size_t i = 0; i < m->nstamp; i++)
            if (m->stamp[i] + w > t)
                m->stamp[kept++] = m->stamp[i];
        m->nstamp = kept;
        if (m->nstamp + cost > MODEL_MAX) {
            fprintf(stderr, "model: log overflow (more than max entries)\n");
            exit(2);
        }
        for (uint64_t i = 0; i < cost; i++)
            m->stamp[m->nstamp++] = t;
        break;
    }
    }
}

/* The budget left at 't': floor(max - what is counted), at least 0. */
static uint64_t model_remaining(const model *m, uint64_t t)
{
    uint64_t max = m->limit.max, w = m->limit.window_ms, used;

    switch (m->limit.algo) {
    case SLUICE_FIXED:
        used = fixed_count_at(m, t);
        return used >= max ? 0 : max - used;
    case SLUICE_SLIDING_COUNTER: {
        u128 est = counter_estimate_w(m, t);

        return est >= (u128)max * w ? 0 : (uint64_t)(((u128)max * w - est) / w);
    }
    default:
        used = log_live(m, t);
        return used >= max ? 0 : max - used;
    }
}

/* Does the state hold nothing at 't' (the budget is whole)? */
static int model_whole(const model *m, uint64_t t)
{
    switch (m->limit.algo) {
    case SLUICE_FIXED:
        return fixed_count_at(m, t) == 0;
    case SLUICE_SLIDING_COUNTER:
        return counter_estimate_w(m, t) == 0;
    default:
        /* The newest unit is the last to leave; the list is in time order. */
        return m->nstamp == 0 ||
               m->stamp[m->nstamp - 1] + m->limit.window_ms <= t;
    }
}

#define NOT_FOUND UINT64_MAX

/* The least d >= 1 at which the request would be admitted, by search. */
static uint64_t brute_retry(const model *m, uint64_t now, uint64_t cost)
{
    model probe = *m;
    uint64_t bound = 2 * m->limit.window_ms + 1;

    for (uint64_t d = 1; d <= bound; d++)
        if (model_admits(&probe, now + d, cost))
            return d;
    return NOT_FOUND;
}

/* The least d >= 0 at which the state holds nothing, by search. */
static uint64_t brute_reset(const model *after, uint64_t now)
{
    uint64_t bound = 2 * after->limit.window_ms + 1;

    for (uint64_t d = 0; d <= bound; d++)
        if (model_whole(after, now + d))
            return d;
    return NOT_FOUND;
}

/*
 * The model's decision for a request of 'cost' at 'now'; counted when
 * 'consume'. remaining and reset_after_ms describe the state after the
 * request as a hit would leave it (a peek answers what a hit would).
 */
static void model_decide(model *m, uint64_t now, uint64_t cost, int consume,
                         sluice_decision *out)
{
    model after = *m;

    memset(out, 0, sizeof(*out));
    out->limit = m->limit.max;
    if (model_admits(m, now, cost)) {
        out->allowed = 1;
        out->retry_after_ms = 0;
        model_count(&after, now, cost);
    } else {
        out->allowed = 0;
        out->retry_after_ms = brute_retry(m, now, cost);
    }
    out->remaining = model_remaining(&after, now);
    out->reset_after_ms = brute_reset(&after, now);
    if (consume)
        *m = after;
}

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
    return l;
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

static void format_decision(char *buf, size_t n, const sluice_decision *d)
{
    snprintf(buf, n,
             "allowed %d limit %" PRIu64 " remaining %" PRIu64
             " retry %" PRIu64 " reset %" PRIu64,
             d->allowed, d->limit, d->remaining, d->retry_after_ms,
             d->reset_after_ms);
}

static int same_decision(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms;
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

/*
 * One round: a fresh store and fresh models, a limit per (key, algorithm),
 * and 'steps' random requests. Returns 0 at the first mismatch.
 */
static int run_round(uint64_t seed, unsigned round, unsigned steps,
                     round_stats *st)
{
    static model models[KEYS][TEST_ALGO_N];
    key keys[KEYS];
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = NULL;
    sluice_store *store = NULL;
    unsigned profile = (unsigned)rng_below(8);
    unsigned tempo = (unsigned)rng_below(3);
    static const int hot_sizes[] = {1, 2, 4, 8};
    int hot = hot_sizes[rng_below(4)];
    uint64_t now;
    int ok = 1;

    switch (rng_below(4)) {
    case 0:
        now = 0;
        break;
    case 1:
        now = rng_below(10000);
        break;
    case 2:
        now = 1000 * (1 + rng_below(1000)) - 1; /* just before many seams */
        break;
    default:
        now = rng_below(1ULL << 45);
        break;
    }
    make_keys(keys);
    for (int k = 0; k < KEYS; k++)
        for (int a = 0; a < TEST_ALGO_N; a++) {
            sluice_limit l = random_limit((sluice_algo)a, profile);

            model_init(&models[k][a], &l);
        }
    CHECK_OK(sluice_vclock_new(&clock, now));
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    CHECK_OK(sluice_store_open(&store, NULL, &opts));
    if (clock == NULL || store == NULL)
        exit(2);

    for (unsigned step = 0; step < steps && ok; step++) {
        /* Most requests go to a few hot keys, so budgets run out. */
        int k = rng_pct(75) ? (int)rng_below((uint64_t)hot) : (int)rng_below(KEYS);
        int a = (int)rng_below(TEST_ALGO_N);
        model *m = &models[k][a];
        uint64_t cost = random_cost(m->limit.max);
        unsigned op = (unsigned)rng_below(100); /* hit, peek or reset */
        sluice_decision got, want;
        const char *opname;
        int rc;

        now += random_gap(tempo);
        sluice_vclock_set(clock, now);
        if (op < 3) {
            st->resets++;
            CHECK_OK(sluice_reset(store, &m->limit, keys[k].bytes,
                                  keys[k].len));
            model_init(m, &m->limit);
            continue;
        }
        memset(&got, 0xA5, sizeof(got));
        if (op < 70) {
            opname = "hit";
            st->hits++;
            rc = sluice_hit(&got, store, &m->limit, keys[k].bytes,
                            keys[k].len, cost);
            model_decide(m, now, cost, 1, &want);
        } else {
            opname = "peek";
            st->peeks++;
            rc = sluice_peek(&got, store, &m->limit, keys[k].bytes,
                             keys[k].len, cost);
            model_decide(m, now, cost, 0, &want);
        }
        st->compared++;
        if (!want.allowed)
            st->refused++;
        if (!CHECK_OK(rc) || !CHECK(same_decision(&got, &want))) {
            char sg[160], sw[160], sk[40];

            format_decision(sg, sizeof(sg), &got);
            format_decision(sw, sizeof(sw), &want);
            format_key(sk, sizeof(sk), &keys[k]);
            fprintf(stderr,
                    "MISMATCH seed %" PRIu64 " round %u step %u: t=%" PRIu64
                    " key=%s (#%d) algo=%s max=%" PRIu64 " window=%" PRIu64
                    " %s cost=%" PRIu64 "\n"
                    "    store: %s\n    model: %s\n"
                    "    rerun: test_model %" PRIu64 "\n",
                    seed, round, step, now, sk, k,
                    sluice_algo_name((sluice_algo)a), m->limit.max,
                    m->limit.window_ms, opname, cost, sg, sw, seed);
            ok = 0;
        }
    }

    /* Long after, every budget is whole again, in the store as well. */
    if (ok) {
        now += 2 * 1000 + 1;
        sluice_vclock_set(clock, now);
        for (int k = 0; k < KEYS && ok; k++)
            for (int a = 0; a < TEST_ALGO_N; a++) {
                model *m = &models[k][a];
                sluice_decision got, want;

                CHECK_OK(sluice_peek(&got, store, &m->limit, keys[k].bytes,
                                     keys[k].len, 1));
                model_decide(m, now, 1, 0, &want);
                CHECK(want.allowed && want.remaining == m->limit.max - 1);
                if (!CHECK(same_decision(&got, &want))) {
                    ok = 0;
                    break;
                }
            }
    }
    sluice_store_free(store);
    sluice_vclock_free(clock);
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
    model m;

    /* fixed, max 3, window 100, first hit at 1000. */
    l.algo = SLUICE_FIXED;
    l.max = 3;
    l.window_ms = 100;
    model_init(&m, &l);
    model_decide(&m, 1000, 3, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 100);
    model_decide(&m, 1060, 1, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 40 && d.reset_after_ms == 40);
    model_decide(&m, 1100, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 2 && d.reset_after_ms == 100);

    /* sliding-counter, max 10, window 100: 10 in [1000, 1100); at 1101
       the estimate is 9.9 and 1 more does not fit until 1110 (9 + 1). */
    l.algo = SLUICE_SLIDING_COUNTER;
    l.max = 10;
    model_init(&m, &l);
    model_decide(&m, 1000, 10, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 200);
    model_decide(&m, 1101, 1, 1, &d);
    CHECK(!d.allowed && d.remaining == 0 && d.retry_after_ms == 9 &&
          d.reset_after_ms == 99);
    model_decide(&m, 1110, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 190);
    /* At 1150: 1 + 10 x 50 / 100 = 6; 1 more fits and leaves 3. */
    model_decide(&m, 1150, 1, 0, &d);
    CHECK(d.allowed && d.remaining == 3);

    /* sliding-log, max 2, window 10. */
    l.algo = SLUICE_SLIDING_LOG;
    l.max = 2;
    l.window_ms = 10;
    model_init(&m, &l);
    model_decide(&m, 0, 1, 1, &d);
    model_decide(&m, 4, 1, 1, &d);
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 10);
    model_decide(&m, 5, 2, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 9 && d.reset_after_ms == 9);
    model_decide(&m, 5, 1, 1, &d);
    CHECK(!d.allowed && d.retry_after_ms == 5);
    model_decide(&m, 10, 1, 1, &d);
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
