/*
 * test_clock_tsc.c - the monotonic clock's TSC cache (src/core/clock.c).
 *
 *   arithmetic  the rate and the deadline, on random rates, readings and
 *               clock speeds up to twice the raw clock's: the last TSC tick
 *               the cache answers from is one at which the clock has not
 *               reached the next millisecond; and the deadline is not
 *               shorter than it need be by more than a tick or two;
 *   real clock  THREADS threads read clock_gettime(CLOCK_MONOTONIC), the
 *               cached clock, and clock_gettime again, hundreds of
 *               thousands of times over SPIN_MS ms of real time, and on
 *               until they have seen MIN_BOUNDARIES milliseconds begin
 *               (a busy machine gives them less of a CPU), each moving itself
 *               between the CPUs every few hundred reads
 *               (sched_setaffinity): the cached answer is never below the
 *               first reading nor above the second, and most answers came
 *               from the cache (where it is on);
 *   off         the same process run again with SLUICE_CLOCK_NO_TSC=1:
 *               the cache is off, says why, and every call reads the clock.
 *
 * This test spins on the real clock for about a second; it never sleeps to
 * decide anything.
 */
#define _GNU_SOURCE /* sched_setaffinity(), CPU_* */
#include "core/core.h"
#include "rng.h"
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 2
#define SPIN_MS 400u
#define MIN_BOUNDARIES 300u /* spun for until seen, on a busy machine too */
#define SPIN_MAX_MS 20000u
#define MOVE_EVERY 300u /* reads between two moves to another CPU */

static uint64_t real_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- Arithmetic --------------------------------------------------------- */

/*
 * A TSC of 'k' ticks a microsecond (exactly), measured against the raw
 * clock over 'cal_us'; a CLOCK_MONOTONIC that runs 'speed_pct' percent of
 * the raw clock's speed (at most 200); a reading of 'ns'. From the TSC read
 * before it, the cache answers for 'span' ticks: at the last of them the
 * clock has moved span * 1000 * speed_pct / (100 * k) ns, which must be
 * less than what was left of the millisecond.
 */
static void check_deadline(uint64_t k, uint64_t cal_us, uint64_t speed_pct,
                           uint64_t ns)
{
    uint64_t rate = sluice__tsc_rate_q32(k * cal_us, cal_us * 1000u);
    uint64_t left = 1000000u - ns % 1000000u;
    uint64_t span = sluice__tsc_ticks_to_ms(ns, rate);
    unsigned __int128 moved = (unsigned __int128)(span > 0 ? span - 1 : 0) *
                              1000u * speed_pct;

    test_context("k %llu cal_us %llu speed %llu%% ns %llu span %llu",
                 (unsigned long long)k, (unsigned long long)cal_us,
                 (unsigned long long)speed_pct, (unsigned long long)ns,
                 (unsigned long long)span);
    if (!(moved < (unsigned __int128)left * 100u * k))
        CHECK(!"the cache answers after the clock's next millisecond");
    /* Not needlessly short: half the rate, less rounding. */
    if (!(span + 2 >= left * k / 2000u))
        CHECK(!"the deadline is shorter than the margin makes it");
}

static void test_arithmetic(uint64_t seed)
{
    rng_state = seed;
    /* 3 ticks a ns, halved: 1.5 in 32.32. */
    CHECK_EQ_U64(sluice__tsc_rate_q32(3000000000u, 1000000000u),
                 (uint64_t)3 << 31);
    CHECK_EQ_U64(sluice__tsc_rate_q32(5, 0), 0);
    CHECK_EQ_U64(sluice__tsc_rate_q32(UINT64_MAX, 1), 0);
    /* 1.5 ticks a ns, 10 ns before a millisecond: 15 ticks. */
    CHECK_EQ_U64(sluice__tsc_ticks_to_ms(7999990u, (uint64_t)3 << 31), 15);
    CHECK_EQ_U64(sluice__tsc_ticks_to_ms(8000000u, (uint64_t)1 << 32),
                 1000000u);
    CHECK(sluice__tsc_rate_held(150, 100, (uint64_t)3 << 31));
    CHECK(!sluice__tsc_rate_held(149, 100, (uint64_t)3 << 31));
    CHECK(sluice__tsc_rate_held(0, 5, 0)); /* no rate yet: nothing to hold */
    for (int i = 0; i < 200000; i++) {
        uint64_t k = 100 + rng_below(10000);  /* 0.1 to 10 GHz */
        uint64_t cal_us = 1 + rng_below(2000000);
        uint64_t speed = 1 + rng_below(200);
        uint64_t ns = rng_next() >> 14;

        if (i % 4 == 0)
            ns -= ns % 1000000u; /* on a millisecond */
        else if (i % 4 == 1)
            ns = ns - ns % 1000000u + 999999u; /* its last ns */
        check_deadline(k, cal_us, speed, ns);
    }
    check_deadline(10100, 1, 200, 999999u);
    test_context(NULL);
}

/* ---- The real clock ----------------------------------------------------- */

typedef struct spinner {
    uint64_t seed;
    uint64_t reads, outside, cached, boundaries, moves;
} spinner;

/* Moves the calling thread to the next CPU it may run on after its own. */
static bool move_cpu(const cpu_set_t *allowed, int *next)
{
    cpu_set_t one;

    for (int i = 0; i < CPU_SETSIZE; i++) {
        int cpu = (*next + i) % CPU_SETSIZE;

        if (!CPU_ISSET(cpu, allowed))
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        *next = cpu + 1;
        return sched_setaffinity(0, sizeof(one), &one) == 0;
    }
    return false;
}

static void *spin(void *arg)
{
    spinner *s = arg;
    cpu_set_t allowed;
    sluice__clock_stats st;
    uint64_t start = real_ms(), last = 0, before;
    int next = (int)s->seed, cpu = sched_getcpu();

    sched_getaffinity(0, sizeof(allowed), &allowed);
    sluice__clock_stats_get(&st);
    before = st.cached;
    for (uint64_t a = start;
         a - start < SPIN_MS ||
         (s->boundaries < MIN_BOUNDARIES && a - start < SPIN_MAX_MS);
         s->reads++) {
        uint64_t c, b;

        a = real_ms();
        c = sluice_clock_monotonic_ms(NULL);
        b = real_ms();
        s->outside += c < a || c > b;
        s->boundaries += b != last;
        last = b;
        if (s->reads % MOVE_EVERY == MOVE_EVERY - 1 &&
            move_cpu(&allowed, &next) && sched_getcpu() != cpu) {
            cpu = sched_getcpu();
            s->moves++;
        }
    }
    sched_setaffinity(0, sizeof(allowed), &allowed);
    sluice__clock_stats_get(&st);
    s->cached = st.cached - before;
    return NULL;
}

static void test_real_clock(void)
{
    pthread_t th[THREADS];
    spinner s[THREADS];
    sluice__clock_stats st;

    memset(s, 0, sizeof(s));
    for (int i = 0; i < THREADS; i++) {
        s[i].seed = (uint64_t)i;
        CHECK(pthread_create(&th[i], NULL, spin, &s[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        printf("thread %d: %llu reads, %llu from the cache, %llu ms "
               "boundaries, %llu moves between CPUs, %llu outside\n", i,
               (unsigned long long)s[i].reads,
               (unsigned long long)s[i].cached,
               (unsigned long long)s[i].boundaries,
               (unsigned long long)s[i].moves,
               (unsigned long long)s[i].outside);
        CHECK_EQ_U64(s[i].outside, 0);
        CHECK(s[i].boundaries >= MIN_BOUNDARIES);
    }
    sluice__clock_stats_get(&st);
    if (!st.on) {
        printf("the TSC cache is off here (%s): every call read the clock\n",
               st.off_why);
        return;
    }
    printf("rate %.3f ticks/ns (half the measured)\n",
           (double)st.rate_q32 / 4294967296.0);
    for (int i = 0; i < THREADS; i++)
        CHECK(s[i].cached > s[i].reads / 2);
}

/* ---- Off ------------------------------------------------------------------ */

static void test_off_child(void)
{
    sluice__clock_stats st;
    uint64_t a, c, b;

    for (int i = 0; i < 100000; i++) {
        a = real_ms();
        c = sluice_clock_monotonic_ms(NULL);
        b = real_ms();
        if (c < a || c > b)
            CHECK(!"the uncached clock answered outside its readings");
    }
    sluice__clock_stats_get(&st);
    CHECK(!st.on);
    CHECK(st.off_why != NULL && strstr(st.off_why, "SLUICE_CLOCK_NO_TSC"));
    CHECK_EQ_U64(st.cached, 0);
    CHECK_EQ_U64(st.read, 100000);
}

static void test_off(const char *self)
{
    pid_t pid = fork();
    int status = 0;

    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("SLUICE_CLOCK_NO_TSC", "1", 1);
        execl(self, self, (char *)NULL);
        _exit(127);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    if (getenv("SLUICE_CLOCK_NO_TSC") != NULL) {
        test_off_child();
        return test_summary("test_clock_tsc (off)");
    }
    test_arithmetic(test_seed(argc, argv, 0, 1));
    test_real_clock();
    test_off("/proc/self/exe");
    return test_summary("test_clock_tsc");
}
