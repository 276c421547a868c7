/*
 * programs.c - the programs the launcher runs (server.h): which build of
 * the server, its CLI and its sentinel ($SLUICE_TEST_SERVER and the like),
 * what that build says it is, and running a program with its output
 * captured and a deadline.
 */
#include "server.h"
#include "tls_certs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI_TIMEOUT_MS 10000

/* ---- The build under test ------------------------------------------------ */

static const struct program {
    const char *env;
    const char *names[2]; /* in PATH, in this order */
} programs[] = {
    [RS_PROGRAM_SERVER] = {RS_SERVER_ENV, {"redis-server", "valkey-server"}},
    [RS_PROGRAM_CLI] = {RS_CLI_ENV, {"redis-cli", "valkey-cli"}},
    [RS_PROGRAM_SENTINEL] = {RS_SENTINEL_ENV,
                             {"redis-sentinel", "valkey-sentinel"}},
};

/* True when 'path' is a regular file this process may execute. */
static int is_executable(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* The first 'name' in $PATH into 'out' (of 'cap' bytes); 0 or -1. */
static int search_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH"), *p;

    for (p = path != NULL ? path : ""; *p != '\0';) {
        size_t len = strcspn(p, ":");

        if (len > 0 &&
            snprintf(out, cap, "%.*s/%s", (int)len, p, name) < (int)cap &&
            is_executable(out))
            return 0;
        p += len + (p[len] == ':');
    }
    return -1;
}

/*
 * The path of the program 'which' runs as: its environment variable (a
 * path, or a bare name looked up in PATH), else its redis- name in PATH,
 * else its valkey- name. NULL with the reason on stderr.
 */
const char *rs_binary(rs_program which)
{
    static char found[3][1024];
    const struct program *p = &programs[which];
    const char *env = getenv(p->env);
    char *out = found[which];

    if (env != NULL && env[0] != '\0') {
        if (strchr(env, '/') != NULL
                ? (is_executable(env) &&
                   snprintf(out, sizeof(found[0]), "%s", env) <
                       (int)sizeof(found[0]))
                : search_path(env, out, sizeof(found[0])) == 0)
            return out;
        fprintf(stderr, "server.c: %s=%s: not an executable\n", p->env, env);
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        if (search_path(p->names[i], out, sizeof(found[0])) == 0)
            return out;
    fprintf(stderr, "server.c: no %s or %s in PATH (%s names another)\n",
            p->names[0], p->names[1], p->env);
    return NULL;
}

/* The value of 'field' ("redis_version") in INFO text 'info', or NULL. */
static const char *info_value(const char *info, const char *field, int *len)
{
    size_t flen = strlen(field);

    for (const char *p = info; (p = strstr(p, field)) != NULL; p += flen) {
        if ((p == info || p[-1] == '\n') && p[flen] == ':') {
            *len = (int)strcspn(p + flen + 1, "\r\n");
            return p + flen + 1;
        }
    }
    return NULL;
}

/* What 's' runs: "redis 7.0.15 (PATH)" or "valkey 8.0.1 (PATH)". */
int rs_describe(rs_server *s, char *out, size_t cap)
{
    redisReply *r = rs_cmd(s, "INFO server");
    const char *v = NULL, *name = "valkey";
    int len = 0, rc = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        if ((v = info_value(r->str, "valkey_version", &len)) == NULL) {
            v = info_value(r->str, "redis_version", &len);
            name = "redis";
        }
    }
    if (v != NULL) {
        snprintf(out, cap, "%s %.*s (%s)", name, len, v, s->binary);
        rc = 0;
    } else {
        snprintf(out, cap, "unknown (%s)", s->binary);
    }
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/* ---- Running a program --------------------------------------------------- */

/*
 * The child's side of rs_run(): stdin from /dev/null, stdout and stderr
 * into the pipe, then exec. Only async-signal-safe calls: the parent may
 * have threads.
 */
static void run_child(const char *const *argv, int out_fd, int devnull,
                      pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

/*
 * Reads 'fd' into 'out' (cut to 'cap') until it closes; kills 'pid' at
 * 'deadline'. Returns 0, or -1 on the deadline.
 */
static int read_output(int fd, char *out, size_t cap, uint64_t deadline,
                       pid_t pid, const char *what)
{
    size_t used = 0;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = rs_mono_ms();
        char buf[4096];
        ssize_t got;

        if (now >= deadline) {
            fprintf(stderr, "server.c: %s did not finish in time; killed\n",
                    what);
            kill(pid, SIGKILL);
            return -1;
        }
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        if ((got = read(fd, buf, sizeof(buf))) <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            return 0;
        }
        for (ssize_t i = 0; i < got && used + 1 < cap; i++)
            out[used++] = buf[i];
        if (cap > 0)
            out[used] = '\0';
    }
}

int rs_run(const char *const *argv, char *out, size_t cap,
           uint64_t timeout_ms)
{
    int fds[2], status, st, devnull;
    pid_t parent = getpid(), pid;

    if (cap > 0)
        out[0] = '\0';
    if (pipe(fds) < 0) {
        fprintf(stderr, "server.c: pipe: %s\n", strerror(errno));
        return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    devnull = open("/dev/null", O_RDONLY);
    fflush(NULL);
    if ((pid = fork()) < 0) {
        fprintf(stderr, "server.c: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        if (devnull >= 0)
            close(devnull);
        return -1;
    }
    if (pid == 0)
        run_child(argv, fds[1], devnull, parent);
    close(fds[1]);
    if (devnull >= 0)
        close(devnull);
    status = read_output(fds[0], out, cap, rs_mono_ms() + timeout_ms, pid,
                         argv[0]);
    close(fds[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (status == 0)
        status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return status;
}

/* ---- The CLI ------------------------------------------------------------- */

/*
 * The CLI's arguments that reach 's' over its transport, into 'argv' from
 * index 'n' (room for 12 more); 'port' holds the port's text. Returns the
 * new count, or -1 if TLS has no certificates.
 */
static int cli_target(rs_server *s, const char **argv, int n, char *port,
                      size_t port_cap)
{
    const rs_certs *c;

    if (s->kind == RS_UNIX) {
        argv[n++] = "-s";
        argv[n++] = s->sock;
    } else {
        snprintf(port, port_cap, "%d", s->port);
        argv[n++] = "-h";
        argv[n++] = "127.0.0.1";
        argv[n++] = "-p";
        argv[n++] = port;
    }
    if (s->kind == RS_TLS) {
        if ((c = rs_certs_get()) == NULL)
            return -1;
        argv[n++] = "--tls";
        argv[n++] = "--cacert";
        argv[n++] = c->ca_cert;
        argv[n++] = "--cert";
        argv[n++] = c->client_cert;
        argv[n++] = "--key";
        argv[n++] = c->client_key;
    }
    if (s->password != NULL) {
        argv[n++] = "--no-auth-warning";
        argv[n++] = "-a";
        argv[n++] = s->password;
    }
    return n;
}

int rs_cli(rs_server *s, const char *const *args, char *out, size_t cap)
{
    const char *argv[64];
    char port[16];
    int n = 0;

    if (cap > 0)
        out[0] = '\0';
    if ((argv[n++] = rs_binary(RS_PROGRAM_CLI)) == NULL ||
        (n = cli_target(s, argv, n, port, sizeof(port))) < 0)
        return -1;
    for (int i = 0; args != NULL && args[i] != NULL; i++) {
        if (n == 63) {
            fprintf(stderr, "server.c: rs_cli: too many arguments\n");
            return -1;
        }
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return rs_run(argv, out, cap, CLI_TIMEOUT_MS);
}
