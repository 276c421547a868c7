/*
 * wire.c - one connection's bytes: a deadline for every call, a cap on every
 * reply, and errors named by what went wrong.
 *
 * The bytes move through the node's transport (tcp.c, unix.c, tls.c),
 * whose socket is non-blocking from its connect on: every read and write
 * waits in poll() for at most what is left of the call's deadline, so a
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

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Counting what a reply holds ---------------------------------------------------- */

static const redisReplyObjectFunctions *plain_fn; /* hiredis' own */
static redisReplyObjectFunctions capped_fn;  /* the same, counted */

/* Counts 'bytes' and 'elements' more of the reply being read; false when
   that takes it over a cap (the reader then fails, out of memory). */
static bool caps_take(sluice__vk_caps *caps, uint64_t bytes, uint64_t elements)
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
    sluice__vk_caps *caps = task->privdata;

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
    sluice__vk_caps *caps = task->privdata;

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

/* The error of what the reader of 'w' refused, by its kind. */
static int reader_fail(const sluice__vk_node *n, const sluice__vk_wire *w,
                       const sluice__vk_caps *caps, const char *doing)
{
    const redisReader *r = w->reader;

    if (caps != NULL && caps->bad != NULL)
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: not a reply "
                             "(%s)", n->name, doing, caps->bad);
    if (caps != NULL && caps->over) {
        bool bytes = caps->bytes > caps->max_bytes;

        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: a reply of more "
                             "than %s=%llu (a URL option)", n->name, doing,
                             bytes ? "max_reply_bytes" : "max_reply_elements",
                             (unsigned long long)(bytes ? caps->max_bytes
                                                        : caps->max_elements));
    }
    if (r->err == REDIS_ERR_PROTOCOL)
        return sluice__error(SLUICE_EPROTO, "valkey %s: %s: not a reply "
                             "(%s)", n->name, doing, r->errstr);
    return sluice__error(SLUICE_ENOMEM, "valkey %s: %s: out of memory",
                         n->name, doing);
}

/* ---- Opening and closing ------------------------------------------------------------ */

/* A wire not yet connected, with its reader; NULL out of memory (the
   message set). */
static sluice__vk_wire *wire_new(const sluice__vk_node *n)
{
    sluice__vk_wire *w = calloc(1, sizeof(*w));

    if (w == NULL || (w->reader = redisReaderCreate()) == NULL) {
        free(w);
        sluice__error(SLUICE_ENOMEM, "valkey %s: connect: out of memory",
                      n->name);
        return NULL;
    }
    w->t = n->transport;
    w->fd = -1;
    return w;
}

/* Has the reader of connected 'w' count into 'caps', with these caps. */
static void wire_caps(sluice__vk_wire *w, sluice__vk_caps *caps,
                      uint64_t max_bytes, uint64_t max_elements)
{
    capped_make(w->reader->fn);
    w->reader->fn = &capped_fn;
    w->reader->privdata = caps;
    memset(caps, 0, sizeof(*caps));
    caps->reader = w->reader;
    caps->max_bytes = max_bytes;
    caps->max_elements = max_elements;
}

int sluice__vk_wire_open(sluice__vk_wire **out, sluice__vk_caps *caps,
                         const sluice__vk_node *n,
                         const struct sluice__vk_tls *tls,
                         uint64_t connect_timeout_ms, uint64_t deadline_ms,
                         uint64_t timeout_ms, uint64_t max_bytes,
                         uint64_t max_elements)
{
    uint64_t now = sluice__monotonic_ms();
    /* What is left of the call, or 'connect_timeout_ms' if that is less;
       the message names the one that ran out. */
    bool call_bound = deadline_ms < now + connect_timeout_ms;
    uint64_t until = call_bound ? deadline_ms : now + connect_timeout_ms;
    uint64_t shown = call_bound ? timeout_ms : connect_timeout_ms;
    sluice__vk_wire *w = wire_new(n);
    int err;

    *out = NULL;
    if (w == NULL)
        return SLUICE_ENOMEM;
    if (until <= now) {
        sluice__vk_wire_close(w);
        return sluice__vk_timed_out(n, "connect", shown);
    }
    if ((err = w->t->open(w, n, tls, until, shown)) < 0) {
        w->t = NULL; /* the transport closed what it opened */
        sluice__vk_wire_close(w);
        return err;
    }
    wire_caps(w, caps, max_bytes, max_elements);
    *out = w;
    return SLUICE_OK;
}

int sluice__vk_wire_start(sluice__vk_wire **out, sluice__vk_caps *caps,
                          const sluice__vk_node *n,
                          const struct sluice__vk_tls *tls, uint64_t max_bytes,
                          uint64_t max_elements, int *wait_fd, short *want)
{
    sluice__vk_wire *w = wire_new(n);
    int rc;

    *out = NULL;
    *wait_fd = -1;
    *want = 0;
    if (w == NULL)
        return SLUICE_ENOMEM;
    if ((rc = w->t->start(w, n, tls, wait_fd, want)) < 0) {
        sluice__vk_wire_close(w);
        return rc;
    }
    wire_caps(w, caps, max_bytes, max_elements);
    *out = w;
    return rc;
}

int sluice__vk_wire_resume(sluice__vk_wire *w, const sluice__vk_node *n,
                           int *wait_fd, short *want)
{
    *want = 0;
    return w->t->resume(w, n, wait_fd, want);
}

void sluice__vk_wire_close(sluice__vk_wire *w)
{
    if (w == NULL)
        return;
    if (w->t != NULL)
        w->t->close(w);
    if (w->reader != NULL)
        redisReaderFree(w->reader);
    free(w->obuf);
    free(w);
}

/* ---- Writing ------------------------------------------------------------------------ */

int sluice__vk_wire_append(sluice__vk_wire *w, const char *cmd, size_t len)
{
    if (w->opos == w->olen)
        w->opos = w->olen = 0; /* all written: start over */
    if (w->olen + len > w->ocap) {
        size_t cap = w->ocap < 4096 ? 4096 : w->ocap;
        char *b;

        while (cap < w->olen + len)
            cap *= 2;
        if ((b = realloc(w->obuf, cap)) == NULL)
            return sluice__error(SLUICE_ENOMEM, "no memory for a command of "
                                 "%zu bytes", len);
        w->obuf = b;
        w->ocap = cap;
    }
    memcpy(w->obuf + w->olen, cmd, len);
    w->olen += len;
    return SLUICE_OK;
}

int sluice__vk_wire_append_argv(sluice__vk_wire *w, int argc, const char **argv,
                                const size_t *lens)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    int err;

    if (len < 0)
        return sluice__error(SLUICE_ENOMEM, "no memory for a command");
    err = sluice__vk_wire_append(w, cmd, (size_t)len);
    redisFreeCommand(cmd);
    return err;
}

int sluice__vk_wire_write(const sluice__vk_node *n, sluice__vk_wire *w,
                          uint64_t deadline_ms, uint64_t timeout_ms)
{
    while (w->opos < w->olen) {
        short want = 0;
        ssize_t put = w->t->write(w, n, w->obuf + w->opos, w->olen - w->opos,
                                  &want);

        if (put < 0)
            return (int)put;
        w->opos += (size_t)put;
        if (put == 0 && !sluice__vk_fd_wait(w->fd, want, deadline_ms))
            return sluice__vk_timed_out(n, "write", timeout_ms);
    }
    w->opos = w->olen = 0;
    return SLUICE_OK;
}

int sluice__vk_wire_flush(const sluice__vk_node *n, sluice__vk_wire *w,
                          short *want)
{
    while (w->opos < w->olen) {
        ssize_t put;

        *want = 0;
        put = w->t->write(w, n, w->obuf + w->opos, w->olen - w->opos, want);
        if (put < 0)
            return (int)put;
        if (put == 0)
            return 1;
        w->opos += (size_t)put;
    }
    w->opos = w->olen = 0;
    return SLUICE_OK;
}

/* ---- Reading ------------------------------------------------------------------------ */

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

/*
 * Reads what the transport of 'w' has now into its reader: the bytes (> 0),
 * 0 with '*want' when there are none yet, or the error.
 */
static ssize_t read_some(const sluice__vk_node *n, sluice__vk_wire *w,
                         short *want)
{
    char buf[16 * 1024];
    ssize_t got = w->t->read(w, n, buf, sizeof(buf), want);

    if (got > 0 && redisReaderFeed(w->reader, buf, (size_t)got) != REDIS_OK)
        return sluice__error(SLUICE_ENOMEM, "valkey %s: read: out of memory",
                             n->name);
    return got;
}

int sluice__vk_wire_next(const sluice__vk_node *n, sluice__vk_wire *w,
                         sluice__vk_caps *caps, redisReply **out)
{
    void *reply = NULL;

    if (w->reader->ridx < 0) { /* a new reply starts: count it afresh */
        caps->bytes = caps->elements = 0;
        caps->over = false;
        caps->bad = NULL;
    }
    if (redisReaderGetReply(w->reader, &reply) != REDIS_OK)
        return reader_fail(n, w, caps, "read");
    if (reply != NULL) {
        *out = reply;
        return 1;
    }
    /* What is buffered and not yet a reply counts against the cap: a
       length announced but not yet sent must not grow it unbounded. */
    if (w->reader->len - w->reader->pos > caps->max_bytes) {
        caps->over = true;
        caps->bytes = w->reader->len - w->reader->pos;
        return reader_fail(n, w, caps, "read");
    }
    if (bare_lf(w->reader))
        return sluice__error(SLUICE_EPROTO, "valkey %s: read: not a "
                             "reply (a line ended by LF without CR)",
                             n->name);
    return 0;
}

int sluice__vk_wire_fill(const sluice__vk_node *n, sluice__vk_wire *w,
                         short *want)
{
    ssize_t got;

    *want = POLLIN;
    got = read_some(n, w, want);
    return got > 0 ? 1 : (int)got;
}

int sluice__vk_wire_read(const sluice__vk_node *n, sluice__vk_wire *w,
                         sluice__vk_caps *caps, uint64_t deadline_ms,
                         uint64_t timeout_ms, redisReply **out)
{
    for (bool first = true;; first = false) {
        short want = POLLIN;
        ssize_t got;
        int rc;

        if ((rc = sluice__vk_wire_next(n, w, caps, out)) != 0)
            return rc < 0 ? rc : SLUICE_OK;
        /* Past the deadline, what the transport holds already is read once
           (a wait of 0 ms takes what is there); after that, bytes that
           come late are a timeout, however fast they keep coming. */
        if (!first && sluice__monotonic_ms() >= deadline_ms)
            return sluice__vk_timed_out(n, "read", timeout_ms);
        if ((got = read_some(n, w, &want)) < 0)
            return (int)got;
        if (got == 0 && !sluice__vk_fd_wait(w->fd, want, deadline_ms))
            return sluice__vk_timed_out(n, "read", timeout_ms);
    }
}

int sluice__vk_wire_peek(const sluice__vk_node *n, sluice__vk_wire *w)
{
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    short want = 0;
    ssize_t got;

    if (w->reader->len > w->reader->pos)
        return 1;
    if (!w->t->pending(w) && poll(&p, 1, 0) <= 0)
        return 0;
    /* Something came: a reply, a close, or what the transport takes for
       itself (TLS: a session ticket, which reads as no byte). */
    got = read_some(n, w, &want);
    return got > 0 ? 1 : got == 0 ? 0 : -1;
}

bool sluice__vk_wire_buffered(const sluice__vk_wire *w)
{
    return w->reader->len > w->reader->pos || w->t->pending(w);
}
