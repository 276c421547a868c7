/*
 * epoch.h - epoch-based reclamation, for the embedded store's lock-free
 * readers (mem.c).
 *
 * A reader announces the store-wide epoch in its thread's slot before it
 * reads shared pointers, and clears the slot after. A writer unlinks what it
 * frees (so no reader that starts later can reach it), notes the epoch at
 * that moment, and frees it only once the epoch has advanced twice. The
 * epoch advances from E only when every announced slot reads E: so once it
 * reads E + 2, every reader that was inside when the epoch was E has left,
 * and none that came after could reach the unlinked memory.
 *
 *   global epoch   E           E+1           E+2
 *   writer         unlink, retire(E)                   free (E + 2 <= now)
 *   reader A       [enter E .... exit]
 *   reader B                [enter E+1 ... exit]   (never saw it: unlinked)
 *
 * The reader's fence. Announcing, then reading, needs a full fence between
 * the two (a store, then loads) on every call. Where Linux offers it, the
 * reader does without: the writer calls membarrier(), which runs a full
 * fence on every thread of the process, before it reads the slots (so a
 * slot it reads as 0 belongs to a reader whose later loads see what was
 * unlinked before); the writer scans at most once a millisecond, so that
 * system call is rare. Elsewhere the reader's store is sequentially
 * consistent.
 *
 * Threads take slots from a process-wide pool of SLUICE__EPOCH_SLOTS,
 * given back when a thread exits; a thread that finds none (more than that
 * many threads at once) gets -1, and its callers take their locked path.
 */
#ifndef SLUICE_MEM_EPOCH_H
#define SLUICE_MEM_EPOCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SLUICE__EPOCH_SLOTS 64

/* One thread's announcement, on a cache line of its own: 0 when outside. */
typedef struct sluice__epoch_slot {
    _Alignas(64) _Atomic uint64_t epoch;
} sluice__epoch_slot;

typedef struct sluice__epoch {
    _Alignas(64) _Atomic uint64_t global; /* starts at 1; 0 means outside */
    /* When the slots were last scanned: written by reclaiming threads, so
       not on the line of 'global', which every call reads. */
    _Alignas(64) _Atomic uint64_t scan_ms;
    sluice__epoch_slot slots[SLUICE__EPOCH_SLOTS];
} sluice__epoch;

/* Whether writers fence for readers (membarrier()); set by epoch_init(). */
extern bool sluice__epoch_asymmetric;

void sluice__epoch_init(sluice__epoch *ep);

/* The calling thread's slot (-2 before its first call), and the call that
   takes one. */
extern _Thread_local int sluice__epoch_thread_slot
    __attribute__((tls_model("initial-exec")));
int sluice__epoch_slot_take(void);

/* The calling thread's slot, taken on its first call; -1 if none is free.
   Inline: the lock-free path asks on every call. */
static inline int sluice__epoch_slot_of_thread(void)
{
    int slot = sluice__epoch_thread_slot;

    return slot != -2 ? slot : sluice__epoch_slot_take();
}

/* Enters a read-side section in 'slot' (which must be the thread's own). */
static inline void sluice__epoch_enter(sluice__epoch *ep, int slot)
{
    /* Acquire: what was unlinked before the epoch moved to 'e' is seen. */
    uint64_t e = atomic_load_explicit(&ep->global, memory_order_acquire);

    if (sluice__epoch_asymmetric) {
        atomic_store_explicit(&ep->slots[slot].epoch, e,
                              memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst); /* the writer fences */
    } else {
        atomic_store(&ep->slots[slot].epoch, e); /* a full fence */
    }
}

static inline void sluice__epoch_exit(sluice__epoch *ep, int slot)
{
    atomic_store_explicit(&ep->slots[slot].epoch, 0, memory_order_release);
}

/* The epoch to note on what is unlinked now. */
static inline uint64_t sluice__epoch_now(sluice__epoch *ep)
{
    return atomic_load(&ep->global);
}

/*
 * Whether memory unlinked at epoch 'retired' may be freed now; if not, tries
 * to advance the epoch first (a scan of the slots in use, at most once a
 * millisecond).
 */
bool sluice__epoch_may_free(sluice__epoch *ep, uint64_t retired);

#endif /* SLUICE_MEM_EPOCH_H */
