/*
 * mem.h - the embedded store's private API, shared by the files of src/mem/:
 * mem.c (decisions, the lock-free path, the store's table, held entries),
 * mem_table.c (entries, cells, shards, sweeps, reclamation), mem_trim.c
 * (trimming the heap, stats) and mem_all.c (sluice_hit_all()); epoch.h is
 * its reclamation. The layout and the argument for the lock-free path are
 * at the top of mem.c. Nothing outside src/mem/ but its tests includes it:
 * the rest of the library opens the store by sluice__mem_open()
 * (store/store.h).
 */
#ifndef SLUICE_MEM_H
#define SLUICE_MEM_H

#include "mem/epoch.h"
#include "store/store.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>

#define SLUICE__MEM_SHARDS 256u
#define SLUICE__MEM_SHARD_MIN_BUCKETS 16u
#define SLUICE__MEM_SWEEP_BUCKETS_PER_CALL 2u
/* The store-wide sweep: a step every SLUICE__MEM_SWEEP_OTHER_EVERY calls
   of a thread, over SLUICE__MEM_SWEEP_OTHER_BUCKETS buckets of another
   shard. */
#define SLUICE__MEM_SWEEP_OTHER_EVERY 64u
#define SLUICE__MEM_SWEEP_OTHER_BUCKETS 64u
#define SLUICE__MEM_SWEEP_CAP_BUCKETS 4096u /* a call at the key cap sweeps */
#define SLUICE__MEM_DEFAULT_MAX_KEYS ((size_t)1000000)
#define SLUICE__MEM_STATE_MAX 64u /* the largest state, checked at open */
/* A table's cells (below): the bytes of an entry in place in one; the
   fewest buckets of a table that has cells (a smaller one has none); a
   table of n buckets has n >> SLUICE__MEM_CELLS_SHIFT cells; the algo byte
   of a cell that holds nothing. */
#define SLUICE__MEM_CELL_SIZE 128u
#define SLUICE__MEM_CELLS_MIN_BUCKETS 64u
#define SLUICE__MEM_CELLS_SHIFT 1u
#define SLUICE__MEM_CELL_FREE 0xFFu
/* The heap is trimmed once this much was freed since the last time, and at
   least SLUICE__MEM_TRIM_KEY_BYTES per live key (sluice__mem_trim()). */
#define SLUICE__MEM_TRIM_MIN_BYTES ((uint64_t)1 << 20)
#define SLUICE__MEM_TRIM_KEY_BYTES 4096u

/* The word of an entry whose state is in its struct, under the lock. */
#define SLUICE__MEM_WORD_HELD SLUICE__WORD_STORE_BIT

typedef struct sluice__mem_entry sluice__mem_entry;
/* A link that lock-free readers follow. */
typedef sluice__mem_entry *_Atomic sluice__mem_link;

struct sluice__mem_entry {
    /* What the lock-free path reads, first: with a key of up to 16 bytes,
       all of it is on the entry's first cache line. */
    sluice__mem_link next;
    uint64_t hash;
    /* An algorithm with a word: its state, or SLUICE__MEM_WORD_HELD when the
       struct state holds it (under the lock, or out of the word's range). */
    _Atomic uint64_t word;
    _Atomic uint64_t last_ms; /* latest time seen: the clock is clamped to it */
    uint64_t base_ms;         /* the word's times are relative to it */
    uint32_t key_len;
    uint8_t algo;
    bool in_cell; /* in a table's cells (below), not a block of its own */
    /* The key's bytes, then (8-aligned) a sluice__mem_cold, then the state. */
    _Alignas(8) unsigned char data[];
};

typedef struct sluice__mem_cells sluice__mem_cells;

/* What only the lock's holder reads. */
typedef struct sluice__mem_cold {
    /* From then on the state equals a fresh one (for a word, a lower bound);
       once retired, the epoch it was unlinked at. */
    uint64_t idle_at_ms;
    sluice__mem_entry *retired; /* the shard's unlinked, not yet freed */
} sluice__mem_cold;

/* A chain, and a time before which none of its entries is idle. */
typedef struct sluice__mem_bucket {
    sluice__mem_link head;
    uint64_t idle_lo_ms; /* <= every entry's idle_at_ms; UINT64_MAX if none */
} sluice__mem_bucket;

/*
 * A table's cells: places for entries of algorithms with a word, at an
 * address the key's hash gives (one of two), so that the lock-free path
 * finds a key with one miss where a chain costs two (the bucket, then the
 * entry). An entry in a cell is linked in its chain as any other; a free
 * cell reads SLUICE__MEM_CELL_FREE as its algorithm, and
 * SLUICE__MEM_WORD_HELD as its word. A cell's last 8 bytes point to its
 * cells (sluice__mem_cell_owner()), so an entry in one fits in
 * SLUICE__MEM_CELL_SIZE - 8 and the others pay nothing for it. The cells
 * are a mapping of their own (mmap()), so they go back to the system when
 * freed, whatever the heap around them holds. Cells outlive their table
 * while entries are in them: a table that goes leaves them 'orphan', freed
 * when the last of their entries is.
 */
struct sluice__mem_cells {
    unsigned char *base; /* n cells, a mapping of their own */
    size_t n;            /* its table's buckets >> SLUICE__MEM_CELLS_SHIFT */
    size_t used;         /* cells that hold an entry, live or retired */
    bool orphan;
};

/* A bucket array; replaced ones wait on the shard's list to be freed. */
typedef struct sluice__mem_table {
    size_t n; /* a power of two */
    struct sluice__mem_table *retired;
    uint64_t retired_epoch;
    sluice__mem_cells *cells; /* or NULL (a small table); the lock's holders' */
    /* The cells' base and count, for lock-free readers, who never read
       'cells' (its count of used cells changes with every new key). */
    unsigned char *cell_base;
    size_t cell_n;
    sluice__mem_bucket b[];
} sluice__mem_table;

typedef struct sluice__mem_shard {
    /* What lock-free readers read: the table's address, with log2 of its
       size in the low 6 bits (tables are 64-byte aligned), in one load. It
       has its cache line to itself: it changes only when the table grows,
       where the lock and the fields below change with every new key, sweep
       and removal, and would take the line from every other thread's
       lock-free reads. */
    _Atomic uintptr_t table;
    _Alignas(64) pthread_mutex_t lock;
    /* table->b and table->n, for the lock's holder */
    sluice__mem_bucket *buckets;
    size_t nbuckets;
    sluice__mem_entry *retired; /* unlinked, freed after a grace period */
    sluice__mem_table *retired_tables;
    uint64_t retired_oldest; /* the oldest epoch on the two lists, or
                                UINT64_MAX: until it is 2 behind,
                                sluice__mem_reclaim() has nothing to free
                                and walks nothing */
    size_t count;
    size_t sweep_cursor;
    /* The sweep at the key cap: its own cursor, the least bound of the
       buckets it passed (or lowered since), and the shard's bound in the
       store's array, which it sets when it reaches the end. */
    size_t cap_cursor;
    uint64_t cap_lo_ms;
    _Atomic uint64_t *lo_ms;
    uint64_t swept; /* buckets its sweeps visited (tests count them) */
    uint64_t bytes;
    uint64_t expired;
    uint64_t freed; /* bytes given back to the heap, not yet in 'untrimmed' */
} sluice__mem_shard;

/* Each shard on cache lines of its own, so two threads never share one. */
typedef struct sluice__mem_padded_shard {
    _Alignas(64) sluice__mem_shard s;
} sluice__mem_padded_shard;

/*
 * A store's trimming thread (sluice__mem_trim()): started the first time a
 * trim is due, woken by a post of 'wake' for each trim, stopped and joined
 * by the store's free. A process's generation is sluice__mem_fork_gen + 1:
 * never 0, and a forked child's is its parent's plus one (the thread is not
 * in the child). 'state' says in which process the thread runs: its
 * generation shifted left by one, with the low bit set while a thread of
 * that process starts it; 0 before it ever started.
 */
typedef struct sluice__mem_trimmer {
    _Atomic unsigned state;
    _Atomic bool stop;
    /* While it trims, the generation of its process; else 0. */
    _Atomic unsigned busy;
    bool wake_made; /* 'wake' was initialised (in this process or before) */
    sem_t wake;
    pthread_t thread;
} sluice__mem_trimmer;

typedef struct sluice__mem_store {
    /* Read by every call, written only at open: a cache line that every
       thread keeps, apart from the counts below, which every new key and
       every removal writes. */
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;
    uint64_t seed;
    size_t max_keys;
    _Alignas(64) _Atomic size_t keys;
    _Atomic uint64_t full;
    _Atomic unsigned cap_shard; /* where the next sweep at the cap starts */
    /* Bytes freed to the heap since it was last trimmed, and the trims:
       all of them, and those run inline, in a caller's call, because the
       trimming thread could not be started. */
    _Atomic uint64_t untrimmed;
    _Atomic uint64_t trims;
    _Atomic uint64_t trims_inline;
    sluice__mem_trimmer trimmer;
    sluice__epoch epoch; /* its own cache lines */
    /* Each shard's bound: at most the least idle_lo_ms of its buckets, so
       a sweep at the cap passes over a shard with nothing idle for one
       load. Written under the shard's lock, and only when it is lowered
       (rare: new keys go idle later than old ones) or a sweep at the cap
       has passed the whole shard. */
    _Alignas(64) _Atomic uint64_t shard_lo_ms[SLUICE__MEM_SHARDS];
    sluice__mem_padded_shard shards[SLUICE__MEM_SHARDS];
} sluice__mem_store;

static inline size_t sluice__mem_align8(size_t n)
{
    return (n + 7u) & ~(size_t)7u;
}

/* The bytes of an entry of 'algo' for a key of 'key_len' bytes. */
static inline size_t sluice__mem_entry_size(sluice_algo algo, size_t key_len)
{
    return sizeof(sluice__mem_entry) + sluice__mem_align8(key_len) +
           sizeof(sluice__mem_cold) +
           sluice__mem_align8(sluice__algos[algo]->state_size);
}

static inline const char *sluice__mem_entry_key(sluice__mem_entry *e)
{
    return (const char *)e->data;
}

static inline sluice__mem_cold *sluice__mem_cold_of(sluice__mem_entry *e)
{
    return (sluice__mem_cold *)(void *)(e->data +
                                        sluice__mem_align8(e->key_len));
}

static inline void *sluice__mem_entry_state(sluice__mem_entry *e)
{
    return sluice__mem_cold_of(e) + 1;
}

/* Cell 'i' of the cells at 'base'. */
static inline sluice__mem_entry *sluice__mem_cell_at(unsigned char *base,
                                                     size_t i)
{
    return (sluice__mem_entry *)(void *)(base + i * SLUICE__MEM_CELL_SIZE);
}

/* What cells of 'n' take, as the store's byte count counts them. */
static inline size_t sluice__mem_cells_bytes(size_t n)
{
    return sizeof(sluice__mem_cells) + n * SLUICE__MEM_CELL_SIZE;
}

/* Where a cell keeps its cells' address, set when they are made. */
static inline sluice__mem_cells **sluice__mem_cell_owner(sluice__mem_entry *e)
{
    return (sluice__mem_cells **)(void *)((char *)e + SLUICE__MEM_CELL_SIZE -
                                          sizeof(sluice__mem_cells *));
}

/* The two cells where an entry of 'hash' may live, of 'n' cells. */
static inline size_t sluice__mem_cell_first(uint64_t hash, size_t n)
{
    return hash & (n - 1);
}

static inline size_t sluice__mem_cell_second(uint64_t hash, size_t n)
{
    return (hash >> 28) & (n - 1);
}

static inline sluice__mem_shard *sluice__mem_shard_of(sluice__mem_store *m,
                                                      uint64_t hash)
{
    return &m->shards[hash >> 56 & (SLUICE__MEM_SHARDS - 1)].s;
}

/* Whether the 'n' bytes at 'a' and 'b' are equal: keys up to 16 bytes in
   two overlapping loads a side, longer ones by memcmp(). */
static inline bool sluice__mem_key_equal(const char *a, const char *b, size_t n)
{
    uint64_t a0, a1, b0, b1;
    uint32_t c0, c1, d0, d1;

    if (n >= 8 && n <= 16) {
        memcpy(&a0, a, 8), memcpy(&a1, a + n - 8, 8);
        memcpy(&b0, b, 8), memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4 && n < 8) {
        memcpy(&c0, a, 4), memcpy(&c1, a + n - 4, 4);
        memcpy(&d0, b, 4), memcpy(&d1, b + n - 4, 4);
        return ((c0 ^ d0) | (c1 ^ d1)) == 0;
    }
    return n == 0 || memcmp(a, b, n) == 0;
}

static inline bool sluice__mem_entry_is(sluice__mem_entry *e, uint64_t hash,
                                        sluice_algo algo, const char *key,
                                        size_t key_len)
{
    return e->hash == hash && e->algo == (uint8_t)algo &&
           e->key_len == key_len &&
           sluice__mem_key_equal(sluice__mem_entry_key(e), key, key_len);
}

/* A table's address and size as shard.table holds them. */
static inline uintptr_t sluice__mem_table_tag(sluice__mem_table *t)
{
    return (uintptr_t)t | (uintptr_t)__builtin_ctzll(t->n);
}

static inline sluice__mem_table *sluice__mem_table_of_tag(uintptr_t tag)
{
    return (sluice__mem_table *)(tag & ~(uintptr_t)63);
}

/*
 * The entry of (algorithm, key) in the chain from 'e', walked without the
 * lock; or NULL. A table being resized may hide an entry for a moment (its
 * chain is being relinked): the caller then takes the locked path.
 */
static inline sluice__mem_entry *sluice__mem_chain_find_unlocked(
    sluice__mem_entry *e, uint64_t hash, sluice_algo algo, const char *key,
    size_t key_len)
{
    for (; e != NULL; e = atomic_load(&e->next))
        if (sluice__mem_entry_is(e, hash, algo, key, key_len))
            return e;
    return NULL;
}

/*
 * Whether cell 'e' holds a live entry of (algorithm, key), read without the
 * lock inside an epoch section. The word first, with acquire: a live word
 * was stored after the fields it covers were written, and they are not
 * written again until the entry is unlinked (its word SLUICE__MEM_WORD_HELD)
 * and a grace period has passed, which this section holds back.
 */
static inline bool sluice__mem_cell_holds(sluice__mem_entry *e, uint64_t hash,
                                          sluice_algo algo, const char *key,
                                          size_t key_len)
{
    return atomic_load_explicit(&e->word, memory_order_acquire) !=
               SLUICE__MEM_WORD_HELD &&
           sluice__mem_entry_is(e, hash, algo, key, key_len);
}

/* ---- mem_table.c ---------------------------------------------------------- */

sluice__mem_entry *sluice__mem_entry_new(sluice__mem_shard *sh,
                                         sluice_algo algo, uint64_t hash,
                                         const char *key, size_t key_len,
                                         uint64_t now_ms);
void sluice__mem_entry_free(sluice__mem_shard *sh, sluice__mem_entry *e);
void sluice__mem_entry_remove(sluice__mem_store *m, sluice__mem_shard *sh,
                              sluice__mem_link *link);
void sluice__mem_entry_rebase(sluice__mem_store *m, sluice__mem_shard *sh,
                              sluice__mem_link *link, uint64_t base_ms,
                              uint64_t word);
size_t sluice__mem_entry_bytes(sluice__mem_entry *e);
int sluice__mem_forget(sluice__mem_store *m, uint64_t hash, sluice_algo algo,
                       const char *key, size_t key_len);
sluice__mem_link *sluice__mem_shard_find(sluice__mem_shard *sh, uint64_t hash,
                                         sluice_algo algo, const char *key,
                                         size_t key_len);
void sluice__mem_bucket_note(sluice__mem_shard *sh, sluice__mem_entry *e);
void sluice__mem_sweep_some(sluice__mem_store *m, sluice__mem_shard *sh,
                            unsigned n, uint64_t now_ms);
void sluice__mem_sweep_other_step(sluice__mem_store *m, uint64_t now_ms);
extern _Thread_local unsigned sluice__mem_sweep_calls
    __attribute__((tls_model("initial-exec")));

/*
 * Every SLUICE__MEM_SWEEP_OTHER_EVERY calls of a thread, a step of the
 * store-wide sweep: SLUICE__MEM_SWEEP_OTHER_BUCKETS buckets of the next shard
 * in the thread's turn, if no one holds it. So keys that went idle in shards no
 * call reaches any more are dropped too, however the traffic is spread, at a
 * cost of about a bucket a call, and without a counter that threads would
 * share. Inline: every call counts.
 */
static inline void sluice__mem_sweep_other(sluice__mem_store *m,
                                           uint64_t now_ms)
{
    if (++sluice__mem_sweep_calls % SLUICE__MEM_SWEEP_OTHER_EVERY == 0)
        sluice__mem_sweep_other_step(m, now_ms);
}
void sluice__mem_reclaim(sluice__mem_store *m, sluice__mem_shard *sh);
void sluice__mem_shard_make_room(sluice__mem_store *m, sluice__mem_shard *sh,
                                 uint64_t now_ms);
void sluice__mem_sweep_store(sluice__mem_store *m, uint64_t now_ms);
void sluice__mem_trim(sluice__mem_store *m);
void sluice__mem_trimmer_stop(sluice__mem_store *m);
extern _Atomic unsigned sluice__mem_fork_gen;

/* Whether this process's trimming thread of 'm' is trimming now. */
static inline bool sluice__mem_trimming(sluice__mem_store *m)
{
    unsigned busy = atomic_load_explicit(&m->trimmer.busy,
                                         memory_order_relaxed);

    return busy != 0 &&
           busy == atomic_load_explicit(&sluice__mem_fork_gen,
                                        memory_order_relaxed) + 1;
}
bool sluice__mem_reserve_key(sluice__mem_store *m);
sluice__mem_table *sluice__mem_table_new(size_t n, bool with_cells);
void sluice__mem_table_free(sluice__mem_shard *sh, sluice__mem_table *t);
void sluice__mem_shard_free(sluice__mem_store *m, sluice__mem_shard *sh);

/* The store's stats (its ops' 'stats'): keys, bytes, expired, full. */
int sluice__mem_stats(void *impl, sluice_store_stats *out);

/* ---- Held entries, for sluice_hit_all() (mem.c, used by mem_all.c) ------ */

/* What sluice__mem_hold() does with the shards of a call's entries. */
typedef enum sluice__hold {
    SLUICE__HOLD,       /* lock */
    SLUICE__HOLD_GIVE,  /* unlock */
    SLUICE__HOLD_SWEEP, /* unlock, then drop what is idle store-wide */
    SLUICE__HOLD_FULL   /* unlock, and count a SLUICE_EFULL */
} sluice__hold;
/* What sluice__mem_held() does with one held entry. */
typedef enum sluice__held {
    SLUICE__HELD_PEEK, /* decide, count nothing */
    SLUICE__HELD_HIT,  /* decide and count */
    SLUICE__HELD_DROP, /* forget */
    SLUICE__HELD_MAKE, /* make it if there is none */
    SLUICE__HELD_RESERVE /* make room to count (algo.h's reserve()) */
} sluice__held;

/* The hash of sluice_hit_all()'s entry of 'algo' and 'key' (the limit's
   window, then the id): never one of sluice_hit()'s (mem.c). */
uint64_t sluice__mem_all_hash(void *impl, sluice_algo algo, const char *key,
                              size_t len);
/* HOLD: reads the clock and locks the shards of hash[0..n) (sorted by
   shard) once each, answering the time; the other steps sweep and unlock
   them at 'now_ms'. */
uint64_t sluice__mem_hold(void *impl, const uint64_t *hash, size_t n,
                          sluice__hold step, uint64_t now_ms);
/* With its shard held, the entry of ('hash', 'limit', 'key'), as 'mode'
   says. */
int sluice__mem_held(void *impl, uint64_t hash, const sluice_limit *limit,
                     const char *key, size_t len, uint64_t now_ms,
                     uint64_t cost, sluice__held mode, sluice_decision *out);
/* The store's 'decide_all' (mem_all.c), over the calls above. */
int sluice__mem_decide_all(void *impl, const sluice_limit *limits, size_t n,
                           const char *key, size_t key_len, uint64_t cost,
                           sluice__all how, sluice_decision *each);

#endif /* SLUICE_MEM_H */
