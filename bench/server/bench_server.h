/*
 * bench_server.h - what the files of sluice_bench_server share (main.c
 * tells what the program measures). Private to bench/server/.
 *
 *   main.c      options, main()
 *   launch.c    the redis-server it starts, with sluice_launcher
 *               (tests/support/server.h)
 *   server.c    the server it talks to: URL, connections, INFO cpu,
 *               commandstats, FLUSHALL
 *   cases.c     the list of cases; running each, pass by pass; medians
 *   threads.c   in-process runs: callers in threads, their latencies
 *   raw.c       bare hiredis calls: the only user of the library's private
 *               key names and scripts
 *   programs.c  runs of other programs: redis-benchmark, the Node and
 *               Python peers, and the reading of their output
 *   measure.c   on the server: CPU per decision (commandstats), memory per
 *               key
 *   srvtime.c   "Server time per decision": SLUICE.HIT, EVALSHA and FCALL
 *               of every algorithm beside a bare INCR, sent by
 *               redis-benchmark; its table and its JSON
 *   report.c    what the text and the JSON share: ratios, the targets
 *   text.c      the report as a table
 *   json.c      the report as JSON
 *   util.c      clocks, getrusage(), medians, numbers, key sets
 */
#ifndef SLUICE_BENCH_SERVER_H
#define SLUICE_BENCH_SERVER_H

#include "sluice.h"
#include "bench_options.h"
#include "bench_util.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MANY_KEYS 10000u
#define KEY_STRIDE 48u       /* bytes per pre-made key: text, then length */
#define WINDOW_MS 1000u
#define ADMIT_MAX 1000000000000ULL /* 10^12 per window: never reached */
#define MAX_REPEATS 99u
#define MAX_CASES 64
#define WARM_CALLS 20u       /* untimed calls per caller before a run */

/* A hot refused key (C callers), refused all run long. */
#define REFUSED_MAX 10u            /* spent by the warm-up calls ... */
#define REFUSED_WINDOW_MS 600000u  /* ... so refused for 10 minutes */
#define REFUSED_ID "user:refused"  /* its key: a window of its own */

/* Server CPU per decision: 3 rows per algorithm (hot key, 10,000 keys,
   10,000 keys in batches of CPU_BATCH). */
#define NCPU_ROWS (3 * BENCH_ALGO_N)
#define CPU_BATCH 50u
/* Memory per key: a row per algorithm, 2 more for each log (sliding and
   compact: measured at 3 sizes), and a bare counter. */
#define NMEM_ROWS (BENCH_ALGO_N + 2 * 2 + 1)

/* ---- Keys (util.c) ------------------------------------------------------- */

/* Pre-made keys, one per KEY_STRIDE bytes: the text, then its length. */
typedef struct keyset {
    char *bytes;
    size_t n;
} keyset;

/* The keys of every case, made before any timing. */
typedef struct bench_keys {
    keyset ids;    /* "user:0" .. "user:9999", what sluice_hit() is given */
    keyset fixed;  /* their server keys: the fixed window's script ... */
    keyset incr;   /* ... and a bare INCR's (the raw rows) */
    char refused[KEY_STRIDE]; /* REFUSED_ID, a key set of one */
} bench_keys;

/* ---- The server (server.c) ----------------------------------------------- */

/* Where the server is, and the control connection the harness talks on. */
typedef struct server {
    bool own;             /* started here (then it is emptied between cases) */
    char host[256];
    int port;
    char user[128], password[400];
    long db;
    char sluice_url[1024]; /* the URL given, or redis://127.0.0.1:PORT */
    char peer_url[1024];   /* the same server as redis://, for the peers */
    char name[16];        /* "redis", or "valkey" when INFO server has a
                             valkey_version */
    char version[32];     /* its valkey_version, else its redis_version */
    char binary[256];     /* the program started (own server), else "" */
    redisContext *ctl;
} server;

/* ---- Cases (cases.c) ----------------------------------------------------- */

typedef enum how {
    HOW_SLUICE,       /* sluice_hit() from threads sharing one store */
    HOW_SLUICE_MANY,  /* sluice_hit_many() batches, threads sharing one */
    HOW_RAW_EVALSHA,  /* the algorithm's script by bare hiredis */
    HOW_RAW_INCR,     /* INCR by bare hiredis */
    HOW_RAW_PIPE,     /* the script, pipelined on one connection */
    HOW_RB,           /* redis-benchmark -t incr */
    HOW_PEER          /* a peer script */
} how;

/* What one run of a case measured. */
typedef struct run_result {
    double rate;       /* decisions per second, all callers */
    double p50_us, p99_us;
    double srv_cpu_s;  /* the server's CPU over the run; < 0 unknown */
    double cli_cpu_s;  /* the client's CPU over the run */
    double cli_cs;     /* the client's context switches over the run; < 0
                          unknown */
    double cmd_usec;   /* usec_per_call of the case's command; < 0 unknown */
    double cmd_calls;  /* the server's calls of that command over the run
                          (in 'med': per decision); < 0 unknown */
    double key_calls;  /* sluice's fixed window: the INCRBYs its script ran,
                          one per request the server decided (in 'med': per
                          decision); < 0 unknown */
    double calls, admitted;
} run_result;

typedef struct bench_case {
    char id[64];          /* stable name, for --json */
    char label[96];       /* for the table */
    how how;
    sluice_algo algo;     /* sluice's, or the script of a raw case */
    const char *peer;     /* "limits" or "rlf" */
    const char *peer_algo;/* "fixed" or "moving" */
    const char *cmd;      /* the command the server runs: evalsha or incr */
    unsigned callers;     /* threads or concurrent calls */
    unsigned threads;     /* in-process: the threads making the calls */
    unsigned connections; /* to the server */
    unsigned pool;        /* sluice: the store's pool */
    const char *url_extra;/* sluice: more URL options, or NULL (the
                             scripts: engine=lua) */
    unsigned depth;       /* per thread: raw pipelined calls in flight, or
                             the requests of a sluice_hit_many() batch;
                             redis-benchmark: its -P (0 or 1: none) */
    uint64_t max;         /* the limit: ADMIT_MAX, or REFUSED_MAX */
    uint32_t window_ms;
    size_t keys;
    int section;          /* main table: the workload it is shown under */
    bool diag;            /* a "where the time goes" row */
    int vs;               /* the sluice case it is compared with, or -1 */
    char unavailable[256];/* non-empty: not run, and why */
    run_result runs[MAX_REPEATS];
    unsigned nruns;
    run_result med;       /* the median of each figure over the runs */
    double spread;        /* (max - min) / median of the rates */
    double rb_guess;      /* redis-benchmark: requests/s, to size -n */
} bench_case;

typedef struct options {
    double seconds;        /* 0 until given, then the default */
    unsigned repeats;      /* 0 until given, then the default */
    unsigned callers;
    unsigned pool;         /* the sluice rows' pool */
    unsigned cpu_calls;
    bool json, quick, peers, diag;
    const char *store;
    const char *only;      /* run only the cases whose id contains this */
    const char *peers_dir;
    const char *python;
    const char *node;
    const char *redis_benchmark;
} options;

/* Per-peer availability, found once at the start. */
typedef struct peer_info {
    const char *name;       /* "limits", "rlf" */
    bool ok;
    char why[256];          /* when not ok */
    char versions[128];     /* e.g. "limits 2.8.0, redis-py 4.3.4" */
} peer_info;

enum { PEER_LIMITS, PEER_RLF, NPEERS };

/* The references each workload has, beside sluice. */
enum { REF_RB, REF_RLF, REF_LIMITS_FIXED, REF_LIMITS_MOVING, NREFS };

/* The workloads, callers x keys: 1 x 1, 1 x 10,000, C x 1, C x 10,000. */
#define NWORKLOADS 4

/* ---- Server-side measurements (measure.c) -------------------------------- */

typedef struct cpu_row {
    sluice_algo algo;
    size_t keys;
    unsigned batch;     /* decisions per call: 1, or CPU_BATCH (hit_many) */
    double evalsha_us;  /* EVALSHA's usec, per decision */
    double inner_us;    /* the script's commands, per decision */
    double info_us;     /* INFO cpu per decision (with network I/O) */
    double incr_us;     /* usec_per_call of a bare INCR, same keys */
    double incr_info_us;/* INFO cpu per INCR */
} cpu_row;

typedef struct mem_row {
    char what[64];
    double bytes;      /* MEMORY USAGE; < 0 unknown */
    double entries;    /* sliding log: its entries; else 0 */
} mem_row;

/* ---- Server time per decision (srvtime.c) -------------------------------- */

/* The ways a decision is sent, each a row per algorithm. */
enum { SRV_MODULE, SRV_SCRIPT, SRV_FCALL, SRV_WAYS };

/* A bare INCR, then each algorithm's module, script and FCALL rows. */
#define NSRVTIME_ROWS (1 + SRV_WAYS * BENCH_ALGO_N)

/* One row: a command sent by redis-benchmark, and what the server spent. */
typedef struct srvtime_row {
    char id[64];          /* for --only and --json: srvtime_fixed_module */
    int algo;             /* a sluice_algo, or -1: the bare INCR */
    int way;              /* SRV_..., or -1: the bare INCR */
    char unavailable[256];/* non-empty: not run, and why */
    bool ran;
    double calls;         /* the command's calls in the timed pass */
    double usec;          /* INFO commandstats: usec per call */
    double cpu_us;        /* INFO cpu (user + sys) per call; < 0 unknown */
    double bytes;         /* MEMORY USAGE per key; < 0 unknown */
    double rps;           /* redis-benchmark's requests per second */
} srvtime_row;

typedef struct srvtime {
    srvtime_row rows[NSRVTIME_ROWS];
    unsigned long calls;  /* per row, timed */
    char module[192];     /* what SLUICE.VERSION answered, or "" */
} srvtime;

/* ---- The whole run ------------------------------------------------------- */

typedef struct report {
    options o;
    server srv;
    bench_keys keys;
    bench_case cases[MAX_CASES];
    int ncases;
    peer_info peers[NPEERS];
    bool rb_ok;
    char rb_why[256];
    char rb_version[64];
    double load_before[3], load_after[3];
    long cpus;
    double wall_s;
    cpu_row cpu[NCPU_ROWS];
    int ncpu;
    mem_row mem[NMEM_ROWS];
    int nmem;
    double empty_usec, empty_cpu_us; /* the empty script's; < 0 unknown */
    /* workload index -> case index of each sluice algorithm */
    int sluice_case[NWORKLOADS][BENCH_ALGO_N];
    /* workload index -> case index of each reference (REF_...) */
    int ref_case[NWORKLOADS][NREFS];
    /* the hit_many rows (-1 for 1 caller): 1 thread, each algorithm; and
       2 threads, fixed window */
    int many_case[NWORKLOADS][BENCH_ALGO_N], many2_case[NWORKLOADS];
    int refused_case, refused_off_case; /* the hot refused key */
    /* The native module's rows (fixed window, C callers, 10,000 keys):
       sluice_hit() by engine=module, and by engine=lua; -1: none. */
    int module_case, lua_case;
    srvtime st;           /* "Server time per decision" */
} report;

/* ---- In-process callers (threads.c, raw.c) ------------------------------- */

/* Latencies of one caller, in nanoseconds. */
typedef struct lat_buf {
    uint32_t *ns;
    size_t n, cap;
} lat_buf;

/* One thread of an in-process run: its inputs, then what it measured. */
typedef struct caller {
    const bench_case *c;
    const server *srv;
    sluice_store *store;      /* HOW_SLUICE: shared */
    redisContext *ctx;        /* raw: its own */
    const char *sha;          /* raw scripts */
    const sluice_limit *limit;
    const keyset *keys;       /* ids, or server keys for raw cases */
    sluice_request *reqs;     /* HOW_SLUICE_MANY: a batch */
    uint64_t rng;
    double seconds;
    pthread_barrier_t *ready, *go;
    lat_buf lat;
    uint64_t calls, admitted;
    double elapsed_s;
    char why[256];            /* non-empty on failure */
} caller;

/* ---- Functions, by file -------------------------------------------------- */

/* launch.c */
int bench_server_start(char *url, size_t cap);
const char *bench_server_binary(void);
void bench_server_stop(void);

/* server.c */
int server_open(server *s, const char *url);
void server_close(server *s);
redisReply *ctl_cmd(server *s, const char *fmt, ...);
double server_cpu_s(server *s);
void stats_reset(server *s);
void stats_read(server *s, const char *cmd, double *calls, double *usec);
void server_flush(server *s);
double meter_start(server *s);
void meter_stop(server *s, double srv0, const char *cmd, run_result *r);
void sluice_url_for(const server *s, unsigned pool, const char *extra,
                    char *out, size_t cap);
redisContext *raw_connect(const server *s);

/* cases.c */
unsigned workload_callers(const options *o, int w);
size_t workload_keys(int w);
void cases_build(report *rp);
int cases_run(report *rp);
bool case_selected(const char *only, const char *id);
void case_finish(bench_case *c);

/* threads.c */
int run_threads(report *rp, bench_case *c, const keyset *ids,
                const keyset *skeys, run_result *r, char *why,
                size_t why_cap);

/* raw.c */
int raw_key_build(char *out, size_t cap, size_t *len, const char *id,
                  size_t id_len, const char *suffix);
int raw_script_load(server *s, sluice_algo algo, char sha[41]);
int raw_evalsha(caller *w, size_t k, const char *max, const char *window);
int raw_incr(caller *w, size_t k);
int raw_pipelined(caller *w, unsigned depth, const char *max,
                  const char *window, uint64_t *admitted);

/* programs.c */
void tools_check(report *rp);
int run_rb(report *rp, bench_case *c, run_result *r, char *why,
           size_t why_cap);
int run_peer(report *rp, bench_case *c, run_result *r, char *why,
             size_t why_cap);
int rb_command(report *rp, unsigned clients, unsigned keys, unsigned long n,
               const char *const *cmd, double *rps, char *why,
               size_t why_cap);

/* measure.c */
int measure_server(report *rp);

/* srvtime.c */
void srvtime_build(report *rp);
void srvtime_run(report *rp);
void srvtime_text(const report *rp);
void srvtime_json(const report *rp);

/* report.c */
double ratio(const report *rp, int num, int den);
const char *ratio_why(const report *rp, int num, int den);
int best_many_fixed(const report *rp);

/* The targets, in the order both reports give them. */
enum {
    TARGET_FIXED_INCR, TARGET_FIXED_RLF, TARGET_FIXED_LIMITS,
    TARGET_PIPED_INCR, TARGET_PIPED_RLF, TARGET_PIPED_LIMITS,
    TARGET_REFUSED, TARGET_MODULE_INCR, NTARGETS
};

typedef struct target {
    const char *name;  /* for --json */
    char label[48];    /* for the table: "/ rate-limiter-flexible" */
    int num, ref;      /* the case measured, and the one it is over */
    double min;        /* the ratio the issue asks for */
} target;

void targets_get(const report *rp, target t[NTARGETS]);

/* text.c, json.c */
void print_text(const report *rp);
/* ' ' and v in 'width' columns with 'decimals' decimals; '-' when v < 0
   (not measured). */
void print_num(double v, int width, int decimals);
void print_json(const report *rp);
void json_string(const char *s);
void json_number(double v);

/* util.c */
double now_s(void);
uint64_t now_ns(void);
double rusage_s(int who);
double rusage_cs(int who);
double median_of(double *v, unsigned n);
const char *grouped(char *buf, size_t cap, double v);
void load_average(double out[3]);
int keys_make(bench_keys *k);
void keys_free(bench_keys *k);
const char *key_at(const keyset *ks, size_t i);
size_t key_len(const keyset *ks, size_t i);

#endif
