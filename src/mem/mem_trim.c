/*
 * mem_trim.c - the embedded store's memory: what it holds (its stats),
 * freeing what was unlinked once no lock-free reader can hold it, and
 * giving back to the system what it freed (mem.c's header tells the rest
 * of the design).
 *
 * Once the bytes freed to the heap since the last time are at least
 * SLUICE__MEM_TRIM_MIN_BYTES and SLUICE__MEM_TRIM_KEY_BYTES per live key, the
 * store-wide sweep's step asks the allocator to give its free memory back
 * (glibc's malloc_trim(), sluice__mem_trim()): not in the call itself, since a
 * trim that gives back hundreds of MB takes seconds (BENCHMARKS.md: 1.0 s after
 * 5 million fixed keys, 9.4 s after as many sliding-log keys), but on the
 * store's trimming thread, started the first time a trim is due (and in a
 * forked child, which has no copy of it, the first time one is due there),
 * woken with a semaphore post that never waits, and joined by the store's
 * free. The store's sweeps pause while it trims (their frees would wait for
 * the arena's lock that glibc holds meanwhile). If the thread cannot be
 * created, the call trims itself.
 */
#include "mem/mem.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* ---- Freeing what was retired ---------------------------------------------- */

/*
 * Frees what 'sh' retired before the last grace period (the lists are
 * newest first, so what may go is a tail of each). While the oldest of
 * them is not yet free, it only tries to advance the epoch: the lists'
 * entries are cold, and a walk of them on every call would miss on each.
 */
static void reclaim(sluice__mem_store *m, sluice__mem_shard *sh)
{
    sluice__mem_entry **el = &sh->retired;
    sluice__mem_table **tl = &sh->retired_tables;
    uint64_t newest, now, oldest = UINT64_MAX;

    if (*el == NULL && *tl == NULL)
        return;
    newest = *el != NULL ? sluice__mem_cold_of(*el)->idle_at_ms
                         : (*tl)->retired_epoch;
    if (*tl != NULL && (*tl)->retired_epoch > newest)
        newest = (*tl)->retired_epoch;
    sluice__epoch_may_free(&m->epoch, newest); /* advances it if it can */
    now = sluice__epoch_now(&m->epoch);
    if (now < 2 || sh->retired_oldest > now - 2)
        return; /* nothing is 2 epochs old yet */
    for (; *el != NULL && sluice__mem_cold_of(*el)->idle_at_ms + 2 > now;
         el = &sluice__mem_cold_of(*el)->retired)
        oldest = sluice__mem_cold_of(*el)->idle_at_ms;
    for (; *tl != NULL && (*tl)->retired_epoch + 2 > now; tl = &(*tl)->retired)
        if ((*tl)->retired_epoch < oldest)
            oldest = (*tl)->retired_epoch;
    for (sluice__mem_entry *e = *el, *next; e != NULL; e = next) {
        next = sluice__mem_cold_of(e)->retired;
        sluice__mem_entry_free(sh, e);
    }
    for (sluice__mem_table *t = *tl, *next; t != NULL; t = next) {
        next = t->retired;
        sluice__mem_table_free(sh, t);
    }
    *el = NULL;
    *tl = NULL;
    sh->retired_oldest = oldest;
}

/* Adds what 'sh' gave back to the heap to the store's count of it. */
static void freed_flush(sluice__mem_store *m, sluice__mem_shard *sh)
{
    if (sh->freed > 0) {
        atomic_fetch_add_explicit(&m->untrimmed, sh->freed,
                                  memory_order_relaxed);
        sh->freed = 0;
    }
}

/* At the end of a sweep of 'sh' (locked): frees what its readers have left
   and counts what that gave back to the heap. */
void sluice__mem_reclaim(sluice__mem_store *m, sluice__mem_shard *sh)
{
    reclaim(m, sh);
    freed_flush(m, sh);
}

/* ---- Trimming the heap ----------------------------------------------------- */

/*
 * The forks since this program began, along its line of descent: each
 * forked child adds one (fork_child(), run in the child, registered before
 * the first trimming thread starts). A store copied into a child so sees
 * that its trimming thread, and a trim in progress, are its parent's: they
 * are not in the child (only the thread that called fork() is).
 */
_Atomic unsigned sluice__mem_fork_gen;

static void fork_child(void)
{
    atomic_fetch_add(&sluice__mem_fork_gen, 1);
}

static void fork_watch(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

/* This process's generation (mem.h's trimmer): never 0, and a forked
   child's is its parent's plus one. */
static unsigned process_gen(void)
{
    return atomic_load(&sluice__mem_fork_gen) + 1;
}

/* Gives the heap's free memory back to the system, where the C library
   can (glibc keeps freed small blocks, and the pages under them). */
static void heap_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/*
 * The trimming thread of store 'arg': a trim for each post of its 'wake',
 * with no lock of the store held, until it wakes to the stop flag. While it
 * trims, 'busy' says so, and the store's sweeps leave their work to a later
 * call (sluice__mem_sweep_some()).
 */
static void *trimmer_run(void *arg)
{
    sluice__mem_store *m = arg;
    sluice__mem_trimmer *t = &m->trimmer;
    unsigned gen = process_gen();

    for (;;) {
        if (sem_wait(&t->wake) != 0)
            continue; /* EINTR */
        if (atomic_load(&t->stop))
            return NULL;
        atomic_store(&t->busy, gen);
        heap_trim();
        atomic_store(&t->busy, 0);
        atomic_fetch_add_explicit(&m->trims, 1, memory_order_relaxed);
    }
}

/*
 * Starts the trimming thread of 'm' in this process, with every signal
 * blocked in it (signals are the program's, for threads of its own). In a
 * forked child the parent's thread is not there, and no thread waits on
 * the semaphore the child inherited: it is made again. False if the thread
 * cannot be created.
 */
static bool trimmer_start(sluice__mem_store *m)
{
    static pthread_once_t watch = PTHREAD_ONCE_INIT;
    sluice__mem_trimmer *t = &m->trimmer;
    sigset_t all, old;
    int err;

    pthread_once(&watch, fork_watch);
    if (t->wake_made)
        sem_destroy(&t->wake);
    t->wake_made = sem_init(&t->wake, 0, 0) == 0;
    if (!t->wake_made)
        return false;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&t->thread, NULL, trimmer_run, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err == 0;
}

/*
 * Hands a trim that is due, for 'bytes' freed, to the trimming thread of
 * 'm', and starts the thread first if it does not run in this process yet
 * (the first trim due; or the first in a forked child, which has none).
 * A post of a semaphore: the caller never waits for the thread. While
 * another call starts it, the bytes go back to the count, and a later call
 * hands them over. False if the thread cannot be created: the caller trims
 * itself (and the next trim due tries to start it again).
 */
static bool trimmer_wake(sluice__mem_store *m, uint64_t bytes)
{
    sluice__mem_trimmer *t = &m->trimmer;
    unsigned running = process_gen() << 1;
    unsigned s = atomic_load(&t->state);

    if (s != running) {
        if (s == (running | 1) ||
            !atomic_compare_exchange_strong(&t->state, &s, running | 1)) {
            atomic_fetch_add_explicit(&m->untrimmed, bytes,
                                      memory_order_relaxed);
            return true; /* another thread of this process starts it */
        }
        if (!trimmer_start(m)) {
            atomic_store(&t->state, s);
            return false;
        }
        atomic_store(&t->state, running);
    }
    return sem_post(&t->wake) == 0;
}

/*
 * Asks the allocator to give its free memory back to the system, once the
 * bytes freed since the last time are at least SLUICE__MEM_TRIM_MIN_BYTES and
 * at least SLUICE__MEM_TRIM_KEY_BYTES per key still held. malloc_trim() walks
 * the heap's free chunks (about one per live block, at worst) and returns the
 * pages of what was freed, so a trim costs about the live keys plus what was
 * freed, which that rule has already paid for: trims come a geometric series
 * apart while a mass of keys goes (half, a quarter, ... of it each), and
 * at most once per SLUICE__MEM_TRIM_MIN_BYTES freed when few keys are held.
 * Counting bytes, not time, keeps it off the clock: what a store gives back
 * does not depend on how fast its caller runs.
 *
 * The trim itself is not the caller's: one that gives back hundreds of MB
 * takes a second or more. The caller hands it to the store's trimming
 * thread (trimmer_wake()) and returns; only if that thread cannot be
 * created does the caller trim, as a last resort. While the thread trims,
 * glibc holds the lock of each arena it trims, so a thread that allocates
 * or frees in that arena meanwhile (past its thread cache) waits for it;
 * the store's own sweeps, whose frees would, wait for a later call instead
 * (sluice__mem_sweep_some()). Called with no shard lock held (after a
 * store-wide sweep step, or the sweep at the cap).
 */
void sluice__mem_trim(sluice__mem_store *m)
{
    uint64_t u = atomic_load_explicit(&m->untrimmed, memory_order_relaxed);

    if (u < SLUICE__MEM_TRIM_MIN_BYTES ||
        u < (uint64_t)atomic_load_explicit(&m->keys, memory_order_relaxed) *
                SLUICE__MEM_TRIM_KEY_BYTES ||
        !atomic_compare_exchange_strong(&m->untrimmed, &u, 0))
        return;
    if (trimmer_wake(m, u))
        return;
    heap_trim();
    atomic_fetch_add_explicit(&m->trims_inline, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->trims, 1, memory_order_relaxed);
}

/*
 * Stops and joins the trimming thread of 'm', if it runs in this process.
 * It reads the stop flag each time it wakes, so this waits at most for a
 * trim in progress to finish (trims still due are dropped). A forked
 * child's copy of the store has no thread to join (the parent's is not in
 * the child, and the child never started one).
 */
void sluice__mem_trimmer_stop(sluice__mem_store *m)
{
    sluice__mem_trimmer *t = &m->trimmer;

    if (atomic_load(&t->state) == process_gen() << 1) {
        atomic_store(&t->stop, true);
        sem_post(&t->wake);
        pthread_join(t->thread, NULL);
    }
    if (t->wake_made)
        sem_destroy(&t->wake);
}

/* ---- What the store holds --------------------------------------------------- */

/* The store's stats: its shards' counts, each read under its lock. */
int sluice__mem_stats(void *impl, sluice_store_stats *out)
{
    sluice__mem_store *m = impl;

    out->bytes = sizeof(*m);
    for (unsigned i = 0; i < SLUICE__MEM_SHARDS; i++) {
        sluice__mem_shard *sh = &m->shards[i].s;

        pthread_mutex_lock(&sh->lock);
        out->keys += sh->count;
        out->bytes += sh->bytes;
        out->expired += sh->expired;
        pthread_mutex_unlock(&sh->lock);
    }
    out->full = atomic_load(&m->full);
    return SLUICE_OK;
}
