/*
 * srvtime.c - "Server time per decision": what one decision costs the
 * server, sent each way it can be, beside a bare INCR in the same run, for
 * every algorithm of the library (SLUICE_ALGO_MAP, the registry
 * sluice__algos: a new algorithm gets its rows without a change here):
 *
 *   module   SLUICE.HIT key ALGO max window (the native module, sluice.so)
 *   script   EVALSHA of the algorithm's script, with the ARGV the server
 *            store sends (src/algo/prelude.lua): count it, the server's
 *            clock, a token, a cost of 1 (the token is "t" and a number
 *            below 1000, 13 characters, as module_bench.sh sent it: the
 *            store's is 17 or more, so a sliding log's members are a few
 *            bytes shorter here)
 *   fcall    FCALL sluice_hit 1 key ALGO max window (the Functions library)
 *   incr     INCR key, the reference
 *
 * Every row is sent the same way, by redis-benchmark -c 50 -r 1000: N calls
 * (--quick: fewer) on the same 1000 keys "sluice:{kNNNNNNNNNNNN}:ALGO", a
 * limit of 100 per 1 s window, the keys removed before and after (FLUSHALL
 * on the server started here; on one --store names, an UNLINK of the
 * row's 1000 keys, nothing else, though the FCALL rows load the Functions
 * library there, FUNCTION LOAD REPLACE, as `sluice functions --load`
 * does). For each row:
 *
 *   usec     INFO commandstats after CONFIG RESETSTAT: the command's usec
 *            over its calls (its usec_per_call): the server's own time
 *   cpu      INFO cpu used_cpu_user + used_cpu_sys, before and after, over
 *            the same calls: the whole server, network I/O included
 *   bytes    MEMORY USAGE averaged over up to 200 of the keys left by a
 *            second pass of SRV_MEM_CALLS calls with a 1 h window
 *   rps      redis-benchmark's own requests per second (the client side)
 *
 * and the ratios of usec beside their targets: the fixed window through the
 * module over INCR (at most 2x), each algorithm's script over its module
 * (at least 3x), and FCALL over the module (no target). One run; it never
 * fails on a figure, and a row that cannot run says why (no module on the
 * server, no glue for the algorithm, SCRIPT or FUNCTION LOAD refused,
 * redis-benchmark missing or failing).
 */
#include "bench_server.h"

#include <string.h>
#include <unistd.h>

#define SRV_CLIENTS 50u
#define SRV_KEYS 1000u          /* redis-benchmark -r: __rand_int__ < 1000 */
#define SRV_MAX "100"           /* per window: most calls admitted */
#define SRV_WINDOW_MS 1000u
#define SRV_CALLS 100000ul      /* per row, timed */
#define SRV_QUICK_CALLS 10000ul
#define SRV_MEM_CALLS 2000ul    /* per row, for the memory */
#define SRV_MEM_WINDOW_MS 3600000u /* the keys stay while measured */
#define SRV_MEM_SAMPLE 200      /* keys measured at most */
#define TARGET_MODULE_OVER_INCR_MAX 2.0
#define TARGET_SCRIPT_OVER_MODULE_MIN 3.0

static const char *const way_names[SRV_WAYS] = {"module", "script", "fcall"};
static const char *const way_cmds[SRV_WAYS] = {"SLUICE.HIT", "EVALSHA",
                                               "FCALL"};

/* The row of 'algo' sent as 'way' (row 0 is INCR). */
static int row_of(int algo, int way)
{
    return 1 + algo * SRV_WAYS + way;
}

/* The command the row sends, as INFO commandstats names it. */
static const char *row_cmd(const srvtime_row *r)
{
    static const char *const stat[SRV_WAYS] = {"sluice.hit", "evalsha",
                                               "fcall"};

    return r->way < 0 ? "incr" : stat[r->way];
}

/* The last part of the row's keys: the algorithm's name, or "incr". */
static const char *row_suffix(const srvtime_row *r)
{
    return r->algo < 0 ? "incr" : sluice_algo_name((sluice_algo)r->algo);
}

/* ---- The rows ------------------------------------------------------------ */

/*
 * The rows, each "skipped (--only)" unless --only names it, or not
 * available when redis-benchmark cannot run.
 */
void srvtime_build(report *rp)
{
    srvtime *st = &rp->st;

    memset(st, 0, sizeof(*st));
    st->calls = rp->o.quick ? SRV_QUICK_CALLS : SRV_CALLS;
    for (int i = 0; i < NSRVTIME_ROWS; i++) {
        srvtime_row *r = &st->rows[i];

        r->algo = i == 0 ? -1 : (i - 1) / SRV_WAYS;
        r->way = i == 0 ? -1 : (i - 1) % SRV_WAYS;
        if (i == 0)
            snprintf(r->id, sizeof(r->id), "srvtime_incr");
        else
            snprintf(r->id, sizeof(r->id), "srvtime_%s_%s",
                     sluice_algo_name((sluice_algo)r->algo),
                     way_names[r->way]);
        r->usec = r->cpu_us = r->bytes = r->rps = -1;
        if (!case_selected(rp->o.only, r->id))
            snprintf(r->unavailable, sizeof(r->unavailable),
                     "skipped (--only)");
        else if (!rp->rb_ok)
            snprintf(r->unavailable, sizeof(r->unavailable), "%s",
                     rp->rb_why);
    }
}

/* Marks every row of 'way' still to run as unavailable, for 'why'. */
static void way_unavailable(report *rp, int way, const char *why)
{
    for (int a = 0; a < BENCH_ALGO_N; a++) {
        srvtime_row *r = &rp->st.rows[row_of(a, way)];

        if (r->unavailable[0] == '\0')
            snprintf(r->unavailable, sizeof(r->unavailable), "%s", why);
    }
}

/* Whether a row of 'way' is still to run. */
static bool way_wanted(const report *rp, int way)
{
    for (int a = 0; a < BENCH_ALGO_N; a++)
        if (rp->st.rows[row_of(a, way)].unavailable[0] == '\0')
            return true;
    return false;
}

/*
 * The module rows: the server must answer SLUICE.VERSION as this version's
 * sluice.so, and SLUICE.HIT ... PEEK for each algorithm (its glue).
 */
static void module_check(report *rp)
{
    static const char want[] = "sluice.so " SLUICE_VERSION " ";
    redisReply *r = ctl_cmd(&rp->srv, "SLUICE.VERSION");

    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        strncmp(r->str, want, strlen(want)) == 0) {
        snprintf(rp->st.module, sizeof(rp->st.module), "%s", r->str);
    } else {
        char why[256];

        snprintf(why, sizeof(why), "the server has no sluice module %s "
                 "(SLUICE.VERSION: %.120s)", SLUICE_VERSION,
                 r == NULL ? "no answer"
                 : r->type == REDIS_REPLY_ERROR ||
                         r->type == REDIS_REPLY_STRING
                     ? r->str
                     : "another answer");
        way_unavailable(rp, SRV_MODULE, why);
    }
    if (r != NULL)
        freeReplyObject(r);
    for (int a = 0; a < BENCH_ALGO_N && rp->st.module[0] != '\0'; a++) {
        srvtime_row *row = &rp->st.rows[row_of(a, SRV_MODULE)];
        const char *name = sluice_algo_name((sluice_algo)a);

        if (row->unavailable[0] != '\0')
            continue;
        r = ctl_cmd(&rp->srv, "SLUICE.HIT sluice:{srvtime:probe}:%s %s 100 "
                    "1000 PEEK", name, name);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            snprintf(row->unavailable, sizeof(row->unavailable),
                     "SLUICE.HIT %s: %.200s", name,
                     r == NULL ? "no answer" : r->str);
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* The Functions library, loaded (FUNCTION LOAD REPLACE) for the FCALL rows. */
static void functions_check(report *rp)
{
    sluice_store *store = NULL;
    char url[1200], why[256];
    size_t servers;

    if (!way_wanted(rp, SRV_FCALL))
        return;
    sluice_url_for(&rp->srv, 1, NULL, url, sizeof(url));
    if (sluice_store_open(&store, url, NULL) < 0 ||
        sluice_functions_load(store, &servers) < 0) {
        snprintf(why, sizeof(why), "the server refused the Functions "
                 "library: %.200s", sluice_last_error());
        way_unavailable(rp, SRV_FCALL, why);
    }
    sluice_store_free(store);
}

/* Each algorithm's script, loaded (SCRIPT LOAD) for the script rows. */
static void scripts_check(report *rp, char sha[][41])
{
    for (int a = 0; a < BENCH_ALGO_N; a++) {
        srvtime_row *r = &rp->st.rows[row_of(a, SRV_SCRIPT)];

        if (r->unavailable[0] == '\0' &&
            raw_script_load(&rp->srv, (sluice_algo)a, sha[a]) < 0)
            snprintf(r->unavailable, sizeof(r->unavailable),
                     "the server refused SCRIPT LOAD of %s's script",
                     sluice_algo_name((sluice_algo)a));
    }
}

/* ---- Running a row ------------------------------------------------------- */

/* The words of a row's command, and the texts they point to. */
typedef struct row_words {
    char key[96], window[24];
    const char *w[16];
} row_words;

/* The command of row 'r' with a window of 'window_ms' ('sha': its script). */
static void row_command(const srvtime_row *r, const char *sha,
                        unsigned window_ms, row_words *rw)
{
    const char *algo = row_suffix(r);
    int n = 0;

    snprintf(rw->key, sizeof(rw->key), "sluice:{k__rand_int__}:%s", algo);
    snprintf(rw->window, sizeof(rw->window), "%u", window_ms);
    if (r->way < 0) {
        rw->w[n++] = "INCR";
        rw->w[n++] = rw->key;
    } else if (r->way == SRV_SCRIPT) {
        const char *args[] = {"EVALSHA", sha, "1", rw->key, SRV_MAX,
                              rw->window, "1", "", "t__rand_int__", "1"};

        for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
            rw->w[n++] = args[i];
    } else {
        if (r->way == SRV_FCALL) {
            rw->w[n++] = "FCALL";
            rw->w[n++] = "sluice_hit";
            rw->w[n++] = "1";
        } else {
            rw->w[n++] = "SLUICE.HIT";
        }
        rw->w[n++] = rw->key;
        rw->w[n++] = algo;
        rw->w[n++] = SRV_MAX;
        rw->w[n++] = rw->window;
    }
    rw->w[n] = NULL;
}

/* The name of key 'i' of a row ("sluice:{k000000000007}:fixed"). */
static int row_key(const srvtime_row *r, unsigned i, char *out, size_t cap)
{
    return snprintf(out, cap, "sluice:{k%012u}:%s", i, row_suffix(r));
}

/*
 * Removes the row's keys: FLUSHALL on the server started here, else an
 * UNLINK of each of its 1000 names (pipelined), leaving the rest alone.
 */
static void row_clear(report *rp, const srvtime_row *r)
{
    redisContext *c = rp->srv.ctl;
    char key[96];

    if (rp->srv.own) {
        server_flush(&rp->srv);
        return;
    }
    for (unsigned i = 0; i < SRV_KEYS; i++) {
        int len = row_key(r, i, key, sizeof(key));

        redisAppendCommand(c, "UNLINK %b", key, (size_t)len);
    }
    for (unsigned i = 0; i < SRV_KEYS; i++) {
        redisReply *reply = NULL;

        if (redisGetReply(c, (void **)&reply) != REDIS_OK)
            return;
        freeReplyObject(reply);
    }
}

/* The mean MEMORY USAGE of up to SRV_MEM_SAMPLE of the row's keys; -1. */
static double row_memory(report *rp, const srvtime_row *r)
{
    double sum = 0;
    int n = 0;
    char key[96];

    for (unsigned i = 0; i < SRV_KEYS && n < SRV_MEM_SAMPLE; i++) {
        int len = row_key(r, i, key, sizeof(key));
        redisReply *reply = ctl_cmd(&rp->srv, "MEMORY USAGE %b SAMPLES 0",
                                    key, (size_t)len);

        if (reply == NULL)
            return -1;
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0) {
            sum += (double)reply->integer;
            n++;
        }
        freeReplyObject(reply);
    }
    return n > 0 ? sum / n : -1;
}

/*
 * The timed pass of row 'r': its N calls after CONFIG RESETSTAT, between
 * two readings of INFO cpu. Returns 0, or -1 with r->unavailable filled.
 */
static int row_timed(report *rp, srvtime_row *r, const char *sha)
{
    row_words rw;
    double cpu0, cpu1, calls, usec;
    char why[256];

    row_clear(rp, r);
    row_command(r, sha, SRV_WINDOW_MS, &rw);
    stats_reset(&rp->srv);
    cpu0 = server_cpu_s(&rp->srv);
    if (rb_command(rp, SRV_CLIENTS, SRV_KEYS, rp->st.calls, rw.w, &r->rps,
                   why, sizeof(why)) < 0) {
        snprintf(r->unavailable, sizeof(r->unavailable), "%s", why);
        return -1;
    }
    cpu1 = server_cpu_s(&rp->srv);
    stats_read(&rp->srv, row_cmd(r), &calls, &usec);
    if (calls <= 0) {
        snprintf(r->unavailable, sizeof(r->unavailable), "INFO commandstats "
                 "counted no %s call", row_cmd(r));
        return -1;
    }
    r->calls = calls;
    r->usec = usec / calls;
    r->cpu_us = cpu0 >= 0 && cpu1 >= 0 ? (cpu1 - cpu0) * 1e6 / calls : -1;
    return 0;
}

/*
 * Row 'r': the timed pass, then SRV_MEM_CALLS calls with a 1 h window on
 * emptied keys, whose mean size is its bytes per key; its keys removed.
 */
static void row_run(report *rp, srvtime_row *r, const char *sha)
{
    row_words rw;
    double rps;
    char why[256];

    if (row_timed(rp, r, sha) == 0) {
        row_clear(rp, r);
        row_command(r, sha, SRV_MEM_WINDOW_MS, &rw);
        if (rb_command(rp, SRV_CLIENTS, SRV_KEYS, SRV_MEM_CALLS, rw.w, &rps,
                       why, sizeof(why)) == 0)
            r->bytes = row_memory(rp, r);
        r->ran = true;
    }
    row_clear(rp, r);
}

/*
 * Runs the rows that are to run, after finding which can: the module's
 * (SLUICE.VERSION, each algorithm's glue), the scripts' (SCRIPT LOAD),
 * FCALL's (FUNCTION LOAD). A row that cannot run, or fails, says why.
 */
void srvtime_run(report *rp)
{
    char sha[BENCH_ALGO_N][41];
    bool tty = isatty(STDERR_FILENO);
    int todo = 0, done = 0;

    memset(sha, 0, sizeof(sha));
    if (way_wanted(rp, SRV_MODULE))
        module_check(rp);
    if (way_wanted(rp, SRV_SCRIPT))
        scripts_check(rp, sha);
    functions_check(rp);
    for (int i = 0; i < NSRVTIME_ROWS; i++)
        todo += rp->st.rows[i].unavailable[0] == '\0';
    for (int i = 0; i < NSRVTIME_ROWS; i++) {
        srvtime_row *r = &rp->st.rows[i];

        if (r->unavailable[0] != '\0')
            continue;
        fprintf(stderr, "%sserver time per decision %d/%d: %s%s",
                tty ? "\r\033[K" : "", ++done, todo, r->id,
                tty ? "" : "\n");
        row_run(rp, r, r->algo < 0 ? "" : sha[r->algo]);
    }
}

/* ---- Ratios -------------------------------------------------------------- */

/* The ratios, each of one row's usec over another's. */
typedef struct srv_ratio {
    char name[80];     /* for --json */
    char label[48];    /* for the table */
    int num, den;      /* rows */
    double min, max;   /* the target: value >= min, or <= max; 0: none */
} srv_ratio;

#define NSRV_RATIOS (1 + 2 * BENCH_ALGO_N)

/* Module fixed / INCR; then each algorithm's script / module, FCALL / module. */
static void ratios_get(srv_ratio q[NSRV_RATIOS])
{
    int n = 0;

    q[n++] = (srv_ratio){"srvtime_fixed_module_over_incr", "module / INCR",
                         row_of(SLUICE_FIXED, SRV_MODULE), 0, 0,
                         TARGET_MODULE_OVER_INCR_MAX};
    for (int a = 0; a < BENCH_ALGO_N; a++) {
        const char *name = sluice_algo_name((sluice_algo)a);

        q[n] = (srv_ratio){"", "script / module", row_of(a, SRV_SCRIPT),
                           row_of(a, SRV_MODULE),
                           TARGET_SCRIPT_OVER_MODULE_MIN, 0};
        snprintf(q[n++].name, sizeof(q[0].name),
                 "srvtime_%s_script_over_module", name);
        q[n] = (srv_ratio){"", "FCALL / module", row_of(a, SRV_FCALL),
                           row_of(a, SRV_MODULE), 0, 0};
        snprintf(q[n++].name, sizeof(q[0].name),
                 "srvtime_%s_fcall_over_module", name);
    }
}

/* A ratio's value; -1 when either row did not run. */
static double ratio_value(const report *rp, const srv_ratio *q)
{
    const srvtime_row *a = &rp->st.rows[q->num], *b = &rp->st.rows[q->den];

    if (!a->ran || !b->ran || b->usec <= 0)
        return -1;
    return a->usec / b->usec;
}

/* Whether 'v' meets the ratio's target (true when it has none). */
static bool ratio_met(const srv_ratio *q, double v)
{
    if (q->min > 0)
        return v >= q->min;
    return q->max <= 0 || v <= q->max;
}

/* Why a ratio is unknown: the reason of a row that did not run. */
static const char *ratio_missing(const report *rp, const srv_ratio *q)
{
    const srvtime_row *a = &rp->st.rows[q->num];

    return a->ran ? rp->st.rows[q->den].unavailable : a->unavailable;
}

/* ---- The table ----------------------------------------------------------- */

static void text_row(const srvtime_row *r)
{
    char buf[32];

    if (r->way <= 0)
        printf("  %-16s", r->algo < 0 ? "INCR (bare)" : row_suffix(r));
    else
        printf("  %-16s", "");
    printf(" %-10s", r->way < 0 ? "INCR" : way_cmds[r->way]);
    if (!r->ran) {
        printf(" not available: %s\n", r->unavailable);
        return;
    }
    print_num(r->usec, 8, 2);
    print_num(r->cpu_us, 8, 2);
    print_num(r->bytes, 9, 0);
    printf(" %10s %9.0f\n", grouped(buf, sizeof(buf), r->rps), r->calls);
}

static void text_ratios(const report *rp)
{
    srv_ratio q[NSRV_RATIOS];

    ratios_get(q);
    printf("Ratios of the server's \u00b5s per call:\n");
    for (int i = 0; i < NSRV_RATIOS; i++) {
        double v = ratio_value(rp, &q[i]);
        const srvtime_row *num = &rp->st.rows[q[i].num];

        printf("  %-16s %-16s", i == 0 || num->way == SRV_SCRIPT
                                     ? row_suffix(num) : "", q[i].label);
        if (v < 0) {
            printf(" not measured: %s\n", ratio_missing(rp, &q[i]));
            continue;
        }
        printf(" %6.2f\u00d7", v);
        if (q[i].min > 0 || q[i].max > 0)
            printf(" \u2014 target %s %.0f\u00d7: %s",
                   q[i].min > 0 ? "\u2265" : "\u2264",
                   q[i].min > 0 ? q[i].min : q[i].max,
                   ratio_met(&q[i], v) ? "met" : "not met");
        printf("\n");
    }
}

/* The section, when a row of it was asked for (not all skipped). */
void srvtime_text(const report *rp)
{
    const srvtime *st = &rp->st;
    bool any = false;

    for (int i = 0; i < NSRVTIME_ROWS; i++)
        any |= strcmp(st->rows[i].unavailable, "skipped (--only)") != 0;
    if (!any)
        return;
    printf("\nServer time per decision (%s %s%s%s; every row "
           "sent by redis-benchmark -c %u -r %u\n-n %lu on the same %u "
           "keys, emptied between rows; a limit of %s per %u ms window; "
           "one run)\n", rp->srv.name, rp->srv.version,
           st->module[0] ? ", " : "",
           st->module, SRV_CLIENTS, SRV_KEYS, st->calls, SRV_KEYS, SRV_MAX,
           SRV_WINDOW_MS);
    printf("  %-16s %-10s %8s %8s %9s %10s %9s\n", "algorithm", "sent as",
           "\u00b5s/call", "cpu \u00b5s", "bytes/key", "rps", "calls");
    for (int i = 0; i < NSRVTIME_ROWS; i++)
        text_row(&st->rows[i]);
    printf("\u00b5s/call: INFO commandstats usec / calls of the command "
           "(after CONFIG RESETSTAT), the server's own\ntime; cpu \u00b5s: "
           "INFO cpu used_cpu_user + used_cpu_sys over the same calls (the "
           "whole server, I/O\nincluded); bytes/key: MEMORY USAGE, the mean "
           "over up to %d of the keys left by %lu more calls\nwith a 1 h "
           "window; rps: redis-benchmark's own figure (the client side). "
           "EVALSHA: the algorithm's\nscript, sent as the server store "
           "sends it; FCALL: sluice_hit of the Functions library.\n",
           SRV_MEM_SAMPLE, SRV_MEM_CALLS);
    text_ratios(rp);
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_row(const srvtime_row *r)
{
    printf("{\"id\": \"%s\", \"algo\": ", r->id);
    if (r->algo < 0)
        printf("null");
    else
        json_string(row_suffix(r));
    printf(", \"command\": \"%s\", \"available\": %s", row_cmd(r),
           r->ran ? "true" : "false");
    if (!r->ran) {
        printf(", \"why\": ");
        json_string(r->unavailable);
        printf("}");
        return;
    }
    printf(", \"calls\": %.0f, \"usec_per_call\": ", r->calls);
    json_number(r->usec);
    printf(", \"cpu_us_per_call\": ");
    json_number(r->cpu_us);
    printf(", \"bytes_per_key\": ");
    json_number(r->bytes);
    printf(", \"rps\": ");
    json_number(r->rps);
    printf("}");
}

static void json_ratio(const report *rp, const srv_ratio *q)
{
    double v = ratio_value(rp, q);

    printf("{\"name\": \"%s\", \"value\": ", q->name);
    json_number(v);
    if (q->min > 0)
        printf(", \"target_min\": %.1f", q->min);
    if (q->max > 0)
        printf(", \"target_max\": %.1f", q->max);
    if (q->min > 0 || q->max > 0)
        printf(", \"met\": %s", v >= 0 && ratio_met(q, v) ? "true"
                                                          : "false");
    printf("}");
}

/* ', "server_time": {...}': the setting, the rows and the ratios. */
void srvtime_json(const report *rp)
{
    srv_ratio q[NSRV_RATIOS];

    printf(",\n  \"server_time\": {\"clients\": %u, \"keys\": %u, "
           "\"max\": %s, \"window_ms\": %u, \"calls\": %lu, "
           "\"memory_calls\": %lu, \"memory_window_ms\": %u, \"module\": ",
           SRV_CLIENTS, SRV_KEYS, SRV_MAX, SRV_WINDOW_MS, rp->st.calls,
           SRV_MEM_CALLS, SRV_MEM_WINDOW_MS);
    json_string(rp->st.module);
    printf(",\n    \"rows\": [");
    for (int i = 0; i < NSRVTIME_ROWS; i++) {
        printf("%s\n      ", i ? "," : "");
        json_row(&rp->st.rows[i]);
    }
    printf("\n    ],\n    \"ratios\": [");
    ratios_get(q);
    for (int i = 0; i < NSRV_RATIOS; i++) {
        printf("%s\n      ", i ? "," : "");
        json_ratio(rp, &q[i]);
    }
    printf("\n    ]}");
}
