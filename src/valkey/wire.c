/*
 * wire.c - one connection's bytes: a deadline for every call, a cap on every
 * reply, and errors named by what went wrong.
 *
 * A connection's socket is non-blocking once it is open: every read and
 * write waits in poll() for at most what is left of the call's deadline, so a
 * server that stalls, or drips a byte at a time, costs a call its command
 * timeout and no more. Replies are parsed by hiredis' reader, whose
 * functions that build reply objects are wrapped here to count what one
 * reply holds: a reply over 'max_bytes' of strings or 'max_elements'
 * elements (or whose unread bytes in the buffer pass 'max_bytes') is refused
 * before it is built, so a hostile length ("*2147483647", "$2147483647")
 * costs neither the memory nor the time it announces.
 *
 * What went wrong decides the error. The server did not answer in time:
 * SLUICE_ETIMEDOUT. It could not be reached, or closed the connection:
 * SLUICE_ECONN (policies such as on_error=open may stand in for it). It
 * answered something that is not a reply, or one over the caps:
 * SLUICE_EPROTO, always an error, never mistaken for an outage. After any of
 * them the connection is closed by the caller: its stream is no longer in
 * step.
 */
#include "valkey/valkey.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- Counting what a reply holds ---------------------------------------------------- */

static const redisReplyObjectFunctions *plain_fn; /* hiredis' own */
static redisReplyObjectFunctions capped_fn;  /* the same, counted */

/* Counts 'bytes' and 'elements' more of the reply being read; false when
   that takes it over a cap (the reader then fails, out of memory). */
static bool caps_take(vk_caps *caps, uint64_t bytes, uint64_t elements)
{
    caps->bytes += bytes;
    caps->elements += elements;
    if (caps->bytes > caps->max_bytes || caps->elements > caps->max_elements)
        caps->over = true;
    return !caps->over;
}

static void *capped_string(const redisReadTask *task, char *str, size_t len)
{
    if (!caps_take(task->privdata, len, 0))
        return NULL;
    return plain_fn->createString(task, str, len);
}

static void *capped_array(const redisReadTask *task, int elements)
{
    vk_caps *caps = task->privdata;

    if (elements < 0) { /* "*-5": hiredis would build an array of 2^64 - 5 */
        caps->bad = "an array of negative length";
        return NULL;
    }
    if (!caps_take(caps, 0, (uint64_t)elements))
        return NULL;
    return plain_fn->createArray(task, elements);
}

/*
 * An integer's text, found just behind the reader's cursor (hiredis reads
 * the line, then builds the object; the ':' before it may already have been
 * dropped from the buffer): more digits than 64 bits hold would have wrapped
 * around silently, so they are refused here.
 */
static bool integer_fits(const redisReader *r)
{
    const char *end = r->buf + r->pos - 2, *p = end; /* before "\r\n" */
    unsigned long long v = 0;
    bool negative;

    if (r->pos < 3 || r->buf[r->pos - 1] != '\n')
        return false;
    while (p > r->buf && end - p < 24 &&
           ((p[-1] >= '0' && p[-1] <= '9') || p[-1] == '-' || p[-1] == '+'))
        p--;
    negative = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (p == end)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || v > (ULLONG_MAX - 9) / 10)
            return false;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    return v <= (unsigned long long)LLONG_MAX + (negative ? 1 : 0);
}

static void *capped_integer(const redisReadTask *task, long long value)
{
    vk_caps *caps = task->privdata;

    if (!integer_fits(caps->reader)) {
        caps->bad = "an integer that is not one, or beyond 64 bits";
        return NULL;
    }
    return plain_fn->createInteger(task, value);
}

/* Once per process, from the first connection's reader: hiredis' own
   functions, and the counted copy of them. Under a lock, so no thread
   reads them half made (connections open seldom). */
static void capped_make(const redisReplyObjectFunctions *fn)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

    pthread_mutex_lock(&lock);
    if (plain_fn != NULL) {
        pthread_mutex_unlock(&lock);
        return;
    }
    plain_fn = fn;
    capped_fn = *plain_fn;
    capped_fn.createString = capped_string;
    capped_fn.createArray = capped_array;
    capped_fn.createInteger = capped_integer;
    pthread_mutex_unlock(&lock);
}

/* ---- Errors ------------------------------------------------------------------------ */

int sluice__vk_wire_fail(const vk_node *n, redisContext *ctx,
                         const vk_caps *caps, const char *doing)
{
    if (ctx == NULL)
        return sluice__error(SLUICE_ENOMEM, "valkey %s: %s: out of memory",
                             n->name, doing);
    if (ctx->err == REDIS_ERR_OOM && caps != NULL && caps->bad != NULL)
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: not a reply "
                             "(%s)", n->name, doing, caps->bad);
    if (ctx->err == REDIS_ERR_OOM && caps != NULL && caps->over) {
        bool bytes = caps->bytes > caps->max_bytes;

        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: a reply of more "
                             "than %s=%llu (a URL option)", n->name, doing,
                             bytes ? "max_reply_bytes" : "max_reply_elements",
                             (unsigned long long)(bytes ? caps->max_bytes
                                                        : caps->max_elements));
    }
    switch (ctx->err) {
    case REDIS_ERR_PROTOCOL:
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: not a reply "
                             "(%s)", n->name, doing, ctx->errstr);
    case REDIS_ERR_OOM:
        return sluice__error(SLUICE_ENOMEM, "valkey %s: %s: out of memory",
                             n->name, doing);
    default: /* REDIS_ERR_IO, _EOF, _OTHER: the connection itself */
        return sluice__error(SLUICE_ECONN, "valkey %s: %s: %s", n->name,
                             doing, ctx->errstr);
    }
}

static int timed_out(const vk_node *n, const char *doing, uint64_t ms)
{
    return sluice__error(SLUICE_ETIMEDOUT, "valkey %s: %s: timed out (no "
                         "answer within %llu ms)", n->name, doing,
                         (unsigned long long)ms);
}

/* ---- Opening ----------------------------------------------------------------------- */

int sluice__vk_wire_open(redisContext **out, vk_caps *caps, const vk_node *n,
                         uint64_t connect_timeout_ms, uint64_t deadline_ms,
                         uint64_t timeout_ms, uint64_t max_bytes,
                         uint64_t max_elements)
{
    uint64_t now = sluice__monotonic_ms();
    uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
    /* hiredis takes a relative timeout: what is left of the call, or
       'connect_timeout_ms' if that is less. */
    bool call_bound = left < connect_timeout_ms;
    uint64_t wait_ms = call_bound ? left : connect_timeout_ms;
    struct timeval tv = {(time_t)(wait_ms / 1000),
                         (suseconds_t)(wait_ms % 1000) * 1000};
    redisContext *ctx;
    int flags, err;

    *out = NULL;
    if (wait_ms == 0) /* hiredis would take a zero timeout as none at all */
        return timed_out(n, "connect", call_bound ? timeout_ms
                                                  : connect_timeout_ms);
    ctx = redisConnectWithTimeout(n->host, n->port, tv);
    if (ctx == NULL || ctx->err) {
        bool slow = ctx != NULL && (errno == ETIMEDOUT || errno == EINPROGRESS ||
                                    strstr(ctx->errstr, "timed out") != NULL);

        err = slow ? timed_out(n, "connect", call_bound ? timeout_ms
                                                        : connect_timeout_ms)
                   : sluice__vk_wire_fail(n, ctx, NULL, "connect");
        if (ctx != NULL)
            redisFree(ctx);
        return err;
    }
    redisEnableKeepAlive(ctx);
    /* From here on every wait is a poll() with the call's deadline. */
    if ((flags = fcntl(ctx->fd, F_GETFL)) < 0 ||
        fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        err = sluice__error(SLUICE_ECONN, "valkey %s: connect: %s",
                            n->name, strerror(errno));
        redisFree(ctx);
        return err;
    }
    ctx->flags &= ~REDIS_BLOCK;
    capped_make(ctx->reader->fn);
    ctx->reader->fn = &capped_fn;
    ctx->reader->privdata = caps;
    memset(caps, 0, sizeof(*caps));
    caps->reader = ctx->reader;
    caps->max_bytes = max_bytes;
    caps->max_elements = max_elements;
    *out = ctx;
    return SLUICE_OK;
}

/* ---- Waiting ----------------------------------------------------------------------- */

/*
 * Waits until the socket of 'ctx' is ready for 'events', at most until
 * 'deadline_ms' (monotonic). Answers 1 when it is ready before the
 * deadline, 0 when the deadline came first: a socket found ready only at or
 * after the deadline counts as the deadline, so a server that keeps sending
 * cannot keep a call past it.
 */
static int wait_for(redisContext *ctx, short events, uint64_t deadline_ms)
{
    for (;;) {
        uint64_t now = sluice__monotonic_ms();
        uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
        struct pollfd p = {.fd = ctx->fd, .events = events};
        int rc;

        if (left == 0)
            return 0;
        rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (rc > 0)
            return sluice__monotonic_ms() < deadline_ms;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return 1; /* the read or write that follows says what is wrong */
    }
}

int sluice__vk_wire_write(const vk_node *n, redisContext *ctx,
                          uint64_t deadline_ms, uint64_t timeout_ms)
{
    int done = 0;

    for (;;) {
        if (redisBufferWrite(ctx, &done) != REDIS_OK)
            return sluice__vk_wire_fail(n, ctx, NULL, "write");
        if (done)
            return SLUICE_OK;
        if (!wait_for(ctx, POLLOUT, deadline_ms))
            return timed_out(n, "write", timeout_ms);
    }
}

/*
 * True when the unread bytes of 'r' hold a line ended by a bare LF. The
 * reader stands at the start of a line whenever it waits for more (it
 * takes a bulk string's length line and its bytes together), and no line
 * of RESP holds an LF but its last byte, so the first LF must follow a CR.
 * hiredis' reader would wait for that CR for ever.
 */
static bool bare_lf(const redisReader *r)
{
    const char *start = r->buf + r->pos;
    const char *lf = memchr(start, '\n', r->len - r->pos);

    return lf != NULL && (lf == start || lf[-1] != '\r');
}

int sluice__vk_wire_read(const vk_node *n, redisContext *ctx, vk_caps *caps,
                         uint64_t deadline_ms, uint64_t timeout_ms,
                         redisReply **out)
{
    void *reply = NULL;

    caps->bytes = caps->elements = 0;
    caps->over = false;
    caps->bad = NULL;
    for (bool first = true;; first = false) {
        if (redisGetReplyFromReader(ctx, &reply) != REDIS_OK)
            return sluice__vk_wire_fail(n, ctx, caps, "read");
        if (reply != NULL) {
            *out = reply;
            return SLUICE_OK;
        }
        /* What is buffered and not yet a reply counts against the cap: a
           length announced but not yet sent must not grow it unbounded. */
        if (ctx->reader->len - ctx->reader->pos > caps->max_bytes) {
            caps->over = true;
            caps->bytes = ctx->reader->len - ctx->reader->pos;
            ctx->err = REDIS_ERR_OOM;
            return sluice__vk_wire_fail(n, ctx, caps, "read");
        }
        if (bare_lf(ctx->reader))
            return sluice__error(SLUICE_EPROTO, "valkey %s: read: not a "
                                 "reply (a line ended by LF without CR)",
                                 n->name);
        /* Past the deadline, what the socket holds already is read once
           (a wait of 0 ms takes what is there); after that, bytes that
           come late are a timeout, however fast they keep coming. */
        if ((!first || sluice__monotonic_ms() < deadline_ms) &&
            !wait_for(ctx, POLLIN, deadline_ms))
            return timed_out(n, "read", timeout_ms);
        if (redisBufferRead(ctx) != REDIS_OK)
            return sluice__vk_wire_fail(n, ctx, caps, "read");
    }
}
