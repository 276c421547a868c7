/*
 * programs.c - the references that are other programs: redis-benchmark,
 * and the peers bench/peers/rlf_bench.js (rate-limiter-flexible, on Node)
 * and bench/peers/limits_bench.py (Python limits). Each runs as a child
 * whose output is read here: redis-benchmark's --csv line, a peer's last
 * line of flat JSON.
 */
#include "bench_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PEER_OVERHEAD_S 60.0 /* start-up allowance before a child is killed */

/* ---- Children ------------------------------------------------------------ */

/*
 * Forks and runs 'argv' with its standard output and error into a pipe,
 * whose reading end goes into '*fd'. Returns its PID, or -1.
 */
static pid_t child_spawn(char *const argv[], int *fd)
{
    int fds[2], devnull;
    pid_t pid;

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
    *fd = fds[0];
    return pid;
}

/*
 * Reads 'fd' into 'out' (at most 'cap' - 1 bytes, NUL-terminated) until it
 * is closed, or kills 'pid' when now_s() reaches 'deadline'. True when it
 * killed it.
 */
static bool child_read(int fd, pid_t pid, double deadline, char *out,
                       size_t cap)
{
    size_t used = 0;
    bool killed = false;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
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
            n = read(fd, out + used, cap - 1 - used);
        else
            n = read(fd, drop, sizeof(drop)); /* keep it unblocked */
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (used + 1 < cap)
            used += (size_t)n;
    }
    out[used] = '\0';
    return killed;
}

static double child_cs; /* the last child's context switches */

/*
 * Runs 'argv' with its standard output and error read into 'out' (at most
 * 'cap' - 1 bytes, NUL-terminated), killing it by PID after 'timeout_s'.
 * '*cpu_s' gets its CPU time, 'child_cs' its context switches. Returns its
 * exit status, or -1 if it could not run or was killed.
 */
static int child_run(char *const argv[], char *out, size_t cap,
                     double timeout_s, double *cpu_s)
{
    double cs0 = rusage_cs(RUSAGE_CHILDREN);
    double deadline = now_s() + timeout_s, cpu0 = rusage_s(RUSAGE_CHILDREN);
    int fd, status = 0;
    bool killed;
    pid_t pid;

    out[0] = '\0';
    if ((pid = child_spawn(argv, &fd)) < 0)
        return -1;
    killed = child_read(fd, pid, deadline, out, cap);
    close(fd);
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

/* ---- Their output -------------------------------------------------------- */

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

/* Where the value after "name": starts in a flat JSON line, or NULL. */
static const char *json_find(const char *line, const char *name)
{
    char pat[64];
    const char *p, *eol = strchr(line, '\n');

    snprintf(pat, sizeof(pat), "\"%s\":", name);
    p = strstr(line, pat);
    if (p == NULL || (eol != NULL && p > eol))
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return p;
}

/* The number after "name": in a flat JSON line; false if absent. */
static bool json_num(const char *line, const char *name, double *out)
{
    const char *p = json_find(line, name);

    if (p == NULL)
        return false;
    *out = strtod(p, NULL);
    return true;
}

/* The string after "name": in a flat JSON line, into 'out'; false if none. */
static bool json_str(const char *line, const char *name, char *out,
                     size_t cap)
{
    const char *p = json_find(line, name);
    size_t n = 0;

    if (p == NULL || *p++ != '"')
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

/* ---- redis-benchmark ----------------------------------------------------- */

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

/* The texts of redis-benchmark's arguments. */
typedef struct rb_texts {
    char port[16], clients[16], requests[24], keys[24], db[24], pipeline[16];
} rb_texts;

/*
 * The start of redis-benchmark's argument vector: the program and the
 * server (host, port, login, database), its texts in 't'; answers how many
 * arguments it wrote.
 */
static int rb_argv_server(const report *rp, char **argv, rb_texts *t)
{
    const server *s = &rp->srv;
    int argc = 0;

    snprintf(t->port, sizeof(t->port), "%d", s->port);
    snprintf(t->db, sizeof(t->db), "%ld", s->db);
    argv[argc++] = (char *)rp->o.redis_benchmark;
    argv[argc++] = "-h";
    argv[argc++] = (char *)s->host;
    argv[argc++] = "-p";
    argv[argc++] = t->port;
    if (s->password[0] != '\0') {
        if (s->user[0] != '\0') {
            argv[argc++] = "--user";
            argv[argc++] = (char *)s->user;
        }
        argv[argc++] = "-a";
        argv[argc++] = (char *)s->password;
    }
    if (s->db != 0) {
        argv[argc++] = "--dbnum";
        argv[argc++] = t->db;
    }
    return argc;
}

/* The argument vector of 'n' INCRs for case 'c', its texts in 't'. */
static void rb_argv(const report *rp, const bench_case *c, double n,
                    char **argv, rb_texts *t)
{
    int argc = rb_argv_server(rp, argv, t);

    snprintf(t->clients, sizeof(t->clients), "%u", c->callers);
    snprintf(t->requests, sizeof(t->requests), "%.0f", n);
    snprintf(t->keys, sizeof(t->keys), "%zu", c->keys);
    argv[argc++] = "-t";
    argv[argc++] = "incr";
    argv[argc++] = "-c";
    argv[argc++] = t->clients;
    argv[argc++] = "-n";
    argv[argc++] = t->requests;
    if (c->depth > 1) {
        snprintf(t->pipeline, sizeof(t->pipeline), "%u", c->depth);
        argv[argc++] = "-P";
        argv[argc++] = t->pipeline;
    }
    if (c->keys > 1) {
        argv[argc++] = "-r";
        argv[argc++] = t->keys;
    }
    argv[argc++] = "--csv";
    argv[argc] = NULL;
}

/*
 * Runs redis-benchmark once for case 'c': as many requests as it made in
 * --seconds last time (at least 1,000). Returns 0, or -1 with 'why' filled.
 */
int run_rb(report *rp, bench_case *c, run_result *r, char *why,
           size_t why_cap)
{
    double n = c->rb_guess * rp->o.seconds, srv0, cpu;
    char out[8192], *argv[32];
    rb_texts texts;
    int status;

    if (n < 1000)
        n = 1000;
    rb_argv(rp, c, n, argv, &texts);
    memset(r, 0, sizeof(*r));
    srv0 = meter_start(&rp->srv);
    status = child_run(argv, out, sizeof(out),
                       rp->o.seconds * 10 + PEER_OVERHEAD_S, &cpu);
    meter_stop(&rp->srv, srv0, "incr", r);
    if (status != 0 || rb_parse(out, r) < 0) {
        char line[200];

        last_line(out, line, sizeof(line));
        snprintf(why, why_cap, "redis-benchmark failed: %s", line);
        return -1;
    }
    r->calls = r->admitted = n;
    r->cli_cpu_s = cpu;
    r->cli_cs = child_cs;
    r->key_calls = -1;
    c->rb_guess = r->rate; /* the next run lasts about --seconds */
    return 0;
}

/*
 * The requests per second on the --csv line of a command's run: the line
 * after the header ("test",...), its second field. -1 if there is none.
 */
static double rb_csv_rps(const char *out)
{
    for (const char *p = out; p != NULL && *p != '\0';) {
        const char *field;

        if (*p == '"' && strncmp(p, "\"test\",", 7) != 0 &&
            (field = strstr(p, "\",\"")) != NULL &&
            field < p + strcspn(p, "\n"))
            return strtod(field + 3, NULL);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return -1;
}

/*
 * Runs redis-benchmark with a command of its own: 'n' calls of 'cmd' (its
 * words, NULL-ended; each __rand_int__ in them is a number drawn below
 * 'keys') from 'clients' connections, -r 'keys'. Its requests per second
 * into '*rps'. Returns 0, or -1 with 'why' filled (it could not run, or
 * the server answered an error).
 */
int rb_command(report *rp, unsigned clients, unsigned keys, unsigned long n,
               const char *const *cmd, double *rps, char *why,
               size_t why_cap)
{
    char out[8192], *argv[64];
    rb_texts t;
    int argc = rb_argv_server(rp, argv, &t), status;
    double cpu;

    snprintf(t.clients, sizeof(t.clients), "%u", clients);
    snprintf(t.requests, sizeof(t.requests), "%lu", n);
    snprintf(t.keys, sizeof(t.keys), "%u", keys);
    argv[argc++] = "-c";
    argv[argc++] = t.clients;
    argv[argc++] = "-r";
    argv[argc++] = t.keys;
    argv[argc++] = "-n";
    argv[argc++] = t.requests;
    argv[argc++] = "--csv";
    for (int i = 0; cmd[i] != NULL && argc < 63; i++)
        argv[argc++] = (char *)cmd[i];
    argv[argc] = NULL;
    status = child_run(argv, out, sizeof(out),
                       (double)n / 500 + PEER_OVERHEAD_S, &cpu);
    *rps = rb_csv_rps(out);
    if (status != 0 || *rps < 0 || strstr(out, "Error from server") != NULL) {
        char line[200];

        last_line(out, line, sizeof(line));
        snprintf(why, why_cap, "redis-benchmark failed: %s", line);
        return -1;
    }
    return 0;
}

/* ---- The peers ----------------------------------------------------------- */

/*
 * The start of the argument vector that runs peer 'peer', its script's path
 * in 'script'; answers how many arguments it wrote.
 */
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

/* Runs a peer once for case 'c'. Returns 0, or -1 with 'why' filled. */
int run_peer(report *rp, bench_case *c, run_result *r, char *why,
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

/* ---- Can they run here? -------------------------------------------------- */

/* The versions on the --check line 'line' of peer 'p', into 'pi'. */
static void peer_versions(const report *rp, int p, peer_info *pi,
                          const char *line)
{
    char a[32], b[32];
    double cpu;

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
    } else if (p == PEER_LIMITS && json_str(line, "limits", a, sizeof(a)) &&
               json_str(line, "redis_py", b, sizeof(b))) {
        snprintf(pi->versions, sizeof(pi->versions),
                 "limits %s, redis-py %s", a, b);
    }
}

/*
 * Finds out whether peer 'p' can run here ('--check': its packages load and
 * it reaches the server), and its versions.
 */
static void peer_check(report *rp, int p)
{
    peer_info *pi = &rp->peers[p];
    char out[4096], script[1100], *argv[16];
    const char *line;
    double cpu;
    int argc, status;

    pi->name = p == PEER_RLF ? "rlf" : "limits";
    if (!rp->o.peers) {
        snprintf(pi->why, sizeof(pi->why), "skipped (--no-peers)");
        return;
    }
    argc = peer_argv(rp, pi->name, argv, script, sizeof(script));
    argv[argc++] = "--check";
    argv[argc] = NULL;
    if (access(script, R_OK) != 0) {
        snprintf(pi->why, sizeof(pi->why),
                 "%.200s is missing (--peers DIR)", script);
        return;
    }
    status = child_run(argv, out, sizeof(out), PEER_OVERHEAD_S, &cpu);
    line = last_json_line(out);
    if (status == 0 && line != NULL && strstr(line, "\"ok\"") != NULL) {
        pi->ok = true;
        peer_versions(rp, p, pi, line);
        return;
    }
    if (line == NULL || !json_str(line, "error", pi->why, sizeof(pi->why))) {
        char msg[200];

        last_line(out, msg, sizeof(msg));
        snprintf(pi->why, sizeof(pi->why), "%s --check failed: %s",
                 argv[0], msg);
    }
}

/* Finds out whether redis-benchmark runs here, and its version. */
static void rb_check(report *rp)
{
    char *rv[] = {(char *)rp->o.redis_benchmark, "--version", NULL};
    char out[4096];
    double cpu;

    rp->rb_ok = child_run(rv, out, sizeof(out), 30, &cpu) == 0;
    if (rp->rb_ok) {
        out[strcspn(out, "\r\n")] = '\0';
        snprintf(rp->rb_version, sizeof(rp->rb_version), "%.60s", out);
    } else {
        snprintf(rp->rb_why, sizeof(rp->rb_why),
                 "%s cannot run (apt-get install redis-tools)",
                 rp->o.redis_benchmark);
    }
}

/*
 * Finds out which references can run here: each peer, and redis-benchmark.
 * Says on stderr which cannot, and why.
 */
void tools_check(report *rp)
{
    for (int p = 0; p < NPEERS; p++)
        peer_check(rp, p);
    rb_check(rp);
    for (int p = 0; p < NPEERS; p++)
        if (!rp->peers[p].ok)
            fprintf(stderr, "sluice_bench_server: %s not available: %s\n",
                    p == PEER_RLF ? "rate-limiter-flexible" : "limits",
                    rp->peers[p].why);
    if (!rp->rb_ok)
        fprintf(stderr, "sluice_bench_server: redis-benchmark not "
                "available: %s\n", rp->rb_why);
}
