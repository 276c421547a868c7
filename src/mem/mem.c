/*
 * mem.c - the embedded in-process store ("mem://").
 *
 * Keys live in a hash table split into SLUICE__MEM_SHARDS shards, each with
 * its own lock, so threads on different keys rarely meet. A shard is a table
 * of chained buckets; an entry holds one (algorithm, key) and its state:
 *
 *   shard[h >> 56]  (lock, table -> {n, cells, buckets[]}, count, cursor)
 *       buckets[h & (n - 1)] = {head, idle_lo_ms}
 *                                  head -> entry -> entry -> NULL
 *       cells[h & (n/2 - 1)], cells[h >> 28 & (n/2 - 1)]: 128 bytes
 *                                  each, an entry in place, or free
 *
 *   entry: | next | hash | word | last_ms | base_ms | key_len | algo |
 *          | in_cell | key | idle_at_ms | retired | state |
 *
 * (what the lock-free path reads first: 48 bytes and the key, so for short
 * keys one or two cache lines; the sweep's fields and the state after).
 *
 * Cells. With many keys, the bucket and the entry are two cache misses, one
 * after the other (the bucket holds the entry's address). So a table of
 * SLUICE__MEM_CELLS_MIN_BUCKETS buckets or more, most of whose keys are of
 * algorithms with a word, has cells too: one for every two buckets, at
 * addresses the hash gives, and an entry of such an algorithm lives in one of
 * its two cells if either is free and the entry fits (SLUICE__MEM_CELL_SIZE
 * bytes). The lock-free path asks for both cells and the bucket at once: a key
 * in a cell is found with one miss, any other with the bucket's, then its
 * entry's. An entry in a cell is linked in its chain like any other, so
 * everything else (the locked path, sweeps, reset) is the same for it; it
 * is retired and reclaimed like any other too, and only then is its cell
 * free again. A table that grows or shrinks moves each entry into a cell of
 * the new table (or, out of the old cells, into a block of its own), as a
 * copy that takes the word (see rebase()), so no entry is left behind in
 * cells that readers no longer look in. The price is memory, cells used or
 * not: at 100,000 keys of the fixed window, 60% of them in cells, 144 bytes
 * a key against 117 without; at 5 million, 162 against 123. One cell per
 * bucket would hold 85% of them, for 205 bytes a key and at most a tenth
 * less time a call on this machine (BENCHMARKS.md).
 *
 * The lock-free path. An algorithm with a word (algo.h: the fixed window,
 * and GCRA) keeps its state in the entry's 64-bit 'word', relative to the
 * entry's 'base_ms' (its creation time; rebase() moves it up, as a copy of
 * the entry, when a state no longer fits). A hit on a key that exists is then
 * decided without the shard lock (decide_fast()):
 *   1. enter an epoch section (epoch.h), find the entry in its cells or by
 *      walking the chain with atomic loads (the clock is read while they
 *      are prefetched);
 *   2. raise 'last_ms' to the clock if it is behind, read the word, and
 *      decide at t = max(clock, last_ms) with the algorithm's pure word
 *      function: (old word, limit, t, cost, consume) -> (new word, decision);
 *   3. if the word changed, compare-and-swap it in; a lost race decides
 *      again on the word that won. A refusal or a peek writes nothing.
 * The word reads SLUICE__MEM_WORD_HELD (its top bit) while the state is in the
 * entry's struct instead: while someone holds the shard lock and decides on it
 * (word_take() ... word_put()), when the state is beyond the word's range
 * (for the fixed window, an expiry too far from the base for the count's
 * bits), and for ever once the entry is unlinked. A lock-free call that reads
 * SLUICE__MEM_WORD_HELD, cannot find its key, or gets SLUICE__WORD_RANGE from
 * the word function, takes the locked path, which decides on the struct with
 * the same arithmetic: which path serves a call changes no answer
 * (test_mem_fast checks both on random traces against the reference model).
 *
 * Why it is exact. Every change of a live word is one compare-and-swap from
 * the value the decision read, so concurrent hits are serialised by the
 * swaps, and none is lost or counted twice. The locked path takes the word
 * with an exchange, so a lock-free swap that read the old value fails
 * after it, and reads SLUICE__MEM_WORD_HELD. The sweep takes an idle word with
 * a swap from the idle value it read (so a hit that got in first keeps the
 * entry), and reset and every unlink store SLUICE__MEM_WORD_HELD first: a
 * lock-free call that still holds the entry then fails its swap and takes the
 * locked path, which no longer finds it. The clamp: a call raises 'last_ms'
 * before it reads the word and decides at the 'last_ms' it reads after, so a
 * word is never written at a time before the time of a word it replaces; the
 * algorithm's answer from a word written at a later time than the caller's
 * clock is its answer at that later time, with the gap added to the waits.
 *
 * Memory. Lock-free readers may hold an entry, or an old bucket table, that
 * a sweep, a reset, the key cap or a resize unlinks: so what is unlinked is
 * retired on the shard's lists and freed (mem_trim.c, at the end of each
 * sweep step) only once the epoch has advanced twice since, that is once
 * every reader that could have seen it has left (epoch.h). A resize relinks
 * entries while readers walk the old table: they may miss their key (then
 * they lock), never loop nor reach freed memory. A cell is read without the
 * lock before anything says it holds the reader's key: the reader loads its
 * word first (acquire), and reads the rest only if the word is live; a
 * cell's fields are written only while it is free, and it becomes free only
 * a grace period after its entry was unlinked (word SLUICE__MEM_WORD_HELD), so
 * what a live word covers stays put while the reader is in its section. Cells
 * go when their table has been freed and the last entry in them has too.
 *
 * Idle times. A lock-free decision does not write 'idle_at_ms' nor the
 * bucket's bound; a word's idle time only grows (algo.h), so what was noted
 * stays a lower bound. A sweep that reaches a noted time asks the word,
 * notes the new time if it has moved on, and drops the entry only if the
 * word is still the idle one it read.
 *
 * Time. The clock is read once per call, outside the lock; by default it is
 * the monotonic clock, which never steps. A clock that does (the wall clock,
 * when a caller passes it) is clamped per entry so it never goes backwards
 * for the algorithms ('last_ms'), and a decision made on a clamped clock
 * adds the gap to its waits, so that they hold on the caller's clock.
 *
 * Memory comes back. After each decision the entry records 'idle_at_ms', the
 * time from which its state equals a fresh one. Such entries are dropped:
 *   - a few buckets per locked call, from a cursor that walks the shard;
 *   - a few buckets of another shard every SLUICE__MEM_SWEEP_OTHER_EVERY calls
 * (locked or not), in turn, so every shard is swept whatever keys the traffic
 *     reaches;
 *   - the whole shard before its table grows (evict before allocating);
 *   - when the key cap is reached, a bounded part of the store: at most
 *     SLUICE__MEM_SWEEP_CAP_BUCKETS buckets a call, from where the last one
 * stopped, passing over each shard whose bound (sluice__mem_store.shard_lo_ms)
 * says nothing in it is idle yet (sluice__mem_sweep_store()). A table under an
 * eighth full halves at the end of a pass of its cursor. Freed memory goes back
 * to the system on a thread of the store's, once enough was freed (mem_trim.c
 * tells when and how). A bucket keeps 'idle_lo_ms', at most the least
 * 'idle_at_ms' of its entries, so a sweep reads only the bucket array and walks
 * a chain only when one of its entries may be idle. Entries are the lines other
 * threads write on every call; a sweep that read them all would pull them from
 * those threads' caches.
 *
 * A key that is still counting is never dropped: when the cap (max_keys, a
 * million by default) is reached and nothing is idle, a hit on a new key
 * fails with SLUICE_EFULL.
 */
#include "mem/mem.h"

#include <stdlib.h>
#include <string.h>

#define ALL_BIT ((uint64_t)1 << 55) /* sluice_hit_all()'s entries only */

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

/* ---- Words ------------------------------------------------------------------ */

/* Raises 'e's latest time to 'now_ms' if it is behind. */
static void last_raise(sluice__mem_entry *e, uint64_t now_ms)
{
    uint64_t last = atomic_load(&e->last_ms);

    while (last < now_ms &&
           !atomic_compare_exchange_weak(&e->last_ms, &last, now_ms))
        ;
}

/*
 * Under the shard lock: takes the state of 'e' out of its word into its
 * struct (the word reads SLUICE__MEM_WORD_HELD meanwhile, so every lock-free
 * call on it takes the locked path and waits), and puts it back. Whatever
 * decides on an entry under the lock does so between word_take() and
 * word_put(): a call on one key around its decide_held(); a call on several
 * keys that must be decided together (all or nothing) takes every word before
 * the first decision and puts them back after the last, so that no lock-free
 * call gets in between.
 */
static void word_take(sluice__mem_entry *e)
{
    const sluice__algo *algo = sluice__algos[e->algo];
    uint64_t w;

    if (algo->word == NULL)
        return;
    w = atomic_exchange(&e->word, SLUICE__MEM_WORD_HELD);
    if (w != SLUICE__MEM_WORD_HELD)
        algo->word->load(w, e->base_ms, sluice__mem_entry_state(e));
}

/* Leaves the word SLUICE__MEM_WORD_HELD when the state is beyond its range. */
static void word_put(sluice__mem_entry *e)
{
    const sluice__algo *algo = sluice__algos[e->algo];
    uint64_t w;

    if (algo->word != NULL &&
        algo->word->store(sluice__mem_entry_state(e), e->base_ms, &w))
        atomic_store(&e->word, w);
}

/* A decision made at 't' for a caller whose clock reads 'now_ms' <= t. */
static void add_gap(sluice_decision *out, uint64_t t, uint64_t now_ms)
{
    if (t > now_ms) {
        /* The caller's clock stepped back: the waits hold on it only once
           it has made up the step too. */
        if (out->retry_after_ms > 0)
            out->retry_after_ms += t - now_ms;
        if (out->reset_after_ms > 0)
            out->reset_after_ms += t - now_ms;
    }
}

/*
 * The lock-free decision on the word of 'e' (see the top of this file):
 * raise the entry's latest time to 'now_ms', read the word, decide at the
 * latest time, and swap the word in if it changed (a refusal or a peek
 * writes nothing); when the swap loses a race, decide again on the word that
 * won. SLUICE__WORD_RANGE when the word is held or cannot answer.
 */
static int decide_word(const sluice__algo *algo, sluice__mem_entry *e,
                       const sluice_limit *limit, uint64_t now_ms,
                       uint64_t cost, bool consume, sluice_decision *out)
{
    uint64_t w, next, t;
    int err;

    if (atomic_load(&e->last_ms) < now_ms)
        last_raise(e, now_ms);
    w = atomic_load(&e->word);
    do {
        if (w & SLUICE__MEM_WORD_HELD)
            return SLUICE__WORD_RANGE;
        t = atomic_load(&e->last_ms);
        if (t < now_ms)
            t = now_ms;
        err = algo->word->decide != NULL
                  ? algo->word->decide(w, e->base_ms, limit, t, cost, consume,
                                       &next, out)
                  : sluice__word_decide(algo, w, e->base_ms, limit, t, cost,
                                        consume, &next, out);
        if (err != SLUICE_OK)
            return err;
    } while (next != w && !atomic_compare_exchange_weak(&e->word, &w, next));
    add_gap(out, t, now_ms);
    return SLUICE_OK;
}

/*
 * The entry of (algorithm, key) in shard 'sh', found without the lock
 * inside an epoch section, or NULL; reads the clock into '*now_ms' while
 * what it looks at comes from memory (prefetched). A table with cells:
 * the key's two cells, both asked for at once, so one miss; then, if
 * neither holds it, the chain. Without: the bucket, then its chain.
 */
static sluice__mem_entry *find_unlocked(sluice__mem_store *m,
                                        sluice__mem_shard *sh, uint64_t hash,
                                        sluice_algo algo, const char *key,
                                        size_t key_len, uint64_t *now_ms)
{
    uintptr_t tag = atomic_load(&sh->table);
    sluice__mem_table *t = sluice__mem_table_of_tag(tag);
    sluice__mem_bucket *bk = &t->b[hash & (((size_t)1 << (tag & 63)) - 1)];
    sluice__mem_entry *e, *a, *b;

    if (t->cell_base == NULL) {
        e = atomic_load(&bk->head);
        if (e != NULL) {
            /* Its first 64 bytes, which may straddle two cache lines. */
            __builtin_prefetch(e);
            __builtin_prefetch((const char *)e + 63);
        }
        *now_ms = m->clock_ms(m->clock_payload);
        return sluice__mem_chain_find_unlocked(e, hash, algo, key, key_len);
    }
    a = sluice__mem_cell_at(t->cell_base,
                            sluice__mem_cell_first(hash, t->cell_n));
    b = sluice__mem_cell_at(t->cell_base,
                            sluice__mem_cell_second(hash, t->cell_n));
    __builtin_prefetch(a);
    __builtin_prefetch(b);
    __builtin_prefetch(bk); /* if neither holds it */
    *now_ms = m->clock_ms(m->clock_payload);
    if (sluice__mem_cell_holds(a, hash, algo, key, key_len))
        return a;
    if (sluice__mem_cell_holds(b, hash, algo, key, key_len))
        return b;
    return sluice__mem_chain_find_unlocked(atomic_load(&bk->head), hash, algo,
                                           key, key_len);
}

/*
 * The fast path: for an algorithm with a word, a key that exists, and a
 * thread with an epoch slot, the decision without the shard lock. It reads
 * the clock into '*now_ms' itself, while the key's entry is on its way from
 * memory (a prefetch). SLUICE__WORD_RANGE when the locked path must decide.
 */
static int decide_fast(sluice__mem_store *m, sluice__mem_shard *sh,
                       uint64_t hash, const sluice_limit *limit,
                       const char *key, size_t key_len, uint64_t cost,
                       bool consume, uint64_t *now_ms, sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    int slot = sluice__epoch_slot_of_thread();
    sluice__mem_entry *e;
    int err = SLUICE__WORD_RANGE;

    if (slot < 0) {
        *now_ms = m->clock_ms(m->clock_payload);
        return SLUICE__WORD_RANGE;
    }
    sluice__epoch_enter(&m->epoch, slot);
    e = find_unlocked(m, sh, hash, limit->algo, key, key_len, now_ms);
    if (e != NULL && *now_ms <= SLUICE_NOW_MAX_MS)
        err = decide_word(algo, e, limit, *now_ms, cost, consume, out);
    sluice__epoch_exit(&m->epoch, slot);
    return err;
}

/* ---- The store's table ------------------------------------------------------ */

/*
 * Decides on the state that 'e' holds, at 'now_ms' clamped to its last,
 * under the shard lock and between word_take() and word_put() of 'e'.
 */
static int decide_held(sluice__mem_shard *sh, sluice__mem_entry *e,
                       const sluice_limit *limit, uint64_t now_ms,
                       uint64_t cost, bool consume, sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    uint64_t t;
    size_t before, after;
    int err;

    t = atomic_load(&e->last_ms);
    if (t < now_ms)
        t = now_ms;
    before = algo->bytes(sluice__mem_entry_state(e));
    err = algo->decide(sluice__mem_entry_state(e), limit, t, cost, consume,
                       out);

    /* Even a failed decide may have trimmed the state and freed memory. */
    after = algo->bytes(sluice__mem_entry_state(e));
    sh->bytes += after;
    sh->bytes -= before;
    if (after < before)
        sh->freed += before - after;
    if (err == SLUICE_OK)
        add_gap(out, t, now_ms);
    if (err == SLUICE_OK) {
        uint64_t idle_at = algo->idle_at(sluice__mem_entry_state(e), limit);

        last_raise(e, t);
        /* Never sooner than before: a call with a shorter window must not
           let the sweep drop what a longer one still counts. */
        if (idle_at > sluice__mem_cold_of(e)->idle_at_ms || idle_at == 0)
            sluice__mem_cold_of(e)->idle_at_ms = idle_at;
        sluice__mem_bucket_note(sh, e);
    }
    return err;
}

/*
 * After a locked decision on '*link': a state the word cannot hold from the
 * entry's base may fit from a later one (the fixed window's expiry is
 * relative to it). Then the entry moves its base up to its latest time, as
 * a copy, so that the lock-free path serves it again.
 */
static void rebase(sluice__mem_store *m, sluice__mem_shard *sh,
                   sluice__mem_link *link)
{
    sluice__mem_entry *e = *link;
    const sluice__algo *algo = sluice__algos[e->algo];
    uint64_t base_ms = atomic_load(&e->last_ms), w;

    if (algo->word != NULL && atomic_load(&e->word) == SLUICE__MEM_WORD_HELD &&
        base_ms > e->base_ms &&
        algo->word->store(sluice__mem_entry_state(e), base_ms, &w))
        sluice__mem_entry_rebase(m, sh, link, base_ms, w);
}

/* A peek at an unknown key: decides on a fresh state, keeps nothing. */
static int decide_fresh(const sluice_limit *limit, uint64_t now_ms,
                        uint64_t cost, sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    _Alignas(8) unsigned char fresh[SLUICE__MEM_STATE_MAX];
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
static int decide_new(sluice__mem_store *m, sluice__mem_shard *sh,
                      sluice__mem_link *link, uint64_t hash,
                      const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t now_ms, uint64_t cost,
                      sluice_decision *out)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    sluice__mem_entry *e =
        sluice__mem_entry_new(sh, limit->algo, hash, key, key_len, now_ms);
    int err;

    if (e == NULL) {
        atomic_fetch_sub(&m->keys, 1);
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a key of %zu "
                             "bytes", key_len);
    }
    if ((err = algo->decide(sluice__mem_entry_state(e), limit, now_ms, cost,
                            true, out)) < 0) {
        atomic_fetch_sub(&m->keys, 1);
        algo->release(sluice__mem_entry_state(e));
        sluice__mem_entry_free(sh, e);
        return err;
    }
    sluice__mem_cold_of(e)->idle_at_ms =
        algo->idle_at(sluice__mem_entry_state(e), limit);
    word_put(e);
    *link = e; /* published: lock-free readers may find it from now on */
    sluice__mem_bucket_note(sh, e);
    sh->count++;
    sh->bytes += sluice__mem_entry_bytes(e);
    sluice__mem_shard_make_room(m, sh, now_ms);
    return SLUICE_OK;
}

static int mem_decide(void *impl, const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t cost, bool consume,
                      sluice_decision *out)
{
    sluice__mem_store *m = impl;
    uint64_t hash = key_hash(m->seed, limit->algo, key, key_len);
    sluice__mem_shard *sh = sluice__mem_shard_of(m, hash);
    uint64_t now_ms;
    bool swept = false;
    sluice__mem_link *link;
    int err;

    if (sluice__algos[limit->algo]->word != NULL) {
        err = decide_fast(m, sh, hash, limit, key, key_len, cost, consume,
                          &now_ms, out);
        if (err != SLUICE__WORD_RANGE) {
            sluice__mem_sweep_other(m, now_ms);
            return err;
        }
    } else {
        now_ms = m->clock_ms(m->clock_payload);
    }
    if (now_ms > SLUICE_NOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE,
                             "the clock reads %llu ms, beyond 2^53",
                             (unsigned long long)now_ms);
again:
    pthread_mutex_lock(&sh->lock);
    link = sluice__mem_shard_find(sh, hash, limit->algo, key, key_len);
    if (*link != NULL) {
        word_take(*link);
        err = decide_held(sh, *link, limit, now_ms, cost, consume, out);
        word_put(*link);
        if (err == SLUICE_OK)
            rebase(m, sh, link);
    } else if (!consume) {
        err = decide_fresh(limit, now_ms, cost, out);
    } else if (sluice__mem_reserve_key(m)) {
        err = decide_new(m, sh, link, hash, limit, key, key_len, now_ms, cost,
                         out);
    } else if (!swept) {
        /* At the cap: drop what is idle (a bounded sweep), then look again. */
        pthread_mutex_unlock(&sh->lock);
        sluice__mem_sweep_store(m, now_ms);
        swept = true;
        goto again;
    } else {
        atomic_fetch_add(&m->full, 1);
        err = sluice__error(SLUICE_EFULL,
                            "the store holds its cap of %zu keys and none is "
                            "idle", m->max_keys);
    }
    sluice__mem_sweep_some(m, sh, SLUICE__MEM_SWEEP_BUCKETS_PER_CALL, now_ms);
    pthread_mutex_unlock(&sh->lock);
    sluice__mem_sweep_other(m, now_ms);
    return err;
}

static int mem_reset(void *impl, const sluice_limit *limit, const char *key,
                     size_t key_len)
{
    sluice__mem_store *m = impl;

    return sluice__mem_forget(m, key_hash(m->seed, limit->algo, key, key_len),
                              limit->algo, key, key_len);
}

static void mem_free(void *impl)
{
    sluice__mem_store *m = impl;

    sluice__mem_trimmer_stop(m); /* at most a trim in progress to wait for */
    for (unsigned i = 0; i < SLUICE__MEM_SHARDS; i++) {
        sluice__mem_shard *sh = &m->shards[i].s;

        sluice__mem_shard_free(m, sh);
        pthread_mutex_destroy(&sh->lock);
    }
    free(m);
}

/* ---- Held entries, for sluice_hit_all() (mem_all.c) --------------------- */

/*
 * hit_all's entries have ALL_BIT in their hash, which sluice_hit()'s never
 * have: the lock-free path (which looks keys up by sluice_hit()'s hash)
 * never finds them, so they are only ever read and written under their
 * shard's lock, and a call holding every involved shard holds its entries
 * whole. Each decision still goes between word_take() and word_put(), so
 * that the word and the state agree for the sweep.
 */
uint64_t sluice__mem_all_hash(void *p, sluice_algo a, const char *k, size_t n)
{
    return key_hash(((sluice__mem_store *)p)->seed, a, k, n) | ALL_BIT;
}

/* HOLD: reads the clock, locks the shards of hash[0..n) (sorted by shard:
   no circular wait) once each. Else sweeps, unlocks; SWEEP: the store too,
   FULL: counts a SLUICE_EFULL. */
uint64_t sluice__mem_hold(void *impl, const uint64_t *hash, size_t n,
                          sluice__hold step, uint64_t now_ms)
{
    sluice__mem_store *m = impl;

    now_ms = step == SLUICE__HOLD ? m->clock_ms(m->clock_payload) : now_ms;
    for (size_t i = 0; i < n; i++) {
        sluice__mem_shard *sh = sluice__mem_shard_of(m, hash[i]);

        if (i > 0 && sh == sluice__mem_shard_of(m, hash[i - 1]))
            continue;
        if (step == SLUICE__HOLD) {
            pthread_mutex_lock(&sh->lock);
        } else {
            sluice__mem_shard_make_room(m, sh, now_ms);
            sluice__mem_sweep_some(m, sh, SLUICE__MEM_SWEEP_BUCKETS_PER_CALL,
                                   now_ms);
            pthread_mutex_unlock(&sh->lock);
        }
    }
    if (step == SLUICE__HOLD_SWEEP)
        sluice__mem_sweep_store(m, now_ms);
    if (step == SLUICE__HOLD_FULL)
        atomic_fetch_add(&m->full, 1);
    return now_ms;
}

/* Makes a fresh entry at 'link' for a held call (under the cap). */
static int held_make(sluice__mem_store *m, sluice__mem_shard *sh,
                     sluice__mem_link *link, uint64_t hash,
                     const sluice_limit *limit, const char *key, size_t len,
                     uint64_t now_ms)
{
    sluice__mem_entry *e;

    if (!sluice__mem_reserve_key(m))
        return SLUICE_EFULL;
    if ((e = sluice__mem_entry_new(sh, limit->algo, hash, key, len,
                                   now_ms)) == NULL) {
        atomic_fetch_sub(&m->keys, 1);
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a key");
    }
    word_put(e);
    *link = e;
    sluice__mem_bucket_note(sh, e);
    sh->count++;
    sh->bytes += sluice__mem_entry_bytes(e);
    return SLUICE_OK;
}

/* Makes room in 'e' (held) for a count, at the time decide_held() uses. */
static int held_reserve(sluice__mem_shard *sh, sluice__mem_entry *e,
                        const sluice_limit *limit, uint64_t now_ms,
                        uint64_t cost)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    uint64_t t = atomic_load(&e->last_ms);
    size_t before;
    int err;

    if (algo->reserve == NULL)
        return SLUICE_OK;
    word_take(e);
    before = algo->bytes(sluice__mem_entry_state(e));
    err = algo->reserve(sluice__mem_entry_state(e), limit,
                        t < now_ms ? now_ms : t, cost);
    sh->bytes += algo->bytes(sluice__mem_entry_state(e));
    sh->bytes -= before;
    word_put(e);
    return err;
}

/* With its shard held, entry ('hash', 'limit', 'key'): PEEK decides (fresh
   if none), MAKE makes one (EFULL at the cap), RESERVE makes room to
   count, HIT counts, DROP removes. */
int sluice__mem_held(void *impl, uint64_t hash, const sluice_limit *limit,
                     const char *key, size_t len, uint64_t now_ms,
                     uint64_t cost, sluice__held mode, sluice_decision *out)
{
    sluice__mem_store *m = impl;
    sluice__mem_shard *sh = sluice__mem_shard_of(m, hash);
    sluice__mem_link *link =
        sluice__mem_shard_find(sh, hash, limit->algo, key, len);
    int err;

    if (*link != NULL && mode == SLUICE__HELD_DROP)
        sluice__mem_entry_remove(m, sh, link);
    if (*link == NULL && mode == SLUICE__HELD_PEEK)
        return decide_fresh(limit, now_ms, cost, out);
    if (*link == NULL && mode == SLUICE__HELD_MAKE)
        return held_make(m, sh, link, hash, limit, key, len, now_ms);
    if (*link != NULL && mode == SLUICE__HELD_RESERVE)
        return held_reserve(sh, *link, limit, now_ms, cost);
    if (mode != SLUICE__HELD_PEEK && mode != SLUICE__HELD_HIT)
        return SLUICE_OK;
    word_take(*link);
    err = decide_held(sh, *link, limit, now_ms, cost,
                      mode == SLUICE__HELD_HIT, out);
    word_put(*link);
    return err;
}

static const sluice__store_ops mem_ops = {
    .decide = mem_decide,
    .reset = mem_reset,
    .decide_all = sluice__mem_decide_all,
    .stats = sluice__mem_stats,
    .free = mem_free,
};

int sluice__mem_open(sluice__opened *out, sluice_store_opts *opts,
                     const char *url)
{
    sluice__mem_store *m;
    unsigned i;

    for (i = 0; i < SLUICE__ALGO_N; i++)
        if (sluice__algos[i]->state_size > SLUICE__MEM_STATE_MAX)
            return sluice__error(SLUICE_EINVAL,
                                 "algorithm %s keeps %zu bytes of state; the "
                                 "embedded store allows %u",
                                 sluice__algos[i]->name,
                                 sluice__algos[i]->state_size,
                                 SLUICE__MEM_STATE_MAX);
    m = aligned_alloc(_Alignof(sluice__mem_store), sizeof(*m));
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
    m->max_keys =
        opts->max_keys == 0 ? SLUICE__MEM_DEFAULT_MAX_KEYS : opts->max_keys;
    m->seed = sluice__random_seed();
    atomic_init(&m->keys, 0);
    atomic_init(&m->full, 0);
    atomic_init(&m->cap_shard, 0);
    sluice__epoch_init(&m->epoch);
    for (i = 0; i < SLUICE__MEM_SHARDS; i++) {
        sluice__mem_shard *sh = &m->shards[i].s;
        sluice__mem_table *t =
            sluice__mem_table_new(SLUICE__MEM_SHARD_MIN_BUCKETS, false);

        if (t == NULL || pthread_mutex_init(&sh->lock, NULL) != 0) {
            free(t);
            while (i-- > 0) {
                free(sluice__mem_table_of_tag(
                    atomic_load(&m->shards[i].s.table)));
                pthread_mutex_destroy(&m->shards[i].s.lock);
            }
            free(m);
            return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
        }
        atomic_init(&sh->table, sluice__mem_table_tag(t));
        sh->buckets = t->b;
        sh->nbuckets = t->n;
        sh->bytes = sh->nbuckets * sizeof(*sh->buckets);
        sh->retired_oldest = UINT64_MAX;
        sh->cap_lo_ms = UINT64_MAX;
        sh->lo_ms = &m->shard_lo_ms[i];
        atomic_init(sh->lo_ms, UINT64_MAX);
    }
    (void)url; /* nothing follows "mem://" */
    out->ops = &mem_ops;
    out->impl = m;
    out->kind = "mem";
    return SLUICE_OK;
}
