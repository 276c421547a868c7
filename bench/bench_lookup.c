/*
 * bench_lookup.c - the embedded store's work per decision on many keys: it
 * makes KEYS keys "user:N" (one admitted hit each), then makes HITS more
 * hits on keys chosen at random among them (admitted while a key has had
 * fewer than 100), and prints what it did.
 *
 * Two uses. Under a cache simulator (bench/mem_misses.sh runs it under
 * callgrind, with --hits 0 too, to take the making away): instructions and
 * cache misses per hit, figures that do not move with the load of a shared
 * machine. And with --time, alone on a CPU (taskset -c N): the hits' time,
 * in ns per hit, on a real memory; run two builds in turn on the same CPU
 * to compare them (BENCHMARKS.md), since what one costs swings with where
 * the host puts the memory traffic from one minute to the next.
 *
 * Usage: sluice_bench_lookup [--keys N] [--hits N] [--algo NAME] [--time]
 * (defaults 100000, 500000, fixed). Exit 0, 1 if the store fails, 2 on a
 * bad option.
 */
#include "sluice.h"
#include "bench_options.h"
#include "bench_keys.h"
#include "bench_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 100 per hour: a key's few hits are all admitted, and its state (gcra's
   arrival time too, 36 s ahead per hit) outlives the run, so no key goes
   idle and is made again: every timed hit finds its key. */
#define ADMIT_MAX 100u
#define WINDOW_MS 3600000u

static const char usage[] =
    "usage: sluice_bench_lookup [--keys N] [--hits N] [--algo NAME] [--time]\n"
    "\n"
    "The embedded store's work per decision on many keys: makes N keys\n"
    "\"user:I\" (one admitted hit each), then HITS more hits on keys chosen at\n"
    "random among them, and prints what it did. Run it under callgrind\n"
    "(bench/mem_misses.sh: instructions and cache misses per hit; needs\n"
    "valgrind) or, with --time, alone on a CPU (taskset -c N) for ns per hit.\n"
    "Needs nothing but this build (no server). Exit 0, 1 if the store fails.\n"
    "\n"
    "  --keys N      keys made, 1..10000000 (default 100000)\n"
    "  --hits N      hits after that, 0..1000000000 (default 500000)\n"
    "  --algo NAME   the algorithm (default fixed)\n"
    "  --time        time the hits and print ns per hit\n"
    "  --help        show this text\n";

static int bad(const char *what, const char *arg)
{
    return bench_usage_error("sluice_bench_lookup", usage, "%s '%s'", what,
                             arg);
}

/* A whole number from 'v' into '*out' (at most 'max'); false if not one. */
static bool whole(const char *v, unsigned long max, unsigned long *out)
{
    char *end;

    errno = 0;
    *out = strtoul(v, &end, 10);
    return *v >= '0' && *v <= '9' && *end == '\0' && errno == 0 &&
           *out <= max;
}

/* What the command line asks for. */
typedef struct run {
    unsigned long keys, hits;
    sluice_algo algo;
    bool timed;
} run;

/* Reads the options into 'r': -1 if they are good, else the exit status. */
static int options(run *r, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;

        if ((v = option_value(argc, argv, &i, "--keys", &missing)) != NULL) {
            if (!whole(v, 10000000, &r->keys) || r->keys == 0)
                return bad("--keys wants 1 to 10000000, not", v);
        } else if ((v = option_value(argc, argv, &i, "--hits", &missing)) !=
                   NULL) {
            if (!whole(v, 1000000000, &r->hits))
                return bad("--hits wants 0 to 1000000000, not", v);
        } else if ((v = option_value(argc, argv, &i, "--algo", &missing)) !=
                   NULL) {
            if (sluice_algo_parse(&r->algo, v) != SLUICE_OK)
                return bad("unknown algorithm", v);
        } else if (strcmp(argv[i], "--time") == 0) {
            r->timed = true;
        } else {
            return bad(missing ? "a value is missing after" : "unknown option",
                       argv[i]);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    run r = {100000, 500000, SLUICE_FIXED, false};
    unsigned long keys, hits, admitted = 0;
    sluice_algo algo;
    sluice_store *store;
    sluice_limit limit;
    sluice_decision d;
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    bool timed;
    struct timespec t0 = {0, 0}, t1;
    keyset ks;
    int err;

    if (bench_wants_help(argc, argv)) {
        fputs(usage, stdout);
        return 0;
    }
    if ((err = options(&r, argc, argv)) >= 0)
        return err;
    keys = r.keys, hits = r.hits, algo = r.algo, timed = r.timed;
    limit = (sluice_limit)SLUICE_LIMIT(algo, ADMIT_MAX, WINDOW_MS);
    if (keyset_make(&ks, 0, keys) < 0) {
        fprintf(stderr, "sluice_bench_lookup: out of memory for keys\n");
        keyset_free(&ks);
        return 1;
    }
    if ((err = sluice_store_open(&store, "mem://", NULL)) < 0) {
        fprintf(stderr, "sluice_bench_lookup: cannot open the store: %s\n",
                sluice_last_error());
        keyset_free(&ks);
        return 1;
    }
    /* The next key is chosen, and asked for, a call ahead: a server has
       the key of the request it decides in its cache (as bench_mem.c). */
    for (unsigned long k = 0, next = pick_key(&rng, keys);
         k < keys + hits && err == SLUICE_OK; k++) {
        size_t i = k < keys ? k : next;

        if (k >= keys) {
            next = pick_key(&rng, keys);
            key_prefetch(&ks, next);
        }
        if (k == keys)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        err = sluice_hit(&d, store, &limit, key_at(&ks, i), key_len(&ks, i),
                         1);
        admitted += err == SLUICE_OK && d.allowed;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (err != SLUICE_OK)
        fprintf(stderr, "sluice_bench_lookup: sluice_hit failed: %s\n",
                sluice_last_error());
    else
        printf("%s: %lu keys made, then %lu hits on them; %lu of all "
               "admitted\n", sluice_algo_name(algo), keys, hits, admitted);
    if (err == SLUICE_OK && timed && hits > 0)
        printf("%.1f ns per hit\n",
               ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                (double)(t1.tv_nsec - t0.tv_nsec)) / (double)hits);
    sluice_store_free(store);
    keyset_free(&ks);
    return err == SLUICE_OK ? 0 : 1;
}
