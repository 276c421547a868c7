/*
 * park.c - putting a thread to sleep on a word, and waking it.
 *
 * The waker sets the word first, then wakes by address alone, so a sleeper
 * that has already seen its word change and returned (its word on a stack
 * that is gone) is never written to. On Linux this is a futex. Elsewhere,
 * or built with -DSLUICE_PARKING_LOT, a word hashes to one of a fixed table
 * of mutexes and condition variables that outlive every sleeper (a parking
 * lot); a wake-up then wakes every sleeper of that spot, and each one looks
 * at its own word again.
 */
#define _DEFAULT_SOURCE /* syscall() */

#include "core/core.h"

#if defined(__linux__) && !defined(SLUICE_PARKING_LOT)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void sluice__park(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL,
            NULL, 0);
}

void sluice__unpark(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
            0);
}

#else
#include <pthread.h>

#define SPOTS 64

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
} spots[SPOTS];
static pthread_once_t spots_once = PTHREAD_ONCE_INIT;

static void spots_init(void)
{
    for (int i = 0; i < SPOTS; i++) {
        pthread_mutex_init(&spots[i].lock, NULL);
        pthread_cond_init(&spots[i].cond, NULL);
    }
}

static unsigned spot_of(_Atomic uint32_t *word)
{
    return (unsigned)(((uintptr_t)word >> 4) % SPOTS);
}

void sluice__park(_Atomic uint32_t *word, uint32_t seen)
{
    unsigned i = spot_of(word);

    pthread_once(&spots_once, spots_init);
    pthread_mutex_lock(&spots[i].lock);
    if (atomic_load(word) == seen)
        pthread_cond_wait(&spots[i].cond, &spots[i].lock);
    pthread_mutex_unlock(&spots[i].lock);
}

void sluice__unpark(_Atomic uint32_t *word)
{
    unsigned i = spot_of(word);

    pthread_once(&spots_once, spots_init);
    pthread_mutex_lock(&spots[i].lock);
    pthread_cond_broadcast(&spots[i].cond);
    pthread_mutex_unlock(&spots[i].lock);
}
#endif
