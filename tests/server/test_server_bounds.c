/*
 * test_server_bounds.c - no request within the documented bounds may cost
 * a server more than 10 ms, or grow its key past the algorithm's bound
 * (docs/algorithms.md, "On a server: memory and time per call").
 *
 * A real redis-server with its defaults (lua-time-limit included) and the
 * module, the Functions library loaded. For every algorithm and every
 * engine that runs it -- its script (EVALSHA), FCALL, the module
 * (SLUICE.HITMANY) -- the worst inputs the bounds allow:
 *   - a fresh key, then a request of cost max (the largest write), then
 *     one of 1 (refused), a peek of max;
 *   - a key holding many requests (LOG_REQUESTS of cost 1), then a request
 *     of max (a refusal whose k-th oldest unit is far inside the log);
 *   - for the compact log, a key made under half the largest max then hit
 *     under the largest (its ring laid out again, whole).
 * Each call's cost is the server's CPU time for it: the process CPU clock
 * of the redis-server this test started (rs_cpu_us()), read before and
 * after the call, at most 10 ms. On a shared machine the
 * server may wait seconds for a core; that is not work, and wall time
 * (what INFO commandstats and SLOWLOG count) would charge it to the call.
 * Where that clock cannot be read, INFO commandstats (reset before the
 * call) and a SLOWLOG set to 10 ms are read instead. Every decision of the
 * run counts, the calls that filled the logs too. A run with a slower
 * call is made again on fresh keys, twice at most: work that grows with
 * the input is slow every time, a moment of noise is not. After each
 * call the key is read: at most its documented size. The figures (CPU and
 * wall time of each measured call) are printed, the slowest first.
 */
#include "algo/algo.h" /* SLUICE__ALGO_N */
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LIMIT_US 10000        /* the most server time one call may take */
#define LOG_REQUESTS 3000     /* requests in the long logs */

static rs_server server;

typedef enum engine { BY_SCRIPT, BY_FCALL, BY_MODULE, ENGINE_N } engine;
static const char *const engine_names[ENGINE_N] = {"script", "fcall",
                                                   "module"};
/* The command whose server time a decision by each engine is. */
static const char *const engine_cmds[ENGINE_N] = {"evalsha", "fcall",
                                                  "sluice.hitmany"};

typedef struct world {
    sluice_store *store[ENGINE_N]; /* the script's and the module's; FCALL
                                      talks to the server itself */
    bool runs[ENGINE_N][SLUICE__ALGO_N];
} world;

typedef struct figure {
    char what[96];
    long long us;      /* the server's CPU time, or its wall time */
    long long wall_us; /* INFO commandstats */
} figure;

static figure figures[512];
static size_t nfigures;
static long long slowest_us;
static unsigned slow_calls; /* of the run being made */
static unsigned attempt;    /* of that run: 0, 1, 2 */

/* ---- Server time ------------------------------------------------------ */

/* usec of 'cmd' in INFO commandstats since the last CONFIG RESETSTAT; -1
   when it ran no call. */
static long long command_us(const char *cmd)
{
    redisReply *r = rs_cmd(&server, "INFO commandstats");
    char pattern[64];
    const char *p;
    long long us = -1;

    snprintf(pattern, sizeof(pattern), "cmdstat_%s:calls=", cmd);
    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, pattern)) != NULL &&
        (p = strstr(p, "usec=")) != NULL)
        us = strtoll(p + 5, NULL, 10);
    freeReplyObject(r);
    return us;
}

static int by_slowest(const void *a, const void *b)
{
    long long x = ((const figure *)a)->us, y = ((const figure *)b)->us;

    return (x < y) - (x > y);
}

/* ---- One decision by each engine -------------------------------------- */

/* FCALL sluice_hit or sluice_peek, on the server's clock. */
static int fcall_decide(sluice_decision *d, bool consume,
                        const sluice_limit *l, const char *key,
                        uint64_t cost)
{
    char m[24], w[24], c[24], b[24];
    const char *argv[9] = {"FCALL", consume ? "sluice_hit" : "sluice_peek",
                           "1", key, sluice_algo_name(l->algo), m, w, c, b};
    size_t lens[9];
    redisReply *r;
    int err = -1;

    snprintf(m, sizeof(m), "%" PRIu64, l->max);
    snprintf(w, sizeof(w), "%" PRIu64, l->window_ms);
    snprintf(c, sizeof(c), "%" PRIu64, cost);
    snprintf(b, sizeof(b), "%" PRIu64, l->burst);
    for (int i = 0; i < 9; i++)
        lens[i] = strlen(argv[i]);
    r = rs_cmdargv(&server, 9, argv, lens);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        d->allowed = r->element[0]->integer == 1;
        d->remaining = (uint64_t)r->element[1]->integer;
        err = 0;
    } else {
        fprintf(stderr, "    FCALL: %s\n",
                r != NULL && r->str != NULL ? r->str : "no reply");
    }
    freeReplyObject(r);
    return err;
}

/* The key an engine's decision on 'id' keeps its state in. */
static void key_name(char *out, size_t cap, engine e, const sluice_limit *l,
                     const char *id)
{
    if (e == BY_FCALL) {
        snprintf(out, cap, "%s", id);
        return;
    }
    test_key_of(out, cap, e == BY_SCRIPT ? "s" : "m", id, strlen(id),
                sluice_algo_name(l->algo));
}

static int decide(world *w, engine e, bool consume, const sluice_limit *l,
                  const char *id, uint64_t cost, sluice_decision *d)
{
    char key[160];

    if (e == BY_FCALL) {
        key_name(key, sizeof(key), e, l, id);
        return fcall_decide(d, consume, l, key, cost);
    }
    return consume ? sluice_hit(d, w->store[e], l, id, strlen(id), cost)
                   : sluice_peek(d, w->store[e], l, id, strlen(id), cost);
}

/* ---- The key's bound -------------------------------------------------- */

/*
 * Whether the key of 'l' holds no more than its algorithm's documented
 * bound, 'admitted' requests of 'units' units in all being live in it.
 */
static bool key_within(engine e, const sluice_limit *l, const char *id,
                       uint64_t admitted, uint64_t units, char *why,
                       size_t cap)
{
    char key[160];
    long long bytes, members;

    key_name(key, sizeof(key), e, l, id);
    /* SAMPLES 0: every element counted, not an estimate from five (a
       sorted set's members differ in length, so the estimate varies). */
    bytes = rs_int(&server, "MEMORY USAGE %s SAMPLES 0", key);
    switch (l->algo) {
    case SLUICE_SLIDING_LOG:
        /* One member a request, whatever its cost. */
        members = rs_int(&server, "ZCARD %s", key);
        snprintf(why, cap, "%lld members for %" PRIu64 " requests, %lld B",
                 members, admitted, bytes);
        return members <= (long long)admitted &&
               bytes <= 140 * (long long)admitted + 512;
    case SLUICE_COMPACT_LOG: {
        long long len = rs_int(&server, "STRLEN %s", key);

        snprintf(why, cap, "%lld B string for %" PRIu64 " units", len, units);
        return len <= 16 + 8 * (long long)SLUICE_COMPACT_LOG_MAX &&
               len <= 16 + 8 * (long long)units + 16 * 8;
    }
    default: /* one number, or a hash of four */
        snprintf(why, cap, "%lld B", bytes);
        return bytes <= 256;
    }
}

/* ---- The cases -------------------------------------------------------- */

/* Counts and notes a call 'what' that cost 'us' (of 'measure'): slower
   than LIMIT_US. */
static void slow_call(engine e, const sluice_limit *l, const char *what,
                      long long us, const char *measure)
{
    slow_calls++;
    printf("  NOTE: %s by %s, %s: %lld us of %s (attempt %u)\n",
           sluice_algo_name(l->algo), engine_names[e], what, us, measure,
           attempt + 1);
}

/*
 * A decision whose server CPU time is put in *us (-1 without the clock);
 * one over LIMIT_US is a slow_call() 'what'.
 */
static int timed_decide(world *w, engine e, bool consume,
                        const sluice_limit *l, const char *id, uint64_t cost,
                        sluice_decision *d, const char *what, long long *us)
{
    long long before = rs_cpu_us(&server);
    int err = decide(w, e, consume, l, id, cost, d);
    long long after = rs_cpu_us(&server);

    *us = before >= 0 && after >= 0 ? after - before : -1;
    if (*us > LIMIT_US)
        slow_call(e, l, what, *us, "CPU");
    return err;
}

/*
 * One measured decision: its server time (at most LIMIT_US) noted, and the
 * key checked against its bound afterwards.
 */
static void measured(world *w, engine e, const char *what, bool consume,
                     const sluice_limit *l, const char *id, uint64_t cost,
                     uint64_t admitted, uint64_t units)
{
    sluice_decision d;
    char why[128];
    long long cpu, wall, us;

    test_context("%s by %s: %s (max %" PRIu64 ", window %" PRIu64 " ms)",
                 sluice_algo_name(l->algo), engine_names[e], what, l->max,
                 l->window_ms);
    rs_ok(&server, "CONFIG RESETSTAT");
    if (!CHECK(timed_decide(w, e, consume, l, id, cost, &d, what, &cpu) ==
               0))
        return;
    wall = command_us(engine_cmds[e]);
    CHECK(wall >= 0);
    us = cpu >= 0 ? cpu : wall;
    if (cpu < 0 && us > LIMIT_US)
        slow_call(e, l, what, us, "wall time");
    if (us > LIMIT_US)
        return;
    if (us > slowest_us)
        slowest_us = us;
    if (nfigures < sizeof(figures) / sizeof(figures[0])) {
        figure *f = &figures[nfigures++];

        snprintf(f->what, sizeof(f->what), "%-15s %-6s %s",
                 sluice_algo_name(l->algo), engine_names[e], what);
        f->us = us;
        f->wall_us = wall;
    }
    if (!CHECK(key_within(e, l, id, admitted, units, why, sizeof(why))))
        fprintf(stderr, "    the key holds %s\n", why);
}

/* The largest limits of 'algo': its max and window at the top of their
   bounds, and for the counters the two ends of max x window <= 2^53. */
static size_t worst_limits(sluice_algo algo, sluice_limit *out)
{
    switch (algo) {
    case SLUICE_SLIDING_COUNTER:
    case SLUICE_GCRA:
        out[0] = SLUICE_LIMIT(algo, SLUICE_MAX_MAX, 1);
        out[1] = SLUICE_LIMIT(algo, SLUICE_COUNTER_PRODUCT_MAX >> 40,
                              SLUICE_WINDOW_MAX_MS);
        return 2;
    case SLUICE_COMPACT_LOG:
        out[0] = SLUICE_LIMIT(algo, SLUICE_COMPACT_LOG_MAX,
                              SLUICE_WINDOW_MAX_MS);
        return 1;
    default:
        out[0] = SLUICE_LIMIT(algo, SLUICE_MAX_MAX, SLUICE_WINDOW_MAX_MS);
        return 1;
    }
}

static void run_algo(world *w, engine e, sluice_algo algo)
{
    sluice_limit lims[2];
    size_t n = worst_limits(algo, lims);

    for (size_t i = 0; i < n; i++) {
        const sluice_limit *l = &lims[i];
        uint64_t max = l->max;
        char id[64];
        sluice_decision d;

        snprintf(id, sizeof(id), "fresh:%s:%s:%zu:%u",
                 sluice_algo_name(algo), engine_names[e], i, attempt);
        measured(w, e, "fresh key, cost max", true, l, id, max, 1, max);
        measured(w, e, "full key, cost 1", true, l, id, 1, 1, max);
        measured(w, e, "full key, peek max", false, l, id, max, 1, max);

        /* A long log: many requests, then a refusal deep inside it. */
        snprintf(id, sizeof(id), "long:%s:%s:%zu:%u",
                 sluice_algo_name(algo), engine_names[e], i, attempt);
        test_context("%s by %s: filling a key", sluice_algo_name(algo),
                     engine_names[e]);
        for (unsigned k = 0; k < LOG_REQUESTS; k++) {
            long long us;

            if (!CHECK(timed_decide(w, e, true, l, id, 1, &d, "filling",
                                    &us) == 0 &&
                       d.allowed))
                break;
        }
        measured(w, e, "long key, cost max", true, l, id, max, LOG_REQUESTS,
                 LOG_REQUESTS);
        measured(w, e, "long key, cost 1", true, l, id, 1, LOG_REQUESTS + 1,
                 LOG_REQUESTS + 1);
    }
    if (algo == SLUICE_COMPACT_LOG) {
        /* A ring made under half the bound, laid out again under it. */
        sluice_limit half = lims[0], whole = lims[0];
        char id[64];

        half.max = SLUICE_COMPACT_LOG_MAX / 2;
        snprintf(id, sizeof(id), "regrow:%s:%u", engine_names[e], attempt);
        measured(w, e, "half ring, cost max/2", true, &half, id, half.max, 1,
                 half.max);
        measured(w, e, "ring laid out again", true, &whole, id, half.max, 2,
                 whole.max);
    }
}

/* ---- Setting up ------------------------------------------------------- */

static void world_open(world *w)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    size_t servers = 0;

    memset(w, 0, sizeof(*w));
    opts.key_prefix = "s";
    w->store[BY_SCRIPT] = test_store_open(server.url,
                                          "engine=lua&timeout=5000&"
                                          "refused_cache=off", &opts);
    CHECK_OK(sluice_functions_load(w->store[BY_SCRIPT], &servers));
    for (int a = 0; a < SLUICE__ALGO_N; a++) {
        w->runs[BY_SCRIPT][a] = w->runs[BY_FCALL][a] = true;
        w->runs[BY_MODULE][a] = rs_module_path() != NULL &&
                                test_module_glue(&server, (sluice_algo)a);
    }
    if (rs_module_path() != NULL) {
        opts.key_prefix = "m";
        w->store[BY_MODULE] = test_store_open(server.url,
                                              "engine=module&timeout=5000&"
                                              "refused_cache=off", &opts);
    } else {
        printf("  NOTE: this build made no module: SLUICE.HITMANY is not "
               "measured\n");
    }
}

static void world_close(world *w)
{
    for (int e = 0; e < ENGINE_N; e++)
        sluice_store_free(w->store[e]);
}

/* How many decisions SLOWLOG holds (each printed); it is reset. */
static unsigned slowlog_decisions(void)
{
    redisReply *r = rs_cmd(&server, "SLOWLOG GET 128");
    unsigned n = 0;

    if (!CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY))
        goto done;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i], *args;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
            continue;
        args = e->element[3];
        if (args->type != REDIS_REPLY_ARRAY || args->elements == 0)
            continue;
        /* Filling the logs is many calls; CONFIG and INFO are the test's. */
        if (strcasecmp(args->element[0]->str, "CONFIG") == 0 ||
            strcasecmp(args->element[0]->str, "INFO") == 0 ||
            strcasecmp(args->element[0]->str, "FUNCTION") == 0 ||
            strcasecmp(args->element[0]->str, "SCRIPT") == 0)
            continue;
        n++;
        printf("  NOTE: SLOWLOG: %lld us:", e->element[2]->integer);
        for (size_t k = 0; k < args->elements && k < 8; k++)
            printf(" %s", args->element[k]->str);
        printf("\n");
    }
done:
    freeReplyObject(r);
    rs_ok(&server, "SLOWLOG RESET");
    return n;
}

int main(void)
{
    world w;
    bool have_clock;

    if (rs_start(&server, rs_module_args()) < 0) {
        fprintf(stderr, "test_server_bounds: cannot start redis-server\n");
        return 1;
    }
    printf("  server %s (pid %d)\n", server.url, (int)server.pid);
    have_clock = rs_cpu_us(&server) >= 0; /* else wall time, SLOWLOG */
    if (have_clock)
        printf("  cost of a call: the server's CPU time (its process CPU "
               "clock)\n");
    else
        printf("  NOTE: the server's CPU clock cannot be read: the cost of "
               "a call is its wall time (INFO commandstats, SLOWLOG)\n");
    rs_ok(&server, "CONFIG SET slowlog-log-slower-than %d", LIMIT_US);
    rs_ok(&server, "SLOWLOG RESET");
    world_open(&w);
    for (int e = 0; e < ENGINE_N; e++) {
        for (int a = 0; a < SLUICE__ALGO_N; a++) {
            if (!w.runs[e][a] || (e != BY_FCALL && w.store[e] == NULL))
                continue;
            for (attempt = 0; attempt < 3; attempt++) {
                slow_calls = 0;
                run_algo(&w, (engine)e, (sluice_algo)a);
                if (!have_clock)
                    slow_calls += slowlog_decisions();
                if (slow_calls == 0)
                    break;
            }
            test_context("%s by %s", sluice_algo_name((sluice_algo)a),
                         engine_names[e]);
            CHECK(slow_calls == 0); /* slow three times over: the work */
        }
    }
    test_context(NULL);
    world_close(&w);
    qsort(figures, nfigures, sizeof(figures[0]), by_slowest);
    printf("  server %s per call, the slowest first (wall: INFO "
           "commandstats); the limit is %d us:\n",
           have_clock ? "CPU time" : "time", LIMIT_US);
    for (size_t i = 0; i < nfigures && i < 12; i++)
        printf("    %6lld us (wall %6lld us)  %s\n", figures[i].us,
               figures[i].wall_us, figures[i].what);
    printf("  slowest of %zu calls: %lld us\n", nfigures, slowest_us);
    rs_stop(&server);
    return test_summary("test_server_bounds");
}
