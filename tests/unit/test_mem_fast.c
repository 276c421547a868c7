/*
 * test_mem_fast.c - the embedded store's lock-free path (src/mem/mem.c),
 * on a virtual clock.
 *
 *   words     every algorithm with a word (algo.h), with its own word
 *             function and with the generic one: on random traces, the
 *             word path as the store runs it (the word function, falling
 *             back to the struct on SLUICE__WORD_RANGE or a held word) and
 *             the struct alone give the same answers, limits and times
 *             beyond the word's range included; a refusal or a peek leaves
 *             the word as it was (the store then writes nothing);
 *   paths     the store, on random traces over keys whose limits move in
 *             and out of the word's range (maxes and counts to 2^53,
 *             windows to 2^40 ms, so keys move to the locked path and back,
 *             and rebase), answers as the struct arithmetic does; alone,
 *             and among 12,000 to 21,000 other keys (in cells, moved as the
 *             tables grow);
 *   clamp     a clock that steps back across a window's expiry that a
 *             peek has seen: the lock-free path decides at the key's latest
 *             time, as the locked path does;
 *   hot key   THREADS threads hit one key through the lock-free path, a
 *             window at a time (the main thread moves the clock between
 *             windows): exactly max units are admitted per window, costs
 *             1 to 3 and peeks mixed in;
 *   churn     threads hit keys while another resets them and the clock
 *             moves on, so that sweeps, resets, resizes and the key cap
 *             unlink entries that lock-free readers may hold (run under
 *             ASan and TSan: nothing is read after it is freed); no more
 *             than max per window and reset is admitted, and the keys go
 *             once idle; with 3,000 keys, and with 40,000 (tables with
 *             cells, entries moving between them as tables grow and shrink);
 *   cells     with 30,000 keys, most of an algorithm with a word live in
 *             cells, none of one without; the store's byte count is what
 *             its shards hold; once idle, the cells are given back.
 *
 * Usage: test_mem_fast [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "algo/algo.h"
#include "mem_fixture.h"
#include "mem/mem.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 4

static sluice_store_stats stats_of(sluice_store *store)
{
    sluice_store_stats st;

    memset(&st, 0, sizeof(st));
    CHECK_OK(sluice_store_stats_get(&st, store));
    return st;
}

/* A limit from a set that crosses the words' ranges (one that the
   algorithm takes: gcra's max x window is at most 2^53). */
static sluice_limit random_limit(sluice_algo algo)
{
    static const uint64_t maxes[] = {1, 3, 10, 1000, (1u << 24) - 1,
                                     1ull << 40, 1ull << 50, SLUICE_MAX_MAX};
    static const uint64_t windows[] = {1, 7, 100, 1000, 1ull << 38,
                                       (1ull << 39) - 5, 1ull << 39,
                                       SLUICE_WINDOW_MAX_MS};
    sluice_limit l;

    do {
        l = limit_of(algo, maxes[rng_below(8)], windows[rng_below(8)]);
        if (rng_pct(60)) /* mostly in range, so the word is used */
            l.max = rng_range(1, 50), l.window_ms = rng_range(1, 200);
    } while (sluice_limit_check(&l) != SLUICE_OK);
    return l;
}

/* Mostly small, sometimes up to max: counts then take many bits. */
static uint64_t random_cost(const sluice_limit *l)
{
    if (rng_pct(20))
        return rng_range(1, l->max);
    return rng_range(1, l->max < 5 ? l->max : 5);
}

static bool same(const sluice_decision *a, const sluice_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms &&
           a->reset_after_ms == b->reset_after_ms;
}

/* ---- Words -------------------------------------------------------------- */

/*
 * One trace of 'steps' calls on one key: 'word' and 'held' do what the
 * store does (the word while it can, else the struct 'ws'), 'ref' is the
 * struct alone. Returns false at the first difference.
 */
static bool word_trace(const sluice__algo *algo, sluice_algo id, int steps)
{
    _Alignas(8) unsigned char ref[64], ws[64];
    uint64_t base = rng_range(0, 1ull << 45), now = base, word = 0;
    bool held = false;

    algo->init(ref);
    algo->init(ws);
    if (!algo->word->store(ws, base, &word))
        return CHECK(0);
    for (int i = 0; i < steps; i++) {
        sluice_limit l = random_limit(id);
        uint64_t cost = random_cost(&l), next = 0;
        bool consume = rng_pct(80);
        sluice_decision want, got;
        int rc = SLUICE__WORD_RANGE;

        now += rng_pct(30) ? rng_range(0, 3 * l.window_ms) : rng_range(0, 3);
        if (now > SLUICE_NOW_MAX_MS)
            now = SLUICE_NOW_MAX_MS;
        CHECK_OK(algo->decide(ref, &l, now, cost, consume, &want));
        if (!held)
            rc = sluice__word_decide(algo, word, base, &l, now, cost, consume,
                                     &next, &got);
        if (rc == SLUICE_OK) {
            /* What changes nothing writes nothing. */
            if ((!consume || !got.allowed) && !CHECK_EQ_U64(next, word))
                return false;
            word = next;
        } else {
            if (!CHECK_EQ_U64(rc, SLUICE__WORD_RANGE))
                return false;
            if (!held)
                algo->word->load(word, base, ws);
            CHECK_OK(algo->decide(ws, &l, now, cost, consume, &got));
            held = !algo->word->store(ws, base, &word);
        }
        if (!CHECK(same(&want, &got))) {
            fprintf(stderr, "    step %d: max %" PRIu64 " window %" PRIu64
                    " now %" PRIu64 " cost %" PRIu64 " consume %d\n", i,
                    l.max, l.window_ms, now, cost, consume);
            decision_print("word", rc, &got);
            decision_print("struct", 0, &want);
            return false;
        }
    }
    return true;
}

/*
 * Each algorithm with a word, with its own word decide() and with the
 * generic one (load(), decide(), store()) that an algorithm without its own
 * gets.
 */
static void test_words(void)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice__algo generic;
        sluice__word_ops ops;

        if (sluice__algos[a]->word == NULL)
            continue;
        generic = *sluice__algos[a];
        ops = *generic.word;
        ops.decide = NULL;
        generic.word = &ops;
        for (int g = 0; g < 2; g++) {
            const sluice__algo *algo = g == 0 ? sluice__algos[a] : &generic;

            test_context("words: %s%s", algo->name, g ? " (generic)" : "");
            for (int t = 0; t < 1000; t++)
                if (!word_trace(algo, (sluice_algo)a, 200))
                    return;
        }
    }
}

/* ---- Paths -------------------------------------------------------------- */

#define PATH_KEYS 4
#define PATH_FILL 12000      /* keys beside the trace's, so tables have cells */
#define PATH_FILL_PER_STEP 30 /* and more during it, so they grow */

/* Hits filler keys 'from' .. 'to' - 1 once each, under a limit that keeps
   them for good: tables grow, and entries move into their cells. */
static void fill_keys(fixture *fx, sluice_algo id, int from, int to)
{
    sluice_limit l = limit_of(id, 1000, 1ull << 40);

    for (int k = from; k < to; k++) {
        char key[24];
        int len = snprintf(key, sizeof(key), "fill:%d", k);

        (void)HITN(fx, &l, key, (size_t)len, 1);
    }
}

/*
 * The store against the struct arithmetic (the locked path's), per key, on
 * a clock that only moves forward: the store's answer does not depend on
 * which path served it. With 'fill', among many more keys, so the trace's
 * keys live in cells (mem.h), move when the tables grow, and rebase into
 * cells or blocks.
 */
static void path_trace(sluice_algo id, int steps, bool fill)
{
    const sluice__algo *algo = sluice__algos[id];
    _Alignas(8) unsigned char ref[PATH_KEYS][64];
    uint64_t now = rng_range(1, 1ull << 44);
    fixture fx;

    fx_open(&fx, now);
    for (int k = 0; k < PATH_KEYS; k++)
        algo->init(ref[k]);
    if (fill)
        fill_keys(&fx, id, 0, PATH_FILL);
    for (int i = 0; i < steps; i++) {
        sluice_limit l = random_limit(id);
        uint64_t cost = random_cost(&l);
        bool consume = rng_pct(80);
        char key[2] = {(char)('a' + rng_below(PATH_KEYS)), 0};
        sluice_decision want, got;

        now += rng_pct(30) ? rng_range(0, 3 * l.window_ms) : rng_range(0, 3);
        if (now > SLUICE_NOW_MAX_MS)
            now = SLUICE_NOW_MAX_MS;
        fx_at(&fx, now);
        if (fill)
            fill_keys(&fx, id, PATH_FILL + i * PATH_FILL_PER_STEP,
                      PATH_FILL + (i + 1) * PATH_FILL_PER_STEP);
        CHECK_OK(algo->decide(ref[key[0] - 'a'], &l, now, cost, consume,
                              &want));
        got = fx_decide_at(&fx, &l, key, 1, cost, consume, __FILE__,
                           __LINE__);
        if (!CHECK_SAME(got, want)) {
            fprintf(stderr, "    step %d: key %s max %" PRIu64 " window %"
                    PRIu64 " now %" PRIu64 "\n", i, key, l.max, l.window_ms,
                    now);
            break;
        }
    }
    fx_close(&fx);
}

static void test_paths(void)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        if (sluice__algos[a]->word == NULL)
            continue;
        test_context("paths: %s", sluice__algos[a]->name);
        for (int t = 0; t < 100; t++)
            path_trace((sluice_algo)a, 300, false);
        test_context("paths: %s, among many keys", sluice__algos[a]->name);
        for (int t = 0; t < 4; t++)
            path_trace((sluice_algo)a, 300, true);
    }
}

/* ---- The clamp ----------------------------------------------------------- */

typedef struct peeker {
    fixture *fx;
    sluice_limit limit;
    sluice_decision d;
} peeker;

/* A new thread's first call takes no store-wide sweep step. */
static void *peek_thread(void *arg)
{
    peeker *p = arg;

    p->d = PEEK(p->fx, &p->limit, "clamp", 1);
    return NULL;
}

/*
 * A peek after the window has expired, then the clock steps back before the
 * expiry: the lock-free path decides at the latest time the key has seen,
 * so the window has expired for the hit too, and the gap is added to the
 * waits. (On the caller's clock, the old window would still count.)
 */
static void test_clamp(void)
{
    sluice_limit l = limit_of(SLUICE_FIXED, 5, 100);
    peeker p = {NULL, l, {0}};
    pthread_t tid;
    fixture fx;

    test_context("clamp");
    fx_open(&fx, 1000);
    EXPECT(HIT(&fx, &l, "clamp", 1), &l, 1, 4, 0, 100);
    fx_at(&fx, 1150);
    p.fx = &fx;
    if (pthread_create(&tid, NULL, peek_thread, &p) != 0)
        exit(2);
    pthread_join(tid, NULL);
    EXPECT(p.d, &l, 1, 4, 0, 100);
    fx_at(&fx, 1050);
    EXPECT(HIT(&fx, &l, "clamp", 1), &l, 1, 4, 0, 200);
    fx_at(&fx, 1100);
    EXPECT(PEEK(&fx, &l, "clamp", 1), &l, 1, 3, 0, 150);
    fx_close(&fx);
}

/* ---- One hot key -------------------------------------------------------- */

#define HOT_MAX 200000
#define HOT_WINDOWS 8

typedef struct hot {
    fixture *fx;
    sluice_limit limit;
    pthread_barrier_t *barrier;
    uint64_t admitted[HOT_WINDOWS]; /* units, per window */
} hot;

/* Hits until a cost of 1 is refused (the window is then spent). */
static void *hot_thread(void *arg)
{
    hot *h = arg;
    uint64_t seed = (uint64_t)(uintptr_t)arg;

    for (int w = 0; w < HOT_WINDOWS; w++) {
        pthread_barrier_wait(h->barrier);
        for (;;) {
            sluice_decision d;
            uint64_t cost;

            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            cost = 1 + (seed >> 33) % 3;
            if ((seed >> 40) % 8 == 0) {
                sluice_peek(&d, h->fx->store, &h->limit, "hot", 3, cost);
                continue;
            }
            if (sluice_hit(&d, h->fx->store, &h->limit, "hot", 3, cost) !=
                SLUICE_OK)
                break;
            if (d.allowed)
                h->admitted[w] += cost;
            else if (cost == 1)
                break;
        }
        pthread_barrier_wait(h->barrier);
    }
    return NULL;
}

static void test_hot_key(void)
{
    pthread_barrier_t barrier;
    pthread_t tids[THREADS];
    hot h[THREADS];
    fixture fx;

    test_context("hot key");
    fx_open(&fx, 1000);
    pthread_barrier_init(&barrier, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        h[i] = (hot){&fx, limit_of(SLUICE_FIXED, HOT_MAX, 1000), &barrier,
                     {0}};
        if (pthread_create(&tids[i], NULL, hot_thread, &h[i]) != 0)
            exit(2);
    }
    for (int w = 0; w < HOT_WINDOWS; w++) {
        uint64_t total = 0;

        pthread_barrier_wait(&barrier); /* the window opens */
        pthread_barrier_wait(&barrier); /* every thread saw it spent */
        for (int i = 0; i < THREADS; i++)
            total += h[i].admitted[w];
        CHECK_EQ_U64(total, HOT_MAX);
        fx_at(&fx, 1000 + 1000 * (uint64_t)(w + 1));
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&barrier);
    fx_close(&fx);
}

/* ---- Churn -------------------------------------------------------------- */

#define CHURN_KEYS_MAX 40000 /* enough for tables with cells (mem.h) */

typedef struct churn {
    fixture *fx;
    uint64_t keys;
    _Atomic int *stop;
    _Atomic uint64_t *admitted; /* per key, in the current round */
    uint64_t seed;
    int errors;
} churn;

static void *churn_thread(void *arg)
{
    churn *c = arg;
    sluice_limit l = limit_of(SLUICE_FIXED, 5, 100);

    while (!atomic_load(c->stop)) {
        sluice_decision d;
        char key[16];
        uint64_t k;
        int len, rc;

        c->seed = c->seed * 6364136223846793005ULL + 1442695040888963407ULL;
        k = (c->seed >> 33) % c->keys;
        len = snprintf(key, sizeof(key), "k%" PRIu64, k);
        rc = sluice_hit(&d, c->fx->store, &l, key, (size_t)len, 1);
        if (rc == SLUICE_OK && d.allowed)
            atomic_fetch_add(&c->admitted[k], 1);
        else if (rc != SLUICE_OK && rc != SLUICE_EFULL)
            c->errors++;
    }
    return NULL;
}

/*
 * Each round: threads hit 'keys' keys under a cap of half as many (so the
 * cap and the sweeps unlink keys all along), the main thread resets keys
 * meanwhile; then the clock moves past the window. A key admits at most 5
 * per window plus 5 per reset it went through.
 */
static void churn_rounds(int keys, int rounds)
{
    static _Atomic uint64_t admitted[CHURN_KEYS_MAX];
    static uint64_t resets[CHURN_KEYS_MAX];
    sluice_limit l = limit_of(SLUICE_FIXED, 5, 100);
    pthread_t tids[THREADS];
    churn c[THREADS];
    _Atomic int stop;
    fixture fx;

    fx_open_capped(&fx, 1000, (size_t)keys / 2);
    for (int r = 0; r < rounds; r++) {
        memset(resets, 0, sizeof(resets));
        for (int k = 0; k < keys; k++)
            atomic_store(&admitted[k], 0);
        atomic_store(&stop, 0);
        for (int i = 0; i < THREADS; i++) {
            c[i] = (churn){&fx, (uint64_t)keys, &stop, admitted, rng_next(),
                           0};
            if (pthread_create(&tids[i], NULL, churn_thread, &c[i]) != 0)
                exit(2);
        }
        for (int i = 0; i < 2000; i++) {
            uint64_t k = rng_below((uint64_t)keys);
            char key[16];
            int len = snprintf(key, sizeof(key), "k%" PRIu64, k);

            /* 0 or 1: the churn threads may just have counted it. */
            CHECK(sluice_reset(fx.store, &l, key, (size_t)len) >= 0);
            resets[k]++;
        }
        atomic_store(&stop, 1);
        for (int i = 0; i < THREADS; i++) {
            pthread_join(tids[i], NULL);
            CHECK_EQ_U64(c[i].errors, 0);
        }
        for (int k = 0; k < keys; k++)
            if (!CHECK(atomic_load(&admitted[k]) <= 5 * (resets[k] + 1)))
                break;
        fx_at(&fx, 1000 + 100 * (uint64_t)(r + 1));
    }
    /* Everything is idle now: one key's calls sweep the rest away. */
    for (int i = 0; i < 100000; i++)
        (void)HIT(&fx, &l, "last", 1);
    CHECK_EQ_U64(stats_of(fx.store).keys, 1);
    fx_close(&fx);
}

static void test_churn(void)
{
    test_context("churn");
    churn_rounds(3000, 60);
    test_context("churn, tables with cells");
    churn_rounds(CHURN_KEYS_MAX, 12);
}

/* ---- Cells --------------------------------------------------------------- */

#define CELL_KEYS 30000

/*
 * What the store's shards hold, walked under their locks: the keys in
 * cells and in blocks of their own, and the bytes that all of it takes,
 * counted from what is there, to set beside the store's own count.
 */
typedef struct held {
    uint64_t in_cells, alone, bytes;
} held;

static held held_of(sluice_store *store)
{
    sluice__mem_store *m = store->backend.impl;
    held h = {0, 0, sizeof(*m)}; /* the store itself, as its stats count it */

    for (unsigned i = 0; i < SLUICE__MEM_SHARDS; i++) {
        sluice__mem_shard *sh = &m->shards[i].s;
        sluice__mem_table *t =
            sluice__mem_table_of_tag(atomic_load(&sh->table));

        pthread_mutex_lock(&sh->lock);
        h.bytes += t->n * sizeof(sluice__mem_bucket);
        if (t->cells != NULL)
            h.bytes += sluice__mem_cells_bytes(t->cells->n);
        for (sluice__mem_table *r = sh->retired_tables; r != NULL;
             r = r->retired)
            if (r->cells != NULL) /* not freed before their table */
                h.bytes += sluice__mem_cells_bytes(r->cells->n);
        for (size_t b = 0; b < t->n; b++)
            for (sluice__mem_entry *e = t->b[b].head; e != NULL; e = e->next) {
                const sluice__algo *algo = sluice__algos[e->algo];

                if (e->in_cell) {
                    h.in_cells++;
                    CHECK(*sluice__mem_cell_owner(e) == t->cells);
                } else {
                    h.alone++;
                    h.bytes += sluice__mem_entry_size((sluice_algo)e->algo,
                                                      e->key_len);
                }
                h.bytes += algo->bytes(sluice__mem_entry_state(e));
            }
        pthread_mutex_unlock(&sh->lock);
    }
    return h;
}

/*
 * Calls on one key of 'fx' (all the others idle) until they have swept the
 * rest: rounds of 200,000 calls, each begun with the store's trimming
 * thread idle. The sweeps pause while it gives freed memory back
 * (mem_trim.c), however long that takes on a loaded machine, so one round
 * alone left keys behind now and then. Answers the rounds, or 0 when 20
 * rounds did not do it.
 */
static int sweep_to_one(fixture *fx, const sluice_limit *l)
{
    sluice__mem_store *m = fx->store->backend.impl;

    for (int round = 1; round <= 20; round++) {
        /* Polled, at most a minute: what a trim takes is not checked. */
        for (int i = 0; i < 6000 && atomic_load(&m->trimmer.busy) != 0; i++)
            nanosleep(&(struct timespec){0, 10000000L}, NULL);
        for (int i = 0; i < 200000; i++)
            (void)HIT(fx, l, "last", 1);
        if (stats_of(fx->store).keys == 1) {
            if (round > 1)
                printf("  (swept in %d rounds of calls: the trimming thread "
                       "held the sweeps)\n", round);
            return round;
        }
    }
    return 0;
}

/*
 * The cells (mem.h): with many keys of an algorithm with a word, most live
 * in their table's cells, where the lock-free path finds them with one
 * miss, all of them in the current table's (a table that grows moves them);
 * the store's byte count is what its tables, cells and entries take; keys
 * of an algorithm without a word get no cells. Once every key is idle and
 * swept, the cells are given back with the entries.
 */
static void test_cells(void)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        bool word = sluice__algos[a]->word != NULL;
        sluice_limit l = limit_of((sluice_algo)a, 10, 100);
        sluice_store_stats st;
        fixture fx;
        held h;

        test_context("cells: %s", sluice__algos[a]->name);
        fx_open(&fx, 1000);
        for (int k = 0; k < CELL_KEYS; k++) {
            char key[24];
            int len = snprintf(key, sizeof(key), "user:%d", k);

            CHECK(HITN(&fx, &l, key, (size_t)len, 1).allowed);
        }
        st = stats_of(fx.store);
        h = held_of(fx.store);
        CHECK_EQ_U64(h.in_cells + h.alone, CELL_KEYS);
        CHECK_EQ_U64(h.bytes, st.bytes);
        if (word)
            CHECK(h.in_cells >= CELL_KEYS / 2);
        else
            CHECK_EQ_U64(h.in_cells, 0);
        printf("  cells, %s: %d keys, %" PRIu64 " in cells, %.1f bytes a "
               "key\n", sluice__algos[a]->name, CELL_KEYS, h.in_cells,
               (double)st.bytes / CELL_KEYS);

        /* All idle: one key's calls sweep the rest, tables shrink. */
        fx_at(&fx, 1000 + 10 * 1000);
        CHECK(sweep_to_one(&fx, &l) > 0);
        st = stats_of(fx.store);
        h = held_of(fx.store);
        CHECK_EQ_U64(st.keys, 1);
        CHECK_EQ_U64(h.bytes, st.bytes);
        CHECK(st.bytes < 256 * 1024); /* a table of 16 buckets a shard */
        fx_close(&fx);
    }
}

/* ---- Main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    rng_state = test_seed(argc, argv, 0, test_random_seed());
    printf("test_mem_fast: seed %" PRIu64 "\n", rng_state);
    test_words();
    test_paths();
    test_clamp();
    test_hot_key();
    test_churn();
    test_cells();
    return test_summary("test_mem_fast");
}
