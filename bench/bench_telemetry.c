/*
 * bench_telemetry.c - what the "sluice.hit.refused" receipt costs the hit
 * path: with no handler attached, with one attached, and with telemetry
 * compiled out of the library (SLUICE_NO_TELEMETRY).
 *
 * The same file builds two programs. sluice_bench_telemetry links the normal
 * library and measures the first two cases in-process; it runs its twin,
 * sluice_bench_telemetry_off (linked with a library built without
 * telemetry), for the third. The cases run interleaved, several rounds, and
 * each figure is the median of its rounds, so a slow spell of a shared
 * machine spoils one round of every case rather than every round of one.
 *
 * The workload is the path the receipt is on: refused hits on one hot key of
 * the embedded store (fixed window, max 1 per hour), with a virtual clock so
 * that no clock read blurs the figures. Admitted hits, which never emit, are
 * measured beside them as a control.
 *
 * A benchmark measures; it never passes or fails. Exit 0, or 1 if the
 * library or the twin fails, 2 on a bad option.
 */
#include "sluice.h"
#include "bench_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 7
#define CALLS 2000000u

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_hit(const sluice_event *event, void *payload)
{
    (void)event;
    ++*(unsigned long long *)payload;
}

/*
 * Nanoseconds per sluice_hit() over CALLS calls on one key: refused ones
 * when 'refused', else admitted ones. -1 if the library fails.
 */
static double measure(int refused)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_limit limit = SLUICE_LIMIT(SLUICE_FIXED, refused ? 1 : SLUICE_MAX_MAX,
                          3600u * 1000u);
    sluice_vclock *clock = NULL;
    sluice_store *store = NULL;
    sluice_decision d;
    double start, ns = -1;

    if (sluice_vclock_new(&clock, 1000) < 0)
        return -1;
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = clock;
    if (sluice_store_open(&store, NULL, &opts) < 0)
        goto done;
    if (sluice_hit(&d, store, &limit, "hot", 3, 1) < 0) /* fills max 1 */
        goto done;
    start = now_s();
    for (unsigned i = 0; i < CALLS; i++)
        if (sluice_hit(&d, store, &limit, "hot", 3, 1) < 0 ||
            d.allowed == refused)
            goto done;
    ns = (now_s() - start) * 1e9 / CALLS;
done:
    sluice_store_free(store);
    sluice_vclock_free(clock);
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* The twin: one round of the compiled-out library, both workloads. */
static int child(void)
{
    double refused = measure(1), admitted = measure(0);

    if (refused < 0 || admitted < 0)
        return 1;
    printf("%.3f %.3f\n", refused, admitted);
    return 0;
}

#ifndef SLUICE_BENCH_TWIN
#define SLUICE_BENCH_TWIN ""
#endif

#ifdef SLUICE_NO_TELEMETRY
#define PROG "sluice_bench_telemetry_off"
#else
#define PROG "sluice_bench_telemetry"
#endif

static const char usage[] =
    "usage: " PROG "\n"
    "\n"
    "What the \"sluice.hit.refused\" receipt costs the hit path, in ns per\n"
    "call: refused hits on one hot key of the embedded store (and admitted\n"
    "ones, as a control) with no handler attached, with one attached, and\n"
    "with telemetry compiled out of the library, which its twin program\n"
    "sluice_bench_telemetry_off (built beside it; --child is how it is run)\n"
    "measures. Rounds interleaved, medians. No options; needs nothing but\n"
    "this build (no server). Benchmarks never fail: the exit status is 0\n"
    "whatever the figures (1 if the library or the twin fails).\n"
    "\n"
    "  --help     show this text\n";

int main(int argc, char **argv)
{
    double off_ref[ROUNDS], off_adm[ROUNDS], none_ref[ROUNDS],
        none_adm[ROUNDS], att_ref[ROUNDS], att_adm[ROUNDS];
    unsigned long long handled = 0;
    double m_off, m_none, m_att;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();
    if (argc > 1)
        return bench_usage_error(PROG, usage, "%s '%s'",
                                 argv[1][0] == '-' ? "unknown option"
                                                   : "unexpected argument",
                                 argv[1]);
#ifdef SLUICE_NO_TELEMETRY
    fprintf(stderr, "%s: this is the twin; run sluice_bench_telemetry\n",
            argv[0]);
    return 2;
#endif
    for (int r = 0; r < ROUNDS; r++) {
        FILE *p = popen(SLUICE_BENCH_TWIN " --child", "r");

        if (p == NULL || fscanf(p, "%lf %lf", &off_ref[r], &off_adm[r]) != 2) {
            fprintf(stderr, "cannot run the twin %s\n", SLUICE_BENCH_TWIN);
            if (p != NULL)
                pclose(p);
            return 1;
        }
        pclose(p);
        none_ref[r] = measure(1);
        none_adm[r] = measure(0);
        if (sluice_telemetry_attach("bench", SLUICE_EVENT_HIT_REFUSED,
                                    on_hit, &handled) < 0)
            return 1;
        att_ref[r] = measure(1);
        att_adm[r] = measure(0);
        sluice_telemetry_detach("bench");
        if (none_ref[r] < 0 || none_adm[r] < 0 || att_ref[r] < 0 ||
            att_adm[r] < 0) {
            fprintf(stderr, "the library failed: %s\n", sluice_last_error());
            return 1;
        }
    }
    printf("sluice %s: the cost of the sluice.hit.refused receipt on the hit "
           "path\n", SLUICE_VERSION);
    printf("embedded store, one hot key, virtual clock; %u calls a round, "
           "median of %d interleaved rounds\n\n", CALLS, ROUNDS);
    printf("%-34s %14s %14s\n", "", "refused hit", "admitted hit");
    m_off = median(off_ref, ROUNDS);
    m_none = median(none_ref, ROUNDS);
    m_att = median(att_ref, ROUNDS);
    printf("%-34s %11.1f ns %11.1f ns\n", "telemetry compiled out", m_off,
           median(off_adm, ROUNDS));
    printf("%-34s %11.1f ns %11.1f ns\n", "compiled in, no handler attached",
           m_none, median(none_adm, ROUNDS));
    printf("%-34s %11.1f ns %11.1f ns\n", "compiled in, one handler attached",
           m_att, median(att_adm, ROUNDS));
    printf("\nno handler / compiled out, refused: %.3fx (%+.1f ns); "
           "one handler / compiled out: %.3fx (%+.1f ns)\n",
           m_none / m_off, m_none - m_off, m_att / m_off, m_att - m_off);
    printf("handler calls: %llu (one per refused hit while attached: %llu "
           "expected)\n", handled, (unsigned long long)ROUNDS * CALLS);
    printf("Rounds, refused hit, ns (compiled out | no handler | attached):\n");
    for (int r = 0; r < ROUNDS; r++)
        printf("  %6.1f | %6.1f | %6.1f\n", off_ref[r], none_ref[r],
               att_ref[r]);
    return 0;
}
