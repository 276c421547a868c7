/*
 * text.c - the report as a table: the setting, the main table (four
 * workloads), its legend, the targets, "where the time goes", then the
 * server's CPU per decision and memory per key.
 */
#include "bench_server.h"

#include <string.h>

/* ---- Pieces -------------------------------------------------------------- */

/* The columns 's' takes on a terminal: a UTF-8 character is one. */
static int text_cols(const char *s)
{
    int cols = 0;

    for (; *s != '\0'; s++)
        cols += ((unsigned char)*s & 0xc0) != 0x80;
    return cols;
}

/* 's' left-aligned in 'width' columns. */
static void print_padded(const char *s, int width)
{
    int cols = text_cols(s);

    printf("%s%*s", s, cols < width ? width - cols : 0, "");
}

void print_num(double v, int width, int decimals)
{
    if (v < 0)
        printf(" %*s", width, "-");
    else
        printf(" %*.*f", width, decimals, v);
}

/*
 * Rows that show the server's calls per decision: batches, refusals, and
 * sluice_hit() when its store made other than one call per decision.
 */
static bool shows_cmd_calls(const bench_case *c)
{
    return c->how == HOW_SLUICE_MANY || c->max != ADMIT_MAX ||
           (c->how == HOW_SLUICE && c->med.cmd_calls >= 0 &&
            (c->med.cmd_calls < 0.995 || c->med.cmd_calls > 1.005));
}

static const char *workload_name(const options *o, int w, char *buf,
                                 size_t cap)
{
    snprintf(buf, cap, "%u caller%s, %s", workload_callers(o, w),
             workload_callers(o, w) == 1 ? "" : "s",
             workload_keys(w) == 1 ? "1 hot key" : "10,000 keys");
    return buf;
}

/*
 * The heads of the columns of a table whose first column, 'first', is
 * 'width' wide: the main table's, or (with 'diag') the diagnostics'.
 */
static void print_heads(const char *first, int width, bool diag)
{
    printf("  ");
    print_padded(first, width);
    if (diag)
        printf(" %4s", "call");
    printf(" %5s %10s %5s %8s %8s %7s %6s %7s %5s   %s\n", "conns", "dec/s",
           "sprd", "p50 \u00b5s", "p99 \u00b5s", "srv \u00b5s",
           "cmd \u00b5s", "cli \u00b5s", "cs",
           diag ? "vs sluice" : "sluice / this");
}

/*
 * One table row, its label in 'width' columns: the figures, then "sluice X
 * / this" for a reference, and notes (admitted, the server's calls).
 */
static void print_case_row(const report *rp, int i, bool diag, int width)
{
    const bench_case *c = &rp->cases[i];
    const run_result *m = &c->med;
    const char *sep = "  (";
    char buf[32];

    printf("  ");
    print_padded(c->label, width);
    if (diag)
        printf(" %4u %5u", c->callers, c->connections);
    else
        printf(" %5u", c->connections);
    if (c->nruns == 0) {
        printf("  not available: %s\n", c->unavailable);
        return;
    }
    printf(" %10s %4.0f%%", grouped(buf, sizeof(buf), m->rate),
           c->spread * 100);
    print_num(m->p50_us, 8, 1);
    print_num(m->p99_us, 8, 1);
    print_num(m->srv_cpu_s >= 0 ? m->srv_cpu_s * 1e6 : -1, 7, 1);
    print_num(m->cmd_usec, 6, 2);
    print_num(m->cli_cpu_s * 1e6, 7, 1);
    print_num(m->cli_cs, 5, 2);
    if (c->vs >= 0 && !diag) {
        double q = ratio(rp, c->vs, i);

        if (q >= 0)
            printf("   %s %.2f\u00d7",
                   sluice_algo_name(rp->cases[c->vs].algo), q);
    } else if (c->vs >= 0) {
        double q = ratio(rp, i, c->vs);

        if (q >= 0)
            printf("   %.2f\u00d7", q);
    }
    if (m->admitted < m->calls) {
        printf("%s%.1f%% admitted", sep, m->calls > 0 ? 100 * m->admitted /
                                                            m->calls : 0);
        sep = "; ";
    }
    if (shows_cmd_calls(c) && m->cmd_calls >= 0) {
        bool module = strcmp(c->cmd, "evalsha") != 0; /* SLUICE.HITMANY */

        printf("%s%.3g %s", sep, m->cmd_calls,
               module ? "SLUICE.HITMANY" : "EVALSHA");
        if (m->key_calls >= 0 && !module)
            printf(", %.3g INCRBY", m->key_calls);
        printf(" per decision");
        sep = "; ";
    }
    printf("%s\n", sep[0] == ';' ? ")" : "");
}

/* ---- Sections ------------------------------------------------------------ */

/*
 * What ran where: the server and the run; with 'cases' (a case of the
 * tables was asked for), the cases' setting too: the workload, the
 * references.
 */
static void text_setting(const report *rp, bool cases)
{
    const options *o = &rp->o;

    printf("sluice %s server store benchmark: %s %s on %s:%d (%s%s%s)\n",
           SLUICE_VERSION, rp->srv.name, rp->srv.version, rp->srv.host,
           rp->srv.port, rp->srv.own ? "started here: " : "",
           rp->srv.binary,
           rp->srv.own ? ", --save '' --appendonly no, emptied before each "
                         "case"
                       : "given by --store; not emptied");
    if (cases)
        printf("%.3g s per case, median of %u interleaved run%s; ",
               o->seconds, o->repeats, o->repeats == 1 ? "" : "s");
    printf("%ld CPU%s online, shared by client, server and peers;\n"
           "load average %.2f before, %.2f after; %.0f s in all\n",
           rp->cpus, rp->cpus == 1 ? "" : "s", rp->load_before[0],
           rp->load_after[0], rp->wall_s);
    if (!cases)
        return;
    printf("workload: every call admitted (max 10^12 per %u ms window); "
           "ids \"user:N\", one hot key or %u drawn uniformly;\n"
           "but the \"refused key\" rows: \"%s\", max %u per %u min "
           "window, spent by the warm-up, so every timed call is refused\n",
           WINDOW_MS, MANY_KEYS, REFUSED_ID, REFUSED_MAX,
           REFUSED_WINDOW_MS / 60000);
    printf("sluice: ?pool=%u; %u callers = %u threads sharing one store "
           "handle, each calling sluice_hit(); the decisions\nthat wait "
           "while earlier ones are with the server are combined into one "
           "script call (up to %u rounds at once)\n",
           o->pool, o->callers, o->callers, o->pool);
    printf("hit_many: 1 thread with batches of %u, or 2 threads with "
           "batches of %u each, calling sluice_hit_many()\non the same "
           "store (%u decisions in flight), shown with the %u callers\n",
           o->callers, o->callers / 2 > 0 ? o->callers / 2 : 1, o->callers,
           o->callers);
    printf("references: %s; %s; %s\n\n",
           rp->rb_ok ? rp->rb_version : "redis-benchmark: not available",
           rp->peers[PEER_RLF].ok ? rp->peers[PEER_RLF].versions
                                  : "rate-limiter-flexible: not available",
           rp->peers[PEER_LIMITS].ok ? rp->peers[PEER_LIMITS].versions
                                     : "limits: not available");
}

static void print_legend(void)
{
    printf("dec/s: decisions per second, all callers (median of the runs); "
           "spread: (max - min) / median.\n"
           "p50, p99: latency of one call, in \u00b5s, as its caller saw "
           "it. srv \u00b5s: the server's CPU per decision\n"
           "(INFO cpu: user + system, network I/O included). cmd \u00b5s: "
           "the server's time in the command itself\n"
           "(INFO commandstats usec_per_call of EVALSHA or INCR). cli "
           "\u00b5s: the client's CPU per decision;\n"
           "cs: the client's context switches per decision (getrusage, "
           "voluntary and not).\n"
           "hit_many: one sluice_hit_many() call decides a batch; p50 and "
           "p99 are the batch's latency, given to\n"
           "each of its decisions, and cmd \u00b5s is per script call (a "
           "whole batch when the server gets one\n"
           "call per batch). EVALSHA per decision: the server's EVALSHA "
           "calls over the timed decisions\n"
           "(INFO commandstats): 1 for one call per decision, 1/batch for "
           "one per batch, 0 when the client\n"
           "answers alone (the cache of refused keys). INCRBY per decision "
           "(fixed window): the share of the\n"
           "decisions the server made, as its script runs one INCRBY per "
           "request.\n");
}

/* The main table, its labels 'width' columns wide, then its legend. */
static void text_table(const report *rp, int width)
{
    char wname[64];

    print_heads("implementation", width, false);
    for (int w = 0; w < NWORKLOADS; w++) {
        printf("%s\n", workload_name(&rp->o, w, wname, sizeof(wname)));
        for (int i = 0; i < rp->ncases; i++) {
            const bench_case *c = &rp->cases[i];

            if (!c->diag && c->section == w)
                print_case_row(rp, i, false, width);
        }
    }
    printf("\n");
    print_legend();
}

/* One target: "WHAT LABEL" in 'width' columns, the ratio, met or not. */
static void text_target(const report *rp, const target *t, const char *what,
                        int width)
{
    double q = ratio(rp, t->num, t->ref);

    printf("  %s %-*s", what, width, t->label);
    if (q < 0)
        printf(" not measured: %s\n", ratio_why(rp, t->num, t->ref));
    else
        printf(" %6.2f\u00d7 \u2014 target \u2265 %.1f\u00d7: %s\n", q,
               t->min, q >= t->min ? "met" : "not met");
}

/*
 * The native module: C callers of sluice_hit() on 10,000 keys (fixed
 * window), engine=module and engine=lua, and redis-benchmark INCR -c C, in
 * the same run; their ratios, and the target.
 */
static void text_module(const report *rp, const target *t)
{
    int m = rp->module_case, l = rp->lua_case, rb = t->ref;
    double ml = ratio(rp, m, l), lrb = ratio(rp, l, rb);

    printf("  native module: %u callers, 10,000 keys, sluice_hit() "
           "(SLUICE.HITMANY with engine=module)\n", rp->o.callers);
    text_target(rp, t, "sluice fixed, engine=module", 26);
    if (lrb >= 0)
        printf("    sluice fixed, engine=lua / redis-benchmark INCR -c %u: "
               "%.2f\u00d7\n", rp->o.callers, lrb);
    if (ml >= 0)
        printf("    sluice fixed, engine=module / engine=lua: %.2f\u00d7\n",
               ml);
}

static void text_targets(const report *rp)
{
    unsigned n = rp->o.callers;
    target t[NTARGETS];
    int piped;

    targets_get(rp, t);
    piped = t[TARGET_PIPED_INCR].num;
    printf("\nTargets (fixed window, %u callers, 10,000 keys; the same "
           "server, keys and concurrency)\n", n);
    printf("  unpipelined: %u threads sharing one store, each calling "
           "sluice_hit(), one decision per call\n", n);
    for (int i = TARGET_FIXED_INCR; i <= TARGET_FIXED_LIMITS; i++)
        text_target(rp, &t[i], "sluice fixed", 26);
    printf("  pipelined: sluice_hit_many() batches of %u, from the faster "
           "of the fixed window's hit_many rows:\n    \"%s\"\n",
           n, piped >= 0 ? rp->cases[piped].label : "none");
    for (int i = TARGET_PIPED_INCR; i <= TARGET_PIPED_LIMITS; i++)
        text_target(rp, &t[i], "sluice fixed, pipelined (hit_many)", 28);
    printf("  a hot refused key: %u callers, 1 key, max %u per %u min "
           "window, every timed call refused\n", n, REFUSED_MAX,
           REFUSED_WINDOW_MS / 60000);
    text_target(rp, &t[TARGET_REFUSED], "hot refused key:", 23);
    text_module(rp, &t[TARGET_MODULE_INCR]);
    if (ratio(rp, rp->refused_case, rp->refused_off_case) >= 0) {
        const run_result *on = &rp->cases[rp->refused_case].med,
                         *off = &rp->cases[rp->refused_off_case].med;

        printf("    (per decision, the server's EVALSHA calls: %.3g with "
               "the cache, %.3g without;\n     its INCRBYs, one per "
               "request it decided: %.3g with, %.3g without)\n",
               on->cmd_calls, off->cmd_calls, on->key_calls, off->key_calls);
    }
}

/* "Where the time goes", its labels 'width' columns wide. */
static void text_diag(const report *rp, int width)
{
    static const int main_rows[] = {1, 3, 2}; /* 1/N callers, many; hot */

    printf("\nWhere the time goes (fixed window, 10,000 keys unless "
           "said; the last column: this / sluice fixed,\nsame callers "
           "and keys, from the table above)\n");
    print_heads("case", width, true);
    for (int w = 0; w < 3; w++)
        print_case_row(rp, rp->sluice_case[main_rows[w]][SLUICE_FIXED],
                       true, width);
    for (int i = 0; i < rp->ncases; i++)
        if (rp->cases[i].diag)
            print_case_row(rp, i, true, width);
}

static void text_cpu(const report *rp)
{
    printf("\nServer CPU per decision (%u decisions from 1 caller after "
           "CONFIG RESETSTAT, by sluice_hit(), or by\nsluice_hit_many() "
           "in batches of %u (\"\u00d7%u\"); INFO commandstats)\n",
           rp->o.cpu_calls, CPU_BATCH, CPU_BATCH);
    printf("  %-16s %-11s %11s %10s %10s %9s %10s %9s %12s\n",
           "algorithm", "keys", "EVALSHA \u00b5s", "script cmds",
           "Lua+call", "INCR \u00b5s", "EVALSHA/INCR", "cpu \u00b5s",
           "INCR cpu \u00b5s");
    for (int i = 0; i < rp->ncpu; i++) {
        const cpu_row *c = &rp->cpu[i];

        printf("  %-16s ", sluice_algo_name(c->algo));
        print_padded(c->keys == 1      ? "1 hot key"
                     : c->batch == 1   ? "10,000 keys"
                                       : "10,000, \u00d750",
                     11);
        printf(" %11.2f %11.2f %10.2f %9.2f %11.1f\u00d7 %9.1f %12.1f\n",
               c->evalsha_us,
               c->inner_us, c->evalsha_us - c->inner_us, c->incr_us,
               c->incr_us > 0 ? c->evalsha_us / c->incr_us : 0,
               c->info_us, c->incr_info_us);
    }
    if (rp->empty_usec >= 0)
        printf("  %-16s %-11s %11.2f %11.2f %10.2f %9s %12s %9.1f\n",
               "empty script", "10,000 keys", rp->empty_usec, 0.0,
               rp->empty_usec, "", "", rp->empty_cpu_us);
    printf("EVALSHA \u00b5s: the script's usec per decision (a call's "
           "usec_per_call, over 50 for \u00d750); script cmds: the\n"
           "commands it ran (INCRBY, ZADD, ...) per decision;\n"
           "Lua+call: the rest (interpreter, argument and reply "
           "conversion); INCR \u00b5s: a bare INCR's usec_per_call,\n"
           "sent as often by hiredis; cpu \u00b5s: INFO cpu per decision "
           "and per INCR, network I/O included.\n"
           "empty script: `return {1, 0, 0, 0}` sent with a sluice "
           "script's KEYS and ARGV, the floor of any\n"
           "one-script decision on this server.\n");
}

static void text_memory(const report *rp)
{
    const mem_row *mem = rp->mem;

    printf("\nServer memory per key (MEMORY USAGE ... SAMPLES 0, key "
           "name included)\n");
    for (int i = 0; i < rp->nmem; i++) {
        if (mem[i].entries > 0)
            printf("  %-26s %6.0f entries %9.0f bytes", mem[i].what,
                   mem[i].entries, mem[i].bytes);
        else
            printf("  %-41s %9.0f bytes", mem[i].what, mem[i].bytes);
        if (mem[i].entries > 0 && i > 0 && mem[i - 1].entries > 0 &&
            strcmp(mem[i].what, mem[i - 1].what) == 0)
            printf("  (%.1f bytes per added entry)",
                   (mem[i].bytes - mem[i - 1].bytes) /
                       (mem[i].entries - mem[i - 1].entries));
        printf("\n");
    }
}

/* ---- The report ---------------------------------------------------------- */

/* Whether --only names a case of the tables (then they are shown). */
static bool cases_shown(const report *rp)
{
    for (int i = 0; i < rp->ncases; i++)
        if (case_selected(rp->o.only, rp->cases[i].id))
            return true;
    return false;
}

void print_text(const report *rp)
{
    int width = 32, dwidth = 48; /* the label columns, at least */

    for (int i = 0; i < rp->ncases; i++) {
        int *wp = rp->cases[i].diag ? &dwidth : &width;

        if (text_cols(rp->cases[i].label) > *wp)
            *wp = text_cols(rp->cases[i].label);
    }
    text_setting(rp, cases_shown(rp));
    if (cases_shown(rp)) {
        text_table(rp, width);
        text_targets(rp);
        if (rp->o.diag)
            text_diag(rp, dwidth);
    }
    if (rp->ncpu > 0)
        text_cpu(rp);
    if (rp->nmem > 0)
        text_memory(rp);
    srvtime_text(rp);
}
