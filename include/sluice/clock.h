/*
 * sluice/clock.h - the clocks a store reads: monotonic, wall and virtual.
 */
#ifndef SLUICE_INCLUDE_CLOCK_H
#define SLUICE_INCLUDE_CLOCK_H

#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Clocks --------------------------------------------------------------- */

/*
 * A clock answers milliseconds since its zero. Sliding-counter windows are
 * aligned to multiples of window_ms from that zero.
 *
 * The embedded store's default is the monotonic clock (CLOCK_MONOTONIC): it
 * never steps, so setting the wall clock changes no decision. On x86-64
 * Linux, sluice_clock_monotonic_ms() answers from a per-thread cache read
 * with the TSC while the clock cannot have reached its next millisecond:
 * the same answer as clock_gettime(), for less (environment variable
 * SLUICE_CLOCK_NO_TSC=1 turns the cache off). The wall clock
 * (CLOCK_REALTIME, Unix epoch) is there to pass when windows must line up
 * with it; should it step back, each key keeps its own latest time, and a
 * decision made then adds the step to its waits, so retry_after_ms and
 * reset_after_ms hold on the clock the caller reads. A server store's
 * scripts read the server's clock, or with clock=caller the wall clock by
 * default, which every process shares.
 */
typedef uint64_t (*sluice_clock_ms_fn)(void *payload);

SLUICE_EXTERN uint64_t sluice_clock_monotonic_ms(void *payload);
SLUICE_EXTERN uint64_t sluice_clock_realtime_ms(void *payload);

/*
 * A virtual clock for tests and replays: time moves only when told to. Safe
 * to read and move from many threads.
 */
typedef struct sluice_vclock sluice_vclock;

SLUICE_EXTERN int sluice_vclock_new(sluice_vclock **out, uint64_t start_ms);
SLUICE_EXTERN void sluice_vclock_free(sluice_vclock *clock);
SLUICE_EXTERN void sluice_vclock_set(sluice_vclock *clock, uint64_t now_ms);
SLUICE_EXTERN void sluice_vclock_advance(sluice_vclock *clock, uint64_t delta_ms);
/* Suitable as a store's clock, with the vclock as payload. */
SLUICE_EXTERN uint64_t sluice_vclock_now_ms(void *vclock);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_CLOCK_H */
