/*
 * server.h - a private redis-server for one program: a test, or a
 * benchmark (nothing here is test-only: no checks, no harness).
 *
 * After hiredis' and libvalkey's test.sh: each program starts its own
 * server on a free loopback port, in a fresh directory under $TMPDIR, and
 * kills it on every way out. Tests talk to a real server, never a mock.
 *
 *   rs_server s;
 *   if (rs_start(&s, NULL) < 0) ...      start; s.url is "redis://127.0.0.1:P"
 *   redisReply *r = rs_cmd(&s, "PTTL %s", key);   a raw command (hiredis)
 *   rs_kill(&s);  rs_restart(&s);        stop by PID, start on the same port
 *   rs_pause(&s); rs_resume(&s);         SIGSTOP/SIGCONT: a stalled server
 *   rs_stop(&s);                         stop and remove the directory
 *   rs_start_cluster_node(&s, NULL)      the same, with cluster support on a
 *                                        second free port (see cluster.h,
 *                                        which builds on it)
 *
 * A server is killed however the program ends: rs_stop() on the normal path,
 * an atexit() handler after exit(), handlers for SIGINT, SIGTERM, SIGHUP and
 * SIGABRT, and, for what no handler sees (SIGKILL, a sanitizer's _exit), the
 * server is started with PR_SET_PDEATHSIG so the kernel kills it when the
 * thread that started it dies (only a temporary directory is left then). A
 * forked child of the program never kills its parent's servers: only the
 * process that started a server stops it.
 *
 * Functions print their failures to stderr and return -1 (or NULL); the
 * caller decides whether that fails the test.
 */
#ifndef SLUICE_TEST_SERVER_H
#define SLUICE_TEST_SERVER_H

#include <hiredis/hiredis.h>

#include <stdint.h>
#include <sys/types.h>

#define RS_MAX_SERVERS 16
#define RS_MAX_EXTRA 16
#define RS_READY_TIMEOUT_MS 10000
#define RS_BINARY "redis-server"

typedef struct rs_server {
    pid_t pid;            /* 0 when not running */
    pid_t owner;          /* the process that started it */
    int port;
    int bus_port;         /* cluster bus port; 0 for a server without one */
    int paused;           /* SIGSTOP sent, no SIGCONT yet */
    char dir[256];        /* the server's private directory */
    char files[3][300];   /* what it may write there: see server.c */
    char url[64];         /* "redis://127.0.0.1:PORT" */
    char *extra[RS_MAX_EXTRA]; /* extra arguments, owned */
    int nextra;
    const char *password; /* --requirepass, sent by rs_conn(); in 'extra' */
    redisContext *ctx;    /* the helper's own connection for rs_cmd() */
} rs_server;

/* ---- Small utilities ----------------------------------------------------- */

/* Milliseconds on the monotonic clock, for deadlines and durations. */
uint64_t rs_mono_ms(void);
/* Microseconds on the monotonic clock, for measuring single calls. */
uint64_t rs_mono_us(void);
/* Sleeps 'ms' milliseconds, resuming after signals. */
void rs_sleep_ms(uint64_t ms);
/*
 * A loopback port that was free a moment ago: bind port 0, read what the
 * kernel chose, close. Another process may take it before the server does;
 * rs_start() retries with a new port when the server cannot bind.
 */
int rs_free_port(void);
/*
 * Removes 'path' and everything under it (the server writes only a log, and
 * with --appendonly yes a directory of files). Errors are ignored: this is
 * cleanup.
 */
void rs_remove_tree(const char *path);
/* Prints the tail of the server's log, to explain a failed start. */
void rs_print_log(const rs_server *s);

/* ---- The native module --------------------------------------------------- */

/*
 * 'extra' arguments that load the module (rs_module_path(), below): {"--loadmodule", path, NULL}, or
 * {NULL} when the build made none. Pass to rs_start() and the like.
 */
const char *const *rs_module_args(void);

/* ---- Starting and stopping ----------------------------------------------- */

/*
 * Starts a private server. 'extra' is a NULL-terminated list of further
 * arguments (e.g. {"--requirepass", "secret", NULL}), or NULL. Returns 0, or
 * -1 with a message on stderr.
 */
int rs_start(rs_server *s, const char *const *extra);
/*
 * Starts a private server with cluster support (--cluster-enabled yes), its
 * bus on a second free port in 's->bus_port' and its cluster state file in
 * its own directory. It knows no other node and serves no slot until told
 * (CLUSTER MEET, ADDSLOTS, or redis-cli --cluster create): see cluster.h. A
 * restart keeps both ports and the state file, so the node comes back as
 * the same member of its cluster.
 */
int rs_start_cluster_node(rs_server *s, const char *const *extra);
/* Kills the server (SIGKILL: no shutdown, like a crash). Keeps the port. */
void rs_kill(rs_server *s);
/* Starts the server again on the same port, after rs_kill(). */
int rs_restart(rs_server *s);
/* Stalls the server: it keeps its connections but answers nothing. */
void rs_pause(rs_server *s);
void rs_resume(rs_server *s);
/* Stops the server (SIGTERM, then SIGKILL) and removes its directory. */
void rs_stop(rs_server *s);
/* Stops the server process with 'sig', then SIGKILL after 'grace_ms'. */
void rs_terminate(rs_server *s, int sig, uint64_t grace_ms);
/*
 * Starts the server on the port in 's' (a restart) or, when 'new_port' is
 * set, on a fresh free port (and bus port, for a cluster node), retrying
 * with other ports if it cannot bind.
 */
int rs_launch(rs_server *s, int new_port);

/* ---- Raw commands -------------------------------------------------------- */

/* The helper's connection, opened (again) when needed; NULL if it cannot. */
redisContext *rs_conn(rs_server *s);
/*
 * Runs one command with binary-safe arguments on the helper's connection
 * (reconnecting once if it broke). The reply is the caller's to free with
 * freeReplyObject(); NULL if the server could not be reached. The helper's
 * connection is not the library's: it sends AUTH with the server's
 * --requirepass (if any) when it connects, and a SELECT it sends stays in
 * force until changed.
 */
redisReply *rs_cmdargv(rs_server *s, int argc, const char **argv,
                       const size_t *lens);
/* Runs one printf-style command (hiredis' format: %s, %b for binary). */
redisReply *rs_cmd(rs_server *s, const char *fmt, ...);
/*
 * Runs a command that answers an integer and returns it; INT64_MIN when the
 * reply is missing or of another type (printed to stderr).
 */
long long rs_int(rs_server *s, const char *fmt, ...);
/* Runs a command and returns 0 if it answered anything but an error. */
int rs_ok(rs_server *s, const char *fmt, ...);
/*
 * A number from INFO 'section' (e.g. "errorstats"): the digits after the
 * text 'field' (e.g. "errorstat_TRYAGAIN:count="); 0 when there is none or
 * it cannot be read.
 */
long long rs_info_count(rs_server *s, const char *section, const char *field);
/*
 * The server's count of calls of 'command' (lower case, e.g. "evalsha")
 * since its start or CONFIG RESETSTAT, from INFO commandstats; 0 when it has
 * none or cannot be read.
 */
long long rs_calls(rs_server *s, const char *command);

/* ---- The module ---------------------------------------------------------- */

/*
 * The built server module (sluice.so), for a server started with
 * {"--loadmodule", rs_module_path(), NULL}: $SLUICE_MODULE when set, else
 * the path the build gave; NULL when the build has no module
 * (SLUICE_MODULE=OFF).
 */
const char *rs_module_path(void);

#endif /* SLUICE_TEST_SERVER_H */
