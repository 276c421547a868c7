/*
 * store_valkey.c - the Valkey/Redis stores: one server ("valkey://",
 * "redis://") or a cluster ("valkey+cluster://", "redis+cluster://").
 *
 * The budget lives on the server, so every process and machine that uses
 * the same server and key prefix shares it. Each algorithm is one Lua script
 * (src/lua/), run with EVALSHA, so a decision is atomic and at most one
 * round trip.
 *
 * Keys. A limit of algorithm A on id I is one key:
 *
 *     PREFIX ":{" enc(I) "}:" A          e.g.  sluice:{user42}:fixed
 *
 * and a queue Q's limiter keys are EMQ ":{" enc(Q) "}:limiter" and ":meta".
 * enc() writes '%', '{', '}' and every byte outside printable ASCII as %XX,
 * and the empty id as a lone "%". It is one-to-one, and its output holds no
 * brace, so the text between the braces is always the whole hashtag: one id's
 * keys share one cluster slot, and no id can reach another id's keys.
 * Ordinary names (letters, digits, ':', '-', '_', '.') are written as they
 * are, which keeps EchoMQ's own key names.
 *
 * Nodes and connections. A node is one server and a pool of 'pool_size'
 * hiredis connections to it, each behind a mutex; a call takes a free one (or
 * waits for one), so any number of threads may share a store. A connection
 * that failed is closed and opened again on its next use. Before each use a
 * connection is checked for a close by the server (a restart), so a request
 * is never written into a dead socket. One server is one node; a cluster is
 * as many nodes as it has masters, found from its seeds.
 *
 * The cluster's map. Each of the 16384 slots names the node that serves it,
 * learnt from CLUSTER SLOTS. A call goes to its key's slot's node:
 *
 *   MOVED slot host:port   the slot has moved for good: the map is mended
 *                          for that slot at once, reread in full on the next
 *                          call, and the call is sent again;
 *   ASK slot host:port     the slot is being moved: this one call is sent
 *                          again to that node, after ASKING;
 *   TRYAGAIN               keys of the slot are mid-move: again shortly;
 *   no answer              the node may be down: the error goes back to the
 *                          caller (within the timeout), and the next call
 *                          rereads the map, so once the cluster has promoted
 *                          a replica, calls reach it.
 *
 * At most MAX_HOPS sends per call; then a clear error. Map rereads are at
 * most one per REFRESH_GAP_MS.
 *
 * Scripts. Their SHA1s are learnt from SCRIPT LOAD on the first connection;
 * a NOSCRIPT reply (a restarted server, another cluster node, SCRIPT FLUSH)
 * loads the script again on that connection and retries once.
 *
 * Batches and combining. A decision script decides any number of keys in
 * one call (src/lua/fixed.lua tells the arguments), and most of a call's
 * cost on the server is the call itself, not the commands it runs. So
 * sluice_hit_many() sends a batch as one call (per slot, in a cluster), and
 * on one server, threads calling sluice_hit() at once are combined: a
 * decision that arrives while others are with the server joins a queue, and
 * the next free caller (at most pool_size at a time) takes the whole queue
 * and decides it as one call per distinct limit (vk_decide_combined).
 * Either way each key's decision stays atomic and in its caller's order.
 */
#include "sluice_private.h"

#include <hiredis/hiredis.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SCRIPT_EMQ_TTL SLUICE__SCRIPT_EMQ_TTL
#define SCRIPT_EMQ_INCR SLUICE__SCRIPT_EMQ_INCR
#define SCRIPT_COUNT SLUICE__SCRIPT_COUNT

#define DEFAULT_PORT 6379
#define DEFAULT_CONNECT_TIMEOUT_MS 1000
#define DEFAULT_COMMAND_TIMEOUT_MS 500
#define DEFAULT_POOL 4
#define MAX_POOL 1024
#define MAX_SEEDS 64
#define MAX_HOPS 5
#define REFRESH_GAP_MS 100
#define FAILED_FOR_MS 5000
#define REFUSALS_CAP 65536 /* keys remembered as refused, per store */
#define KEY_BUF 256

/*
 * One request waiting on a connection: one formatted command, or two
 * (ASKING and the command) whose last reply is the answer. It lives on the
 * caller's stack; the leader fills 'reply' or 'err' and 'msg', then 'done'.
 */
typedef struct vk_request {
    struct vk_request *next;
    const char *cmd;
    size_t len;
    int ncmds;
    redisReply *reply;
    int err;
    char msg[256];
    bool done;
    pthread_cond_t cond;   /* its caller waits here: done, or to lead */
} vk_request;

/*
 * A connection, shared by every caller that is dealt it. Callers queue
 * their requests; whoever finds no I/O in progress becomes the leader,
 * writes every queued request at once, reads their replies in order and
 * hands them out (automatic pipelining). So many threads share few
 * connections, and no caller waits longer than the batch in flight plus
 * its own round trip.
 */
typedef struct vk_conn {
    pthread_mutex_t lock;  /* guards the queue, 'busy' and 'done' flags */
    bool busy;             /* a leader is doing I/O */
    vk_request *head, **tail;
    redisContext *ctx;     /* NULL until connected; only the leader uses it */
} vk_conn;

/* One server. Nodes are added, never removed before the store is freed, so
   a pointer to one stays valid without a lock. */
typedef struct vk_node {
    char *host;
    int port;
    _Atomic uint64_t failed_ms; /* when a call to it last failed; 0: fine */
    _Atomic unsigned next_conn;
    unsigned nconns;
    vk_conn conns[];
} vk_node;

typedef struct vk_store {
    char *user;
    char *password;
    long db;
    char *prefix;
    char *emq_prefix;
    uint64_t connect_timeout_ms;
    uint64_t command_timeout_ms;
    unsigned pool_size;
    int caller_clock;
    int on_error;
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;

    pthread_mutex_t sha_lock;
    _Atomic int shas_known;

    /* Combining (see vk_decide_combined): decisions waiting for a round. */
    pthread_mutex_t combine_lock;
    struct vk_waiter *waiting, **waiting_tail;
    unsigned combining; /* callers deciding a round now, <= pool_size */
    char sha[SCRIPT_COUNT][41];

    /* One node (a single server), or a cluster's nodes and map. */
    bool cluster;
    pthread_rwlock_t map_lock; /* guards nodes[] and slots[] */
    vk_node **nodes;
    size_t nnodes, nodes_cap;
    int32_t slots[SLUICE__SLOTS]; /* index into nodes[]; -1 unknown */
    pthread_mutex_t refresh_lock;
    _Atomic int map_stale;
    uint64_t last_refresh_ms;     /* monotonic; under refresh_lock */

    sluice__refusals *refusals; /* NULL when off */
    unsigned refusal_algos;     /* bit (1 << algo): cached for it */

    uint64_t token_seed;
    _Atomic uint64_t token_next;
    _Atomic uint64_t errors, fell_open, fell_closed, redirects;
} vk_store;

static const char *script_text(int id)
{
    static const char *const others[] = {
        [SLUICE__SCRIPT_EMQ_TTL - SLUICE__ALGO_N] = sluice__lua_emq_ttl,
        [SLUICE__SCRIPT_EMQ_INCR - SLUICE__ALGO_N] = sluice__lua_emq_incr,
        [SLUICE__SCRIPT_QUEUE_ADD - SLUICE__ALGO_N] = sluice__lua_queue_add,
        [SLUICE__SCRIPT_QUEUE_TAKE - SLUICE__ALGO_N] = sluice__lua_queue_take,
        [SLUICE__SCRIPT_QUEUE_DONE - SLUICE__ALGO_N] = sluice__lua_queue_done,
        [SLUICE__SCRIPT_QUEUE_ADMIN - SLUICE__ALGO_N] =
            sluice__lua_queue_admin,
    };

    if (id < SLUICE__ALGO_N)
        return sluice__algos[id]->lua;
    return others[id - SLUICE__ALGO_N];
}

static uint64_t monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- Key names ------------------------------------------------------------- */

/* Bytes written as they are; everything else is %XX. */
static int plain_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '%' && c != '{' && c != '}';
}

/* The key of 'id' (see the top of this file and sluice_private.h). */
char *sluice__key_build(char *buf, size_t cap, size_t *len, const char *prefix,
                        const char *id, size_t id_len, const char *suffix)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t plen = strlen(prefix), slen = strlen(suffix);
    size_t need = plen + 2 + (id_len == 0 ? 1 : 3 * id_len) + 2 + slen;
    char *out = buf, *p;

    if (need > cap && (out = malloc(need)) == NULL)
        return NULL;
    p = out;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    *p++ = '{';
    if (id_len == 0)
        *p++ = '%';
    for (size_t i = 0; i < id_len; i++) {
        unsigned char c = (unsigned char)id[i];

        if (plain_byte(c)) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p++ = '}';
    *p++ = ':';
    memcpy(p, suffix, slen);
    p += slen;
    *len = (size_t)(p - out);
    return out;
}

/* ---- Connections ------------------------------------------------------------ */

static struct timeval ms_to_tv(uint64_t ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return tv;
}

static void conn_close(vk_conn *c)
{
    if (c->ctx != NULL) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
}

/*
 * Turns a failed hiredis call on 'c' into an error code: SLUICE_ETIMEDOUT
 * when the server did not answer in time, SLUICE_ECONN when it could not be
 * reached or the connection broke. The connection is closed either way.
 */
static int conn_fail(vk_node *n, vk_conn *c, const char *doing)
{
    int saved = errno;
    const char *why = c->ctx != NULL ? c->ctx->errstr : "cannot allocate";
    int timed_out = saved == EAGAIN || saved == EWOULDBLOCK ||
                    saved == ETIMEDOUT || strstr(why, "timed out") != NULL ||
                    strstr(why, "temporarily unavailable") != NULL;
    int err = sluice__error(timed_out ? SLUICE_ETIMEDOUT : SLUICE_ECONN,
                            "valkey %s:%d: %s: %s", n->host, n->port, doing,
                            timed_out ? "timed out" : why);

    conn_close(c);
    return err;
}

/*
 * Maps an error reply. Replies that mean "not now" (a server loading its
 * data, busy with a script, a replica without its master, a cluster that is
 * down or mid-move) count as the server being unavailable, like a broken
 * connection; any other is a protocol error that no policy should paper over.
 */
static int reply_error(vk_node *n, const redisReply *r, const char *doing)
{
    static const char *const unavailable[] = {
        "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "MOVED",
        "ASK"};

    for (size_t i = 0; i < sizeof(unavailable) / sizeof(unavailable[0]); i++)
        if (strncmp(r->str, unavailable[i], strlen(unavailable[i])) == 0)
            return sluice__error(SLUICE_ECONN, "valkey %s:%d: %s: %s", n->host,
                                 n->port, doing, r->str);
    return sluice__error(SLUICE_EPROTO, "valkey %s:%d: %s: %s", n->host,
                         n->port, doing, r->str);
}

/* Runs one command on an open connection; the reply is the caller's. */
static int conn_command(vk_node *n, vk_conn *c, redisReply **out,
                        const char *doing, int argc, const char **argv,
                        const size_t *lens)
{
    redisReply *r = redisCommandArgv(c->ctx, argc, argv, lens);

    if (r == NULL)
        return conn_fail(n, c, doing);
    if (r->type == REDIS_REPLY_ERROR) {
        int err = reply_error(n, r, doing);

        freeReplyObject(r);
        return err;
    }
    *out = r;
    return SLUICE_OK;
}

/* SCRIPT LOAD of script 'id' on 'c'; records its SHA1. */
static int conn_load_script(vk_store *v, vk_node *n, vk_conn *c, int id)
{
    const char *argv[] = {"SCRIPT", "LOAD", script_text(id)};
    size_t lens[] = {6, 4, strlen(script_text(id))};
    redisReply *r = NULL;
    int err = conn_command(n, c, &r, "SCRIPT LOAD", 3, argv, lens);

    if (err < 0)
        return err;
    if (r->type != REDIS_REPLY_STRING || r->len != 40) {
        freeReplyObject(r);
        return sluice__error(SLUICE_EPROTO,
                             "valkey %s:%d: SCRIPT LOAD did not answer a SHA1",
                             n->host, n->port);
    }
    pthread_mutex_lock(&v->sha_lock);
    memcpy(v->sha[id], r->str, 40);
    v->sha[id][40] = '\0';
    pthread_mutex_unlock(&v->sha_lock);
    freeReplyObject(r);
    return SLUICE_OK;
}

/* True when the server has closed 'c' (or sent what nobody asked for). */
static int conn_stale(vk_conn *c)
{
    struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};
    char byte;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    return recv(c->ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
           (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Opens 'c' if it is closed: connect, AUTH, SELECT, timeouts, scripts. */
static int conn_ready(vk_store *v, vk_node *n, vk_conn *c)
{
    struct timeval tv = ms_to_tv(v->connect_timeout_ms);
    redisReply *r = NULL;
    char dbtext[24];
    int err;

    if (c->ctx != NULL && !conn_stale(c))
        return SLUICE_OK;
    conn_close(c);
    c->ctx = redisConnectWithTimeout(n->host, n->port, tv);
    if (c->ctx == NULL || c->ctx->err)
        return conn_fail(n, c, "connect");
    tv = ms_to_tv(v->command_timeout_ms);
    if (redisSetTimeout(c->ctx, tv) != REDIS_OK)
        return conn_fail(n, c, "set timeout");
    redisEnableKeepAlive(c->ctx);
    if (v->password != NULL) {
        const char *argv[] = {"AUTH", v->user, v->password};
        size_t lens[] = {4, v->user ? strlen(v->user) : 0, strlen(v->password)};
        int argc = v->user != NULL ? 3 : 2;

        if (v->user == NULL) {
            argv[1] = v->password;
            lens[1] = lens[2];
        }
        if ((err = conn_command(n, c, &r, "AUTH", argc, argv, lens)) < 0)
            goto fail;
        freeReplyObject(r);
    }
    if (v->db != 0) {
        const char *argv[] = {"SELECT", dbtext};
        size_t lens[2] = {6, 0};

        lens[1] = (size_t)snprintf(dbtext, sizeof(dbtext), "%ld", v->db);
        if ((err = conn_command(n, c, &r, "SELECT", 2, argv, lens)) < 0)
            goto fail;
        freeReplyObject(r);
    }
    if (!atomic_load(&v->shas_known)) {
        for (int id = 0; id < SCRIPT_COUNT; id++)
            if ((err = conn_load_script(v, n, c, id)) < 0)
                goto fail;
        atomic_store(&v->shas_known, 1);
    }
    return SLUICE_OK;
fail:
    conn_close(c); /* a refused AUTH or SELECT must not leave it half-open */
    return err;
}

/* ---- Nodes ------------------------------------------------------------------ */

static vk_node *node_new(const char *host, size_t host_len, int port,
                         unsigned nconns)
{
    vk_node *n = calloc(1, sizeof(*n) + nconns * sizeof(vk_conn));

    if (n == NULL || (n->host = malloc(host_len + 1)) == NULL) {
        free(n);
        return NULL;
    }
    memcpy(n->host, host, host_len);
    n->host[host_len] = '\0';
    n->port = port;
    n->nconns = nconns;
    for (unsigned i = 0; i < nconns; i++) {
        pthread_mutex_init(&n->conns[i].lock, NULL);
        n->conns[i].tail = &n->conns[i].head;
    }
    return n;
}

static void node_free(vk_node *n)
{
    for (unsigned i = 0; i < n->nconns; i++) {
        conn_close(&n->conns[i]);
        pthread_mutex_destroy(&n->conns[i].lock);
    }
    free(n->host);
    free(n);
}

/* The connection of 'n' that this call is dealt, in turn. */
static vk_conn *node_pick(vk_node *n)
{
    return &n->conns[atomic_fetch_add(&n->next_conn, 1) % n->nconns];
}

/* Fails request 'e' with the calling thread's last error. */
static void request_fail(vk_request *e, int err)
{
    e->err = err;
    snprintf(e->msg, sizeof(e->msg), "%s", sluice_last_error());
}

/*
 * The leader's writes for a batch: connect if need be, then send every
 * request. Answers 0, or the error that failed every request of the batch.
 */
static int batch_write(vk_store *v, vk_node *n, vk_conn *c, vk_request *batch)
{
    int err = conn_ready(v, n, c), done = 0;

    for (vk_request *e = batch; e != NULL && err == 0; e = e->next)
        if (redisAppendFormattedCommand(c->ctx, e->cmd, e->len) != REDIS_OK)
            err = conn_fail(n, c, "write");
    while (err == 0 && !done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK)
            err = conn_fail(n, c, "write");
    for (vk_request *e = batch; e != NULL && err < 0; e = e->next)
        request_fail(e, err);
    return err;
}

/*
 * The leader's reads for a batch that batch_write() sent ('err' its answer):
 * every reply, in order. A broken connection fails the rest of the batch.
 */
static void batch_read(vk_node *n, vk_conn *c, vk_request *batch, int err)
{
    for (vk_request *e = batch; e != NULL && err == 0; e = e->next) {
        for (int k = 0; k < e->ncmds; k++) {
            redisReply *r = NULL;

            if (redisGetReply(c->ctx, (void **)&r) != REDIS_OK || r == NULL) {
                err = conn_fail(n, c, "read");
                for (vk_request *f = e; f != NULL; f = f->next)
                    request_fail(f, err);
                break;
            }
            if (k + 1 < e->ncmds)
                freeReplyObject(r); /* ASKING's +OK */
            else
                e->reply = r;
        }
    }
}

/*
 * Takes the queue of 'c' to lead its I/O, unless another caller leads it or
 * nothing is queued (then NULL). Under c->lock.
 */
static vk_request *conn_take(vk_conn *c)
{
    vk_request *batch = c->head;

    if (c->busy || batch == NULL)
        return NULL;
    c->busy = true;
    c->head = NULL;
    c->tail = &c->head;
    return batch;
}

/* Ends a lead: marks the batch done, wakes its callers (not 'self') and the
   next leader. Under c->lock. */
static void conn_hand_out(vk_conn *c, vk_request *batch, const vk_request *self)
{
    while (batch != NULL) {
        vk_request *next = batch->next; /* before 'done' frees it */

        batch->done = true;
        if (batch != self)
            pthread_cond_signal(&batch->cond);
        batch = next;
    }
    c->busy = false;
    if (c->head != NULL) /* the first queued caller leads the next */
        pthread_cond_signal(&c->head->cond);
}

/* Queues request 'e' on 'c'; conn_await() sends it and waits for it. */
static void conn_submit(vk_conn *c, vk_request *e)
{
    e->next = NULL;
    e->reply = NULL;
    e->err = 0;
    e->done = false;
    pthread_cond_init(&e->cond, NULL);
    pthread_mutex_lock(&c->lock);
    *c->tail = e;
    c->tail = &e->next;
    pthread_mutex_unlock(&c->lock);
}

/*
 * Waits for the reply of request 'e', queued on 'c', leading the I/O of a
 * batch when no other caller is. Answers 0 with e->reply (which may be an
 * error reply), or an error code with its message set for this thread.
 */
static int conn_await(vk_store *v, vk_node *n, vk_conn *c, vk_request *e)
{
    pthread_mutex_lock(&c->lock);
    while (!e->done) {
        vk_request *batch = conn_take(c);

        if (batch == NULL) { /* another caller leads; 'e' is still queued */
            pthread_cond_wait(&e->cond, &c->lock);
            continue;
        }
        pthread_mutex_unlock(&c->lock);
        batch_read(n, c, batch, batch_write(v, n, c, batch));
        pthread_mutex_lock(&c->lock);
        conn_hand_out(c, batch, e);
    }
    pthread_mutex_unlock(&c->lock);
    pthread_cond_destroy(&e->cond);
    if (e->err < 0)
        return sluice__error(e->err, "%s", e->msg);
    return SLUICE_OK;
}

/* Sends request 'e' on 'c' and waits for its reply (see conn_await). */
static int conn_roundtrip(vk_store *v, vk_node *n, vk_conn *c, vk_request *e)
{
    conn_submit(c, e);
    return conn_await(v, n, c, e);
}

/*
 * Runs one command on node 'n' through its shared connections; the reply
 * (possibly an error reply) is the caller's. 'asking' sends ASKING first,
 * on the same connection, as one request.
 */
static int node_command(vk_store *v, vk_node *n, bool asking, int argc,
                        const char **argv, const size_t *lens,
                        redisReply **out)
{
    static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
    vk_request e;
    char *cmd = NULL, *both = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    int err;

    if (len < 0)
        return sluice__error(SLUICE_ENOMEM, "cannot format a command");
    e.cmd = cmd;
    e.len = (size_t)len;
    e.ncmds = 1;
    if (asking) {
        size_t alen = sizeof(asking_cmd) - 1;

        if ((both = malloc(alen + (size_t)len)) == NULL) {
            redisFreeCommand(cmd);
            return sluice__error(SLUICE_ENOMEM, "cannot format a command");
        }
        memcpy(both, asking_cmd, alen);
        memcpy(both + alen, cmd, (size_t)len);
        e.cmd = both;
        e.len = alen + (size_t)len;
        e.ncmds = 2;
    }
    err = conn_roundtrip(v, n, node_pick(n), &e);
    free(both);
    redisFreeCommand(cmd);
    if (err == 0)
        *out = e.reply;
    return err;
}

/*
 * The index of the node at host:port, added if new. Called with the map's
 * write lock held. -1 when out of memory.
 */
static int node_index_locked(vk_store *v, const char *host, size_t host_len,
                             int port)
{
    vk_node *n;

    for (size_t i = 0; i < v->nnodes; i++)
        if (v->nodes[i]->port == port && strlen(v->nodes[i]->host) == host_len &&
            memcmp(v->nodes[i]->host, host, host_len) == 0)
            return (int)i;
    if (v->nnodes == v->nodes_cap) {
        size_t cap = v->nodes_cap ? 2 * v->nodes_cap : 8;
        vk_node **nodes = realloc(v->nodes, cap * sizeof(*nodes));

        if (nodes == NULL)
            return -1;
        v->nodes = nodes;
        v->nodes_cap = cap;
    }
    if ((n = node_new(host, host_len, port, v->pool_size)) == NULL)
        return -1;
    v->nodes[v->nnodes] = n;
    return (int)v->nnodes++;
}

/* The node at host:port, added if new; NULL when out of memory. */
static vk_node *node_get(vk_store *v, const char *host, size_t host_len,
                         int port)
{
    vk_node *n = NULL;
    int i;

    pthread_rwlock_wrlock(&v->map_lock);
    if ((i = node_index_locked(v, host, host_len, port)) >= 0)
        n = v->nodes[i];
    pthread_rwlock_unlock(&v->map_lock);
    return n;
}

/* ---- The cluster's map ------------------------------------------------------- */

/* The node serving 'slot' (a single server's one node), or NULL if unknown. */
static vk_node *node_for_slot(vk_store *v, unsigned slot)
{
    vk_node *n = NULL;

    if (!v->cluster)
        return v->nodes[0];
    pthread_rwlock_rdlock(&v->map_lock);
    if (v->slots[slot] >= 0)
        n = v->nodes[v->slots[slot]];
    pthread_rwlock_unlock(&v->map_lock);
    return n;
}

/* Splits "host:port" (the port after the last ':'); -1 if malformed. */
static int split_endpoint(const char *s, size_t len, size_t *host_len,
                          int *port)
{
    const char *colon = NULL;
    long p = 0;

    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (colon == NULL || colon == s || colon + 1 == s + len)
        return -1;
    for (const char *d = colon + 1; d < s + len; d++) {
        if (*d < '0' || *d > '9' || p > 65535)
            return -1;
        p = p * 10 + (*d - '0');
    }
    if (p < 1 || p > 65535)
        return -1;
    *host_len = (size_t)(colon - s);
    *port = (int)p;
    return 0;
}

/*
 * Reads CLUSTER SLOTS from node 'n' into the map. A master's host may be
 * answered empty, meaning the host we asked.
 */
static int map_read_from(vk_store *v, vk_node *n)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    size_t lens[] = {7, 5};
    redisReply *r = NULL;
    int32_t *slots;
    int err;

    if ((err = node_command(v, n, false, 2, argv, lens, &r)) < 0)
        return err;
    if (r->type == REDIS_REPLY_ERROR) {
        err = reply_error(n, r, "CLUSTER SLOTS");
        freeReplyObject(r);
        return err;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        freeReplyObject(r);
        return sluice__error(SLUICE_ECONN, "valkey %s:%d: CLUSTER SLOTS "
                             "answered no slots", n->host, n->port);
    }
    if ((slots = malloc(sizeof(v->slots))) == NULL) {
        freeReplyObject(r);
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    }
    for (unsigned s = 0; s < SLUICE__SLOTS; s++)
        slots[s] = -1;
    pthread_rwlock_wrlock(&v->map_lock);
    for (size_t i = 0; i < r->elements && err == 0; i++) {
        const redisReply *range = r->element[i], *master;
        const char *host;
        size_t host_len;
        int idx;

        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY ||
            range->element[2]->elements < 2 ||
            range->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            range->element[2]->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->element[1]->integer < 1 ||
            range->element[2]->element[1]->integer > 65535 ||
            range->element[0]->integer < 0 ||
            range->element[1]->integer >= (long long)SLUICE__SLOTS ||
            range->element[0]->integer > range->element[1]->integer) {
            err = sluice__error(SLUICE_EPROTO, "valkey %s:%d: CLUSTER SLOTS "
                                "answered a malformed range", n->host, n->port);
            break;
        }
        master = range->element[2];
        host = master->element[0]->str;
        host_len = master->element[0]->len;
        if (host_len == 0 || (host_len == 1 && host[0] == '?')) {
            host = n->host;
            host_len = strlen(n->host);
        }
        idx = node_index_locked(v, host, host_len,
                                (int)master->element[1]->integer);
        if (idx < 0) {
            err = sluice__error(SLUICE_ENOMEM, "out of memory");
            break;
        }
        for (long long s = range->element[0]->integer;
             s <= range->element[1]->integer; s++)
            slots[s] = idx;
    }
    if (err == 0)
        memcpy(v->slots, slots, sizeof(v->slots));
    pthread_rwlock_unlock(&v->map_lock);
    free(slots);
    freeReplyObject(r);
    return err;
}

/*
 * Rereads the map from the first node that answers: the known nodes, seeds
 * first. With 'force' 0, only if it was marked stale and the last reread is
 * REFRESH_GAP_MS old. Calls that wait for a reread in progress then use it.
 */
static int map_refresh(vk_store *v, bool force)
{
    uint64_t now = monotonic_ms();
    int err = SLUICE_OK;
    size_t n;

    if (!force && !atomic_load(&v->map_stale))
        return SLUICE_OK;
    pthread_mutex_lock(&v->refresh_lock);
    if (!force && (!atomic_load(&v->map_stale) ||
                   now - v->last_refresh_ms < REFRESH_GAP_MS)) {
        pthread_mutex_unlock(&v->refresh_lock);
        return SLUICE_OK;
    }
    pthread_rwlock_rdlock(&v->map_lock);
    n = v->nnodes;
    pthread_rwlock_unlock(&v->map_lock);
    err = sluice__error(SLUICE_ECONN, "cluster: no node to ask for the map");
    /* Nodes that just failed a call are asked last: one that hangs would
       cost a whole timeout, on every reread, for every slot's callers. */
    for (int pass = 0; pass < 2 && err != 0; pass++)
        for (size_t i = 0; i < n; i++) {
            vk_node *node;
            uint64_t failed;

            pthread_rwlock_rdlock(&v->map_lock);
            node = v->nodes[i];
            pthread_rwlock_unlock(&v->map_lock);
            failed = atomic_load(&node->failed_ms);
            if ((pass == 0) != (failed == 0 || now - failed > FAILED_FOR_MS))
                continue;
            if ((err = map_read_from(v, node)) == 0) {
                atomic_store(&node->failed_ms, 0);
                break;
            }
        }
    v->last_refresh_ms = monotonic_ms();
    if (err == 0)
        atomic_store(&v->map_stale, 0);
    pthread_mutex_unlock(&v->refresh_lock);
    return err;
}

/* After MOVED: 'slot' is served by host:port from now on. */
static void map_moved(vk_store *v, unsigned slot, const char *host,
                      size_t host_len, int port)
{
    int idx;

    pthread_rwlock_wrlock(&v->map_lock);
    if ((idx = node_index_locked(v, host, host_len, port)) >= 0)
        v->slots[slot] = idx;
    pthread_rwlock_unlock(&v->map_lock);
    atomic_store(&v->map_stale, 1);
}

/* ---- Calls ------------------------------------------------------------------- */

/*
 * Sends one command to node 'n' (after ASKING when 'asking') and reads its
 * reply, which may be an error reply. For a script ('script' >= 0), argv[1]
 * is set here to its SHA1, and NOSCRIPT loads it and sends it once more.
 */
static int node_send(vk_store *v, vk_node *n, bool asking, int script,
                     int argc, const char **argv, const size_t *lens,
                     redisReply **out)
{
    redisReply *r = NULL;
    char sha[41];
    int err;

    for (int attempt = 0;; attempt++) {
        if (script >= 0) {
            pthread_mutex_lock(&v->sha_lock);
            memcpy(sha, v->sha[script], sizeof(sha));
            pthread_mutex_unlock(&v->sha_lock);
            if (sha[0] == '\0') /* not learnt yet: learn it now */
                memcpy(sha, "0000000000000000000000000000000000000000", 41);
            argv[1] = sha;
        }
        if ((err = node_command(v, n, asking, argc, argv, lens, &r)) < 0)
            return err;
        if (script < 0 || attempt > 0 || r->type != REDIS_REPLY_ERROR ||
            strncmp(r->str, "NOSCRIPT", 8) != 0)
            break;
        freeReplyObject(r);
        r = NULL;
        {
            const char *load[] = {"SCRIPT", "LOAD", script_text(script)};
            size_t load_lens[] = {6, 4, strlen(script_text(script))};

            if ((err = node_command(v, n, false, 3, load, load_lens, &r)) < 0)
                return err;
            if (r->type != REDIS_REPLY_STRING || r->len != 40) {
                err = r->type == REDIS_REPLY_ERROR
                          ? reply_error(n, r, "SCRIPT LOAD")
                          : sluice__error(SLUICE_EPROTO, "valkey %s:%d: "
                                          "SCRIPT LOAD did not answer a SHA1",
                                          n->host, n->port);
                freeReplyObject(r);
                return err;
            }
            pthread_mutex_lock(&v->sha_lock);
            memcpy(v->sha[script], r->str, 40);
            v->sha[script][40] = '\0';
            pthread_mutex_unlock(&v->sha_lock);
            freeReplyObject(r);
            r = NULL;
        }
    }
    *out = r;
    return SLUICE_OK;
}

/*
 * Parses "MOVED 3999 127.0.0.1:6381" or "ASK ..." into the endpoint; -1 if
 * it is neither.
 */
static int parse_redirect(const redisReply *r, bool *ask, const char **host,
                          size_t *host_len, int *port)
{
    const char *s = r->str, *end = r->str + r->len, *sp;

    if (r->len > 6 && strncmp(s, "MOVED ", 6) == 0) {
        *ask = false;
        s += 6;
    } else if (r->len > 4 && strncmp(s, "ASK ", 4) == 0) {
        *ask = true;
        s += 4;
    } else {
        return -1;
    }
    sp = memchr(s, ' ', (size_t)(end - s));
    if (sp == NULL)
        return -1;
    *host = sp + 1;
    return split_endpoint(sp + 1, (size_t)(end - sp - 1), host_len, port);
}

/*
 * Runs a command whose first key is 'key' on the node that serves it,
 * following the cluster's redirections (see the top of this file). For a
 * script, 'script' is its id and argv[1] is filled with its SHA1; else -1.
 * Error replies become error codes; the reply is the caller's.
 */
static int vk_call(vk_store *v, const char *key, size_t key_len, int script,
                   int argc, const char **argv, const size_t *lens,
                   redisReply **out)
{
    unsigned slot = v->cluster ? sluice__key_slot(key, key_len) : 0;
    uint64_t started_ms = monotonic_ms();
    long tryagain_ms = 2;
    vk_node *n, *ask = NULL;
    int err;

    if (v->cluster)
        map_refresh(v, false); /* a failed reread leaves the old map */
    for (int hop = 0; hop < MAX_HOPS; hop++) {
        redisReply *r = NULL;
        bool is_ask;
        const char *host;
        size_t host_len;
        int port;

        n = ask != NULL ? ask : node_for_slot(v, slot);
        if (n == NULL) {
            if ((err = map_refresh(v, true)) < 0)
                return err;
            if ((n = node_for_slot(v, slot)) == NULL)
                return sluice__error(SLUICE_ECONN, "cluster: no node serves "
                                     "slot %u", slot);
        }
        err = node_send(v, n, ask != NULL, script, argc, argv, lens, &r);
        ask = NULL;
        if (err < 0) {
            if (v->cluster &&
                (err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT)) {
                uint64_t now = monotonic_ms();

                atomic_store(&n->failed_ms, now ? now : 1);
                atomic_store(&v->map_stale, 1); /* a failover? look again */
            }
            return err;
        }
        if (atomic_load(&n->failed_ms) != 0)
            atomic_store(&n->failed_ms, 0);
        if (r->type != REDIS_REPLY_ERROR) {
            *out = r;
            return SLUICE_OK;
        }
        if (v->cluster &&
            parse_redirect(r, &is_ask, &host, &host_len, &port) == 0) {
            atomic_fetch_add(&v->redirects, 1);
            if (is_ask)
                ask = node_get(v, host, host_len, port);
            else
                map_moved(v, slot, host, host_len, port);
            freeReplyObject(r);
            continue;
        }
        if (v->cluster && strncmp(r->str, "TRYAGAIN", 8) == 0) {
            /* Not a redirection: the slot's keys are mid-move. Try again
               after a pause (2, 4, ... 50 ms) for as long as the command
               timeout allows; this does not count as a hop. */
            struct timespec pause = {0, tryagain_ms * 1000000L};

            freeReplyObject(r);
            if (monotonic_ms() - started_ms + (uint64_t)tryagain_ms >=
                v->command_timeout_ms)
                return sluice__error(SLUICE_ECONN, "cluster: the keys of "
                                     "slot %u stayed mid-move (TRYAGAIN) "
                                     "for %llu ms", slot,
                                     (unsigned long long)(monotonic_ms() -
                                                          started_ms));
            nanosleep(&pause, NULL);
            tryagain_ms = tryagain_ms * 2 > 50 ? 50 : tryagain_ms * 2;
            hop--;
            continue;
        }
        err = reply_error(n, r, argv[0]);
        freeReplyObject(r);
        return err;
    }
    return sluice__error(SLUICE_ECONN, "cluster: slot %u still redirected "
                         "after %d tries", slot, MAX_HOPS);
}

/*
 * Runs script 'id' with 'argc' arguments after EVALSHA, SHA1 and NUMKEYS
 * (keys first, all in one slot). The reply is the caller's.
 */
static int vk_eval(vk_store *v, int id, int nkeys, int argc, const char **args,
                   const size_t *arglens, redisReply **out)
{
    const char *argv[24];
    size_t lens[24];
    char numkeys[8];

    if (argc > 21)
        return sluice__error(SLUICE_EINVAL, "a script takes at most 21 keys "
                             "and arguments");
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = NULL; /* the SHA1, filled by vk_call */
    lens[1] = 40;
    argv[2] = numkeys;
    lens[2] = (size_t)snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
    for (int i = 0; i < argc; i++) {
        argv[3 + i] = args[i];
        lens[3 + i] = arglens[i];
    }
    return vk_call(v, args[0], arglens[0], id, 3 + argc, argv, lens, out);
}

/* Reads element 'i' of an array reply as an integer >= 0. */
static int reply_u64(const redisReply *r, size_t i, uint64_t *out)
{
    const redisReply *e;

    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return sluice__error(SLUICE_EPROTO,
                             "valkey: the script answered no array");
    e = r->element[i];
    if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
        return sluice__error(SLUICE_EPROTO,
                             "valkey: the script answered a non-integer");
    *out = (uint64_t)e->integer;
    return SLUICE_OK;
}

/* ---- The store's table ------------------------------------------------------ */

/* The clock of the refusals: the caller's when it decides, else monotonic. */
static uint64_t refusal_now(const vk_store *v)
{
    return v->caller_clock ? v->clock_ms(v->clock_payload) : monotonic_ms();
}

/*
 * The most requests one script call decides: a larger batch is sent as
 * several calls, in turn. The arguments of one call stay under a few MB.
 */
#define GROUP_MAX 512

/* The failure policy's answer for a request the server could not answer
   (SLUICE_ECONN, SLUICE_ETIMEDOUT); answers the request's error code. */
static int decide_fallback(vk_store *v, const sluice_limit *limit, int err,
                           sluice_decision *out)
{
    atomic_fetch_add(&v->errors, 1);
    if (v->on_error == SLUICE_ON_ERROR_FAIL)
        return err;
    /* The policy stands in for the server; the detail stays readable. */
    memset(out, 0, sizeof(*out));
    out->limit = limit->max;
    if (v->on_error == SLUICE_ON_ERROR_OPEN) {
        atomic_fetch_add(&v->fell_open, 1);
        out->allowed = 1;
        out->fallback = SLUICE_FELL_OPEN;
    } else {
        atomic_fetch_add(&v->fell_closed, 1);
        out->fallback = SLUICE_FELL_CLOSED;
        out->retry_after_ms = v->command_timeout_ms;
    }
    return SLUICE_OK;
}

/* Reads request 'i's four integers from a script's flat reply. */
static int reply_decision(const redisReply *r, size_t i, sluice_decision *out,
                          bool *foreign)
{
    const redisReply *e = r->element[4 * i];
    uint64_t allowed = 0;
    int err;

    *foreign = e->type == REDIS_REPLY_INTEGER && e->integer == -1;
    if (*foreign)
        return SLUICE_OK;
    if ((err = reply_u64(r, 4 * i, &allowed)) == 0 &&
        (err = reply_u64(r, 4 * i + 1, &out->remaining)) == 0 &&
        (err = reply_u64(r, 4 * i + 2, &out->retry_after_ms)) == 0)
        err = reply_u64(r, 4 * i + 3, &out->reset_after_ms);
    out->allowed = allowed != 0;
    return err;
}

/*
 * The arguments of one script call for 'n' requests: EVALSHA, the SHA1
 * (filled by vk_call), NUMKEYS, the n keys, then max, window, consume, now
 * and token, then the n costs (see the top of src/lua/fixed.lua). One
 * block holds them (the caller's 'stack' when they fit), unless a key is too
 * long for its KEY_BUF slot.
 */
typedef struct group_args {
    int argc;
    const char **argv;
    size_t *lens;
    char (*keys)[KEY_BUF];
    char (*nums)[24]; /* numkeys, max, window, now, -, then the costs */
    char token[40];   /* the store's seed and a count, in hex */
    void *block;
    bool on_heap;
} group_args;

static void group_args_free(group_args *g, size_t n)
{
    for (size_t i = 0; i < n && g->block != NULL; i++)
        if (g->argv[3 + i] != NULL && g->argv[3 + i] != g->keys[i])
            free((char *)g->argv[3 + i]);
    if (g->on_heap)
        free(g->block);
}

static int group_args_build(group_args *g, void *stack, size_t stack_cap,
                            vk_store *v, const sluice_limit *limit,
                            bool consume, const sluice_request *reqs,
                            const size_t *todo, size_t n)
{
    size_t argc = 3 + n + 5 + n, j = 3 + n;
    size_t need = argc * (sizeof(char *) + sizeof(size_t)) + n * KEY_BUF +
                  (5 + n) * 24;
    char (*num)[24];

    g->argc = (int)argc;
    g->on_heap = need > stack_cap;
    g->block = g->on_heap ? calloc(1, need) : memset(stack, 0, need);
    if (g->block == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
    g->argv = g->block;
    g->lens = (size_t *)(g->argv + argc);
    g->keys = (char (*)[KEY_BUF])(g->lens + argc);
    g->nums = num = (char (*)[24])(g->keys + n);
    g->argv[0] = "EVALSHA";
    g->lens[0] = 7;
    g->lens[1] = 40;
    g->argv[2] = num[0];
    g->lens[2] = (size_t)snprintf(num[0], 24, "%zu", n);
    for (size_t i = 0; i < n; i++) {
        const sluice_request *q = &reqs[todo[i]];

        g->argv[3 + i] = sluice__key_build(g->keys[i], KEY_BUF, &g->lens[3 + i],
                                   v->prefix, q->key, q->key_len,
                                   sluice__algos[limit->algo]->name);
        if (g->argv[3 + i] == NULL)
            return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    }
    g->argv[j] = num[1];
    g->lens[j++] = (size_t)snprintf(num[1], 24, "%llu",
                                    (unsigned long long)limit->max);
    g->argv[j] = num[2];
    g->lens[j++] = (size_t)snprintf(num[2], 24, "%llu",
                                    (unsigned long long)limit->window_ms);
    g->argv[j] = consume ? "1" : "0";
    g->lens[j++] = 1;
    g->argv[j] = num[3]; /* "": the server's clock */
    if (v->caller_clock) {
        uint64_t t = v->clock_ms(v->clock_payload);

        if (t > SLUICE_NOW_MAX_MS)
            return sluice__error(SLUICE_ERANGE,
                                 "the clock reads %llu ms, beyond 2^53",
                                 (unsigned long long)t);
        g->lens[j] = (size_t)snprintf(num[3], 24, "%llu",
                                      (unsigned long long)t);
    }
    j++;
    g->argv[j] = g->token;
    g->lens[j++] = (size_t)snprintf(
        g->token, sizeof(g->token), "%016llx%llx",
        (unsigned long long)v->token_seed,
        (unsigned long long)atomic_fetch_add(&v->token_next, 1));
    for (size_t i = 0; i < n; i++) {
        g->argv[j] = num[5 + i];
        g->lens[j++] = (size_t)snprintf(num[5 + i], 24, "%llu",
                                        (unsigned long long)reqs[todo[i]].cost);
    }
    return SLUICE_OK;
}

/* An error's message, kept for a request decided on another thread. */
typedef char vk_msg[256];

static void group_answer(vk_store *v, const sluice_limit *limit, bool consume,
                         bool cached, sluice_request *reqs, const size_t *todo,
                         size_t n, vk_msg *msgs, const group_args *g, int err,
                         redisReply *r, uint64_t asked_ms);

/*
 * Decides requests reqs[todo[0..n)], whose keys share one slot, with one
 * script call, and sets each one's 'err' and 'decision' (and, when 'msgs' is
 * not NULL, msgs[todo[i]] to a failed one's message). 'cached': the limit's
 * algorithm is in the refusal cache.
 */
static void vk_decide_group(vk_store *v, const sluice_limit *limit,
                            bool consume, bool cached, sluice_request *reqs,
                            const size_t *todo, size_t n, vk_msg *msgs)
{
    _Alignas(max_align_t) char stack[1024];
    group_args g = {0};
    redisReply *r = NULL;
    /* A wait counts from when the call was sent: a local refusal never
       outlasts the server's. */
    uint64_t asked_ms = cached ? refusal_now(v) : 0;
    int err = group_args_build(&g, stack, sizeof(stack), v, limit, consume,
                               reqs, todo, n);

    if (err == 0)
        err = vk_call(v, g.argv[3], g.lens[3], limit->algo, g.argc, g.argv,
                      g.lens, &r);
    group_answer(v, limit, consume, cached, reqs, todo, n, msgs, &g, err, r,
                 asked_ms);
    group_args_free(&g, n);
}

/*
 * Hands out a script call's answer to its requests reqs[todo[0..n)]: the
 * reply 'r' (freed here), or the error 'err' (the failure policy's answer
 * where it applies); then notes refusals in the cache, from 'asked_ms'.
 */
static void group_answer(vk_store *v, const sluice_limit *limit, bool consume,
                         bool cached, sluice_request *reqs, const size_t *todo,
                         size_t n, vk_msg *msgs, const group_args *g, int err,
                         redisReply *r, uint64_t asked_ms)
{
    if (err == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * n))
        err = sluice__error(SLUICE_EPROTO, "valkey: the %s script answered "
                            "%s for %zu requests", sluice_algo_name(limit->algo),
                            r->type == REDIS_REPLY_ARRAY ? "another count"
                                                         : "no array", n);
    for (size_t i = 0; i < n; i++) {
        sluice_request *q = &reqs[todo[i]];
        sluice_decision *d = &q->decision;
        bool foreign = false;

        if (err < 0) {
            q->err = err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT
                         ? decide_fallback(v, limit, err, d)
                         : err;
        } else {
            d->limit = limit->max;
            q->err = reply_decision(r, i, d, &foreign);
        }
        if (q->err == 0 && foreign)
            q->err = sluice__error(SLUICE_EPROTO, "valkey: %.*s does not hold "
                                   "%s, as sluice writes it there",
                                   (int)g->lens[3 + i], g->argv[3 + i],
                                   limit->algo == SLUICE_FIXED
                                       ? "a number"
                                       : limit->algo == SLUICE_SLIDING_LOG
                                             ? "a sorted set"
                                             : "a hash");
        if (q->err < 0) {
            if (msgs != NULL)
                snprintf(msgs[todo[i]], sizeof(vk_msg), "%s",
                         sluice_last_error());
        } else if (err == 0 && cached && !d->allowed) {
            sluice__refusals_note(v->refusals, limit, q->key, q->key_len,
                                  q->cost, asked_ms, d);
        } else if (err == 0 && cached && consume) {
            /* A cheaper request admitted here pushes the wait of a refused
               one further out: ask the server again for it. */
            sluice__refusals_forget(v->refusals, limit->algo, q->key,
                                    q->key_len);
        }
    }
    if (r != NULL)
        freeReplyObject(r);
}

static bool refusals_used(const vk_store *v, const sluice_limit *limit)
{
    return v->refusals != NULL &&
           (v->refusal_algos & (1u << limit->algo)) != 0;
}

/* A request's place in a batch, and its key's slot. */
typedef struct slot_place {
    unsigned slot;
    size_t place;
} slot_place;

static int slot_place_cmp(const void *a, const void *b)
{
    const slot_place *x = a, *y = b;

    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->place < y->place ? -1 : x->place > y->place;
}

/*
 * Script calls queued together, then awaited in turn (a call set). Every
 * call of a set that goes to one node is queued on the same connection, so
 * the calls of a batch, or of a combining round with several limits, leave
 * in one write per node and cost about a round trip per node. A call that
 * was redirected or met a node without the script did not run, and is sent
 * again alone by vk_call(), which follows the cluster; one without a known
 * node or SHA1 is sent that way from the start.
 */
typedef struct slot_call {
    struct slot_call *next;
    const sluice_limit *limit;
    bool consume, cached;
    const size_t *todo; /* its requests: reqs[todo[0..n)] */
    size_t n;
    unsigned slot;
    uint64_t asked_ms;
    vk_node *node;      /* NULL: not queued; sent alone when awaited */
    vk_conn *conn;
    vk_request *led;    /* the batch this call's set wrote on 'conn' */
    int led_err;        /* and what writing it answered */
    group_args g;
    char *cmd;
    vk_request e;
} slot_call;

typedef struct call_set {
    vk_store *v;
    sluice_request *reqs;
    vk_msg *msgs;       /* NULL, or a failed request's message by place */
    slot_call *head, **tail; /* each call stays put: it may be queued */
} call_set;

#define CALL_SET_INIT(v, reqs, msgs) {(v), (reqs), (msgs), NULL, NULL}

/* A reply that says the script did not run here: sent again alone. */
static bool not_run_here(const redisReply *r)
{
    static const char *const codes[] = {"MOVED ", "ASK ", "TRYAGAIN",
                                        "NOSCRIPT"};

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (r->len >= strlen(codes[i]) &&
            strncmp(r->str, codes[i], strlen(codes[i])) == 0)
            return true;
    return false;
}

/*
 * Adds the call for requests reqs[todo[0..n)], whose keys are in 'slot', and
 * queues it on its node's connection. Out of memory, it is decided at once.
 */
static void calls_add(call_set *cs, const sluice_limit *limit, bool consume,
                      bool cached, const size_t *todo, size_t n,
                      unsigned slot)
{
    vk_store *v = cs->v;
    slot_call *c = calloc(1, sizeof(*c));
    char sha[41];
    long long len;

    if (c == NULL) {
        vk_decide_group(v, limit, consume, cached, cs->reqs, todo, n,
                        cs->msgs);
        return;
    }
    if (cs->tail == NULL)
        cs->tail = &cs->head;
    *cs->tail = c;
    cs->tail = &c->next;
    c->limit = limit;
    c->consume = consume;
    c->cached = cached;
    c->todo = todo;
    c->n = n;
    c->slot = slot;
    /* A wait counts from when the call was sent: a local refusal never
       outlasts the server's. */
    c->asked_ms = cached ? refusal_now(v) : 0;
    pthread_mutex_lock(&v->sha_lock);
    memcpy(sha, v->sha[limit->algo], sizeof(sha));
    pthread_mutex_unlock(&v->sha_lock);
    if (sha[0] == '\0' || group_args_build(&c->g, NULL, 0, v, limit, consume,
                                           cs->reqs, todo, n) < 0)
        return;
    c->g.argv[1] = sha;
    len = redisFormatCommandArgv(&c->cmd, c->g.argc, c->g.argv, c->g.lens);
    c->g.argv[1] = NULL; /* 'sha' goes out of scope */
    if (len < 0 || (c->node = node_for_slot(v, slot)) == NULL)
        return;
    c->e.cmd = c->cmd;
    c->e.len = (size_t)len;
    c->e.ncmds = 1;
    for (slot_call *o = cs->head; o != c && c->conn == NULL; o = o->next)
        if (o->node == c->node)
            c->conn = o->conn;
    if (c->conn == NULL)
        c->conn = node_pick(c->node);
    conn_submit(c->conn, &c->e);
}

/*
 * Adds the calls for requests reqs[send[0..m)] against one limit: GROUP_MAX
 * to a call; in a cluster, one call per slot among their keys (so the keys
 * of a call share a node), 'send' reordered by slot. Answers an error only
 * when none could be added.
 */
static int calls_add_many(call_set *cs, const sluice_limit *limit,
                          bool consume, bool cached, size_t *send, size_t m)
{
    vk_store *v = cs->v;
    slot_place *sp;

    if (!v->cluster) {
        for (size_t s = 0; s < m; s += GROUP_MAX)
            calls_add(cs, limit, consume, cached, send + s,
                      m - s < GROUP_MAX ? m - s : GROUP_MAX, 0);
        return SLUICE_OK;
    }
    if ((sp = malloc(m * sizeof(*sp))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", m);
    for (size_t i = 0; i < m; i++) {
        char kbuf[KEY_BUF];
        size_t klen = 0;
        const sluice_request *q = &cs->reqs[send[i]];
        char *k = sluice__key_build(kbuf, sizeof(kbuf), &klen, v->prefix,
                                    q->key, q->key_len,
                                    sluice__algos[limit->algo]->name);

        /* Out of memory: slot 0, and the call itself will say so. */
        sp[i].slot = k != NULL ? sluice__key_slot(k, klen) : 0;
        sp[i].place = send[i];
        if (k != kbuf)
            free(k);
    }
    qsort(sp, m, sizeof(*sp), slot_place_cmp);
    for (size_t i = 0; i < m; i++)
        send[i] = sp[i].place;
    map_refresh(v, false); /* a failed reread leaves the old map */
    for (size_t s = 0, e; s < m; s = e) {
        for (e = s; e < m && e - s < GROUP_MAX && sp[e].slot == sp[s].slot;)
            e++;
        calls_add(cs, limit, consume, cached, send + s, e - s, sp[s].slot);
    }
    free(sp);
    return SLUICE_OK;
}

/*
 * Sends every call of 'cs', reads their replies, hands out the answers and
 * frees the set. First each node's queued calls are written (where no other
 * caller leads that connection), so the nodes work at once; then each
 * batch written is read, which waits on nothing but the network; only then
 * are the calls awaited, so a caller never waits for another while it
 * holds a connection that it wrote to.
 */
static void calls_finish(call_set *cs)
{
    vk_store *v = cs->v;
    slot_call *c, *next;

    for (c = cs->head; c != NULL; c = c->next) {
        bool first = c->node != NULL;

        for (slot_call *o = cs->head; o != c && first; o = o->next)
            first = o->conn != c->conn;
        if (first) {
            pthread_mutex_lock(&c->conn->lock);
            c->led = conn_take(c->conn);
            pthread_mutex_unlock(&c->conn->lock);
            if (c->led != NULL)
                c->led_err = batch_write(v, c->node, c->conn, c->led);
        }
    }
    for (c = cs->head; c != NULL; c = c->next)
        if (c->led != NULL) {
            batch_read(c->node, c->conn, c->led, c->led_err);
            pthread_mutex_lock(&c->conn->lock);
            conn_hand_out(c->conn, c->led, NULL);
            pthread_mutex_unlock(&c->conn->lock);
        }
    for (c = cs->head; c != NULL; c = next) {
        redisReply *r;
        int err;

        if (c->node == NULL) {
            vk_decide_group(v, c->limit, c->consume, c->cached, cs->reqs,
                            c->todo, c->n, cs->msgs);
            goto free_call;
        }
        err = conn_await(v, c->node, c->conn, &c->e);
        r = c->e.reply;
        if (err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT) {
            uint64_t now = monotonic_ms();

            atomic_store(&c->node->failed_ms, now ? now : 1);
            if (v->cluster)
                atomic_store(&v->map_stale, 1); /* a failover? look again */
        } else if (err == 0 && r->type == REDIS_REPLY_ERROR &&
                   not_run_here(r)) {
            bool ask;
            const char *host;
            size_t host_len;
            int port;

            /* MOVED: mend the map first, so the call goes straight there. */
            if (v->cluster &&
                parse_redirect(r, &ask, &host, &host_len, &port) == 0 &&
                !ask) {
                atomic_fetch_add(&v->redirects, 1);
                map_moved(v, c->slot, host, host_len, port);
            }
            freeReplyObject(r);
            vk_decide_group(v, c->limit, c->consume, c->cached, cs->reqs,
                            c->todo, c->n, cs->msgs);
            goto free_call;
        } else if (err == 0) {
            if (atomic_load(&c->node->failed_ms) != 0)
                atomic_store(&c->node->failed_ms, 0);
            if (r->type == REDIS_REPLY_ERROR) {
                err = reply_error(c->node, r, "EVALSHA");
                freeReplyObject(r);
                r = NULL;
            }
        }
        group_answer(v, c->limit, c->consume, c->cached, cs->reqs, c->todo,
                     c->n, cs->msgs, &c->g, err, err == 0 ? r : NULL,
                     c->asked_ms);
    free_call:
        next = c->next;
        if (c->cmd != NULL)
            redisFreeCommand(c->cmd);
        group_args_free(&c->g, c->n);
        free(c);
    }
    cs->head = NULL;
    cs->tail = &cs->head;
}

/* A batch: what the refusal cache does not answer goes to the server. */
static int vk_decide_many(void *impl, const sluice_limit *limit,
                          sluice_request *reqs, const size_t *todo, size_t n)
{
    vk_store *v = impl;
    bool cached = refusals_used(v, limit);
    uint64_t now_ms = cached ? refusal_now(v) : 0;
    size_t *send = malloc(n * sizeof(*send)), m = 0;
    int err = SLUICE_OK;

    for (size_t t = 0; t < n && send != NULL; t++) {
        sluice_request *q = &reqs[todo[t]];

        if (cached && sluice__refusals_check(v->refusals, limit, q->key,
                                             q->key_len, q->cost, now_ms,
                                             &q->decision))
            q->err = SLUICE_OK;
        else
            send[m++] = todo[t];
    }
    if (send != NULL) {
        call_set cs = CALL_SET_INIT(v, reqs, NULL);

        err = calls_add_many(&cs, limit, true, cached, send, m);
        calls_finish(&cs);
    } else {
        err = sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
        m = n;
    }
    for (size_t t = 0; t < m && err < 0; t++)
        reqs[send == NULL ? todo[t] : send[t]].err = err;
    free(send);
    return err;
}

/* One decision, alone: a script call of one key (the cluster's way). */
static int vk_decide(void *impl, const sluice_limit *limit, const char *key,
                     size_t key_len, uint64_t cost, bool consume,
                     sluice_decision *out)
{
    vk_store *v = impl;
    bool cached = refusals_used(v, limit);
    sluice_request q = {key, key_len, cost, 0, {0}};
    const size_t only = 0;

    if (cached && sluice__refusals_check(v->refusals, limit, key, key_len,
                                         cost, refusal_now(v), out))
        return SLUICE_OK;
    vk_decide_group(v, limit, consume, cached, &q, &only, 1, NULL);
    *out = q.decision;
    return q.err;
}

/*
 * Combining (one server). Many threads deciding at once would each send a
 * script call of one key, and the server's cost of a call is mostly the call
 * itself. So a decision joins a queue; while fewer than 'pool_size' callers
 * are combining, the caller takes the whole queue and decides it as a batch
 * (one script call per distinct limit), then hands out the answers. Callers
 * that arrive meanwhile wait for the next round, so no caller waits longer
 * than the round in flight plus its own. Alone, a caller combines only its
 * own request. The cluster decides each alone (its keys rarely share a
 * slot).
 */
typedef struct vk_waiter {
    struct vk_waiter *next;
    const sluice_limit *limit;
    bool consume;
    sluice_request req;
    vk_msg msg;               /* req.err's message, for its caller to set */
    _Atomic uint32_t state;   /* WAITER_DONE, WAITER_LEAD, or 0 */
} vk_waiter;

#define WAITER_DONE 1u /* decided; from then on it may be gone */
#define WAITER_LEAD 2u /* asked to combine the next round */

/* Tells waiter 'w' that it is decided, or that it may combine. */
static void waiter_tell(vk_waiter *w, uint32_t what)
{
    atomic_fetch_or(&w->state, what);
    sluice__unpark(&w->state); /* by address alone: 'w' may be gone */
}

/* Decides a round: a group of script calls per limit (and consume), all of
   them queued before any is awaited. */
static void combine_round(vk_store *v, vk_waiter *batch)
{
    call_set cs = CALL_SET_INIT(v, NULL, NULL);
    size_t n = 0, stack_send[64], *send = stack_send;
    vk_waiter *stack_w[64], **w = stack_w;
    sluice_request stack_q[64], *reqs = stack_q;
    vk_msg *msgs;
    bool *sent;

    for (vk_waiter *b = batch; b != NULL; b = b->next)
        n++;
    msgs = calloc(n, sizeof(*msgs) + sizeof(*sent));
    if (n > 64) {
        send = malloc(n * sizeof(*send));
        w = malloc(n * sizeof(*w));
        reqs = malloc(n * sizeof(*reqs));
    }
    if (msgs == NULL || send == NULL || w == NULL || reqs == NULL) {
        /* No memory for a round: decide each alone. */
        for (vk_waiter *b = batch; b != NULL; b = b->next)
            if ((b->req.err = vk_decide(v, b->limit, b->req.key,
                                        b->req.key_len, b->req.cost,
                                        b->consume, &b->req.decision)) < 0)
                snprintf(b->msg, sizeof(b->msg), "%s", sluice_last_error());
        goto done;
    }
    sent = (bool *)(msgs + n);
    n = 0;
    for (vk_waiter *b = batch; b != NULL; b = b->next) {
        w[n] = b;
        reqs[n++] = b->req;
    }
    cs.reqs = reqs;
    cs.msgs = msgs;
    /* One group per limit and consume, each its slice of 'send'; all of
       their calls queued before any is awaited. */
    for (size_t i = 0, used = 0; i < n; i++) {
        const sluice_limit *lim = w[i]->limit;
        size_t m = 0, *group = send + used;
        int err;

        if (sent[i])
            continue;
        for (size_t j = i; j < n; j++)
            if (!sent[j] && w[j]->consume == w[i]->consume &&
                w[j]->limit->algo == lim->algo &&
                w[j]->limit->max == lim->max &&
                w[j]->limit->window_ms == lim->window_ms) {
                sent[j] = true;
                group[m++] = j;
            }
        used += m;
        err = calls_add_many(&cs, lim, w[i]->consume, refusals_used(v, lim),
                             group, m);
        for (size_t k = 0; k < m && err < 0; k++) {
            reqs[group[k]].err = err;
            snprintf(msgs[group[k]], sizeof(vk_msg), "%s", sluice_last_error());
        }
    }
    calls_finish(&cs);
    for (size_t i = 0; i < n; i++) {
        w[i]->req = reqs[i];
        memcpy(w[i]->msg, msgs[i], sizeof(vk_msg));
    }
done:
    free(msgs);
    if (send != stack_send)
        free(send);
    if (w != stack_w)
        free(w);
    if (reqs != stack_q)
        free(reqs);
}

static int vk_decide_combined(void *impl, const sluice_limit *limit,
                              const char *key, size_t key_len, uint64_t cost,
                              bool consume, sluice_decision *out)
{
    vk_store *v = impl;
    vk_waiter me = {.limit = limit, .consume = consume,
                    .req = {key, key_len, cost, 0, {0}}};

    if (refusals_used(v, limit) &&
        sluice__refusals_check(v->refusals, limit, key, key_len, cost,
                               refusal_now(v), out))
        return SLUICE_OK;
    pthread_mutex_lock(&v->combine_lock);
    *v->waiting_tail = &me;
    v->waiting_tail = &me.next;
    for (;;) {
        uint32_t state;

        if (v->combining < v->pool_size && v->waiting != NULL) {
            vk_waiter *batch = v->waiting;

            v->waiting = NULL;
            v->waiting_tail = &v->waiting;
            v->combining++;
            pthread_mutex_unlock(&v->combine_lock);
            combine_round(v, batch);
            while (batch != NULL) {
                vk_waiter *next = batch->next; /* before it may be gone */

                if (batch == &me)
                    atomic_fetch_or(&me.state, WAITER_DONE);
                else
                    waiter_tell(batch, WAITER_DONE);
                batch = next;
            }
            pthread_mutex_lock(&v->combine_lock);
            v->combining--;
            if (v->waiting != NULL) /* the first waiting combines next */
                waiter_tell(v->waiting, WAITER_LEAD);
        }
        pthread_mutex_unlock(&v->combine_lock);
        /* Wait to be decided, or to be asked to combine. */
        while ((state = atomic_load(&me.state)) == 0)
            sluice__park(&me.state, 0);
        if (state & WAITER_DONE)
            break;
        atomic_fetch_and(&me.state, ~WAITER_LEAD);
        pthread_mutex_lock(&v->combine_lock);
    }
    *out = me.req.decision;
    if (me.req.err < 0)
        return sluice__error(me.req.err, "%s", me.msg);
    return SLUICE_OK;
}

static int vk_reset(void *impl, const sluice_limit *limit, const char *key,
                    size_t key_len)
{
    vk_store *v = impl;
    char kbuf[KEY_BUF];
    size_t klen;
    char *k = sluice__key_build(kbuf, sizeof(kbuf), &klen, v->prefix, key, key_len,
                        sluice__algos[limit->algo]->name);
    const char *argv[2] = {"DEL", k};
    size_t lens[2] = {3, klen};
    redisReply *r = NULL;
    int err;

    if (k == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    if (v->refusals != NULL)
        sluice__refusals_forget(v->refusals, limit->algo, key, key_len);
    if ((err = vk_call(v, k, klen, -1, 2, argv, lens, &r)) == 0)
        freeReplyObject(r);
    if (k != kbuf)
        free(k);
    return err;
}

static int vk_stats(void *impl, sluice_store_stats *out)
{
    vk_store *v = impl;

    out->errors = atomic_load(&v->errors);
    out->redirects = atomic_load(&v->redirects);
    out->local_refusals = sluice__refusals_hits(v->refusals);
    out->fell_open = atomic_load(&v->fell_open);
    out->fell_closed = atomic_load(&v->fell_closed);
    return SLUICE_OK;
}

/*
 * Runs a queue-limiter script: on emq:{q}:limiter alone, or with
 * emq:{q}:meta too when 'with_meta', then the one number 'arg'.
 */
static int emq_eval(vk_store *v, int script, const char *queue,
                    size_t queue_len, bool with_meta, uint64_t arg,
                    redisReply **out)
{
    char lbuf[KEY_BUF], mbuf[KEY_BUF], num[24];
    const char *args[3];
    size_t lens[3];
    char *lim = sluice__key_build(lbuf, KEY_BUF, &lens[0], v->emq_prefix,
                                  queue, queue_len, "limiter");
    char *meta = sluice__key_build(mbuf, KEY_BUF, &lens[1], v->emq_prefix,
                                   queue, queue_len, "meta");
    int nkeys = with_meta ? 2 : 1;
    int err;

    if (lim == NULL || meta == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    } else {
        args[0] = lim;
        args[1] = meta;
        args[nkeys] = num;
        lens[nkeys] = (size_t)snprintf(num, sizeof(num), "%llu",
                                       (unsigned long long)arg);
        err = vk_eval(v, script, nkeys, nkeys + 1, args, lens, out);
    }
    if (lim != NULL && lim != lbuf)
        free(lim);
    if (meta != NULL && meta != mbuf)
        free(meta);
    return err;
}

static int vk_emq_ttl(void *impl, const char *queue, size_t queue_len,
                      uint64_t max, uint64_t *wait_ms)
{
    redisReply *r = NULL;
    int err = emq_eval(impl, SCRIPT_EMQ_TTL, queue, queue_len, true, max, &r);

    if (err < 0)
        return err;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0)
        err = sluice__error(SLUICE_EPROTO,
                            "valkey: the queue limiter read answered no "
                            "wait");
    else
        *wait_ms = (uint64_t)r->integer;
    freeReplyObject(r);
    return err;
}

static int vk_emq_incr(void *impl, const char *queue, size_t queue_len,
                       uint64_t window_ms, uint64_t *count, uint64_t *ttl_ms)
{
    redisReply *r = NULL;
    int err = emq_eval(impl, SCRIPT_EMQ_INCR, queue, queue_len, false,
                       window_ms, &r);

    if (err < 0)
        return err;
    if ((err = reply_u64(r, 0, count)) == 0)
        err = reply_u64(r, 1, ttl_ms);
    freeReplyObject(r);
    return err;
}

static void vk_free(void *impl)
{
    vk_store *v = impl;

    for (size_t i = 0; i < v->nnodes; i++)
        node_free(v->nodes[i]);
    free(v->nodes);
    sluice__refusals_free(v->refusals);
    pthread_mutex_destroy(&v->sha_lock);
    pthread_mutex_destroy(&v->combine_lock);
    pthread_mutex_destroy(&v->refresh_lock);
    pthread_rwlock_destroy(&v->map_lock);
    free(v->user);
    free(v->password);
    free(v->prefix);
    free(v->emq_prefix);
    free(v);
}

static const sluice__store_ops vk_ops = {
    .kind = "valkey",
    .decide = vk_decide_combined,
    .decide_many = vk_decide_many,
    .reset = vk_reset,
    .stats = vk_stats,
    .free = vk_free,
    .emq_ttl = vk_emq_ttl,
    .emq_incr = vk_emq_incr,
};

static const sluice__store_ops vk_cluster_ops = {
    .kind = "valkey-cluster",
    .decide = vk_decide,
    .decide_many = vk_decide_many,
    .reset = vk_reset,
    .stats = vk_stats,
    .free = vk_free,
    .emq_ttl = vk_emq_ttl,
    .emq_incr = vk_emq_incr,
};

/* ---- For the queue (src/queue.c) -------------------------------------------- */

static vk_store *server_of(sluice_store *store)
{
    if (store->ops != &vk_ops && store->ops != &vk_cluster_ops)
        return NULL;
    return store->impl;
}

int sluice__server_eval(sluice_store *store, int script, int nkeys, int argc,
                        const char **args, const size_t *lens,
                        struct redisReply **out)
{
    vk_store *v = server_of(store);

    if (v == NULL)
        return sluice__error(SLUICE_ENOTSUP, "queues need a server store "
                             "(valkey://...); the %s store has none",
                             store->ops->kind);
    return vk_eval(v, script, nkeys, argc, args, lens, out);
}

int sluice__server_command(sluice_store *store, const char *key,
                           size_t key_len, int argc, const char **argv,
                           const size_t *lens, struct redisReply **out)
{
    vk_store *v = server_of(store);

    if (v == NULL)
        return sluice__error(SLUICE_ENOTSUP, "queues need a server store "
                             "(valkey://...); the %s store has none",
                             store->ops->kind);
    return vk_call(v, key, key_len, -1, argc, argv, lens, out);
}

const char *sluice__server_emq_prefix(sluice_store *store)
{
    vk_store *v = server_of(store);

    return v != NULL ? v->emq_prefix : NULL;
}

int sluice__server_connect(sluice_store *store, struct redisContext **out)
{
    vk_store *v = server_of(store);
    vk_node *n;
    vk_conn c = {.ctx = NULL};
    int err;

    *out = NULL;
    if (v == NULL)
        return sluice__error(SLUICE_ENOTSUP, "queues need a server store");
    pthread_rwlock_rdlock(&v->map_lock);
    n = v->nodes[0];
    pthread_rwlock_unlock(&v->map_lock);
    if ((err = conn_ready(v, n, &c)) < 0)
        return err;
    *out = c.ctx;
    return SLUICE_OK;
}

/* ---- URLs --------------------------------------------------------------------
 *
 *   valkey://[user:password@]host[:port][/db][?name=value&...]
 *   redis://  the same
 *   valkey+cluster://[user:password@]host[:port][,host[:port]...][?...]
 *   redis+cluster://  the same
 *
 * Percent-escapes are decoded in the user, password and query values.
 * Query names: timeout, connect_timeout (ms), prefix, emq_prefix,
 * clock=server|caller, pool, on_error=error|open|closed.
 */

typedef struct url_parts {
    bool cluster;
    size_t nhosts;
    char *hosts[MAX_SEEDS];
    int ports[MAX_SEEDS];
    char *user, *password, *prefix, *emq_prefix;
    long db;
    sluice_store_opts o;
} url_parts;


static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A NUL-terminated, percent-decoded copy of s[0..n); NULL if malformed. */
static char *decode(const char *s, size_t n, const char *url, const char *what,
                    int *err)
{
    char *d = malloc(n + 1), *p = d;

    if (d == NULL) {
        *err = sluice__error(SLUICE_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *p++ = s[i];
            continue;
        }
        /* Two hex digits, and not %00: the result is a C string. */
        if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
            (hexval(s[i + 1]) | hexval(s[i + 2])) == 0) {
            free(d);
            *err = sluice__error(SLUICE_EURL, "store URL '%s': bad %%-escape "
                                 "in the %s", url, what);
            return NULL;
        }
        *p++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
        i += 2;
    }
    *p = '\0';
    return d;
}

static int parse_number(const char *s, size_t n, unsigned long long lo,
                        unsigned long long hi, unsigned long long *out)
{
    unsigned long long v = 0;

    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long long)(s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/*
 * Parses one "host[:port]" or "[v6]:port" in [p, end) into 'u'. Host names
 * hold letters, digits and ".-_:%" only.
 */
static int url_endpoint(url_parts *u, const char *p, const char *end,
                        const char *shown)
{
    const char *host = p, *hend;
    unsigned long long num;
    int port = DEFAULT_PORT;

    if (u->nhosts == MAX_SEEDS)
        return sluice__error(SLUICE_EURL, "store URL '%s': more than %d "
                             "hosts", shown, MAX_SEEDS);
    if (*host == '[') {
        hend = memchr(host, ']', (size_t)(end - host));
        if (hend == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': unclosed "
                                 "'[' in the host", shown);
        host++;
        p = hend + 1;
    } else {
        hend = host;
        while (hend < end && *hend != ':')
            hend++;
        p = hend;
    }
    if (hend == host)
        return sluice__error(SLUICE_EURL, "store URL '%s': no host", shown);
    for (const char *h = host; h < hend; h++)
        if (!isalnum((unsigned char)*h) && strchr(".-_:%", *h) == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': the host "
                                 "holds a byte 0x%02x that no host name "
                                 "has", shown, (unsigned char)*h);
    if (p < end && *p == ':') {
        if (parse_number(p + 1, (size_t)(end - p - 1), 1, 65535, &num) < 0)
            return sluice__error(SLUICE_EURL, "store URL '%s': the port "
                                 "must be 1..65535", shown);
        port = (int)num;
    } else if (p != end) {
        return sluice__error(SLUICE_EURL, "store URL '%s': junk after the "
                             "host", shown);
    }
    if ((u->hosts[u->nhosts] = malloc((size_t)(hend - host) + 1)) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    memcpy(u->hosts[u->nhosts], host, (size_t)(hend - host));
    u->hosts[u->nhosts][hend - host] = '\0';
    u->ports[u->nhosts++] = port;
    return SLUICE_OK;
}

/*
 * Sets '*out' to the index of [val, val + vlen) in the NULL-terminated
 * 'words', or reports which words option 'name' takes.
 */
static int url_word(int *out, const char *const *words, const char *val,
                    size_t vlen, const char *url, const char *name)
{
    char list[96] = "";

    for (int i = 0; words[i] != NULL; i++) {
        if (strlen(words[i]) == vlen && memcmp(words[i], val, vlen) == 0) {
            *out = i;
            return SLUICE_OK;
        }
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                 i == 0 ? "" : words[i + 1] == NULL ? " or " : ", ", words[i]);
    }
    return sluice__error(SLUICE_EURL, "store URL '%s': %s must be %s", url,
                         name, list);
}

static int url_query(url_parts *u, const char *q, const char *url)
{
    int err = SLUICE_OK;

    while (*q != '\0') {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', n);
        size_t nlen, vlen;
        const char *val;
        unsigned long long num;
        char *text;

        if (eq == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': option '%.*s' "
                                 "has no value", url, (int)n, q);
        nlen = (size_t)(eq - q);
        val = eq + 1;
        vlen = n - nlen - 1;
#define NAME_IS(lit) (nlen == sizeof(lit) - 1 && memcmp(q, lit, nlen) == 0)
        if (NAME_IS("timeout") || NAME_IS("connect_timeout")) {
            if (parse_number(val, vlen, 1, 3600000, &num) < 0)
                return sluice__error(SLUICE_EURL, "store URL '%s': %.*s must "
                                     "be 1..3600000 ms", url, (int)nlen, q);
            if (NAME_IS("timeout"))
                u->o.command_timeout_ms = num;
            else
                u->o.connect_timeout_ms = num;
        } else if (NAME_IS("pool")) {
            if (parse_number(val, vlen, 1, MAX_POOL, &num) < 0)
                return sluice__error(SLUICE_EURL, "store URL '%s': pool must "
                                     "be 1..%d", url, MAX_POOL);
            u->o.pool_size = (unsigned)num;
        } else if (NAME_IS("clock")) {
            static const char *const words[] = {"server", "caller", NULL};

            if ((err = url_word(&u->o.caller_clock, words, val, vlen, url,
                                "clock")) < 0)
                return err;
        } else if (NAME_IS("on_error")) {
            /* In the order of SLUICE_ON_ERROR_FAIL, _OPEN, _CLOSED. */
            static const char *const words[] = {"error", "open", "closed",
                                                NULL};
            int i;

            if ((err = url_word(&i, words, val, vlen, url, "on_error")) < 0)
                return err;
            u->o.on_error = (sluice_on_error)i;
        } else if (NAME_IS("refused_cache")) {
            /* In the order of SLUICE_REFUSED_CACHE_DEFAULT, _OFF, _ALL. */
            static const char *const words[] = {"default", "off", "all", NULL};
            int i;

            if ((err = url_word(&i, words, val, vlen, url,
                                "refused_cache")) < 0)
                return err;
            u->o.refused_cache = (sluice_refused_cache)i;
        } else if (NAME_IS("prefix") || NAME_IS("emq_prefix")) {
            if ((text = decode(val, vlen, url, "prefix", &err)) == NULL)
                return err;
            if (NAME_IS("prefix")) {
                free(u->prefix);
                u->prefix = text;
            } else {
                free(u->emq_prefix);
                u->emq_prefix = text;
            }
        } else {
            return sluice__error(SLUICE_EURL, "store URL '%s': unknown option "
                                 "'%.*s' (known: %s)", url, (int)nlen, q,
                                 sluice_store_url_options());
        }
#undef NAME_IS
        q += n;
        if (*q == '&')
            q++;
    }
    return SLUICE_OK;
}

const char *sluice_store_url_options(void)
{
    return "timeout, connect_timeout, prefix, emq_prefix, clock, pool, "
           "on_error, refused_cache";
}

/*
 * Parses 'url' into 'u'. Messages quote 'shown', the URL with its password
 * masked and unprintable bytes replaced, never the URL itself.
 */
static int url_parse(url_parts *u, const char *url, const char *shown)
{
    static const struct {
        const char *scheme;
        bool cluster;
    } schemes[] = {{"valkey://", false},
                   {"redis://", false},
                   {"valkey+cluster://", true},
                   {"redis+cluster://", true}};
    const char *p = NULL, *end, *at, *query, *slash, *auth_end;
    unsigned long long num;
    int err = SLUICE_OK;

    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i].scheme);

        if (strncmp(url, schemes[i].scheme, n) == 0) {
            p = url + n;
            u->cluster = schemes[i].cluster;
            break;
        }
    }
    if (p == NULL)
        return sluice__error(SLUICE_EURL, "store URL '%s': expected "
                             "valkey://, redis://, valkey+cluster:// or "
                             "redis+cluster://", shown);
    query = strchr(p, '?');
    end = query ? query : p + strlen(p);
    slash = memchr(p, '/', (size_t)(end - p));
    auth_end = slash ? slash : end;
    /* userinfo: up to the last '@' before the path */
    at = NULL;
    for (const char *s = p; s < auth_end; s++)
        if (*s == '@')
            at = s;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));

        if (colon == NULL)
            return sluice__error(SLUICE_EURL, "store URL '%s': a user needs "
                                 "a password (user:password@ or "
                                 ":password@)", shown);
        if (colon > p &&
            (u->user = decode(p, (size_t)(colon - p), shown, "user", &err)) ==
                NULL)
            return err;
        if ((u->password = decode(colon + 1, (size_t)(at - colon - 1), shown,
                                  "password", &err)) == NULL)
            return err;
        p = at + 1;
    }
    /* host[:port], or for a cluster a comma-separated list of seeds */
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(auth_end - p));
        const char *stop = comma ? comma : auth_end;

        if (comma != NULL && !u->cluster)
            return sluice__error(SLUICE_EURL, "store URL '%s': several hosts "
                                 "need valkey+cluster://", shown);
        if ((err = url_endpoint(u, p, stop, shown)) < 0)
            return err;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    if (slash != NULL && slash + 1 < end) {
        if (parse_number(slash + 1, (size_t)(end - slash - 1), 0, INT_MAX,
                         &num) < 0)
            return sluice__error(SLUICE_EURL, "store URL '%s': the "
                                 "database must be a number", shown);
        if (u->cluster && num != 0)
            return sluice__error(SLUICE_EURL, "store URL '%s': a cluster has "
                                 "only database 0", shown);
        u->db = (long)num;
    }
    if (query != NULL)
        return url_query(u, query + 1, shown);
    return SLUICE_OK;
}

/*
 * Writes 'url' into 'out' as it may be shown in a message: the password
 * replaced by "***", bytes outside printable ASCII by '?', cut to fit.
 */
void sluice__url_shown(char *out, size_t cap, const char *url)
{
    const char *scheme_end = strstr(url, "://");
    const char *start = scheme_end ? scheme_end + 3 : url;
    const char *at = NULL, *colon = NULL, *s;
    size_t n = 0;

    for (s = start; *s != '\0' && *s != '/' && *s != '?'; s++)
        if (*s == '@')
            at = s;
    if (at != NULL)
        colon = memchr(start, ':', (size_t)(at - start));
    for (s = url; *s != '\0' && n + 4 < cap; s++) {
        if (colon != NULL && s == colon + 1) {
            memcpy(out + n, "***", 3);
            n += 3;
            s = at - 1;
            continue;
        }
        out[n++] = (*s > 0x20 && *s < 0x7f) ? *s : '?';
    }
    if (*s != '\0' && n + 4 >= cap)
        memcpy(out + n - 3, "...", 3);
    out[n] = '\0';
}

static void url_parts_free(url_parts *u)
{
    for (size_t i = 0; i < u->nhosts; i++)
        free(u->hosts[i]);
    free(u->user);
    free(u->password);
    free(u->prefix);
    free(u->emq_prefix);
}

static char *dup_or(const char *s, const char *dflt)
{
    const char *src = s != NULL ? s : dflt;
    size_t n = strlen(src) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, src, n);
    return d;
}

static int prefix_check(const char *prefix, const char *what)
{
    if (prefix[0] == '\0' || strpbrk(prefix, "{}") != NULL ||
        strlen(prefix) > SLUICE__PREFIX_MAX)
        return sluice__error(SLUICE_EINVAL, "%s '%.40s' must be non-empty, "
                             "at most %d bytes, and hold no brace", what,
                             prefix, SLUICE__PREFIX_MAX);
    return SLUICE_OK;
}

static uint64_t random_seed(void)
{
    uint64_t seed = 0;
    struct timespec ts;
    FILE *f = fopen("/dev/urandom", "rb");

    if (f != NULL) {
        if (fread(&seed, sizeof(seed), 1, f) != 1)
            seed = 0;
        fclose(f);
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    return seed ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

int sluice__store_valkey_open(void **impl, const sluice__store_ops **ops,
                              const sluice_store_opts *opts, const char *url)
{
    url_parts u;
    vk_store *v;
    char shown[160];
    unsigned n;
    int err;

    memset(&u, 0, sizeof(u));
    u.o = *opts;
    sluice__url_shown(shown, sizeof(shown), url);
    if ((err = url_parse(&u, url, shown)) < 0) {
        url_parts_free(&u);
        return err;
    }
    n = u.o.pool_size ? u.o.pool_size : DEFAULT_POOL;
    if (n > MAX_POOL) {
        url_parts_free(&u);
        return sluice__error(SLUICE_EINVAL, "pool_size %u is above %d", n,
                             MAX_POOL);
    }
    v = calloc(1, sizeof(*v));
    if (v == NULL) {
        url_parts_free(&u);
        return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    }
    v->user = u.user;
    v->password = u.password;
    v->db = u.db;
    v->prefix = u.prefix ? u.prefix : dup_or(opts->key_prefix, "sluice");
    v->emq_prefix = u.emq_prefix ? u.emq_prefix : dup_or(opts->emq_prefix, "emq");
    v->connect_timeout_ms = u.o.connect_timeout_ms ? u.o.connect_timeout_ms
                                                   : DEFAULT_CONNECT_TIMEOUT_MS;
    v->command_timeout_ms = u.o.command_timeout_ms ? u.o.command_timeout_ms
                                                   : DEFAULT_COMMAND_TIMEOUT_MS;
    v->pool_size = n;
    v->caller_clock = u.o.caller_clock;
    v->on_error = u.o.on_error;
    v->clock_ms = opts->clock_ms;
    v->clock_payload = opts->clock_payload;
    v->token_seed = random_seed();
    v->cluster = u.cluster;
    pthread_mutex_init(&v->sha_lock, NULL);
    pthread_mutex_init(&v->combine_lock, NULL);
    v->waiting_tail = &v->waiting;
    pthread_mutex_init(&v->refresh_lock, NULL);
    pthread_rwlock_init(&v->map_lock, NULL);
    for (unsigned s = 0; s < SLUICE__SLOTS; s++)
        v->slots[s] = -1;
    atomic_store(&v->map_stale, 1);
    for (size_t i = 0; i < u.nhosts && err == 0; i++)
        if (node_get(v, u.hosts[i], strlen(u.hosts[i]), u.ports[i]) == NULL)
            err = sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    u.user = u.password = u.prefix = u.emq_prefix = NULL; /* now v's */
    url_parts_free(&u);
    if (err < 0)
        ;
    else if (v->prefix == NULL || v->emq_prefix == NULL)
        err = sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    else if (v->on_error < SLUICE_ON_ERROR_FAIL ||
             v->on_error > SLUICE_ON_ERROR_CLOSED)
        err = sluice__error(SLUICE_EINVAL, "on_error %d is not a policy",
                            v->on_error);
    else if (u.o.refused_cache < SLUICE_REFUSED_CACHE_DEFAULT ||
             u.o.refused_cache > SLUICE_REFUSED_CACHE_ALL)
        err = sluice__error(SLUICE_EINVAL, "refused_cache %d is not a "
                            "setting", u.o.refused_cache);
    else if ((err = prefix_check(v->prefix, "key prefix")) == 0)
        err = prefix_check(v->emq_prefix, "queue prefix");
    if (err == 0 && u.o.refused_cache != SLUICE_REFUSED_CACHE_OFF) {
        v->refusal_algos = u.o.refused_cache == SLUICE_REFUSED_CACHE_ALL
                               ? (1u << SLUICE__ALGO_N) - 1
                               : (1u << SLUICE_FIXED) |
                                     (1u << SLUICE_SLIDING_LOG);
        err = sluice__refusals_new(&v->refusals, REFUSALS_CAP, v->token_seed);
    }
    if (err < 0) {
        vk_free(v);
        return err;
    }
    *impl = v;
    *ops = v->cluster ? &vk_cluster_ops : &vk_ops;
    return SLUICE_OK;
}
