/*
 * queue.c - the job queue through the async API: take, complete, fail and
 * extend (sluice/async.h's queue section).
 *
 * Each call is the blocking call's three halves with the middle one
 * swapped: the same builder (src/queue/take.c: every check, the keys, the
 * clock argument read at the start), sluice__async_eval() in place of the
 * blocking run, and the same reader of the reply (the status, the job, the
 * wait, the "emq.rate_limit.hit" event of a deferred take, SLUICE_ELEASE).
 * So the async calls answer what the blocking ones answer on the same
 * state, with the same messages.
 *
 * The queue's scripts have no twin in the native module (only the queue
 * limiter's reads do: SLUICE.EMQTTL and SLUICE.EMQINCR, src/queue/
 * limiter.c), so these calls always run the scripts, as the blocking ones
 * do.
 */
#include "async/async.h"
#include "queue/queue.h"

#include <stdlib.h>
#include <string.h>

/* ---- Calls in flight -------------------------------------------------------------- */

/* One queue call waiting for its reply: what its reader needs. */
typedef struct qpending {
    union {
        sluice_async_take_cb take;
        sluice_async_done_cb done;
        sluice_async_fail_cb fail;
    } cb;
    void *user;
    sluice__qfinish op; /* for a finish */
    uint64_t id, lease; /* for a finish's SLUICE_ELEASE message */
    size_t queue_len;   /* for a take's event: the name follows */
    char queue[];
} qpending;

static qpending *qpending_new(const char *queue, size_t queue_len,
                              void *user)
{
    qpending *p = malloc(sizeof(*p) + queue_len + 1);

    if (p == NULL) {
        sluice__error(SLUICE_ENOMEM, "no memory for a queue call");
        return NULL;
    }
    memset(p, 0, sizeof(*p));
    p->user = user;
    p->queue_len = queue_len;
    if (queue_len > 0)
        memcpy(p->queue, queue, queue_len);
    p->queue[queue_len] = '\0';
    return p;
}

/*
 * Sends built call 'q' (then freed) through the handle; 'p' is the reply's
 * ('fn' frees it) from here on, or freed at once if the call does not start.
 */
static int qsend_async(sluice_async *a, sluice__qsend *q, int err,
                       sluice__async_reply_fn fn, qpending *p)
{
    if (err == 0)
        err = sluice__async_eval(a, q->script, NULL, q->nkeys, q->argc,
                                 q->args, q->lens, fn, p);
    sluice__qsend_free(q);
    if (err < 0)
        free(p);
    return err;
}

/* SLUICE_EINVAL for a call with no handle or no callback ('has_cb'). */
static int qcall_check(const sluice_async *a, bool has_cb)
{
    if (a == NULL || !has_cb)
        return sluice__error(SLUICE_EINVAL, "the handle or the callback is "
                             "NULL");
    return SLUICE_OK;
}

/* An error the handle answered ('msg'), as the callback's last error. */
static int reply_error(int err, const char *msg)
{
    return sluice__error(err, "%s", msg != NULL ? msg : sluice_strerror(err));
}

/* ---- Take ------------------------------------------------------------------------- */

static void take_reply(sluice_async *a, int err, redisReply *r,
                       const char *msg, void *arg)
{
    qpending *p = arg;
    sluice_take_status status = SLUICE_TAKE_EMPTY;
    sluice_job job = {0};
    uint64_t wait_ms = 0;

    if (err < 0) {
        reply_error(err, msg);
    } else {
        err = sluice__queue_take_read(r, p->queue, p->queue_len, &status,
                                      &wait_ms, &job);
        freeReplyObject(r);
    }
    if (err < 0)
        p->cb.take(a, err, SLUICE_TAKE_EMPTY, 0, NULL, p->user);
    else
        p->cb.take(a, 0, status, wait_ms, &job, p->user);
    sluice_job_clear(&job); /* a payload the callback did not take */
    free(p);
}

int sluice_async_queue_take(sluice_async *a, const char *queue,
                            size_t queue_len, uint64_t lease_ms,
                            sluice_async_take_cb cb, void *user)
{
    sluice__qsend q;
    qpending *p;
    int err;

    if ((err = qcall_check(a, cb != NULL)) < 0)
        return err;
    err = sluice__queue_take_build(&q, a->store, "sluice_async_queue_take",
                                   queue, queue_len, lease_ms,
                                   SLUICE__STALLED_LIMIT);
    if (err < 0) {
        sluice__qsend_free(&q);
        return err;
    }
    if ((p = qpending_new(queue, queue_len, user)) == NULL) {
        sluice__qsend_free(&q);
        return SLUICE_ENOMEM;
    }
    p->cb.take = cb;
    return qsend_async(a, &q, 0, take_reply, p);
}

/* ---- Complete, fail and extend ------------------------------------------------------ */

static void finish_reply(sluice_async *a, int err, redisReply *r,
                         const char *msg, void *arg)
{
    qpending *p = arg;
    uint64_t outcome = SLUICE__QDONE_LOST;

    if (err < 0) {
        reply_error(err, msg);
    } else {
        err = sluice__queue_finish_read(r, p->op, p->id, p->lease, &outcome);
        freeReplyObject(r);
    }
    if (p->op == SLUICE__QF_FAIL)
        p->cb.fail(a, err, err == 0 && outcome == SLUICE__QDONE_DEAD,
                   p->user);
    else
        p->cb.done(a, err, p->user);
    free(p);
}

/* Starts op 'op' of call 'call'; 'p' is taken (freed on an error). */
static int finish_start(sluice_async *a, const char *call, sluice__qfinish op,
                        const char *queue, size_t queue_len, uint64_t id,
                        uint64_t lease, uint64_t x, uint64_t y, qpending *p)
{
    sluice__qsend q;
    int err = sluice__queue_finish_build(&q, a->store, call, op, queue,
                                         queue_len, id, lease, x, y);

    p->op = op;
    p->id = id;
    p->lease = lease;
    return qsend_async(a, &q, err, finish_reply, p);
}

int sluice_async_queue_complete(sluice_async *a, const char *queue,
                                size_t queue_len, uint64_t id, uint64_t lease,
                                sluice_async_done_cb cb, void *user)
{
    qpending *p;
    int err;

    if ((err = qcall_check(a, cb != NULL)) < 0)
        return err;
    if ((p = qpending_new(NULL, 0, user)) == NULL)
        return SLUICE_ENOMEM;
    p->cb.done = cb;
    return finish_start(a, "sluice_async_queue_complete", SLUICE__QF_COMPLETE,
                        queue, queue_len, id, lease, 0, 0, p);
}

int sluice_async_queue_fail(sluice_async *a, const char *queue,
                            size_t queue_len, uint64_t id, uint64_t lease,
                            uint64_t max_attempts, uint64_t backoff_ms,
                            sluice_async_fail_cb cb, void *user)
{
    qpending *p;
    int err;

    if ((err = qcall_check(a, cb != NULL)) < 0)
        return err;
    if ((p = qpending_new(NULL, 0, user)) == NULL)
        return SLUICE_ENOMEM;
    p->cb.fail = cb;
    return finish_start(a, "sluice_async_queue_fail", SLUICE__QF_FAIL, queue,
                        queue_len, id, lease, max_attempts, backoff_ms, p);
}

int sluice_async_queue_extend(sluice_async *a, const char *queue,
                              size_t queue_len, uint64_t id, uint64_t lease,
                              uint64_t lease_ms, sluice_async_done_cb cb,
                              void *user)
{
    qpending *p;
    int err;

    if ((err = qcall_check(a, cb != NULL)) < 0)
        return err;
    if ((p = qpending_new(NULL, 0, user)) == NULL)
        return SLUICE_ENOMEM;
    p->cb.done = cb;
    return finish_start(a, "sluice_async_queue_extend", SLUICE__QF_EXTEND,
                        queue, queue_len, id, lease, lease_ms, 0, p);
}
