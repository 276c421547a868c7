/*
 * test_hit_all.c - sluice_hit_all() on the embedded store, on a virtual
 * clock.
 *
 *   - All or nothing: a request one limit refuses counts in none (each
 *     limit's count read back with sluice_peek_all()); the combined
 *     decision has the largest wait, the least remaining, the deciding
 *     limit's max.
 *   - 10/s AND 1000/h, with figures worked out by hand.
 *   - Every pair of algorithms (and an algorithm with itself over two
 *     windows): a random trace against a reference made of sluice_peek()
 *     and sluice_hit() on each limit alone (peek all, then hit all if all
 *     admit), decision for decision; and a peek_all just before each
 *     hit_all answers exactly what the hit_all does.
 *   - Bad input: a clear error, and nothing counted.
 *   - Its state is apart from sluice_hit()'s; sluice_reset_all() forgets it;
 *     the key cap holds (and a refusal by it is counted in the stats).
 *   - A refused hit_all emits one "emq.rate_limit.hit", of the limit that
 *     decided; an admission or a peek, none.
 *   - Threads hammering one id never get more admitted than any limit
 *     allows (and exactly what the tightest allows).
 */
#include "compare.h"
#include "mem_fixture.h"
#include "rng.h"
#include "test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID "user42"
#define ID_LEN (sizeof(ID) - 1)

static sluice_decision hit_all(fixture *fx, const sluice_limit *l, size_t n,
                               uint64_t cost, sluice_decision *each)
{
    sluice_decision d;

    CHECK_OK(sluice_hit_all(&d, each, fx->store, l, n, ID, ID_LEN, cost));
    return d;
}

static sluice_decision peek_all(fixture *fx, const sluice_limit *l, size_t n,
                                uint64_t cost, sluice_decision *each)
{
    sluice_decision d;

    CHECK_OK(sluice_peek_all(&d, each, fx->store, l, n, ID, ID_LEN, cost));
    return d;
}

/* ---- All or nothing ----------------------------------------------------------- */

static void test_all_or_nothing(void)
{
    fixture fx;
    sluice_limit l[2] = {limit_of(SLUICE_FIXED, 2, 1000),
                         limit_of(SLUICE_SLIDING_LOG, 5, 10000)};
    sluice_decision each[2], d;

    fx_open(&fx, 1000);
    d = hit_all(&fx, l, 2, 1, each);
    EXPECT(d, &l[0], 1, 1, 0, 10000);
    EXPECT(each[0], &l[0], 1, 1, 0, 1000);
    EXPECT(each[1], &l[1], 1, 4, 0, 10000);
    d = hit_all(&fx, l, 2, 1, NULL);
    EXPECT(d, &l[0], 1, 0, 0, 10000);
    /* The fixed window refuses: the log must not count it. */
    d = hit_all(&fx, l, 2, 1, each);
    EXPECT(d, &l[0], 0, 0, 1000, 10000);
    CHECK_EQ_U64(each[0].allowed, 0);
    CHECK_EQ_U64(each[1].allowed, 1);
    CHECK_EQ_U64(each[1].remaining, 2); /* a peek: 5 - 2 - 1 */
    for (int i = 0; i < 5; i++)
        (void)hit_all(&fx, l, 2, 1, NULL);
    d = peek_all(&fx, l, 2, 1, each);
    CHECK_EQ_U64(each[1].remaining, 2); /* still 2 counted in the log */
    /* The window rolls: 3 more fit the log (5 - 2), then the log refuses
       with its wait, which is the larger. */
    fx_at(&fx, 2000);
    d = hit_all(&fx, l, 2, 1, NULL);
    EXPECT(d, &l[0], 1, 1, 0, 10000);
    d = hit_all(&fx, l, 2, 1, NULL);
    EXPECT(d, &l[0], 1, 0, 0, 10000);
    fx_at(&fx, 3000);
    d = hit_all(&fx, l, 2, 1, NULL);
    EXPECT(d, &l[1], 1, 0, 0, 10000);
    fx_at(&fx, 3500);
    d = hit_all(&fx, l, 2, 1, each);
    /* The log's first entry (1000) leaves at 11000: a wait of 7500, and
       the fixed window (armed at 3000) has 1 left. */
    EXPECT(d, &l[1], 0, 0, 7500, 10000 - 500);
    EXPECT(each[0], &l[0], 1, 0, 0, 500);
    fx_close(&fx);
}

/* Two refusing limits: the combined wait is the larger of theirs. */
static void test_largest_wait(void)
{
    fixture fx;
    sluice_limit l[3] = {limit_of(SLUICE_FIXED, 1, 2000),
                         limit_of(SLUICE_FIXED, 1, 5000),
                         limit_of(SLUICE_SLIDING_LOG, 100, 60000)};
    sluice_decision each[3], d;

    fx_open(&fx, 0);
    d = hit_all(&fx, l, 3, 1, NULL);
    EXPECT(d, &l[0], 1, 0, 0, 60000);
    fx_at(&fx, 1000);
    d = hit_all(&fx, l, 3, 1, each);
    EXPECT(d, &l[1], 0, 0, 4000, 60000);
    CHECK_EQ_U64(each[0].retry_after_ms, 1000);
    CHECK_EQ_U64(each[1].retry_after_ms, 4000);
    EXPECT(each[2], &l[2], 1, 98, 0, 60000);
    /* At 2000 the first has rolled; the second still refuses. */
    fx_at(&fx, 2000);
    d = hit_all(&fx, l, 3, 1, each);
    EXPECT(d, &l[1], 0, 0, 3000, 60000);
    CHECK_EQ_U64(each[0].allowed, 1);
    fx_at(&fx, 5000);
    d = hit_all(&fx, l, 3, 1, NULL);
    EXPECT(d, &l[0], 1, 0, 0, 60000);
    d = peek_all(&fx, l, 3, 1, each);
    EXPECT(each[2], &l[2], 1, 97, 0, 60000); /* two counted, not four */
    fx_close(&fx);
}

/* ---- 10/s AND 1000/h ------------------------------------------------------------ */

/*
 * fixed 10/1000 ms and sliding-log 1000/3,600,000 ms from t = 1000: ten a
 * second for 100 seconds all pass (the log then holds 1000, the oldest ten
 * at 1000). The 11th in a second is refused by the fixed window alone: wait
 * = what is left of that second. At t = 101,000 a new second begins, but the
 * hour is spent: the log refuses until its oldest entries (1000) leave at
 * 3,601,000, a wait of 3,500,000 ms, and the fixed window's fresh budget of
 * 10 is not touched.
 */
static void test_second_and_hour(void)
{
    fixture fx;
    sluice_limit l[2] = {limit_of(SLUICE_FIXED, 10, 1000),
                         limit_of(SLUICE_SLIDING_LOG, 1000, 3600000)};
    sluice_decision each[2], d;
    int admitted = 0;

    fx_open(&fx, 1000);
    for (int s = 0; s < 100; s++) {
        fx_at(&fx, 1000 + (uint64_t)s * 1000);
        for (int i = 0; i < 10; i++)
            admitted += hit_all(&fx, l, 2, 1, NULL).allowed;
        fx_at(&fx, 1000 + (uint64_t)s * 1000 + 400);
        d = hit_all(&fx, l, 2, 1, NULL);
        if (s == 0) /* fixed refuses: 600 ms of its second left */
            EXPECT(d, &l[0], 0, 0, 600, 3600000);
    }
    CHECK_EQ_U64(admitted, 1000);
    fx_at(&fx, 101000);
    d = hit_all(&fx, l, 2, 1, each);
    EXPECT(d, &l[1], 0, 0, 3500000, 3600000 - 100000 + 99000);
    EXPECT(each[0], &l[0], 1, 9, 0, 1000);
    d = peek_all(&fx, l, 2, 1, each);
    EXPECT(each[0], &l[0], 1, 9, 0, 1000); /* still a fresh second */
    fx_at(&fx, 3601000);
    d = hit_all(&fx, l, 2, 1, NULL);
    EXPECT(d, &l[0], 1, 9, 0, 3600000);
    fx_close(&fx);
}

/* ---- Every pair, against a reference ------------------------------------------- */

/*
 * The reference: each limit alone through sluice_peek()/sluice_hit() on its
 * own key of a second store, peeked all, then hit all if every one admits.
 */
static void reference(fixture *ref, const sluice_limit *l, size_t n,
                      uint64_t cost, int consume, sluice_decision *each)
{
    int all = 1;

    for (size_t i = 0; i < n; i++) {
        char key = (char)('a' + i);

        CHECK_OK(sluice_peek(&each[i], ref->store, &l[i], &key, 1, cost));
        all = all && each[i].allowed;
    }
    for (size_t i = 0; i < n && all && consume; i++) {
        char key = (char)('a' + i);

        CHECK_OK(sluice_hit(&each[i], ref->store, &l[i], &key, 1, cost));
    }
}

static void pair_trace(sluice_algo a, sluice_algo b, uint64_t seed)
{
    fixture fx, ref;
    sluice_limit l[2] = {limit_of(a, 4, 1000), limit_of(b, 9, 5000)};
    uint64_t now = 1000000;

    rng_state = seed;
    fx_open(&fx, now);
    fx_open(&ref, now);
    for (int step = 0; step < 400; step++) {
        sluice_decision got[2], want[2], d;
        uint64_t cost = rng_pct(80) ? 1 : rng_range(1, 4);
        int consume = rng_pct(85);

        test_context("%s + %s, seed %llu, step %d", sluice_algo_name(a),
                     sluice_algo_name(b), (unsigned long long)seed, step);
        now += rng_pct(30) ? 0 : rng_range(0, 900);
        fx_at(&fx, now);
        fx_at(&ref, now);
        if (consume) {
            sluice_decision p, pe[2];

            /* A peek answers exactly what the hit then does. */
            CHECK_OK(sluice_peek_all(&p, pe, fx.store, l, 2, ID, ID_LEN,
                                     cost));
            CHECK_OK(sluice_hit_all(&d, got, fx.store, l, 2, ID, ID_LEN,
                                    cost));
            CHECK_SAME(p, d);
            CHECK_SAME(pe[0], got[0]);
            CHECK_SAME(pe[1], got[1]);
        } else
            CHECK_OK(sluice_peek_all(&d, got, fx.store, l, 2, ID, ID_LEN,
                                     cost));
        reference(&ref, l, 2, cost, consume, want);
        CHECK_SAME(got[0], want[0]);
        CHECK_SAME(got[1], want[1]);
        CHECK_EQ_U64(d.allowed, want[0].allowed && want[1].allowed);
    }
    test_context(NULL);
    fx_close(&fx);
    fx_close(&ref);
}

static void test_pairs(uint64_t seed)
{
    for (int a = 0; a < TEST_ALGO_N; a++)
        for (int b = 0; b < TEST_ALGO_N; b++)
            pair_trace((sluice_algo)a, (sluice_algo)b,
                       seed + (uint64_t)(a * TEST_ALGO_N + b));
}

/* ---- Bad input --------------------------------------------------------------- */

static void test_bad_input(void)
{
    fixture fx;
    sluice_limit l[SLUICE_HIT_ALL_MAX + 1];
    sluice_limit dup[2] = {limit_of(SLUICE_FIXED, 5, 1000),
                           limit_of(SLUICE_FIXED, 9, 1000)};
    sluice_decision d, each[2];

    fx_open(&fx, 1000);
    for (int i = 0; i <= SLUICE_HIT_ALL_MAX; i++)
        l[i] = limit_of(SLUICE_SLIDING_LOG, 5, 1000 + (uint64_t)i);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, 0, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK(strstr(sluice_last_error(), "1 to 16") != NULL);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, SLUICE_HIT_ALL_MAX + 1,
                            ID, ID_LEN, 1), SLUICE_EINVAL);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, NULL, 1, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_hit_all(NULL, NULL, fx.store, l, 1, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_hit_all(&d, NULL, NULL, l, 1, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, 1, NULL, 3, 1),
             SLUICE_EINVAL);
    /* Sixteen is the most, and fine. */
    d = hit_all(&fx, l, SLUICE_HIT_ALL_MAX, 1, NULL);
    CHECK_EQ_U64(d.allowed, 1);
    /* A cost above one max: ECOST, and nothing counted in the others. */
    l[1].max = 2;
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, 2, ID, ID_LEN, 3),
             SLUICE_ECOST);
    l[1].window_ms = 0;
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, 2, ID, ID_LEN, 1),
             SLUICE_ERANGE);
    l[1] = limit_of(SLUICE_SLIDING_LOG, 5, 1001);
    d = peek_all(&fx, l, 2, 1, each);
    CHECK_EQ_U64(each[0].remaining, 3); /* 5 - 1 counted - 1 */
    CHECK_EQ_U64(each[1].remaining, 3);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, dup, 2, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK(strstr(sluice_last_error(), "share one state") != NULL);
    CHECK_RC(sluice_peek_all(&d, NULL, fx.store, dup, 2, ID, ID_LEN, 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_reset_all(fx.store, dup, 2, ID, ID_LEN), SLUICE_EINVAL);
    CHECK_RC(sluice_reset_all(fx.store, l, 0, ID, ID_LEN), SLUICE_EINVAL);
    /* Same window, other algorithms: fine. */
    dup[1].algo = SLUICE_SLIDING_LOG;
    d = hit_all(&fx, dup, 2, 1, NULL);
    CHECK_EQ_U64(d.allowed, 1);
    fx_close(&fx);
}

/* ---- Apart from sluice_hit(); reset; the key cap ---------------------------------- */

static void test_apart_and_reset(void)
{
    fixture fx;
    sluice_limit l[2] = {limit_of(SLUICE_FIXED, 3, 1000),
                         limit_of(SLUICE_SLIDING_COUNTER, 3, 1000)};
    sluice_decision d, each[2];
    sluice_store_stats st;

    fx_open(&fx, 1000);
    for (int i = 0; i < 3; i++)
        (void)hit_all(&fx, l, 2, 1, NULL);
    CHECK_EQ_U64(hit_all(&fx, l, 2, 1, NULL).allowed, 0);
    /* sluice_hit() on the same key and limit has a count of its own. */
    EXPECT(HIT(&fx, &l[0], ID, 1), &l[0], 1, 2, 0, 1000);
    CHECK_EQ_U64(HIT(&fx, &l[1], ID, 1).remaining, 2);
    /* Nor does the key "window + id" that hit_all uses inside reach it. */
    {
        char raw[8 + ID_LEN];
        uint64_t w = 1000;

        memcpy(raw, &w, 8);
        memcpy(raw + 8, ID, ID_LEN);
        EXPECT(HITN(&fx, &l[0], raw, sizeof(raw), 1), &l[0], 1, 2, 0, 1000);
    }
    d = peek_all(&fx, l, 2, 1, each);
    CHECK_EQ_U64(d.allowed, 0);
    CHECK_OK(sluice_reset_all(fx.store, l, 2, ID, ID_LEN));
    d = hit_all(&fx, l, 2, 1, NULL);
    CHECK(d.allowed && d.remaining == 2 && d.limit == 3);
    /* ... and sluice_hit()'s count was not reset. */
    EXPECT(PEEK(&fx, &l[0], ID, 1), &l[0], 1, 1, 0, 1000);
    fx_close(&fx);

    /* The key cap: a hit_all that needs 2 new keys where 1 is free fails
       whole, counting nothing; once idle keys go, it fits. */
    fx_open_capped(&fx, 1000, 3);
    EXPECT(HIT(&fx, &l[0], "x", 1), &l[0], 1, 2, 0, 1000);
    EXPECT(HIT(&fx, &l[0], "y", 1), &l[0], 1, 2, 0, 1000);
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, l, 2, ID, ID_LEN, 1),
             SLUICE_EFULL);
    CHECK(strstr(sluice_last_error(), "cap") != NULL);
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK_EQ_U64(st.full, 1);
    d = peek_all(&fx, l, 2, 1, each);
    CHECK_EQ_U64(each[0].remaining, 2);
    CHECK_EQ_U64(each[1].remaining, 2);
    fx_at(&fx, 5000); /* x and y are idle now: swept to make room */
    d = hit_all(&fx, l, 2, 1, NULL);
    CHECK(d.allowed && d.remaining == 2);
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK_EQ_U64(st.full, 1);
    CHECK_EQ_U64(st.keys, 2);
    fx_close(&fx);
}

/* ---- Telemetry --------------------------------------------------------------- */

typedef struct seen {
    int calls;
    double delay_ms;
    char algo[32], window[24];
} seen;

static void on_hit(const sluice_event *ev, void *payload)
{
    seen *s = payload;

    s->calls++;
    s->delay_ms = ev->measurements[0].value;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        const sluice_metadata *m = &ev->metadata[i];

        if (strcmp(m->name, "algorithm") == 0)
            snprintf(s->algo, sizeof(s->algo), "%.*s", (int)m->value_len,
                     m->value);
        if (strcmp(m->name, "window_ms") == 0)
            snprintf(s->window, sizeof(s->window), "%.*s", (int)m->value_len,
                     m->value);
    }
}

/* One receipt per refused hit_all, of the deciding limit; none otherwise. */
static void test_telemetry(void)
{
    fixture fx;
    sluice_limit l[2] = {limit_of(SLUICE_FIXED, 1, 1000),
                         limit_of(SLUICE_SLIDING_LOG, 1, 5000)};
    seen s = {0, 0, "", ""};
    sluice_decision d;

    fx_open(&fx, 1000);
    CHECK_OK(sluice_telemetry_attach("test.hit_all",
                                     SLUICE_EVENT_RATE_LIMIT_HIT, on_hit, &s));
    d = hit_all(&fx, l, 2, 1, NULL);
    CHECK(d.allowed);
    CHECK_EQ_U64(s.calls, 0);
    fx_at(&fx, 1500);
    d = hit_all(&fx, l, 2, 1, NULL);
    CHECK(!d.allowed);
    CHECK_EQ_U64(s.calls, 1);
    CHECK(strcmp(s.algo, "sliding-log") == 0 && strcmp(s.window, "5000") == 0);
    CHECK_EQ_U64((uint64_t)s.delay_ms, 4500);
    (void)peek_all(&fx, l, 2, 1, NULL);
    CHECK_EQ_U64(s.calls, 1);
    CHECK_OK(sluice_telemetry_detach("test.hit_all"));
    fx_close(&fx);
}

/* ---- Threads ------------------------------------------------------------------ */

#define THREADS 8
#define CALLS 2000

typedef struct hammer {
    sluice_store *store;
    const sluice_limit *limits;
    size_t n;
    int admitted;
    int other; /* admitted on the thread's own id */
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;
    char own[40];

    snprintf(own, sizeof(own), "own%p", (void *)h);
    for (int i = 0; i < CALLS; i++) {
        sluice_decision d;

        if (sluice_hit_all(&d, NULL, h->store, h->limits, h->n, ID, ID_LEN,
                           1 + (uint64_t)(i % 2)) == SLUICE_OK)
            h->admitted += d.allowed ? 1 + i % 2 : 0;
        /* Ids of its own, in other shards: locks taken in order never
           deadlock. */
        if (sluice_hit_all(&d, NULL, h->store, h->limits, h->n, own,
                           strlen(own), 1) == SLUICE_OK)
            h->other += d.allowed;
    }
    return NULL;
}

static void test_threads(void)
{
    fixture fx;
    sluice_limit l[4] = {limit_of(SLUICE_FIXED, 700, 100000000),
                         limit_of(SLUICE_SLIDING_LOG, 500, 100000000),
                         limit_of(SLUICE_SLIDING_COUNTER, 900, 100000000),
                         limit_of(SLUICE_SLIDING_LOG, 600, 200000000)};
    pthread_t tids[THREADS];
    hammer h[THREADS];
    sluice_decision each[4];
    int total = 0;

    fx_open(&fx, 1000);
    for (int i = 0; i < THREADS; i++) {
        h[i] = (hammer){fx.store, l, 4, 0, 0};
        pthread_create(&tids[i], NULL, hammer_run, &h[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tids[i], NULL);
        total += h[i].admitted;
        CHECK_EQ_U64(h[i].other, 500);
    }
    /* Time stood still: the tightest limit (500) let in at most 500 units,
       and every limit counted exactly what was admitted. */
    CHECK(total <= 500);
    CHECK(total >= 499); /* a cost of 2 may not fit the last unit */
    (void)peek_all(&fx, l, 4, 1, each);
    CHECK_EQ_U64(each[0].remaining + 1, 700 - (uint64_t)total);
    CHECK_EQ_U64(each[1].remaining + (each[1].allowed ? 1 : 0),
                 500 - (uint64_t)total);
    CHECK_EQ_U64(each[3].remaining + (each[3].allowed ? 1 : 0),
                 600 - (uint64_t)total);
    fx_close(&fx);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 1, 1);

    test_all_or_nothing();
    test_largest_wait();
    test_second_and_hour();
    test_pairs(seed);
    test_bad_input();
    test_apart_and_reset();
    test_telemetry();
    test_threads();
    return test_summary("test_hit_all");
}
