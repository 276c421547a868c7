/*
 * mem.c - the embedded in-process store ("mem://").
 *
 * Keys live in a hash table split into SHARDS shards, each with its own lock,
 * so threads on different keys rarely meet. A shard is a table of chained
 * buckets; an entry holds one (algorithm, key) and that algorithm's state:
 *
 *   shard[h >> 56]  (lock, buckets[], count, sweep cursor)
 *       buckets[h & (nbuckets - 1)] = {head, idle_lo_ms}
 *                                        head -> entry -> entry -> NULL
 *
 *   entry: | next | hash | idle_at_ms | last_ms | key_len | algo | state | key |
 *
 * Time. The clock is read once per call, outside the lock; by default it is
 * the monotonic clock, which never steps. A clock that does (the wall clock,
 * when a caller passes it) is clamped per entry so it never goes backwards
 * for the algorithms ('last_ms'), and a decision made on a clamped clock
 * adds the gap to its waits, so that they hold on the caller's clock.
 *
 * Memory comes back. After each decision the entry records 'idle_at_ms', the
 * time from which its state equals a fresh one. Such entries are dropped:
 *   - a few buckets per call, from a cursor that walks the shard;
 *   - a few buckets of another shard every SWEEP_OTHER_EVERY calls, in turn,
 *     so every shard is swept whatever keys the traffic reaches;
 *   - the whole shard before its table grows (evict before allocating);
 *   - every shard when the key cap is reached, at most once per millisecond.
 * A table under an eighth full halves at the end of a pass of its cursor,
 * and then the allocator is asked to give free memory back to the system.
 * A bucket keeps 'idle_lo_ms', at most the least 'idle_at_ms' of its
 * entries, so a sweep reads only the bucket array and walks a chain only when
 * one of its entries may be idle. Entries are the lines other threads write
 * on every call; a sweep that read them all would pull them from those
 * threads' caches.
 *
 * A key that is still counting is never dropped: when the cap (max_keys, a
 * million by default) is reached and nothing is idle, a hit on a new key
 * fails with SLUICE_EFULL.
 */
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define SHARDS 256u
#define SHARD_MIN_BUCKETS 16u
#define SWEEP_BUCKETS_PER_CALL 2u
#define SWEEP_OTHER_EVERY 64u    /* calls of a thread between store-wide steps */
#define SWEEP_OTHER_BUCKETS 64u  /* buckets of another shard a step sweeps */
#define DEFAULT_MAX_KEYS ((size_t)1000000)
#define STATE_MAX 64u /* the largest algorithm state, checked at open */
#define ALL_BIT ((uint64_t)1 << 55) /* sluice_hit_all()'s entries only */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    uint64_t idle_at_ms; /* from then on the state equals a fresh one */
    uint64_t last_ms;    /* latest time seen: the clock is clamped to it */
    uint32_t key_len;
    uint8_t algo;
    _Alignas(8) unsigned char data[]; /* state, then the key's bytes */
} entry;

/* A chain, and a time before which none of its entries is idle. */
typedef struct bucket {
    entry *head;
    uint64_t idle_lo_ms; /* <= every entry's idle_at_ms; UINT64_MAX if none */
} bucket;

typedef struct shard {
    pthread_mutex_t lock;
    bucket *buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
    size_t sweep_cursor;
    uint64_t bytes;
    uint64_t expired;
} shard;

/* Each shard on cache lines of its own, so two threads never share one. */
typedef struct padded_shard {
    _Alignas(64) shard s;
} padded_shard;

typedef struct mem_store {
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;
    uint64_t seed;
    size_t max_keys;
    _Atomic size_t keys;
    _Atomic uint64_t full;
    _Atomic uint64_t last_full_sweep_ms;
    _Atomic uint64_t trimmed_ms; /* when memory was last given back */
    padded_shard shards[SHARDS];
} mem_store;

/* ---- Hashing --------------------------------------------------------------- */

/*
 * A seeded hash of (algorithm, key). The seed differs per store, so which
 * keys share a bucket cannot be planned from outside.
 */
static uint64_t key_hash(uint64_t seed, sluice_algo algo, const char *key,
                         size_t len)
{
    return sluice__hash(seed, (uint64_t)algo << 56, key, len) & ~ALL_BIT;
}

/* ---- Entries --------------------------------------------------------------- */

static size_t state_offset_end(sluice_algo algo)
{
    return (sluice__algos[algo]->state_size + 7u) & ~(size_t)7u;
}

static void *entry_state(entry *e)
{
    return e->data;
}

static const char *entry_key(entry *e)
{
    return (const char *)e->data + state_offset_end((sluice_algo)e->algo);
}

static size_t entry_bytes(entry *e)
{
    return sizeof(entry) + state_offset_end((sluice_algo)e->algo) +
           e->key_len + sluice__algos[e->algo]->bytes(entry_state(e));
}

static entry *entry_new(sluice_algo algo, uint64_t hash, const char *key,
                        size_t key_len)
{
    size_t off = state_offset_end(algo);
    entry *e = malloc(sizeof(entry) + off + key_len);

    if (e == NULL)
        return NULL;
    e->next = NULL;
    e->hash = hash;
    e->idle_at_ms = 0;
    e->last_ms = 0;
    e->key_len = (uint32_t)key_len;
    e->algo = (uint8_t)algo;
    sluice__algos[algo]->init(entry_state(e));
    if (key_len > 0)
        memcpy(e->data + off, key, key_len);
    return e;
}

/* Unlinks '*link' (an entry of 'sh') and frees it. */
static void entry_remove(mem_store *m, shard *sh, entry **link)
{
    entry *e = *link;

    *link = e->next;
    sh->bytes -= entry_bytes(e);
    sh->count--;
    atomic_fetch_sub(&m->keys, 1);
    sluice__algos[e->algo]->release(entry_state(e));
    free(e);
}

/* ---- Shards ---------------------------------------------------------------- */

static shard *shard_of(mem_store *m, uint64_t hash)
{
    return &m->shards[hash >> 56 & (SHARDS - 1)].s;
}

static entry **shard_find(shard *sh, uint64_t hash, sluice_algo algo,
                          const char *key, size_t key_len)
{
    entry **link = &sh->buckets[hash & (sh->nbuckets - 1)].head;

    for (; *link != NULL; link = &(*link)->next) {
        entry *e = *link;

        if (e->hash == hash && e->algo == (uint8_t)algo &&
            e->key_len == key_len &&
            (key_len == 0 || memcmp(entry_key(e), key, key_len) == 0))
            return link;
    }
    return link;
}

/*
 * Drops the idle entries of bucket 'b', unless its bound says there are none,
 * and sets the bound again from the entries that remain.
 */
static void sweep_bucket(mem_store *m, shard *sh, size_t b, uint64_t now_ms)
{
    bucket *bk = &sh->buckets[b];
    entry **link = &bk->head;
    uint64_t lo = UINT64_MAX;

    if (bk->idle_lo_ms > now_ms)
        return;
    while (*link != NULL) {
        entry *e = *link;

        if (e->idle_at_ms <= now_ms && e->last_ms <= now_ms) {
            entry_remove(m, sh, link);
            sh->expired++;
        } else {
            if (e->idle_at_ms < lo)
                lo = e->idle_at_ms;
            link = &e->next;
        }
    }
    bk->idle_lo_ms = lo;
}

/* Keeps the bound of the bucket holding 'e' at or below 'e's idle time. */
static void bucket_note(shard *sh, const entry *e)
{
    bucket *bk = &sh->buckets[e->hash & (sh->nbuckets - 1)];

    if (e->idle_at_ms < bk->idle_lo_ms)
        bk->idle_lo_ms = e->idle_at_ms;
}

static void shard_shrink(mem_store *m, shard *sh);

/*
 * Sweeps the next 'n' buckets of 'sh' from its cursor; at the end of each
 * pass over the table, shrinks it if it has grown sparse.
 */
static void sweep_some(mem_store *m, shard *sh, unsigned n, uint64_t now_ms)
{
    for (unsigned i = 0; i < n; i++) {
        sweep_bucket(m, sh, sh->sweep_cursor, now_ms);
        sh->sweep_cursor = (sh->sweep_cursor + 1) & (sh->nbuckets - 1);
        if (sh->sweep_cursor == 0) {
            shard_shrink(m, sh);
            return;
        }
    }
}

/*
 * Every SWEEP_OTHER_EVERY calls of a thread, a step of the store-wide sweep:
 * SWEEP_OTHER_BUCKETS buckets of the next shard in the thread's turn, if no
 * one holds it. So keys that went idle in shards no call reaches any more
 * are dropped too, however the traffic is spread, at a cost of about a
 * bucket a call, and without a counter that threads would share.
 */
static void sweep_other(mem_store *m, uint64_t now_ms)
{
    static _Thread_local unsigned calls, next;
    shard *sh;

    if (++calls % SWEEP_OTHER_EVERY != 0)
        return;
    sh = &m->shards[next++ % SHARDS].s;
    if (pthread_mutex_trylock(&sh->lock) != 0)
        return;
    sweep_some(m, sh, SWEEP_OTHER_BUCKETS, now_ms);
    pthread_mutex_unlock(&sh->lock);
}

static void sweep_all(mem_store *m, shard *sh, uint64_t now_ms)
{
    for (size_t b = 0; b < sh->nbuckets; b++)
        sweep_bucket(m, sh, b, now_ms);
}

/*
 * Asks the allocator to give free memory back to the system (glibc keeps
 * freed small blocks otherwise), at most once a second store-wide: after a
 * table shrinks, most of what its keys held is free.
 */
static void release_memory(mem_store *m)
{
#ifdef __GLIBC__
    uint64_t now = sluice__monotonic_ms(), last = atomic_load(&m->trimmed_ms);

    if (now - last < 1000 ||
        !atomic_compare_exchange_strong(&m->trimmed_ms, &last, now))
        return;
    malloc_trim(0);
#else
    (void)m;
#endif
}

/*
 * Moves the entries of 'sh' into a table of 'n' buckets (a power of two). A
 * failed allocation keeps the old table: longer chains, or a table larger
 * than it need be, but nothing lost.
 */
static void shard_resize(shard *sh, size_t n)
{
    bucket *buckets = malloc(n * sizeof(*buckets));

    if (buckets == NULL)
        return;
    for (size_t b = 0; b < n; b++)
        buckets[b] = (bucket){NULL, UINT64_MAX};
    for (size_t b = 0; b < sh->nbuckets; b++) {
        entry *e = sh->buckets[b].head;

        while (e != NULL) {
            entry *next = e->next;
            bucket *nb = &buckets[e->hash & (n - 1)];

            e->next = nb->head;
            nb->head = e;
            if (e->idle_at_ms < nb->idle_lo_ms)
                nb->idle_lo_ms = e->idle_at_ms;
            e = next;
        }
    }
    sh->bytes += n * sizeof(*buckets);
    sh->bytes -= sh->nbuckets * sizeof(*buckets);
    free(sh->buckets);
    sh->buckets = buckets;
    sh->nbuckets = n;
    sh->sweep_cursor = 0;
}

/*
 * Makes room before a shard's table would pass one entry per bucket: drop
 * what is idle, and double the table only if that was not enough.
 */
static void shard_make_room(mem_store *m, shard *sh, uint64_t now_ms)
{
    if (sh->count < sh->nbuckets)
        return;
    sweep_all(m, sh, now_ms);
    if (sh->count < sh->nbuckets)
        return;
    shard_resize(sh, sh->nbuckets * 2);
}

/*
 * Gives memory back once a shard's keys are mostly gone: its table halves
 * while it is under an eighth full (so it never halves and doubles back in
 * turn), and the allocator is asked to return what is free to the system,
 * at most once a second store-wide.
 */
static void shard_shrink(mem_store *m, shard *sh)
{
    bool halved = false;

    while (sh->nbuckets > SHARD_MIN_BUCKETS && sh->count < sh->nbuckets / 8) {
        size_t n = sh->nbuckets;

        shard_resize(sh, n / 2);
        if (sh->nbuckets == n)
            break; /* out of memory: keep the larger table */
        halved = true;
    }
    if (halved)
        release_memory(m);
}

/*
 * When the key cap is reached: sweep every shard, at most once per
 * millisecond (so a flood of new keys at the cap cannot turn every call into
 * a full scan). Called with no shard lock held.
 */
static void sweep_store(mem_store *m, uint64_t now_ms)
{
    uint64_t last = atomic_load(&m->last_full_sweep_ms);

    if (last == now_ms + 1 ||
        !atomic_compare_exchange_strong(&m->last_full_sweep_ms, &last,
                                        now_ms + 1))
        return;
    for (unsigned i = 0; i < SHARDS; i++) {
        shard *sh = &m->shards[i].s;

        pthread_mutex_lock(&sh->lock);
        sweep_all(m, sh, now_ms);
        pthread_mutex_unlock(&sh->lock);
    }
}

/* Reserves one key under the cap; false when the store is full. */
static bool reserve_key(mem_store *m)
{
    if (atomic_fetch_add(&m->keys, 1) < m->max_keys)
        return true;
    atomic_fetch_sub(&m->keys, 1);
    return false;
}

/* ---- The store's table ------------------------------------------------------ */

/* Decides on the state that 'e' holds, at 'now_ms' clamped to its last. */
static int decide_held(shard *sh, entry *e, const sluice_limit *limit,
                       uint64_t now_ms, uint64_t cost, bool consume,
                       sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    uint64_t t = e->last_ms > now_ms ? e->last_ms : now_ms;
    size_t before = algo->bytes(entry_state(e));
    int err = algo->decide(entry_state(e), limit, t, cost, consume, out);

    /* Even a failed decide may have trimmed the state and freed memory. */
    sh->bytes += algo->bytes(entry_state(e));
    sh->bytes -= before;
    if (err == SLUICE_OK && t > now_ms) {
        /* The caller's clock stepped back: the waits hold on it only once
           it has made up the step too. */
        if (out->retry_after_ms > 0)
            out->retry_after_ms += t - now_ms;
        if (out->reset_after_ms > 0)
            out->reset_after_ms += t - now_ms;
    }
    if (err == SLUICE_OK) {
        uint64_t idle_at = algo->idle_at(entry_state(e), limit);

        e->last_ms = t;
        /* Never sooner than before: a call with a shorter window must not
           let the sweep drop what a longer one still counts. */
        if (idle_at > e->idle_at_ms || idle_at == 0)
            e->idle_at_ms = idle_at;
        bucket_note(sh, e);
    }
    return err;
}

/* A peek at an unknown key: decides on a fresh state, keeps nothing. */
static int decide_fresh(const sluice_limit *limit, uint64_t now_ms,
                        uint64_t cost, sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    _Alignas(8) unsigned char fresh[STATE_MAX];
    int err;

    algo->init(fresh);
    err = algo->decide(fresh, limit, now_ms, cost, false, out);
    algo->release(fresh);
    return err;
}

/*
 * Counts a hit on a new key, whose key is reserved under the cap: a new
 * entry at 'link', unless the decision fails (nothing is kept then).
 */
static int decide_new(mem_store *m, shard *sh, entry **link, uint64_t hash,
                      const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t now_ms, uint64_t cost,
                      sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    entry *e = entry_new(limit->algo, hash, key, key_len);
    int err;

    if (e == NULL) {
        atomic_fetch_sub(&m->keys, 1);
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a key of %zu "
                             "bytes", key_len);
    }
    if ((err = algo->decide(entry_state(e), limit, now_ms, cost, true,
                            out)) < 0) {
        atomic_fetch_sub(&m->keys, 1);
        algo->release(entry_state(e));
        free(e);
        return err;
    }
    e->last_ms = now_ms;
    e->idle_at_ms = algo->idle_at(entry_state(e), limit);
    *link = e;
    bucket_note(sh, e);
    sh->count++;
    sh->bytes += entry_bytes(e);
    shard_make_room(m, sh, now_ms);
    return SLUICE_OK;
}

static int mem_decide(void *impl, const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t cost, bool consume,
                      sluice_decision *out)
{
    mem_store *m = impl;
    uint64_t now_ms = m->clock_ms(m->clock_payload);
    uint64_t hash = key_hash(m->seed, limit->algo, key, key_len);
    shard *sh = shard_of(m, hash);
    bool swept = false;
    entry **link;
    int err;

    if (now_ms > SLUICE_NOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE,
                             "the clock reads %llu ms, beyond 2^53",
                             (unsigned long long)now_ms);
again:
    pthread_mutex_lock(&sh->lock);
    link = shard_find(sh, hash, limit->algo, key, key_len);
    if (*link != NULL) {
        err = decide_held(sh, *link, limit, now_ms, cost, consume, out);
    } else if (!consume) {
        err = decide_fresh(limit, now_ms, cost, out);
    } else if (reserve_key(m)) {
        err = decide_new(m, sh, link, hash, limit, key, key_len, now_ms, cost,
                         out);
    } else if (!swept) {
        /* At the cap: drop what is idle everywhere, then look again. */
        pthread_mutex_unlock(&sh->lock);
        sweep_store(m, now_ms);
        swept = true;
        goto again;
    } else {
        atomic_fetch_add(&m->full, 1);
        err = sluice__error(SLUICE_EFULL,
                            "the store holds its cap of %zu keys and none is "
                            "idle", m->max_keys);
    }
    sweep_some(m, sh, SWEEP_BUCKETS_PER_CALL, now_ms);
    pthread_mutex_unlock(&sh->lock);
    sweep_other(m, now_ms);
    return err;
}

static int mem_reset(void *impl, const sluice_limit *limit, const char *key,
                     size_t key_len)
{
    mem_store *m = impl;
    uint64_t hash = key_hash(m->seed, limit->algo, key, key_len);
    shard *sh = shard_of(m, hash);
    entry **link;

    pthread_mutex_lock(&sh->lock);
    link = shard_find(sh, hash, limit->algo, key, key_len);
    if (*link != NULL)
        entry_remove(m, sh, link);
    pthread_mutex_unlock(&sh->lock);
    return SLUICE_OK;
}

static int mem_stats(void *impl, sluice_store_stats *out)
{
    mem_store *m = impl;

    out->bytes = sizeof(*m);
    for (unsigned i = 0; i < SHARDS; i++) {
        shard *sh = &m->shards[i].s;

        pthread_mutex_lock(&sh->lock);
        out->keys += sh->count;
        out->bytes += sh->bytes;
        out->expired += sh->expired;
        pthread_mutex_unlock(&sh->lock);
    }
    out->full = atomic_load(&m->full);
    return SLUICE_OK;
}

static void mem_free(void *impl)
{
    mem_store *m = impl;

    for (unsigned i = 0; i < SHARDS; i++) {
        shard *sh = &m->shards[i].s;

        for (size_t b = 0; b < sh->nbuckets; b++)
            while (sh->buckets[b].head != NULL)
                entry_remove(m, sh, &sh->buckets[b].head);
        free(sh->buckets);
        pthread_mutex_destroy(&sh->lock);
    }
    free(m);
}

/* ---- Held entries, for sluice_hit_all() (mem_all.c) --------------------- */
uint64_t sluice__mem_all_hash(void *p, sluice_algo a, const char *k, size_t n)
{
    return key_hash(((mem_store *)p)->seed, a, k, n) | ALL_BIT;
}

/* HOLD: reads the clock, locks the shards of hash[0..n) (sorted by shard:
   no circular wait) once each. Else sweeps, unlocks; SWEEP: the store too,
   FULL: counts a SLUICE_EFULL. */
uint64_t sluice__mem_hold(void *impl, const uint64_t *hash, size_t n,
                          sluice__hold step, uint64_t now_ms)
{
    mem_store *m = impl;

    now_ms = step == SLUICE__HOLD ? m->clock_ms(m->clock_payload) : now_ms;
    for (size_t i = 0; i < n; i++) {
        shard *sh = shard_of(m, hash[i]);

        if (i > 0 && sh == shard_of(m, hash[i - 1]))
            continue;
        if (step == SLUICE__HOLD) {
            pthread_mutex_lock(&sh->lock);
        } else {
            shard_make_room(m, sh, now_ms);
            sweep_some(m, sh, SWEEP_BUCKETS_PER_CALL, now_ms);
            pthread_mutex_unlock(&sh->lock);
        }
    }
    if (step == SLUICE__HOLD_SWEEP)
        sweep_store(m, now_ms);
    if (step == SLUICE__HOLD_FULL)
        atomic_fetch_add(&m->full, 1);
    return now_ms;
}

/* With its shard held, entry ('hash', 'limit', 'key'): PEEK decides (fresh
   if none), MAKE makes one (EFULL at the cap), HIT counts, DROP removes. */
int sluice__mem_held(void *impl, uint64_t hash, const sluice_limit *limit,
                     const char *key, size_t len, uint64_t now_ms,
                     uint64_t cost, sluice__held mode, sluice_decision *out)
{
    mem_store *m = impl;
    shard *sh = shard_of(m, hash);
    entry **link = shard_find(sh, hash, limit->algo, key, len);

    if (*link != NULL && mode == SLUICE__HELD_DROP)
        entry_remove(m, sh, link);
    if (*link == NULL && mode == SLUICE__HELD_PEEK)
        return decide_fresh(limit, now_ms, cost, out);
    if (*link == NULL && mode == SLUICE__HELD_MAKE) {
        if (!reserve_key(m))
            return SLUICE_EFULL;
        if ((*link = entry_new(limit->algo, hash, key, len)) == NULL) {
            atomic_fetch_sub(&m->keys, 1);
            return sluice__error(SLUICE_ENOMEM, "cannot allocate a key");
        }
        sh->count++;
        sh->bytes += entry_bytes(*link);
        bucket_note(sh, *link);
    }
    return mode == SLUICE__HELD_PEEK || mode == SLUICE__HELD_HIT
               ? decide_held(sh, *link, limit, now_ms, cost,
                             mode == SLUICE__HELD_HIT, out)
               : SLUICE_OK;
}

static const sluice__store_ops mem_ops = {
    .decide = mem_decide,
    .reset = mem_reset,
    .decide_all = sluice__mem_decide_all,
    .stats = mem_stats,
    .free = mem_free,
};

int sluice__mem_open(sluice__opened *out, sluice_store_opts *opts,
                     const char *url)
{
    mem_store *m;
    unsigned i;

    for (i = 0; i < SLUICE__ALGO_N; i++)
        if (sluice__algos[i]->state_size > STATE_MAX)
            return sluice__error(SLUICE_EINVAL,
                                 "algorithm %s keeps %zu bytes of state; the "
                                 "embedded store allows %u",
                                 sluice__algos[i]->name,
                                 sluice__algos[i]->state_size, STATE_MAX);
    m = aligned_alloc(_Alignof(mem_store), sizeof(*m));
    if (m == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    memset(m, 0, sizeof(*m));
    if (opts->clock_ms == NULL) {
        /* It never steps, so a changed wall clock changes no decision. */
        opts->clock_ms = sluice_clock_monotonic_ms;
        opts->clock_payload = NULL;
    }
    m->clock_ms = opts->clock_ms;
    m->clock_payload = opts->clock_payload;
    m->max_keys = opts->max_keys == 0 ? DEFAULT_MAX_KEYS : opts->max_keys;
    m->seed = sluice__random_seed();
    atomic_init(&m->keys, 0);
    atomic_init(&m->full, 0);
    atomic_init(&m->last_full_sweep_ms, 0);
    for (i = 0; i < SHARDS; i++) {
        shard *sh = &m->shards[i].s;

        sh->nbuckets = SHARD_MIN_BUCKETS;
        sh->buckets = malloc(sh->nbuckets * sizeof(*sh->buckets));
        if (sh->buckets != NULL)
            for (size_t b = 0; b < sh->nbuckets; b++)
                sh->buckets[b] = (bucket){NULL, UINT64_MAX};
        if (sh->buckets == NULL || pthread_mutex_init(&sh->lock, NULL) != 0) {
            free(sh->buckets);
            while (i-- > 0) {
                free(m->shards[i].s.buckets);
                pthread_mutex_destroy(&m->shards[i].s.lock);
            }
            free(m);
            return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
        }
        sh->bytes = sh->nbuckets * sizeof(*sh->buckets);
    }
    (void)url; /* nothing follows "mem://" */
    out->ops = &mem_ops;
    out->impl = m;
    out->kind = "mem";
    return SLUICE_OK;
}
