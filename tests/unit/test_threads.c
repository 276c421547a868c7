/*
 * test_threads.c - the embedded store under many threads, and its key cap.
 *
 *   - One hot key: 8 threads hammer it through one window at a time (a
 *     barrier starts and ends each window; between windows the main thread
 *     moves the shared virtual clock on). Exactly max is admitted per
 *     window, never more, for every algorithm.
 *   - Many keys: each thread on keys of its own, and all threads on shared
 *     keys; every key admits exactly max.
 *   - Costs above 1 from many threads never pass max, and what a peek says
 *     is left afterwards matches what was admitted.
 *   - The key cap (max_keys): SLUICE_EFULL when full and nothing is idle,
 *     keys that are idle are dropped so new ones fit, and the key count and
 *     bytes held come back down once keys go idle. Also under threads: with
 *     a cap of C, exactly C new keys get in.
 *   - sluice_last_error() belongs to the calling thread.
 *
 * Runs in well under a second normally; ThreadSanitizer and ASan builds
 * run it too.
 */
#include "algo/model.h" /* how long a spent window takes to go */
#include "mem_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8

/* ---- Helpers ------------------------------------------------------------- */

static sluice_store_stats stats_of(sluice_store *store)
{
    sluice_store_stats st;

    memset(&st, 0, sizeof(st));
    CHECK_OK(sluice_store_stats_get(&st, store));
    return st;
}

static void start_threads(pthread_t *tids, void *(*fn)(void *), void *args,
                          size_t arg_size)
{
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&tids[i], NULL, fn, (char *)args + i * arg_size) !=
            0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
}

static void join_threads(pthread_t *tids)
{
    for (int i = 0; i < THREADS; i++)
        pthread_join(tids[i], NULL);
}

/* ---- One hot key, window after window ------------------------------------ */

#define PHASES 8
#define HOT_MAX 100
#define HOT_TRIES 400 /* per thread per window: 3200 tries for 100 slots */

typedef struct hot {
    fixture *fx;
    sluice_limit limit;
    pthread_barrier_t start, done;
} hot;

typedef struct hot_arg {
    hot *h;
    int id;
    uint64_t admitted[PHASES];
} hot_arg;

static void *hot_thread(void *p)
{
    hot_arg *arg = p;
    hot *h = arg->h;

    for (int phase = 0; phase < PHASES; phase++) {
        pthread_barrier_wait(&h->start);
        for (int i = 0; i < HOT_TRIES; i++) {
            sluice_decision d;

            if ((i + arg->id) % 4 == 0)
                CHECK_OK(sluice_peek(&d, h->fx->store, &h->limit, "hot", 3,
                                     1));
            CHECK_OK(sluice_hit(&d, h->fx->store, &h->limit, "hot", 3, 1));
            if (d.allowed)
                arg->admitted[phase]++;
            else
                CHECK(d.retry_after_ms >= 1 && d.remaining == 0);
        }
        pthread_barrier_wait(&h->done);
    }
    return NULL;
}

/*
 * The time a window spent at 'start' takes to be forgotten, by the model:
 * for fixed and sliding-log one window; the sliding counter's previous
 * window still counts at the next one's start, so two.
 */
static uint64_t spent_for(const sluice_limit *limit, uint64_t start)
{
    sluice__model m;
    sluice_decision d;

    sluice__model_init(&m, limit);
    sluice__model_decide(&m, start, limit->max, true, &d);
    return d.reset_after_ms;
}

/*
 * Each window starts on the virtual clock's aligned instant 'step' ms after
 * the last, when the last is forgotten (spent_for()).
 */
static void test_hot_key(sluice_algo algo)
{
    const uint64_t w = 1000, start = 1000000;
    const sluice_limit limit = limit_of(algo, HOT_MAX, w);
    const uint64_t step = spent_for(&limit, start);
    pthread_t tids[THREADS];
    hot_arg args[THREADS];
    fixture fx;
    hot h;

    test_context("hot key, %s", sluice_algo_name(algo));
    fx_open(&fx, start);
    h.fx = &fx;
    h.limit = limit;
    pthread_barrier_init(&h.start, NULL, THREADS + 1);
    pthread_barrier_init(&h.done, NULL, THREADS + 1);
    memset(args, 0, sizeof(args));
    for (int i = 0; i < THREADS; i++) {
        args[i].h = &h;
        args[i].id = i;
    }
    start_threads(tids, hot_thread, args, sizeof(args[0]));
    for (int phase = 0; phase < PHASES; phase++) {
        sluice_decision d;

        sluice_vclock_set(fx.clock, start + (uint64_t)phase * step);
        pthread_barrier_wait(&h.start); /* the threads hammer */
        pthread_barrier_wait(&h.done);
        /* The window is spent: exactly max, and nothing more fits. */
        {
            uint64_t total = 0;

            for (int i = 0; i < THREADS; i++)
                total += args[i].admitted[phase];
            test_context("hot key, %s, window %d", sluice_algo_name(algo),
                         phase);
            CHECK_EQ_U64(total, HOT_MAX);
        }
        CHECK_OK(sluice_peek(&d, fx.store, &h.limit, "hot", 3, 1));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.remaining, 0);
    }
    join_threads(tids);
    pthread_barrier_destroy(&h.start);
    pthread_barrier_destroy(&h.done);
    fx_close(&fx);
    test_context(NULL);
}

/* ---- Many keys ----------------------------------------------------------- */

#define OWN_KEYS 64
#define SHARED_KEYS 64
#define MANY_MAX 10

typedef struct many {
    fixture *fx;
    _Atomic uint64_t shared_admitted[TEST_ALGO_N][SHARED_KEYS];
} many;

typedef struct many_arg {
    many *m;
    int id;
    uint64_t own_admitted;
} many_arg;

static void *many_thread(void *p)
{
    many_arg *arg = p;
    many *m = arg->m;
    char key[32];
    sluice_decision d;

    /* Keys of its own: each admits max of its 2 x max tries. */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, MANY_MAX, 60000);

        for (int k = 0; k < OWN_KEYS; k++) {
            int n = snprintf(key, sizeof(key), "own-%d-%d", arg->id, k);

            for (int i = 0; i < 2 * MANY_MAX; i++) {
                CHECK_OK(sluice_hit(&d, m->fx->store, &l, key, (size_t)n, 1));
                if (d.allowed)
                    arg->own_admitted++;
            }
        }
    }
    /* Keys every thread hits, each thread in its own order. */
    for (int round = 0; round < MANY_MAX / 2 + 2; round++) {
        for (int j = 0; j < SHARED_KEYS * TEST_ALGO_N; j++) {
            int idx = (j * 7 + arg->id * 13 + round) %
                      (SHARED_KEYS * TEST_ALGO_N);
            int a = idx % TEST_ALGO_N, k = idx / TEST_ALGO_N;
            sluice_limit l = limit_of((sluice_algo)a, MANY_MAX, 60000);
            int n = snprintf(key, sizeof(key), "shared-%d", k);

            CHECK_OK(sluice_hit(&d, m->fx->store, &l, key, (size_t)n, 1));
            if (d.allowed)
                atomic_fetch_add(&m->shared_admitted[a][k], 1);
        }
    }
    return NULL;
}

static void test_many_keys(void)
{
    pthread_t tids[THREADS];
    many_arg args[THREADS];
    sluice_store_stats st;
    fixture fx;
    many *m = calloc(1, sizeof(*m));

    if (m == NULL)
        exit(2);
    test_context("many keys");
    fx_open(&fx, 5000);
    m->fx = &fx;
    for (int a = 0; a < TEST_ALGO_N; a++)
        for (int k = 0; k < SHARED_KEYS; k++)
            atomic_init(&m->shared_admitted[a][k], 0);
    memset(args, 0, sizeof(args));
    for (int i = 0; i < THREADS; i++) {
        args[i].m = m;
        args[i].id = i;
    }
    start_threads(tids, many_thread, args, sizeof(args[0]));
    join_threads(tids);
    for (int i = 0; i < THREADS; i++)
        CHECK_EQ_U64(args[i].own_admitted,
                     (uint64_t)OWN_KEYS * TEST_ALGO_N * MANY_MAX);
    for (int a = 0; a < TEST_ALGO_N; a++)
        for (int k = 0; k < SHARED_KEYS; k++)
            CHECK_EQ_U64(atomic_load(&m->shared_admitted[a][k]), MANY_MAX);
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, (uint64_t)(THREADS * OWN_KEYS + SHARED_KEYS) *
                              TEST_ALGO_N);
    fx_close(&fx);
    free(m);
    test_context(NULL);
}

/* ---- Costs above 1 from many threads ------------------------------------- */

typedef struct costly {
    fixture *fx;
    sluice_limit limit;
    _Atomic uint64_t admitted_units;
} costly;

typedef struct costly_arg {
    costly *c;
    int id;
} costly_arg;

static void *costly_thread(void *p)
{
    costly_arg *arg = p;
    costly *c = arg->c;

    for (int i = 0; i < 400; i++) {
        uint64_t cost = 1 + (uint64_t)((i * 5 + arg->id) % 7);
        sluice_decision d;

        CHECK_OK(sluice_hit(&d, c->fx->store, &c->limit, "costly", 6, cost));
        if (d.allowed)
            atomic_fetch_add(&c->admitted_units, cost);
    }
    return NULL;
}

static void test_costs(void)
{
    pthread_t tids[THREADS];
    costly_arg args[THREADS];
    fixture fx;
    costly c;

    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_decision d;
        uint64_t units;

        test_context("costs, %s", sluice_algo_name((sluice_algo)a));
        /* Aligned, so the counter's estimate is its current count. */
        fx_open(&fx, 1000000);
        c.fx = &fx;
        c.limit = limit_of((sluice_algo)a, 1000, 1000);
        atomic_init(&c.admitted_units, 0);
        for (int i = 0; i < THREADS; i++) {
            args[i].c = &c;
            args[i].id = i;
        }
        start_threads(tids, costly_thread, args, sizeof(args[0]));
        join_threads(tids);
        units = atomic_load(&c.admitted_units);
        /* Never more than max; and since cost-1 requests keep coming
           after the budget is nearly spent, it is spent exactly. */
        CHECK_EQ_U64(units, 1000);
        CHECK_OK(sluice_peek(&d, fx.store, &c.limit, "costly", 6, 1));
        CHECK_EQ_U64(d.remaining, 1000 - units);
        fx_close(&fx);
    }
    test_context(NULL);
}

/* ---- The key cap --------------------------------------------------------- */

/*
 * The cap, on ten keys of three named algorithms: the counts below follow
 * from how long each keeps a key it no longer needs (the fixed window and
 * the log one window, the sliding counter two).
 */
static void test_key_cap(void)
{
    const uint64_t T = 100000;
    sluice_limit f = limit_of(SLUICE_FIXED, 5, 100);
    sluice_limit c = limit_of(SLUICE_SLIDING_COUNTER, 5, 100);
    sluice_limit g = limit_of(SLUICE_SLIDING_LOG, 5, 100);
    sluice_store_stats st;
    sluice_decision d;
    char key[32];
    fixture fx;
    int n;

    test_context("key cap");
    fx_open_capped(&fx, T, 10);
    /* Ten keys across the algorithms fill the cap. */
    for (int i = 0; i < 10; i++) {
        const sluice_limit *l = i % 3 == 0 ? &f : i % 3 == 1 ? &c : &g;

        n = snprintf(key, sizeof(key), "cap-%d", i);
        CHECK_OK(sluice_hit(&d, fx.store, l, key, (size_t)n, 1));
    }
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 10);
    CHECK_EQ_U64(st.full, 0);
    /* Full, and nothing is idle: a new key, of any algorithm, is refused
       with an error, not a decision. */
    CHECK_RC(sluice_hit(&d, fx.store, &f, "new-0", 5, 1), SLUICE_EFULL);
    CHECK(sluice_last_error()[0] != '\0');
    CHECK(d.allowed == 0);
    CHECK_RC(sluice_hit(&d, fx.store, &g, "new-1", 5, 1), SLUICE_EFULL);
    CHECK_RC(sluice_hit(&d, fx.store, &c, "cap-0", 5, 1), SLUICE_EFULL);
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 10);
    CHECK_EQ_U64(st.full, 3);
    /* Keys already held go on counting; a peek needs no room. */
    CHECK_OK(sluice_hit(&d, fx.store, &f, "cap-0", 5, 4));
    CHECK(d.allowed);
    CHECK_OK(sluice_hit(&d, fx.store, &f, "cap-0", 5, 1));
    CHECK(!d.allowed);
    CHECK_OK(sluice_peek(&d, fx.store, &f, "new-0", 5, 1));
    CHECK(d.allowed);
    CHECK_RC(sluice_reset(fx.store, &f, "new-0", 5), 0);
    /* Forgetting a key makes room. */
    CHECK_RC(sluice_reset(fx.store, &g, "cap-2", 5), 1);
    CHECK_OK(sluice_hit(&d, fx.store, &f, "new-0", 5, 1));
    CHECK_RC(sluice_hit(&d, fx.store, &f, "new-1", 5, 1), SLUICE_EFULL);
    /* A little later, still live: still full. */
    sluice_vclock_set(fx.clock, T + 50);
    CHECK_RC(sluice_hit(&d, fx.store, &f, "new-1", 5, 1), SLUICE_EFULL);
    /* Once every key is idle (fixed and log after one window, the counter
       after two aligned ones), they are dropped and new keys fit. */
    sluice_vclock_set(fx.clock, T + 100);
    CHECK_RC(sluice_hit(&d, fx.store, &f, "new-1", 5, 1), SLUICE_OK);
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 1 + 3); /* new-1 and the three counter keys */
    CHECK_EQ_U64(st.expired, 7);  /* five fixed keys and two logs */
    sluice_vclock_set(fx.clock, T + 200);
    for (int i = 0; i < 9; i++) {
        n = snprintf(key, sizeof(key), "later-%d", i);
        CHECK_RC(sluice_hit(&d, fx.store, &g, key, (size_t)n, 1), SLUICE_OK);
    }
    /* The four old keys went idle and made room. */
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 9);
    CHECK_EQ_U64(st.expired, 11);
    CHECK_RC(sluice_hit(&d, fx.store, &g, "tenth", 5, 1), SLUICE_OK);
    CHECK_RC(sluice_hit(&d, fx.store, &g, "eleventh", 8, 1), SLUICE_EFULL);
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 10);
    CHECK_EQ_U64(st.full, 6);
    fx_close(&fx);
    test_context(NULL);
}

/* Memory comes back: keys that went idle are dropped as the store is used. */
static void test_memory_comes_back(void)
{
    const uint64_t T = 7000000;
    sluice_store_stats empty, st;
    sluice_decision d;
    char key[32];
    fixture fx;
    int n;

    test_context("memory comes back");
    fx_open(&fx, T);
    empty = stats_of(fx.store);
    for (int i = 0; i < 500; i++) {
        sluice_limit l = limit_of((sluice_algo)(i % TEST_ALGO_N), 50,
                                  1000);

        n = snprintf(key, sizeof(key), "mem-%d", i);
        for (int j = 0; j < 1 + i % 7; j++) {
            sluice_vclock_set(fx.clock, T + (uint64_t)j);
            CHECK_OK(sluice_hit(&d, fx.store, &l, key, (size_t)n, 1));
        }
    }
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 500);
    CHECK(st.bytes > empty.bytes);
    /* Two windows on, every key is idle; peeks at keys never seen walk the
       store and drop them. */
    sluice_vclock_set(fx.clock, T + 3000);
    for (int i = 0; i < 20000; i++) {
        sluice_limit l = limit_of(SLUICE_FIXED, 50, 1000);

        n = snprintf(key, sizeof(key), "probe-%d", i);
        CHECK_OK(sluice_peek(&d, fx.store, &l, key, (size_t)n, 1));
    }
    st = stats_of(fx.store);
    CHECK_EQ_U64(st.keys, 0);
    CHECK_EQ_U64(st.expired, 500);
    CHECK_EQ_U64(st.bytes, empty.bytes);
    fx_close(&fx);
    test_context(NULL);
}

/* With a cap of C and many threads adding new keys at once, exactly C get
   in; every other new key gets SLUICE_EFULL. */
#define CAP_TRIES 50
#define CAP_REPEATS 200
typedef struct capped {
    fixture *fx;
    pthread_barrier_t start;
    _Atomic uint64_t ok, full;
} capped;

typedef struct capped_arg {
    capped *c;
    int id;
} capped_arg;

static void *capped_thread(void *p)
{
    capped_arg *arg = p;
    sluice_limit l = limit_of((sluice_algo)(arg->id % TEST_ALGO_N), 3,
                              1000);
    char key[32];

    pthread_barrier_wait(&arg->c->start); /* all at once */
    for (int i = 0; i < CAP_TRIES; i++) {
        sluice_decision d;
        int n = snprintf(key, sizeof(key), "t%d-%d", arg->id, i);
        int rc = sluice_hit(&d, arg->c->fx->store, &l, key, (size_t)n, 1);

        if (rc == SLUICE_OK)
            atomic_fetch_add(&arg->c->ok, 1);
        else if (CHECK_RC(rc, SLUICE_EFULL))
            atomic_fetch_add(&arg->c->full, 1);
    }
    return NULL;
}

/* Races are rare events: the scenario is run many times, with caps that
   land at different moments of the threads' runs. */
static void test_cap_threads(void)
{
    pthread_t tids[THREADS];
    capped_arg args[THREADS];
    sluice_store_stats st;
    fixture fx;
    capped c;

    for (int rep = 0; rep < CAP_REPEATS; rep++) {
        uint64_t cap = 1 + (uint64_t)(rep * 37) % (THREADS * CAP_TRIES - 1);

        test_context("cap %" PRIu64 " under threads, run %d", cap, rep);
        fx_open_capped(&fx, 1000, (size_t)cap);
        c.fx = &fx;
        pthread_barrier_init(&c.start, NULL, THREADS);
        atomic_init(&c.ok, 0);
        atomic_init(&c.full, 0);
        for (int i = 0; i < THREADS; i++) {
            args[i].c = &c;
            args[i].id = i;
        }
        start_threads(tids, capped_thread, args, sizeof(args[0]));
        join_threads(tids);
        pthread_barrier_destroy(&c.start);
        CHECK_EQ_U64(atomic_load(&c.ok), cap);
        CHECK_EQ_U64(atomic_load(&c.full), THREADS * CAP_TRIES - cap);
        st = stats_of(fx.store);
        CHECK_EQ_U64(st.keys, cap);
        CHECK_EQ_U64(st.full, THREADS * CAP_TRIES - cap);
        fx_close(&fx);
    }
    test_context(NULL);
}

/* ---- Per-thread error detail --------------------------------------------- */

typedef struct errs {
    int fresh_was_empty;
    int kept_own;
} errs;

static void *error_thread(void *p)
{
    errs *e = p;
    sluice_algo a;

    e->fresh_was_empty = sluice_last_error()[0] == '\0';
    (void)sluice_algo_parse(&a, "thread-two");
    e->kept_own = strstr(sluice_last_error(), "thread-two") != NULL;
    return NULL;
}

static void test_error_per_thread(void)
{
    pthread_t tid;
    errs e = {0, 0};
    sluice_algo a;

    (void)sluice_algo_parse(&a, "thread-one");
    if (pthread_create(&tid, NULL, error_thread, &e) != 0)
        exit(2);
    pthread_join(tid, NULL);
    CHECK(e.fresh_was_empty);
    CHECK(e.kept_own);
    CHECK(strstr(sluice_last_error(), "thread-one") != NULL);
}

/* ---- Main ---------------------------------------------------------------- */

int main(void)
{
    test_error_per_thread();
    for (int a = 0; a < TEST_ALGO_N; a++)
        test_hot_key((sluice_algo)a);
    test_many_keys();
    test_costs();
    test_key_cap();
    test_memory_comes_back();
    test_cap_threads();
    return test_summary("test_threads");
}
