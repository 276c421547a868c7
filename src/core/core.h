/*
 * core.h - what every part of the library shares: errors, option versions,
 * checked arithmetic, small utilities, telemetry's switch, parking, and the
 * shape of an embedded server script.
 *
 * The library's parts, each a folder of src/ with a header of its own:
 *
 *   core/    this header: errors, clocks, utilities, telemetry, parking
 *   algo/    the algorithms: one folder each, pure C and its Lua mirror
 *   store/   the store's table of functions, the calls every store
 *            answers, the embedded store, key names, and the guard (failure
 *            policy, refused-key cache) around a store on a server
 *   valkey/  the Valkey/Redis stores: one server or a cluster
 *   queue/   the job queue, its worker, and the queue limiter
 *
 * Names here are 'sluice__' (internal, not static); static names in .c files
 * carry no prefix.
 */
#ifndef SLUICE_CORE_H
#define SLUICE_CORE_H

#include "sluice.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Errors (core/error.c) ------------------------------------------------- */

/*
 * Records a printf-style detail for sluice_last_error() in this thread and
 * returns 'err', so a failure reads: return sluice__error(SLUICE_ECOST, ...).
 */
int sluice__error(int err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * Copies caller options of any version from 1 to 'current' into 'dst', which
 * holds the defaults: 'sizes[v]' is how many leading bytes version v has, so
 * an older caller's struct is never read past its end and the fields it does
 * not know keep their defaults. 'what' names the options in the message.
 */
int sluice__opts_copy(void *dst, const void *src, unsigned version,
                      const size_t *sizes, unsigned current, const char *what);

/* ---- Overflow-checked arithmetic (checked before adding, as Valkey does) --- */

static inline bool sluice__add_overflows(uint64_t a, uint64_t b, uint64_t *sum)
{
    if (a > UINT64_MAX - b)
        return true;
    *sum = a + b;
    return false;
}

static inline bool sluice__mul_overflows(uint64_t a, uint64_t b, uint64_t *prod)
{
    if (a != 0 && b > UINT64_MAX / a)
        return true;
    *prod = a * b;
    return false;
}

/* ---- Utilities (core/util.c) ----------------------------------------------- */

/* Milliseconds on the monotonic clock: for deadlines and durations. */
uint64_t sluice__monotonic_ms(void);

/*
 * The monotonic 'deadline_ms' as an absolute time on CLOCK_REALTIME, into
 * '*at': what pthread_mutex_timedlock() and pthread_cond_timedwait() take
 * (the time left is measured on the monotonic clock; a deadline passed is
 * now).
 */
struct timespec;
void sluice__realtime_at(struct timespec *at, uint64_t deadline_ms);

/* The monotonic time 'ms' from now, UINT64_MAX (never) if that overflows. */
static inline uint64_t sluice__deadline_ms(uint64_t ms)
{
    uint64_t now = sluice__monotonic_ms();

    return ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
}

/* Writes 'v' in decimal into 'buf' (at least 21 bytes, no NUL); answers the
   length. */
size_t sluice__u64_text(char *buf, uint64_t v);

/* A 64-bit mix of 'x' (multiply-xorshift): every input bit moves every
   output bit. */
uint64_t sluice__mix64(uint64_t x);

/*
 * A seeded hash of ('tag', key): eight bytes at a time through
 * sluice__mix64(). With a per-process random seed, which keys share a bucket
 * cannot be planned from outside.
 */
uint64_t sluice__hash(uint64_t seed, uint64_t tag, const char *key,
                      size_t len);

/*
 * Parses s[0..n) as a whole number in lo..hi: decimal digits only, no sign,
 * at most 19 of them. Answers 0, or -1 when it is not one.
 */
int sluice__parse_u64(const char *s, size_t n, uint64_t lo, uint64_t hi,
                      uint64_t *out);

/* 64 random bits from the kernel (getrandom), mixed with the time and the
   process id should it fail: seeds and tokens, never keys. */
uint64_t sluice__random_seed(void);

/* ---- The monotonic clock's TSC cache (core/clock.c) ------------------------ */

/* The cache takes the TSC's measured rate as 2^-SHIFT of itself: it allows
   CLOCK_MONOTONIC to run up to 2^SHIFT times as fast as the raw clock. */
#define SLUICE__TSC_MARGIN_SHIFT 1

/*
 * The rate the cache uses after counting at least 'ticks' TSC ticks over
 * 'ns' ns of the raw clock: floor(ticks * 2^32 / ns) >> MARGIN_SHIFT, ticks
 * per ns in 32.32 fixed point; 0 if 'ns' is 0 or the rate does not fit.
 */
uint64_t sluice__tsc_rate_q32(uint64_t ticks, uint64_t ns);

/* The TSC ticks, rounded down, that a clock reading 'ns' needs to reach its
   next millisecond if it ran at 'rate_q32' ticks per ns. */
uint64_t sluice__tsc_ticks_to_ms(uint64_t ns, uint64_t rate_q32);

/* Whether a clock that moved 'ns' while the TSC moved at most 'ticks' kept
   within 'rate_q32' (ns <= ticks / rate). */
bool sluice__tsc_rate_held(uint64_t ticks, uint64_t ns, uint64_t rate_q32);

/* What the calling thread's cache did, for tests and benchmarks. */
typedef struct sluice__clock_stats {
    uint64_t cached;     /* this thread's answers from the cache */
    uint64_t read;       /* this thread's readings of the clock */
    bool on;             /* whether the cache may answer in this process */
    uint64_t rate_q32;   /* the rate in use (0: not measured yet) */
    const char *off_why; /* when it is off, why */
} sluice__clock_stats;

void sluice__clock_stats_get(sluice__clock_stats *out);

/* ---- Telemetry (core/telemetry.c) ------------------------------------------ */

extern _Atomic size_t sluice__telemetry_attached;

/* True when some handler is attached: one relaxed load, or a constant 0. */
#ifdef SLUICE_NO_TELEMETRY
#define sluice__telemetry_active() 0
#else
#define sluice__telemetry_active() \
    (atomic_load_explicit(&sluice__telemetry_attached, memory_order_relaxed) != 0)
#endif

/*
 * Calls every handler attached to 'event->name' with 'event', and every one
 * attached to 'alias' with the same event named 'alias', in one pass: an
 * event's deprecated name keeps its handlers (see sluice/telemetry.h).
 */
void sluice__telemetry_emit_alias(const sluice_event *event, const char *alias);

/* ---- Parking (core/park.c) ------------------------------------------------- */

/*
 * Sleeps while '*word' reads 'seen' (or until a spurious wake-up: callers
 * loop). sluice__unpark() wakes a thread parked on 'word' using its address
 * alone, so the word's owner may have seen the change and be gone by then:
 * set the word first, then unpark.
 */
void sluice__park(_Atomic uint32_t *word, uint32_t seen);
void sluice__unpark(_Atomic uint32_t *word);

/* ---- Server scripts ---------------------------------------------------------- */

/*
 * A Lua script that a server store runs with EVALSHA. The build assembles
 * each one from its source files (cmake/embed_lua.cmake), computes its SHA1
 * and embeds both, so the library needs no files at run time and never asks
 * a server what a script's SHA1 is.
 */
typedef struct sluice__script {
    const char *name; /* "fixed", "queue_take", ... */
    const char *text; /* NUL-terminated */
    size_t len;
    const char *sha1; /* 40 lowercase hex digits */
} sluice__script;

/* Every script the library has, ending with NULL: a server store loads them
   all on its first connection. */
extern const sluice__script *const sluice__scripts[];

#endif /* SLUICE_CORE_H */
