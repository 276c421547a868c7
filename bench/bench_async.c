/*
 * bench_async.c - sluice_bench_async: the non-blocking API (sluice/async.h)
 * on one thread and one poll() loop (sluice/adapters/poll.h), beside the
 * references of issue 22 on the same private redis-server, in one run.
 *
 *   sluice async           one thread, one loop, 50 then 500 calls in
 *                          flight (each callback starts the next call),
 *                          10,000 keys "user:N" drawn uniformly, the fixed
 *                          window, every call admitted; engine=lua, then
 *                          engine=module (the server loads sluice.so)
 *   sluice blocking        sluice_hit() from 50 threads sharing one store
 *   redis-benchmark INCR   -c 50 -r 10000, and -c 50 -P 16 (the server's
 *                          pipelined ceiling)
 *   rate-limiter-flexible  bench/peers/rlf_bench.js, 50 callers
 *
 * Figures: decisions per second; client CPU µs and context switches per
 * decision (getrusage() of this process for the in-process rows, the
 * child's rusage from wait4() for redis-benchmark, the peer's own count);
 * the server's CPU per decision (INFO cpu). Then the targets, each "met"
 * or "missed". Rows run --rounds times, interleaved; medians. The pieces
 * (server, redis-benchmark, the peer, the blocking callers) are
 * sluice_bench_server's (bench/server/). Benchmarks never fail: exit 0
 * whatever the figures, 1 if sluice or the server fails, 2 on a bad option.
 */
#include "server/bench_server.h"
#include "sluice/async.h"
#include "sluice/adapters/poll.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define DEFAULT_SECONDS 2.0
#define DEFAULT_ROUNDS 3u
#define QUICK_SECONDS 0.3
#define CALLERS 50u
#define PIPELINE 16u
#define WARM_PER_FLIGHT 4u

enum { ROW_LUA_50, ROW_LUA_500, ROW_MOD_50, ROW_MOD_500, ROW_BLOCKING,
       ROW_INCR, ROW_INCR_P16, ROW_RLF, NROWS };

static const struct row_spec {
    const char *id, *label;
    how how;                /* HOW_SLUICE_MANY stands for the async rows */
    const char *engine;     /* async rows */
    unsigned in_flight;
} specs[NROWS] = {
    {"async_fixed_lua_50", "sluice async, engine=lua", HOW_SLUICE_MANY,
     "engine=lua", 50},
    {"async_fixed_lua_500", "sluice async, engine=lua", HOW_SLUICE_MANY,
     "engine=lua", 500},
    {"async_fixed_module_50", "sluice async, engine=module", HOW_SLUICE_MANY,
     "engine=module", 50},
    {"async_fixed_module_500", "sluice async, engine=module",
     HOW_SLUICE_MANY, "engine=module", 500},
    {"blocking_fixed_50_threads", "sluice blocking, 50 threads (lua)",
     HOW_SLUICE, NULL, CALLERS},
    {"redis_benchmark_incr_c50", "redis-benchmark INCR -c 50", HOW_RB, NULL,
     CALLERS},
    {"redis_benchmark_incr_c50_p16", "redis-benchmark INCR -c 50 -P 16",
     HOW_RB, NULL, CALLERS * PIPELINE},
    {"rlf_fixed", "rate-limiter-flexible (fixed)", HOW_PEER, NULL, CALLERS},
};

/* ---- The async rows ------------------------------------------------------ */

typedef struct async_run async_run;

/* One call in flight: when its callback runs, it starts the next. */
typedef struct flight {
    async_run *run;
    unsigned warm;
} flight;

struct async_run {
    sluice_async *a;
    sluice_limit limit;
    const keyset *ids;
    uint64_t rng, deadline_ns, last_ns;
    bool timing, failed;
    uint64_t calls, admitted;
    char why[256];
};

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user);

/* Starts flight 'f''s next call on a key drawn uniformly. */
static void flight_start(flight *f)
{
    async_run *run = f->run;
    size_t k = pick_key(&run->rng, run->ids->n);
    int err = sluice_async_hit(run->a, &run->limit, key_at(run->ids, k),
                               key_len(run->ids, k), 1, on_decision, f);

    if (err < 0 && !run->failed) {
        run->failed = true;
        snprintf(run->why, sizeof(run->why), "sluice_async_hit: %s (%s)",
                 sluice_strerror(err), sluice_last_error());
    }
}

/* A decision: counted when timing; the next call, until the deadline. */
static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    flight *f = user;
    async_run *run = f->run;
    uint64_t now = now_ns();

    (void)a;
    if ((err != 0 || d->fallback != SLUICE_ANSWERED) && !run->failed) {
        run->failed = true;
        snprintf(run->why, sizeof(run->why), "a decision: %s (%s)",
                 err ? sluice_strerror(err) : "a fallback",
                 sluice_last_error());
    }
    if (run->failed)
        return;
    if (run->timing) {
        run->calls++;
        run->admitted += d->allowed ? 1 : 0;
        run->last_ns = now;
        if (now < run->deadline_ns)
            flight_start(f);
    } else if (++f->warm < WARM_PER_FLIGHT) {
        flight_start(f);
    }
}

/* Starts every flight, then runs the loop until each has stopped. */
static int flights_fly(sluice_poll_loop *loop, async_run *run, flight *fl,
                       unsigned n)
{
    int err;

    for (unsigned i = 0; i < n && !run->failed; i++)
        flight_start(&fl[i]);
    if ((err = sluice_poll_drain(loop, run->a)) < 0 && !run->failed) {
        run->failed = true;
        snprintf(run->why, sizeof(run->why), "sluice_poll_drain: %s",
                 sluice_strerror(err));
    }
    return run->failed ? -1 : 0;
}

/* The handle and its store for row 'c'; -1 with 'why' filled. */
static int async_open(report *rp, const bench_case *c, sluice_store **store,
                      sluice_poll_loop *loop, async_run *run, char *why,
                      size_t cap)
{
    char url[1200];
    int err;

    sluice_url_for(&rp->srv, rp->o.pool, c->url_extra, url, sizeof(url));
    if ((err = sluice_store_open(store, url, NULL)) < 0 ||
        (err = sluice_async_poll_new(&run->a, *store, loop)) < 0) {
        snprintf(why, cap, "opening %.80s: %s (%.100s)", url,
                 sluice_strerror(err), sluice_last_error());
        sluice_store_free(*store);
        return -1;
    }
    return 0;
}

/* Runs async row 'c' once: a warm-up, then 'seconds' timed. */
static int run_async(report *rp, bench_case *c, run_result *r, char *why,
                     size_t cap)
{
    async_run run = {.limit = SLUICE_LIMIT(SLUICE_FIXED, ADMIT_MAX,
                                           WINDOW_MS),
                     .ids = &rp->keys.ids, .rng = now_ns() | 1};
    flight *fl = calloc(c->callers, sizeof(*fl));
    sluice_store *store = NULL;
    sluice_poll_loop loop;
    double cli0, cs0, srv0;
    uint64_t start;

    if (fl == NULL || async_open(rp, c, &store, &loop, &run, why, cap) < 0) {
        if (fl == NULL)
            snprintf(why, cap, "out of memory");
        free(fl);
        return -1;
    }
    for (unsigned i = 0; i < c->callers; i++)
        fl[i].run = &run;
    flights_fly(&loop, &run, fl, c->callers);
    memset(r, 0, sizeof(*r));
    srv0 = meter_start(&rp->srv);
    cli0 = rusage_s(RUSAGE_SELF);
    cs0 = rusage_cs(RUSAGE_SELF);
    run.timing = true;
    start = run.last_ns = now_ns();
    run.deadline_ns = start + (uint64_t)(rp->o.seconds * 1e9);
    if (!run.failed)
        flights_fly(&loop, &run, fl, c->callers);
    r->cli_cpu_s = rusage_s(RUSAGE_SELF) - cli0;
    r->cli_cs = rusage_cs(RUSAGE_SELF) - cs0;
    meter_stop(&rp->srv, srv0, c->cmd, r);
    r->calls = (double)run.calls;
    r->admitted = (double)run.admitted;
    r->rate = run.last_ns > start ? r->calls / ((run.last_ns - start) * 1e-9)
                                  : 0;
    r->p50_us = r->p99_us = r->key_calls = -1;
    sluice_async_free(run.a);
    sluice_store_free(store);
    free(fl);
    if (run.failed)
        snprintf(why, cap, "%s", run.why);
    return run.failed ? -1 : 0;
}

/* ---- The rows ------------------------------------------------------------ */

/* Whether the server has this build's module (for the module rows). */
static bool has_module(report *rp, char *why, size_t cap)
{
    redisReply *r = ctl_cmd(&rp->srv, "SLUICE.VERSION");
    const char *want = "sluice.so " SLUICE_VERSION " ";
    bool has = r != NULL && r->type == REDIS_REPLY_STRING &&
               strncmp(r->str, want, strlen(want)) == 0;

    if (!has)
        snprintf(why, cap, "the server has no sluice module %s",
                 SLUICE_VERSION);
    if (r != NULL)
        freeReplyObject(r);
    return has;
}

/* The rows, each a bench_case (sluice_bench_server's), or why not. */
static void rows_build(report *rp)
{
    char nomod[256] = "";
    bool mod = has_module(rp, nomod, sizeof(nomod));

    for (int i = 0; i < NROWS; i++) {
        const struct row_spec *s = &specs[i];
        bench_case *c = &rp->cases[i];

        memset(c, 0, sizeof(*c));
        snprintf(c->id, sizeof(c->id), "%s", s->id);
        snprintf(c->label, sizeof(c->label), "%s", s->label);
        c->how = s->how;
        c->algo = SLUICE_FIXED;
        c->callers = c->threads = s->in_flight;
        c->connections = c->pool = rp->o.pool;
        c->url_extra = s->engine;
        c->max = ADMIT_MAX;
        c->window_ms = WINDOW_MS;
        c->keys = MANY_KEYS;
        c->vs = -1;
        c->cmd = s->how == HOW_RB ? "incr"
                 : s->engine != NULL && strstr(s->engine, "module")
                     ? "sluice.hitmany" : "evalsha";
        c->rb_guess = i == ROW_INCR_P16 ? 300000.0 : 30000.0;
        if (i == ROW_INCR_P16) {
            c->callers = CALLERS;
            c->depth = PIPELINE;
        }
        c->peer = "rlf";
        c->peer_algo = "fixed";
        if (c->cmd[0] == 's' && !mod)
            snprintf(c->unavailable, sizeof(c->unavailable), "%s", nomod);
        if (s->how == HOW_RB && !rp->rb_ok)
            snprintf(c->unavailable, sizeof(c->unavailable), "%s",
                     rp->rb_why);
        if (s->how == HOW_PEER && !rp->peers[PEER_RLF].ok)
            snprintf(c->unavailable, sizeof(c->unavailable), "%s",
                     rp->peers[PEER_RLF].why);
        if (!case_selected(rp->o.only, c->id))
            snprintf(c->unavailable, sizeof(c->unavailable),
                     "skipped (--only)");
    }
    rp->ncases = NROWS;
}

/* Runs row 'i' once; -1 only when sluice itself failed. */
static int row_run(report *rp, int i, unsigned round)
{
    bench_case *c = &rp->cases[i];
    run_result *r = &c->runs[c->nruns];
    char why[256] = "";
    int err;

    if (c->unavailable[0] != '\0')
        return 0;
    fprintf(stderr, "[round %u/%u] %s, %u in flight\n", round + 1,
            rp->o.repeats, c->label, c->callers);
    server_flush(&rp->srv);
    if (c->how == HOW_SLUICE_MANY)
        err = run_async(rp, c, r, why, sizeof(why));
    else if (c->how == HOW_SLUICE)
        err = run_threads(rp, c, &rp->keys.ids, &rp->keys.fixed, r, why,
                          sizeof(why));
    else if (c->how == HOW_RB)
        err = run_rb(rp, c, r, why, sizeof(why));
    else
        err = run_peer(rp, c, r, why, sizeof(why));
    if (err < 0 && (c->how == HOW_SLUICE_MANY || c->how == HOW_SLUICE)) {
        fprintf(stderr, "sluice_bench_async: %s: %s\n", c->label, why);
        return -1;
    }
    if (err < 0)
        snprintf(c->unavailable, sizeof(c->unavailable), "%s", why);
    else
        c->nruns++;
    return 0;
}

/* ---- The targets --------------------------------------------------------- */

/* num's rate over den's, or -1 when either did not run. */
static double rate_over(const report *rp, int num, int den)
{
    const bench_case *a = &rp->cases[num], *b = &rp->cases[den];

    if (a->nruns == 0 || b->nruns == 0 || b->med.rate <= 0)
        return -1;
    return a->med.rate / b->med.rate;
}

/* num's client CPU per decision over den's, or -1. */
static double cpu_over(const report *rp, int num, int den)
{
    const bench_case *a = &rp->cases[num], *b = &rp->cases[den];

    if (a->nruns == 0 || b->nruns == 0 || b->med.cli_cpu_s <= 0)
        return -1;
    return a->med.cli_cpu_s / b->med.cli_cpu_s;
}

typedef struct goal {
    char name[80];
    char label[96];
    double value, min, max; /* min or max: 0 when none */
} goal;

/* Every target: for each async row, three; the module's two ratios. */
static int goals_get(const report *rp, goal *g)
{
    int n = 0;

    for (int i = ROW_LUA_50; i <= ROW_MOD_500; i++) {
        const char *id = specs[i].id;

        g[n] = (goal){.value = rate_over(rp, i, ROW_RLF), .min = 3};
        snprintf(g[n].name, sizeof(g[n].name), "%s_over_rlf", id);
        snprintf(g[n++].label, 96, "%s / rate-limiter-flexible", id);
        g[n] = (goal){.value = rate_over(rp, i, ROW_INCR), .min = 2};
        snprintf(g[n].name, sizeof(g[n].name), "%s_over_incr_c50", id);
        snprintf(g[n++].label, 96, "%s / INCR -c 50", id);
        g[n] = (goal){.value = cpu_over(rp, i, ROW_BLOCKING), .max = 1.0 / 3};
        snprintf(g[n].name, sizeof(g[n].name), "%s_cpu_over_blocking", id);
        snprintf(g[n++].label, 96, "%s CPU/dec / blocking's", id);
    }
    for (int i = ROW_MOD_50; i <= ROW_MOD_500; i++) {
        g[n] = (goal){.value = rate_over(rp, i, ROW_INCR_P16)};
        snprintf(g[n].name, sizeof(g[n].name), "%s_over_incr_p16",
                 specs[i].id);
        snprintf(g[n++].label, 96, "%s / INCR -P 16", specs[i].id);
    }
    return n;
}

static const char *goal_verdict(const goal *g)
{
    if (g->value < 0)
        return "not measured";
    if (g->min > 0)
        return g->value >= g->min ? "met" : "missed";
    if (g->max > 0)
        return g->value <= g->max ? "met" : "missed";
    return "";
}

/* ---- The report ---------------------------------------------------------- */

static void print_rows_text(const report *rp)
{
    printf("  %-36s %9s %11s %5s %8s %8s %7s %8s\n", "implementation",
           "in flight", "dec/s", "sprd", "srv µs", "cli µs", "cs",
           "cmd/dec");
    for (int i = 0; i < rp->ncases; i++) {
        const bench_case *c = &rp->cases[i];
        char buf[32];

        printf("  %-36s %9u", c->label, c->callers *
               (c->depth > 1 ? c->depth : 1));
        if (c->nruns == 0) {
            printf("  not available: %s\n", c->unavailable);
            continue;
        }
        printf(" %11s %4.0f%%", grouped(buf, sizeof(buf), c->med.rate),
               c->spread * 100);
        print_num(c->med.srv_cpu_s >= 0 ? c->med.srv_cpu_s * 1e6 : -1, 8, 2);
        print_num(c->med.cli_cpu_s * 1e6, 8, 2);
        print_num(c->med.cli_cs, 7, 3);
        print_num(c->med.cmd_calls, 8, 3);
        printf("\n");
    }
}

static void print_report_text(const report *rp)
{
    goal g[16];
    int n = goals_get(rp, g);

    printf("sluice %s async benchmark: %s %s on %s:%d (started here: %s, "
           "--save '' --appendonly no)\n", SLUICE_VERSION, rp->srv.name,
           rp->srv.version, rp->srv.host, rp->srv.port, rp->srv.binary);
    printf("%.1f s per row, median of %u interleaved rounds; %ld CPUs; "
           "load average %.2f before, %.2f after\n", rp->o.seconds,
           rp->o.repeats, rp->cpus, rp->load_before[0], rp->load_after[0]);
    printf("workload: fixed window, every call admitted, %u keys drawn "
           "uniformly; async: one thread, one poll() loop\n\n", MANY_KEYS);
    print_rows_text(rp);
    printf("\ntargets (issue 22)\n");
    for (int i = 0; i < n; i++) {
        printf("  %-52s", g[i].label);
        if (g[i].value < 0)
            printf("       -  not measured\n");
        else if (g[i].min > 0)
            printf(" %7.2f×  (>= %.0f×) %s\n", g[i].value, g[i].min,
                   goal_verdict(&g[i]));
        else if (g[i].max > 0)
            printf(" %7.2f   (<= 0.33) %s\n", g[i].value,
                   goal_verdict(&g[i]));
        else
            printf(" %7.2f×\n", g[i].value);
    }
}

static void print_report_json(const report *rp)
{
    goal g[16];
    int n = goals_get(rp, g);

    printf("{\"benchmark\": \"sluice_bench_async\", \"version\": \"%s\",\n",
           SLUICE_VERSION);
    printf(" \"server\": {\"name\": ");
    json_string(rp->srv.name);
    printf(", \"version\": ");
    json_string(rp->srv.version);
    printf("}, \"seconds\": %g, \"rounds\": %u,\n \"rows\": [\n",
           rp->o.seconds, rp->o.repeats);
    for (int i = 0; i < rp->ncases; i++) {
        const bench_case *c = &rp->cases[i];

        printf("{\"id\": \"%s\", \"label\": ", c->id);
        json_string(c->label);
        if (c->nruns == 0) {
            printf(", \"available\": false, \"why\": ");
            json_string(c->unavailable);
        } else {
            printf(", \"available\": true, \"decisions_per_s\": ");
            json_number(c->med.rate);
            printf(", \"client_cpu_us_per_decision\": ");
            json_number(c->med.cli_cpu_s * 1e6);
            printf(", \"client_context_switches_per_decision\": ");
            json_number(c->med.cli_cs);
            printf(", \"server_cpu_us_per_decision\": ");
            json_number(c->med.srv_cpu_s >= 0 ? c->med.srv_cpu_s * 1e6 : -1);
        }
        printf("}%s\n", i + 1 < rp->ncases ? "," : "");
    }
    printf(" ],\n \"targets\": [\n");
    for (int i = 0; i < n; i++) {
        printf("{\"name\": \"%s\", \"value\": ", g[i].name);
        json_number(g[i].value);
        if (g[i].min > 0 || g[i].max > 0)
            printf(", \"%s\": %.3f, \"met\": %s", g[i].min > 0 ? "target_min"
                   : "target_max", g[i].min > 0 ? g[i].min : g[i].max,
                   g[i].value < 0 ? "null"
                   : strcmp(goal_verdict(&g[i]), "met") == 0 ? "true"
                                                             : "false");
        printf("}%s\n", i + 1 < n ? "," : "");
    }
    printf(" ]}\n");
}

/* ---- Options and main ---------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice_bench_async [--seconds S] [--rounds N] [--quick] "
            "[--json]\n"
            "                          [--only A,B] [--peers DIR] "
            "[--node PATH]\n\n"
            "The async API (one thread, one poll() loop, 50 and 500 calls "
            "in flight,\n%u keys, fixed window, engine=lua then "
            "engine=module) beside redis-benchmark\nINCR -c 50 (and -P 16), "
            "rate-limiter-flexible and the blocking path with 50\nthreads, "
            "on one private redis-server, with issue 22's targets.\n"
            "Needs redis-server (or $SLUICE_TEST_SERVER) and redis-benchmark "
            "(Debian's\nredis-server, redis-tools), sluice.so (built here) "
            "for engine=module, and\nfor the Node peer node and 'npm ci' in "
            "bench/peers (bench/run_server_bench.sh\ninstalls them); a "
            "reference that is missing is shown \"not available\".\n"
            "Benchmarks never fail: the exit status is 0 whatever the "
            "figures.\n\n"
            "  --seconds S   each row runs S seconds (default %.0f)\n"
            "  --rounds N    each row runs N times, interleaved; medians "
            "(default %u)\n"
            "  --quick       a smoke run: %.1f s per row, 1 round\n"
            "  --json        the results as JSON on standard output\n"
            "  --only A,B    only the rows whose id contains A or B\n"
            "  --peers DIR   the peer scripts (default %s)\n"
            "  --node PATH   Node.js (default node)\n"
            "  --help        show this text\n",
            MANY_KEYS, DEFAULT_SECONDS, DEFAULT_ROUNDS, QUICK_SECONDS,
            SLUICE_BENCH_PEERS_DIR);
}

static int bad_option(const char *what, const char *arg)
{
    fprintf(stderr, "sluice_bench_async: %s '%s'\n", what, arg);
    usage(stderr);
    return 2;
}

/* The options into 'o': -1 to go on, else the exit status. */
static int options_parse(options *o, int argc, char **argv)
{
    *o = (options){.callers = CALLERS, .pool = 4, .peers = true,
                   .peers_dir = SLUICE_BENCH_PEERS_DIR,
                   .python = "/usr/bin/python3", .node = "node",
                   .redis_benchmark = "redis-benchmark"};
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;
        char *end;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--quick") == 0)
            o->quick = true;
        else if (strcmp(argv[i], "--json") == 0)
            o->json = true;
        else if ((v = option_value(argc, argv, &i, "--seconds", &missing))) {
            o->seconds = strtod(v, &end);
            if (*end != '\0' || !(o->seconds >= 0.05 && o->seconds <= 600))
                return bad_option("--seconds wants 0.05 to 600, not", v);
        } else if ((v = option_value(argc, argv, &i, "--rounds", &missing))) {
            long n = strtol(v, &end, 10);

            if (*end != '\0' || n < 1 || n > (long)MAX_REPEATS)
                return bad_option("--rounds wants 1 to 99, not", v);
            o->repeats = (unsigned)n;
        } else if ((v = option_value(argc, argv, &i, "--only", &missing)))
            o->only = v;
        else if ((v = option_value(argc, argv, &i, "--peers", &missing)))
            o->peers_dir = v;
        else if ((v = option_value(argc, argv, &i, "--node", &missing)))
            o->node = v;
        else
            return bad_option(missing ? "a value is missing after"
                                      : "unknown option", argv[i]);
    }
    if (o->seconds == 0)
        o->seconds = o->quick ? QUICK_SECONDS : DEFAULT_SECONDS;
    if (o->repeats == 0)
        o->repeats = o->quick ? 1 : DEFAULT_ROUNDS;
    return -1;
}

int main(int argc, char **argv)
{
    static report rp;
    int status;

    if ((status = options_parse(&rp.o, argc, argv)) >= 0)
        return status;
    rp.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    signal(SIGPIPE, SIG_IGN);
    if (keys_make(&rp.keys) < 0 || server_open(&rp.srv, NULL) < 0) {
        fprintf(stderr, "sluice_bench_async: no keys or no server\n");
        return 1;
    }
    tools_check(&rp);
    rows_build(&rp);
    load_average(rp.load_before);
    for (unsigned round = 0; round < rp.o.repeats; round++)
        for (int i = 0; i < rp.ncases; i++)
            if (row_run(&rp, i, round) < 0) {
                server_close(&rp.srv);
                return 1;
            }
    for (int i = 0; i < rp.ncases; i++)
        case_finish(&rp.cases[i]);
    load_average(rp.load_after);
    if (rp.o.json)
        print_report_json(&rp);
    else
        print_report_text(&rp);
    server_close(&rp.srv);
    keys_free(&rp.keys);
    return 0;
}
