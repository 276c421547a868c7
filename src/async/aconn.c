/*
 * aconn.c - one node's connection of an async handle.
 *
 *   CLOSED --a call--> CONNECTING --connected--> HELLO --answered--> READY
 *      ^                   |                       |                   |
 *      |                   +------- failed --------+--> BACKOFF        |
 *      +----------------- a read or write failed, a reply late --------+
 *
 * The connect never waits: the wire layer's start and resume, driven by
 * the descriptor the transport names (the socket, or a resolver's pipe).
 * The handshake's commands (AUTH, SELECT, SLUICE.VERSION, then SCRIPT
 * LOAD of every script) are written together and their replies checked
 * in order; calls queued meanwhile wait for READY, since which engine
 * decides them is only known then.
 *
 * Order. Calls leave in the order they were started, and the server runs
 * them so. A call answered NOSCRIPT (the scripts flushed under an open
 * connection) is sent again after what was pipelined behind it; since
 * every call that names a decision's key is a script (a reset too:
 * reset.lua), those met NOSCRIPT as well and go again in their order.
 * The one exception: a decision answered "unknown command" (the module
 * unloaded under an open connection) goes again as the script after a
 * reset of its key pipelined behind it has run.
 *
 * Calls queued on a READY connection have it watched for writing; once
 * the loop says it is writable, everything queued is written at once
 * (calls.c groups it), so the calls started in one loop iteration leave
 * in one write. Replies are handed out in order; a reply nobody asked for
 * is SLUICE_EPROTO, and the connection is closed.
 *
 * Failures. A connect or handshake that fails answers every call waiting
 * on the node with its error, and for a back-off (100 ms, doubling to
 * 2 s) new calls to the node fail at once with SLUICE_ECONN, so a down
 * server costs a call no wait. A connection that fails once READY answers
 * what it sent; what it had not sent yet is sent on a new connection. The
 * oldest request sent not answered by its deadline means the server
 * stalled: everything sent on the connection is answered SLUICE_ETIMEDOUT
 * and the connection closed, so no late reply is ever delivered.
 */
#include "async/async.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000
/* Reads of one readiness: enough for a burst, bounded for the loop. */
#define FILLS_MAX 16

enum { HELLO_AUTH, HELLO_SELECT, HELLO_VERSION, HELLO_SCRIPT };

static int events_of(short want)
{
    return (want & POLLOUT ? SLUICE_ASYNC_WRITE : 0) |
           (want & POLLIN ? SLUICE_ASYNC_READ : 0);
}

static void conn_open(sluice__aconn *conn);

/* ---- Failing ----------------------------------------------------------------------- */

static void conn_close(sluice__aconn *conn)
{
    sluice__async_watch(conn->a, conn, -1, 0);
    sluice__vk_wire_close(conn->w);
    conn->w = NULL;
}

/* Answers every batch sent on 'conn' with 'err' ('msg'). */
static void fail_sent(sluice__aconn *conn, int err, const char *msg)
{
    sluice__abatch *b = conn->sent, *next;

    conn->sent = NULL;
    conn->sent_tail = &conn->sent;
    for (; b != NULL; b = next) {
        next = b->next;
        if (b->kind == SLUICE__ABATCH_HELLO)
            sluice__abatch_free(b);
        else
            sluice__acalls_answer(conn, b, err, msg, NULL);
    }
}

/* Answers every call queued on 'conn' with 'err' ('msg'). */
static void fail_queue(sluice__aconn *conn, int err, const char *msg)
{
    sluice__acall *c = conn->queue, *next;

    conn->queue = NULL;
    conn->queue_tail = &conn->queue;
    for (; c != NULL; c = next) {
        next = c->qnext;
        c->conn = NULL;
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
        sluice__acall_fail(conn->a, c, err);
    }
}

/*
 * 'conn' failed with 'err' (its message the thread's last error): what it
 * sent is answered with it; a connect that failed answers its queue too
 * and backs off; a connection that was READY sends its queue again on a
 * new one.
 */
static void conn_fail(sluice__aconn *conn, int err)
{
    bool connecting = conn->state != SLUICE__ACONN_READY;
    char msg[256];

    snprintf(msg, sizeof(msg), "%s", sluice_last_error());
    conn->last_err = err;
    snprintf(conn->last_msg, sizeof(conn->last_msg), "%s", msg);
    if (conn->a->v != NULL)
        sluice__vk_node_noted(conn->a->v, conn->node, err);
    conn_close(conn);
    conn->state = SLUICE__ACONN_CLOSED;
    fail_sent(conn, err, msg);
    if (connecting) {
        uint64_t now = sluice__monotonic_ms();

        conn->backoff_ms = conn->backoff_ms == 0 ? BACKOFF_FIRST_MS
                           : conn->backoff_ms * 2 > BACKOFF_MAX_MS
                               ? BACKOFF_MAX_MS
                               : conn->backoff_ms * 2;
        conn->retry_at_ms = now + conn->backoff_ms;
        conn->state = SLUICE__ACONN_BACKOFF;
        fail_queue(conn, err, msg);
    } else if (conn->queue != NULL) {
        conn_open(conn);
    }
}

/* ---- Connecting ---------------------------------------------------------------------- */

static int hello_append(sluice__aconn *conn, int which, int argc,
                        const char **argv, const size_t *lens)
{
    sluice__abatch *b = calloc(1, sizeof(*b));
    int err;

    if (b == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a connect");
    if ((err = sluice__vk_wire_append_argv(conn->w, argc, argv, lens)) < 0) {
        free(b);
        return err;
    }
    b->kind = SLUICE__ABATCH_HELLO;
    b->hello = which;
    b->deadline_ms = conn->connect_deadline_ms;
    *conn->sent_tail = b;
    conn->sent_tail = &b->next;
    return SLUICE_OK;
}

/*
 * SCRIPT LOAD of every script, after the handshake's commands, as the
 * blocking path loads them on its first connection. Without it the first
 * decisions on a server that lacks the scripts (new, restarted) answer
 * NOSCRIPT and are sent again after the commands pipelined behind them,
 * which have run by then: a hit and then a reset of its key, started in
 * one loop iteration, would run as the reset and then the hit. An error
 * here is no failed connect: a call that then meets NOSCRIPT says so.
 */
static int hello_scripts(sluice__aconn *conn)
{
    int err = SLUICE_OK;

    for (size_t i = 0; sluice__scripts[i] != NULL && err == 0; i++) {
        const sluice__script *s = sluice__scripts[i];
        const char *argv[] = {"SCRIPT", "LOAD", s->text};
        size_t lens[] = {6, 4, s->len};

        err = hello_append(conn, HELLO_SCRIPT, 3, argv, lens);
    }
    return err;
}

/* Writes the handshake's commands: AUTH, SELECT, SLUICE.VERSION, and the
   scripts. */
static int hello_write(sluice__aconn *conn)
{
    sluice__vk_store *v = conn->a->v;
    const sluice__vk_node *n = conn->node;
    const char *user = n->is_sentinel ? v->sentinel_user : v->user;
    const char *password = n->is_sentinel ? v->sentinel_password : v->password;
    int err = SLUICE_OK;

    if (password != NULL) {
        const char *argv[] = {"AUTH", user != NULL ? user : password,
                              password};
        size_t lens[] = {4, strlen(argv[1]), strlen(password)};

        err = hello_append(conn, HELLO_AUTH, user != NULL ? 3 : 2, argv, lens);
    }
    if (err == 0 && v->db != 0 && !n->is_sentinel) {
        char db[24];
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, 0};

        lens[1] = (size_t)snprintf(db, sizeof(db), "%ld", v->db);
        err = hello_append(conn, HELLO_SELECT, 2, argv, lens);
    }
    if (err == 0 && v->engine != SLUICE_ENGINE_LUA && !n->is_sentinel) {
        const char *argv[] = {"SLUICE.VERSION"};
        size_t lens[] = {14};

        err = hello_append(conn, HELLO_VERSION, 1, argv, lens);
    }
    if (err == 0 && !n->is_sentinel)
        err = hello_scripts(conn);
    return err;
}

static void conn_ready(sluice__aconn *conn)
{
    conn->state = SLUICE__ACONN_READY;
    conn->backoff_ms = 0;
    sluice__vk_node_noted(conn->a->v, conn->node, 0);
    sluice__async_watch(conn->a, conn, conn->w->fd,
                        SLUICE_ASYNC_READ |
                            (conn->queue != NULL ? SLUICE_ASYNC_WRITE : 0));
}

/* Connected: the handshake, or READY when it has nothing to say. */
static void conn_connected(sluice__aconn *conn)
{
    int err;

    conn->state = SLUICE__ACONN_HELLO;
    if ((err = hello_write(conn)) < 0) {
        conn_fail(conn, err);
        return;
    }
    if (conn->sent == NULL) {
        conn_ready(conn);
        return;
    }
    sluice__async_watch(conn->a, conn, conn->w->fd,
                        SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE);
}

static void conn_open(sluice__aconn *conn)
{
    sluice__vk_store *v = conn->a->v;
    int wait_fd = -1, rc;
    short want = 0;

    conn->state = SLUICE__ACONN_CONNECTING;
    conn->connect_deadline_ms = sluice__monotonic_ms() + v->connect_timeout_ms;
    rc = sluice__vk_wire_start(&conn->w, &conn->caps, conn->node, v->tls,
                               v->max_reply_bytes, v->max_reply_elements,
                               &wait_fd, &want);
    if (rc < 0)
        conn_fail(conn, rc);
    else if (rc == 1)
        sluice__async_watch(conn->a, conn, wait_fd, events_of(want));
    else
        conn_connected(conn);
}

static void conn_resume(sluice__aconn *conn)
{
    int wait_fd = -1, rc;
    short want = 0;

    rc = sluice__vk_wire_resume(conn->w, conn->node, &wait_fd, &want);
    if (rc < 0)
        conn_fail(conn, rc);
    else if (rc == 1)
        sluice__async_watch(conn->a, conn, wait_fd, events_of(want));
    else
        conn_connected(conn);
}

/* ---- Replies -------------------------------------------------------------------------- */

/* A handshake reply; false when it failed the connection. */
static bool hello_answer(sluice__aconn *conn, sluice__abatch *b,
                         redisReply *r)
{
    static const char *const doing[] = {"AUTH", "SELECT", "SLUICE.VERSION",
                                        "SCRIPT LOAD"};
    int err = SLUICE_OK;

    if (b->hello == HELLO_VERSION)
        err = sluice__vk_engine_note(conn->a->v, conn->node, r);
    else if (r->type == REDIS_REPLY_ERROR && b->hello != HELLO_SCRIPT)
        err = sluice__vk_reply_error(conn->node, r, doing[b->hello]);
    freeReplyObject(r);
    sluice__abatch_free(b);
    if (err < 0) {
        conn_fail(conn, err);
        return false;
    }
    if (conn->state == SLUICE__ACONN_HELLO && conn->sent == NULL)
        conn_ready(conn);
    return true;
}

/*
 * Reply 'r' to 'b', the last batch sent, has bytes behind it already read:
 * a reply nobody asked for. The stream is out of step, and since the extra
 * reply may have come anywhere in it, 'r' may be another request's: 'b'
 * fails with SLUICE_EPROTO and the connection is closed, as the blocking
 * path does (its conn_in_step()). Always false: the connection failed.
 */
static bool reply_out_of_step(sluice__aconn *conn, sluice__abatch *b,
                              redisReply *r)
{
    int err = sluice__error(SLUICE_EPROTO, "valkey %s: a reply nobody asked "
                            "for after the last one asked for; the "
                            "connection is closed", conn->node->name);
    char msg[256];

    snprintf(msg, sizeof(msg), "%s", sluice_last_error());
    freeReplyObject(r);
    conn_fail(conn, err);
    sluice__acalls_answer(conn, b, err, msg, NULL);
    return false;
}

/* Hands out one reply to the oldest batch sent; false when the
   connection failed. */
static bool conn_reply(sluice__aconn *conn, redisReply *r)
{
    sluice__abatch *b = conn->sent;

    if (b == NULL) {
        freeReplyObject(r);
        conn_fail(conn, sluice__error(SLUICE_EPROTO, "valkey %s: a reply "
                                      "nobody asked for; the connection is "
                                      "closed", conn->node->name));
        return false;
    }
    conn->sent = b->next;
    if (conn->sent == NULL)
        conn->sent_tail = &conn->sent;
    b->next = NULL;
    if (b->kind == SLUICE__ABATCH_HELLO)
        return hello_answer(conn, b, r);
    if (b->skip == 0 && conn->sent == NULL &&
        conn->w->reader->len > conn->w->reader->pos)
        return reply_out_of_step(conn, b, r);
    sluice__acalls_answer(conn, b, 0, NULL, r);
    return conn->w != NULL;
}

static void conn_read(sluice__aconn *conn)
{
    for (int fills = 0; fills < FILLS_MAX && conn->w != NULL; fills++) {
        redisReply *r = NULL;
        short want = 0;
        int rc = sluice__vk_wire_fill(conn->node, conn->w, &want);

        if (rc < 0) {
            conn_fail(conn, rc);
            return;
        }
        while (conn->w != NULL &&
               (rc = sluice__vk_wire_next(conn->node, conn->w, &conn->caps,
                                          &r)) == 1)
            if (!conn_reply(conn, r))
                return;
        if (rc < 0 && conn->w != NULL) {
            conn_fail(conn, rc);
            return;
        }
        if (want != 0 && !sluice__vk_wire_buffered(conn->w))
            return; /* nothing more now */
    }
}

/* ---- Writing --------------------------------------------------------------------------- */

static void conn_write(sluice__aconn *conn)
{
    short want = 0;
    int rc;

    if (conn->state == SLUICE__ACONN_READY && conn->queue != NULL)
        sluice__acalls_write(conn);
    if (conn->w == NULL)
        return;
    if (conn->w->olen > conn->w->opos)
        conn->a->writes++;
    if ((rc = sluice__vk_wire_flush(conn->node, conn->w, &want)) < 0) {
        conn_fail(conn, rc);
        return;
    }
    sluice__async_watch(conn->a, conn, conn->w->fd,
                        SLUICE_ASYNC_READ |
                            (rc == 1 ? events_of(want) : 0));
}

void sluice__aconn_on_fd(sluice__aconn *conn, int events)
{
    if (conn->state == SLUICE__ACONN_CONNECTING) {
        conn_resume(conn);
        return;
    }
    if (conn->w == NULL)
        return;
    if (events & SLUICE_ASYNC_WRITE)
        conn_write(conn);
    if ((events & SLUICE_ASYNC_READ) && conn->w != NULL)
        conn_read(conn);
}

/* ---- Queueing ---------------------------------------------------------------------------- */

void sluice__aconn_queue(sluice_async *a, sluice__vk_node *node,
                         sluice__acall *c)
{
    sluice__aconn *conn = sluice__async_conn(a, node);
    uint64_t now;

    if (conn == NULL) {
        sluice__acall_fail(a, c, sluice__error(SLUICE_ENOMEM, "no memory "
                                               "for a connection"));
        return;
    }
    if (conn->state == SLUICE__ACONN_BACKOFF) {
        now = sluice__monotonic_ms();
        if (now < conn->retry_at_ms) {
            snprintf(c->msg, sizeof(c->msg), "valkey %s: reconnecting in "
                     "%llu ms (%.100s)", node->name,
                     (unsigned long long)(conn->retry_at_ms - now),
                     conn->last_msg);
            sluice__acall_fail(a, c, conn->last_err == SLUICE_ETIMEDOUT
                                         ? SLUICE_ECONN
                                         : conn->last_err);
            return;
        }
        conn->state = SLUICE__ACONN_CLOSED;
    }
    c->conn = conn;
    c->qnext = NULL;
    *conn->queue_tail = c;
    conn->queue_tail = &c->qnext;
    if (conn->state == SLUICE__ACONN_CLOSED)
        conn_open(conn);
    else if (conn->state == SLUICE__ACONN_READY)
        sluice__async_watch(a, conn, conn->w->fd,
                            SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE);
}

void sluice__aconn_unqueue(sluice__acall *c)
{
    sluice__aconn *conn = c->conn;
    sluice__acall **p;

    if (conn == NULL)
        return;
    for (p = &conn->queue; *p != NULL; p = &(*p)->qnext)
        if (*p == c) {
            *p = c->qnext;
            if (*p == NULL)
                conn->queue_tail = p;
            break;
        }
    c->conn = NULL;
    c->qnext = NULL;
}

uint64_t sluice__aconn_tick(sluice__aconn *conn, uint64_t now_ms)
{
    sluice__vk_store *v = conn->a->v;
    sluice__acall *c, *next;

    if ((conn->state == SLUICE__ACONN_CONNECTING ||
         conn->state == SLUICE__ACONN_HELLO) &&
        now_ms >= conn->connect_deadline_ms) {
        conn_fail(conn, sluice__vk_timed_out(conn->node, "connect",
                                             v->connect_timeout_ms));
    } else if (conn->sent != NULL && conn->sent->deadline_ms <= now_ms) {
        conn_fail(conn, sluice__vk_timed_out(conn->node, "read",
                                             v->command_timeout_ms));
    }
    for (c = conn->queue; c != NULL; c = next) {
        next = c->qnext;
        if (c->deadline_ms <= now_ms) {
            sluice__aconn_unqueue(c);
            sluice__acall_fail(conn->a, c,
                               sluice__vk_timed_out(conn->node, "send",
                                                    v->command_timeout_ms));
        }
    }
    return UINT64_MAX;
}

void sluice__aconn_free(sluice__aconn *conn, int err)
{
    char msg[256];

    snprintf(msg, sizeof(msg), "%s", sluice_last_error());
    conn_close(conn);
    fail_sent(conn, err, msg);
    fail_queue(conn, err, msg);
    free(conn);
}
