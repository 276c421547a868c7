/*
 * json.c - the report as JSON (--json): the setting, every case with its
 * medians and runs, the targets, the server's CPU per decision and memory
 * per key. A figure that is unknown is null.
 */
#include "bench_server.h"

/* Writes 's' as a JSON string. */
void json_string(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

void json_number(double v)
{
    if (v < 0)
        printf("null");
    else
        printf("%.6g", v);
}

/* ", "name": " then 'v' as a JSON number. */
static void json_field(const char *name, double v)
{
    printf(", \"%s\": ", name);
    json_number(v);
}

static void json_setting(const report *rp)
{
    const options *o = &rp->o;

    printf("{\n  \"version\": \"%s\",\n  \"server\": {\"name\": ",
           SLUICE_VERSION);
    json_string(rp->srv.name);
    printf(", \"version\": ");
    json_string(rp->srv.version);
    printf(", \"binary\": ");
    json_string(rp->srv.binary);
    printf(", \"host\": ");
    json_string(rp->srv.host);
    printf(", \"port\": %d, \"own\": %s},\n", rp->srv.port,
           rp->srv.own ? "true" : "false");
    printf("  \"seconds\": %g,\n  \"repeats\": %u,\n  \"callers\": %u,\n"
           "  \"cpus\": %ld,\n  \"load_before\": %.2f,\n"
           "  \"load_after\": %.2f,\n  \"window_ms\": %u,\n"
           "  \"admit_max\": %llu,\n  \"many_keys\": %u,\n",
           o->seconds, o->repeats, o->callers, rp->cpus, rp->load_before[0],
           rp->load_after[0], WINDOW_MS, (unsigned long long)ADMIT_MAX,
           MANY_KEYS);
    printf("  \"references\": {\"redis_benchmark\": ");
    json_string(rp->rb_ok ? rp->rb_version : "");
    printf(", \"rlf\": ");
    json_string(rp->peers[PEER_RLF].ok ? rp->peers[PEER_RLF].versions : "");
    printf(", \"limits\": ");
    json_string(rp->peers[PEER_LIMITS].ok ? rp->peers[PEER_LIMITS].versions
                                          : "");
    printf("}");
}

/* What case 'c' is: its id, label, callers, and sluice's settings. */
static void json_case_what(const bench_case *c)
{
    printf("{\"id\": ");
    json_string(c->id);
    printf(", \"label\": ");
    json_string(c->label);
    printf(", \"diagnostic\": %s, \"callers\": %u, \"connections\": %u, "
           "\"keys\": %zu",
           c->diag ? "true" : "false", c->callers, c->connections,
           c->keys);
    if (c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY) {
        printf(", \"algo\": \"%s\", \"pool\": %u",
               sluice_algo_name(c->algo), c->pool);
        if (c->url_extra != NULL) {
            printf(", \"url_options\": ");
            json_string(c->url_extra);
        }
    }
    if (c->how == HOW_SLUICE_MANY)
        printf(", \"api\": \"sluice_hit_many\", \"threads\": %u, "
               "\"batch\": %u", c->threads, c->depth);
    if (c->max != ADMIT_MAX)
        printf(", \"max\": %llu, \"window_ms\": %u",
               (unsigned long long)c->max, (unsigned)c->window_ms);
}

/* Case 'i': what it is, then its medians, its ratio and its runs. */
static void json_case(const report *rp, int i)
{
    const bench_case *c = &rp->cases[i];
    const run_result *m = &c->med;

    json_case_what(c);
    if (c->nruns == 0) {
        printf(", \"available\": false, \"why\": ");
        json_string(c->unavailable);
        printf("}");
        return;
    }
    printf(", \"available\": true");
    json_field("decisions_per_s", m->rate);
    json_field("spread", c->spread);
    json_field("p50_us", m->p50_us);
    json_field("p99_us", m->p99_us);
    json_field("server_cpu_us_per_decision",
               m->srv_cpu_s >= 0 ? m->srv_cpu_s * 1e6 : -1);
    printf(", \"command\": \"%s\"", c->cmd);
    json_field("command_usec_per_call", m->cmd_usec);
    json_field("command_calls_per_decision", m->cmd_calls);
    json_field("incrby_calls_per_decision", m->key_calls);
    json_field("client_cpu_us_per_decision", m->cli_cpu_s * 1e6);
    json_field("client_context_switches_per_decision", m->cli_cs);
    json_field("admitted_fraction", m->calls > 0 ? m->admitted / m->calls
                                                 : -1);
    if (c->vs >= 0) {
        json_field(c->diag ? "over_sluice" : "sluice_over",
                   c->diag ? ratio(rp, i, c->vs) : ratio(rp, c->vs, i));
        printf(", \"compared_with\": \"%s\"",
               sluice_algo_name(rp->cases[c->vs].algo));
    }
    printf(", \"runs\": [");
    for (unsigned k = 0; k < c->nruns; k++)
        printf("%s%.0f", k ? ", " : "", c->runs[k].rate);
    printf("]}");
}

static void json_targets(const report *rp)
{
    target t[NTARGETS];
    int piped;

    targets_get(rp, t);
    piped = t[TARGET_PIPED_INCR].num;
    for (int i = 0; i < NTARGETS; i++) {
        double q = ratio(rp, t[i].num, t[i].ref);

        printf("%s\n    {\"name\": \"%s\", \"value\": ", i ? "," : "",
               t[i].name);
        json_number(q);
        printf(", \"target_min\": %.1f, \"met\": %s", t[i].min,
               q >= t[i].min ? "true" : "false");
        if (t[i].num == piped && piped >= 0) {
            printf(", \"sluice_case\": ");
            json_string(rp->cases[piped].id);
            printf(", \"sluice_label\": ");
            json_string(rp->cases[piped].label);
        }
        printf("}");
    }
}

/* The server's CPU per decision, the empty script's, memory per key. */
static void json_server_side(const report *rp)
{
    printf("\n  ],\n  \"server_cpu\": [");
    for (int i = 0; i < rp->ncpu; i++) {
        const cpu_row *c = &rp->cpu[i];

        printf("%s\n    {\"algo\": \"%s\", \"keys\": %zu, \"batch\": %u, "
               "\"calls\": %u, "
               "\"evalsha_usec_per_decision\": %.3f, \"script_commands_usec\": "
               "%.3f, \"incr_usec_per_call\": %.3f, "
               "\"info_cpu_us_per_decision\": %.3f, "
               "\"info_cpu_us_per_incr\": %.3f}",
               i ? "," : "", sluice_algo_name(c->algo), c->keys, c->batch,
               rp->o.cpu_calls, c->evalsha_us, c->inner_us, c->incr_us,
               c->info_us, c->incr_info_us);
    }
    printf("\n  ],\n  \"empty_script\": {\"evalsha_usec_per_call\": ");
    json_number(rp->empty_usec);
    printf(", \"info_cpu_us_per_call\": ");
    json_number(rp->empty_cpu_us);
    printf("},\n  \"memory\": [");
    for (int i = 0; i < rp->nmem; i++) {
        printf("%s\n    {\"what\": ", i ? "," : "");
        json_string(rp->mem[i].what);
        printf(", \"entries\": %.0f, \"bytes\": ", rp->mem[i].entries);
        json_number(rp->mem[i].bytes);
        printf("}");
    }
}

void print_json(const report *rp)
{
    json_setting(rp);
    printf(",\n  \"cases\": [");
    for (int i = 0; i < rp->ncases; i++) {
        printf("%s\n    ", i ? "," : "");
        json_case(rp, i);
    }
    printf("\n  ],\n  \"targets\": [");
    json_targets(rp);
    json_server_side(rp);
    printf("\n  ]");
    srvtime_json(rp);
    printf("\n}\n");
}
