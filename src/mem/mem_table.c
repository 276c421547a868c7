/*
 * mem_table.c - the embedded store's entries, cells and shards: making,
 * moving, retiring and freeing entries, finding a key under its shard's
 * lock (the lock-free path finds its own: mem.c, over mem.h's inline
 * reads), sweeping idle entries (a shard, another shard in turn, the store
 * at the key cap), and growing and shrinking tables (mem.c's header tells
 * the whole design).
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "mem/mem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- Entries --------------------------------------------------------------- */

/* Notes that something goes on a retired list of 'sh' at 'epoch' (epochs
   only grow, so the first one on empty lists is their oldest). */
static void retired_note(sluice__mem_shard *sh, uint64_t epoch)
{
    if (epoch < sh->retired_oldest)
        sh->retired_oldest = epoch;
}

size_t sluice__mem_entry_bytes(sluice__mem_entry *e)
{
    /* An entry in a cell: its cells are counted as a whole. */
    return (e->in_cell
                ? 0
                : sluice__mem_entry_size((sluice_algo)e->algo, e->key_len)) +
           sluice__algos[e->algo]->bytes(sluice__mem_entry_state(e));
}

/* Whether an entry of 'algo' with a key of 'key_len' bytes fits a cell. */
static bool cell_fits(sluice_algo algo, size_t key_len)
{
    return sluice__algos[algo]->word != NULL &&
           sluice__mem_entry_size(algo, key_len) <=
               SLUICE__MEM_CELL_SIZE - sizeof(sluice__mem_cells *);
}

/* Takes a free cell of 't' for 'hash', of the two it may use; or NULL. */
static sluice__mem_entry *cell_take(sluice__mem_table *t, uint64_t hash)
{
    sluice__mem_cells *c = t->cells;
    sluice__mem_entry *e;

    if (c == NULL)
        return NULL;
    e = sluice__mem_cell_at(c->base, sluice__mem_cell_first(hash, c->n));
    if (e->algo != SLUICE__MEM_CELL_FREE) {
        e = sluice__mem_cell_at(c->base, sluice__mem_cell_second(hash, c->n));
        if (e->algo != SLUICE__MEM_CELL_FREE)
            return NULL;
    }
    c->used++;
    e->in_cell = true;
    return e;
}

static void cells_free(sluice__mem_shard *sh, sluice__mem_cells *c)
{
    sh->bytes -= sluice__mem_cells_bytes(c->n);
    munmap(c->base, c->n * SLUICE__MEM_CELL_SIZE);
    free(c);
}

/* A block of its own for an entry of 'algo' and 'key_len', its word
   SLUICE__MEM_WORD_HELD; or NULL. */
static sluice__mem_entry *entry_block(sluice_algo algo, size_t key_len)
{
    sluice__mem_entry *e = malloc(sluice__mem_entry_size(algo, key_len));

    if (e != NULL) {
        atomic_init(&e->word, SLUICE__MEM_WORD_HELD);
        e->in_cell = false;
    }
    return e;
}

/*
 * Room for an entry of 'algo', 'key_len' and 'hash': a cell of the shard's
 * table if one is free and the entry fits, else a block of its own. Its
 * word is SLUICE__MEM_WORD_HELD (a cell's is, while free), its 'in_cell' set.
 */
static sluice__mem_entry *entry_alloc(sluice__mem_shard *sh, sluice_algo algo,
                                      uint64_t hash, size_t key_len)
{
    sluice__mem_table *t = sluice__mem_table_of_tag(
        atomic_load_explicit(&sh->table, memory_order_relaxed));
    sluice__mem_entry *e = cell_fits(algo, key_len) ? cell_take(t, hash) : NULL;

    if (e == NULL && (e = entry_block(algo, key_len)) == NULL)
        return NULL;
    e->key_len = (uint32_t)key_len;
    e->algo = (uint8_t)algo;
    return e;
}

void sluice__mem_entry_free(sluice__mem_shard *sh, sluice__mem_entry *e)
{
    sluice__mem_cells *c;

    if (!e->in_cell) {
        sh->freed += sluice__mem_entry_size((sluice_algo)e->algo, e->key_len);
        free(e);
        return;
    }
    c = *sluice__mem_cell_owner(e);
    e->algo = SLUICE__MEM_CELL_FREE; /* its word is SLUICE__MEM_WORD_HELD */
    if (--c->used == 0 && c->orphan)
        cells_free(sh, c);
}

/*
 * A new entry, with a fresh state. Its word stays SLUICE__MEM_WORD_HELD until
 * the caller stores one: in a cell, that store is what lock-free readers see.
 */
sluice__mem_entry *sluice__mem_entry_new(sluice__mem_shard *sh,
                                         sluice_algo algo, uint64_t hash,
                                         const char *key, size_t key_len,
                                         uint64_t now_ms)
{
    sluice__mem_entry *e = entry_alloc(sh, algo, hash, key_len);

    if (e == NULL)
        return NULL;
    atomic_store_explicit(&e->next, NULL, memory_order_relaxed);
    e->hash = hash;
    atomic_store_explicit(&e->last_ms, now_ms, memory_order_relaxed);
    e->base_ms = now_ms;
    sluice__mem_cold_of(e)->idle_at_ms = 0;
    sluice__mem_cold_of(e)->retired = NULL;
    sluice__algos[algo]->init(sluice__mem_entry_state(e));
    if (key_len > 0)
        memcpy(e->data, key, key_len);
    return e;
}

/* Puts 'e' (unlinked, its word SLUICE__MEM_WORD_HELD) on the shard's retired
 * list. */
static void entry_retire(sluice__mem_store *m, sluice__mem_shard *sh,
                         sluice__mem_entry *e)
{
    sluice__mem_cold_of(e)->idle_at_ms = sluice__epoch_now(&m->epoch);
    sluice__mem_cold_of(e)->retired = sh->retired;
    sh->retired = e;
    retired_note(sh, sluice__mem_cold_of(e)->idle_at_ms);
}

/*
 * Unlinks '*link' (an entry of 'sh') and retires it: lock-free readers may
 * still hold it, so it is freed only after a grace period
 * (sluice__mem_reclaim()). Its word is SLUICE__MEM_WORD_HELD first, so none
 * of them changes it any more.
 */
void sluice__mem_entry_remove(sluice__mem_store *m, sluice__mem_shard *sh,
                              sluice__mem_link *link)
{
    sluice__mem_entry *e = *link;

    atomic_store(&e->word, SLUICE__MEM_WORD_HELD);
    *link = atomic_load(&e->next);
    sh->bytes -= sluice__mem_entry_bytes(e);
    sh->count--;
    atomic_fetch_sub(&m->keys, 1);
    sh->freed += sluice__algos[e->algo]->bytes(sluice__mem_entry_state(e));
    sluice__algos[e->algo]->release(sluice__mem_entry_state(e));
    entry_retire(m, sh, e);
}

/*
 * Room for a copy of 'e' that 'entry_move' wants: a free cell of 't' if it
 * has one for it, else a block of its own; NULL if 'e' already has one
 * (a copy would gain nothing) or memory is short.
 */
static sluice__mem_entry *move_room(sluice__mem_entry *e, sluice__mem_table *t)
{
    sluice__mem_entry *n = cell_fits((sluice_algo)e->algo, e->key_len)
                   ? cell_take(t, e->hash)
                   : NULL;

    if (n != NULL || !e->in_cell)
        return n;
    return entry_block((sluice_algo)e->algo, e->key_len);
}

/*
 * Copies 'e' (its word SLUICE__MEM_WORD_HELD) into room 'n' (from entry_alloc()
 * or move_room(), its 'in_cell' set): all but the word, left
 * SLUICE__MEM_WORD_HELD, and the link, left NULL.
 */
static void entry_copy(sluice__mem_entry *n, sluice__mem_entry *e)
{
    size_t size = sluice__mem_entry_size((sluice_algo)e->algo, e->key_len);

    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    n->hash = e->hash;
    atomic_store_explicit(&n->last_ms, atomic_load(&e->last_ms),
                          memory_order_relaxed);
    n->base_ms = e->base_ms;
    n->key_len = e->key_len;
    n->algo = e->algo;
    /* The key, the cold part and the state. */
    memcpy(n->data, e->data, size - sizeof(sluice__mem_entry));
    sluice__mem_cold_of(n)->retired = NULL;
}

/*
 * Puts a copy of '*link' in its place, with its word 'word' relative to a
 * new base 'base_ms', and retires the old one, whose word stays
 * SLUICE__MEM_WORD_HELD (so a lock-free reader that holds it takes the locked
 * path, and finds the copy). A failed allocation leaves the entry as it was.
 */
void sluice__mem_entry_rebase(sluice__mem_store *m, sluice__mem_shard *sh,
                              sluice__mem_link *link, uint64_t base_ms,
                              uint64_t word)
{
    sluice__mem_entry *e = *link;
    sluice__mem_entry *n =
        entry_alloc(sh, (sluice_algo)e->algo, e->hash, e->key_len);

    if (n == NULL)
        return;
    entry_copy(n, e);
    atomic_store_explicit(&n->next, atomic_load(&e->next),
                          memory_order_relaxed);
    n->base_ms = base_ms;
    atomic_store(&n->word, word); /* a cell's readers may see it from now */
    *link = n;
    entry_retire(m, sh, e);
}

/* ---- Shards ---------------------------------------------------------------- */

sluice__mem_link *sluice__mem_shard_find(sluice__mem_shard *sh, uint64_t hash,
                                         sluice_algo algo, const char *key,
                                         size_t key_len)
{
    sluice__mem_link *link = &sh->buckets[hash & (sh->nbuckets - 1)].head;

    for (; *link != NULL; link = &(*link)->next)
        if (sluice__mem_entry_is(*link, hash, algo, key, key_len))
            return link;
    return link;
}

/*
 * Whether entry 'e', whose noted idle time has come, is idle. A word's state
 * may have moved on without the lock: its idle time is read from the word
 * and noted, and an idle word is taken (SLUICE__MEM_WORD_HELD) so that no
 * lock-free call counts on it while it goes.
 */
static bool entry_idle_word(sluice__mem_entry *e, uint64_t now_ms)
{
    const sluice__algo *algo = sluice__algos[e->algo];
    _Alignas(8) unsigned char state[SLUICE__MEM_STATE_MAX];
    uint64_t w = atomic_load(&e->word), idle_at;

    if (atomic_load(&e->last_ms) > now_ms)
        return false;
    if (algo->word == NULL || w == SLUICE__MEM_WORD_HELD)
        return true; /* the struct holds the state: idle_at_ms is exact */
    algo->word->load(w, e->base_ms, state);
    idle_at = algo->idle_at(state, NULL);
    if (idle_at > now_ms) {
        sluice__mem_cold_of(e)->idle_at_ms = idle_at;
        return false;
    }
    return atomic_compare_exchange_strong(&e->word, &w, SLUICE__MEM_WORD_HELD);
}

/* Whether 'e' (its shard held) is idle at 'now_ms': its budget whole
   again. If so, a word is SLUICE__MEM_WORD_HELD after: the caller removes
   it. */
static bool entry_idle(sluice__mem_entry *e, uint64_t now_ms)
{
    return sluice__mem_cold_of(e)->idle_at_ms <= now_ms &&
           entry_idle_word(e, now_ms);
}

/*
 * Forgets the entry of ('hash', 'algo', 'key'), as a reset: 1 if it still
 * counted (not idle, as a server's key that has not expired yet), 0 if
 * there was none or it was idle (it goes too, as the sweep would take it).
 */
int sluice__mem_forget(sluice__mem_store *m, uint64_t hash, sluice_algo algo,
                       const char *key, size_t key_len)
{
    sluice__mem_shard *sh = sluice__mem_shard_of(m, hash);
    uint64_t now_ms = m->clock_ms(m->clock_payload);
    sluice__mem_link *link;
    int counted = 0;

    pthread_mutex_lock(&sh->lock);
    link = sluice__mem_shard_find(sh, hash, algo, key, key_len);
    if (*link != NULL) {
        counted = !entry_idle(*link, now_ms);
        sluice__mem_entry_remove(m, sh, link);
    }
    pthread_mutex_unlock(&sh->lock);
    return counted;
}

/*
 * Drops the idle entries of bucket 'b', unless its bound says there are none,
 * and sets the bound again from the entries that remain.
 */
static void sweep_bucket(sluice__mem_store *m, sluice__mem_shard *sh, size_t b,
                         uint64_t now_ms)
{
    sluice__mem_bucket *bk = &sh->buckets[b];
    sluice__mem_link *link = &bk->head;
    uint64_t lo = UINT64_MAX;

    sh->swept++;
    if (bk->idle_lo_ms > now_ms)
        return;
    while (*link != NULL) {
        sluice__mem_entry *e = *link;

        if (entry_idle(e, now_ms)) {
            sluice__mem_entry_remove(m, sh, link);
            sh->expired++;
        } else {
            if (sluice__mem_cold_of(e)->idle_at_ms < lo)
                lo = sluice__mem_cold_of(e)->idle_at_ms;
            link = &e->next;
        }
    }
    bk->idle_lo_ms = lo;
}

/* Keeps the bounds of the bucket holding 'e', and of its shard, at or
   below 'e's idle time. */
void sluice__mem_bucket_note(sluice__mem_shard *sh, sluice__mem_entry *e)
{
    sluice__mem_bucket *bk = &sh->buckets[e->hash & (sh->nbuckets - 1)];
    uint64_t idle_at = sluice__mem_cold_of(e)->idle_at_ms;

    if (idle_at < bk->idle_lo_ms)
        bk->idle_lo_ms = idle_at;
    if (idle_at < sh->cap_lo_ms)
        sh->cap_lo_ms = idle_at;
    if (idle_at < atomic_load_explicit(sh->lo_ms, memory_order_relaxed))
        atomic_store_explicit(sh->lo_ms, idle_at, memory_order_relaxed);
}

static void shard_shrink(sluice__mem_store *m, sluice__mem_shard *sh);

/*
 * Sweeps the next 'n' buckets of 'sh' from its cursor; at the end of each
 * pass over the table, shrinks it if it has grown sparse. Nothing while the
 * store's trimming thread trims: a later call sweeps instead.
 */
void sluice__mem_sweep_some(sluice__mem_store *m, sluice__mem_shard *sh,
                            unsigned n, uint64_t now_ms)
{
    /* Its frees would wait for the arena that the trimming thread holds. */
    if (sluice__mem_trimming(m))
        return;
    for (unsigned i = 0; i < n; i++) {
        sweep_bucket(m, sh, sh->sweep_cursor, now_ms);
        sh->sweep_cursor = (sh->sweep_cursor + 1) & (sh->nbuckets - 1);
        if (sh->sweep_cursor == 0) {
            shard_shrink(m, sh);
            break;
        }
    }
    sluice__mem_reclaim(m, sh);
}

_Thread_local unsigned sluice__mem_sweep_calls
    __attribute__((tls_model("initial-exec")));

/* A step of the store-wide sweep (sluice__mem_sweep_other() in mem.h). */
void sluice__mem_sweep_other_step(sluice__mem_store *m, uint64_t now_ms)
{
    static _Thread_local unsigned next;
    sluice__mem_shard *sh;

    sh = &m->shards[next++ % SLUICE__MEM_SHARDS].s;
    if (pthread_mutex_trylock(&sh->lock) != 0)
        return;
    sluice__mem_sweep_some(m, sh, SLUICE__MEM_SWEEP_OTHER_BUCKETS, now_ms);
    pthread_mutex_unlock(&sh->lock);
    sluice__mem_trim(m);
}

static void sweep_all(sluice__mem_store *m, sluice__mem_shard *sh,
                      uint64_t now_ms)
{
    for (size_t b = 0; b < sh->nbuckets; b++)
        sweep_bucket(m, sh, b, now_ms);
}

/* 'n' cells (at least a page's worth), all free; or NULL. */
static sluice__mem_cells *cells_new(size_t n)
{
    sluice__mem_cells *c = malloc(sizeof(*c));
    void *base;

    if (c == NULL)
        return NULL;
    base = mmap(NULL, n * SLUICE__MEM_CELL_SIZE, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        free(c);
        return NULL;
    }
    c->base = base;
    c->n = n;
    c->used = 0;
    c->orphan = false;
    for (size_t i = 0; i < n; i++) {
        sluice__mem_entry *e = sluice__mem_cell_at(c->base, i);

        atomic_init(&e->word, SLUICE__MEM_WORD_HELD);
        e->algo = SLUICE__MEM_CELL_FREE;
        *sluice__mem_cell_owner(e) = c;
    }
    return c;
}

/*
 * A table of 'n' buckets, with cells if 'with_cells' (and memory allows:
 * a table without them only costs the lock-free path a miss).
 */
sluice__mem_table *sluice__mem_table_new(size_t n, bool with_cells)
{
    size_t size = sizeof(sluice__mem_table) + n * sizeof(sluice__mem_bucket);
    sluice__mem_table *t = aligned_alloc(64, (size + 63) & ~(size_t)63);

    if (t == NULL)
        return NULL;
    t->n = n;
    t->retired = NULL;
    t->retired_epoch = 0;
    t->cells = with_cells ? cells_new(n >> SLUICE__MEM_CELLS_SHIFT) : NULL;
    t->cell_base = t->cells != NULL ? t->cells->base : NULL;
    t->cell_n = t->cells != NULL ? t->cells->n : 0;
    for (size_t b = 0; b < n; b++) {
        atomic_init(&t->b[b].head, NULL);
        t->b[b].idle_lo_ms = UINT64_MAX;
    }
    return t;
}

/* Frees table 't' of 'sh'; its cells too, unless entries still live in
   them (the last of them to be freed frees them then). */
void sluice__mem_table_free(sluice__mem_shard *sh, sluice__mem_table *t)
{
    sh->freed += sizeof(sluice__mem_table) + t->n * sizeof(sluice__mem_bucket);
    if (t->cells != NULL) {
        t->cells->orphan = true;
        if (t->cells->used == 0)
            cells_free(sh, t->cells);
    }
    free(t);
}

/*
 * Whether a table of 'n' buckets for the entries of 'sh' gets cells: when
 * it is not small, and most of its entries are of algorithms that use them
 * (cells cost SLUICE__MEM_CELL_SIZE bytes a bucket, used or not).
 */
static bool cells_pay(sluice__mem_shard *sh, size_t n)
{
    size_t fit = 0;

    if (n < SLUICE__MEM_CELLS_MIN_BUCKETS)
        return false;
    for (size_t b = 0; b < sh->nbuckets; b++)
        for (sluice__mem_entry *e = sh->buckets[b].head; e != NULL; e = e->next)
            fit += cell_fits((sluice_algo)e->algo, e->key_len);
    return fit * 2 > sh->count;
}

/*
 * Moves entry 'e' of 'sh' into a cell of the new table 't' if one is free
 * for it; out of the old table's cells into a block of its own if not (so
 * that they can go). Its word is taken (a lock-free call on the old entry
 * then fails its swap, and locks, and waits for the new table) and copied
 * with the state, and the old entry is retired. Answers the entry to link.
 */
static sluice__mem_entry *entry_move(sluice__mem_store *m,
                                     sluice__mem_shard *sh,
                                     sluice__mem_entry *e, sluice__mem_table *t)
{
    sluice__mem_entry *n = move_room(e, t);
    uint64_t w;

    if (n == NULL)
        return e;
    w = atomic_exchange(&e->word, SLUICE__MEM_WORD_HELD);
    /* After the exchange: every time a word was written at is in it. */
    entry_copy(n, e);
    if (w != SLUICE__MEM_WORD_HELD)
        atomic_store_explicit(&n->word, w, memory_order_relaxed);
    sh->bytes -= sluice__mem_entry_bytes(e);
    sh->bytes += sluice__mem_entry_bytes(n);
    entry_retire(m, sh, e);
    return n;
}

/*
 * Moves the entries of 'sh' into a table of 'n' buckets (a power of two),
 * into its cells those that fit one. A failed allocation keeps the old
 * table: longer chains, or a table larger than it need be, but nothing
 * lost. Lock-free readers may be walking the old table meanwhile: a
 * relinked entry leads them into a chain of the new one, which ends too; at
 * worst they miss their key and take the locked path. The old table is
 * retired, not freed; an entry that moved to a cell is retired too.
 */
static void shard_resize(sluice__mem_store *m, sluice__mem_shard *sh, size_t n)
{
    sluice__mem_table *t = sluice__mem_table_new(n, cells_pay(sh, n));
    sluice__mem_table *old = sluice__mem_table_of_tag(atomic_load(&sh->table));
    uint64_t lo = UINT64_MAX;

    if (t == NULL)
        return;
    for (size_t b = 0; b < sh->nbuckets; b++) {
        sluice__mem_entry *e = sh->buckets[b].head;

        while (e != NULL) {
            sluice__mem_entry *next = e->next;
            sluice__mem_bucket *nb = &t->b[e->hash & (n - 1)];

            e = entry_move(m, sh, e, t);
            e->next = nb->head;
            nb->head = e;
            if (sluice__mem_cold_of(e)->idle_at_ms < nb->idle_lo_ms)
                nb->idle_lo_ms = sluice__mem_cold_of(e)->idle_at_ms;
            if (sluice__mem_cold_of(e)->idle_at_ms < lo)
                lo = sluice__mem_cold_of(e)->idle_at_ms;
            e = next;
        }
    }
    sh->bytes += n * sizeof(sluice__mem_bucket);
    sh->bytes -= sh->nbuckets * sizeof(sluice__mem_bucket);
    if (t->cells != NULL)
        sh->bytes += sluice__mem_cells_bytes(t->cells->n);
    atomic_store(&sh->table, sluice__mem_table_tag(t));
    old->retired_epoch = sluice__epoch_now(&m->epoch);
    old->retired = sh->retired_tables;
    sh->retired_tables = old;
    retired_note(sh, old->retired_epoch);
    sh->buckets = t->b;
    sh->nbuckets = n;
    sh->sweep_cursor = 0;
    /* The new table's bound is exact; a sweep at the cap starts it over. */
    sh->cap_cursor = 0;
    sh->cap_lo_ms = UINT64_MAX;
    atomic_store_explicit(sh->lo_ms, lo, memory_order_relaxed);
}

/*
 * Makes room before a shard's table would pass one entry per bucket: drop
 * what is idle, and double the table only if that was not enough.
 */
void sluice__mem_shard_make_room(sluice__mem_store *m, sluice__mem_shard *sh,
                                 uint64_t now_ms)
{
    if (sh->count < sh->nbuckets)
        return;
    sweep_all(m, sh, now_ms);
    if (sh->count < sh->nbuckets)
        return;
    shard_resize(m, sh, sh->nbuckets * 2);
}

/*
 * Gives memory back once a shard's keys are mostly gone: its table halves
 * while it is under an eighth full (so it never halves and doubles back in
 * turn). The old tables go to the heap once reclaimed, and the heap to the
 * system with the rest (sluice__mem_trim()).
 */
static void shard_shrink(sluice__mem_store *m, sluice__mem_shard *sh)
{
    while (sh->nbuckets > SLUICE__MEM_SHARD_MIN_BUCKETS &&
           sh->count < sh->nbuckets / 8) {
        size_t n = sh->nbuckets;

        shard_resize(m, sh, n / 2);
        if (sh->nbuckets == n)
            break; /* out of memory: keep the larger table */
    }
}

/*
 * The sweep at the cap in 'sh', from its cursor, at most 'budget' buckets;
 * at the end of the table, sets the shard's bound from what it passed (and
 * what was noted meanwhile) and starts over. Answers the buckets visited.
 */
static size_t cap_sweep(sluice__mem_store *m, sluice__mem_shard *sh,
                        uint64_t now_ms, size_t budget)
{
    size_t n = 0;

    while (n < budget) {
        size_t b = sh->cap_cursor;

        sweep_bucket(m, sh, b, now_ms);
        if (sh->buckets[b].idle_lo_ms < sh->cap_lo_ms)
            sh->cap_lo_ms = sh->buckets[b].idle_lo_ms;
        n++;
        if (++sh->cap_cursor == sh->nbuckets) {
            atomic_store_explicit(sh->lo_ms, sh->cap_lo_ms,
                                  memory_order_relaxed);
            sh->cap_cursor = 0;
            sh->cap_lo_ms = UINT64_MAX;
            break;
        }
    }
    sluice__mem_reclaim(m, sh);
    return n;
}

/*
 * When the key cap is reached: drops idle keys store-wide, at most
 * SLUICE__MEM_SWEEP_CAP_BUCKETS buckets a call (a full sweep of a million keys
 * took longer than a millisecond, and ran on every call). A shard whose bound
 * says none of its keys is idle yet is passed over for one load; the
 * others are swept from their own cursor, from the shard where the last
 * call stopped, and get an exact bound once swept to the end. So while
 * nothing is idle, a call at the cap reads the 256 bounds and sweeps
 * nothing; when keys are idle, each call sweeps a bounded part of what may
 * hold them, and the next goes on from there. A refusal (SLUICE_EFULL) then
 * means that no key was idle in what the sweeps have passed since the
 * bounds were last exact: at once, when the few shards that may hold idle
 * keys fit the budget; else a call or a few later. Called with no shard
 * lock held.
 */
void sluice__mem_sweep_store(sluice__mem_store *m, uint64_t now_ms)
{
    unsigned start = atomic_load_explicit(&m->cap_shard,
                                          memory_order_relaxed);
    size_t budget = SLUICE__MEM_SWEEP_CAP_BUCKETS;

    for (unsigned k = 0; k < SLUICE__MEM_SHARDS && budget > 0; k++) {
        unsigned i = (start + k) % SLUICE__MEM_SHARDS;
        sluice__mem_shard *sh = &m->shards[i].s;
        bool more;

        if (atomic_load_explicit(&m->shard_lo_ms[i], memory_order_relaxed) >
            now_ms)
            continue;
        pthread_mutex_lock(&sh->lock);
        budget -= cap_sweep(m, sh, now_ms, budget);
        more = sh->cap_cursor != 0; /* stopped inside this shard */
        pthread_mutex_unlock(&sh->lock);
        if (more || budget == 0) {
            atomic_store_explicit(&m->cap_shard, more ? i : i + 1,
                                  memory_order_relaxed);
            break;
        }
    }
    sluice__mem_trim(m);
}

/* Reserves one key under the cap; false when the store is full. */
bool sluice__mem_reserve_key(sluice__mem_store *m)
{
    if (atomic_fetch_add(&m->keys, 1) < m->max_keys)
        return true;
    atomic_fetch_sub(&m->keys, 1);
    return false;
}

/* Frees what 'sh' holds; no reader is left. */
void sluice__mem_shard_free(sluice__mem_store *m, sluice__mem_shard *sh)
{
    for (size_t b = 0; b < sh->nbuckets; b++)
        while (sh->buckets[b].head != NULL)
            sluice__mem_entry_remove(m, sh, &sh->buckets[b].head);
    for (sluice__mem_entry *e = sh->retired, *next; e != NULL; e = next) {
        next = sluice__mem_cold_of(e)->retired;
        sluice__mem_entry_free(sh, e);
    }
    for (sluice__mem_table *t = sh->retired_tables, *next; t != NULL;
         t = next) {
        next = t->retired;
        sluice__mem_table_free(sh, t);
    }
    sluice__mem_table_free(sh,
                           sluice__mem_table_of_tag(atomic_load(&sh->table)));
}
