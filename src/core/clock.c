/*
 * clock.c - the wall clock and the virtual clock.
 */
#include "core/core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

uint64_t sluice_clock_monotonic_ms(void *payload)
{
    (void)payload;
    return sluice__monotonic_ms();
}

uint64_t sluice_clock_realtime_ms(void *payload)
{
    struct timespec ts;

    (void)payload;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct sluice_vclock {
    _Atomic uint64_t now_ms;
};

int sluice_vclock_new(sluice_vclock **out, uint64_t start_ms)
{
    sluice_vclock *clock;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "sluice_vclock_new: out is NULL");
    *out = NULL;
    clock = malloc(sizeof(*clock));
    if (clock == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a virtual clock");
    atomic_init(&clock->now_ms, start_ms);
    *out = clock;
    return SLUICE_OK;
}

void sluice_vclock_free(sluice_vclock *clock)
{
    free(clock);
}

void sluice_vclock_set(sluice_vclock *clock, uint64_t now_ms)
{
    atomic_store(&clock->now_ms, now_ms);
}

void sluice_vclock_advance(sluice_vclock *clock, uint64_t delta_ms)
{
    atomic_fetch_add(&clock->now_ms, delta_ms);
}

uint64_t sluice_vclock_now_ms(void *vclock)
{
    return atomic_load(&((sluice_vclock *)vclock)->now_ms);
}
