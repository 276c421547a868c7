/*
 * test_mem_reclaim.c - the embedded store gives its memory back, and holds
 * at most its cap of keys, on a virtual clock.
 *
 *   reclaim   200,000 keys, each hit once, all idle a window later; then
 *             calls on ONE hot key alone (which reach one shard of the 256)
 *             drop every idle key of every shard, and the tables shrink
 *             back: the store's own byte count falls to within a few times
 *             its empty size;
 *   the trim  200,000 sliding-counter keys (entries on the heap, not in
 *             cells) go idle and are swept: the store asks the allocator
 *             to give the freed memory back (its count of trims moves,
 *             and what was freed since the last trim is under the
 *             threshold), and, on glibc without a sanitizer's allocator,
 *             the resident set falls back to within 4 MB of what it was
 *             before the keys came;
 *   the cap   with max_keys left at 0, the default cap of a million keys
 *             holds: the million-and-first live key is SLUICE_EFULL, and
 *             SLUICE_NO_KEY_CAP lifts it;
 *   at the cap
 *             a store at a cap of 200,000 live keys refuses new keys, a
 *             millisecond apart, each with SLUICE_EFULL, and no call
 *             sweeps more than SWEEP_CAP_BUCKETS buckets (and the few of
 *             the ordinary sweeps), where each used to sweep the whole
 *             store; once the keys are idle, the first new key fits;
 *   a step    on a wall clock that steps back a minute, a refusal's wait is
 *             the caller's: the same request is refused one ms before
 *             retry_after_ms and admitted at it, on the caller's clock.
 */
#include "store/mem.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A sanitizer's allocator keeps freed memory whatever malloc_trim() says. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_TRIMS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAP_TRIMS 0
#endif
#endif
#ifndef HEAP_TRIMS
#ifdef __GLIBC__
#define HEAP_TRIMS 1
#else
#define HEAP_TRIMS 0
#endif
#endif

static sluice_store *open_store(sluice_vclock *clock, size_t max_keys)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *st = NULL;

    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = clock;
    o.max_keys = max_keys;
    if (!CHECK_OK(sluice_store_open(&st, "mem://", &o)))
        exit(2);
    return st;
}

static sluice_store_stats stats_of(sluice_store *st)
{
    sluice_store_stats s;

    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_store_stats_get(&s, st));
    return s;
}

/* Hits keys "k0" .. "k<n-1>" once each; answers how many were admitted. */
static size_t hit_keys(sluice_store *st, const sluice_limit *l, size_t n,
                       int *last_rc)
{
    size_t admitted = 0;

    for (size_t i = 0; i < n; i++) {
        char key[24];
        sluice_decision d;
        int len = snprintf(key, sizeof(key), "k%zu", i);

        *last_rc = sluice_hit(&d, st, l, key, (size_t)len, 1);
        admitted += *last_rc == 0 && d.allowed;
    }
    return admitted;
}

/* The resident set now, in bytes; -1 where /proc/self/statm is missing. */
static long long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size, resident;
    int n;

    if (f == NULL)
        return -1;
    n = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

#define KEYS 200000

static void test_trim(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 5, 1000);
    sluice_vclock *clock = NULL;
    sluice_store *st;
    mem_store *m;
    sluice_decision d;
    long long before, full, after;
    uint64_t trims, untrimmed;
    long calls = 0;
    int rc;

    test_context("the trim");
    CHECK_OK(sluice_vclock_new(&clock, 1000));
    st = open_store(clock, 0);
    m = st->backend.impl;
    before = rss_bytes();
    CHECK_EQ_U64(hit_keys(st, &l, KEYS, &rc), KEYS);
    full = rss_bytes();
    sluice_vclock_advance(clock, 5000); /* every key idle */
    while (stats_of(st).keys > 1 && calls < 10000000) {
        for (int i = 0; i < 1000; i++)
            CHECK(sluice_hit(&d, st, &l, "hot", 3, 1) == 0);
        calls += 1000;
        sluice_vclock_advance(clock, 3000); /* 'hot' idles, too */
    }
    /* As many calls again: the tables shrink, and what was retired is
       freed a grace period later. */
    for (long i = 0; i < calls; i++)
        CHECK(sluice_hit(&d, st, &l, "hot", 3, 1) == 0);
    after = rss_bytes();
    trims = atomic_load(&m->trims);
    untrimmed = atomic_load(&m->untrimmed);
    printf("  trim: resident %.1f MB before %d keys, %.1f MB with them, "
           "%.1f MB after %ld calls on one key; %llu trims, %llu bytes "
           "freed since the last\n", (double)before / 1e6, KEYS,
           (double)full / 1e6, (double)after / 1e6, 2 * calls,
           (unsigned long long)trims, (unsigned long long)untrimmed);
    CHECK(stats_of(st).keys <= 1);
    CHECK(trims > 0);
    CHECK(untrimmed < TRIM_MIN_BYTES);
    if (HEAP_TRIMS && before > 0) {
        CHECK(full > before + 16000000); /* the keys took room */
        CHECK(after < before + 4000000);
    }
    sluice_store_free(st);
    sluice_vclock_free(clock);
}

static void test_reclaim(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, 1000);
    sluice_vclock *clock = NULL;
    sluice_store *st;
    sluice_store_stats empty, full, after;
    sluice_decision d;
    long calls = 0;
    int rc;

    test_context("reclaim");
    CHECK_OK(sluice_vclock_new(&clock, 1000));
    st = open_store(clock, 0);
    empty = stats_of(st);
    CHECK_EQ_U64(hit_keys(st, &l, KEYS, &rc), KEYS);
    full = stats_of(st);
    CHECK_EQ_U64(full.keys, KEYS);
    sluice_vclock_advance(clock, 5000); /* every key idle */
    /* Until every idle key is dropped and every table has shrunk back,
       within a bound: a pass over every shard's table takes about a call
       per bucket. */
    while ((stats_of(st).keys > 1 || stats_of(st).bytes >= 4 * empty.bytes) &&
           calls < 10000000) {
        for (int i = 0; i < 1000; i++)
            CHECK(sluice_hit(&d, st, &l, "hot", 3, 1) == 0);
        calls += 1000;
        sluice_vclock_advance(clock, 1000); /* 'hot' idles, too */
    }
    after = stats_of(st);
    printf("  reclaim: %d keys took %llu bytes (empty: %llu); %ld calls on "
           "one key later, %llu keys and %llu bytes\n", KEYS,
           (unsigned long long)full.bytes, (unsigned long long)empty.bytes,
           calls, (unsigned long long)after.keys,
           (unsigned long long)after.bytes);
    CHECK(after.keys <= 1);
    CHECK(after.expired >= KEYS);
    /* The tables shrank back: within four times the empty store's. */
    CHECK(after.bytes < 4 * empty.bytes);
    sluice_store_free(st);
    sluice_vclock_free(clock);
}

static void test_default_cap(void)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 1, 60000);
    sluice_vclock *clock = NULL;
    sluice_store *st;
    sluice_decision d;
    int rc = 0;

    test_context("the default cap");
    CHECK_OK(sluice_vclock_new(&clock, 1000));
    st = open_store(clock, 0);
    CHECK_EQ_U64(hit_keys(st, &l, 1000000, &rc), 1000000);
    CHECK_RC(sluice_hit(&d, st, &l, "one more", 8, 1), SLUICE_EFULL);
    CHECK_EQ_U64(stats_of(st).full, 1);
    sluice_store_free(st);
    st = open_store(clock, SLUICE_NO_KEY_CAP);
    CHECK_EQ_U64(hit_keys(st, &l, 1000001, &rc), 1000001);
    CHECK_OK(rc);
    sluice_store_free(st);
    sluice_vclock_free(clock);
}

/* The buckets every sweep of 'st' has visited. */
static uint64_t swept_of(sluice_store *st)
{
    mem_store *m = st->backend.impl;
    uint64_t n = 0;

    for (unsigned i = 0; i < SHARDS; i++) {
        shard *sh = &m->shards[i].s;

        pthread_mutex_lock(&sh->lock);
        n += sh->swept;
        pthread_mutex_unlock(&sh->lock);
    }
    return n;
}

#define CAP_KEYS 200000

static void test_cap_sweep(void)
{
    const uint64_t bound = SWEEP_CAP_BUCKETS + SWEEP_BUCKETS_PER_CALL +
                           SWEEP_OTHER_BUCKETS;
    sluice_limit l = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    sluice_vclock *clock = NULL;
    sluice_store *st;
    sluice_decision d;
    uint64_t most = 0;
    int rc = 0;

    test_context("at the cap");
    CHECK_OK(sluice_vclock_new(&clock, 1000));
    st = open_store(clock, CAP_KEYS);
    CHECK_EQ_U64(hit_keys(st, &l, CAP_KEYS, &rc), CAP_KEYS);
    for (int i = 0; i < 500; i++) {
        char key[24];
        int len = snprintf(key, sizeof(key), "new%d", i);
        uint64_t before = swept_of(st);

        sluice_vclock_advance(clock, 1);
        CHECK_RC(sluice_hit(&d, st, &l, key, (size_t)len, 1), SLUICE_EFULL);
        if (swept_of(st) - before > most)
            most = swept_of(st) - before;
    }
    printf("  at the cap: %d keys, 500 refused new keys, at most %llu "
           "buckets swept by one (bound %llu)\n", CAP_KEYS,
           (unsigned long long)most, (unsigned long long)bound);
    CHECK(most <= bound);
    CHECK_EQ_U64(stats_of(st).full, 500);
    /* Every key idle: the first new key finds room. */
    sluice_vclock_advance(clock, 60000);
    CHECK_OK(sluice_hit(&d, st, &l, "fits", 4, 1));
    CHECK(d.allowed);
    sluice_store_free(st);
    sluice_vclock_free(clock);
}

static void test_clock_step(void)
{
    sluice_vclock *clock = NULL;
    sluice_store *st;
    sluice_decision d;

    CHECK_OK(sluice_vclock_new(&clock, 100000));
    st = open_store(clock, 0);
    for (unsigned a = 0; a < sluice_algo_count(); a++) {
        sluice_limit l = SLUICE_LIMIT((sluice_algo)a, 1, 1000);
        uint64_t wait;

        test_context("a step back, %s", sluice_algo_name((sluice_algo)a));
        sluice_vclock_set(clock, 100000);
        CHECK_OK(sluice_hit(&d, st, &l, "step", 4, 1));
        CHECK(d.allowed);
        sluice_vclock_set(clock, 40000); /* a minute back */
        CHECK_OK(sluice_hit(&d, st, &l, "step", 4, 1));
        CHECK(!d.allowed);
        wait = d.retry_after_ms;
        CHECK(wait > 60000);
        sluice_vclock_set(clock, 40000 + wait - 1);
        CHECK_OK(sluice_peek(&d, st, &l, "step", 4, 1));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.retry_after_ms, 1);
        sluice_vclock_set(clock, 40000 + wait);
        CHECK_OK(sluice_hit(&d, st, &l, "step", 4, 1));
        CHECK(d.allowed);
    }
    sluice_store_free(st);
    sluice_vclock_free(clock);
}

int main(void)
{
    test_trim();
    test_reclaim();
    test_default_cap();
    test_cap_sweep();
    test_clock_step();
    test_context(NULL);
    return test_summary("test_mem_reclaim");
}
