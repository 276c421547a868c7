/*
 * test_valkey_compact.c - the compact log's script against the sliding
 * log's, on a real redis-server, and what its key costs there.
 *
 *   - One Valkey store on a virtual clock (?clock=caller) asks every step of
 *     a seeded random trace twice, as sliding-log and as compact-log (keys
 *     of their own): hits, peeks and resets, costs from 1 to max, bursts at
 *     one instant, jumps to exactly when a past request leaves (and a ms
 *     either side), keys asked under another max. Every field of every
 *     decision must be the same. Windows are a minute or more of virtual
 *     time, so no key expires in real time while the test runs.
 *   - N units admitted (N in the span): the string is exactly 16 + 8N
 *     bytes. MEMORY USAGE may be up to twice that: Redis allocates a string
 *     that SETRANGE extends to twice its new length (below 1 MB; 1 MB more
 *     above), rounded up to the allocator's size class (at most a quarter
 *     more). It must stay under a fifth of the sliding log's sorted set,
 *     which is printed beside it.
 *   - A decision on a key of 100,000 live units costs the server about
 *     what one on a key of 100 does (INFO commandstats): no command reads
 *     or writes the whole ring.
 *
 * Usage: test_valkey_compact [SEED] (or SLUICE_TEST_SEED=N).
 */
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

typedef struct world {
    sluice_vclock *clock;
    sluice_store *store;
} world;

static void world_open(world *w, uint64_t now_ms)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    CHECK_OK(sluice_vclock_new(&w->clock, now_ms));
    if (w->clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = w->clock;
    w->store = test_store_open(server.url,
                               "clock=caller&timeout=10000&refused_cache=off",
                               &opts);
}

static void world_close(world *w)
{
    sluice_store_free(w->store);
    sluice_vclock_free(w->clock);
}

/* ---- The two scripts on one trace ------------------------------------------ */

enum { KEYS = 10, STEPS = 4000, PRINTED = 10, PAST = 8 };

static const uint64_t maxes[] = {1, 2, 3, 5, 10, 64, 300};
static const uint64_t windows[] = {60000, 100000, 3600000};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

typedef struct trace {
    world w;
    uint64_t now;
    uint64_t past[PAST]; /* times of recent requests, any key */
    long admitted, refused, mismatches;
} trace;

/* The next gap: nothing, a few ms, part of a window, exactly a window, or
   to when a recent request leaves (and a ms either side). */
static uint64_t gap_for(trace *tr, uint64_t w)
{
    unsigned p = (unsigned)rng_below(100);
    uint64_t to;

    if (p < 35)
        return 0;
    if (p < 55)
        return rng_range(1, 3);
    if (p < 70)
        return rng_range(1, w / 4);
    if (p < 75)
        return w;
    if (p < 80)
        return rng_range(w, 3 * w);
    to = tr->past[rng_below(PAST)] + w + rng_range(0, 2) - 1;
    return to > tr->now ? to - tr->now : 0;
}

static uint64_t cost_for(uint64_t max)
{
    unsigned p = (unsigned)rng_below(100);

    if (p < 65 || max == 1)
        return 1;
    if (p < 92)
        return rng_range(1, max / 4 > 1 ? max / 4 : 1);
    return rng_range(1, max);
}

static void trace_step(trace *tr, int step)
{
    int k = (int)rng_below(KEYS);
    unsigned op = (unsigned)rng_below(100);
    sluice_limit a = SLUICE_LIMIT(SLUICE_SLIDING_LOG, maxes[k % NELEM(maxes)],
                                  windows[k % NELEM(windows)]);
    sluice_limit b;
    sluice_decision da, db;
    char key[16];
    size_t klen = (size_t)snprintf(key, sizeof(key), "k%d", k);
    uint64_t cost;
    int ra, rb;

    if (rng_pct(4))
        a.max = maxes[rng_below(NELEM(maxes))];
    b = a;
    b.algo = SLUICE_COMPACT_LOG;
    tr->now += gap_for(tr, a.window_ms);
    tr->past[rng_below(PAST)] = tr->now;
    sluice_vclock_set(tr->w.clock, tr->now);
    cost = cost_for(a.max);

    memset(&da, 0, sizeof(da));
    memset(&db, 0, sizeof(db));
    if (op < 1) {
        ra = test_reset_rc(sluice_reset(tr->w.store, &a, key, klen));
        rb = test_reset_rc(sluice_reset(tr->w.store, &b, key, klen));
    } else if (op < 30) {
        ra = sluice_peek(&da, tr->w.store, &a, key, klen, cost);
        rb = sluice_peek(&db, tr->w.store, &b, key, klen, cost);
    } else {
        ra = sluice_hit(&da, tr->w.store, &a, key, klen, cost);
        rb = sluice_hit(&db, tr->w.store, &b, key, klen, cost);
    }
    if (ra == SLUICE_OK && op >= 1)
        (da.allowed ? tr->admitted++ : tr->refused++);
    if (ra == rb && (ra != SLUICE_OK || decision_same(&da, &db)))
        return;
    CHECK(!"the compact-log and sliding-log scripts disagree");
    if (tr->mismatches++ >= PRINTED)
        return;
    fprintf(stderr, "    step %d: t=%" PRIu64 " op %u key %d cost %" PRIu64
            " max %" PRIu64 " window %" PRIu64 "\n", step, tr->now, op, k,
            cost, a.max, a.window_ms);
    decision_print("sliding-log", ra, &da);
    decision_print("compact-log", rb, &db);
    if (rb < 0)
        fprintf(stderr, "      %s\n", sluice_last_error());
}

static void test_scripts_agree(uint64_t seed)
{
    trace tr;
    uint64_t t0 = rs_mono_ms();

    memset(&tr, 0, sizeof(tr));
    rng_state = seed;
    tr.now = 1700000000000ULL;
    for (int i = 0; i < PAST; i++)
        tr.past[i] = tr.now;
    world_open(&tr.w, tr.now);
    test_context("the two scripts on one trace, seed %" PRIu64, seed);
    for (int step = 0; step < STEPS; step++)
        trace_step(&tr, step);
    printf("  %d steps: %ld admitted, %ld refused, %ld mismatches; %" PRIu64
           " ms\n", STEPS, tr.admitted, tr.refused, tr.mismatches,
           rs_mono_ms() - t0);
    CHECK(tr.admitted > STEPS / 4);
    CHECK(tr.refused > STEPS / 20);
    test_context(NULL);
    world_close(&tr.w);
}

/*
 * The ring wrapped when a larger max comes: it is laid out again, oldest
 * first. max 4: units at 0, 1, 2, 3; at W + 1 the first two leave and two
 * more take their slots (the ring wraps); at W + 2 the unit of 2 leaves
 * (3 live, still wrapped), and max 10 with a cost of 5 grows the ring:
 * 8 live. At W + 3 the unit of 3 has left too: 7 live, and the 7th oldest
 * (of W + 2) is the last a cost of 10 waits for. Both scripts, every
 * field.
 */
static void test_grow_wrapped(void)
{
    const uint64_t W = 100000;
    world w;
    sluice_decision d[2];

    world_open(&w, 1000);
    test_context("a wrapped ring grows");
    for (int a = 0; a < 2; a++) {
        sluice_algo algo = a == 0 ? SLUICE_SLIDING_LOG : SLUICE_COMPACT_LOG;
        sluice_limit four = SLUICE_LIMIT(algo, 4, W);
        sluice_limit ten = SLUICE_LIMIT(algo, 10, W);

        for (uint64_t t = 0; t < 4; t++) {
            sluice_vclock_set(w.clock, 1000 + t);
            CHECK_OK(sluice_hit(&d[a], w.store, &four, "g", 1, 1));
            CHECK(d[a].allowed);
        }
        sluice_vclock_set(w.clock, 1000 + W + 1);
        CHECK_OK(sluice_hit(&d[a], w.store, &four, "g", 1, 2));
        CHECK(d[a].allowed);
        sluice_vclock_set(w.clock, 1000 + W + 2);
        CHECK_OK(sluice_hit(&d[a], w.store, &ten, "g", 1, 5));
        CHECK(d[a].allowed);
        CHECK_EQ_U64(d[a].remaining, 2);
        sluice_vclock_set(w.clock, 1000 + W + 3);
        CHECK_OK(sluice_peek(&d[a], w.store, &ten, "g", 1, 10));
        CHECK_EQ_U64(d[a].allowed, 0);
        CHECK_EQ_U64(d[a].remaining, 3);
        CHECK_EQ_U64(d[a].retry_after_ms, W - 1);
        CHECK_EQ_U64(d[a].reset_after_ms, W - 1);
    }
    CHECK(decision_same(&d[0], &d[1]));
    test_context(NULL);
    world_close(&w);
}

/* ---- Memory ------------------------------------------------------------------ */

static long long key_int(const char *cmd, const char *id, const char *algo)
{
    char kbuf[128];
    size_t kl = test_key_of(kbuf, sizeof(kbuf), "sluice", id, strlen(id),
                            algo);
    const char *argv[5];
    size_t lens[5];
    redisReply *r;
    long long n = -1;

    if (strcmp(cmd, "MEMORY") == 0) {
        argv[0] = "MEMORY", lens[0] = 6;
        argv[1] = "USAGE", lens[1] = 5;
        argv[2] = kbuf, lens[2] = kl;
        /* Every element counted: a sorted set's default is an estimate
           from five, which varies with the members' lengths. */
        argv[3] = "SAMPLES", lens[3] = 7;
        argv[4] = "0", lens[4] = 1;
    } else {
        argv[0] = cmd, lens[0] = strlen(cmd);
        argv[1] = kbuf, lens[1] = kl;
    }
    r = rs_cmdargv(&server, strcmp(cmd, "MEMORY") == 0 ? 5 : 2, argv, lens);
    if (CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER))
        n = r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* Admits 'n' units into key 'id' of 'algo', 'per' at each ms. */
static void fill(world *w, sluice_algo algo, const char *id, uint64_t n,
                 uint64_t per, uint64_t max)
{
    sluice_limit l = SLUICE_LIMIT(algo, max, 3600000);
    sluice_decision d;
    uint64_t t = sluice_vclock_now_ms(w->clock);

    for (uint64_t done = 0; done < n; done += per) {
        sluice_vclock_set(w->clock, ++t);
        CHECK_OK(sluice_hit(&d, w->store, &l, id, strlen(id), per));
        CHECK(d.allowed);
    }
}

/*
 * N units in the span: the string is exactly 16 + 8N bytes; MEMORY USAGE is
 * at most 2.5 times that plus 256 bytes (see the top), and, when each
 * request is one unit, under a fifth of the sorted set's. The sorted set
 * holds one member a request, whatever its cost: at most 140 bytes each.
 */
static void test_memory(void)
{
    static const struct {
        uint64_t n, per;
    } cases[] = {{1000, 1}, {10000, 10}, {16384, 64}};
    world w;

    world_open(&w, 5000000);
    test_context("memory per unit");
    for (size_t i = 0; i < NELEM(cases); i++) {
        uint64_t n = cases[i].n;
        char id[32];
        long long len, clog, zset;

        snprintf(id, sizeof(id), "mem%" PRIu64, n);
        fill(&w, SLUICE_COMPACT_LOG, id, n, cases[i].per, n);
        fill(&w, SLUICE_SLIDING_LOG, id, n, cases[i].per, n);
        len = key_int("STRLEN", id, "compact-log");
        clog = key_int("MEMORY", id, "compact-log");
        zset = key_int("MEMORY", id, "sliding-log");
        CHECK_EQ_U64((uint64_t)len, 16 + 8 * n);
        /* Twice the string, and the allocator's size class (at most a
           quarter more), and the key's bookkeeping. */
        CHECK(clog > 0 && (uint64_t)clog <= 5 * (16 + 8 * n) / 2 + 256);
        if (cases[i].per == 1)
            CHECK(clog * 5 < zset);
        CHECK(zset > 0 && (uint64_t)zset <= 140 * (n / cases[i].per) + 512);
        printf("  N=%-6" PRIu64 " (%3" PRIu64 " a ms): compact-log string %lld "
               "B, MEMORY USAGE %lld B (%.1f B a unit); sliding-log %lld B "
               "(%.1f B a request)\n", n, cases[i].per, len, clog,
               (double)clog / (double)n, zset,
               (double)zset / (double)(n / cases[i].per));
    }
    test_context(NULL);
    world_close(&w);
}

/* ---- Cost of a decision, by size of the ring ------------------------------- */

/* The server's microseconds per EVALSHA over 'calls' hits on a full key of
   'max' units: each call lets one unit leave and admits one. CPU time
   (rs_cpu_us()) where it can be read: wall time (INFO commandstats) grows
   while a loaded machine leaves the server waiting for a core. */
static double usec_per_decision(world *w, const char *id, uint64_t max,
                                int calls)
{
    sluice_limit l = SLUICE_LIMIT(SLUICE_COMPACT_LOG, max, 1000000);
    sluice_decision d;
    uint64_t t0 = sluice_vclock_now_ms(w->clock);
    long long before_calls, cpu0, cpu1;
    redisReply *r;
    double usec = 0;

    /* max units, one a ms, over [t0, t0 + max). */
    fill(w, SLUICE_COMPACT_LOG, id, max, max / 1000 > 0 ? max / 1000 : 1,
         max);
    sluice_vclock_set(w->clock, t0 + 1000000);
    CHECK(rs_ok(&server, "CONFIG RESETSTAT") == 0);
    cpu0 = rs_cpu_us(&server);
    for (int i = 0; i < calls; i++) {
        sluice_vclock_set(w->clock, t0 + 1000001 + (uint64_t)i);
        CHECK_OK(sluice_hit(&d, w->store, &l, id, strlen(id), 1));
    }
    cpu1 = rs_cpu_us(&server);
    before_calls = rs_calls(&server, "evalsha");
    CHECK(before_calls >= calls);
    if (cpu0 >= 0 && cpu1 >= 0)
        return (double)(cpu1 - cpu0) / calls;
    r = rs_cmd(&server, "INFO commandstats");
    if (CHECK(r != NULL && r->type == REDIS_REPLY_STRING)) {
        const char *p = strstr(r->str, "cmdstat_evalsha:");
        const char *u = p != NULL ? strstr(p, "usec_per_call=") : NULL;

        if (CHECK(u != NULL))
            usec = strtod(u + strlen("usec_per_call="), NULL);
    }
    if (r != NULL)
        freeReplyObject(r);
    return usec;
}

static void test_cost_by_size(void)
{
    world w;
    double small, big;

    world_open(&w, 9000000);
    test_context("a decision's cost by the ring's size");
    small = usec_per_decision(&w, "small", 100, 2000);
    big = usec_per_decision(&w, "big", SLUICE_COMPACT_LOG_MAX, 2000);
    printf("  server %s a decision: %.2f us at max=100, %.2f us at "
           "max=%llu (live units: as many)\n",
           rs_cpu_us(&server) >= 0 ? "CPU time" : "time", small, big,
           (unsigned long long)SLUICE_COMPACT_LOG_MAX);
    /* Reading 128 kB a call would take a hundred us or more. */
    CHECK(big <= 3 * small + 20);
    test_context(NULL);
    world_close(&w);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());

    printf("test_valkey_compact: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_compact: cannot start redis-server\n");
        return 1;
    }
    printf("  server %s (pid %d)\n", server.url, (int)server.pid);
    test_scripts_agree(seed);
    test_grow_wrapped();
    test_memory();
    test_cost_by_size();
    rs_stop(&server);
    return test_summary("test_valkey_compact");
}
