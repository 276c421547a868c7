/*
 * bench_transports.c - the fixed window over the three transports of one
 * server: plain TCP, TLS and a Unix socket (issue 20's bench).
 *
 * One private redis-server (sluice_launcher) listens on all three at once:
 * rs_start_tls() gives the TLS port and a Unix socket, and a "--port P"
 * after its arguments opens plain TCP beside them. So every row below talks
 * to the same process, in the same run. For each transport, one thread:
 *
 *   1 caller   sluice_hit() in a loop, one decision per round trip;
 *   batch B    sluice_hit_many() of B requests (one limit), pipelined.
 *
 * Each row is timed for --seconds, --rounds times with the transports
 * taken in turn, and the median round is printed: decisions a second (wall
 * clock) and the client's CPU per decision (CLOCK_PROCESS_CPUTIME_ID of
 * this process: the server's CPU is not in it). Every limit is a one-hour
 * window with a max no run reaches, so every hit is admitted and does the
 * whole work. The two targets of the issue are printed beside the figures,
 * met or not; a benchmark never fails on them.
 *
 *   ./build/bench/sluice_bench_transports [--seconds S] [--rounds R]
 *                                         [--batch B] [--keys K]
 */
#include "server.h"
#include "tls_certs.h"
#include "sluice.h"
#include "bench_options.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROUNDS 15
#define MAX_BATCH 10000

/* The targets: TLS pipelined at most 1.3 x TCP's client CPU per
   decision; the Unix socket at least 1.2 x TCP's decisions a second with
   one caller. */
#define TARGET_TLS_CPU_RATIO 1.3
#define TARGET_UNIX_RATE_RATIO 1.2

enum { TCP, TLS, UNIX_SOCK, NTRANSPORTS };
enum { SINGLE, BATCH, NMODES };

static const char *const transport_names[NTRANSPORTS] = {"tcp", "tls",
                                                         "unix"};

typedef struct options {
    double seconds;
    int rounds;
    size_t batch;
    size_t keys;
} options;

/* One timed run: decisions made, wall and CPU seconds. */
typedef struct sample {
    double rate;       /* decisions a second */
    double cpu_us;     /* client CPU microseconds per decision */
} sample;

static const sluice_limit limit =
    SLUICE_LIMIT(SLUICE_FIXED, 1000000000000ull, 3600000);

/* ---- Clocks --------------------------------------------------------------- */

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Measuring ------------------------------------------------------------ */

/* The keys "bench:0" ... "bench:K-1", made once. */
static char (*keys)[24];
static size_t *key_lens;

static void fail(const char *what)
{
    fprintf(stderr, "bench_transports: %s: %s\n", what, sluice_last_error());
    exit(1);
}

/*
 * Runs 'mode' on 'st' for about 'o->seconds' and returns its rate and CPU
 * per decision. Exits on any error or refusal: a figure of failed calls
 * would mean nothing.
 */
static sample measure(sluice_store *st, int mode, const options *o,
                      sluice_request *reqs)
{
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double until = w0 + o->seconds, w1;
    uint64_t decisions = 0;
    size_t next = 0;
    sample s;

    do {
        for (int i = 0; i < 64; i++) {
            if (mode == SINGLE) {
                sluice_decision d;

                if (sluice_hit(&d, st, &limit, keys[next], key_lens[next],
                               1) != SLUICE_OK)
                    fail("sluice_hit");
                if (!d.allowed)
                    fail("refused");
                next = next + 1 == o->keys ? 0 : next + 1;
                decisions++;
            } else {
                for (size_t j = 0; j < o->batch; j++) {
                    reqs[j] = (sluice_request){.key = keys[next],
                                               .key_len = key_lens[next],
                                               .cost = 1};
                    next = next + 1 == o->keys ? 0 : next + 1;
                }
                if (sluice_hit_many(st, &limit, reqs, o->batch) != SLUICE_OK)
                    fail("sluice_hit_many");
                if (!reqs[0].decision.allowed ||
                    !reqs[o->batch - 1].decision.allowed)
                    fail("refused");
                decisions += o->batch;
            }
        }
    } while ((w1 = clock_s(CLOCK_MONOTONIC)) < until);
    s.rate = (double)decisions / (w1 - w0);
    s.cpu_us = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e6 /
               (double)decisions;
    return s;
}

static int cmp_sample_rate(const void *a, const void *b)
{
    double x = ((const sample *)a)->rate, y = ((const sample *)b)->rate;

    return (x > y) - (x < y);
}

/* The round of median rate (its CPU figure goes with it). */
static sample median(sample *s, int n)
{
    qsort(s, (size_t)n, sizeof(*s), cmp_sample_rate);
    return s[n / 2];
}

/* ---- Options -------------------------------------------------------------- */

#define PROG "sluice_bench_transports"
#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage[] =
    "usage: " PROG " [--seconds S] [--rounds R] [--batch B]\n"
    "                               [--keys K]\n"
    "\n"
    "The fixed window over the three transports of one private redis-server\n"
    "it starts (plain TCP, TLS and a Unix socket, all on loopback): one\n"
    "caller's sluice_hit() in a loop, and sluice_hit_many() batches of B,\n"
    "pipelined; decisions a second and the client's CPU per decision (the\n"
    "median round), beside issue 20's two targets. Needs a redis-server\n"
    "built with TLS on PATH (or $SLUICE_TEST_SERVER) and openssl, which\n"
    "makes its test certificates. Benchmarks never fail: the exit status is\n"
    "0 whatever the figures (1 if a store fails).\n"
    "\n"
    "  --seconds S   each row runs S seconds, up to 3600 (default 2)\n"
    "  --rounds R    rounds, transports in turn, 1.." STR(MAX_ROUNDS)
    " (default 3)\n"
    "  --batch B     requests per sluice_hit_many(), 1.." STR(MAX_BATCH)
    " (default 100)\n"
    "  --keys K      keys cycled through, 1..10000000 (default 1000)\n"
    "  --help        show this text\n";

/* The value of option argv[*i] among the four, into 'o' (advancing '*i');
   0, or the exit status of a bad one (reported). */
static int take_value(options *o, int argc, char **argv, int *i)
{
    static const char *const names[] = {"--seconds", "--rounds", "--batch",
                                        "--keys"};
    const char *name = NULL, *text = NULL;
    char *end = NULL;
    bool missing = false;
    double v;

    for (size_t k = 0; k < 4 && text == NULL && !missing; k++)
        if ((text = option_value(argc, argv, i, names[k], &missing)) != NULL ||
            missing)
            name = names[k];
    if (name == NULL)
        return bench_usage_error(PROG, usage, "unknown option '%s'", argv[*i]);
    if (missing)
        return bench_usage_error(PROG, usage, "%s needs a value", name);
    v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v > 0))
        return bench_usage_error(PROG, usage, "%s '%s': not a positive "
                                 "number", name, text);
    if (name == names[0] && v <= 3600)
        o->seconds = v;
    else if (name == names[1] && v <= MAX_ROUNDS && v == (int)v)
        o->rounds = (int)v;
    else if (name == names[2] && v <= MAX_BATCH && v == (size_t)v)
        o->batch = (size_t)v;
    else if (name == names[3] && v <= 10000000 && v == (size_t)v)
        o->keys = (size_t)v;
    else
        return bench_usage_error(PROG, usage, "%s %s: out of range", name,
                                 text);
    return 0;
}

/* Parses 'argv' into 'o': -1 if it is good, else the exit status (0 for
   --help, answered). */
static int parse(options *o, int argc, char **argv)
{
    int status;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if ((status = take_value(o, argc, argv, &i)) != 0)
            return status;
    return -1;
}

/* ---- The server ----------------------------------------------------------- */

/*
 * Starts one server on TLS (s->port), a Unix socket (s->sock) and plain
 * TCP (returned), retrying with other ports if the TCP one was taken.
 */
static int start_server(rs_server *s)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = rs_free_port();
        char text[16];
        const char *extra[] = {"--port", text, NULL};

        if (port <= 0)
            break;
        snprintf(text, sizeof(text), "%d", port);
        if (rs_start_tls(s, "no", extra) == 0)
            return port;
    }
    return -1;
}

/* Prints the median of every row and the targets beside them. */
static void report(sample med[NTRANSPORTS][NMODES],
                   sample all[NTRANSPORTS][NMODES][MAX_ROUNDS],
                   const options *op)
{
    const options o = *op;
    double tls_cpu, unix_rate;

    printf("  %-9s %-10s %14s %18s\n", "transport", "mode", "decisions/s",
           "client CPU us/dec");
    for (int t = 0; t < NTRANSPORTS; t++)
        for (int m = 0; m < NMODES; m++) {
            char mode[32];

            med[t][m] = median(all[t][m], o.rounds);
            if (m == SINGLE)
                snprintf(mode, sizeof(mode), "1 caller");
            else
                snprintf(mode, sizeof(mode), "batch %zu", o.batch);
            printf("  %-9s %-10s %14.0f %18.3f\n", transport_names[t], mode,
                   med[t][m].rate, med[t][m].cpu_us);
        }
    tls_cpu = med[TLS][BATCH].cpu_us / med[TCP][BATCH].cpu_us;
    unix_rate = med[UNIX_SOCK][SINGLE].rate / med[TCP][SINGLE].rate;
    printf("\ntargets:\n");
    printf("  tls batch %zu client CPU/decision = %.2f x tcp's "
           "(target <= %.1f): %s\n", o.batch, tls_cpu, TARGET_TLS_CPU_RATIO,
           tls_cpu <= TARGET_TLS_CPU_RATIO ? "met" : "MISSED");
    printf("  unix 1 caller decisions/s = %.2f x tcp's (target >= %.1f): "
           "%s\n", unix_rate, TARGET_UNIX_RATE_RATIO,
           unix_rate >= TARGET_UNIX_RATE_RATIO ? "met" : "MISSED");
    printf("  (also: tls 1 caller CPU/decision = %.2f x tcp's, decisions/s "
           "= %.2f x)\n", med[TLS][SINGLE].cpu_us / med[TCP][SINGLE].cpu_us,
           med[TLS][SINGLE].rate / med[TCP][SINGLE].rate);
}

/* ---- Main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options o = {.seconds = 2, .rounds = 3, .batch = 100, .keys = 1000};
    sample all[NTRANSPORTS][NMODES][MAX_ROUNDS], med[NTRANSPORTS][NMODES];
    sluice_store *stores[NTRANSPORTS] = {NULL};
    char urls[NTRANSPORTS][512], version[256];
    sluice_request *reqs;
    const rs_certs *certs;
    rs_server server;
    int tcp_port;

    int status;

    if ((status = parse(&o, argc, argv)) >= 0)
        return status;
    keys = calloc(o.keys, sizeof(*keys));
    key_lens = calloc(o.keys, sizeof(*key_lens));
    reqs = calloc(o.batch, sizeof(*reqs));
    if (keys == NULL || key_lens == NULL || reqs == NULL) {
        fprintf(stderr, "bench_transports: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < o.keys; i++)
        key_lens[i] = (size_t)snprintf(keys[i], sizeof(keys[i]),
                                       "bench:%zu", i);
    if ((tcp_port = start_server(&server)) < 0 ||
        (certs = rs_certs_get()) == NULL) {
        fprintf(stderr, "bench_transports: cannot start the server\n");
        return 1;
    }
    snprintf(urls[TCP], sizeof(urls[TCP]), "redis://127.0.0.1:%d", tcp_port);
    snprintf(urls[TLS], sizeof(urls[TLS]), "%s?tls_ca=%s", server.url,
             certs->ca_cert);
    snprintf(urls[UNIX_SOCK], sizeof(urls[UNIX_SOCK]), "unix://%s",
             server.sock);
    rs_describe(&server, version, sizeof(version));
    printf("bench_transports: server %s\n", version);
    printf("one server on tcp 127.0.0.1:%d, tls 127.0.0.1:%d, unix %s\n",
           tcp_port, server.port, server.sock);
    printf("fixed window, %zu keys, one thread; %d rounds of %.1f s a row, "
           "median round\n\n", o.keys, o.rounds, o.seconds);
    for (int t = 0; t < NTRANSPORTS; t++) {
        if (sluice_store_open(&stores[t], urls[t], NULL) != SLUICE_OK) {
            fprintf(stderr, "bench_transports: %s: %s\n", urls[t],
                    sluice_last_error());
            rs_stop(&server);
            return 1;
        }
        /* Warm: connected, the script loaded, the keys made. */
        for (size_t i = 0; i < o.keys; i++) {
            sluice_decision d;

            if (sluice_hit(&d, stores[t], &limit, keys[i], key_lens[i], 1) !=
                SLUICE_OK)
                fail(urls[t]);
        }
    }
    for (int r = 0; r < o.rounds; r++)
        for (int k = 0; k < NTRANSPORTS; k++) {
            int t = (k + r) % NTRANSPORTS; /* each in turn goes first */

            for (int m = 0; m < NMODES; m++)
                all[t][m][r] = measure(stores[t], m, &o, reqs);
        }
    report(med, all, &o);
    for (int t = 0; t < NTRANSPORTS; t++)
        sluice_store_free(stores[t]);
    rs_stop(&server);
    free(reqs);
    free(keys);
    free(key_lens);
    return 0;
}
