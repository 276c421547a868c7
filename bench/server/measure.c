/*
 * measure.c - what the server spends, measured without timing pressure once
 * the cases have run: its CPU per decision of each algorithm from INFO
 * commandstats (N decisions from 1 caller after CONFIG RESETSTAT: EVALSHA's
 * usec, the commands the script ran, and a bare INCR's, sent N times by
 * hiredis), the floor of an empty script, and the memory of a key (MEMORY
 * USAGE) of each algorithm, the sliding log at 100, 1,000 and 10,000
 * entries.
 */
#include "bench_server.h"

#include <string.h>
#include <unistd.h>

/* Empties the server, then opens a store on it of one connection. */
static int store_open_fresh(report *rp, sluice_store **store)
{
    char url[1200];

    server_flush(&rp->srv);
    sluice_url_for(&rp->srv, 1, NULL, url, sizeof(url));
    return sluice_store_open(store, url, NULL);
}

/* ---- CPU per decision ---------------------------------------------------- */

/*
 * 'n' decisions of 'limit' from one caller, on the first of the ids or on
 * row->keys of them drawn from '*rng': by sluice_hit(), or (row->batch > 1)
 * by sluice_hit_many() in batches of row->batch.
 */
static int cpu_decide(sluice_store *store, const sluice_limit *limit,
                      const cpu_row *row, const keyset *ids, unsigned n,
                      uint64_t *rng)
{
    int err = 0;

    for (unsigned i = 0; i < n && err == 0; i += row->batch) {
        sluice_request q[CPU_BATCH];
        unsigned m = row->batch < n - i ? row->batch : n - i;

        for (unsigned j = 0; j < m; j++) {
            size_t k = row->keys > 1 ? pick_key(rng, row->keys) : 0;

            q[j] = (sluice_request){key_at(ids, k), key_len(ids, k), 1, 0,
                                    {0}};
        }
        if (m == 1)
            err = sluice_hit(&q[0].decision, store, limit, q[0].key,
                             q[0].key_len, 1);
        else
            err = sluice_hit_many(store, limit, q, m);
    }
    return err;
}

/*
 * The sluice part of a row: N decisions of row->algo after CONFIG
 * RESETSTAT, on a fresh store of one connection, warmed up.
 */
static int cpu_sluice(report *rp, cpu_row *row, uint64_t *rng)
{
    sluice_limit limit = SLUICE_LIMIT(
        row->algo, bench_max_for(row->algo, ADMIT_MAX), WINDOW_MS);
    const keyset *ids = &rp->keys.ids;
    unsigned n = rp->o.cpu_calls;
    sluice_store *store = NULL;
    double calls, usec, srv0, srv1;
    int err;

    if ((err = store_open_fresh(rp, &store)) < 0)
        return -1;
    for (unsigned i = 0; i < WARM_CALLS && err == 0; i++) {
        sluice_decision d;

        err = sluice_hit(&d, store, &limit, key_at(ids, 0), key_len(ids, 0),
                         1);
    }
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    if (err == 0)
        err = cpu_decide(store, &limit, row, ids, n, rng);
    srv1 = server_cpu_s(&rp->srv);
    sluice_store_free(store);
    if (err < 0)
        return -1;
    stats_read(&rp->srv, "evalsha", &calls, &usec);
    row->evalsha_us = calls > 0 ? usec / n : -1;
    stats_read(&rp->srv, NULL, &calls, &usec);
    row->inner_us = usec / n;
    row->info_us = (srv1 - srv0) * 1e6 / n;
    return 0;
}

/* The reference of a row: N bare INCRs by hiredis on as many keys. */
static int cpu_incr(report *rp, cpu_row *row, uint64_t *rng)
{
    const keyset *keys = &rp->keys.incr;
    unsigned n = rp->o.cpu_calls;
    double calls, usec, srv0, srv1;
    redisContext *c;

    if ((c = raw_connect(&rp->srv)) == NULL)
        return -1;
    server_flush(&rp->srv);
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    for (unsigned i = 0; i < n; i++) {
        size_t k = row->keys > 1 ? pick_key(rng, row->keys) : 0;
        const char *argv[2] = {"INCR", key_at(keys, k)};
        size_t lens[2] = {4, key_len(keys, k)};
        redisReply *r = redisCommandArgv(c, 2, argv, lens);

        if (r == NULL) {
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    srv1 = server_cpu_s(&rp->srv);
    redisFree(c);
    stats_read(&rp->srv, "incr", &calls, &usec);
    row->incr_us = calls > 0 ? usec / calls : -1;
    row->incr_info_us = (srv1 - srv0) * 1e6 / n;
    return 0;
}

/*
 * N decisions of row->algo from one caller on row->keys keys, after CONFIG
 * RESETSTAT, by sluice_hit() or (row->batch > 1) by sluice_hit_many() in
 * batches of row->batch; then N bare INCRs by hiredis on as many keys.
 */
static int cpu_measure(report *rp, cpu_row *row)
{
    uint64_t rng = 0x2545f4914f6cdd1dULL; /* one sequence for both */

    if (cpu_sluice(rp, row, &rng) < 0)
        return -1;
    return cpu_incr(rp, row, &rng);
}

/*
 * The floor of any decision made by one script on this server: N EVALSHAs
 * of a script that only answers {1, 0, 0, 0}, with the KEYS and ARGV a
 * sluice script is sent. Sets its usec_per_call and INFO cpu per call.
 */
static int empty_script_measure(report *rp, double *usec_per_call,
                                double *cpu_us)
{
    static const char empty[] = "return {1, 0, 0, 0}";
    redisReply *r = ctl_cmd(&rp->srv, "SCRIPT LOAD %s", empty);
    const keyset *skeys = &rp->keys.fixed;
    char sha[41], max[24], window[24];
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    unsigned n = rp->o.cpu_calls;
    caller w;
    double calls, usec, srv0, srv1;
    int err = 0;

    if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
    memset(&w, 0, sizeof(w));
    w.sha = sha;
    w.keys = skeys;
    if ((w.ctx = raw_connect(&rp->srv)) == NULL)
        return -1;
    snprintf(max, sizeof(max), "%llu", (unsigned long long)ADMIT_MAX);
    snprintf(window, sizeof(window), "%u", WINDOW_MS);
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    for (unsigned i = 0; i < n && err == 0; i++)
        err = raw_evalsha(&w, pick_key(&rng, skeys->n), max, window) < 0;
    srv1 = server_cpu_s(&rp->srv);
    redisFree(w.ctx);
    if (err)
        return -1;
    stats_read(&rp->srv, "evalsha", &calls, &usec);
    *usec_per_call = calls > 0 ? usec / calls : -1;
    *cpu_us = (srv1 - srv0) * 1e6 / n;
    return 0;
}

/* ---- Memory per key ------------------------------------------------------ */

/* MEMORY USAGE of 'key' (all of a sorted set's members: SAMPLES 0). */
static double memory_usage(server *s, const char *key, size_t len)
{
    redisReply *r = ctl_cmd(s, "MEMORY USAGE %b SAMPLES 0", key, len);
    double v = -1;

    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = (double)r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/*
 * The key of row 'row' (id "bench:mem:ROW") after 'hits' admitted hits of
 * 'algo', into 'out'; its window (an hour for the logs, else a minute)
 * lets nothing expire while it is measured.
 */
/* The logs: a key that keeps an entry per admitted unit. */
static bool is_log(sluice_algo algo)
{
    return algo == SLUICE_SLIDING_LOG || algo == SLUICE_COMPACT_LOG;
}

static int memory_row(report *rp, sluice_store *store, sluice_algo algo,
                      unsigned hits, int row, mem_row *out)
{
    /* 10^6 admits every hit here */
    sluice_limit limit = SLUICE_LIMIT(algo, 1000000u,
                                      is_log(algo) ? 3600000u : 60000u);
    char id[32], key[96];
    int idlen = snprintf(id, sizeof(id), "bench:mem:%d", row), err = 0;
    size_t klen;

    for (unsigned h = 0; h < hits && err == 0; h++) {
        sluice_decision d;

        err = sluice_hit(&d, store, &limit, id, (size_t)idlen, 1);
    }
    snprintf(out->what, sizeof(out->what), "%s", sluice_algo_name(algo));
    out->entries = is_log(algo) ? hits : 0;
    out->bytes = raw_key_build(key, sizeof(key), &klen, id, (size_t)idlen,
                               sluice_algo_name(algo)) < 0
                     ? -1
                     : memory_usage(&rp->srv, key, klen);
    return err;
}

/*
 * One key per row: one admitted hit for each algorithm but the logs, and
 * 100, 1,000 and 10,000 admitted hits on each log; a bare counter
 * (SET, PEXPIRE) as a reference. Key names count too:
 * "sluice:{bench:mem:N}:ALGO".
 */
static int memory_measure(report *rp, mem_row *rows)
{
    static const unsigned log_entries[] = {100, 1000, 10000};
    sluice_store *store = NULL;
    int err, row = 0;
    redisReply *r;

    if ((err = store_open_fresh(rp, &store)) < 0)
        return -1;
    for (int a = 0; a < BENCH_ALGO_N && err == 0; a++) {
        unsigned n_sizes = is_log((sluice_algo)a) ? 3 : 1;

        for (unsigned s = 0; s < n_sizes && err == 0; s++, row++)
            err = memory_row(rp, store, (sluice_algo)a,
                             is_log((sluice_algo)a) ? log_entries[s] : 1,
                             row, &rows[row]);
    }
    sluice_store_free(store);
    if (err < 0)
        return -1;
    r = ctl_cmd(&rp->srv, "SET sluice:{bench:mem:incr}:incr 1 PX 60000");
    if (r != NULL)
        freeReplyObject(r);
    snprintf(rows[row].what, sizeof(rows[row].what),
             "bare counter (SET n PX)");
    rows[row].entries = 0;
    rows[row].bytes = memory_usage(&rp->srv, "sluice:{bench:mem:incr}:incr",
                                   28);
    return 0;
}

/* ---- Both ---------------------------------------------------------------- */

/* Says on stderr what is being measured (over the last line on a tty). */
static void stage(const char *what)
{
    bool tty = isatty(STDERR_FILENO);

    fprintf(stderr, "%s%s...%s", tty ? "\r\033[K" : "", what,
            tty ? "" : "\n");
}

/*
 * The server's CPU per decision of each algorithm (a hot key, 10,000 keys,
 * and 10,000 keys in batches), the empty script's, and the memory per key;
 * with --only, each only when named ("server_cpu", "server_memory").
 * Returns 0, or -1 (printed) when sluice fails.
 */
int measure_server(report *rp)
{
    rp->empty_usec = rp->empty_cpu_us = -1;
    if (case_selected(rp->o.only, "server_cpu")) {
        stage("server CPU per decision (commandstats)");
        for (int a = 0; a < BENCH_ALGO_N; a++)
            for (int k = 0; k < 3; k++) {
                cpu_row *row = &rp->cpu[rp->ncpu];

                row->algo = (sluice_algo)a;
                row->keys = k == 0 ? 1 : MANY_KEYS;
                row->batch = k == 2 ? CPU_BATCH : 1;
                if (cpu_measure(rp, row) < 0) {
                    fprintf(stderr, "\nsluice_bench_server: the "
                            "commandstats measurement failed: %s\n",
                            sluice_last_error());
                    return -1;
                }
                rp->ncpu++;
            }
        if (empty_script_measure(rp, &rp->empty_usec, &rp->empty_cpu_us) < 0)
            rp->empty_usec = rp->empty_cpu_us = -1;
    }
    if (!case_selected(rp->o.only, "server_memory"))
        return 0;
    stage("server memory per key (MEMORY USAGE)");
    if (memory_measure(rp, rp->mem) < 0) {
        fprintf(stderr, "\nsluice_bench_server: the memory measurement "
                "failed: %s\n", sluice_last_error());
        return -1;
    }
    rp->nmem = NMEM_ROWS;
    return 0;
}
