/*
 * conn.c - a node's connections, shared by every thread that uses the
 * store.
 *
 * A node keeps 'pool_size' hiredis connections; each call is dealt one in
 * turn and queues its request there. Whoever finds no I/O in progress on
 * the connection leads: it writes every queued request at once, reads their
 * replies in order and hands them out, then wakes the next queued caller to
 * lead (automatic pipelining). A caller thus waits for at most the batch in
 * flight and its own round trip, however many threads share the store.
 */
#include "valkey/valkey.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* ---- One connection -------------------------------------------------------------- */

static void conn_close(sluice__vk_conn *c)
{
    sluice__vk_wire_close(c->ctx);
    c->ctx = NULL;
}

/* The error of what failed on 'c' (wire.c names its kind); the connection
   is closed, since its stream is no longer in step. */
static int conn_fail(sluice__vk_node *n, sluice__vk_conn *c, int err)
{
    (void)n;
    conn_close(c);
    return err;
}

/*
 * Maps an error reply. Replies that mean "not now" (a server loading its
 * data, busy with a script, a replica without its master, a cluster that is
 * down or mid-move) count as the server being unavailable, like a broken
 * connection. A redirection (MOVED, ASK) reaching here was not followed:
 * the URL names one node of a cluster without valkey+cluster://, which is
 * a misconfiguration, never an outage, so no policy may stand in for it
 * (cluster.c follows those of a cluster store before they get here). Any
 * other is a protocol error that no policy should paper over.
 */
bool sluice__vk_unavailable(const redisReply *r)
{
    static const char *const unavailable[] = {
        "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"};

    for (size_t i = 0; i < sizeof(unavailable) / sizeof(unavailable[0]); i++)
        if (strncmp(r->str, unavailable[i], strlen(unavailable[i])) == 0)
            return true;
    return false;
}

/* The most bytes of an error reply that a message quotes. */
#define ERROR_TEXT_MAX 200

/*
 * The text of error reply 'r' for a message, into 'buf' (ERROR_TEXT_MAX * 4
 * + 4 bytes): all of its bytes, a NUL and every other control byte written
 * as \xNN, so that what follows a NUL is not lost and nothing in a message
 * moves a terminal; cut after ERROR_TEXT_MAX bytes, with "...".
 */
static void error_text(char *buf, const redisReply *r)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = r->len < ERROR_TEXT_MAX ? r->len : ERROR_TEXT_MAX, k = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)r->str[i];

        if (b < 0x20 || b == 0x7f) {
            buf[k++] = '\\';
            buf[k++] = 'x';
            buf[k++] = hex[b >> 4];
            buf[k++] = hex[b & 15];
        } else {
            buf[k++] = (char)b;
        }
    }
    if (n < r->len) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
}

/* Whether error reply 'r' starts with 'word' and a space (or is it). */
static bool reply_is(const redisReply *r, const char *word)
{
    size_t n = strlen(word);

    return r->len >= n && strncmp(r->str, word, n) == 0 &&
           (r->len == n || r->str[n] == ' ');
}

bool sluice__vk_redirection(const redisReply *r)
{
    return (r->len >= 6 && strncmp(r->str, "MOVED ", 6) == 0) ||
           (r->len >= 4 && strncmp(r->str, "ASK ", 4) == 0);
}

sluice__vk_lack sluice__vk_reply_noted(sluice__vk_node *n, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR && reply_is(r, "READONLY") &&
        n->master_stale != NULL)
        atomic_store(n->master_stale, 1);
    return sluice__vk_engine_lost(n, r);
}

int sluice__vk_reply_error(sluice__vk_node *n, const redisReply *r,
                           const char *doing)
{
    char text[ERROR_TEXT_MAX * 4 + 4];
    unsigned algo = 0;
    sluice__vk_lack lack = sluice__vk_module_lack(r, &algo);

    error_text(text, r);
    if (lack == SLUICE__VK_LACK_MODULE)
        return sluice__error(SLUICE_ENOTSUP, "valkey %s: %s: the server has "
                             "no sluice module: %s", n->name, doing, text);
    if (lack == SLUICE__VK_LACK_ALGO)
        return sluice__error(SLUICE_ENOTSUP, "valkey %s: %s: the server's "
                             "sluice module does not decide %s: %s; load a "
                             "sluice.so that does, or use engine=auto or lua",
                             n->name, doing, sluice__algos[algo]->name, text);
    if (sluice__vk_unavailable(r))
        return sluice__error(SLUICE_ECONN, "valkey %s: %s: %s", n->name,
                             doing, text);
    if (sluice__vk_redirection(r))
        return sluice__error(SLUICE_ECONFIG, "valkey %s: %s: %s: this server "
                             "is a cluster node: use valkey+cluster://",
                             n->name, doing, text);
    if (reply_is(r, "WRONGPASS") || reply_is(r, "NOAUTH") ||
        strncmp(r->str, "ERR invalid password", 20) == 0 ||
        strncmp(r->str, "ERR AUTH <password> called without", 34) == 0)
        return sluice__error(SLUICE_EAUTH, "valkey %s: %s: %s: check the "
                             "URL's user and password", n->name, doing, text);
    if (reply_is(r, "READONLY") && n->master_stale != NULL)
        /* The master the sentinels named is a replica now: a failover
           (sluice__vk_reply_noted() has the sentinels asked again). */
        return sluice__error(SLUICE_ECONN, "valkey %s: %s: %s: the master "
                             "became a replica (a failover): the sentinels "
                             "are asked again", n->name, doing, text);
    if (reply_is(r, "READONLY"))
        return sluice__error(SLUICE_ECONFIG, "valkey %s: %s: %s: this server "
                             "is a replica: name its master, or use "
                             "valkey+sentinel://", n->name, doing, text);
    return sluice__error(SLUICE_EPROTO, "valkey %s: %s: %s", n->name, doing,
                         text);
}

/*
 * Whether 'c' holds nothing more than the replies that were asked for: no
 * byte in its reader, and none waiting in its socket (looked at without
 * waiting). A byte more is a reply nobody asked for, which would answer the
 * next command on the connection and shift every answer after it: that is
 * SLUICE_EPROTO ('doing' names what was read last), and the caller closes
 * the connection. A close by the server is left for conn_stale() to find.
 */
static int conn_in_step(const sluice__vk_node *n, const sluice__vk_conn *c,
                        const char *doing)
{
    const redisReader *r = c->ctx->reader;

    if (r->len > r->pos)
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: %zu bytes after "
                             "the last reply asked for (a reply nobody asked "
                             "for); the connection is closed", n->name, doing,
                             r->len - r->pos);
    if (sluice__vk_wire_peek(n, c->ctx) > 0)
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: bytes after the "
                             "last reply asked for (a reply nobody asked "
                             "for); the connection is closed", n->name, doing);
    return SLUICE_OK;
}

int sluice__vk_conn_exchange(sluice__vk_store *v, sluice__vk_node *n,
                             sluice__vk_conn *c, uint64_t deadline_ms,
                             bool alone, const char *doing, int argc,
                             const char **argv, const size_t *lens,
                             redisReply **out)
{
    redisReply *r = NULL;
    int err;

    if ((err = sluice__vk_wire_append_argv(c->ctx, argc, argv, lens)) < 0)
        return conn_fail(n, c, err);
    if ((err = sluice__vk_wire_write(n, c->ctx, deadline_ms,
                                     v->command_timeout_ms)) < 0 ||
        (err = sluice__vk_wire_read(n, c->ctx, &c->caps, deadline_ms,
                                    v->command_timeout_ms, &r)) < 0)
        return conn_fail(n, c, err);
    if (alone && (err = conn_in_step(n, c, doing)) < 0) {
        freeReplyObject(r);
        return conn_fail(n, c, err);
    }
    *out = r;
    return SLUICE_OK;
}

int sluice__vk_conn_command(sluice__vk_store *v, sluice__vk_node *n,
                            sluice__vk_conn *c, uint64_t deadline_ms,
                            redisReply **out, const char *doing, int argc,
                            const char **argv, const size_t *lens)
{
    redisReply *r = NULL;
    int err = sluice__vk_conn_exchange(v, n, c, deadline_ms, true, doing,
                                       argc, argv, lens, &r);

    if (err < 0)
        return err;
    if (r->type == REDIS_REPLY_ERROR) {
        err = sluice__vk_reply_error(n, r, doing);
        freeReplyObject(r);
        return err;
    }
    *out = r;
    return SLUICE_OK;
}

/* True when the server has closed 'c' (or sent what nobody asked for,
   which may wait in its reader, its transport or its socket). */
static int conn_stale(const sluice__vk_node *n, sluice__vk_conn *c)
{
    return sluice__vk_wire_peek(n, c->ctx) != 0;
}

/* AUTH and SELECT on the new connection 'c', by 'deadline_ms'; a
   sentinel's own AUTH alone. */
static int conn_login(sluice__vk_store *v, sluice__vk_node *n,
                      sluice__vk_conn *c, uint64_t deadline_ms)
{
    const char *user = n->is_sentinel ? v->sentinel_user : v->user;
    const char *password = n->is_sentinel ? v->sentinel_password
                                          : v->password;
    redisReply *r = NULL;
    char dbtext[24];
    int err;

    if (password != NULL) {
        const char *argv[] = {"AUTH", user, password};
        size_t lens[] = {4, user ? strlen(user) : 0, strlen(password)};
        int argc = user != NULL ? 3 : 2;

        if (user == NULL) {
            argv[1] = password;
            lens[1] = lens[2];
        }
        if ((err = sluice__vk_conn_command(v, n, c, deadline_ms, &r, "AUTH",
                                           argc, argv, lens)) < 0)
            return err;
        freeReplyObject(r);
    }
    if (v->db != 0 && !n->is_sentinel) {
        const char *argv[] = {"SELECT", dbtext};
        size_t lens[2] = {6, 0};

        lens[1] = (size_t)snprintf(dbtext, sizeof(dbtext), "%ld", v->db);
        if ((err = sluice__vk_conn_command(v, n, c, deadline_ms, &r,
                                           "SELECT", 2, argv, lens)) < 0)
            return err;
        freeReplyObject(r);
    }
    return SLUICE_OK;
}

/*
 * Opens 'c' if it is closed: connect, AUTH, SELECT, the engine (engine.c),
 * scripts. One deadline, the call's, covers them all: a server slow to
 * answer each of them costs the call its timeout, not a timeout per step.
 */
int sluice__vk_conn_ready(sluice__vk_store *v, sluice__vk_node *n,
                          sluice__vk_conn *c, uint64_t deadline_ms)
{
    int err;

    if (c->ctx != NULL && !conn_stale(n, c))
        return SLUICE_OK;
    conn_close(c);
    if ((err = sluice__vk_wire_open(&c->ctx, &c->caps, n, v->tls,
                                    v->connect_timeout_ms, deadline_ms,
                                    v->command_timeout_ms, v->max_reply_bytes,
                                    v->max_reply_elements)) < 0)
        return err;
    if ((err = conn_login(v, n, c, deadline_ms)) < 0)
        goto fail;
    if (n->is_sentinel) /* no engine, no scripts: it only names masters */
        return SLUICE_OK;
    if ((err = sluice__vk_engine_detect(v, n, c, deadline_ms)) < 0)
        goto fail;
    if (!atomic_load(&v->scripts_loaded)) {
        if ((err = sluice__vk_scripts_load(v, n, c, deadline_ms)) < 0)
            goto fail;
        atomic_store(&v->scripts_loaded, 1);
    }
    return SLUICE_OK;
fail:
    conn_close(c); /* a refused AUTH or SELECT must not leave it half-open */
    return err;
}

/* ---- Nodes and their pipelines --------------------------------------------------- */

/* The node as messages name it: host:port (a Unix socket: its path), a
   long host cut short. */
static void node_name(sluice__vk_node *n)
{
    size_t len = strlen(n->host);
    char port[12] = "";

    if (n->port != 0)
        snprintf(port, sizeof(port), ":%d", n->port);
    if (len > 64)
        snprintf(n->name, sizeof(n->name), "%.30s...%s%s", n->host,
                 n->host + len - 30, port);
    else
        snprintf(n->name, sizeof(n->name), "%s%s", n->host, port);
}

sluice__vk_node *sluice__vk_node_new(const char *host, size_t host_len,
                                     int port, const sluice__vk_transport *t,
                                     unsigned nconns)
{
    sluice__vk_node *n =
        calloc(1, sizeof(*n) + nconns * sizeof(sluice__vk_conn));

    if (n == NULL || (n->host = malloc(host_len + 1)) == NULL) {
        free(n);
        return NULL;
    }
    memcpy(n->host, host, host_len);
    n->host[host_len] = '\0';
    n->port = port;
    n->transport = t;
    node_name(n);
    n->nconns = nconns;
    for (unsigned i = 0; i < nconns; i++) {
        pthread_mutex_init(&n->conns[i].lock, NULL);
        n->conns[i].tail = &n->conns[i].head;
    }
    return n;
}

void sluice__vk_node_free(sluice__vk_node *n)
{
    for (unsigned i = 0; i < n->nconns; i++) {
        conn_close(&n->conns[i]);
        pthread_mutex_destroy(&n->conns[i].lock);
    }
    free(n->host);
    free(n);
}

/* The connection of 'n' that this call is dealt, in turn. */
sluice__vk_conn *sluice__vk_node_pick(sluice__vk_node *n)
{
    return &n->conns[atomic_fetch_add(&n->next_conn, 1) % n->nconns];
}

/* Fails request 'e' with the calling thread's last error. */
static void request_fail(sluice__vk_request *e, int err)
{
    e->err = err;
    snprintf(e->msg, sizeof(e->msg), "%s", sluice_last_error());
}

/* The earliest deadline of a batch: its I/O must be over by then. */
static uint64_t batch_deadline(const sluice__vk_request *batch)
{
    uint64_t d = UINT64_MAX;

    for (; batch != NULL; batch = batch->next)
        if (batch->deadline_ms < d)
            d = batch->deadline_ms;
    return d;
}

/*
 * The leader's writes for a batch: connect if need be, then send every
 * request. Answers 0, or the error that failed every request of the batch.
 */
static int batch_write(sluice__vk_store *v, sluice__vk_node *n,
                       sluice__vk_conn *c, sluice__vk_request *batch)
{
    int err = sluice__vk_conn_ready(v, n, c, batch_deadline(batch));

    for (sluice__vk_request *e = batch; e != NULL && err == 0; e = e->next)
        if ((err = sluice__vk_wire_append(c->ctx, e->cmd, e->len)) < 0)
            conn_fail(n, c, err);
    if (err == 0 &&
        (err = sluice__vk_wire_write(n, c->ctx, batch_deadline(batch),
                                     v->command_timeout_ms)) < 0)
        conn_fail(n, c, err);
    for (sluice__vk_request *e = batch; e != NULL && err < 0; e = e->next)
        request_fail(e, err);
    return err;
}

/* Fails every request of 'batch' from 'e' on with 'err', dropping a reply
   one of them holds. */
static void batch_fail(sluice__vk_request *e, int err)
{
    for (; e != NULL; e = e->next) {
        if (e->reply != NULL) {
            freeReplyObject(e->reply);
            e->reply = NULL;
        }
        request_fail(e, err);
    }
}

/*
 * The leader's reads for a batch that batch_write() sent ('err' its answer):
 * every reply, in order, by the batch's deadline. A broken connection fails
 * the rest of the batch. Once every reply is read the connection must hold
 * nothing more: a reply nobody asked for means the stream is out of step,
 * and since the extra reply may have come anywhere in it, any reply of the
 * batch may be another request's. So the whole batch fails with
 * SLUICE_EPROTO and the connection is closed: no later call reads a stale
 * reply.
 */
static void batch_read(sluice__vk_store *v, sluice__vk_node *n,
                       sluice__vk_conn *c, sluice__vk_request *batch, int err)
{
    uint64_t deadline = batch_deadline(batch);

    for (sluice__vk_request *e = batch; e != NULL && err == 0; e = e->next) {
        for (int k = 0; k < e->ncmds; k++) {
            redisReply *r = NULL;

            if ((err = sluice__vk_wire_read(n, c->ctx, &c->caps, deadline,
                                            v->command_timeout_ms, &r)) < 0) {
                conn_fail(n, c, err);
                batch_fail(e, err);
                break;
            }
            if (k + 1 < e->ncmds)
                freeReplyObject(r); /* ASKING's +OK */
            else
                e->reply = r;
        }
    }
    if (err == 0 && (err = conn_in_step(n, c, "read")) < 0) {
        conn_fail(n, c, err);
        batch_fail(batch, err);
    }
}

/*
 * Takes the queue of 'c' to lead its I/O, unless another caller leads it or
 * nothing is queued (then NULL). Under c->lock.
 */
static sluice__vk_request *conn_take(sluice__vk_conn *c)
{
    sluice__vk_request *batch = c->head;

    if (c->busy || batch == NULL)
        return NULL;
    c->busy = true;
    c->head = NULL;
    c->tail = &c->head;
    return batch;
}

/* Ends a lead: marks the batch done, wakes its callers (not 'self') and the
   next leader. Under c->lock. */
static void conn_hand_out(sluice__vk_conn *c, sluice__vk_request *batch,
                          const sluice__vk_request *self)
{
    while (batch != NULL) {
        sluice__vk_request *next = batch->next; /* before 'done' frees it */

        batch->done = true;
        if (batch != self)
            pthread_cond_signal(&batch->cond);
        batch = next;
    }
    c->busy = false;
    if (c->head != NULL) /* the first queued caller leads the next */
        pthread_cond_signal(&c->head->cond);
}

/* Queues request 'e' on 'c'; sluice__vk_conn_await() sends it and waits for it. */
void sluice__vk_conn_submit(sluice__vk_conn *c, sluice__vk_request *e)
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
int sluice__vk_conn_await(sluice__vk_store *v, sluice__vk_node *n,
                          sluice__vk_conn *c, sluice__vk_request *e)
{
    pthread_mutex_lock(&c->lock);
    while (!e->done) {
        sluice__vk_request *batch = conn_take(c);

        if (batch == NULL) { /* another caller leads; 'e' is still queued */
            pthread_cond_wait(&e->cond, &c->lock);
            continue;
        }
        pthread_mutex_unlock(&c->lock);
        batch_read(v, n, c, batch, batch_write(v, n, c, batch));
        pthread_mutex_lock(&c->lock);
        conn_hand_out(c, batch, e);
    }
    pthread_mutex_unlock(&c->lock);
    pthread_cond_destroy(&e->cond);
    if (e->err < 0)
        return sluice__error(e->err, "%s", e->msg);
    return SLUICE_OK;
}

sluice__vk_request *sluice__vk_conn_lead(sluice__vk_store *v,
                                         sluice__vk_node *n, sluice__vk_conn *c,
                                         int *err)
{
    sluice__vk_request *batch;

    pthread_mutex_lock(&c->lock);
    batch = conn_take(c);
    pthread_mutex_unlock(&c->lock);
    if (batch != NULL)
        *err = batch_write(v, n, c, batch);
    return batch;
}

void sluice__vk_conn_lead_end(sluice__vk_store *v, sluice__vk_node *n,
                              sluice__vk_conn *c, sluice__vk_request *batch,
                              int err)
{
    batch_read(v, n, c, batch, err);
    pthread_mutex_lock(&c->lock);
    conn_hand_out(c, batch, NULL);
    pthread_mutex_unlock(&c->lock);
}

/* The most connections one wait watches; beyond, the rest wait their turn. */
#define LEADS_POLLED 64

/* Whether lead 'l' can be ended now without waiting on the network: its
   write failed, or a reply is buffered already. */
static bool lead_ready(const sluice__vk_lead *l)
{
    const sluice__vk_wire *w = l->conn->ctx;

    return l->err < 0 || w == NULL || sluice__vk_wire_buffered(w);
}

/*
 * The lead of leads[0..n) to end next: one that is ready, or whose socket
 * has something to read, waiting for one until the earliest deadline among
 * them; at that deadline, the first (its read then times out).
 */
static size_t lead_next(const sluice__vk_lead *leads, size_t n)
{
    struct pollfd fds[LEADS_POLLED];
    size_t m = n < LEADS_POLLED ? n : LEADS_POLLED;
    uint64_t deadline = UINT64_MAX, now;

    for (size_t i = 0; i < m; i++) {
        uint64_t d = batch_deadline(leads[i].batch);

        if (lead_ready(&leads[i]))
            return i;
        fds[i] = (struct pollfd){.fd = leads[i].conn->ctx->fd,
                                 .events = POLLIN};
        deadline = d < deadline ? d : deadline;
    }
    for (;;) {
        int rc;

        now = sluice__monotonic_ms();
        rc = poll(fds, (nfds_t)m, deadline <= now ? 0
                                  : deadline - now > INT_MAX ? INT_MAX
                                                             : (int)(deadline - now));
        if (rc < 0 && errno == EINTR)
            continue;
        for (size_t i = 0; rc > 0 && i < m; i++)
            if (fds[i].revents != 0)
                return i;
        return 0;
    }
}

void sluice__vk_conn_lead_end_all(sluice__vk_store *v, sluice__vk_lead *leads,
                                  size_t n)
{
    while (n > 0) {
        size_t i = n == 1 ? 0 : lead_next(leads, n);

        sluice__vk_conn_lead_end(v, leads[i].node, leads[i].conn,
                                 leads[i].batch, leads[i].err);
        leads[i] = leads[--n];
    }
}

/* Sends request 'e' on 'c' and waits for its reply. */
static int conn_roundtrip(sluice__vk_store *v, sluice__vk_node *n,
                          sluice__vk_conn *c, sluice__vk_request *e)
{
    sluice__vk_conn_submit(c, e);
    return sluice__vk_conn_await(v, n, c, e);
}

/*
 * Runs one command on node 'n' through its shared connections; the reply
 * (possibly an error reply) is the caller's. 'asking' sends ASKING first,
 * on the same connection, as one request.
 */
int sluice__vk_node_command(sluice__vk_store *v, sluice__vk_node *n,
                            bool asking, uint64_t deadline_ms, int argc,
                            const char **argv, const size_t *lens,
                            redisReply **out)
{
    static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
    sluice__vk_request e;
    char *cmd = NULL, *both = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    int err;

    if (len < 0)
        return sluice__error(SLUICE_ENOMEM, "cannot format a command");
    e.cmd = cmd;
    e.len = (size_t)len;
    e.ncmds = 1;
    e.deadline_ms = deadline_ms;
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
    err = conn_roundtrip(v, n, sluice__vk_node_pick(n), &e);
    free(both);
    redisFreeCommand(cmd);
    if (err == 0)
        *out = e.reply;
    return err;
}
