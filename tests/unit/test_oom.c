/*
 * test_oom.c - every allocation the library makes is made to fail in turn.
 *
 * This program is linked with -Wl,--wrap=malloc,--wrap=calloc,... (and
 * --wrap=mmap,--wrap=mmap64,--wrap=munmap: the embedded store maps its
 * cells)
 * (tests/CMakeLists.txt), so the library's calls to malloc() and friends
 * reach the __wrap_ functions below, which count them and fail the ones
 * chosen:
 *
 *   one   the Nth allocation of the scenario fails, for N = 0, 1, 2, ...
 *         until the scenario makes fewer than N + 1;
 *   from  the Nth and every later one fail (memory stays exhausted);
 *   dice  each fails with probability 1/8, over a bigger scenario with
 *         thousands of keys (so shard tables grow, or fail to).
 *
 * Each call the scenario makes must then return SLUICE_OK or, where it may
 * allocate, SLUICE_ENOMEM with a detail in sluice_last_error(); nothing
 * else, and no crash. To check that a failure left no trace, every call
 * that succeeded is repeated on a "shadow" store that never fails, on the
 * same clock: both must decide alike, and after a failed hit both must still
 * agree on the key. At the end every key is reset and the store's stats
 * must be those of an empty store (no key, no byte counted twice), and once
 * everything is freed no allocation may be live (ASan's leak check agrees).
 * sluice_hit_all() is among the calls: it fails whole or not at all.
 */
#include "mem_fixture.h" /* limit_of(), CHECK_SAME() */
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- The allocator wrapper ----------------------------------------------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
void __wrap_free(void *p);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);
int __real_munmap(void *addr, size_t len);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd,
                    off_t off);
int __wrap_munmap(void *addr, size_t len);

enum { FAIL_ONE, FAIL_FROM, FAIL_DICE };

static int armed;          /* only allocations made while armed may fail */
static int fail_mode;
static long fail_at;       /* FAIL_ONE, FAIL_FROM: the index that fails */
static long armed_allocs;  /* allocations asked for while armed */
static long failed_allocs; /* of those, failed */
static long live_allocs;   /* allocated and not yet freed, armed or not */

static int should_fail(void)
{
    long i;
    int fail;

    if (!armed)
        return 0;
    i = armed_allocs++;
    switch (fail_mode) {
    case FAIL_ONE:
        fail = i == fail_at;
        break;
    case FAIL_FROM:
        fail = i >= fail_at;
        break;
    default:
        fail = rng_next() % 8 == 0;
        break;
    }
    if (fail)
        failed_allocs++;
    return fail;
}

static void *counted(void *p)
{
    if (p != NULL)
        live_allocs++;
    return p;
}

void *__wrap_malloc(size_t size)
{
    return should_fail() ? NULL : counted(__real_malloc(size));
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : counted(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t size)
{
    void *q;

    if (should_fail())
        return NULL;
    q = __real_realloc(p, size);
    if (p == NULL)
        return counted(q);
    if (q == NULL && size == 0)
        live_allocs--;
    return q;
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    return should_fail() ? NULL : counted(__real_aligned_alloc(align, size));
}

void __wrap_free(void *p)
{
    if (p != NULL)
        live_allocs--;
    __real_free(p);
}

/* The embedded store maps its cells (src/mem/mem.h): a mapping is an
   allocation here too, and munmap() its free. */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off)
{
    void *p;

    if (should_fail())
        return MAP_FAILED;
    p = __real_mmap(addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED)
        live_allocs++;
    return p;
}

/* What a build with 64-bit file offsets calls mmap() by. */
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd,
                    off_t off)
{
    return __wrap_mmap(addr, len, prot, flags, fd, off);
}

int __wrap_munmap(void *addr, size_t len)
{
    live_allocs--;
    return __real_munmap(addr, len);
}

/* ---- The scenario's world ------------------------------------------------ */

static sluice_vclock *clock_;
static sluice_store *store;  /* allocations fail here */
static sluice_store *shadow; /* never fails: what the store should hold */
static long enomem_seen;

/* Both stores agree on what 'key' would answer now (nothing may fail). */
static void agree(const sluice_limit *l, const char *key, size_t len)
{
    sluice_decision a, b;
    int was = armed;

    armed = 0;
    CHECK_OK(sluice_peek(&a, store, l, key, len, 1));
    CHECK_OK(sluice_peek(&b, shadow, l, key, len, 1));
    CHECK_SAME(a, b); /* the store and its shadow */
    armed = was;
}

/*
 * A hit that may fail: SLUICE_OK (then the shadow takes it too, and both
 * decide alike) or SLUICE_ENOMEM (then nothing was counted).
 */
static void hit(const sluice_limit *l, const char *key, size_t len,
                uint64_t cost)
{
    sluice_decision d, s;
    int rc;

    armed = 1;
    rc = sluice_hit(&d, store, l, key, len, cost);
    armed = 0;
    if (rc == SLUICE_ENOMEM) {
        enomem_seen++;
        CHECK(sluice_last_error()[0] != '\0');
        agree(l, key, len);
        return;
    }
    if (!CHECK_OK(rc))
        return;
    CHECK_OK(sluice_hit(&s, shadow, l, key, len, cost));
    CHECK_SAME(d, s);
}

/* A peek or a reset allocates nothing it cannot do without: always OK. */
static void peek(const sluice_limit *l, const char *key, size_t len,
                 uint64_t cost)
{
    sluice_decision d, s;

    armed = 1;
    CHECK_OK(sluice_peek(&d, store, l, key, len, cost));
    armed = 0;
    CHECK_OK(sluice_peek(&s, shadow, l, key, len, cost));
    CHECK_SAME(d, s);
}

static void reset(const sluice_limit *l, const char *key, size_t len)
{
    int was;

    armed = 1;
    was = sluice_reset(store, l, key, len);
    armed = 0;
    CHECK(was == 0 || was == 1);
    CHECK_RC(sluice_reset(shadow, l, key, len), was);
}

/*
 * sluice_hit_all() over limits[0..n) that may fail: SLUICE_OK (the shadow
 * then decides alike) or SLUICE_ENOMEM, after which both stores still agree
 * on every limit, wherever the logs (whose hits allocate) stand among
 * them: room is made in every limit before any counts.
 */
static void hit_all(const sluice_limit *l, size_t n, const char *key,
                    size_t len)
{
    sluice_decision d, s, ea[3], eb[3];
    int rc;

    armed = 1;
    rc = sluice_hit_all(&d, NULL, store, l, n, key, len, 1);
    armed = 0;
    if (rc == SLUICE_ENOMEM) {
        enomem_seen++;
        CHECK(sluice_last_error()[0] != '\0');
    } else if (CHECK_OK(rc)) {
        CHECK_OK(sluice_hit_all(&s, NULL, shadow, l, n, key, len, 1));
        CHECK_SAME(d, s);
    }
    CHECK_OK(sluice_peek_all(&d, ea, store, l, n, key, len, 1));
    CHECK_OK(sluice_peek_all(&s, eb, shadow, l, n, key, len, 1));
    for (size_t i = 0; i < n; i++)
        CHECK_SAME(ea[i], eb[i]);
}

/*
 * Opens the clock and both stores, the store under test armed if 'arm'.
 * Returns 0 when an allocation failure stopped it (cleanly: nothing left
 * open).
 */
static int world_open(size_t max_keys, int arm)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    int rc;

    clock_ = NULL;
    store = shadow = NULL;
    armed = arm;
    rc = sluice_vclock_new(&clock_, 1000);
    armed = 0;
    if (rc == SLUICE_ENOMEM) {
        CHECK(clock_ == NULL);
        CHECK(sluice_last_error()[0] != '\0');
        return 0;
    }
    CHECK_OK(rc);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock_;
    opts.max_keys = max_keys;
    armed = arm;
    rc = sluice_store_open(&store, NULL, &opts);
    armed = 0;
    if (rc == SLUICE_ENOMEM) {
        CHECK(store == NULL);
        CHECK(sluice_last_error()[0] != '\0');
        sluice_vclock_free(clock_);
        return 0;
    }
    CHECK_OK(rc);
    CHECK_OK(sluice_store_open(&shadow, NULL, &opts));
    return store != NULL && shadow != NULL;
}

static void world_close(void)
{
    sluice_store_free(store);
    sluice_store_free(shadow);
    sluice_vclock_free(clock_);
    store = shadow = NULL;
    clock_ = NULL;
}

static void at(uint64_t now_ms)
{
    sluice_vclock_set(clock_, now_ms);
}

/* ---- The scenarios ------------------------------------------------------- */

/*
 * The small scenario's limits, 100 ms windows: one per algorithm, max 10,
 * or 1000 for the sliding and compact logs, whose rings the scenario
 * grows; and a log of one-second windows that grows to 64 runs.
 */
static sluice_limit small[TEST_ALGO_N], big;

/* Keys of each algorithm, binary and empty ones among them: "k\0N". */
static size_t small_key(char *key, size_t cap, int i)
{
    size_t n = (size_t)snprintf(key, cap, "k%c%d", 0, i);

    return i == 0 ? 0 : n;
}

/*
 * The compact log's ring: grows 8, 16, 32 (a cost of 9 at once), empties
 * (freed) and grows again; then a ring of 256 that mostly empties, so it
 * halves.
 */
static void compact_requests(void)
{
    const sluice_limit *c = &small[SLUICE_COMPACT_LOG];

    for (uint64_t t = 3000; t <= 3012; t++) {
        at(t);
        hit(c, "C", 1, 1 + t % 3);
    }
    hit(c, "C", 1, 9);
    peek(c, "C", 1, 3);
    at(3500);
    hit(c, "C", 1, 2);
    hit(c, "C", 1, 1);
    at(3600);
    hit(c, "C2", 2, 200);
    at(3650);
    hit(c, "C2", 2, 1);
    at(3700); /* 200 units leave: 1 of 256 live */
    hit(c, "C2", 2, 1);
}

/* The scenario's requests: every allocation the library makes. */
static void small_requests(void)
{
    const sluice_limit *g = &small[SLUICE_SLIDING_LOG];
    char key[16];

    for (int a = 0; a < TEST_ALGO_N; a++)
        hit(&small[a], "a", 1, 1);
    /* A log of 13 distinct instants: its ring grows 4, 8, 16. */
    for (uint64_t t = 1000; t <= 1012; t++) {
        at(t);
        hit(g, "L", 1, 1 + t % 3);
    }
    at(1013);
    for (int i = 0; i < 6; i++) {
        size_t n = small_key(key, sizeof(key), i);

        for (int a = 0; a < TEST_ALGO_N; a++)
            hit(&small[a], key, n, 1 + (uint64_t)i % 2);
    }
    peek(g, "L", 1, 3);
    peek(&small[SLUICE_FIXED], "never", 5, 1);
    /* Everything in "L" has left: the hit empties its ring (freeing it),
       then needs a new one. */
    at(1500);
    hit(g, "L", 1, 2);
    hit(g, "L", 1, 1);
    /* A log that grows to 64 runs, then mostly empties, so the ring
       shrinks, then takes more. */
    for (uint64_t t = 1500; t < 1540; t++) {
        at(t);
        hit(&big, "S", 1, 1);
    }
    at(2533);
    peek(&big, "S", 1, 1);
    hit(&big, "S", 1, 1);
    at(2534);
    hit(&big, "S", 1, 1);
    compact_requests();
}

/* Both stores agree on every key; forget them all: the store must then
   count no key and no byte beyond an empty store's ('empty'). */
static void small_forget(const sluice_store_stats *empty)
{
    sluice_store_stats st;
    char key[16];

    for (int a = 0; a < TEST_ALGO_N; a++) {
        agree(&small[a], "a", 1);
        agree(&small[a], "fresh", 5);
        reset(&small[a], "a", 1);
        reset(&small[a], "fresh", 5);
        for (int i = 0; i < 6; i++) {
            size_t n = small_key(key, sizeof(key), i);

            agree(&small[a], key, n);
            reset(&small[a], key, n);
        }
    }
    agree(&small[SLUICE_SLIDING_LOG], "L", 1);
    agree(&big, "S", 1);
    reset(&small[SLUICE_SLIDING_LOG], "L", 1);
    reset(&big, "S", 1);
    agree(&small[SLUICE_COMPACT_LOG], "C", 1);
    agree(&small[SLUICE_COMPACT_LOG], "C2", 2);
    reset(&small[SLUICE_COMPACT_LOG], "C", 1);
    reset(&small[SLUICE_COMPACT_LOG], "C2", 2);
    CHECK_OK(sluice_store_stats_get(&st, store));
    CHECK_EQ_U64(st.keys, 0);
    CHECK_EQ_U64(st.bytes, empty->bytes);
}

/*
 * A small scenario that reaches every allocation the library makes: the
 * store itself, entries of each algorithm, a sliding log's ring growing,
 * emptied and regrown, and shrinking.
 */
static void small_scenario(void)
{
    const sluice_limit *f = &small[SLUICE_FIXED];
    sluice_store_stats empty;

    for (int a = 0; a < TEST_ALGO_N; a++)
        small[a] = limit_of((sluice_algo)a,
                            a == SLUICE_SLIDING_LOG ||
                                    a == SLUICE_COMPACT_LOG ? 1000 : 10,
                            100);
    big = limit_of(SLUICE_SLIDING_LOG, 1000, 1000);
    if (!world_open(0, 1))
        return;
    CHECK_OK(sluice_store_stats_get(&empty, store));
    small_requests();
    reset(f, "a", 1);
    hit(f, "a", 1, 10);
    hit(f, "a", 1, 1);
    at(5000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        hit(&small[a], "a", 1, 2);
        hit(&small[a], "fresh", 5, 3);
        agree(&small[a], "a", 1);
    }
    {
        /* All or nothing; a key long enough to be built on the heap. */
        sluice_limit all[3] = {big, small[SLUICE_FIXED],
                               small[SLUICE_SLIDING_COUNTER]};
        char key[400];
        int rc;

        /* The logs last too: room is made in every limit before any
           counts, so a failure still counts nowhere. */
        sluice_limit last[3] = {small[SLUICE_FIXED],
                                small[SLUICE_SLIDING_COUNTER], big};
        sluice_limit last_c[3] = {small[SLUICE_GCRA], big,
                                  limit_of(SLUICE_COMPACT_LOG, 1000, 1000)};

        memset(key, 'h', sizeof(key));
        for (int i = 0; i < 3; i++)
            hit_all(all, 3, key, i == 1 ? 2 : sizeof(key));
        for (int i = 0; i < 3; i++) {
            at(6000 + (uint64_t)i); /* a new instant: the logs grow */
            hit_all(last, 3, "last", 4);
            hit_all(last_c, 3, "last", 4);
        }
        CHECK_OK(sluice_reset_all(store, last, 3, "last", 4));
        CHECK_OK(sluice_reset_all(store, last_c, 3, "last", 4));
        CHECK_OK(sluice_reset_all(shadow, last, 3, "last", 4));
        CHECK_OK(sluice_reset_all(shadow, last_c, 3, "last", 4));
        /* A short id's reset needs no memory; a long one's key is copied
           to the heap, so it may fail, forgetting nothing, and is done
           again. */
        armed = 1;
        CHECK_OK(sluice_reset_all(store, all, 3, key, 2));
        rc = sluice_reset_all(store, all, 3, key, sizeof(key));
        armed = 0;
        if (rc == SLUICE_ENOMEM) {
            sluice_decision a, b;

            CHECK_OK(sluice_peek_all(&a, NULL, store, all, 3, key,
                                     sizeof(key), 1));
            CHECK_OK(sluice_peek_all(&b, NULL, shadow, all, 3, key,
                                     sizeof(key), 1));
            CHECK_SAME(a, b); /* nothing was forgotten */
            rc = sluice_reset_all(store, all, 3, key, sizeof(key));
        }
        CHECK_OK(rc);
    }
    small_forget(&empty);
    world_close();
}

/*
 * Thousands of keys with allocations failing at random: entries, logs, and
 * shard tables that grow (or fail to, and keep their old size). With
 * 'cells', more keys, of the algorithms with a word, kept longer: tables
 * grow past CELLS_MIN_BUCKETS (mem.h), so cells are made (or fail to be),
 * and entries move into them or out of them into blocks (or fail to).
 */
#define DICE_KEYS 4000
#define DICE_CELL_KEYS 12000

static sluice_limit dice_limit(sluice_algo algo, bool cells)
{
    return cells ? limit_of(algo, 5 + (uint64_t)algo, 100000)
                 : limit_of(algo, 5 + (uint64_t)algo,
                            20 + 10 * (uint64_t)algo);
}

static void dice_scenario(uint64_t seed, bool cells)
{
    static const sluice_algo words[] = {SLUICE_FIXED, SLUICE_GCRA};
    int keys = cells ? DICE_CELL_KEYS : DICE_KEYS;
    sluice_store_stats st;
    char key[32];

    rng_state = seed;
    if (!world_open(0, 0)) /* 258 allocations: opening would always fail */
        return;
    for (int i = 0; i < 2 * keys; i++) {
        uint64_t r = rng_next();
        sluice_algo algo = cells ? words[r % 2] : (sluice_algo)(r % TEST_ALGO_N);
        /* One limit per algorithm, so the two stores' states can match. */
        sluice_limit l = dice_limit(algo, cells);
        size_t n = (size_t)snprintf(key, sizeof(key), "d%" PRIu64,
                                    (r >> 24) % (uint64_t)keys);
        uint64_t cost = 1 + (r >> 40) % l.max;

        if (i % 7 == 0)
            at(1000 + (uint64_t)i / 7);
        if (r % 10 == 0)
            peek(&l, key, n, cost);
        else if (r % 50 == 1)
            reset(&l, key, n);
        else
            hit(&l, key, n, cost);
    }
    /* The stores agree on every key; forgotten, none is left. */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = dice_limit((sluice_algo)a, cells);

        for (int k = 0; k < keys; k++) {
            size_t n = (size_t)snprintf(key, sizeof(key), "d%d", k);

            agree(&l, key, n);
            reset(&l, key, n);
        }
    }
    CHECK_OK(sluice_store_stats_get(&st, store));
    CHECK_EQ_U64(st.keys, 0);
    world_close();
}

/* ---- Main ---------------------------------------------------------------- */

int main(void)
{
    long runs = 0, clean = 0;

    /* The Nth allocation fails, then the Nth and all after it. */
    for (int mode = FAIL_ONE; mode <= FAIL_FROM; mode++) {
        for (long n = 0;; n++) {
            fail_mode = mode;
            fail_at = n;
            armed_allocs = failed_allocs = 0;
            test_context("%s allocation %ld fails",
                         mode == FAIL_ONE ? "only" : "from", n);
            small_scenario();
            runs++;
            CHECK_EQ_U64(live_allocs, 0);
            if (failed_allocs == 0) {
                clean++;
                break; /* the scenario made fewer than n + 1 */
            }
        }
    }
    /* Random failures over a bigger scenario. */
    fail_mode = FAIL_DICE;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        test_context("dice seed %" PRIu64, seed);
        dice_scenario(seed, false);
        runs++;
        CHECK_EQ_U64(live_allocs, 0);
    }
    for (uint64_t seed = 1; seed <= 4; seed++) {
        test_context("dice seed %" PRIu64 ", tables with cells", seed);
        dice_scenario(seed, true);
        runs++;
        CHECK_EQ_U64(live_allocs, 0);
    }
    test_context(NULL);
    printf("test_oom: %ld runs, %ld ENOMEM answers\n", runs, enomem_seen);
    return test_summary("test_oom");
}
