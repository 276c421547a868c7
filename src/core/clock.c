/*
 * clock.c - the wall clock, the monotonic clock (with a per-thread cache
 * that answers from the TSC while it knows the answer), and the virtual
 * clock.
 *
 * The monotonic clock's cache. sluice_clock_monotonic_ms() is read on every
 * decision of the embedded store, and clock_gettime() costs about half of a
 * hot-key decision on a virtual machine (the vDSO reads kvm-clock). Yet the
 * answer is a number of milliseconds, which changes once a millisecond. So
 * each thread keeps the last millisecond it read, and a TSC deadline before
 * which the clock cannot have reached the next one; until then a call is a
 * read of the TSC and a comparison.
 *
 * Why the cached answer is the clock's answer. Let a thread read the TSC,
 * t1, then the clock, ns (CLOCK_MONOTONIC, in ns), then the TSC again, t2.
 * The clock was read at an instant I with t1 <= TSC(I) <= t2; it answers
 * ms = ns / 10^6 until it reaches B = (ms + 1) * 10^6. Let 'rate' be a
 * number of TSC ticks per nanosecond of CLOCK_MONOTONIC that is at most the
 * real one. A later call reads the TSC, T, and answers 'ms' only when
 * t2 <= T < t1 + (B - ns) * rate:
 *   - T >= t2 >= TSC(I): the call comes after I, and the clock never goes
 *     back, so it reads at least ns, that is at least 'ms';
 *   - the clock has moved since I by at most (T - TSC(I)) / rate
 *     <= (T - t1) / rate < B - ns, so it reads less than B.
 * So the clock, read at the call's TSC instant, answers 'ms': the same
 * number, not a close one. The TSC is read as the vDSO reads it (an LFENCE
 * then RDTSC: not before the instructions before it), so the call's instant
 * is ordered with the reads around it, and the thread's own later reads of
 * the clock answer 'ms' or more.
 *
 * The rate. The TSC's rate against CLOCK_MONOTONIC_RAW (the clock before
 * NTP's corrections) is measured by each thread, between two readings at
 * least CAL_FIRST_NS apart and again every CAL_EVERY_NS: ticks counted from
 * the TSC read after the first reading to the one before the second, over
 * the nanoseconds between them, which is a lower bound on the rate over that
 * span. CLOCK_MONOTONIC runs at most about 1.6 times as fast as the raw
 * clock (the kernel bounds its adjustments: the tick length by 10%, the
 * frequency by 500 ppm, the phase correction by MAXPHASE, 0.5 s, a second),
 * and a few percent when a time daemon slews it. The cache takes half the
 * measured rate: it allows the clock twice the raw clock's speed. The cost
 * of so wide a margin is small: each reading covers at least half of what is
 * left of its millisecond, so a thread that calls every 30 ns reads the
 * clock about 15 times a millisecond, and answers some 30,000 calls from the
 * cache.
 *
 * When it stays off. The cache needs an x86-64 TSC that ticks at a constant
 * rate through sleep states (CPUID's invariant TSC), and the TSCs of all
 * CPUs to agree, which is what the kernel's own clock assumes when its
 * clocksource is "tsc" or "kvm-clock" (the vDSO reads the TSC of whichever
 * CPU the thread is on): with any other clocksource, or none of that, every
 * call reads the clock. Every reading checks the last: if the clock ran
 * faster than the rate allows between the two (a host that stopped the TSC
 * and not the clock), or the TSC or the clock went back (a thread moved to
 * a CPU whose TSC is behind), the cache goes off for the rest of the
 * process. Elsewhere than on Linux x86-64, there is no cache.
 *
 * What it rests on, then: that the TSCs of the CPUs agree (as the kernel's
 * own clock assumes; RDTSCP, which would name the CPU, is not on every
 * virtual CPU, so a move between CPUs is not seen as such), and that
 * CLOCK_MONOTONIC does not run more than twice as fast as the TSC's
 * measured rate says. A clock that ran faster is seen at the thread's next
 * reading of it, at most a millisecond later; TSCs that disagree, only when
 * a thread sees its TSC go back. Either turns the cache off; answers given
 * before that cannot be taken back.
 */
#include "core/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define TSC_CACHE 1
#include <cpuid.h>
#include <x86intrin.h>
#endif

#define NS_PER_MS 1000000u
#define NS_PER_S 1000000000u
#define CAL_FIRST_NS (5u * NS_PER_MS) /* the first measure of the rate */
#define CAL_EVERY_NS ((uint64_t)NS_PER_S) /* measured again this often */

static uint64_t timespec_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * NS_PER_S + (uint64_t)ts->tv_nsec;
}

/* ---- The TSC's arithmetic (pure) ------------------------------------------ */

uint64_t sluice__tsc_rate_q32(uint64_t ticks, uint64_t ns)
{
    unsigned __int128 q;

    if (ns == 0)
        return 0;
    q = ((unsigned __int128)ticks << 32) / ns;
    if (q >> 63 != 0)
        return 0; /* no TSC ticks that fast */
    return (uint64_t)q >> SLUICE__TSC_MARGIN_SHIFT;
}

uint64_t sluice__tsc_ticks_to_ms(uint64_t ns, uint64_t rate_q32)
{
    uint64_t left = NS_PER_MS - ns % NS_PER_MS; /* ns until the next ms */

    return (uint64_t)(((unsigned __int128)left * rate_q32) >> 32);
}

bool sluice__tsc_rate_held(uint64_t ticks, uint64_t ns, uint64_t rate_q32)
{
    return (unsigned __int128)ns * rate_q32 <= (unsigned __int128)ticks << 32;
}

/* ---- The monotonic clock's cache ------------------------------------------- */

#ifdef TSC_CACHE

/* One thread's cache: 'ms' answers while TSC - lo < span (unsigned, so a
   TSC below 'lo' does not answer either). */
typedef struct tsc_cache {
    uint64_t lo, span, ms;
    uint64_t cached, read;           /* answers of each kind, for tests */
    uint64_t at_tsc, at_ns;          /* the last reading: t1 and ns */
    uint64_t cal_tsc, cal_raw, cal_ns; /* the start of the rate's measure */
} tsc_cache;

static _Thread_local tsc_cache tcache
    __attribute__((tls_model("initial-exec")));

/* The rate in use (sluice__tsc_rate_q32()), 0 before the first measure. */
static _Atomic uint64_t tsc_rate;
/* 1: the cache may answer; -1: off for good (tsc_off_why says why). */
static _Atomic int tsc_state;
static const char *_Atomic tsc_off_why = "not yet known";
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

/* The TSC, read not before the instructions before it (as the vDSO does). */
static inline uint64_t tsc_now(void)
{
    _mm_lfence();
    return __rdtsc();
}

static void tsc_off(const char *why)
{
    atomic_store(&tsc_off_why, why);
    atomic_store(&tsc_state, -1);
}

/* Whether the kernel's clocksource reads the TSC (see the top). */
static bool clocksource_is_tsc(void)
{
    char name[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
                    "current_clocksource", "r");

    if (f == NULL)
        return false;
    if (fgets(name, sizeof(name), f) == NULL)
        name[0] = '\0';
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    return strcmp(name, "tsc") == 0 || strcmp(name, "kvm-clock") == 0;
}

static void tsc_init(void)
{
    unsigned a, b, c, d;
    const char *env = getenv("SLUICE_CLOCK_NO_TSC");

    if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0)
        tsc_off("SLUICE_CLOCK_NO_TSC is set");
    else if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8)))
        tsc_off("the CPU has no invariant TSC");
    else if (!clocksource_is_tsc())
        tsc_off("the kernel's clocksource is neither tsc nor kvm-clock");
    else
        atomic_store(&tsc_state, 1);
}

static bool tsc_usable(void)
{
    int state = atomic_load_explicit(&tsc_state, memory_order_relaxed);

    if (state == 0) {
        pthread_once(&tsc_once, tsc_init);
        state = atomic_load(&tsc_state);
    }
    return state > 0;
}

/*
 * Checks a reading (t1, ns, t2) against the thread's last: the TSC and the
 * clock went forward, and the clock no faster than the rate allows (over at
 * most t2 - at_tsc ticks, from the last t1 to this t2). False, and the
 * cache off for good, if not.
 */
static bool tsc_check(tsc_cache *c, uint64_t t1, uint64_t ns, uint64_t t2)
{
    uint64_t rate = atomic_load_explicit(&tsc_rate, memory_order_relaxed);

    if (c->at_ns != 0) {
        if (t1 < c->at_tsc || ns < c->at_ns) {
            tsc_off("the TSC or the clock went back");
            return false;
        }
        if (!sluice__tsc_rate_held(t2 - c->at_tsc, ns - c->at_ns, rate)) {
            tsc_off("the clock ran faster than the TSC's rate allows");
            return false;
        }
    }
    c->at_tsc = t1;
    c->at_ns = ns;
    return true;
}

/*
 * Measures the TSC's rate against the raw clock from the thread's last
 * measure, if it is CAL_FIRST_NS old (before the first rate) or CAL_EVERY_NS
 * old, and publishes it; then starts the next measure.
 */
static void tsc_calibrate(tsc_cache *c, uint64_t ns)
{
    uint64_t rate = atomic_load_explicit(&tsc_rate, memory_order_relaxed);
    uint64_t u1, u2, raw;
    struct timespec ts;

    if (c->cal_ns != 0 &&
        ns - c->cal_ns < (rate == 0 ? CAL_FIRST_NS : CAL_EVERY_NS))
        return;
    u1 = tsc_now();
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    u2 = tsc_now();
    raw = timespec_ns(&ts);
    if (c->cal_ns != 0 && u1 > c->cal_tsc && raw > c->cal_raw) {
        rate = sluice__tsc_rate_q32(u1 - c->cal_tsc, raw - c->cal_raw);
        if (rate != 0)
            atomic_store_explicit(&tsc_rate, rate, memory_order_relaxed);
    }
    c->cal_tsc = u2;
    c->cal_raw = raw;
    c->cal_ns = ns;
}

/* Reads the clock, and sets the thread's cache from it if it can. Not
   inlined: the cached answer then needs no registers saved. */
static __attribute__((noinline)) uint64_t tsc_refresh(tsc_cache *c)
{
    struct timespec ts;
    uint64_t t1, t2, ns, rate, span;

    t1 = tsc_now();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t2 = tsc_now();
    ns = timespec_ns(&ts);
    c->read++;
    c->span = 0;
    c->ms = ns / NS_PER_MS;
    if (!tsc_usable() || !tsc_check(c, t1, ns, t2))
        return c->ms;
    tsc_calibrate(c, ns);
    rate = atomic_load_explicit(&tsc_rate, memory_order_relaxed);
    span = sluice__tsc_ticks_to_ms(ns, rate);
    if (span > t2 - t1) {
        c->lo = t2;
        c->span = span - (t2 - t1);
    }
    return c->ms;
}

uint64_t sluice_clock_monotonic_ms(void *payload)
{
    tsc_cache *c = &tcache;
    uint64_t t = tsc_now();

    (void)payload;
    if (t - c->lo < c->span) {
        c->cached++;
        return c->ms;
    }
    return tsc_refresh(c);
}

void sluice__clock_stats_get(sluice__clock_stats *out)
{
    out->cached = tcache.cached;
    out->read = tcache.read;
    out->on = tsc_usable();
    out->rate_q32 = out->on ? atomic_load(&tsc_rate) : 0;
    out->off_why = out->on ? NULL : atomic_load(&tsc_off_why);
}

#else /* no TSC cache */

uint64_t sluice_clock_monotonic_ms(void *payload)
{
    (void)payload;
    return sluice__monotonic_ms();
}

void sluice__clock_stats_get(sluice__clock_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->off_why = "no TSC cache on this platform";
}

#endif /* TSC_CACHE */

/* ---- The wall clock -------------------------------------------------------- */

uint64_t sluice_clock_realtime_ms(void *payload)
{
    struct timespec ts;

    (void)payload;
    clock_gettime(CLOCK_REALTIME, &ts);
    return timespec_ns(&ts) / NS_PER_MS;
}

/* ---- The virtual clock ----------------------------------------------------- */

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
