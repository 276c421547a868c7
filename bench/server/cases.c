/*
 * cases.c - the list of cases, and their runs. The main table has four
 * workloads (1 or C callers, a hot key or 10,000 keys), each with sluice's
 * rows (sluice_hit() for each algorithm; with C callers, sluice_hit_many()
 * batches and the hot refused key) and the references; then the "where the
 * time goes" rows. Every case runs once per pass, passes interleaved, and
 * its figures are the medians of its runs.
 */
#include "bench_server.h"

#include <string.h>
#include <unistd.h>

#define PIPE_DEPTH_MAX 512u
#define RB_FIRST_GUESS 30000.0 /* requests/s, to size redis-benchmark's -n */

/* ---- Building the list --------------------------------------------------- */

/* The four workloads: callers x keys. */
unsigned workload_callers(const options *o, int w)
{
    return w < 2 ? 1 : o->callers;
}

size_t workload_keys(int w)
{
    return w % 2 == 0 ? 1 : MANY_KEYS;
}

/*
 * Appends a case: every call admitted (ADMIT_MAX per WINDOW_MS), a thread
 * and a connection per caller, compared with nothing.
 */
static bench_case *case_add(report *rp, how h, const char *id,
                            const char *label, unsigned callers, size_t keys)
{
    bench_case *c = &rp->cases[rp->ncases++];

    memset(c, 0, sizeof(*c));
    c->how = h;
    snprintf(c->id, sizeof(c->id), "%s", id);
    snprintf(c->label, sizeof(c->label), "%s", label);
    c->callers = callers;
    c->threads = callers;
    c->connections = callers;
    c->max = ADMIT_MAX;
    c->window_ms = WINDOW_MS;
    c->keys = keys;
    c->section = -1;
    c->vs = -1;
    c->cmd = h == HOW_RB || h == HOW_RAW_INCR ? "incr" : "evalsha";
    c->rb_guess = RB_FIRST_GUESS;
    return c;
}

/* A sluice row: 'algo' on the store with the pool 'pool'. */
static bench_case *sluice_add(report *rp, how h, const char *id,
                              const char *label, unsigned callers,
                              size_t keys, sluice_algo algo, unsigned pool)
{
    bench_case *c = case_add(rp, h, id, label, callers, keys);

    c->algo = algo;
    c->pool = c->connections = pool;
    return c;
}

/* The references of every workload, each compared with a sluice row. */
static const struct reference {
    how how;
    const char *id, *label;
    const char *peer, *peer_algo; /* HOW_PEER */
    sluice_algo vs;               /* the sluice row it is compared with */
    bool one_connection;          /* pipelines its callers on one */
} references[NREFS] = {
    [REF_RB] = {HOW_RB, "redis_benchmark_incr", "redis-benchmark INCR",
                NULL, NULL, SLUICE_FIXED, false},
    [REF_RLF] = {HOW_PEER, "rlf_fixed", "rate-limiter-flexible (fixed)",
                 "rlf", "fixed", SLUICE_FIXED, true},
    [REF_LIMITS_FIXED] = {HOW_PEER, "limits_fixed", "limits fixed window",
                          "limits", "fixed", SLUICE_FIXED, false},
    [REF_LIMITS_MOVING] = {HOW_PEER, "limits_moving", "limits moving window",
                           "limits", "moving", SLUICE_SLIDING_LOG, false},
};

/* Reference 'ref' on workload 'w', marked unavailable when it cannot run. */
static void reference_add(report *rp, int w, int ref)
{
    const struct reference *f = &references[ref];
    bench_case *c = case_add(rp, f->how, f->id, f->label,
                             workload_callers(&rp->o, w), workload_keys(w));
    const peer_info *p;

    c->peer = f->peer;
    c->peer_algo = f->peer_algo;
    if (f->one_connection)
        c->connections = 1;
    c->vs = rp->sluice_case[w][f->vs];
    rp->ref_case[w][ref] = rp->ncases - 1;
    if (f->how == HOW_RB && !rp->rb_ok)
        snprintf(c->unavailable, sizeof(c->unavailable), "%s", rp->rb_why);
    if (f->how != HOW_PEER)
        return;
    p = &rp->peers[strcmp(f->peer, "rlf") == 0 ? PEER_RLF : PEER_LIMITS];
    if (!rp->o.peers)
        snprintf(c->unavailable, sizeof(c->unavailable),
                 "skipped (--no-peers)");
    else if (!p->ok)
        snprintf(c->unavailable, sizeof(c->unavailable), "%s", p->why);
}

/*
 * The rows of a workload of C callers beyond sluice_hit() and the
 * references: sluice_hit_many() batches of C requests from 1 thread (each
 * algorithm) and from 2 threads of half as many each (fixed window: the
 * same decisions in flight, on both cores).
 */
static void batches_add(report *rp, int w, size_t keys)
{
    unsigned n = rp->o.callers, half = n / 2 > 0 ? n / 2 : 1;
    char id[64], label[96];
    bench_case *c;

    for (int a = 0; a < BENCH_ALGO_N; a++) {
        snprintf(id, sizeof(id), "sluice_%s_hit_many", sluice_algo_name(a));
        snprintf(label, sizeof(label), "sluice %s, 1 thread, hit_many "
                 "\u00d7%u", sluice_algo_name(a), n);
        c = sluice_add(rp, HOW_SLUICE_MANY, id, label, n, keys,
                       (sluice_algo)a, rp->o.pool);
        c->threads = 1;
        c->depth = n;
        rp->many_case[w][a] = rp->ncases - 1;
    }
    snprintf(label, sizeof(label), "sluice fixed, 2 threads, hit_many "
             "\u00d7%u each", half);
    c = sluice_add(rp, HOW_SLUICE_MANY, "sluice_fixed_hit_many_2threads",
                   label, 2 * half, keys, SLUICE_FIXED, rp->o.pool);
    c->threads = 2;
    c->depth = half;
    rp->many2_case[w] = rp->ncases - 1;
}

/*
 * The hot key refused all run long (C callers), with the cache of refused
 * keys and without.
 */
static void refused_add(report *rp)
{
    for (int off = 0; off < 2; off++) {
        bench_case *c = sluice_add(
            rp, HOW_SLUICE,
            off ? "sluice_fixed_refused_cache_off" : "sluice_fixed_refused",
            off ? "sluice fixed, refused key, refused_cache=off"
                : "sluice fixed, refused key, cache on",
            rp->o.callers, 1, SLUICE_FIXED, rp->o.pool);

        c->url_extra = off ? "refused_cache=off" : "refused_cache=default";
        c->max = REFUSED_MAX;
        c->window_ms = REFUSED_WINDOW_MS;
        *(off ? &rp->refused_off_case : &rp->refused_case) = rp->ncases - 1;
    }
}

/*
 * The native module's rows, shown with C callers and 10,000 keys: the
 * fixed window by sluice_hit() with engine=module (unavailable when the
 * server has no module of this library) and with engine=lua, beside the
 * workload's redis-benchmark INCR -c C, all in one run.
 */
static void engines_add(report *rp, size_t keys)
{
    redisReply *r = ctl_cmd(&rp->srv, "SLUICE.VERSION");
    bool has = r != NULL && r->type == REDIS_REPLY_STRING &&
               strncmp(r->str, "sluice.so " SLUICE_VERSION " ",
                       strlen("sluice.so " SLUICE_VERSION " ")) == 0;
    bench_case *c;

    c = sluice_add(rp, HOW_SLUICE, "sluice_fixed_engine_module",
                   "sluice fixed, engine=module", rp->o.callers, keys,
                   SLUICE_FIXED, rp->o.pool);
    c->url_extra = "engine=module";
    c->cmd = "sluice.hitmany";
    if (!has)
        snprintf(c->unavailable, sizeof(c->unavailable), "the server has no "
                 "sluice module %s (SLUICE.VERSION: %s)", SLUICE_VERSION,
                 r == NULL ? "no answer"
                 : r->type == REDIS_REPLY_ERROR ? r->str : "another answer");
    rp->module_case = rp->ncases - 1;
    c = sluice_add(rp, HOW_SLUICE, "sluice_fixed_engine_lua",
                   "sluice fixed, engine=lua", rp->o.callers, keys,
                   SLUICE_FIXED, rp->o.pool);
    c->url_extra = "engine=lua";
    rp->lua_case = rp->ncases - 1;
    if (r != NULL)
        freeReplyObject(r);
}

/* The rows of workload 'w' in the main table. */
static void workload_add(report *rp, int w)
{
    unsigned callers = workload_callers(&rp->o, w);
    size_t keys = workload_keys(w);
    char id[64], label[96];
    int first = rp->ncases;

    for (int a = 0; a < BENCH_ALGO_N; a++) {
        snprintf(id, sizeof(id), "sluice_%s", sluice_algo_name(a));
        snprintf(label, sizeof(label), "sluice %s", sluice_algo_name(a));
        sluice_add(rp, HOW_SLUICE, id, label, callers, keys, (sluice_algo)a,
                   rp->o.pool);
        rp->sluice_case[w][a] = rp->ncases - 1;
        rp->many_case[w][a] = -1;
    }
    rp->many2_case[w] = -1;
    for (int ref = 0; ref < NREFS; ref++)
        reference_add(rp, w, ref);
    if (callers > 1)
        batches_add(rp, w, keys);
    if (callers > 1 && keys == 1)
        refused_add(rp);
    if (callers > 1 && keys > 1)
        engines_add(rp, keys);
    for (int i = first; i < rp->ncases; i++)
        rp->cases[i].section = w;
}

/*
 * Where the time goes, beyond the pools: the fixed window's script and a
 * bare INCR without the library, compared with the sluice row of workload
 * 'vs' (C callers where the row has C, else 1).
 */
static const struct diag_row {
    how how;
    const char *id;
    const char *label; /* "%u": the callers */
    bool all_callers;  /* the C callers, else 1 */
    size_t keys;
    int vs;            /* the workload of the sluice row compared with */
} diag_rows[] = {
    /* Every call admitted: what the cache of refused keys costs when it
       has nothing to answer (not the refused key of the table). */
    {HOW_SLUICE, "sluice_fixed_hot_admitted_cache_off",
     "sluice fixed, 1 hot key admitted, refused_cache=off", true, 1, 2},
    {HOW_RAW_EVALSHA, "raw_evalsha_1", "bare hiredis EVALSHA fixed.lua",
     false, MANY_KEYS, 1},
    {HOW_RAW_EVALSHA, "raw_evalsha_n",
     "bare hiredis EVALSHA fixed.lua, a conn each", true, MANY_KEYS, 3},
    {HOW_RAW_INCR, "raw_incr_1", "bare hiredis INCR", false, MANY_KEYS, 1},
    {HOW_RAW_INCR, "raw_incr_n", "bare hiredis INCR, a conn each", true,
     MANY_KEYS, 3},
    {HOW_RAW_PIPE, "raw_evalsha_pipelined",
     "bare hiredis EVALSHA fixed.lua, %u pipelined", true, MANY_KEYS, 3},
};

/* The "where the time goes" rows: fixed window, 10,000 keys unless said. */
static void diag_add(report *rp)
{
    static const unsigned pools[] = {1, 2, 16, 50};
    unsigned n = rp->o.callers;
    char id[64], label[96];
    bench_case *c;

    for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
        unsigned pool = pools[i] == 50 ? n : pools[i];

        if (pool > n || pool == rp->o.pool)
            continue;
        snprintf(id, sizeof(id), "sluice_fixed_pool%u", pool);
        snprintf(label, sizeof(label), "sluice fixed, pool=%u%s", pool,
                 pool == n ? " (a connection per caller)" : "");
        c = sluice_add(rp, HOW_SLUICE, id, label, n, MANY_KEYS, SLUICE_FIXED,
                       pool);
        c->diag = true;
        c->vs = rp->sluice_case[3][SLUICE_FIXED];
    }
    for (size_t i = 0; i < sizeof(diag_rows) / sizeof(diag_rows[0]); i++) {
        const struct diag_row *d = &diag_rows[i];

        snprintf(label, sizeof(label), d->label, n);
        c = case_add(rp, d->how, d->id, label, d->all_callers ? n : 1,
                     d->keys);
        c->algo = SLUICE_FIXED;
        c->diag = true;
        c->vs = rp->sluice_case[d->vs][SLUICE_FIXED];
        if (d->how == HOW_SLUICE) {
            c->pool = c->connections = rp->o.pool;
            c->url_extra = "refused_cache=off";
        } else if (d->how == HOW_RAW_PIPE) {
            c->threads = c->connections = 1;
            c->depth = n > PIPE_DEPTH_MAX ? PIPE_DEPTH_MAX : n;
        }
    }
}

/* The case list: the main table's four workloads, then the diagnostics. */
void cases_build(report *rp)
{
    rp->refused_case = rp->refused_off_case = -1;
    rp->module_case = rp->lua_case = -1;
    for (int w = 0; w < NWORKLOADS; w++)
        workload_add(rp, w);
    if (rp->o.diag)
        diag_add(rp);
}

/* ---- Running them -------------------------------------------------------- */

static void progress(const report *rp, unsigned pass, int i, const char *what)
{
    const bench_case *c = &rp->cases[i];
    static bool tty = false, checked = false;

    if (!checked) {
        tty = isatty(STDERR_FILENO);
        checked = true;
    }
    fprintf(stderr, "%s[pass %u/%u] case %2d/%d: %-44s %3u caller%s %5zu "
            "key%s %s%s",
            tty ? "\r\033[K" : "", pass + 1, rp->o.repeats, i + 1,
            rp->ncases, c->label, c->callers, c->callers == 1 ? ", " : "s,",
            c->keys, c->keys == 1 ? " " : "s", what, tty ? "" : "\n");
    fflush(stderr);
}

/*
 * True when 'id' contains one of the comma-separated texts in 'only', or
 * when 'only' is NULL.
 */
bool case_selected(const char *only, const char *id)
{
    if (only == NULL)
        return true;
    while (*only != '\0') {
        size_t len = strcspn(only, ",");

        for (const char *p = id; len > 0 && *p != '\0'; p++)
            if (strncmp(p, only, len) == 0)
                return true;
        only += len;
        if (*only == ',')
            only++;
    }
    return false;
}

/*
 * Runs case 'i' once, as pass 'pass': on its ids (sluice), or on their
 * server keys (raw rows: the fixed window's, or INCR's), all of them or the
 * first alone (a hot key; the refused rows' has a window of its own).
 */
static int case_run(report *rp, int i, unsigned pass)
{
    bench_case *c = &rp->cases[i];
    bench_keys *k = &rp->keys;
    const keyset *sk = c->how == HOW_RAW_INCR ? &k->incr : &k->fixed;
    keyset one = {sk->bytes, 1}, one_id = {k->ids.bytes, 1};
    run_result *r = &c->runs[c->nruns];
    char why[256] = "";
    int err;

    if (c->max != ADMIT_MAX)
        one_id.bytes = k->refused;
    if (c->unavailable[0] != '\0')
        return 0;
    if (!case_selected(rp->o.only, c->id)) {
        snprintf(c->unavailable, sizeof(c->unavailable), "skipped (--only)");
        return 0;
    }
    progress(rp, pass, i, "");
    server_flush(&rp->srv);
    if (c->how == HOW_RB)
        err = run_rb(rp, c, r, why, sizeof(why));
    else if (c->how == HOW_PEER)
        err = run_peer(rp, c, r, why, sizeof(why));
    else
        err = run_threads(rp, c, c->keys == 1 ? &one_id : &k->ids,
                          c->keys == 1 ? &one : sk, r, why, sizeof(why));
    if (err < 0 && (c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY)) {
        fprintf(stderr, "\nsluice_bench_server: %s: %s\n", c->label, why);
        return -1;
    }
    if (err < 0) /* a reference that fails is reported, not fatal */
        snprintf(c->unavailable, sizeof(c->unavailable), "%s", why);
    else
        c->nruns++;
    return 0;
}

/* The median of each figure over a case's runs, and the rates' spread. */
void case_finish(bench_case *c)
{
    double v[MAX_REPEATS], lo = 0, hi = 0;

#define MEDIAN_OF(field)                                   \
    do {                                                    \
        for (unsigned i = 0; i < c->nruns; i++)             \
            v[i] = c->runs[i].field;                        \
        c->med.field = median_of(v, c->nruns);              \
    } while (0)
    MEDIAN_OF(rate);
    MEDIAN_OF(p50_us);
    MEDIAN_OF(p99_us);
    MEDIAN_OF(calls);
    MEDIAN_OF(admitted);
    MEDIAN_OF(cmd_usec);
#undef MEDIAN_OF
    /* Per decision: the median of each run's own ratio; 'none' when it
       made no call, or (none < 0) when its figure is unknown (< 0). */
#define MEDIAN_PER_DECISION(field, none)                                   \
    do {                                                                    \
        for (unsigned i = 0; i < c->nruns; i++)                             \
            v[i] = c->runs[i].calls > 0 &&                                  \
                           (none == 0 || c->runs[i].field >= 0)             \
                       ? c->runs[i].field / c->runs[i].calls                \
                       : none;                                              \
        c->med.field = median_of(v, c->nruns);                              \
    } while (0)
    MEDIAN_PER_DECISION(srv_cpu_s, -1);
    MEDIAN_PER_DECISION(cli_cpu_s, 0);
    MEDIAN_PER_DECISION(cli_cs, -1);
    MEDIAN_PER_DECISION(cmd_calls, -1);
    MEDIAN_PER_DECISION(key_calls, -1);
#undef MEDIAN_PER_DECISION
    for (unsigned i = 0; i < c->nruns; i++) {
        double x = c->runs[i].rate;

        lo = i == 0 || x < lo ? x : lo;
        hi = i == 0 || x > hi ? x : hi;
    }
    c->spread = c->med.rate > 0 ? (hi - lo) / c->med.rate : 0;
    if (c->nruns == 0 && c->unavailable[0] == '\0')
        snprintf(c->unavailable, sizeof(c->unavailable), "no run finished");
}

/*
 * Runs every case 'repeats' times, interleaved (pass 1 runs every case
 * once, then pass 2, ...), then takes the medians. -1 if sluice failed.
 */
int cases_run(report *rp)
{
    for (unsigned pass = 0; pass < rp->o.repeats; pass++)
        for (int i = 0; i < rp->ncases; i++)
            if (case_run(rp, i, pass) < 0)
                return -1;
    for (int i = 0; i < rp->ncases; i++)
        case_finish(&rp->cases[i]);
    return 0;
}
