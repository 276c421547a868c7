/*
 * epoch.c - epoch-based reclamation (epoch.h): the pool of thread slots and
 * the advance of the epoch.
 */
#define _DEFAULT_SOURCE /* syscall() */
#include "mem/epoch.h"

#include "core/core.h"

#include <pthread.h>
#include <stdint.h>
#ifdef __linux__
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

bool sluice__epoch_asymmetric;
static pthread_once_t asymmetric_once = PTHREAD_ONCE_INIT;

/*
 * Registers the process for membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
 * (Linux 4.14 and later); without it, readers fence themselves. Not under
 * ThreadSanitizer, which does not know the system call's fences.
 */
static void asymmetric_init(void)
{
#if defined(__linux__) && defined(SYS_membarrier) && \
    !defined(__SANITIZE_THREAD__)
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                0) == 0)
        sluice__epoch_asymmetric = true;
#endif
}

/*
 * With membarrier(), a full fence on every thread of the process. Without
 * it, nothing is needed: the readers' announcements, the unlinks and the
 * scan's loads are all sequentially consistent. False if membarrier() fails
 * (the epoch then does not advance: nothing is freed before the store).
 */
static bool fence_all(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    if (sluice__epoch_asymmetric)
        return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
                       0) == 0;
#endif
    return true;
}

/* Which slots threads hold (bit i: slot i), and how many were ever used. */
static _Atomic uint64_t slots_taken;
static _Atomic unsigned slots_used;
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
_Thread_local int sluice__epoch_thread_slot
    __attribute__((tls_model("initial-exec"))) = -2;

/* A thread's exit gives its slot back (its value is slot + 1). */
static void slot_release(void *value)
{
    unsigned slot = (unsigned)((uintptr_t)value - 1);

    atomic_fetch_and(&slots_taken, ~((uint64_t)1 << slot));
}

static void slot_key_create(void)
{
    if (pthread_key_create(&slot_key, slot_release) != 0)
        atomic_store(&slots_taken, UINT64_MAX); /* no slots: always lock */
}

static int slot_take(void)
{
    uint64_t taken = atomic_load(&slots_taken);
    unsigned slot, used;

    pthread_once(&slot_once, slot_key_create);
    do {
        if (taken == UINT64_MAX)
            return -1;
        slot = (unsigned)__builtin_ctzll(~taken);
    } while (!atomic_compare_exchange_weak(&slots_taken, &taken,
                                           taken | (uint64_t)1 << slot));
    if (pthread_setspecific(slot_key, (void *)(uintptr_t)(slot + 1)) != 0) {
        slot_release((void *)(uintptr_t)(slot + 1));
        return -1;
    }
    used = atomic_load(&slots_used);
    while (used < slot + 1 &&
           !atomic_compare_exchange_weak(&slots_used, &used, slot + 1))
        ;
    return (int)slot;
}

int sluice__epoch_slot_take(void)
{
    if (sluice__epoch_thread_slot == -2)
        sluice__epoch_thread_slot = slot_take();
    return sluice__epoch_thread_slot;
}

void sluice__epoch_init(sluice__epoch *ep)
{
    pthread_once(&asymmetric_once, asymmetric_init);
    atomic_init(&ep->global, 1);
    atomic_init(&ep->scan_ms, 0);
    for (unsigned i = 0; i < SLUICE__EPOCH_SLOTS; i++)
        atomic_init(&ep->slots[i].epoch, 0);
}

bool sluice__epoch_may_free(sluice__epoch *ep, uint64_t retired)
{
    unsigned used = atomic_load(&slots_used);
    uint64_t now_ms, last_ms;

    if (atomic_load(&ep->global) >= retired + 2)
        return true;
    now_ms = sluice_clock_monotonic_ms(NULL); /* its cache: no clock call */
    last_ms = atomic_load(&ep->scan_ms);
    if (last_ms == now_ms ||
        !atomic_compare_exchange_strong(&ep->scan_ms, &last_ms, now_ms))
        return false;
    /* Two advances at most: what was retired in the current epoch needs
       both. */
    for (int step = 0; step < 2; step++) {
        uint64_t e = atomic_load(&ep->global);

        if (e >= retired + 2)
            return true;
        if (!fence_all())
            return false;
        for (unsigned i = 0; i < used; i++) {
            uint64_t s = atomic_load(&ep->slots[i].epoch);

            if (s != 0 && s != e)
                return false; /* a reader of an older epoch is inside */
        }
        atomic_compare_exchange_strong(&ep->global, &e, e + 1);
    }
    return atomic_load(&ep->global) >= retired + 2;
}
