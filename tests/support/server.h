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
 * The other transports (see "Other transports" below):
 *   rs_start_tls(&s, "yes", NULL)        TLS only (--port 0 --tls-port P),
 *                                        with the run's certificates
 *                                        (tls_certs.h); s.url "rediss://..."
 *   rs_start_unix(&s, NULL)              a Unix socket only; s.url
 *                                        "unix://DIR/redis.sock"
 *   rs_sentinel_start(&st, NULL)         a master, a replica and a
 *                                        redis-sentinel watching them
 *
 * Which build. The programs run are $SLUICE_TEST_SERVER, $SLUICE_TEST_CLI
 * and $SLUICE_TEST_SENTINEL when set (each the path of an executable), else
 * redis-server, redis-cli and redis-sentinel from PATH, else valkey-server,
 * valkey-cli and valkey-sentinel (rs_binary()). A path that is not an
 * executable is an error, said at once ("SLUICE_TEST_SERVER=/nope: not an
 * executable"). The first server a process starts prints which build it is
 * on stderr, once: "server.c: server redis 7.0.15 (/usr/bin/redis-server)"
 * (valkey and its valkey_version when INFO server has one).
 *
 * A server is killed however the program ends: rs_stop() on the normal path,
 * an atexit() handler after exit(), handlers for SIGINT, SIGTERM, SIGHUP and
 * SIGABRT, and, for what no handler sees (SIGKILL, a sanitizer's _exit), the
 * server is started with PR_SET_PDEATHSIG so the kernel kills it when the
 * thread that started it dies (only a temporary directory is left then). A
 * forked child of the program never kills its parent's servers: only the
 * process that started a server stops it. The same holds for sentinels.
 *
 * Functions print their failures to stderr and return -1 (or NULL); the
 * caller decides whether that fails the test.
 */
#ifndef SLUICE_TEST_SERVER_H
#define SLUICE_TEST_SERVER_H

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define RS_MAX_SERVERS 16
#define RS_MAX_EXTRA 24
#define RS_READY_TIMEOUT_MS 10000
#define RS_FILES 5
/* The environment variables that name the build under test (rs_binary()). */
#define RS_SERVER_ENV "SLUICE_TEST_SERVER"
#define RS_CLI_ENV "SLUICE_TEST_CLI"
#define RS_SENTINEL_ENV "SLUICE_TEST_SENTINEL"

/* What a server listens on (and so what s->url names). */
typedef enum rs_kind {
    RS_TCP,      /* plain TCP on 'port' */
    RS_TLS,      /* TLS only on 'port' (--port 0), an admin socket 'sock' */
    RS_UNIX,     /* a Unix socket 'sock' only (--port 0) */
    RS_SENTINEL  /* redis-sentinel on 'port' (rs_sentinel_start()) */
} rs_kind;

typedef struct rs_server {
    pid_t pid;            /* 0 when not running */
    pid_t owner;          /* the process that started it */
    int port;             /* TCP port, the TLS one for RS_TLS; 0 for RS_UNIX */
    int bus_port;         /* cluster bus port; 0 for a server without one */
    int paused;           /* SIGSTOP sent, no SIGCONT yet */
    rs_kind kind;
    char tls_auth[16];    /* RS_TLS: --tls-auth-clients yes, no or optional */
    char binary[256];     /* the program it runs (rs_binary()) */
    char dir[256];        /* the server's private directory */
    char sock[108];       /* RS_UNIX, RS_TLS: DIR/redis.sock; else "" */
    char files[RS_FILES][300]; /* what it may write there: see server.c */
    char url[64];         /* "redis://127.0.0.1:PORT", "rediss://...",
                             "unix://DIR/redis.sock" */
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

/* ---- The build under test ----------------------------------------------- */

typedef enum rs_program {
    RS_PROGRAM_SERVER,   /* $SLUICE_TEST_SERVER, redis-server, valkey-server */
    RS_PROGRAM_CLI,      /* $SLUICE_TEST_CLI, redis-cli, valkey-cli */
    RS_PROGRAM_SENTINEL  /* $SLUICE_TEST_SENTINEL, redis-sentinel, ... */
} rs_program;

/*
 * The path of the program 'which' runs as: its environment variable when
 * set and not empty (it must name an executable file), else the first of
 * its redis- and valkey- names found in PATH. NULL, with the reason on
 * stderr ("SLUICE_TEST_SERVER=/nope: not an executable"), when there is
 * none. The string is the launcher's, until the next call for 'which'.
 */
const char *rs_binary(rs_program which);
/*
 * What 's' runs, from its INFO server, into 'out': "redis 7.0.15
 * (/usr/bin/redis-server)", or "valkey 8.0.1 (...)" when INFO server has a
 * valkey_version. Returns 0, or -1 (with "unknown (PATH)") if it cannot be
 * asked.
 */
int rs_describe(rs_server *s, char *out, size_t cap);
/*
 * Runs a program ('argv', NULL-terminated; argv[0] a path, or a name
 * looked up in PATH), its stdout and stderr read into 'out' (cut to 'cap',
 * always terminated), killed after 'timeout_ms'. Returns its exit status,
 * or -1 if it could not run, was killed or timed out. Safe while other
 * threads run (the child calls only async-signal-safe functions).
 */
int rs_run(const char *const *argv, char *out, size_t cap,
           uint64_t timeout_ms);
/*
 * Runs the CLI (rs_binary(RS_PROGRAM_CLI)) at 's' over the transport the
 * server listens on: -h 127.0.0.1 -p PORT; for RS_TLS also --tls with the
 * run's CA, client certificate and key; for RS_UNIX -s SOCK. 'args' is a
 * NULL-terminated list (e.g. {"PING", NULL}); with --password when the
 * server has one. Output and result as rs_run(), within 10 s.
 */
int rs_cli(rs_server *s, const char *const *args, char *out, size_t cap);

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
/*
 * Starts a private server that speaks TLS only: --port 0, --tls-port on a
 * free port, the run's server certificate and key and its CA
 * (rs_certs_get(), tls_certs.h), and --tls-auth-clients 'auth_clients'
 * ("yes": a client certificate signed by the CA is required; "no";
 * "optional"; NULL is "no"). s.url is "rediss://127.0.0.1:PORT"; the
 * caller adds the library's TLS options to it.
 *
 * The harness's own connection (rs_conn(), rs_cmd()...) cannot be TLS:
 * hiredis 0.14 has none. So the server also listens on a Unix socket in its
 * private directory, s.sock (mode 700), and the helper connection and the
 * readiness check use that; nothing but TLS listens on TCP. 'extra' comes
 * after the TLS arguments, so {"--tls-cert-file", c->expired_cert,
 * "--tls-key-file", c->expired_key, NULL} serves another certificate (the
 * error tests); rs_restart() keeps all of it.
 */
int rs_start_tls(rs_server *s, const char *auth_clients,
                 const char *const *extra);
/*
 * rs_start_tls() for a cluster node: rs_start_cluster_node() with TLS on
 * the client port and, with --tls-cluster yes and --tls-replication yes,
 * on the bus and between master and replica (the nodes present the
 * server certificate to each other, so it is also a client certificate).
 * See rc_start_tls() in cluster.h.
 */
int rs_start_tls_cluster_node(rs_server *s, const char *auth_clients,
                              const char *const *extra);
/*
 * Starts a private server on a Unix socket only: --port 0 --unixsocket
 * DIR/redis.sock --unixsocketperm 700. s.port is 0, s.sock the socket's
 * path, s.url "unix://DIR/redis.sock" (an error when that is longer than
 * s.url holds: a $TMPDIR over 30 bytes).
 */
int rs_start_unix(rs_server *s, const char *const *extra);
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

/*
 * The helper's connection, opened (again) when needed; NULL if it cannot.
 * TCP to s.port, or the Unix socket s.sock for RS_TLS and RS_UNIX.
 */
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
 * In a child between fork() and exec(): closes every descriptor but the
 * standard three, so that no server or program a test starts holds the
 * test's connections (hiredis opens them without close-on-exec), which
 * would outlive the test's own close. Async-signal-safe.
 */
void rs_close_inherited(void);
/*
 * Waits until 'replicas' replicas of 'master' have acknowledged every write
 * the master made so far, whoever's connection made it (its
 * master_repl_offset, now); 0, or -1 after 'timeout_ms' (printed). WAIT
 * would not do: it waits only for the calling connection's own writes, so
 * on a connection that wrote nothing it answers at once. A replica just
 * synced may take up to a second to be sent the stream (the server starts
 * it on the replica's next REPLCONF ACK), so a write is on a replica only
 * when this says so.
 */
int rs_wait_replicated(rs_server *master, int replicas, uint64_t timeout_ms);
/*
 * The server's count of calls of 'command' (lower case, e.g. "evalsha")
 * since its start or CONFIG RESETSTAT, from INFO commandstats; 0 when it has
 * none or cannot be read.
 */
long long rs_calls(rs_server *s, const char *command);
/*
 * The CPU time the server's process has had so far, in us, read from its
 * process CPU clock (clock_getcpuclockid); -1 when it cannot be read. The
 * cost of a call as work: unlike the wall time INFO commandstats and
 * SLOWLOG count, it does not grow while a loaded machine leaves the
 * server waiting for a core.
 */
long long rs_cpu_us(const rs_server *s);

/* ---- Sentinel ------------------------------------------------------------ */

/*
 * A master, one replica of it, and one redis-sentinel watching them: the
 * setup of a self-hosted high availability without Cluster. One sentinel
 * with quorum 1 is enough to fail over (three would be more realistic, and
 * slower). Everything announces 127.0.0.1 (replica-announce-ip, sentinel
 * announce-ip), and the sentinel runs with
 *   sentinel monitor RS_SENTINEL_MASTER 127.0.0.1 PORT 1
 *   sentinel down-after-milliseconds ... RS_SENTINEL_DOWN_AFTER_MS
 *   sentinel failover-timeout ... RS_SENTINEL_FAILOVER_TIMEOUT_MS
 * so that a failover takes a few seconds. Every process is an rs_server,
 * killed on every way out like any other.
 *
 *   rs_sentinel st;
 *   rs_sentinel_start(&st, NULL, NULL);   returns when the sentinel sees
 *                                         the master and its replica
 *   st.url                                "valkey+sentinel://127.0.0.1:SP/
 *                                          sluice-master"
 *   rs_sentinel_failover(&st);            SENTINEL FAILOVER, then waits
 *                                         until the sentinel names the
 *                                         replica as the master
 *   rs_sentinel_master(&st)               the node the sentinel names now
 *   rs_kill(rs_sentinel_master(&st));     a crash: the sentinel fails over
 *   rs_sentinel_wait_master(&st, port, ms) after 'down-after' and more
 *                                         (no sooner than
 *                                         RS_SENTINEL_FAILOVER_GAP_MS after
 *                                         the last failover)
 *   rs_restart(old); rs_sentinel_rejoin(&st, old)  the crashed node back,
 *                                         as a replica
 *   rs_sentinel_stop(&st);
 */
#define RS_SENTINEL_MASTER "sluice-master"
#define RS_SENTINEL_DOWN_AFTER_MS 1000
#define RS_SENTINEL_FAILOVER_TIMEOUT_MS 3000
#define RS_SENTINEL_FAILOVER_GAP_MS (2 * RS_SENTINEL_FAILOVER_TIMEOUT_MS)
#define RS_SENTINEL_READY_TIMEOUT_MS 20000

typedef struct rs_sentinel {
    rs_server nodes[2];  /* [0] the first master, [1] its first replica */
    rs_server sentinel;  /* kind RS_SENTINEL, on sentinel.port */
    int tls_port;        /* rs_sentinel_start_tls(): its TLS port */
    int held[2];         /* rs_sentinel_kill(): a killed node's port, held */
    pthread_t holder[2]; /* ... by a thread that resets what connects */
    char url[96];        /* "valkey+sentinel://127.0.0.1:SP/sluice-master" */
} rs_sentinel;

/*
 * Starts redis-sentinel (rs_binary(RS_PROGRAM_SENTINEL)) on a free port with
 * 'conf' as its configuration file (DIR/sentinel.conf: a sentinel rewrites
 * it), and 'extra' after it on the command line. Most callers want
 * rs_sentinel_start(), which writes the configuration.
 */
int rs_start_sentinel(rs_server *s, const char *conf,
                      const char *const *extra);
/*
 * Starts the master, its replica (--replicaof) and the sentinel; 'extra'
 * goes to both data nodes (with {"--requirepass", PW, NULL} the sentinel is
 * given "sentinel auth-pass"), 'sentinel_extra' to the sentinel (e.g.
 * {"--requirepass", PW, NULL}: rs_cmd() on st.sentinel sends it). Returns
 * once rs_sentinel_wait_seen() does: 0, or -1 after stopping what it
 * started.
 */
int rs_sentinel_start(rs_sentinel *st, const char *const *extra,
                      const char *const *sentinel_extra);
/*
 * Waits until the sentinel names a master of ours that answers (SENTINEL
 * MASTER: flags "master"), lists the other node as its replica (SENTINEL
 * REPLICAS: flags "slave"), and that node says it replicates from it with
 * its link up (its own INFO replication: the sentinel refreshes what it
 * knows of a replica only every 10 s). Then a failover can promote it.
 * Returns 0, or -1 after 'timeout_ms'.
 */
int rs_sentinel_wait_seen(rs_sentinel *st, uint64_t timeout_ms);
/*
 * Makes 'node' (one of st->nodes, running) a replica of the master the
 * sentinel names (REPLICAOF), and waits for rs_sentinel_wait_seen(): what
 * the sentinel would do by itself, but some 15 s later. For a former
 * master that was restarted after a failover. Returns 0 or -1.
 */
int rs_sentinel_rejoin(rs_sentinel *st, rs_server *node);
/*
 * The master's port as the sentinel tells it (SENTINEL
 * GET-MASTER-ADDR-BY-NAME; the address is always 127.0.0.1), or -1.
 */
int rs_sentinel_master_port(rs_sentinel *st);
/* The node (st->nodes[i]) at rs_sentinel_master_port(), or NULL. */
rs_server *rs_sentinel_master(rs_sentinel *st);
/* Waits until the sentinel names 'port' as the master; 0, or -1 after
   'timeout_ms'. */
int rs_sentinel_wait_master(rs_sentinel *st, int port, uint64_t timeout_ms);
/*
 * SENTINEL FAILOVER: the replica is promoted. Returns once the sentinel
 * names it as the master (within RS_SENTINEL_FAILOVER_TIMEOUT_MS) and the
 * old master is its replica again (rs_sentinel_rejoin()): the new master's
 * port, or -1. Sentinel starts no second failover of a master within 2 x
 * failover-timeout of the first (RS_SENTINEL_FAILOVER_GAP_MS): a test that
 * kills the new master waits that long for its promotion.
 */
int rs_sentinel_failover(rs_sentinel *st);
/*
 * The same over TLS: both nodes TLS-only (rs_start_tls(), "no" client
 * certificates, --tls-replication yes), and the sentinel speaking TLS to
 * them and on a TLS port of its own, st->tls_port (its plain port stays,
 * for the harness). st->url is "valkeys+sentinel://127.0.0.1:TP/
 * sluice-master"; the caller adds ?tls_ca=. 0, or -1 after stopping what
 * it started.
 */
int rs_sentinel_start_tls(rs_sentinel *st);
/*
 * Kills 'node' (one of st->nodes) like a crash, and holds its port with a
 * socket of ours that resets every connection at once (as a port with
 * nothing on it refuses one), until rs_sentinel_stop():
 * the sentinel keeps the dead node's address, and would make whatever
 * server of another test took the port a replica of its master (tests run
 * side by side). The sentinel sees the port as a node that is down.
 */
void rs_sentinel_kill(rs_sentinel *st, rs_server *node);
/* Stops the sentinel and both nodes, and removes their directories. */
void rs_sentinel_stop(rs_sentinel *st);

/* ---- The module ---------------------------------------------------------- */

/*
 * The built server module (sluice.so), for a server started with
 * {"--loadmodule", rs_module_path(), NULL}: $SLUICE_MODULE when set, else
 * the path the build gave; NULL when the build has no module
 * (SLUICE_MODULE=OFF).
 */
const char *rs_module_path(void);
/*
 * The tests' module built without one algorithm's glue (sluice_skew.so,
 * CMakeLists.txt's SLUICE_SKEW_OMIT), and the name of that algorithm, e.g.
 * "sliding-log"; NULL when the build has no module.
 */
const char *rs_skew_path(void);
const char *rs_skew_omit(void);

#endif /* SLUICE_TEST_SERVER_H */
