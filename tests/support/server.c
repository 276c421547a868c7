/*
 * server.c - the private redis-server of server.h: started on a free
 * loopback port in a temporary directory, and killed by PID on every way
 * out (see server.h for how).
 */
#include "server.h"
#include "tls_certs.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The servers to kill on the way out, whichever way that is. */
static rs_server *servers_to_kill[RS_MAX_SERVERS];
static int handlers_installed;

/* ---- Small utilities ----------------------------------------------------- */

/* Milliseconds on the monotonic clock, for deadlines and durations. */
uint64_t rs_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Microseconds on the monotonic clock, for measuring single calls. */
uint64_t rs_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Sleeps 'ms' milliseconds, resuming after signals. */
void rs_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/*
 * Removes 'path' and everything under it (the server writes only a log, and
 * with --appendonly yes a directory of files). Errors are ignored: this is
 * cleanup.
 */
void rs_remove_tree(const char *path)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    char child[1024];

    if (lstat(path, &st) < 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    if ((d = opendir(path)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (snprintf(child, sizeof(child), "%s/%s", path, e->d_name) <
                (int)sizeof(child))
                rs_remove_tree(child);
        }
        closedir(d);
    }
    rmdir(path);
}

/*
 * A loopback port that was free a moment ago: bind port 0, read what the
 * kernel chose, close. Another process may take it before the server does;
 * rs_start() retries with a new port when the server cannot bind.
 */
int rs_free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ---- Cleanup on every way out -------------------------------------------- */

/* Kills every registered server this process started; async-signal-safe. */
static void kill_all_now(void)
{
    for (int i = 0; i < RS_MAX_SERVERS; i++) {
        rs_server *s = servers_to_kill[i];

        if (s != NULL && s->pid > 0 && s->owner == getpid()) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
        }
    }
}

static void cleanup_at_exit(void)
{
    kill_all_now();
    for (int i = 0; i < RS_MAX_SERVERS; i++) {
        rs_server *s = servers_to_kill[i];

        /* Only the process that made the directory removes it. */
        if (s != NULL && s->owner == getpid() && s->dir[0] != '\0') {
            rs_remove_tree(s->dir);
            s->dir[0] = '\0';
        }
    }
}

/*
 * The signal handler's cleanup of the directories: only unlink() and rmdir()
 * of names made in advance, since they are async-signal-safe and readdir()
 * is not. A server started with options that write more (--appendonly yes)
 * leaves its directory behind after a signal; rs_stop() and exit() remove
 * it whole.
 */
static void remove_dirs_now(void)
{
    for (int i = 0; i < RS_MAX_SERVERS; i++) {
        rs_server *s = servers_to_kill[i];

        if (s == NULL || s->owner != getpid() || s->dir[0] == '\0')
            continue;
        for (int f = 0; f < RS_FILES; f++)
            unlink(s->files[f]);
        rmdir(s->dir);
    }
}

static void kill_on_signal(int sig)
{
    kill_all_now();
    remove_dirs_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGABRT, SIGHUP};
    struct sigaction sa;

    if (handlers_installed)
        return;
    handlers_installed = 1;
    atexit(cleanup_at_exit);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = kill_on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
    /* A write to a connection the server closed must be an error, not death. */
    signal(SIGPIPE, SIG_IGN);
}

static void register_server(rs_server *s)
{
    for (int i = 0; i < RS_MAX_SERVERS; i++)
        if (servers_to_kill[i] == s)
            return;
    for (int i = 0; i < RS_MAX_SERVERS; i++) {
        if (servers_to_kill[i] == NULL) {
            servers_to_kill[i] = s;
            return;
        }
    }
    fprintf(stderr, "server.c: more than %d servers\n", RS_MAX_SERVERS);
    abort();
}

static void unregister_server(rs_server *s)
{
    for (int i = 0; i < RS_MAX_SERVERS; i++)
        if (servers_to_kill[i] == s)
            servers_to_kill[i] = NULL;
}

/* ---- The native module --------------------------------------------------- */

const char *const *rs_module_args(void)
{
    static const char *args[3];

    args[0] = rs_module_path() != NULL ? "--loadmodule" : NULL;
    args[1] = rs_module_path();
    args[2] = NULL;
    return args;
}

/* ---- Starting and stopping ----------------------------------------------- */

/* Prints the tail of the server's log, to explain a failed start. */
void rs_print_log(const rs_server *s)
{
    char path[300], line[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/log", s->dir);
    if ((f = fopen(path, "r")) == NULL)
        return;
    fprintf(stderr, "---- %s ----\n", path);
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

/* The texts the argument vector points into (see server_argv()). */
typedef struct argv_text {
    char port[16], bus[16], log[300], conf[300];
} argv_text;

/*
 * The arguments that make 's' listen where its kind says, into 'argv' from
 * 'argc': plain TCP; TLS only on 'port' with the run's certificates and a
 * Unix socket for the helper; or a Unix socket only. Returns the new count,
 * or -1 if TLS has no certificates.
 */
static int listen_args(const rs_server *s, const char **argv, int argc,
                       const char *port)
{
    const rs_certs *c;

    argv[argc++] = "--port";
    argv[argc++] =
        s->kind == RS_TCP || s->kind == RS_SENTINEL ? port : "0";
    if (s->kind == RS_TLS) {
        if ((c = rs_certs_get()) == NULL)
            return -1;
        argv[argc++] = "--tls-port";
        argv[argc++] = port;
        argv[argc++] = "--tls-cert-file";
        argv[argc++] = c->server_cert;
        argv[argc++] = "--tls-key-file";
        argv[argc++] = c->server_key;
        argv[argc++] = "--tls-ca-cert-file";
        argv[argc++] = c->ca_cert;
        argv[argc++] = "--tls-auth-clients";
        argv[argc++] = s->tls_auth;
        if (s->bus_port != 0) {
            argv[argc++] = "--tls-cluster";
            argv[argc++] = "yes";
            argv[argc++] = "--tls-replication";
            argv[argc++] = "yes";
        }
    }
    if (s->sock[0] != '\0') {
        argv[argc++] = "--unixsocket";
        argv[argc++] = s->sock;
        argv[argc++] = "--unixsocketperm";
        argv[argc++] = "700";
    }
    return argc;
}

/*
 * The server's whole argument vector into 'argv' (room for 50 +
 * RS_MAX_EXTRA), pointing into 't' and 's'; -1 if it cannot be made. A
 * sentinel takes its configuration file first.
 */
static int server_argv(const rs_server *s, const char **argv, argv_text *t)
{
    int argc = 0;

    snprintf(t->port, sizeof(t->port), "%d", s->port);
    snprintf(t->bus, sizeof(t->bus), "%d", s->bus_port);
    snprintf(t->log, sizeof(t->log), "%s/log", s->dir);
    snprintf(t->conf, sizeof(t->conf), "%s/sentinel.conf", s->dir);
    argv[argc++] = s->binary;
    if (s->kind == RS_SENTINEL)
        argv[argc++] = t->conf;
    if ((argc = listen_args(s, argv, argc, t->port)) < 0)
        return -1;
    argv[argc++] = "--bind";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "--dir";
    argv[argc++] = s->dir;
    argv[argc++] = "--daemonize";
    argv[argc++] = "no";
    argv[argc++] = "--logfile";
    argv[argc++] = t->log;
    if (s->kind != RS_SENTINEL) {
        argv[argc++] = "--save";
        argv[argc++] = "";
        argv[argc++] = "--appendonly";
        argv[argc++] = "no";
        argv[argc++] = "--enable-debug-command";
        argv[argc++] = "local";
    }
    if (s->bus_port > 0) {
        /* The bus port is given, not port + 10000: a free port may be
           above 55535. The node's state file goes in its own directory. */
        argv[argc++] = "--cluster-enabled";
        argv[argc++] = "yes";
        argv[argc++] = "--cluster-config-file";
        argv[argc++] = "nodes.conf";
        argv[argc++] = "--cluster-port";
        argv[argc++] = t->bus;
    }
    for (int i = 0; i < s->nextra; i++)
        argv[argc++] = s->extra[i]; /* later arguments win in redis-server */
    argv[argc] = NULL;
    return argc;
}

void rs_close_inherited(void)
{
    for (int fd = STDERR_FILENO + 1; fd < 1024; fd++)
        close(fd);
}

/*
 * Forks and execs the server on 's->port'. The argument vector is built
 * before fork(), so the child only calls async-signal-safe functions until
 * exec (the parent may have threads).
 */
static int spawn_server(rs_server *s)
{
    argv_text t;
    const char *argv[50 + RS_MAX_EXTRA];
    pid_t parent = getpid(), pid;
    int devnull;

    if (server_argv(s, argv, &t) < 0)
        return -1;
    fflush(NULL);
    devnull = open("/dev/null", O_RDWR);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "server.c: fork: %s\n", strerror(errno));
        if (devnull >= 0)
            close(devnull);
        return -1;
    }
    if (pid == 0) {
        /* Die with the thread that started us, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDOUT_FILENO);
        }
        rs_close_inherited();
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (devnull >= 0)
        close(devnull);
    s->pid = pid;
    s->owner = parent;
    s->paused = 0;
    return 0;
}

/*
 * A new connection for the helper or the readiness check: to the Unix
 * socket when the server has one (a TLS server's only plain way in), else
 * to its TCP port. NULL only when out of memory; else check c->err.
 */
static redisContext *connect_plain(const rs_server *s, struct timeval tv)
{
    if (s->sock[0] != '\0')
        return redisConnectUnixWithTimeout(s->sock, tv);
    return redisConnectWithTimeout("127.0.0.1", s->port, tv);
}

/*
 * Whether the server that answers on 'c' is 's''s process: another test's
 * server may hold the port, while ours fails to bind it and exits. Its
 * INFO server's process_id says; a server that refuses INFO (a password,
 * an ACL user) is taken as ours, as its PING was.
 */
static int answers_for(redisContext *c, const rs_server *s)
{
    redisReply *r = redisCommand(c, "INFO server");
    const char *id;
    int ours = 1;

    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (id = strstr(r->str, "process_id:")) != NULL)
        ours = strtol(id + strlen("process_id:"), NULL, 10) == s->pid;
    if (r != NULL)
        freeReplyObject(r);
    return ours;
}

/*
 * Waits until the server answers PING, or 'timeout_ms' passes, or it exits.
 * Returns 0 when it answers, -1 otherwise (and reaps it if it exited, or
 * when another process answers on its port).
 */
static int wait_until_ready(rs_server *s, uint64_t timeout_ms)
{
    uint64_t deadline = rs_mono_ms() + timeout_ms;
    struct timeval tv = {0, 200000};

    while (rs_mono_ms() < deadline) {
        int status;
        redisContext *c;

        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return -1;
        }
        c = connect_plain(s, tv);
        if (c != NULL && c->err == 0) {
            redisReply *r;

            redisSetTimeout(c, tv);
            r = redisCommand(c, "PING");
            /* PONG, or NOAUTH from a server with a password: it is up. */
            if (r != NULL &&
                ((r->type == REDIS_REPLY_STATUS &&
                  strcmp(r->str, "PONG") == 0) ||
                 (r->type == REDIS_REPLY_ERROR &&
                  strncmp(r->str, "NOAUTH", 6) == 0))) {
                int ours = answers_for(c, s);

                freeReplyObject(r);
                redisFree(c);
                return ours ? 0 : -1;
            }
            if (r != NULL)
                freeReplyObject(r);
        }
        if (c != NULL)
            redisFree(c);
        rs_sleep_ms(20);
    }
    return -1;
}

/* Stops the server process: SIGTERM, then SIGKILL after 'grace_ms'. */
void rs_terminate(rs_server *s, int sig, uint64_t grace_ms)
{
    uint64_t deadline;

    if (s->pid <= 0)
        return;
    if (s->paused)
        kill(s->pid, SIGCONT); /* a stopped process cannot act on SIGTERM */
    kill(s->pid, sig);
    deadline = rs_mono_ms() + grace_ms;
    while (rs_mono_ms() < deadline) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            break;
        }
        rs_sleep_ms(5);
    }
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    s->paused = 0;
    if (s->ctx != NULL) {
        redisFree(s->ctx);
        s->ctx = NULL;
    }
}

/* The URL a client of the library opens 's' with. */
static void make_url(rs_server *s)
{
    if (s->kind == RS_UNIX)
        /* make_dir() made sure it fits. */
        snprintf(s->url, sizeof(s->url), "unix://%.56s", s->sock);
    else
        snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%d",
                 s->kind == RS_TLS ? "rediss" : "redis", s->port);
}

/*
 * Says once per process, on stderr, which build the first server (and the
 * first sentinel) runs: a run's output names what it tested.
 */
static void describe_once(rs_server *s)
{
    static int said[2];
    int sentinel = s->kind == RS_SENTINEL;
    char what[400];

    if (said[sentinel])
        return;
    said[sentinel] = 1;
    rs_describe(s, what, sizeof(what));
    fprintf(stderr, "server.c: %s %s\n", sentinel ? "sentinel" : "server",
            what);
}

/* Fresh free ports into 's' (none for a Unix-socket server); 0 or -1. */
static int pick_ports(rs_server *s)
{
    if (s->kind != RS_UNIX && (s->port = rs_free_port()) < 0) {
        fprintf(stderr, "server.c: no free port: %s\n", strerror(errno));
        return -1;
    }
    if (s->bus_port != 0) {
        do
            s->bus_port = rs_free_port();
        while (s->bus_port == s->port);
        if (s->bus_port < 0) {
            fprintf(stderr, "server.c: no free port: %s\n",
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

/*
 * Starts a server on the port in 's' (restart) or, when 'new_port' is set,
 * on a fresh free port (and bus port, for a cluster node), retrying with
 * other ports if it cannot bind.
 */
int rs_launch(rs_server *s, int new_port)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        if (new_port && pick_ports(s) < 0)
            return -1;
        if (spawn_server(s) < 0)
            return -1;
        if (wait_until_ready(s, RS_READY_TIMEOUT_MS) == 0) {
            make_url(s);
            describe_once(s);
            return 0;
        }
        rs_terminate(s, SIGKILL, 0);
        /* Another process took the port, or (on a restart) it is still
           held for a moment: try again. */
        rs_sleep_ms(100);
    }
    fprintf(stderr, "server.c: %s did not start on port %d\n", s->binary,
            s->port);
    rs_print_log(s);
    return -1;
}

/* Copies 'extra' into 's' (the password of --requirepass too); 0 or -1. */
static int keep_extra(rs_server *s, const char *const *extra)
{
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (s->nextra == RS_MAX_EXTRA) {
            fprintf(stderr, "server.c: too many extra arguments\n");
            return -1;
        }
        s->extra[s->nextra++] = strdup(extra[i]);
        if (i > 0 && strcmp(extra[i - 1], "--requirepass") == 0)
            s->password = s->extra[s->nextra - 1];
    }
    return 0;
}

/*
 * The server's private directory, and the names of what it may write
 * there (for the signal handler); 0 or -1.
 */
static int make_dir(rs_server *s)
{
    static const char *const names[RS_FILES] = {
        "log", "dump.rdb", "nodes.conf", "redis.sock", "sentinel.conf"};
    const char *tmp = getenv("TMPDIR");

    snprintf(s->dir, sizeof(s->dir), "%s/sluice-redis-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(s->dir) == NULL) {
        fprintf(stderr, "server.c: mkdtemp %s: %s\n", s->dir,
                strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    for (int f = 0; f < RS_FILES; f++)
        snprintf(s->files[f], sizeof(s->files[f]), "%s/%s", s->dir,
                 names[f]);
    if (s->kind == RS_TLS || s->kind == RS_UNIX) {
        /* sun_path holds 108 bytes with its NUL; the URL names it. */
        if (snprintf(s->sock, sizeof(s->sock), "%s", s->files[3]) >=
                (int)sizeof(s->sock) ||
            strlen(s->sock) + strlen("unix://") >= sizeof(s->url)) {
            fprintf(stderr, "server.c: %s: too long for a Unix socket "
                    "(set a shorter TMPDIR)\n", s->sock);
            return -1;
        }
    }
    return 0;
}

/* Writes 'text' as the sentinel's configuration file; 0 or -1. */
static int write_conf(const rs_server *s, const char *text)
{
    FILE *f = fopen(s->files[4], "w");

    if (f == NULL) {
        fprintf(stderr, "server.c: %s: %s\n", s->files[4], strerror(errno));
        return -1;
    }
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

/*
 * Every rs_start*(): a server of 'kind' ('tls_auth' for RS_TLS; a cluster
 * node when 'cluster'; 'conf' the sentinel's configuration), 'extra' after
 * the launcher's own arguments.
 */
static int start_common(rs_server *s, const char *const *extra, rs_kind kind,
                        const char *tls_auth, int cluster, const char *conf)
{
    const char *binary;

    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->bus_port = cluster ? -1 : 0; /* -1: rs_launch() picks one */
    snprintf(s->tls_auth, sizeof(s->tls_auth), "%s",
             tls_auth != NULL ? tls_auth : "no");
    install_handlers();
    binary = rs_binary(kind == RS_SENTINEL ? RS_PROGRAM_SENTINEL
                                           : RS_PROGRAM_SERVER);
    if (binary == NULL || keep_extra(s, extra) < 0 ||
        (kind == RS_TLS && rs_certs_get() == NULL))
        return -1;
    snprintf(s->binary, sizeof(s->binary), "%s", binary);
    s->owner = getpid();
    register_server(s);
    if (make_dir(s) < 0 || (conf != NULL && write_conf(s, conf) < 0))
        return -1;
    return rs_launch(s, 1);
}

/*
 * Starts a private server. 'extra' is a NULL-terminated list of further
 * arguments (e.g. {"--requirepass", "secret", NULL}), or NULL. Returns 0, or
 * -1 with a message on stderr.
 */
int rs_start(rs_server *s, const char *const *extra)
{
    return start_common(s, extra, RS_TCP, NULL, 0, NULL);
}

/*
 * Starts a private server with cluster support (--cluster-enabled yes), its
 * bus on a second free port in 's->bus_port' and its cluster state file in
 * its own directory. It knows no other node and serves no slot until told
 * (CLUSTER MEET, ADDSLOTS, or redis-cli --cluster create): see
 * cluster.h. A restart keeps both ports and the state file, so the
 * node comes back as the same member of its cluster.
 */
int rs_start_cluster_node(rs_server *s, const char *const *extra)
{
    return start_common(s, extra, RS_TCP, NULL, 1, NULL);
}

/*
 * Starts a private server that speaks TLS only on its TCP port, with the
 * run's certificates and --tls-auth-clients 'auth_clients' (NULL: "no"),
 * and a Unix socket for the helper's connection (see server.h).
 */
int rs_start_tls(rs_server *s, const char *auth_clients,
                 const char *const *extra)
{
    return start_common(s, extra, RS_TLS, auth_clients, 0, NULL);
}

/* rs_start_tls() for a cluster node: TLS on the bus and replication too. */
int rs_start_tls_cluster_node(rs_server *s, const char *auth_clients,
                              const char *const *extra)
{
    return start_common(s, extra, RS_TLS, auth_clients, 1, NULL);
}

/* Starts a private server on a Unix socket only (DIR/redis.sock, 700). */
int rs_start_unix(rs_server *s, const char *const *extra)
{
    return start_common(s, extra, RS_UNIX, NULL, 0, NULL);
}

/*
 * Starts redis-sentinel on a free port with 'conf' as its configuration
 * file (it rewrites it) and 'extra' after it.
 */
int rs_start_sentinel(rs_server *s, const char *conf,
                      const char *const *extra)
{
    return start_common(s, extra, RS_SENTINEL, NULL, 0, conf);
}

/* Kills the server (SIGKILL: no shutdown, like a crash). Keeps the port. */
void rs_kill(rs_server *s)
{
    rs_terminate(s, SIGKILL, 0);
}

/* Starts the server again on the same port, after rs_kill(). */
int rs_restart(rs_server *s)
{
    rs_terminate(s, SIGTERM, 2000);
    return rs_launch(s, 0);
}

/* Stalls the server: it keeps its connections but answers nothing. */
void rs_pause(rs_server *s)
{
    if (s->pid > 0 && kill(s->pid, SIGSTOP) == 0)
        s->paused = 1;
}

void rs_resume(rs_server *s)
{
    if (s->pid > 0 && kill(s->pid, SIGCONT) == 0)
        s->paused = 0;
}

/* Stops the server (SIGTERM, then SIGKILL) and removes its directory. */
void rs_stop(rs_server *s)
{
    rs_terminate(s, SIGTERM, 2000);
    if (s->owner == getpid() && s->dir[0] != '\0') {
        rs_remove_tree(s->dir);
        s->dir[0] = '\0';
    }
    for (int i = 0; i < s->nextra; i++)
        free(s->extra[i]);
    s->nextra = 0;
    s->password = NULL;
    unregister_server(s);
}

/* ---- Raw commands -------------------------------------------------------- */

/* The helper's connection, opened (again) when needed. */
redisContext *rs_conn(rs_server *s)
{
    struct timeval tv = {2, 0};

    if (s->ctx != NULL && s->ctx->err == 0)
        return s->ctx;
    if (s->ctx != NULL)
        redisFree(s->ctx);
    s->ctx = connect_plain(s, tv);
    if (s->ctx == NULL || s->ctx->err) {
        char where[320];

        if (s->sock[0] != '\0')
            snprintf(where, sizeof(where), "%s", s->sock);
        else
            snprintf(where, sizeof(where), "port %d", s->port);
        fprintf(stderr, "server.c: connect to %s: %s\n", where,
                s->ctx != NULL ? s->ctx->errstr : "out of memory");
        if (s->ctx != NULL)
            redisFree(s->ctx);
        s->ctx = NULL;
        return NULL;
    }
    redisSetTimeout(s->ctx, tv);
    if (s->password != NULL) {
        redisReply *r = redisCommand(s->ctx, "AUTH %s", s->password);

        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            fprintf(stderr, "server.c: AUTH on port %d failed\n",
                    s->port);
        if (r != NULL)
            freeReplyObject(r);
    }
    return s->ctx;
}

/*
 * Runs one command with binary-safe arguments on the helper's connection
 * (reconnecting once if it broke). The reply is the caller's to free with
 * freeReplyObject(); NULL if the server could not be reached. The helper's
 * connection is not the library's: it sends AUTH with the server's
 * --requirepass (if any) when it connects, and a SELECT it sends stays in
 * force until changed.
 */
redisReply *rs_cmdargv(rs_server *s, int argc, const char **argv,
                       const size_t *lens)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = rs_conn(s);
        redisReply *r;

        if (c == NULL)
            return NULL;
        r = redisCommandArgv(c, argc, argv, lens);
        if (r != NULL)
            return r;
        redisFree(s->ctx);
        s->ctx = NULL;
    }
    return NULL;
}

/* rs_cmd() with a va_list: reconnects and sends it once more if it broke. */
static redisReply *run_vcmd(rs_server *s, const char *fmt, va_list ap)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = rs_conn(s);
        redisReply *r;
        va_list aq;

        if (c == NULL)
            return NULL;
        va_copy(aq, ap);
        r = redisvCommand(c, fmt, aq);
        va_end(aq);
        if (r != NULL)
            return r;
        redisFree(s->ctx);
        s->ctx = NULL;
    }
    return NULL;
}

/* Runs one printf-style command (hiredis' format: %s, %b for binary). */
redisReply *rs_cmd(rs_server *s, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = run_vcmd(s, fmt, ap);
    va_end(ap);
    return r;
}

/*
 * Runs a command that answers an integer and returns it; INT64_MIN when the
 * reply is missing or of another type (printed to stderr).
 */
long long rs_int(rs_server *s, const char *fmt, ...)
{
    long long v = INT64_MIN;
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = run_vcmd(s, fmt, ap);
    va_end(ap);
    if (r == NULL)
        return v;
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else
        fprintf(stderr, "server.c: '%s' answered type %d%s%s\n", fmt,
                r->type, r->type == REDIS_REPLY_ERROR ? ": " : "",
                r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    return v;
}

long long rs_info_count(rs_server *s, const char *section, const char *field)
{
    redisReply *r = rs_cmd(s, "INFO %s", section);
    const char *p;
    long long n = 0;

    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (p = strstr(r->str, field)) != NULL)
        n = strtoll(p + strlen(field), NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

/* How many of the replicas in 'info' (INFO replication's text) have
   acknowledged offset 'offset': the "slaveN:...,offset=M,..." lines. */
static int acked_replicas(const char *info, long long offset)
{
    int n = 0;

    for (const char *p = strstr(info, "\nslave"); p != NULL;
         p = strstr(p + 1, "\nslave")) {
        const char *o = strstr(p, ",offset=");
        const char *end = strchr(p + 1, '\n');

        if (o != NULL && (end == NULL || o < end) &&
            strtoll(o + 8, NULL, 10) >= offset)
            n++;
    }
    return n;
}

int rs_wait_replicated(rs_server *master, int replicas, uint64_t timeout_ms)
{
    long long offset = rs_info_count(master, "replication",
                                     "master_repl_offset:");
    uint64_t deadline = rs_mono_ms() + timeout_ms;

    for (;;) {
        redisReply *r = rs_cmd(master, "INFO replication");
        int acked = r != NULL && r->type == REDIS_REPLY_STRING
                        ? acked_replicas(r->str, offset)
                        : 0;

        if (r != NULL)
            freeReplyObject(r);
        if (offset > 0 && acked >= replicas)
            return 0;
        if (rs_mono_ms() >= deadline)
            break;
        rs_sleep_ms(5);
    }
    fprintf(stderr, "server.c: %d replica%s did not acknowledge offset %lld "
            "within %llu ms\n", replicas, replicas == 1 ? "" : "s", offset,
            (unsigned long long)timeout_ms);
    return -1;
}

long long rs_calls(rs_server *s, const char *command)
{
    char field[64];

    snprintf(field, sizeof(field), "cmdstat_%s:calls=", command);
    return rs_info_count(s, "commandstats", field);
}

long long rs_cpu_us(const rs_server *s)
{
    clockid_t clock;
    struct timespec t;

    if (s->pid <= 0 || clock_getcpuclockid(s->pid, &clock) != 0 ||
        clock_gettime(clock, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Runs a command and returns 0 if it answered anything but an error. */
int rs_ok(rs_server *s, const char *fmt, ...)
{
    redisReply *r;
    int ok = -1;
    va_list ap;

    va_start(ap, fmt);
    r = run_vcmd(s, fmt, ap);
    va_end(ap);
    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_ERROR)
        ok = 0;
    else
        fprintf(stderr, "server.c: '%s': %s\n", fmt, r->str);
    freeReplyObject(r);
    return ok;
}

const char *rs_module_path(void)
{
    const char *env = getenv("SLUICE_MODULE");

    if (env != NULL && env[0] != '\0')
        return env;
#ifdef SLUICE_MODULE_PATH
    return SLUICE_MODULE_PATH;
#else
    return NULL;
#endif
}

const char *rs_skew_path(void)
{
#ifdef SLUICE_SKEW_PATH
    return SLUICE_SKEW_PATH;
#else
    return NULL;
#endif
}

const char *rs_skew_omit(void)
{
#ifdef SLUICE_SKEW_OMIT
    return SLUICE_SKEW_OMIT;
#else
    return NULL;
#endif
}
