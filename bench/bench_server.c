/*
 * bench_server.c - how fast a server store ("redis://") decides, measured in
 * one run beside redis-benchmark and two well-known rate limiters on the
 * same server, with the server's CPU and memory per decision and per key.
 *
 * The server. Unless --store names one, the program starts its own
 * redis-server on a free loopback port in a temporary directory (--save ''
 * --appendonly no; tests/redis_server.h), empties it before every case, and
 * kills it by PID however the program ends.
 *
 * The workload, the same for every implementation: every call is admitted
 * (a limit of 10^12 per 1 s window; but see the hot refused key below), on
 * one hot key or on 10,000 keys "user:N" drawn uniformly, from 1 caller or
 * from 50 concurrent callers.
 *
 *   sluice                 sluice_hit() for each algorithm, one decision
 *                          per call. 50 callers are 50 threads sharing ONE
 *                          store handle opened with ?pool=4, the library's
 *                          default: the decisions that wait while earlier
 *                          ones are with the server are combined into one
 *                          multi-key script call (up to 4 such rounds at
 *                          once), so the server sees fewer EVALSHAs than
 *                          decisions (shown per decision).
 *   sluice, hit_many x50   sluice_hit_many() for each algorithm: ONE thread
 *                          deciding batches of 50 requests (--callers), keys
 *                          drawn as above, on the same store; and, fixed
 *                          window only, 2 threads batching 25 each (the same
 *                          50 in flight, on both cores). A server store
 *                          sends a batch as one round trip and one multi-key
 *                          script call, so the server sees one EVALSHA per
 *                          batch. Shown with the 50 callers, as 50
 *                          decisions are in flight; a decision's latency is
 *                          its batch's.
 *   redis-benchmark INCR   `redis-benchmark -t incr -c C [-r 10000] --csv`:
 *                          one INCR per request, C connections served by one
 *                          event-loop thread. The floor of any limiter that
 *                          makes one round trip per decision.
 *   rate-limiter-flexible  bench/peers/rlf_bench.js: RateLimiterRedis on
 *                          ioredis, one EVALSHA per consume(); its callers
 *                          are C async loops, each with one call in flight,
 *                          pipelined on one connection (its normal use).
 *   limits                 bench/peers/limits_bench.py: Python limits'
 *                          Redis storage, FixedWindowRateLimiter and
 *                          MovingWindowRateLimiter, one EVALSHA per hit; C
 *                          threads, a pooled connection each.
 *
 * A hot refused key (50 callers, 1 hot key "user:refused", fixed window): a
 * limit of 10 per 10 minute window, spent by the warm-up calls, so every
 * timed call is refused (a refusal is a decision, not an error), with the
 * library's cache of refused keys (refused_cache=default: the server's wait
 * is remembered and the same request refused locally, with no round trip)
 * and without it (refused_cache=off: every call is an EVALSHA). These rows
 * and the hit_many rows show the server's EVALSHA calls per decision.
 *
 * Where sluice's time goes (fixed window, 10,000 keys): the same calls on
 * pools of 1, 2, 16 and 50 connections; the hot key, every call admitted,
 * without the cache of refused keys (refused_cache=off: what the cache
 * costs when it has nothing to answer); the same EVALSHA sent by bare hiredis
 * (no library) from 1 thread and from 50 threads with a connection each; a
 * bare INCR the same ways; and the EVALSHA pipelined 50 deep from one
 * thread on one connection, a ceiling for pipelining.
 *
 * For each case and run: decisions per second (the sum over callers of
 * calls / elapsed), latency of each call (median, 99th percentile), the
 * server's CPU per decision (INFO cpu before and after), the time the server
 * spent in the case's command (INFO commandstats usec_per_call, after CONFIG
 * RESETSTAT), and the client's CPU per decision (this process, or the peer's
 * own count of its timed phase, or redis-benchmark's rusage).
 *
 * Noise. The machine may have 2 cores shared by the client, the server and
 * the peers, and other work. Every case runs 'repeats' times, interleaved
 * (pass 1 runs every case once, then pass 2, ...), and each figure is the
 * median of its runs; "spread" is (max - min) / median of the rates.
 *
 * The targets the issue sets, each printed with its ratio (fixed window, 50
 * callers, 10,000 keys): sluice over redis-benchmark INCR -c 50 (>= 1x),
 * rate-limiter-flexible (>= 3x) and limits' fixed window (>= 10x) with 50
 * threads calling sluice_hit(), unpipelined; the same pipelined, from the
 * faster of the fixed window's hit_many rows (>= 2x, 3x and 10x); and the
 * hot refused key with the cache over without it (>= 10x).
 *
 * Then, without timing pressure: the server's CPU per decision from
 * commandstats (N decisions from 1 caller after CONFIG RESETSTAT: EVALSHA's
 * usec_per_call, the commands the script ran, and a bare INCR's, sent N
 * times by hiredis), and the memory of a key (MEMORY USAGE) for each
 * algorithm, the sliding log at 100, 1,000 and 10,000 entries.
 *
 * Benchmarks measure; they never pass or fail. Exit 0 whether a target is
 * met or not (a peer that cannot run is reported, not fatal), 1 if sluice or
 * the server fails, 2 on a bad option.
 */
#include "sluice.h"
#include "bench_options.h"
#include "store/store.h" /* the embedded scripts and key names */
#include "redis_server.h"   /* tests/: a private redis-server */

#include <hiredis/hiredis.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SLUICE_BENCH_PEERS_DIR
#define SLUICE_BENCH_PEERS_DIR "bench/peers"
#endif

#define MANY_KEYS 10000u
#define KEY_STRIDE 48u       /* bytes per pre-made key: text, then length */
#define WINDOW_MS 1000u
#define ADMIT_MAX 1000000000000ULL /* 10^12 per window: never reached */
#define DEFAULT_CALLERS 50u
#define DEFAULT_POOL 4u      /* the library's default pool (store_valkey.c) */
#define DEFAULT_SECONDS 2.0
#define DEFAULT_REPEATS 3u
#define QUICK_SECONDS 0.3
#define MAX_REPEATS 99u
#define MAX_CALLERS 512u
#define MAX_CASES 64
#define WARM_CALLS 20u       /* untimed calls per caller before a run */
#define PIPE_DEPTH_MAX 512u
#define CPU_CALLS 20000u     /* decisions per commandstats measurement */
#define QUICK_CPU_CALLS 2000u
#define PEER_OVERHEAD_S 60.0 /* start-up allowance before a child is killed */
#define RB_FIRST_GUESS 30000.0 /* requests/s, to size redis-benchmark's -n */

/* The targets the issue sets (fixed window, C callers, 10,000 keys). */
#define TARGET_VS_INCR 1.0
#define TARGET_VS_RLF 3.0
#define TARGET_VS_LIMITS 10.0
/* The same, pipelined: sluice_hit_many() batches of C requests. */
#define TARGET_PIPELINED_VS_INCR 2.0
#define TARGET_PIPELINED_VS_RLF 3.0
#define TARGET_PIPELINED_VS_LIMITS 10.0
/* A hot refused key (C callers): the cache of refused keys on / off. */
#define TARGET_REFUSED_CACHE 10.0
#define REFUSED_MAX 10u            /* spent by the warm-up calls ... */
#define REFUSED_WINDOW_MS 600000u  /* ... so refused for 10 minutes */
#define REFUSED_ID "user:refused"  /* its key: a window of its own */

/* ---- Small utilities ----------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double rusage_s(int who)
{
    struct rusage ru;

    if (getrusage(who, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Context switches so far, voluntary and not, of 'who'. */
static double rusage_cs(int who)
{
    struct rusage ru;

    if (getrusage(who, &ru) != 0)
        return 0;
    return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

static double median_of(double *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "12,345" for a number >= 0, rounded to a whole. */
static const char *grouped(char *buf, size_t cap, double v)
{
    char digits[32], *p = buf;
    int n = snprintf(digits, sizeof(digits), "%.0f", v < 0 ? 0 : v);

    for (int i = 0; i < n && (size_t)(p - buf) + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

/* A uniform index below 'n' from a xorshift64 generator. */
static size_t pick_key(uint64_t *rng, size_t n)
{
    uint64_t x = *rng;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return (size_t)(((x >> 32) * (uint64_t)n) >> 32);
}

/* ---- Keys ---------------------------------------------------------------- */

/* Pre-made keys, one per KEY_STRIDE bytes: the text, then its length. */
typedef struct keyset {
    char *bytes;
    size_t n;
} keyset;

/*
 * Keys for ids "user:0" .. "user:<n - 1>": the ids themselves when 'suffix'
 * is NULL (what sluice_hit() is given), else the server key the library
 * makes of each id for that suffix, e.g. "sluice:{user:7}:fixed".
 */
static int keyset_make(keyset *ks, size_t n, const char *suffix)
{
    ks->bytes = malloc(n * KEY_STRIDE);
    ks->n = n;
    if (ks->bytes == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char *slot = ks->bytes + i * KEY_STRIDE, id[24], *k;
        int idlen = snprintf(id, sizeof(id), "user:%zu", i);
        size_t len;

        if (suffix == NULL) {
            memcpy(slot, id, (size_t)idlen + 1);
            len = (size_t)idlen;
        } else {
            k = sluice__key_build(slot, KEY_STRIDE - 1, &len, "sluice", id,
                                  (size_t)idlen, suffix);
            if (k != slot)
                return -1; /* did not fit */
        }
        slot[KEY_STRIDE - 1] = (char)len;
    }
    return 0;
}

static const char *key_at(const keyset *ks, size_t i)
{
    return ks->bytes + i * KEY_STRIDE;
}

static size_t key_len(const keyset *ks, size_t i)
{
    return (unsigned char)ks->bytes[i * KEY_STRIDE + KEY_STRIDE - 1];
}

/* ---- The server ---------------------------------------------------------- */

/* Where the server is, and the control connection the harness talks on. */
typedef struct server {
    bool own;             /* started here (then it is emptied between cases) */
    rs_server rs;
    char host[256];
    int port;
    char user[128], password[400];
    long db;
    char sluice_url[1024]; /* the URL given, or redis://127.0.0.1:PORT */
    char peer_url[1024];   /* the same server as redis://, for the peers */
    char version[32];
    redisContext *ctl;
} server;

/* Runs a command on the control connection; prints and NULLs on failure. */
static redisReply *ctl_cmd(server *s, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = redisvCommand(s->ctl, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fprintf(stderr, "sluice_bench_server: the server did not answer "
                "'%s': %s\n", fmt, s->ctl->errstr);
    return r;
}

/* The value of 'field' in an INFO reply ("field:value" lines), or NULL. */
static const char *info_field(const char *info, const char *field)
{
    size_t len = strlen(field);

    for (const char *p = info; p != NULL && *p != '\0';) {
        if (strncmp(p, field, len) == 0 && p[len] == ':')
            return p + len + 1;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return NULL;
}

/* The server's CPU time so far (user + system), in seconds; -1 if unknown. */
static double server_cpu_s(server *s)
{
    redisReply *r = ctl_cmd(s, "INFO cpu");
    const char *u, *y;
    double v = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_STRING &&
        (u = info_field(r->str, "used_cpu_user")) != NULL &&
        (y = info_field(r->str, "used_cpu_sys")) != NULL)
        v = strtod(u, NULL) + strtod(y, NULL);
    freeReplyObject(r);
    return v;
}

/* Zeroes the server's command statistics. */
static void stats_reset(server *s)
{
    redisReply *r = ctl_cmd(s, "CONFIG RESETSTAT");

    if (r != NULL)
        freeReplyObject(r);
}

/*
 * From INFO commandstats: the calls and usec of command 'cmd' (e.g.
 * "evalsha"); with 'cmd' NULL, the sum over the data commands that the
 * sluice scripts run (what a script spends outside the Lua interpreter).
 */
static void stats_read(server *s, const char *cmd, double *calls,
                       double *usec)
{
    static const char *const inner[] = {
        "get", "pttl", "del", "pexpire", "incrby", "time", "hmget", "hset",
        "zrange", "zremrangebyscore", "zcard", "zadd", "set", "decrby"};
    redisReply *r = ctl_cmd(s, "INFO commandstats");
    char field[64];

    *calls = *usec = 0;
    if (r == NULL)
        return;
    for (size_t i = 0; r->type == REDIS_REPLY_STRING &&
                       i < (cmd ? 1 : sizeof(inner) / sizeof(inner[0]));
         i++) {
        const char *v;

        snprintf(field, sizeof(field), "cmdstat_%s", cmd ? cmd : inner[i]);
        if ((v = info_field(r->str, field)) == NULL)
            continue;
        if (strncmp(v, "calls=", 6) == 0)
            *calls += strtod(v + 6, NULL);
        if ((v = strstr(v, "usec=")) != NULL)
            *usec += strtod(v + 5, NULL);
    }
    freeReplyObject(r);
}

/* Empties the server between cases, when it is the harness's own. */
static void server_flush(server *s)
{
    redisReply *r;

    if (!s->own)
        return;
    if ((r = ctl_cmd(s, "FLUSHALL")) != NULL)
        freeReplyObject(r);
}

/*
 * Parses a server URL, "redis://[[user]:password@]host[:port][/db][?...]"
 * (or valkey://), into 's'. Cluster URLs are refused: the references run
 * against one server.
 */
static int url_parse(server *s, const char *url)
{
    const char *rest = strstr(url, "://"), *end, *at, *colon, *slash;
    char auth[400] = "";

    if (rest == NULL || strncmp(url, "redis://", 8) != 0) {
        if (rest == NULL || strncmp(url, "valkey://", 9) != 0) {
            fprintf(stderr, "sluice_bench_server: --store wants a "
                    "redis://HOST:PORT or valkey://HOST:PORT URL of one "
                    "server, not '%s'\n", url);
            return -1;
        }
    }
    if (strstr(url, "pool=") != NULL) {
        fprintf(stderr, "sluice_bench_server: --store must not set pool=; "
                "the harness chooses it per case\n");
        return -1;
    }
    rest += 3;
    end = strchr(rest, '?');
    if (end == NULL)
        end = rest + strlen(rest);
    at = memchr(rest, '@', (size_t)(end - rest));
    if (at != NULL) {
        snprintf(auth, sizeof(auth), "%.*s", (int)(at - rest), rest);
        if ((colon = strchr(auth, ':')) != NULL) {
            snprintf(s->user, sizeof(s->user), "%.*s", (int)(colon - auth),
                     auth);
            snprintf(s->password, sizeof(s->password), "%s", colon + 1);
        } else {
            snprintf(s->password, sizeof(s->password), "%s", auth);
        }
        rest = at + 1;
    }
    slash = memchr(rest, '/', (size_t)(end - rest));
    if (slash == NULL)
        slash = end;
    colon = memchr(rest, ':', (size_t)(slash - rest));
    snprintf(s->host, sizeof(s->host), "%.*s",
             (int)((colon ? colon : slash) - rest), rest);
    s->port = colon ? atoi(colon + 1) : 6379;
    s->db = slash < end ? strtol(slash + 1, NULL, 10) : 0;
    if (s->host[0] == '\0' || s->port <= 0 || s->port > 65535) {
        fprintf(stderr, "sluice_bench_server: cannot read a host and port "
                "in '%s'\n", url);
        return -1;
    }
    snprintf(s->sluice_url, sizeof(s->sluice_url), "%s", url);
    snprintf(s->peer_url, sizeof(s->peer_url), "redis://%s%s%.*s", auth,
             at ? "@" : "", (int)(end - rest), rest);
    return 0;
}

/* Starts the own server, or reaches the given one; opens 'ctl'. */
static int server_open(server *s, const char *url)
{
    struct timeval tv = {5, 0};
    redisReply *r;
    const char *v;

    if (url == NULL) {
        if (rs_start(&s->rs, NULL) < 0)
            return -1;
        s->own = true;
        if (url_parse(s, s->rs.url) < 0)
            return -1;
    } else if (url_parse(s, url) < 0) {
        return -1;
    }
    s->ctl = redisConnectWithTimeout(s->host, s->port, tv);
    if (s->ctl == NULL || s->ctl->err) {
        fprintf(stderr, "sluice_bench_server: cannot reach %s:%d: %s\n",
                s->host, s->port, s->ctl ? s->ctl->errstr : "out of memory");
        return -1;
    }
    redisSetTimeout(s->ctl, tv);
    if (s->password[0] != '\0') {
        r = s->user[0] ? redisCommand(s->ctl, "AUTH %s %s", s->user,
                                      s->password)
                       : redisCommand(s->ctl, "AUTH %s", s->password);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (s->db != 0 && (r = redisCommand(s->ctl, "SELECT %ld", s->db)) != NULL)
        freeReplyObject(r);
    if ((r = ctl_cmd(s, "INFO server")) == NULL)
        return -1;
    if (r->type == REDIS_REPLY_STRING &&
        (v = info_field(r->str, "redis_version")) != NULL)
        snprintf(s->version, sizeof(s->version), "%.*s",
                 (int)strcspn(v, "\r\n"), v);
    freeReplyObject(r);
    return 0;
}

/* A sluice URL for the server with 'pool' connections and 'extra' options. */
static void sluice_url_for(const server *s, unsigned pool, const char *extra,
                           char *out, size_t cap)
{
    snprintf(out, cap, "%s%spool=%u%s%s", s->sluice_url,
             strchr(s->sluice_url, '?') ? "&" : "?", pool,
             extra != NULL ? "&" : "", extra != NULL ? extra : "");
}

/* A hiredis connection of a caller's own to the server (AUTH, SELECT). */
static redisContext *raw_connect(const server *s)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    redisReply *r;

    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (s->password[0] != '\0') {
        r = s->user[0] ? redisCommand(c, "AUTH %s %s", s->user, s->password)
                       : redisCommand(c, "AUTH %s", s->password);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (s->db != 0 && (r = redisCommand(c, "SELECT %ld", s->db)) != NULL)
        freeReplyObject(r);
    return c;
}

/* ---- Children (redis-benchmark, the peers) ------------------------------- */

/*
 * Runs 'argv' with its standard output and error read into 'out' (at most
 * 'cap' - 1 bytes, NUL-terminated), killing it by PID after 'timeout_s'.
 * '*cpu_s' gets its CPU time. Returns its exit status, or -1 if it could not
 * run or was killed.
 */
static double child_cs; /* the last child's context switches */

static int child_run(char *const argv[], char *out, size_t cap,
                     double timeout_s, double *cpu_s)
{
    double cs0 = rusage_cs(RUSAGE_CHILDREN);
    int fds[2], status = 0, devnull;
    size_t used = 0;
    double deadline = now_s() + timeout_s, cpu0 = rusage_s(RUSAGE_CHILDREN);
    pid_t pid;
    bool killed = false;

    out[0] = '\0';
    if (pipe(fds) < 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        printf("{\"error\": \"cannot run %s: %s\"}\n", argv[0],
               strerror(errno));
        fflush(stdout);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        double left = deadline - now_s();
        char drop[4096];
        ssize_t n;

        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        if (used + 1 < cap)
            n = read(fds[0], out + used, cap - 1 - used);
        else
            n = read(fds[0], drop, sizeof(drop)); /* keep it unblocked */
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (used + 1 < cap)
            used += (size_t)n;
    }
    out[used] = '\0';
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *cpu_s = rusage_s(RUSAGE_CHILDREN) - cpu0;
    child_cs = rusage_cs(RUSAGE_CHILDREN) - cs0;
    if (killed) {
        snprintf(out, cap, "{\"error\": \"killed after %.0f s\"}\n",
                 timeout_s);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The last line of 'text' that starts with '{', or NULL. */
static const char *last_json_line(const char *text)
{
    const char *found = NULL;

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (*p == '{')
            found = p;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return found;
}

/* The number after "name": in a flat JSON line; false if absent. */
static bool json_num(const char *line, const char *name, double *out)
{
    char pat[64];
    const char *p, *eol = strchr(line, '\n');

    snprintf(pat, sizeof(pat), "\"%s\":", name);
    p = strstr(line, pat);
    if (p == NULL || (eol != NULL && p > eol))
        return false;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    *out = strtod(p, NULL);
    return true;
}

/* The string after "name": in a flat JSON line, into 'out'; false if none. */
static bool json_str(const char *line, const char *name, char *out,
                     size_t cap)
{
    char pat[64];
    const char *p, *eol = strchr(line, '\n');
    size_t n = 0;

    snprintf(pat, sizeof(pat), "\"%s\":", name);
    p = strstr(line, pat);
    if (p == NULL || (eol != NULL && p > eol))
        return false;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p++ != '"')
        return false;
    while (*p != '\0' && *p != '"' && *p != '\n' && n + 1 < cap) {
        if (*p == '\\' && p[1] != '\0')
            p++;
        out[n++] = *p++;
    }
    out[n] = '\0';
    return true;
}

/* The last non-empty line of 'text', for a "not available" reason. */
static void last_line(const char *text, char *out, size_t cap)
{
    const char *start = NULL, *p = text;

    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);

        if (len > 0)
            start = p;
        if (eol == NULL)
            break;
        p = eol + 1;
    }
    if (start == NULL) {
        snprintf(out, cap, "it printed nothing");
        return;
    }
    snprintf(out, cap, "%.*s", (int)strcspn(start, "\n"), start);
}

/* ---- Cases --------------------------------------------------------------- */

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
    const char *url_extra;/* sluice: more URL options, or NULL */
    unsigned depth;       /* per thread: raw pipelined calls in flight, or
                             the requests of a sluice_hit_many() batch */
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
    double seconds;
    unsigned repeats;
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

typedef struct report {
    options o;
    server srv;
    bench_case cases[MAX_CASES];
    int ncases;
    peer_info peers[NPEERS];
    bool rb_ok;
    char rb_why[256];
    char rb_version[64];
    double load_before[3], load_after[3];
    long cpus;
    double wall_s;
    double empty_usec, empty_cpu_us; /* the empty script's; < 0 unknown */
    /* workload index -> case index of each sluice algorithm */
    int sluice_case[4][BENCH_ALGO_N];
    int rb_case[4], rlf_case[4], limits_fixed_case[4], limits_moving_case[4];
    /* the hit_many rows (-1 for 1 caller): 1 thread, each algorithm; and
       2 threads, fixed window */
    int many_case[4][BENCH_ALGO_N], many2_case[4];
    int refused_case, refused_off_case; /* the hot refused key */
} report;

/* The four workloads: callers x keys. */
static unsigned workload_callers(const options *o, int w)
{
    return w < 2 ? 1 : o->callers;
}

static size_t workload_keys(int w)
{
    return w % 2 == 0 ? 1 : MANY_KEYS;
}

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

/*
 * The rows of a workload of 'callers' callers beyond sluice_hit() and the
 * references: sluice_hit_many() batches of 'callers' requests from 1 thread
 * (each algorithm) and from 2 threads of half as many each (fixed window:
 * the same decisions in flight, on both cores); and, on the hot key,
 * the key refused all run long with and without the cache of refused keys.
 */
static void cases_build_more(report *rp, int w, size_t keys)
{
    unsigned n = rp->o.callers, npool = rp->o.pool;
    char id[64], label[96];
    bench_case *c;

    for (int a = 0; a < BENCH_ALGO_N; a++) {
        snprintf(id, sizeof(id), "sluice_%s_hit_many", sluice_algo_name(a));
        snprintf(label, sizeof(label), "sluice %s, 1 thread, hit_many "
                 "\u00d7%u", sluice_algo_name(a), n);
        c = case_add(rp, HOW_SLUICE_MANY, id, label, n, keys);
        c->algo = (sluice_algo)a;
        c->threads = 1;
        c->depth = n;
        c->pool = c->connections = npool;
        rp->many_case[w][a] = rp->ncases - 1;
    }
    /* The same decisions in flight as the other rows, on both cores. */
    snprintf(label, sizeof(label), "sluice fixed, 2 threads, hit_many "
             "\u00d7%u each", n / 2 > 0 ? n / 2 : 1);
    c = case_add(rp, HOW_SLUICE_MANY, "sluice_fixed_hit_many_2threads", label,
                 2 * (n / 2 > 0 ? n / 2 : 1), keys);
    c->algo = SLUICE_FIXED;
    c->threads = 2;
    c->depth = n / 2 > 0 ? n / 2 : 1;
    c->pool = c->connections = npool;
    rp->many2_case[w] = rp->ncases - 1;
    if (keys != 1)
        return;
    for (int off = 0; off < 2; off++) {
        c = case_add(rp, HOW_SLUICE,
                     off ? "sluice_fixed_refused_cache_off"
                         : "sluice_fixed_refused",
                     off ? "sluice fixed, refused key, refused_cache=off"
                         : "sluice fixed, refused key, cache on",
                     n, keys);
        c->algo = SLUICE_FIXED;
        c->pool = c->connections = npool;
        c->url_extra = off ? "refused_cache=off" : "refused_cache=default";
        c->max = REFUSED_MAX;
        c->window_ms = REFUSED_WINDOW_MS;
        *(off ? &rp->refused_off_case : &rp->refused_case) = rp->ncases - 1;
    }
}

/* The case list: the main table's four workloads, then the diagnostics. */
static void cases_build(report *rp)
{
    const options *o = &rp->o;
    unsigned n = o->callers, npool = o->pool;
    char id[64], label[96];
    int sluice_fixed_many_n = -1;

    rp->refused_case = rp->refused_off_case = -1;
    for (int w = 0; w < 4; w++) {
        unsigned callers = workload_callers(o, w);
        size_t keys = workload_keys(w);
        bench_case *c;
        int first = rp->ncases;

        for (int a = 0; a < BENCH_ALGO_N; a++) {
            snprintf(id, sizeof(id), "sluice_%s", sluice_algo_name(a));
            snprintf(label, sizeof(label), "sluice %s", sluice_algo_name(a));
            c = case_add(rp, HOW_SLUICE, id, label, callers, keys);
            c->algo = (sluice_algo)a;
            c->pool = npool;
            c->connections = c->pool;
            rp->sluice_case[w][a] = rp->ncases - 1;
            rp->many_case[w][a] = -1;
        }
        rp->many2_case[w] = -1;
        if (w == 3)
            sluice_fixed_many_n = rp->sluice_case[w][SLUICE_FIXED];
        c = case_add(rp, HOW_RB, "redis_benchmark_incr",
                     "redis-benchmark INCR", callers, keys);
        c->vs = rp->sluice_case[w][SLUICE_FIXED];
        rp->rb_case[w] = rp->ncases - 1;
        if (!rp->rb_ok)
            snprintf(c->unavailable, sizeof(c->unavailable), "%s",
                     rp->rb_why);
        c = case_add(rp, HOW_PEER, "rlf_fixed",
                     "rate-limiter-flexible (fixed)", callers, keys);
        c->peer = "rlf";
        c->peer_algo = "fixed";
        c->connections = 1;
        c->vs = rp->sluice_case[w][SLUICE_FIXED];
        rp->rlf_case[w] = rp->ncases - 1;
        c = case_add(rp, HOW_PEER, "limits_fixed", "limits fixed window",
                     callers, keys);
        c->peer = "limits";
        c->peer_algo = "fixed";
        c->vs = rp->sluice_case[w][SLUICE_FIXED];
        rp->limits_fixed_case[w] = rp->ncases - 1;
        c = case_add(rp, HOW_PEER, "limits_moving", "limits moving window",
                     callers, keys);
        c->peer = "limits";
        c->peer_algo = "moving";
        c->vs = rp->sluice_case[w][SLUICE_SLIDING_LOG];
        rp->limits_moving_case[w] = rp->ncases - 1;
        if (callers > 1)
            cases_build_more(rp, w, keys);
        for (int i = first; i < rp->ncases; i++)
            rp->cases[i].section = w;
    }
    for (int i = 0; i < rp->ncases; i++) {
        bench_case *c = &rp->cases[i];
        const peer_info *p = NULL;

        if (c->how != HOW_PEER)
            continue;
        p = &rp->peers[strcmp(c->peer, "rlf") == 0 ? PEER_RLF : PEER_LIMITS];
        if (!o->peers)
            snprintf(c->unavailable, sizeof(c->unavailable),
                     "skipped (--no-peers)");
        else if (!p->ok)
            snprintf(c->unavailable, sizeof(c->unavailable), "%s", p->why);
    }
    if (!o->diag)
        return;

    /* Where the time goes: fixed window, 10,000 keys (one hot-key row). */
    {
        static const unsigned pools[] = {1, 2, 16, 50};
        bench_case *c;

        for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
            unsigned pool = pools[i] == 50 ? n : pools[i];

            if (pool > n || pool == npool)
                continue;
            snprintf(id, sizeof(id), "sluice_fixed_pool%u", pool);
            snprintf(label, sizeof(label), "sluice fixed, pool=%u%s", pool,
                     pool == n ? " (a connection per caller)" : "");
            c = case_add(rp, HOW_SLUICE, id, label, n, MANY_KEYS);
            c->algo = SLUICE_FIXED;
            c->pool = c->connections = pool;
            c->diag = true;
            c->vs = sluice_fixed_many_n;
        }
        /* Every call admitted: what the cache of refused keys costs when
           it has nothing to answer (not the refused key of the table). */
        snprintf(label, sizeof(label),
                 "sluice fixed, 1 hot key admitted, refused_cache=off");
        c = case_add(rp, HOW_SLUICE, "sluice_fixed_hot_admitted_cache_off",
                     label, n, 1);
        c->algo = SLUICE_FIXED;
        c->pool = c->connections = npool;
        c->url_extra = "refused_cache=off";
        c->diag = true;
        c->vs = rp->sluice_case[2][SLUICE_FIXED];
        c = case_add(rp, HOW_RAW_EVALSHA, "raw_evalsha_1",
                     "bare hiredis EVALSHA fixed.lua", 1, MANY_KEYS);
        c->diag = true;
        c->vs = rp->sluice_case[1][SLUICE_FIXED];
        snprintf(label, sizeof(label),
                 "bare hiredis EVALSHA fixed.lua, a conn each");
        c = case_add(rp, HOW_RAW_EVALSHA, "raw_evalsha_n", label, n,
                     MANY_KEYS);
        c->diag = true;
        c->vs = sluice_fixed_many_n;
        c = case_add(rp, HOW_RAW_INCR, "raw_incr_1", "bare hiredis INCR", 1,
                     MANY_KEYS);
        c->diag = true;
        c->vs = rp->sluice_case[1][SLUICE_FIXED];
        c = case_add(rp, HOW_RAW_INCR, "raw_incr_n",
                     "bare hiredis INCR, a conn each", n, MANY_KEYS);
        c->diag = true;
        c->vs = sluice_fixed_many_n;
        snprintf(label, sizeof(label),
                 "bare hiredis EVALSHA fixed.lua, %u pipelined", n);
        c = case_add(rp, HOW_RAW_PIPE, "raw_evalsha_pipelined", label, n,
                     MANY_KEYS);
        c->threads = c->connections = 1;
        c->depth = n > PIPE_DEPTH_MAX ? PIPE_DEPTH_MAX : n;
        c->diag = true;
        c->vs = sluice_fixed_many_n;
    }
}

/* ---- In-process runs: sluice and bare hiredis ---------------------------- */

/* Latencies of one caller, in nanoseconds. */
typedef struct lat_buf {
    uint32_t *ns;
    size_t n, cap;
} lat_buf;

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

/*
 * One raw EVALSHA of the algorithm's script, as the library sends it for
 * one request (the layout at the top of src/lua/fixed.lua).
 */
static void raw_evalsha_args(caller *w, size_t k, const char **argv,
                             size_t *lens, char *max, char *window)
{
    argv[0] = "EVALSHA";
    argv[1] = w->sha;
    argv[2] = "1";
    argv[3] = key_at(w->keys, k);
    argv[4] = max;
    argv[5] = window;
    argv[6] = "1"; /* count it */
    argv[7] = "";  /* the server's clock */
    argv[8] = "0"; /* token (the sliding log's) */
    argv[9] = "1"; /* the request's cost */
    for (int i = 0; i < 10; i++)
        lens[i] = strlen(argv[i]);
    lens[3] = key_len(w->keys, k);
}

/* Reads a raw reply: 1 admitted, 0 refused, -1 error (into w->why). */
static int raw_reply(caller *w, redisReply *r)
{
    int v = -1;

    if (r == NULL)
        snprintf(w->why, sizeof(w->why), "hiredis: %s", w->ctx->errstr);
    else if (r->type == REDIS_REPLY_INTEGER)
        v = 1;
    else if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             r->element[0]->type == REDIS_REPLY_INTEGER)
        v = r->element[0]->integer != 0;
    else
        snprintf(w->why, sizeof(w->why), "unexpected reply: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "of another type");
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* One decision (or INCR) on key 'k': 1 admitted, 0 refused, -1 error. */
static int call_once(caller *w, size_t k, char *max, char *window)
{
    const char *argv[10];
    size_t lens[10];

    if (w->c->how == HOW_SLUICE) {
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
    if (w->c->how == HOW_RAW_INCR) {
        argv[0] = "INCR";
        lens[0] = 4;
        argv[1] = key_at(w->keys, k);
        lens[1] = key_len(w->keys, k);
        return raw_reply(w, redisCommandArgv(w->ctx, 2, argv, lens));
    }
    raw_evalsha_args(w, k, argv, lens, max, window);
    return raw_reply(w, redisCommandArgv(w->ctx, 10, argv, lens));
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

/* 'depth' pipelined EVALSHAs: appended, then their replies read. */
static int call_pipelined(caller *w, unsigned depth, char *max, char *window,
                          uint64_t *admitted)
{
    const char *argv[10];
    size_t lens[10];
    int bad = 0;

    for (unsigned i = 0; i < depth; i++) {
        size_t k = w->keys->n > 1 ? pick_key(&w->rng, w->keys->n) : 0;

        raw_evalsha_args(w, k, argv, lens, max, window);
        redisAppendCommandArgv(w->ctx, 10, argv, lens);
    }
    for (unsigned i = 0; i < depth; i++) {
        redisReply *r = NULL;
        int v;

        if (redisGetReply(w->ctx, (void **)&r) != REDIS_OK)
            r = NULL;
        if ((v = raw_reply(w, r)) < 0)
            bad = 1;
        else
            *admitted += (uint64_t)v;
        if (r == NULL)
            return -1; /* the connection is gone */
    }
    return bad ? -1 : 0;
}

/*
 * A caller: connects (raw cases), makes WARM_CALLS untimed calls (batches
 * for sluice_hit_many()), waits at both barriers (the main thread reads the
 * server's counters between them), then calls until 'seconds' have passed,
 * timing each call.
 */
static void *caller_main(void *arg)
{
    caller *w = arg;
    char max[24], window[24];
    size_t n = w->keys->n;
    bool failed = false, many = w->c->how == HOW_SLUICE_MANY;
    uint64_t start, now, deadline, warm_admitted = 0;

    snprintf(max, sizeof(max), "%llu", (unsigned long long)w->c->max);
    snprintf(window, sizeof(window), "%u", (unsigned)w->c->window_ms);
    if (w->c->how != HOW_SLUICE && !many &&
        (w->ctx = raw_connect(w->srv)) == NULL) {
        snprintf(w->why, sizeof(w->why), "cannot connect");
        failed = true;
    }
    if (many && (w->reqs = calloc(w->c->depth, sizeof(*w->reqs))) == NULL) {
        snprintf(w->why, sizeof(w->why), "out of memory for a batch");
        failed = true;
    }
    for (unsigned i = 0; i < WARM_CALLS && !failed; i++)
        failed = many ? call_many(w, i, &warm_admitted) < 0
                      : call_once(w, i % n, max, window) < 0;
    pthread_barrier_wait(w->ready);
    pthread_barrier_wait(w->go);
    start = now = now_ns();
    deadline = start + (uint64_t)(w->seconds * 1e9);
    while (!failed && now < deadline) {
        uint64_t t0 = now;
        int v;

        if (w->c->how == HOW_RAW_PIPE || many) {
            failed = (many ? call_many(w, SIZE_MAX, &w->admitted)
                           : call_pipelined(w, w->c->depth, max, window,
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

/* The 'q' quantile of 'v' (sorted here), in microseconds. */
static double quantile_us(uint32_t *v, size_t n, double q)
{
    size_t i;

    if (n == 0)
        return 0;
    i = (size_t)(q * (double)n);
    if (i >= n)
        i = n - 1;
    return v[i] / 1000.0;
}

/* The SHA1 of the algorithm's script, loaded on the server. */
static int script_sha(server *s, sluice_algo algo, char sha[41])
{
    redisReply *r = ctl_cmd(s, "SCRIPT LOAD %s", sluice__algos[algo]->script->text);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;

    if (ok)
        memcpy(sha, r->str, 41);
    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/*
 * Runs an in-process case once: its callers on a fresh store (sluice) or
 * connections of their own (raw). Returns 0, or -1 with 'why' filled.
 */
static int run_threads(report *rp, bench_case *c, const keyset *ids,
                       const keyset *skeys, run_result *r, char *why,
                       size_t why_cap)
{
    unsigned threads = c->threads;
    bool lib = c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY;
    sluice_limit limit = SLUICE_LIMIT(c->algo, c->max, c->window_ms);
    sluice_store *store = NULL;
    caller *w = calloc(threads, sizeof(*w));
    pthread_t *tid = calloc(threads, sizeof(*tid));
    pthread_barrier_t ready, go;
    double srv0, srv1, cli0, cli1, cs0, cs1, calls, usec;
    size_t total = 0;
    uint32_t *all;
    char url[1200], sha[41] = "";
    int err = 0;

    if (w == NULL || tid == NULL) {
        free(w);
        free(tid);
        snprintf(why, why_cap, "out of memory");
        return -1;
    }
    if (lib) {
        sluice_url_for(&rp->srv, c->pool, c->url_extra, url, sizeof(url));
        if ((err = sluice_store_open(&store, url, NULL)) < 0) {
            snprintf(why, why_cap, "sluice_store_open(%.80s): %s (%.100s)", url,
                     sluice_strerror(err), sluice_last_error());
            free(w);
            free(tid);
            return -1;
        }
    } else if (c->how != HOW_RAW_INCR &&
               script_sha(&rp->srv, c->algo, sha) < 0) {
        snprintf(why, why_cap, "SCRIPT LOAD failed");
        free(w);
        free(tid);
        return -1;
    }
    pthread_barrier_init(&ready, NULL, threads + 1);
    pthread_barrier_init(&go, NULL, threads + 1);
    for (unsigned t = 0; t < threads; t++) {
        w[t].c = c;
        w[t].srv = &rp->srv;
        w[t].store = store;
        w[t].sha = sha;
        w[t].limit = &limit;
        w[t].keys = lib ? ids : skeys;
        w[t].rng = ((uint64_t)(t + 1) * 0x9e3779b97f4a7c15ULL ^
                    (uint64_t)now_ns()) | 1;
        w[t].seconds = rp->o.seconds;
        w[t].ready = &ready;
        w[t].go = &go;
        if (pthread_create(&tid[t], NULL, caller_main, &w[t]) != 0) {
            fprintf(stderr, "sluice_bench_server: cannot start a thread\n");
            exit(1);
        }
    }
    pthread_barrier_wait(&ready);
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    cli0 = rusage_s(RUSAGE_SELF);
    cs0 = rusage_cs(RUSAGE_SELF);
    pthread_barrier_wait(&go);
    for (unsigned t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    cli1 = rusage_s(RUSAGE_SELF);
    cs1 = rusage_cs(RUSAGE_SELF);
    srv1 = server_cpu_s(&rp->srv);
    stats_read(&rp->srv, c->cmd, &calls, &usec);

    memset(r, 0, sizeof(*r));
    for (unsigned t = 0; t < threads; t++) {
        if (w[t].why[0] != '\0' && err == 0) {
            snprintf(why, why_cap, "%s", w[t].why);
            err = -1;
        }
        if (w[t].elapsed_s > 0)
            r->rate += (double)w[t].calls / w[t].elapsed_s;
        r->calls += (double)w[t].calls;
        r->admitted += (double)w[t].admitted;
        total += w[t].lat.n;
    }
    all = malloc((total ? total : 1) * sizeof(*all));
    if (all != NULL) {
        size_t at = 0;

        for (unsigned t = 0; t < threads; t++) {
            memcpy(all + at, w[t].lat.ns, w[t].lat.n * sizeof(*all));
            at += w[t].lat.n;
        }
        qsort(all, total, sizeof(*all), cmp_u32);
        r->p50_us = quantile_us(all, total, 0.50);
        r->p99_us = quantile_us(all, total, 0.99);
        free(all);
    }
    for (unsigned t = 0; t < threads; t++)
        free(w[t].lat.ns);
    r->srv_cpu_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    r->cli_cpu_s = cli1 - cli0;
    r->cli_cs = cs1 - cs0;
    r->cmd_usec = calls > 0 ? usec / calls : -1;
    r->cmd_calls = calls;
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

/* ---- Runs of other programs ---------------------------------------------- */

/* Parses redis-benchmark's --csv line for INCR into 'r'. */
static int rb_parse(const char *out, run_result *r)
{
    const char *line = strstr(out, "\"INCR\",");
    double v[7];
    const char *p;

    if (line == NULL)
        return -1;
    p = line + 7;
    for (int i = 0; i < 7; i++) {
        if (*p == '"')
            p++;
        v[i] = strtod(p, NULL);
        p = strchr(p, ',');
        if (p == NULL && i < 6)
            return -1;
        if (p != NULL)
            p++;
    }
    /* rps, avg, min, p50, p95, p99, max (ms) */
    r->rate = v[0];
    r->p50_us = v[3] * 1000;
    r->p99_us = v[5] * 1000;
    return 0;
}

static int run_rb(report *rp, bench_case *c, run_result *r, char *why,
                  size_t why_cap)
{
    char port[16], clients[16], requests[24], keys[24], db[24], out[8192];
    char *argv[32];
    int argc = 0, status;
    double n = c->rb_guess * rp->o.seconds, srv0, srv1, cpu, calls, usec;

    if (n < 1000)
        n = 1000;
    snprintf(port, sizeof(port), "%d", rp->srv.port);
    snprintf(clients, sizeof(clients), "%u", c->callers);
    snprintf(requests, sizeof(requests), "%.0f", n);
    snprintf(keys, sizeof(keys), "%zu", c->keys);
    snprintf(db, sizeof(db), "%ld", rp->srv.db);
    argv[argc++] = (char *)rp->o.redis_benchmark;
    argv[argc++] = "-h";
    argv[argc++] = rp->srv.host;
    argv[argc++] = "-p";
    argv[argc++] = port;
    if (rp->srv.password[0] != '\0') {
        if (rp->srv.user[0] != '\0') {
            argv[argc++] = "--user";
            argv[argc++] = rp->srv.user;
        }
        argv[argc++] = "-a";
        argv[argc++] = rp->srv.password;
    }
    if (rp->srv.db != 0) {
        argv[argc++] = "--dbnum";
        argv[argc++] = db;
    }
    argv[argc++] = "-t";
    argv[argc++] = "incr";
    argv[argc++] = "-c";
    argv[argc++] = clients;
    argv[argc++] = "-n";
    argv[argc++] = requests;
    if (c->keys > 1) {
        argv[argc++] = "-r";
        argv[argc++] = keys;
    }
    argv[argc++] = "--csv";
    argv[argc] = NULL;

    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    status = child_run(argv, out, sizeof(out),
                       rp->o.seconds * 10 + PEER_OVERHEAD_S, &cpu);
    srv1 = server_cpu_s(&rp->srv);
    stats_read(&rp->srv, "incr", &calls, &usec);
    memset(r, 0, sizeof(*r));
    if (status != 0 || rb_parse(out, r) < 0) {
        char line[200];

        last_line(out, line, sizeof(line));
        snprintf(why, why_cap, "redis-benchmark failed: %s", line);
        return -1;
    }
    r->calls = r->admitted = n;
    r->srv_cpu_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    r->cli_cpu_s = cpu;
    r->cli_cs = child_cs;
    r->cmd_usec = calls > 0 ? usec / calls : -1;
    r->cmd_calls = calls;
    r->key_calls = -1;
    c->rb_guess = r->rate; /* the next run lasts about --seconds */
    return 0;
}

/* The argument vector that runs peer 'peer' with 'extra' arguments. */
static int peer_argv(const report *rp, const char *peer, char **argv,
                     char *script, size_t cap)
{
    int argc = 0;

    if (strcmp(peer, "rlf") == 0) {
        snprintf(script, cap, "%s/rlf_bench.js", rp->o.peers_dir);
        argv[argc++] = (char *)rp->o.node;
    } else {
        snprintf(script, cap, "%s/limits_bench.py", rp->o.peers_dir);
        argv[argc++] = (char *)rp->o.python;
    }
    argv[argc++] = script;
    argv[argc++] = "--url";
    argv[argc++] = (char *)rp->srv.peer_url;
    return argc;
}

static int run_peer(report *rp, bench_case *c, run_result *r, char *why,
                    size_t why_cap)
{
    char script[1100], callers[16], keys[24], seconds[32], out[16384];
    char *argv[24];
    int argc = peer_argv(rp, c->peer, argv, script, sizeof(script));
    const char *line;
    double cpu, calls, usec, v;
    int status;

    snprintf(callers, sizeof(callers), "%u", c->callers);
    snprintf(keys, sizeof(keys), "%zu", c->keys);
    snprintf(seconds, sizeof(seconds), "%g", rp->o.seconds);
    if (strcmp(c->peer, "limits") == 0) {
        argv[argc++] = "--algo";
        argv[argc++] = (char *)c->peer_algo;
    }
    argv[argc++] = "--callers";
    argv[argc++] = callers;
    argv[argc++] = "--keys";
    argv[argc++] = keys;
    argv[argc++] = "--seconds";
    argv[argc++] = seconds;
    argv[argc] = NULL;

    stats_reset(&rp->srv);
    status = child_run(argv, out, sizeof(out),
                       rp->o.seconds * 3 + PEER_OVERHEAD_S, &cpu);
    stats_read(&rp->srv, "evalsha", &calls, &usec);
    memset(r, 0, sizeof(*r));
    line = last_json_line(out);
    if (status != 0 || line == NULL || !json_num(line, "decisions_per_s",
                                                 &r->rate)) {
        char msg[200] = "";

        if (line == NULL || !json_str(line, "error", msg, sizeof(msg)))
            last_line(out, msg, sizeof(msg));
        snprintf(why, why_cap, "%s failed: %s", c->peer, msg);
        return -1;
    }
    json_num(line, "p50_us", &r->p50_us);
    json_num(line, "p99_us", &r->p99_us);
    json_num(line, "calls", &r->calls);
    json_num(line, "admitted", &r->admitted);
    r->srv_cpu_s = json_num(line, "server_cpu_s", &v) ? v : -1;
    r->cli_cpu_s = json_num(line, "client_cpu_s", &v) ? v : cpu;
    r->cli_cs = json_num(line, "client_context_switches", &v) ? v : -1;
    r->cmd_usec = calls > 0 ? usec / calls : -1;
    r->cmd_calls = r->key_calls = -1; /* the server counted the warm-up */
    return 0;
}

/*
 * Finds out whether each peer can run here ('--check': its packages load and
 * it reaches the server), and whether redis-benchmark is installed.
 */
static void tools_check(report *rp)
{
    char out[4096], script[1100];
    char *argv[16];
    double cpu;

    for (int p = 0; p < NPEERS; p++) {
        peer_info *pi = &rp->peers[p];
        const char *line;
        char a[32], b[32];
        int argc, status;

        pi->name = p == PEER_RLF ? "rlf" : "limits";
        if (!rp->o.peers) {
            snprintf(pi->why, sizeof(pi->why), "skipped (--no-peers)");
            continue;
        }
        argc = peer_argv(rp, pi->name, argv, script, sizeof(script));
        argv[argc++] = "--check";
        argv[argc] = NULL;
        if (access(script, R_OK) != 0) {
            snprintf(pi->why, sizeof(pi->why),
                     "%.200s is missing (--peers DIR)", script);
            continue;
        }
        status = child_run(argv, out, sizeof(out), PEER_OVERHEAD_S, &cpu);
        line = last_json_line(out);
        if (status == 0 && line != NULL && strstr(line, "\"ok\"") != NULL) {
            pi->ok = true;
            if (p == PEER_RLF && json_str(line, "rate_limiter_flexible", a,
                                          sizeof(a)) &&
                json_str(line, "ioredis", b, sizeof(b))) {
                char *nv[] = {(char *)rp->o.node, "--version", NULL};
                char node[64] = "";

                if (child_run(nv, node, sizeof(node), 30, &cpu) == 0)
                    node[strcspn(node, "\r\n")] = '\0';
                snprintf(pi->versions, sizeof(pi->versions),
                         "rate-limiter-flexible %.20s, ioredis %.20s, "
                         "Node %.20s", a, b, node);
            } else if (p == PEER_LIMITS &&
                       json_str(line, "limits", a, sizeof(a)) &&
                       json_str(line, "redis_py", b, sizeof(b))) {
                snprintf(pi->versions, sizeof(pi->versions),
                         "limits %s, redis-py %s", a, b);
            }
            continue;
        }
        if (line == NULL || !json_str(line, "error", pi->why,
                                      sizeof(pi->why))) {
            char msg[200];

            last_line(out, msg, sizeof(msg));
            snprintf(pi->why, sizeof(pi->why), "%s --check failed: %s",
                     argv[0], msg);
        }
    }
    {
        char *rv[] = {(char *)rp->o.redis_benchmark, "--version", NULL};
        int status = child_run(rv, out, sizeof(out), 30, &cpu);

        rp->rb_ok = status == 0;
        if (rp->rb_ok) {
            out[strcspn(out, "\r\n")] = '\0';
            snprintf(rp->rb_version, sizeof(rp->rb_version), "%.60s", out);
        } else {
            snprintf(rp->rb_why, sizeof(rp->rb_why),
                     "%s cannot run (apt-get install redis-tools)",
                     rp->o.redis_benchmark);
        }
    }
}

/* ---- Passes -------------------------------------------------------------- */

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
static bool case_selected(const char *only, const char *id)
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

/* Runs case 'i' once, as pass 'pass'. */
static int case_run(report *rp, int i, unsigned pass, const keyset *ids,
                    const keyset *skeys)
{
    bench_case *c = &rp->cases[i];
    run_result *r = &c->runs[c->nruns];
    char why[256] = "";
    int err;

    if (c->unavailable[0] != '\0')
        return 0;
    if (!case_selected(rp->o.only, c->id)) {
        snprintf(c->unavailable, sizeof(c->unavailable), "skipped (--only)");
        return 0;
    }
    progress(rp, pass, i, "");
    server_flush(&rp->srv);
    switch (c->how) {
    case HOW_RB:
        err = run_rb(rp, c, r, why, sizeof(why));
        break;
    case HOW_PEER:
        err = run_peer(rp, c, r, why, sizeof(why));
        break;
    default:
        err = run_threads(rp, c, ids, skeys, r, why, sizeof(why));
        break;
    }
    if (err < 0) {
        if (c->how == HOW_SLUICE || c->how == HOW_SLUICE_MANY) {
            fprintf(stderr, "\nsluice_bench_server: %s: %s\n", c->label,
                    why);
            return -1;
        }
        /* A reference that fails is reported, not fatal. */
        snprintf(c->unavailable, sizeof(c->unavailable), "%s", why);
        return 0;
    }
    c->nruns++;
    return 0;
}

/* The median of each figure over a case's runs, and the rates' spread. */
static void case_finish(bench_case *c)
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
    /* Per-decision CPU: the median of each run's own ratio. */
    for (unsigned i = 0; i < c->nruns; i++)
        v[i] = c->runs[i].calls > 0 && c->runs[i].srv_cpu_s >= 0
                   ? c->runs[i].srv_cpu_s / c->runs[i].calls
                   : -1;
    c->med.srv_cpu_s = median_of(v, c->nruns);
    for (unsigned i = 0; i < c->nruns; i++)
        v[i] = c->runs[i].calls > 0 ? c->runs[i].cli_cpu_s / c->runs[i].calls
                                    : 0;
    c->med.cli_cpu_s = median_of(v, c->nruns);
    for (unsigned i = 0; i < c->nruns; i++)
        v[i] = c->runs[i].calls > 0 && c->runs[i].cli_cs >= 0
                   ? c->runs[i].cli_cs / c->runs[i].calls
                   : -1;
    c->med.cli_cs = median_of(v, c->nruns);
    for (unsigned i = 0; i < c->nruns; i++)
        v[i] = c->runs[i].calls > 0 && c->runs[i].cmd_calls >= 0
                   ? c->runs[i].cmd_calls / c->runs[i].calls
                   : -1;
    c->med.cmd_calls = median_of(v, c->nruns);
    for (unsigned i = 0; i < c->nruns; i++)
        v[i] = c->runs[i].calls > 0 && c->runs[i].key_calls >= 0
                   ? c->runs[i].key_calls / c->runs[i].calls
                   : -1;
    c->med.key_calls = median_of(v, c->nruns);
    for (unsigned i = 0; i < c->nruns; i++) {
        double x = c->runs[i].rate;

        lo = i == 0 || x < lo ? x : lo;
        hi = i == 0 || x > hi ? x : hi;
    }
    c->spread = c->med.rate > 0 ? (hi - lo) / c->med.rate : 0;
    if (c->nruns == 0 && c->unavailable[0] == '\0')
        snprintf(c->unavailable, sizeof(c->unavailable), "no run finished");
}

/* ---- Server CPU per decision (commandstats) and memory per key ----------- */

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

#define NCPU_ROWS (3 * BENCH_ALGO_N)
#define CPU_BATCH 50u
#define NMEM_ROWS 6

/*
 * N decisions of 'algo' from one caller on 'keys' keys, after CONFIG
 * RESETSTAT, by sluice_hit() or (row->batch > 1) by sluice_hit_many() in
 * batches of row->batch; then N bare INCRs by hiredis on as many keys.
 */
static int cpu_measure(report *rp, cpu_row *row, const keyset *ids,
                       const keyset *incr_keys)
{
    sluice_limit limit = SLUICE_LIMIT(row->algo, ADMIT_MAX, WINDOW_MS);
    sluice_store *store = NULL;
    redisContext *c;
    char url[1200];
    double calls, usec, srv0, srv1;
    uint64_t rng = 0x2545f4914f6cdd1dULL;
    unsigned n = rp->o.cpu_calls;
    int err;

    server_flush(&rp->srv);
    sluice_url_for(&rp->srv, 1, NULL, url, sizeof(url));
    if ((err = sluice_store_open(&store, url, NULL)) < 0)
        return -1;
    for (unsigned i = 0; i < WARM_CALLS && err == 0; i++) {
        sluice_decision d;

        err = sluice_hit(&d, store, &limit, key_at(ids, 0), key_len(ids, 0),
                         1);
    }
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    for (unsigned i = 0; i < n && err == 0; i += row->batch) {
        sluice_request q[CPU_BATCH];
        unsigned m = row->batch < n - i ? row->batch : n - i;

        for (unsigned j = 0; j < m; j++) {
            size_t k = row->keys > 1 ? pick_key(&rng, row->keys) : 0;

            q[j] = (sluice_request){key_at(ids, k), key_len(ids, k), 1, 0,
                                    {0}};
        }
        if (m == 1)
            err = sluice_hit(&q[0].decision, store, &limit, q[0].key,
                             q[0].key_len, 1);
        else
            err = sluice_hit_many(store, &limit, q, m);
    }
    srv1 = server_cpu_s(&rp->srv);
    sluice_store_free(store);
    if (err < 0)
        return -1;
    stats_read(&rp->srv, "evalsha", &calls, &usec);
    row->evalsha_us = calls > 0 ? usec / n : -1;
    stats_read(&rp->srv, NULL, &calls, &usec);
    row->inner_us = usec / n;
    row->info_us = (srv1 - srv0) * 1e6 / n;

    if ((c = raw_connect(&rp->srv)) == NULL)
        return -1;
    server_flush(&rp->srv);
    stats_reset(&rp->srv);
    srv0 = server_cpu_s(&rp->srv);
    for (unsigned i = 0; i < n; i++) {
        size_t k = row->keys > 1 ? pick_key(&rng, row->keys) : 0;
        const char *argv[2] = {"INCR", key_at(incr_keys, k)};
        size_t lens[2] = {4, key_len(incr_keys, k)};
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
 * The floor of any decision made by one script on this server: N EVALSHAs
 * of a script that only answers {1, 0, 0, 0}, with the KEYS and ARGV a
 * sluice script is sent. Sets its usec_per_call and INFO cpu per call.
 */
static int empty_script_measure(report *rp, const keyset *skeys,
                                double *usec_per_call, double *cpu_us)
{
    static const char empty[] = "return {1, 0, 0, 0}";
    redisReply *r = ctl_cmd(&rp->srv, "SCRIPT LOAD %s", empty);
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
    for (unsigned i = 0; i < n && err == 0; i++) {
        const char *argv[10];
        size_t lens[10];

        raw_evalsha_args(&w, pick_key(&rng, skeys->n), argv, lens, max,
                         window);
        err = raw_reply(&w, redisCommandArgv(w.ctx, 10, argv, lens)) < 0;
    }
    srv1 = server_cpu_s(&rp->srv);
    redisFree(w.ctx);
    if (err)
        return -1;
    stats_read(&rp->srv, "evalsha", &calls, &usec);
    *usec_per_call = calls > 0 ? usec / calls : -1;
    *cpu_us = (srv1 - srv0) * 1e6 / n;
    return 0;
}

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
 * One key per row: one admitted hit for the fixed window and the sliding
 * counter, and 100, 1,000 and 10,000 admitted hits on a sliding log whose
 * window (an hour) keeps them all; a bare counter (SET, PEXPIRE) as a
 * reference. Key names count too: "sluice:{bench:mem:N}:ALGO".
 */
static int memory_measure(report *rp, mem_row *rows)
{
    static const unsigned log_entries[] = {100, 1000, 10000};
    sluice_store *store = NULL;
    char url[1200], id[32], kbuf[96];
    size_t klen;
    int err, row = 0;

    server_flush(&rp->srv);
    sluice_url_for(&rp->srv, 1, NULL, url, sizeof(url));
    if ((err = sluice_store_open(&store, url, NULL)) < 0)
        return -1;
    for (int a = 0; a < BENCH_ALGO_N && err == 0; a++) {
        unsigned n_sizes = a == SLUICE_SLIDING_LOG ? 3 : 1;

        for (unsigned s = 0; s < n_sizes && err == 0; s++) {
            /* a minute (an hour for the log): nothing expires while
               measured; 10^6 admits every hit here */
            sluice_limit limit = SLUICE_LIMIT((sluice_algo)a, 1000000u,
                                  a == SLUICE_SLIDING_LOG ? 3600000u
                                                          : 60000u);
            unsigned hits = a == SLUICE_SLIDING_LOG ? log_entries[s] : 1;
            int idlen = snprintf(id, sizeof(id), "bench:mem:%d", row);

            for (unsigned h = 0; h < hits && err == 0; h++) {
                sluice_decision d;

                err = sluice_hit(&d, store, &limit, id, (size_t)idlen, 1);
            }
            sluice__key_build(kbuf, sizeof(kbuf), &klen, "sluice", id,
                              (size_t)idlen, sluice_algo_name(a));
            snprintf(rows[row].what, sizeof(rows[row].what), "%s",
                     sluice_algo_name(a));
            rows[row].entries = a == SLUICE_SLIDING_LOG ? hits : 0;
            rows[row++].bytes = memory_usage(&rp->srv, kbuf, klen);
        }
    }
    sluice_store_free(store);
    if (err < 0)
        return -1;
    {
        redisReply *r = ctl_cmd(&rp->srv, "SET sluice:{bench:mem:incr}:incr 1 "
                                "PX 60000");

        if (r != NULL)
            freeReplyObject(r);
        snprintf(rows[row].what, sizeof(rows[row].what),
                 "bare counter (SET n PX)");
        rows[row].entries = 0;
        rows[row++].bytes = memory_usage(&rp->srv,
                                         "sluice:{bench:mem:incr}:incr", 28);
    }
    return 0;
}

/* ---- Report -------------------------------------------------------------- */

static double ratio(const report *rp, int num, int den)
{
    const bench_case *a, *b;

    if (num < 0 || den < 0)
        return -1;
    a = &rp->cases[num];
    b = &rp->cases[den];
    if (a->nruns == 0 || b->nruns == 0 || b->med.rate <= 0)
        return -1;
    return a->med.rate / b->med.rate;
}

/* Why ratio(num, den) is unknown: the reason of a case that did not run. */
static const char *ratio_why(const report *rp, int num, int den)
{
    if (num < 0 || den < 0)
        return "no such case";
    if (rp->cases[num].nruns == 0)
        return rp->cases[num].unavailable;
    return rp->cases[den].unavailable;
}

/*
 * The pipelined sluice row of the targets: the faster of the fixed
 * window's hit_many rows at 'callers' callers and 10,000 keys (1 thread, 2
 * threads); the first when neither ran.
 */
static int best_many_fixed(const report *rp)
{
    int one = rp->many_case[3][SLUICE_FIXED], two = rp->many2_case[3];

    if (one < 0 || two < 0 || rp->cases[two].nruns == 0)
        return one;
    if (rp->cases[one].nruns == 0 ||
        rp->cases[two].med.rate > rp->cases[one].med.rate)
        return two;
    return one;
}

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

static void print_num(double v, int width, int decimals)
{
    if (v < 0)
        printf(" %*s", width, "-");
    else
        printf(" %*.*f", width, decimals, v);
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
        printf("%s%.3g EVALSHA", sep, m->cmd_calls);
        if (m->key_calls >= 0)
            printf(", %.3g INCRBY", m->key_calls);
        printf(" per decision");
        sep = "; ";
    }
    printf("%s\n", sep[0] == ';' ? ")" : "");
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

static void print_text(report *rp, const cpu_row *cpu, int ncpu,
                       const mem_row *mem, int nmem)
{
    const options *o = &rp->o;
    char wname[64], incr_c[48];
    int fixed = rp->sluice_case[3][SLUICE_FIXED], width = 32, dwidth = 48;
    int piped = best_many_fixed(rp);
    struct {
        const char *label;
        int ref;
        double target;
    } targets[] = {
        {"/ redis-benchmark INCR", rp->rb_case[3], TARGET_VS_INCR},
        {"/ rate-limiter-flexible", rp->rlf_case[3], TARGET_VS_RLF},
        {"/ limits fixed window", rp->limits_fixed_case[3],
         TARGET_VS_LIMITS},
    }, piped_targets[] = {
        {incr_c, rp->rb_case[3], TARGET_PIPELINED_VS_INCR},
        {"/ rate-limiter-flexible", rp->rlf_case[3], TARGET_PIPELINED_VS_RLF},
        {"/ limits fixed window", rp->limits_fixed_case[3],
         TARGET_PIPELINED_VS_LIMITS},
    };

    snprintf(incr_c, sizeof(incr_c), "/ redis-benchmark INCR -c %u",
             o->callers);
    for (int i = 0; i < rp->ncases; i++) {
        int *wp = rp->cases[i].diag ? &dwidth : &width;

        if (text_cols(rp->cases[i].label) > *wp)
            *wp = text_cols(rp->cases[i].label);
    }

    printf("sluice %s server store benchmark: redis-server %s on %s:%d "
           "(%s)\n",
           SLUICE_VERSION, rp->srv.version, rp->srv.host, rp->srv.port,
           rp->srv.own ? "started here: --save '' --appendonly no, "
                         "emptied before each case"
                       : "given by --store; not emptied");
    printf("%.3g s per case, median of %u interleaved run%s; %ld CPU%s "
           "online, shared by client, server and peers;\n"
           "load average %.2f before, %.2f after; %.0f s in all\n",
           o->seconds, o->repeats, o->repeats == 1 ? "" : "s", rp->cpus,
           rp->cpus == 1 ? "" : "s", rp->load_before[0], rp->load_after[0],
           rp->wall_s);
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

    printf("  ");
    print_padded("implementation", width);
    printf(" %5s %10s %5s %8s %8s %7s %6s %7s %5s   %s\n",
           "conns", "dec/s", "sprd", "p50 \u00b5s",
           "p99 \u00b5s", "srv \u00b5s", "cmd \u00b5s", "cli \u00b5s", "cs",
           "sluice / this");
    for (int w = 0; w < 4; w++) {
        printf("%s\n", workload_name(o, w, wname, sizeof(wname)));
        for (int i = 0; i < rp->ncases; i++) {
            const bench_case *c = &rp->cases[i];

            if (!c->diag && c->section == w)
                print_case_row(rp, i, false, width);
        }
    }
    printf("\n");
    print_legend();

    printf("\nTargets (fixed window, %u callers, 10,000 keys; the same "
           "server, keys and concurrency)\n", o->callers);
    printf("  unpipelined: %u threads sharing one store, each calling "
           "sluice_hit(), one decision per call\n", o->callers);
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
        double q = ratio(rp, fixed, targets[t].ref);

        if (q < 0)
            printf("  sluice fixed %-26s not measured: %s\n",
                   targets[t].label, ratio_why(rp, fixed, targets[t].ref));
        else
            printf("  sluice fixed %-26s %6.2f\u00d7 \u2014 target \u2265 "
                   "%.1f\u00d7: %s\n",
                   targets[t].label, q, targets[t].target,
                   q >= targets[t].target ? "met" : "not met");
    }
    printf("  pipelined: sluice_hit_many() batches of %u, from the faster "
           "of the fixed window's hit_many rows:\n    \"%s\"\n",
           o->callers, piped >= 0 ? rp->cases[piped].label : "none");
    for (size_t t = 0; t < sizeof(piped_targets) / sizeof(piped_targets[0]);
         t++) {
        double q = ratio(rp, piped, piped_targets[t].ref);

        if (q < 0)
            printf("  sluice fixed, pipelined (hit_many) %-28s not measured: "
                   "%s\n", piped_targets[t].label,
                   ratio_why(rp, piped, piped_targets[t].ref));
        else
            printf("  sluice fixed, pipelined (hit_many) %-28s %6.2f\u00d7 "
                   "\u2014 target \u2265 %.1f\u00d7: %s\n",
                   piped_targets[t].label, q, piped_targets[t].target,
                   q >= piped_targets[t].target ? "met" : "not met");
    }
    printf("  a hot refused key: %u callers, 1 key, max %u per %u min "
           "window, every timed call refused\n", o->callers, REFUSED_MAX,
           REFUSED_WINDOW_MS / 60000);
    {
        double q = ratio(rp, rp->refused_case, rp->refused_off_case);

        if (q < 0) {
            printf("  hot refused key: refused_cache on / off  not measured: "
                   "%s\n", ratio_why(rp, rp->refused_case,
                                      rp->refused_off_case));
        } else {
            const run_result *on = &rp->cases[rp->refused_case].med,
                             *off = &rp->cases[rp->refused_off_case].med;

            printf("  hot refused key: refused_cache on / off  %6.2f\u00d7 "
                   "\u2014 target \u2265 %.1f\u00d7: %s\n",
                   q, TARGET_REFUSED_CACHE,
                   q >= TARGET_REFUSED_CACHE ? "met" : "not met");
            printf("    (per decision, the server's EVALSHA calls: %.3g with "
                   "the cache, %.3g without;\n     its INCRBYs, one per "
                   "request it decided: %.3g with, %.3g without)\n",
                   on->cmd_calls, off->cmd_calls, on->key_calls,
                   off->key_calls);
        }
    }

    if (o->diag) {
        printf("\nWhere the time goes (fixed window, 10,000 keys unless "
               "said; the last column: this / sluice fixed,\nsame callers "
               "and keys, from the table above)\n");
        printf("  ");
        print_padded("case", dwidth);
        printf(" %4s %5s %10s %5s %8s %8s %7s %6s %7s %5s   %s\n",
               "call", "conns", "dec/s", "sprd", "p50 \u00b5s",
               "p99 \u00b5s", "srv \u00b5s", "cmd \u00b5s", "cli \u00b5s",
               "cs", "vs sluice");
        static const int main_rows[] = {1, 3, 2}; /* 1/N callers, many; hot */

        for (int w = 0; w < 3; w++)
            print_case_row(rp, rp->sluice_case[main_rows[w]][SLUICE_FIXED],
                           true, dwidth);
        for (int i = 0; i < rp->ncases; i++)
            if (rp->cases[i].diag)
                print_case_row(rp, i, true, dwidth);
    }

    if (ncpu > 0) {
        printf("\nServer CPU per decision (%u decisions from 1 caller after "
               "CONFIG RESETSTAT, by sluice_hit(), or by\nsluice_hit_many() "
               "in batches of %u (\"\u00d7%u\"); INFO commandstats)\n",
               o->cpu_calls, CPU_BATCH, CPU_BATCH);
        printf("  %-16s %-11s %11s %10s %10s %9s %10s %9s %12s\n",
               "algorithm", "keys", "EVALSHA \u00b5s", "script cmds",
               "Lua+call", "INCR \u00b5s", "EVALSHA/INCR", "cpu \u00b5s",
               "INCR cpu \u00b5s");
        for (int i = 0; i < ncpu; i++) {
            const cpu_row *c = &cpu[i];

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
    if (nmem > 0) {
        printf("\nServer memory per key (MEMORY USAGE ... SAMPLES 0, key "
               "name included)\n");
        for (int i = 0; i < nmem; i++) {
            if (mem[i].entries > 0)
                printf("  %-26s %6.0f entries %9.0f bytes", mem[i].what,
                       mem[i].entries, mem[i].bytes);
            else
                printf("  %-41s %9.0f bytes", mem[i].what, mem[i].bytes);
            if (mem[i].entries > 0 && i > 0 && mem[i - 1].entries > 0)
                printf("  (%.1f bytes per added entry)",
                       (mem[i].bytes - mem[i - 1].bytes) /
                           (mem[i].entries - mem[i - 1].entries));
            printf("\n");
        }
    }
}

/* Writes 's' as a JSON string. */
static void json_string(const char *s)
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

static void json_number(double v)
{
    if (v < 0)
        printf("null");
    else
        printf("%.6g", v);
}

static void print_json(report *rp, const cpu_row *cpu, int ncpu,
                       const mem_row *mem, int nmem)
{
    const options *o = &rp->o;
    int fixed = rp->sluice_case[3][SLUICE_FIXED], piped = best_many_fixed(rp);
    struct {
        const char *name;
        int num, ref;
        double target;
    } targets[] = {
        {"fixed_many_n_over_redis_benchmark_incr", fixed, rp->rb_case[3],
         TARGET_VS_INCR},
        {"fixed_many_n_over_rlf", fixed, rp->rlf_case[3], TARGET_VS_RLF},
        {"fixed_many_n_over_limits_fixed", fixed, rp->limits_fixed_case[3],
         TARGET_VS_LIMITS},
        /* pipelined: the faster hit_many row ("sluice_case" says which) */
        {"fixed_pipelined_over_redis_benchmark_incr", piped, rp->rb_case[3],
         TARGET_PIPELINED_VS_INCR},
        {"fixed_pipelined_over_rlf", piped, rp->rlf_case[3],
         TARGET_PIPELINED_VS_RLF},
        {"fixed_pipelined_over_limits_fixed", piped,
         rp->limits_fixed_case[3], TARGET_PIPELINED_VS_LIMITS},
        {"refused_hot_cache_on_over_off", rp->refused_case,
         rp->refused_off_case, TARGET_REFUSED_CACHE},
    };

    printf("{\n  \"version\": \"%s\",\n  \"server\": {\"version\": ",
           SLUICE_VERSION);
    json_string(rp->srv.version);
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
    printf("},\n  \"cases\": [");
    for (int i = 0; i < rp->ncases; i++) {
        const bench_case *c = &rp->cases[i];
        const run_result *m = &c->med;

        printf("%s\n    {\"id\": ", i ? "," : "");
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
        if (c->nruns == 0) {
            printf(", \"available\": false, \"why\": ");
            json_string(c->unavailable);
            printf("}");
            continue;
        }
        printf(", \"available\": true, \"decisions_per_s\": ");
        json_number(m->rate);
        printf(", \"spread\": ");
        json_number(c->spread);
        printf(", \"p50_us\": ");
        json_number(m->p50_us);
        printf(", \"p99_us\": ");
        json_number(m->p99_us);
        printf(", \"server_cpu_us_per_decision\": ");
        json_number(m->srv_cpu_s >= 0 ? m->srv_cpu_s * 1e6 : -1);
        printf(", \"command\": \"%s\", \"command_usec_per_call\": ", c->cmd);
        json_number(m->cmd_usec);
        printf(", \"command_calls_per_decision\": ");
        json_number(m->cmd_calls);
        printf(", \"incrby_calls_per_decision\": ");
        json_number(m->key_calls);
        printf(", \"client_cpu_us_per_decision\": ");
        json_number(m->cli_cpu_s * 1e6);
        printf(", \"client_context_switches_per_decision\": ");
        json_number(m->cli_cs);
        printf(", \"admitted_fraction\": ");
        json_number(m->calls > 0 ? m->admitted / m->calls : -1);
        if (c->vs >= 0) {
            printf(c->diag ? ", \"over_sluice\": " : ", \"sluice_over\": ");
            json_number(c->diag ? ratio(rp, i, c->vs) : ratio(rp, c->vs, i));
            printf(", \"compared_with\": \"%s\"",
                   sluice_algo_name(rp->cases[c->vs].algo));
        }
        printf(", \"runs\": [");
        for (unsigned k = 0; k < c->nruns; k++)
            printf("%s%.0f", k ? ", " : "", c->runs[k].rate);
        printf("]}");
    }
    printf("\n  ],\n  \"targets\": [");
    for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
        double q = ratio(rp, targets[t].num, targets[t].ref);

        printf("%s\n    {\"name\": \"%s\", \"value\": ", t ? "," : "",
               targets[t].name);
        json_number(q);
        printf(", \"target_min\": %.1f, \"met\": %s", targets[t].target,
               q >= targets[t].target ? "true" : "false");
        if (targets[t].num == piped && piped >= 0) {
            printf(", \"sluice_case\": ");
            json_string(rp->cases[piped].id);
            printf(", \"sluice_label\": ");
            json_string(rp->cases[piped].label);
        }
        printf("}");
    }
    printf("\n  ],\n  \"server_cpu\": [");
    for (int i = 0; i < ncpu; i++) {
        printf("%s\n    {\"algo\": \"%s\", \"keys\": %zu, \"batch\": %u, "
               "\"calls\": %u, "
               "\"evalsha_usec_per_decision\": %.3f, \"script_commands_usec\": "
               "%.3f, \"incr_usec_per_call\": %.3f, "
               "\"info_cpu_us_per_decision\": %.3f, "
               "\"info_cpu_us_per_incr\": %.3f}",
               i ? "," : "", sluice_algo_name(cpu[i].algo), cpu[i].keys,
               cpu[i].batch, o->cpu_calls, cpu[i].evalsha_us, cpu[i].inner_us,
               cpu[i].incr_us, cpu[i].info_us, cpu[i].incr_info_us);
    }
    printf("\n  ],\n  \"empty_script\": {\"evalsha_usec_per_call\": ");
    json_number(rp->empty_usec);
    printf(", \"info_cpu_us_per_call\": ");
    json_number(rp->empty_cpu_us);
    printf("},\n  \"memory\": [");
    for (int i = 0; i < nmem; i++) {
        printf("%s\n    {\"what\": ", i ? "," : "");
        json_string(mem[i].what);
        printf(", \"entries\": %.0f, \"bytes\": ", mem[i].entries);
        json_number(mem[i].bytes);
        printf("}");
    }
    printf("\n  ]\n}\n");
}

/* ---- Options and main ---------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sluice_bench_server [--seconds S] [--repeats N] [--quick]"
            " [--json]\n"
            "                           [--store URL] [--callers N] "
            "[--pool N] [--no-peers]\n"
            "                           [--no-diag] [--only A,B] "
            "[--peers DIR]\n"
            "                           [--python PATH] [--node PATH]\n"
            "\n"
            "Measures sluice's server store (every algorithm, 1 and N "
            "callers, a hot key\nand %u keys; sluice_hit() and batches of N "
            "by sluice_hit_many(); a hot\nrefused key with and without the "
            "cache of refused keys) beside redis-benchmark\nINCR, "
            "rate-limiter-flexible and Python limits on the same server, and "
            "the\nserver's CPU and memory per decision and per key. "
            "Benchmarks never fail: the\nexit status is 0 whatever the "
            "figures.\n"
            "\n"
            "  --seconds S    each case runs S seconds (default %.0f)\n"
            "  --repeats N    each case runs N times, interleaved; medians "
            "(default %u)\n"
            "  --quick        a smoke run: %.1f s per case, 1 run, fewer "
            "calls\n"
            "  --json         write the results as JSON to standard output\n"
            "  --store URL    use this server (redis://HOST:PORT[/DB]) "
            "instead of starting\n"
            "                 one; it is not emptied, but CONFIG RESETSTAT "
            "is sent\n"
            "  --callers N    the concurrent callers (default %u)\n"
            "  --pool N       sluice's pool of connections (default %u, the "
            "library's)\n"
            "  --no-peers     skip rate-limiter-flexible and limits\n"
            "  --no-diag      skip the \"where the time goes\" rows\n"
            "  --only A,B     run only the cases whose JSON id contains A or B "
            "(e.g. raw_)\n"
            "  --peers DIR    the peer scripts (default %s)\n"
            "  --python PATH  the Python with python3-limits (default "
            "/usr/bin/python3)\n"
            "  --node PATH    Node.js (default node)\n"
            "  --help         show this text\n",
            MANY_KEYS, DEFAULT_SECONDS, DEFAULT_REPEATS, QUICK_SECONDS,
            DEFAULT_CALLERS, DEFAULT_POOL, SLUICE_BENCH_PEERS_DIR);
}

static int bad_option(const char *fmt, const char *arg)
{
    fprintf(stderr, "sluice_bench_server: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

/* A whole number in [lo, hi] from 'v', or -1. */
static long whole(const char *v, long lo, long hi)
{
    char *end;
    long n;

    errno = 0;
    n = strtol(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < lo ||
        n > hi)
        return -1;
    return n;
}

static void load_average(double out[3])
{
    FILE *f = fopen("/proc/loadavg", "r");

    out[0] = out[1] = out[2] = -1;
    if (f == NULL)
        return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
        out[0] = out[1] = out[2] = -1;
    fclose(f);
}

int main(int argc, char **argv)
{
    static report rp;
    static cpu_row cpu[NCPU_ROWS];
    static mem_row mem[NMEM_ROWS];
    options *o = &rp.o;
    keyset ids, skeys_fixed, skeys_incr;
    char refused_slot[KEY_STRIDE] = REFUSED_ID;
    bool seconds_set = false, repeats_set = false;
    int ncpu = 0, nmem = 0;
    double t0;

    o->seconds = DEFAULT_SECONDS;
    o->repeats = DEFAULT_REPEATS;
    o->callers = DEFAULT_CALLERS;
    o->pool = DEFAULT_POOL;
    o->cpu_calls = CPU_CALLS;
    o->peers = o->diag = true;
    o->peers_dir = SLUICE_BENCH_PEERS_DIR;
    o->python = "/usr/bin/python3";
    o->node = "node";
    o->redis_benchmark = "redis-benchmark";
    for (int i = 1; i < argc; i++) {
        bool missing = false;
        const char *v;
        long n;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if (strcmp(argv[i], "--quick") == 0) {
            o->quick = true;
        } else if (strcmp(argv[i], "--no-peers") == 0) {
            o->peers = false;
        } else if (strcmp(argv[i], "--no-diag") == 0) {
            o->diag = false;
        } else if ((v = option_value(argc, argv, &i, "--seconds",
                                     &missing)) != NULL) {
            char *end;

            errno = 0;
            o->seconds = strtod(v, &end);
            if (*v == '\0' || *end != '\0' || errno != 0 ||
                !(o->seconds >= 0.05 && o->seconds <= 600))
                return bad_option("--seconds wants a number of seconds "
                                  "from 0.05 to 600, not '%s'", v);
            seconds_set = true;
        } else if ((v = option_value(argc, argv, &i, "--repeats",
                                     &missing)) != NULL) {
            if ((n = whole(v, 1, MAX_REPEATS)) < 0)
                return bad_option("--repeats wants a whole number from 1 "
                                  "to 99, not '%s'", v);
            o->repeats = (unsigned)n;
            repeats_set = true;
        } else if ((v = option_value(argc, argv, &i, "--callers",
                                     &missing)) != NULL) {
            if ((n = whole(v, 2, MAX_CALLERS)) < 0)
                return bad_option("--callers wants a whole number from 2 "
                                  "to 512, not '%s'", v);
            o->callers = (unsigned)n;
        } else if ((v = option_value(argc, argv, &i, "--pool", &missing)) !=
                   NULL) {
            if ((n = whole(v, 1, 1024)) < 0)
                return bad_option("--pool wants a whole number from 1 to "
                                  "1024, not '%s'", v);
            o->pool = (unsigned)n;
        } else if ((v = option_value(argc, argv, &i, "--store", &missing)) !=
                   NULL) {
            o->store = v;
        } else if ((v = option_value(argc, argv, &i, "--only", &missing)) !=
                   NULL) {
            o->only = v;
        } else if ((v = option_value(argc, argv, &i, "--peers", &missing)) !=
                   NULL) {
            o->peers_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--python",
                                     &missing)) != NULL) {
            o->python = v;
        } else if ((v = option_value(argc, argv, &i, "--node", &missing)) !=
                   NULL) {
            o->node = v;
        } else if (missing) {
            return bad_option("%s needs a value", argv[i]);
        } else {
            return bad_option("unknown option '%s'", argv[i]);
        }
    }
    if (o->quick) {
        if (!seconds_set)
            o->seconds = QUICK_SECONDS;
        if (!repeats_set)
            o->repeats = 1;
        o->cpu_calls = QUICK_CPU_CALLS;
    }
    rp.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    signal(SIGPIPE, SIG_IGN);
    refused_slot[KEY_STRIDE - 1] = (char)strlen(REFUSED_ID);

    if (keyset_make(&ids, MANY_KEYS, NULL) < 0 ||
        keyset_make(&skeys_fixed, MANY_KEYS, "fixed") < 0 ||
        keyset_make(&skeys_incr, MANY_KEYS, "incr") < 0) {
        fprintf(stderr, "sluice_bench_server: cannot make the keys\n");
        return 1;
    }
    if (server_open(&rp.srv, o->store) < 0)
        return 1;
    fprintf(stderr, "sluice_bench_server: redis-server %s on %s:%d; "
            "checking the references\n", rp.srv.version, rp.srv.host,
            rp.srv.port);
    tools_check(&rp);
    for (int p = 0; p < NPEERS; p++)
        if (!rp.peers[p].ok)
            fprintf(stderr, "sluice_bench_server: %s not available: %s\n",
                    p == PEER_RLF ? "rate-limiter-flexible" : "limits",
                    rp.peers[p].why);
    if (!rp.rb_ok)
        fprintf(stderr, "sluice_bench_server: redis-benchmark not "
                "available: %s\n", rp.rb_why);
    cases_build(&rp);

    load_average(rp.load_before);
    t0 = now_s();
    for (unsigned pass = 0; pass < o->repeats; pass++)
        for (int i = 0; i < rp.ncases; i++) {
            bench_case *c = &rp.cases[i];
            /* raw INCR rows use INCR keys; the rest the fixed script's */
            const keyset *sk = c->how == HOW_RAW_INCR ? &skeys_incr
                                                      : &skeys_fixed;
            keyset one = {sk->bytes, 1}, one_id = {ids.bytes, 1};

            /* the refused rows' limit has its own window: its own key */
            if (c->max != ADMIT_MAX)
                one_id.bytes = refused_slot;
            if (case_run(&rp, i, pass, c->keys == 1 ? &one_id : &ids,
                         c->keys == 1 ? &one : sk) < 0)
                return 1;
        }
    for (int i = 0; i < rp.ncases; i++)
        case_finish(&rp.cases[i]);

    fprintf(stderr, "%sserver CPU per decision (commandstats)...%s",
            isatty(STDERR_FILENO) ? "\r\033[K" : "",
            isatty(STDERR_FILENO) ? "" : "\n");
    for (int a = 0; a < BENCH_ALGO_N; a++)
        for (int k = 0; k < 3; k++) {
            cpu_row *row = &cpu[ncpu];

            row->algo = (sluice_algo)a;
            row->keys = k == 0 ? 1 : MANY_KEYS;
            row->batch = k == 2 ? CPU_BATCH : 1;
            if (cpu_measure(&rp, row, &ids, &skeys_incr) < 0) {
                fprintf(stderr, "\nsluice_bench_server: the commandstats "
                        "measurement failed: %s\n", sluice_last_error());
                return 1;
            }
            ncpu++;
        }
    if (empty_script_measure(&rp, &skeys_fixed, &rp.empty_usec,
                             &rp.empty_cpu_us) < 0)
        rp.empty_usec = rp.empty_cpu_us = -1;
    fprintf(stderr, "%sserver memory per key (MEMORY USAGE)...%s",
            isatty(STDERR_FILENO) ? "\r\033[K" : "",
            isatty(STDERR_FILENO) ? "" : "\n");
    if (memory_measure(&rp, mem) < 0) {
        fprintf(stderr, "\nsluice_bench_server: the memory measurement "
                "failed: %s\n", sluice_last_error());
        return 1;
    }
    nmem = NMEM_ROWS;
    server_flush(&rp.srv);
    rp.wall_s = now_s() - t0;
    load_average(rp.load_after);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    else
        fprintf(stderr, "sluice_bench_server: done in %.0f s\n", rp.wall_s);

    if (o->json)
        print_json(&rp, cpu, ncpu, mem, nmem);
    else
        print_text(&rp, cpu, ncpu, mem, nmem);

    redisFree(rp.srv.ctl);
    if (rp.srv.own)
        rs_stop(&rp.srv.rs);
    free(ids.bytes);
    free(skeys_fixed.bytes);
    free(skeys_incr.bytes);
    return 0;
}
