/*
 * main.c - sluice_bench_server: how fast a server store ("redis://")
 * decides, measured in one run beside redis-benchmark and two well-known
 * rate limiters on the same server, with the server's CPU and memory per
 * decision and per key. The files of this folder are listed in
 * bench_server.h.
 *
 * The server. Unless --store names one, the program starts its own
 * redis-server on a free loopback port in a temporary directory (--save ''
 * --appendonly no; launch.c), empties it before every case, and
 * kills it by PID however the program ends.
 *
 * The workload, the same for every implementation: every call is admitted
 * (a limit of 10^12 per 1 s window; but see the hot refused key below), on
 * one hot key or on 10,000 keys "user:N" drawn uniformly, from 1 caller or
 * from 50 concurrent callers.
 *
 *   sluice                 sluice_hit() for each algorithm, one decision
 *                          per call. 50 callers are 50 threads sharing ONE
 *                          store handle opened with ?pool=4, the library's
 *                          default: the decisions that wait while earlier
 *                          ones are with the server are combined into one
 *                          multi-key script call (up to 4 such rounds at
 *                          once), so the server sees fewer EVALSHAs than
 *                          decisions (shown per decision).
 *   sluice, hit_many x50   sluice_hit_many() for each algorithm: ONE thread
 *                          deciding batches of 50 requests (--callers), keys
 *                          drawn as above, on the same store; and, fixed
 *                          window only, 2 threads batching 25 each (the same
 *                          50 in flight, on both cores). A server store
 *                          sends a batch as one round trip and one multi-key
 *                          script call, so the server sees one EVALSHA per
 *                          batch. Shown with the 50 callers, as 50
 *                          decisions are in flight; a decision's latency is
 *                          its batch's.
 *   redis-benchmark INCR   `redis-benchmark -t incr -c C [-r 10000] --csv`:
 *                          one INCR per request, C connections served by one
 *                          event-loop thread. The floor of any limiter that
 *                          makes one round trip per decision.
 *   rate-limiter-flexible  bench/peers/rlf_bench.js: RateLimiterRedis on
 *                          ioredis, one EVALSHA per consume(); its callers
 *                          are C async loops, each with one call in flight,
 *                          pipelined on one connection (its normal use).
 *   limits                 bench/peers/limits_bench.py: Python limits'
 *                          Redis storage, FixedWindowRateLimiter and
 *                          MovingWindowRateLimiter, one EVALSHA per hit; C
 *                          threads, a pooled connection each.
 *
 * A hot refused key (50 callers, 1 hot key "user:refused", fixed window): a
 * limit of 10 per 10 minute window, spent by the warm-up calls, so every
 * timed call is refused (a refusal is a decision, not an error), with the
 * library's cache of refused keys (refused_cache=default: the server's wait
 * is remembered and the same request refused locally, with no round trip)
 * and without it (refused_cache=off: every call is an EVALSHA). These rows
 * and the hit_many rows show the server's EVALSHA calls per decision.
 *
 * Where sluice's time goes (fixed window, 10,000 keys): the same calls on
 * pools of 1, 2, 16 and 50 connections; the hot key, every call admitted,
 * without the cache of refused keys (refused_cache=off: what the cache
 * costs when it has nothing to answer); the same EVALSHA sent by bare hiredis
 * (no library) from 1 thread and from 50 threads with a connection each; a
 * bare INCR the same ways; and the EVALSHA pipelined 50 deep from one
 * thread on one connection, a ceiling for pipelining.
 *
 * For each case and run: decisions per second (the sum over callers of
 * calls / elapsed), latency of each call (median, 99th percentile), the
 * server's CPU per decision (INFO cpu before and after), the time the server
 * spent in the case's command (INFO commandstats usec_per_call, after CONFIG
 * RESETSTAT), and the client's CPU per decision (this process, or the peer's
 * own count of its timed phase, or redis-benchmark's rusage).
 *
 * Noise. The machine may have 2 cores shared by the client, the server and
 * the peers, and other work. Every case runs 'repeats' times, interleaved
 * (pass 1 runs every case once, then pass 2, ...), and each figure is the
 * median of its runs; "spread" is (max - min) / median of the rates.
 *
 * The targets the issue sets, each printed with its ratio (fixed window, 50
 * callers, 10,000 keys): sluice over redis-benchmark INCR -c 50 (>= 1x),
 * rate-limiter-flexible (>= 3x) and limits' fixed window (>= 10x) with 50
 * threads calling sluice_hit(), unpipelined; the same pipelined, from the
 * faster of the fixed window's hit_many rows (>= 2x, 3x and 10x); and the
 * hot refused key with the cache over without it (>= 10x).
 *
 * Then, without timing pressure: the server's CPU per decision from
 * commandstats (N decisions from 1 caller after CONFIG RESETSTAT: EVALSHA's
 * usec_per_call, the commands the script ran, and a bare INCR's, sent N
 * times by hiredis), and the memory of a key (MEMORY USAGE) for each
 * algorithm, the logs at 100, 1,000 and 10,000 entries.
 *
 * Last, "Server time per decision" (srvtime.c): each algorithm through the
 * native module (SLUICE.HIT), its script (EVALSHA) and the Functions
 * library (FCALL), beside a bare INCR, each sent by redis-benchmark -c 50
 * -r 1000 on the same 1000 keys: the server's usec per call
 * (commandstats), its CPU per call (INFO cpu), bytes per key (MEMORY
 * USAGE), and the ratios with their targets.
 *
 * --only picks by id: a case's (--json), "server_cpu" and "server_memory"
 * for the two measurements above, a row's of the last section
 * ("srvtime_fixed_module"; "srvtime" for all of them).
 *
 * Benchmarks measure; they never pass or fail. Exit 0 whether a target is
 * met or not (a peer that cannot run is reported, not fatal), 1 if sluice or
 * the server fails, 2 on a bad option.
 */
#include "bench_server.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SLUICE_BENCH_PEERS_DIR
#define SLUICE_BENCH_PEERS_DIR "bench/peers"
#endif

#define DEFAULT_CALLERS 50u
#define DEFAULT_POOL 4u      /* the library's default pool (valkey/store.c) */
#define DEFAULT_SECONDS 2.0
#define DEFAULT_REPEATS 3u
#define QUICK_SECONDS 0.3
#define MAX_CALLERS 512u
#define CPU_CALLS 20000u     /* decisions per commandstats measurement */
#define QUICK_CPU_CALLS 2000u

/* ---- Options ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice_bench_server [--seconds S] [--repeats N] [--quick]"
            " [--json]\n"
            "                           [--store URL] [--callers N] "
            "[--pool N] [--no-peers]\n"
            "                           [--no-diag] [--only A,B] "
            "[--peers DIR]\n"
            "                           [--python PATH] [--node PATH]\n"
            "\n"
            "Measures sluice's server store (every algorithm, 1 and N "
            "callers, a hot key\nand %u keys; sluice_hit() and batches of N "
            "by sluice_hit_many(); a hot\nrefused key with and without the "
            "cache of refused keys) beside redis-benchmark\nINCR, "
            "rate-limiter-flexible and Python limits on the same server, and "
            "the\nserver's CPU and memory per decision and per key. The "
            "sluice rows run the\nscripts (engine=lua) but one: N callers "
            "with engine=module, the native module\n(the server started "
            "here loads sluice.so), beside the same row by script.\n"
            "Then the server's time per decision of each algorithm through "
            "the module\n(SLUICE.HIT), its script (EVALSHA) and FCALL, "
            "beside a bare INCR, each sent by\nredis-benchmark -c 50 -r "
            "1000 (--quick: fewer calls).\n"
            "Needs redis-server (or $SLUICE_TEST_SERVER) and redis-benchmark "
            "(Debian's\nredis-server, redis-tools), sluice.so (built here), "
            "Python limits for\n/usr/bin/python3 (python3-limits, "
            "python3-redis) and, for the Node peer, node\nand 'npm ci' in "
            "bench/peers: bench/run_server_bench.sh installs them all. A\n"
            "reference that is missing is shown \"not available\".\n"
            "Benchmarks never fail: the exit status is 0 whatever the "
            "figures.\n"
            "\n"
            "  --seconds S    each case runs S seconds (default %.0f)\n"
            "  --repeats N    each case runs N times, interleaved; medians "
            "(default %u)\n"
            "  --quick        a smoke run: %.1f s per case, 1 run, fewer "
            "calls\n"
            "  --json         write the results as JSON to standard output\n"
            "  --store URL    use this server (redis://HOST:PORT[/DB]) "
            "instead of starting\n"
            "                 one; it is not emptied, but CONFIG RESETSTAT "
            "is sent\n"
            "  --callers N    the concurrent callers (default %u)\n"
            "  --pool N       sluice's pool of connections (default %u, the "
            "library's)\n"
            "  --no-peers     skip rate-limiter-flexible and limits\n"
            "  --no-diag      skip the \"where the time goes\" rows\n"
            "  --only A,B     run only the cases whose JSON id contains A or B "
            "(e.g. raw_;\n"
            "                 server_cpu, server_memory: the sections; "
            "srvtime: the server time\n"
            "                 per decision, srvtime_fixed_module: one of "
            "its rows)\n"
            "  --peers DIR    the peer scripts (default %s)\n"
            "  --python PATH  the Python with python3-limits (default "
            "/usr/bin/python3)\n"
            "  --node PATH    Node.js (default node)\n"
            "  --help         show this text\n",
            MANY_KEYS, DEFAULT_SECONDS, DEFAULT_REPEATS, QUICK_SECONDS,
            DEFAULT_CALLERS, DEFAULT_POOL, SLUICE_BENCH_PEERS_DIR);
}

/* Says what is wrong with the options, then the usage; answers 2. */
static int bad_option(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "sluice_bench_server: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

/* A whole number in [lo, hi] from 'v', or -1. */
static long whole(const char *v, long lo, long hi)
{
    char *end;
    long n;

    errno = 0;
    n = strtol(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < lo ||
        n > hi)
        return -1;
    return n;
}

/* The options without a value; false if 'arg' is none of them. */
static bool flag_option(options *o, const char *arg)
{
    if (strcmp(arg, "--json") == 0)
        o->json = true;
    else if (strcmp(arg, "--quick") == 0)
        o->quick = true;
    else if (strcmp(arg, "--no-peers") == 0)
        o->peers = false;
    else if (strcmp(arg, "--no-diag") == 0)
        o->diag = false;
    else
        return false;
    return true;
}

/*
 * The options with a value, at argv[*i] (advancing '*i' past the value):
 * 0 when taken, 2 when its value is wrong (said), 1 when argv[*i] is none
 * of them ('*missing' set when it is one but its value is not there).
 */
static int value_option(options *o, int argc, char **argv, int *i,
                        bool *missing)
{
    const struct { const char *name; long lo, hi; unsigned *to; } wholes[] = {
        {"--repeats", 1, MAX_REPEATS, &o->repeats},
        {"--callers", 2, MAX_CALLERS, &o->callers},
        {"--pool", 1, 1024, &o->pool},
    };
    const struct { const char *name; const char **to; } texts[] = {
        {"--store", &o->store}, {"--only", &o->only},
        {"--peers", &o->peers_dir}, {"--python", &o->python},
        {"--node", &o->node},
    };
    const char *v;
    char *end;
    long n;

    if ((v = option_value(argc, argv, i, "--seconds", missing)) != NULL) {
        errno = 0;
        o->seconds = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || errno != 0 ||
            !(o->seconds >= 0.05 && o->seconds <= 600))
            return bad_option("--seconds wants a number of seconds "
                              "from 0.05 to 600, not '%s'", v);
        return 0;
    }
    for (size_t k = 0; k < sizeof(wholes) / sizeof(wholes[0]); k++) {
        if ((v = option_value(argc, argv, i, wholes[k].name, missing)) ==
            NULL)
            continue;
        if ((n = whole(v, wholes[k].lo, wholes[k].hi)) < 0)
            return bad_option("%s wants a whole number from %ld to %ld, "
                              "not '%s'", wholes[k].name, wholes[k].lo,
                              wholes[k].hi, v);
        *wholes[k].to = (unsigned)n;
        return 0;
    }
    for (size_t k = 0; k < sizeof(texts) / sizeof(texts[0]); k++)
        if ((v = option_value(argc, argv, i, texts[k].name, missing)) !=
            NULL) {
            *texts[k].to = v;
            return 0;
        }
    return 1;
}

/*
 * Reads the options into 'o': -1 to go on, else the exit status (0 after
 * --help, 2 after a bad option). --quick sets what was not given.
 */
static int options_parse(options *o, int argc, char **argv)
{
    *o = (options){.callers = DEFAULT_CALLERS, .pool = DEFAULT_POOL,
                   .cpu_calls = CPU_CALLS, .peers = true, .diag = true,
                   .peers_dir = SLUICE_BENCH_PEERS_DIR,
                   .python = "/usr/bin/python3", .node = "node",
                   .redis_benchmark = "redis-benchmark"};
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        int status;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (flag_option(o, argv[i]))
            continue;
        if ((status = value_option(o, argc, argv, &i, &missing)) != 1) {
            if (status != 0)
                return status;
            continue;
        }
        if (missing)
            return bad_option("%s needs a value", argv[i]);
        return bad_option("unknown option '%s'", argv[i]);
    }
    if (o->seconds == 0)
        o->seconds = o->quick ? QUICK_SECONDS : DEFAULT_SECONDS;
    if (o->repeats == 0)
        o->repeats = o->quick ? 1 : DEFAULT_REPEATS;
    if (o->quick)
        o->cpu_calls = QUICK_CPU_CALLS;
    return -1;
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static report rp;
    int status;
    double t0;

    if ((status = options_parse(&rp.o, argc, argv)) >= 0)
        return status;
    rp.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    signal(SIGPIPE, SIG_IGN);
    if (keys_make(&rp.keys) < 0) {
        fprintf(stderr, "sluice_bench_server: cannot make the keys\n");
        return 1;
    }
    if (server_open(&rp.srv, rp.o.store) < 0)
        return 1;
    fprintf(stderr, "sluice_bench_server: %s %s on %s:%d; "
            "checking the references\n", rp.srv.name, rp.srv.version,
            rp.srv.host, rp.srv.port);
    tools_check(&rp);
    cases_build(&rp);
    srvtime_build(&rp);

    load_average(rp.load_before);
    t0 = now_s();
    if (cases_run(&rp) < 0 || measure_server(&rp) < 0)
        return 1;
    srvtime_run(&rp);
    server_flush(&rp.srv);
    rp.wall_s = now_s() - t0;
    load_average(rp.load_after);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    else
        fprintf(stderr, "sluice_bench_server: done in %.0f s\n", rp.wall_s);

    if (rp.o.json)
        print_json(&rp);
    else
        print_text(&rp);
    server_close(&rp.srv);
    keys_free(&rp.keys);
    return 0;
}
