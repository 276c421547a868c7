/*
 * threads.c - the in-process runs: sluice's callers (threads sharing one
 * store, by sluice_hit() or sluice_hit_many()) and bare hiredis callers (a
 * connection each, raw.c). Every caller warms up, waits at two barriers
 * while the main thread reads the server's counters, then calls until the
 * case's seconds have passed, timing each call.
 */
#include "bench_server.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ---- Latencies ----------------------------------------------------------- */

static int lat_push(lat_buf *b, uint64_t ns, size_t times)
{
    if (b->n + times > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16384;
        uint32_t *p;

        while (cap < b->n + times)
            cap *= 2;
        if ((p = realloc(b->ns, cap * sizeof(*p))) == NULL)
            return -1;
        b->ns = p;
        b->cap = cap;
    }
    for (size_t i = 0; i < times; i++)
        b->ns[b->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* The 'q' quantile of the sorted nanoseconds 'v', in microseconds. */
static double quantile_us(const uint32_t *v, size_t n, double q)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)(q * (double)n);
    if (i >= n)
        i = n - 1;
    return v[i] / 1000.0;
}

/* The median and 99th percentile of every caller's latencies, into 'r'. */
static void latencies(const caller *w, unsigned threads, run_result *r)
{
    size_t total = 0, at = 0;
    uint32_t *all;

    for (unsigned t = 0; t < threads; t++)
        total += w[t].lat.n;
    all = malloc((total ? total : 1) * sizeof(*all));
    if (all == NULL)
        return;
    for (unsigned t = 0; t < threads; t++) {
        memcpy(all + at, w[t].lat.ns, w[t].lat.n * sizeof(*all));
        at += w[t].lat.n;
    }
    qsort(all, total, sizeof(*all), cmp_u32);
    r->p50_us = quantile_us(all, total, 0.50);
    r->p99_us = quantile_us(all, total, 0.99);
    free(all);
}

/* ---- One call ------------------------------------------------------------ */

/* One sluice_hit() on key 'k': 1 admitted, 0 refused, -1 error. */
static int call_sluice(caller *w, size_t k)
{
    sluice_decision d;
    int err = sluice_hit(&d, w->store, w->limit, key_at(w->keys, k),
                         key_len(w->keys, k), 1);

    if (err < 0) {
        snprintf(w->why, sizeof(w->why), "sluice_hit: %s (%s)",
                 sluice_strerror(err), sluice_last_error());
        return -1;
    }
    return d.allowed;
}

/* One decision (or INCR) on key 'k': 1 admitted, 0 refused, -1 error. */
static int call_once(caller *w, size_t k, const char *max,
                     const char *window)
{
    if (w->c->how == HOW_SLUICE)
        return call_sluice(w, k);
    if (w->c->how == HOW_RAW_INCR)
        return raw_incr(w, k);
    return raw_evalsha(w, k, max, window);
}

/*
 * One sluice_hit_many() of w->c->depth requests on keys drawn as
 * call_once()'s, or, with 'warm' not SIZE_MAX, on the keys after 'warm' *
 * depth in turn. Adds its admitted requests to '*admitted'; -1 (w->why
 * filled) if a request has no decision. A refusal is a decision.
 */
static int call_many(caller *w, size_t warm, uint64_t *admitted)
{
    unsigned depth = w->c->depth;
    size_t n = w->keys->n;
    int err;

    for (unsigned i = 0; i < depth; i++) {
        size_t k = warm != SIZE_MAX ? (warm * depth + i) % n
                   : n > 1          ? pick_key(&w->rng, n)
                                    : 0;

        w->reqs[i].key = key_at(w->keys, k);
        w->reqs[i].key_len = key_len(w->keys, k);
        w->reqs[i].cost = 1;
    }
    err = sluice_hit_many(w->store, w->limit, w->reqs, depth);
    for (unsigned i = 0; i < depth; i++) {
        const sluice_request *q = &w->reqs[i];

        if (q->err != SLUICE_OK || err < 0) {
            snprintf(w->why, sizeof(w->why), "sluice_hit_many: request %u "
                     "of %u: %s (%s)", i + 1, depth,
                     sluice_strerror(q->err != SLUICE_OK ? q->err : err),
                     sluice_last_error());
            return -1;
        }
        *admitted += q->decision.allowed ? 1 : 0;
    }
    return 0;
}

/* ---- A caller ------------------------------------------------------------ */

/*
 * Gets a caller ready: its connection (raw cases) or its batch
 * (sluice_hit_many()), then WARM_CALLS untimed calls (batches). False on a
 * failure, with w->why filled.
 */
static bool caller_warm(caller *w, const char *max, const char *window)
{
    bool many = w->c->how == HOW_SLUICE_MANY;
    uint64_t warm_admitted = 0;

    if (w->c->how != HOW_SLUICE && !many &&
        (w->ctx = raw_connect(w->srv)) == NULL) {
        snprintf(w->why, sizeof(w->why), "cannot connect");
        return false;
    }
    if (many && (w->reqs = calloc(w->c->depth, sizeof(*w->reqs))) == NULL) {
        snprintf(w->why, sizeof(w->why), "out of memory for a batch");
        return false;
    }
    for (unsigned i = 0; i < WARM_CALLS; i++)
        if ((many ? call_many(w, i, &warm_admitted)
                  : call_once(w, i % w->keys->n, max, window)) < 0)
            return false;
    return true;
}

/*
 * A caller: warms up, waits at both barriers (the main thread reads the
 * server's counters between them), then calls until 'seconds' have passed,
 * timing each call, or each batch (given to each of its calls).
 */
static void *caller_main(void *arg)
{
    caller *w = arg;
    char max[24], window[24];
    size_t n = w->keys->n;
    bool failed, many = w->c->how == HOW_SLUICE_MANY;
    uint64_t start, now, deadline;

    snprintf(max, sizeof(max), "%llu", (unsigned long long)w->c->max);
    snprintf(window, sizeof(window), "%u", (unsigned)w->c->window_ms);
    failed = !caller_warm(w, max, window);
    pthread_barrier_wait(w->ready);
    pthread_barrier_wait(w->go);
    start = now = now_ns();
    deadline = start + (uint64_t)(w->seconds * 1e9);
    while (!failed && now < deadline) {
        uint64_t t0 = now;
        int v;

        if (w->c->how == HOW_RAW_PIPE || many) {
            failed = (many ? call_many(w, SIZE_MAX, &w->admitted)
                           : raw_pipelined(w, w->c->depth, max, window,
                                           &w->admitted)) < 0;
            now = now_ns();
            /* each call's reply came within the batch's round trip */
            failed |= lat_push(&w->lat, now - t0, w->c->depth) < 0;
            w->calls += w->c->depth;
            continue;
        }
        v = call_once(w, n > 1 ? pick_key(&w->rng, n) : 0, max, window);
        now = now_ns();
        if (v < 0 || lat_push(&w->lat, now - t0, 1) < 0) {
            failed = true;
            break;
        }
        w->calls++;
        w->admitted += (uint64_t)v;
    }
    w->elapsed_s = (double)(now - start) * 1e-9;
    if (failed && w->why[0] == '\0')
        snprintf(w->why, sizeof(w->why), "out of memory for latencies");
    if (w->ctx != NULL) {
        redisFree(w->ctx);
        w->ctx = NULL;
    }
    free(w->reqs);
    w->reqs = NULL;
    return NULL;
}

/* ---- A run --------------------------------------------------------------- */

/*
 * What an in-process case needs before its callers start: a store for
 * sluice's (with the case's pool and URL options), the script loaded for
 * raw EVALSHAs (its SHA1 into 'sha'). Returns 0, or -1 with 'why' filled.
 */
static int run_prepare(report *rp, const bench_case *c, sluice_store **store,
                       char sha[41], char *why, size_t why_cap)
{
    char url[1200];
    int err;

    if (c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY) {
        sluice_url_for(&rp->srv, c->pool, c->url_extra, url, sizeof(url));
        if ((err = sluice_store_open(store, url, NULL)) < 0) {
            snprintf(why, why_cap, "sluice_store_open(%.80s): %s (%.100s)",
                     url, sluice_strerror(err), sluice_last_error());
            return -1;
        }
    } else if (c->how != HOW_RAW_INCR &&
               raw_script_load(&rp->srv, c->algo, sha) < 0) {
        snprintf(why, why_cap, "SCRIPT LOAD failed");
        return -1;
    }
    return 0;
}

/*
 * Adds up the callers' counts and latencies into 'r', and frees their
 * latencies. Returns 0, or -1 with the first caller's failure in 'why'.
 */
static int run_collect(caller *w, unsigned threads, run_result *r, char *why,
                       size_t why_cap)
{
    int err = 0;

    for (unsigned t = 0; t < threads; t++) {
        if (w[t].why[0] != '\0' && err == 0) {
            snprintf(why, why_cap, "%s", w[t].why);
            err = -1;
        }
        if (w[t].elapsed_s > 0)
            r->rate += (double)w[t].calls / w[t].elapsed_s;
        r->calls += (double)w[t].calls;
        r->admitted += (double)w[t].admitted;
    }
    latencies(w, threads, r);
    for (unsigned t = 0; t < threads; t++)
        free(w[t].lat.ns);
    return err;
}

/* Starts caller 't' of 'w': its inputs, then its thread (or exits). */
static void caller_start(caller *w, unsigned t, pthread_t *tid,
                         const caller *proto)
{
    w[t] = *proto;
    w[t].rng = ((uint64_t)(t + 1) * 0x9e3779b97f4a7c15ULL ^
                (uint64_t)now_ns()) | 1;
    if (pthread_create(&tid[t], NULL, caller_main, &w[t]) != 0) {
        fprintf(stderr, "sluice_bench_server: cannot start a thread\n");
        exit(1);
    }
}

/*
 * Runs an in-process case once: its callers on a fresh store (sluice) or
 * connections of their own (raw), sluice's on the ids 'ids', raw ones on
 * the server keys 'skeys'. Returns 0, or -1 with 'why' filled.
 */
int run_threads(report *rp, bench_case *c, const keyset *ids,
                const keyset *skeys, run_result *r, char *why,
                size_t why_cap)
{
    bool lib = c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY;
    sluice_limit limit = SLUICE_LIMIT(c->algo, bench_max_for(c->algo, c->max),
                                      c->window_ms);
    sluice_store *store = NULL;
    caller *w = calloc(c->threads, sizeof(*w));
    caller proto;
    pthread_t *tid = calloc(c->threads, sizeof(*tid));
    pthread_barrier_t ready, go;
    double srv0, cli0, cs0, calls, usec;
    char sha[41] = "";
    int err;

    if (w == NULL || tid == NULL)
        snprintf(why, why_cap, "out of memory");
    if (w == NULL || tid == NULL ||
        run_prepare(rp, c, &store, sha, why, why_cap) < 0) {
        free(w);
        free(tid);
        return -1;
    }
    pthread_barrier_init(&ready, NULL, c->threads + 1);
    pthread_barrier_init(&go, NULL, c->threads + 1);
    proto = (caller){.c = c, .srv = &rp->srv, .store = store, .sha = sha,
                     .limit = &limit, .keys = lib ? ids : skeys,
                     .seconds = rp->o.seconds, .ready = &ready, .go = &go};
    for (unsigned t = 0; t < c->threads; t++)
        caller_start(w, t, tid, &proto);
    pthread_barrier_wait(&ready);
    memset(r, 0, sizeof(*r));
    srv0 = meter_start(&rp->srv);
    cli0 = rusage_s(RUSAGE_SELF);
    cs0 = rusage_cs(RUSAGE_SELF);
    pthread_barrier_wait(&go);
    for (unsigned t = 0; t < c->threads; t++)
        pthread_join(tid[t], NULL);
    r->cli_cpu_s = rusage_s(RUSAGE_SELF) - cli0;
    r->cli_cs = rusage_cs(RUSAGE_SELF) - cs0;
    meter_stop(&rp->srv, srv0, c->cmd, r);
    err = run_collect(w, c->threads, r, why, why_cap);
    r->key_calls = -1;
    if (lib && c->algo == SLUICE_FIXED) {
        stats_read(&rp->srv, "incrby", &calls, &usec);
        r->key_calls = calls;
    }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    sluice_store_free(store);
    free(w);
    free(tid);
    return err;
}
