/*
 * valkey.h - the Valkey/Redis stores: one server ("valkey://", "redis://")
 * or a cluster ("valkey+cluster://", "redis+cluster://"). What the files of
 * src/valkey/ share, and nothing outside them needs but the key slot.
 *
 * The budget lives on the server, so every process and machine that uses
 * the same server and key prefix shares it. Each algorithm is one Lua script
 * (src/algo/NAME/NAME.lua), run with EVALSHA, so a decision is atomic and at
 * most one round trip; on a server with the native module (sluice.so) the
 * same call is one SLUICE.HITMANY instead, with the same keys and reply
 * (engine.c). The files, from the wire up:
 *
 *   url.c      the store's URL and its options
 *   conn.c     a node's connections, shared by every thread: the calls
 *              queued on one are written together (automatic pipelining)
 *   scripts.c  EVALSHA by the SHA1 computed at build time; a server that
 *              lacks a script (NOSCRIPT) is given it, and the call is sent
 *              once more
 *   slot.c     a key's cluster slot (CRC16 and the {hashtag} rule)
 *   cluster.c  the cluster's map of slots to nodes, and the one place that
 *              follows its redirections (MOVED, ASK, TRYAGAIN)
 *   decide_*.c decisions (decide.h): every one, a single hit as a batch,
 *              is a call set, one call per slot, all written to their
 *              nodes before any reply is read, each sent again while a
 *              redirection says so (decide_calls.c); a call's arguments
 *              (decide_args.c) and its reply (decide_reply.c)
 *   combine.c  one server: threads deciding at once share script calls
 *   store.c    the store's table, its server interface (for the queue), and
 *              opening and freeing it
 *   engine.c   the engine: whether a node has the native module, and
 *              which algorithms it decides (asked at each connect), and
 *              the SLUICE.* commands sent in place of the scripts there
 *
 * Nodes and connections. A node is one server and a pool of 'pool_size'
 * hiredis connections to it. A call is dealt one of them in turn and queues
 * its request there; whoever finds no I/O in progress on it writes every
 * queued request and reads their replies (conn.c). A connection that failed
 * is closed and opened again on its next use; before each use it is checked
 * for a close by the server (a restart), so a request is never written into
 * a dead socket. One server is one node; a cluster is as many nodes as it
 * has masters, found from its seeds.
 */
#ifndef SLUICE_VALKEY_H
#define SLUICE_VALKEY_H

#include "store/store.h"

#include <hiredis/hiredis.h>

#include <pthread.h>

/* Hosts in a cluster URL, and connections per node. */
#define SLUICE__VK_MAX_SEEDS 64
#define SLUICE__VK_MAX_POOL 1024
/* Timeouts: at most an hour. */
#define SLUICE__VK_MAX_TIMEOUT_MS 3600000u
/* The largest reply caps: 4 GB, and what hiredis counts in an int. */
#define SLUICE__VK_MAX_REPLY_BYTES ((uint64_t)1 << 32)
#define SLUICE__VK_MAX_REPLY_ELEMENTS ((uint64_t)INT32_MAX)
/* A key name that fits this is built in place. */
#define SLUICE__VK_KEY_BUF 256

/* ---- Slots (slot.c) ------------------------------------------------------------ */

/* A cluster's slot count, and the slot of a key. */
#define SLUICE__SLOTS 16384u
unsigned sluice__key_slot(const char *key, size_t len);

/* A connection's bytes: valkey/wire.h. */
#include "valkey/wire.h"

/* ---- The store ------------------------------------------------------------------- */

/*
 * One request waiting on a connection: one formatted command, or two
 * (ASKING and the command) whose last reply is the answer. It lives on the
 * caller's stack; the leader fills 'reply' or 'err' and 'msg', then 'done'.
 */
typedef struct sluice__vk_request {
    struct sluice__vk_request *next;
    const char *cmd;
    size_t len;
    int ncmds;
    uint64_t deadline_ms;  /* monotonic: answered by then, or failed */
    redisReply *reply;
    int err;
    char msg[256];
    bool done;
    pthread_cond_t cond;   /* its caller waits here: done, or to lead */
} sluice__vk_request;

/*
 * A connection, shared by every caller that is dealt it. Callers queue
 * their requests; whoever finds no I/O in progress becomes the leader,
 * writes every queued request at once, reads their replies in order and
 * hands them out. So many threads share few connections, and no caller
 * waits longer than the batch in flight plus its own round trip.
 */
typedef struct sluice__vk_conn {
    pthread_mutex_t lock;  /* guards the queue, 'busy' and 'done' flags */
    bool busy;             /* a leader is doing I/O */
    sluice__vk_request *head, **tail;
    sluice__vk_wire *ctx; /* NULL until connected; only the leader uses it */
    sluice__vk_caps caps;          /* its reader's */
} sluice__vk_conn;

/* One server. Nodes are added, never removed before the store is freed, so
   a pointer to one stays valid without a lock. */
typedef struct sluice__vk_node {
    char *host;                 /* a Unix socket's path for that transport */
    int port;                   /* 0 for a Unix socket */
    const sluice__vk_transport *transport;
    bool is_sentinel;           /* a sentinel: its own login, nothing else */
    /* For a master the sentinels named: the store's flag to set when it
       is a replica now (READONLY); NULL for other nodes. */
    _Atomic int *master_stale;
    char name[80];              /* "host:port" for messages, cut to fit */
    _Atomic uint64_t failed_ms; /* when a call to it last failed; 0: fine */
    _Atomic unsigned next_conn;
    _Atomic unsigned module; /* SLUICE__VK_MODULE_*: what its connects found */
    unsigned nconns;
    sluice__vk_conn conns[];
} sluice__vk_node;

struct sluice__vk_waiter;

typedef struct sluice__vk_store {
    const sluice__vk_transport *transport; /* every node's: tcp, unix or tls */
    struct sluice__vk_tls *tls;            /* NULL but for the tls transport */
    char *user;
    char *password;
    long db;
    char *prefix;
    char *emq_prefix;
    uint64_t connect_timeout_ms;
    uint64_t command_timeout_ms;
    uint64_t max_reply_bytes;
    uint64_t max_reply_elements;
    unsigned pool_size;
    int caller_clock;
    sluice_engine engine;
    _Atomic uint64_t module_calls; /* SLUICE.* calls answered */
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;

    /* Every script is loaded on the store's first connection (scripts.c). */
    _Atomic int scripts_loaded;

    /* Combining (combine.c): decisions waiting for a round. */
    pthread_mutex_t combine_lock;
    struct sluice__vk_waiter *waiting, **waiting_tail;
    unsigned combining; /* callers deciding a round now, <= pool_size */

    /* One node (a single server), or a cluster's nodes and map. */
    bool cluster;
    pthread_rwlock_t map_lock; /* guards nodes[] and slots[] */
    sluice__vk_node **nodes;
    size_t nnodes, nodes_cap;
    int32_t slots[SLUICE__SLOTS]; /* index into nodes[]; -1 unknown */
    pthread_mutex_t refresh_lock;
    _Atomic int map_stale;
    uint64_t last_refresh_ms;     /* monotonic; under refresh_lock */

    /* Sentinel (sentinel.c): the sentinels, the master's name, and the
       master they named last, asked again once it fails or is a replica. */
    bool sentinel;
    char *master_name;
    char *sentinel_user, *sentinel_password;
    sluice__vk_node **sentinels;
    size_t nsentinels;
    _Atomic(sluice__vk_node *) master;    /* NULL until asked */
    _Atomic int master_stale;
    _Atomic unsigned sentinel_next; /* the one to ask first */

    uint64_t token_seed;          /* the sliding log's members: unique */
    _Atomic uint64_t token_next;
    _Atomic uint64_t redirects;
} sluice__vk_store;

/* ---- URLs (url.c) ------------------------------------------------------------ */

/*
 *   valkey://[user:password@]host[:port][/db][?name=value&...]
 *   redis://  the same;  valkeys://, rediss://  the same over TLS
 *   valkey+cluster://[user:password@]host[:port][,host[:port]...][?...]
 *   redis+cluster://  the same;  valkeys+cluster://, rediss+cluster://  TLS
 *   unix://[user:password@]/path/to/socket[?db=N&...]
 *   valkey+unix://, redis+unix://  the same
 *   valkey+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[?...]
 *   redis+sentinel://  the same;  valkeys+sentinel://, rediss+sentinel://  TLS
 */
typedef enum sluice__vk_url_kind {
    SLUICE__VK_URL_ONE,
    SLUICE__VK_URL_CLUSTER,
    SLUICE__VK_URL_SENTINEL
} sluice__vk_url_kind;

typedef struct sluice__vk_url {
    sluice__vk_url_kind kind;
    bool cluster;            /* kind == SLUICE__VK_URL_CLUSTER */
    const sluice__vk_transport *transport;
    size_t nhosts;
    char *hosts[SLUICE__VK_MAX_SEEDS]; /* a Unix socket: its path, port 0 */
    int ports[SLUICE__VK_MAX_SEEDS];
    char *user, *password, *prefix, *emq_prefix; /* NULL: not given */
    char *master;            /* the sentinels' name for the master */
    char *sentinel_user, *sentinel_password;
    /* TLS settings the query gave (NULL, -1: not given) */
    char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
    int tls_insecure;
    long db;
} sluice__vk_url;

/*
 * Parses 'url' into 'u' (zeroed by the caller) and applies its query's
 * options to 'o'. Messages quote the URL with its password masked.
 */
int sluice__vk_url_parse(sluice__vk_url *u, sluice_store_opts *o,
                         const char *url);
void sluice__vk_url_free(sluice__vk_url *u);

/* ---- Sentinel (sentinel.c) ----------------------------------------------------- */

/*
 * The master of a sentinel store, by 'deadline_ms': the one the sentinels
 * named last, or, when there is none yet or it failed or became a
 * replica, the one they name now, confirmed with ROLE. Asks each sentinel
 * in turn, and all of them again after a pause that doubles (10 ms to
 * 200 ms), until one names a master that says it is one, or the deadline.
 */
int sluice__vk_sentinel_node(sluice__vk_store *v, uint64_t deadline_ms,
                             sluice__vk_node **out);

/* ---- Connections (conn.c) ------------------------------------------------------ */

sluice__vk_node *sluice__vk_node_new(const char *host, size_t host_len,
                                     int port, const sluice__vk_transport *t,
                                     unsigned nconns);
void sluice__vk_node_free(sluice__vk_node *n);
/* The connection of 'n' that this call is dealt, in turn. */
sluice__vk_conn *sluice__vk_node_pick(sluice__vk_node *n);

/*
 * Opens 'c' if it is closed: connect, AUTH, SELECT, the engine, scripts,
 * every step by the one 'deadline_ms' (monotonic) of the call that needs
 * the connection.
 */
int sluice__vk_conn_ready(sluice__vk_store *v, sluice__vk_node *n,
                          sluice__vk_conn *c, uint64_t deadline_ms);
/*
 * Sends one command on the open connection 'c' alone and reads its reply
 * (an error reply too) by 'deadline_ms'. With 'alone', the reply must be
 * all that the connection holds: more bytes are SLUICE_EPROTO (a reply
 * nobody asked for would answer the next command). A connection that fails
 * is closed.
 */
int sluice__vk_conn_exchange(sluice__vk_store *v, sluice__vk_node *n,
                             sluice__vk_conn *c, uint64_t deadline_ms,
                             bool alone, const char *doing, int argc,
                             const char **argv, const size_t *lens,
                             redisReply **out);
/* The same with 'alone', and an error reply an error; the reply is the
   caller's. */
int sluice__vk_conn_command(sluice__vk_store *v, sluice__vk_node *n,
                            sluice__vk_conn *c, uint64_t deadline_ms,
                            redisReply **out, const char *doing, int argc,
                            const char **argv, const size_t *lens);
/* What an error reply says of the module a call was sent to. */
typedef enum sluice__vk_lack {
    SLUICE__VK_LACK_NONE,   /* nothing */
    SLUICE__VK_LACK_MODULE, /* no SLUICE.* command: no module */
    SLUICE__VK_LACK_ALGO /* the module's "no module glue" for one algorithm */
} sluice__vk_lack;
/* Maps an error reply 'r' of node 'n' to SLUICE_ECONN (the server cannot
   answer now, or a master the sentinels named is a replica now),
   SLUICE_ENOTSUP (no module, or none that decides the algorithm),
   SLUICE_ECONFIG (a redirection nobody follows: a cluster node behind a
   valkey:// URL; a replica), SLUICE_EAUTH or SLUICE_EPROTO, with its
   message, which quotes all of the reply's bytes (a NUL or control byte as
   \xNN). It only formats: what the reply says of 'n' is noted by the
   caller that sent the call (sluice__vk_reply_noted()). */
int sluice__vk_reply_error(sluice__vk_node *n, const redisReply *r,
                           const char *doing);
/* Notes on 'n' what error reply 'r', to a call sent to it, says of it: a
   master the sentinels named that is a replica now (READONLY: they are
   asked again), or a module gone, or an algorithm of it (answered, as
   sluice__vk_engine_lost() does). */
sluice__vk_lack sluice__vk_reply_noted(sluice__vk_node *n, const redisReply *r);
/* True for an error reply 'r' that means "not now" (LOADING, BUSY, ...). */
bool sluice__vk_unavailable(const redisReply *r);
/* True for an error reply 'r' that is a redirection (MOVED, ASK). */
bool sluice__vk_redirection(const redisReply *r);

/*
 * The two arguments every decision script takes after the limit: 'now'
 * (empty: the server's clock; with clock=caller, this side's clock as
 * text) and a token unique to the call (the sliding log's members). Writes
 * them into 'now' (24 bytes) and 'token' (40 bytes) with their lengths;
 * SLUICE_ERANGE if the caller's clock reads beyond 2^53.
 */
int sluice__vk_now_token(sluice__vk_store *v, char *now, size_t *now_len,
                         char *token, size_t *token_len);

/* Queues request 'e' on 'c'; sluice__vk_conn_await() then sends it, if no
   other caller has, and waits for its reply. */
void sluice__vk_conn_submit(sluice__vk_conn *c, sluice__vk_request *e);
int sluice__vk_conn_await(sluice__vk_store *v, sluice__vk_node *n,
                          sluice__vk_conn *c, sluice__vk_request *e);
/*
 * Leads the I/O of 'c' for what is queued on it, unless another caller
 * leads it or nothing is queued (NULL): writes every queued request and
 * answers them, with '*err' what writing answered. The leader then calls
 * sluice__vk_conn_lead_end() to read their replies and hand them out.
 */
sluice__vk_request *sluice__vk_conn_lead(sluice__vk_store *v,
                                         sluice__vk_node *n, sluice__vk_conn *c,
                                         int *err);
void sluice__vk_conn_lead_end(sluice__vk_store *v, sluice__vk_node *n,
                              sluice__vk_conn *c, sluice__vk_request *batch,
                              int err);

/* One lead of a set: where, what was written, what writing answered. */
typedef struct sluice__vk_lead {
    sluice__vk_node *node;
    sluice__vk_conn *conn;
    sluice__vk_request *batch;
    int err;
} sluice__vk_lead;

/*
 * Ends leads[0..n) (reordering the array): reads each connection's replies
 * as they arrive, so that a slow or stalled node keeps neither the other
 * connections of the set nor the callers queued behind them waiting.
 */
void sluice__vk_conn_lead_end_all(sluice__vk_store *v, sluice__vk_lead *leads,
                                  size_t n);

/* Runs one command on node 'n' through its shared connections ('asking':
   ASKING first, on the same connection), answered by 'deadline_ms'; the
   reply, possibly an error reply, is the caller's. */
int sluice__vk_node_command(sluice__vk_store *v, sluice__vk_node *n,
                            bool asking, uint64_t deadline_ms, int argc,
                            const char **argv, const size_t *lens,
                            redisReply **out);

/* ---- Scripts (scripts.c) ------------------------------------------------------- */

/* SCRIPT LOAD of every script on the open connection 'c', all of them by
   'deadline_ms'. */
int sluice__vk_scripts_load(sluice__vk_store *v, sluice__vk_node *n,
                            sluice__vk_conn *c, uint64_t deadline_ms);
/* True for a NOSCRIPT reply: the server lacks the script. */
bool sluice__vk_noscript(const redisReply *r);
/* Gives node 'n' the script it lacked (SCRIPT LOAD), by 'deadline_ms'. */
int sluice__vk_script_give(sluice__vk_store *v, sluice__vk_node *n,
                           uint64_t deadline_ms, const sluice__script *script);
/*
 * Sends one command to node 'n' (after ASKING when 'asking') and reads its
 * reply, which may be an error reply. For a script (not NULL), argv[1] is
 * set here to its SHA1, and NOSCRIPT loads it and sends it once more.
 */
int sluice__vk_node_send(sluice__vk_store *v, sluice__vk_node *n, bool asking,
                         uint64_t deadline_ms, const sluice__script *script,
                         int argc, const char **argv, const size_t *lens,
                         redisReply **out);

/* ---- The engine (engine.c) ------------------------------------------------------ */

/*
 * What a node's connects found (its 'module'): not asked yet, the module of
 * this library's version, or none (no module, another version, an error);
 * with the module, SLUICE__VK_MODULE_ALGO(a) for each algorithm a it decides.
 */
enum {
    SLUICE__VK_MODULE_UNKNOWN = 0,
    SLUICE__VK_MODULE_YES = 1,
    SLUICE__VK_MODULE_NO = 2
};
#define SLUICE__VK_MODULE_STATE 3u
#define SLUICE__VK_MODULE_ALGO(a) (4u << (a))

/*
 * Asks the new connection 'c' of 'n' for the module (SLUICE.VERSION) and
 * notes the answer on 'n', by 'deadline_ms'; engine=lua asks nothing.
 * Answers 0, a connection's error, or, for engine=module on a server
 * without the module, SLUICE_ENOTSUP.
 */
int sluice__vk_engine_detect(sluice__vk_store *v, sluice__vk_node *n,
                             sluice__vk_conn *c, uint64_t deadline_ms);
/* Notes on 'n' what its SLUICE.VERSION reply 'r' says (the async API's
   connect asks it itself); answers as sluice__vk_engine_detect(). */
int sluice__vk_engine_note(sluice__vk_store *v, sluice__vk_node *n,
                           const redisReply *r);
/* Whether a call of one of the module's own commands (not a decision) to
   node 'n' (NULL: not known yet) is sent to the module rather than to its
   script. */
bool sluice__vk_engine_module(const sluice__vk_store *v, sluice__vk_node *n);
/*
 * Whether a decision of 'algo' on node 'n' (NULL: not known yet) is sent
 * to the module ('*module') rather than to the algorithm's script.
 * Answers 0, or, for engine=module where the node's module does not
 * decide 'algo', SLUICE_ENOTSUP.
 */
int sluice__vk_engine_pick(const sluice__vk_store *v, sluice__vk_node *n,
                           sluice_algo algo, bool *module);

/* What reply 'r' says of the module, and for SLUICE__VK_LACK_ALGO the algorithm
   ('*algo'). It changes nothing. */
sluice__vk_lack sluice__vk_module_lack(const redisReply *r, unsigned *algo);
/* The same, for a reply of node 'n' to a call sent to it: a lack is noted
   on 'n', so the next calls go to the scripts (engine=auto). */
sluice__vk_lack sluice__vk_engine_lost(sluice__vk_node *n, const redisReply *r);
/*
 * The server interface's eval_module: runs 'command', the module's twin of
 * a script, with the script's keys then arguments ('args', as vk_eval()
 * takes them), when node 'n' of args[0] has the module ('*done' set; the
 * reply is the caller's); else leaves '*done' false, for the script.
 */
int sluice__vk_engine_eval(sluice__vk_store *v, const char *command, int argc,
                           const char *const *args, const size_t *arglens,
                           redisReply **out, bool *done);

/* ---- Subscriptions (pubsub.c): the server interface's ------------------------------ */

int sluice__vk_subscribe(void *impl, const char *channel, sluice__sub **out);
int sluice__vk_sub_next(sluice__sub *s, uint64_t wait_ms, char **payload,
                        size_t *len);
void sluice__vk_sub_free(sluice__sub *s);

/* ---- The cluster (cluster.c) ------------------------------------------------------ */

/* The node at host:port, added if new; NULL when out of memory. */
sluice__vk_node *sluice__vk_node_get(sluice__vk_store *v, const char *host,
                                     size_t host_len, int port);
/* The node serving 'slot' (a single server's one node; a sentinel store's
   master, asked for by 'deadline_ms'), or NULL. */
sluice__vk_node *sluice__vk_node_for_slot(sluice__vk_store *v, unsigned slot,
                                  uint64_t deadline_ms);
/* Rereads the map if it is stale (or when 'force'); at most one reread per
   REFRESH_GAP_MS. */
int sluice__vk_map_refresh(sluice__vk_store *v, bool force);
/* Whether a node whose last failed call was noted at 'failed_ms' (0: none)
   counts, at 'now_ms', as having failed lately (FAILED_FOR_MS). */
bool sluice__vk_failed_recently(uint64_t failed_ms, uint64_t now_ms);
/* Notes that a call to 'n' found no answer ('err' SLUICE_ECONN or
   SLUICE_ETIMEDOUT), or that 'n' answered (0). */
void sluice__vk_node_noted(sluice__vk_store *v, sluice__vk_node *n, int err);

/*
 * The route of one call: its slot, the sends made, and where the next one
 * goes when a redirection said so.
 */
typedef struct sluice__vk_route {
    unsigned slot;
    int sends;
    sluice__vk_node *ask;         /* the next send goes here, after ASKING */
    long tryagain_ms;     /* the next pause after TRYAGAIN */
    uint64_t started_ms;  /* monotonic */
    uint64_t deadline_ms; /* the call is answered by then, or fails */
} sluice__vk_route;

/* The node that serves the route's slot: a sentinel store's master, asked
   for; in a cluster, the map's, reread if it names none. */
int sluice__vk_route_node(sluice__vk_store *v, const sluice__vk_route *rt,
                          sluice__vk_node **out);
/* A route for a call to 'slot' that must be answered by 'deadline_ms'. */
void sluice__vk_route_init(sluice__vk_route *rt, unsigned slot,
                           uint64_t deadline_ms);
/*
 * Follows the error reply 'r' that a send on 'rt' got: MOVED mends the map,
 * ASK sends the next one to its node, TRYAGAIN pauses. Answers 1 when the
 * call should be sent again, 0 when 'r' is its answer (no redirection), or
 * an error when it may not be: SLUICE_ECONFIG after too many sends (a
 * redirect loop), SLUICE_ECONN when mid-move for too long, SLUICE_EPROTO
 * for a redirection that does not parse.
 */
int sluice__vk_follow(sluice__vk_store *v, sluice__vk_route *rt,
                      const redisReply *r);
/*
 * Runs a command on the node that serves its route, following the
 * cluster's redirections. For a script (not NULL), argv[1] is its SHA1.
 * Error replies become error codes (a module gone, or an algorithm of it,
 * is noted on the node: sluice__vk_engine_lost()); the reply is the
 * caller's.
 */
int sluice__vk_call_routed(sluice__vk_store *v, sluice__vk_route *rt,
                           const sluice__script *script, int argc,
                           const char **argv, const size_t *lens,
                           redisReply **out);
/* The same for the route of the key 'key' (its first key). */
int sluice__vk_call(sluice__vk_store *v, const char *key, size_t key_len,
                    const sluice__script *script, int argc, const char **argv,
                    const size_t *lens, redisReply **out);

/* ---- Decisions (decide_*.c, combine.c) -------------------------------------------- */

/* An error's message, kept for a request decided on another thread. */
typedef char sluice__vk_msg[256];

struct sluice__slot_call;

/*
 * Script calls queued together, then awaited in turn (a call set). Every
 * call of a set that goes to one node is queued on the same connection, so
 * the calls of a batch, or of a combining round with several limits, leave
 * in one write per node and cost about a round trip per node.
 */
typedef struct sluice__vk_calls {
    sluice__vk_store *v;
    sluice_request *reqs;
    sluice__vk_msg *msgs; /* NULL, or a failed request's message by place */
    uint64_t deadline_ms; /* every call of the set is answered by then */
    struct sluice__slot_call *head,
        **tail; /* each call stays put: it may be queued */
} sluice__vk_calls;

#define SLUICE__VK_CALLS_INIT(v, reqs, msgs, deadline) \
    {(v), (reqs), (msgs), (deadline), NULL, NULL}

/*
 * Adds the calls for requests reqs[send[0..m)] against one limit: at most
 * SLUICE__VK_GROUP_MAX (decide.h) to a call; in a cluster, one call per slot
 * among their keys
 * ('send' is reordered by slot). Answers an error only when none could be
 * added.
 */
int sluice__vk_calls_add(sluice__vk_calls *cs, const sluice_limit *limit,
                         bool consume, size_t *send, size_t m);
/* Sends every call of 'cs', reads their replies, sends again those that
   did not run (a redirection, NOSCRIPT, a module that lost the algorithm),
   until each request is answered, and frees the set. */
void sluice__vk_calls_finish(sluice__vk_calls *cs);

/*
 * Reads request 'i's four integers from a decision script's flat reply (a
 * reply of 4 x its requests' integers) into 'out', checked against what
 * every algorithm answers for 'cost' under 'limit' (SLUICE_EPROTO if not);
 * '*foreign' when the key held something else (-1).
 */
int sluice__vk_reply_decision(const redisReply *r, size_t i,
                              const sluice_limit *limit, uint64_t cost,
                              sluice_decision *out, bool *foreign);

/* sluice_hit_all() on a server (hit_all.c). */
int sluice__vk_decide_all(void *impl, const sluice_limit *limits, size_t n,
                          const char *key, size_t key_len, uint64_t cost,
                          sluice__all how, sluice_decision *each);

/* The store's decisions: one (a cluster's), a batch, or combined with
   other threads' (one server's); each a call set (decide_calls.c). */
int sluice__vk_decide(void *impl, const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t cost, bool consume,
                      sluice_decision *out);
int sluice__vk_decide_many(void *impl, const sluice_limit *limit,
                           sluice_request *reqs, const size_t *todo,
                           size_t n);
int sluice__vk_decide_combined(void *impl, const sluice_limit *limit,
                               const char *key, size_t key_len, uint64_t cost,
                               bool consume, sluice_decision *out);

#endif /* SLUICE_VALKEY_H */
