/*
 * take.c - the dequeue point and the end of a job's lease: take, and
 * complete, fail and extend (the script queue_done.lua), each in halves.
 *
 * Each operation is built (sluice__queue_*_build: arguments checked, keys
 * and clock written), run, and read (sluice__queue_*_read: the reply
 * checked, the outcome and its error). The blocking calls here run the
 * call on the store's server; src/async/queue.c sends the same call
 * without blocking and reads its reply with the same reader.
 */
#include "queue/queue.h"

#include <stdlib.h>
#include <string.h>

/* An integer in lo..hi, element 'i' of a queue script's reply. */
static int reply_int(const redisReply *r, size_t i, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    return sluice__queue_reply_u64(r, i, "queue script", lo, hi, out);
}

/* ---- Taking ------------------------------------------------------------------------- */

int sluice__queue_take_build(sluice__qsend *q, const sluice_store *store,
                             const char *call, const char *queue,
                             size_t queue_len, uint64_t lease_ms,
                             uint64_t stalled_limit)
{
    static const int which[] = {
        SLUICE__QK_WAIT, SLUICE__QK_ACTIVE,  SLUICE__QK_DELAYED,
        SLUICE__QK_DATA, SLUICE__QK_META,    SLUICE__QK_LIMITER,
        SLUICE__QK_ATTEMPTS, SLUICE__QK_FAILED};
    const char *args[3] = {q->num[0], q->num[1], NULL}; /* NULL: the clock */
    size_t lens[3];
    sluice__qserver s;
    int err;

    memset(q->key, 0, sizeof(q->key));
    q->args = q->args_in; /* freeable whatever fails below */
    if (lease_ms < 1 || lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is out of range "
                             "1..2^40", (unsigned long long)lease_ms);
    if ((err = sluice__qserver_of(&s, store, call)) < 0)
        return err;
    lens[0] = sluice__u64_text(q->num[0], lease_ms);
    lens[1] = sluice__u64_text(q->num[1], stalled_limit);
    return sluice__qsend_build(q, &s, queue, queue_len,
                               &sluice__script_queue_take, which, 8, 3, args,
                               lens);
}

/* The "emq.rate_limit.hit" receipt of a deferred take. */
static void emit_deferred(const char *queue, size_t queue_len, uint64_t wait,
                          uint64_t max)
{
    char limit[24];
    sluice_measurement m[] = {{"delay_ms", (double)wait}};
    sluice_metadata md[] = {
        {"queue", queue, queue_len},
        {"algorithm", "fixed", 5},
        {"limit", limit, 0},
    };
    sluice_event ev = {SLUICE_EVENT_EMQ_RATE_LIMIT_HIT, m, 1, md, 3};

    md[2].value_len = sluice__u64_text(limit, max);
    sluice_telemetry_emit(&ev);
}

/* Reads take's reply for a job: {1, id, attempt, payload, lease}. */
static int take_job(const redisReply *r, sluice_job *job)
{
    const redisReply *p = r->elements == 5 ? r->element[3] : NULL;
    int err = 0;

    if (p == NULL || p->type != REDIS_REPLY_STRING ||
        (err = reply_int(r, 1, 1, SLUICE_MAX_MAX, &job->id)) < 0 ||
        (err = reply_int(r, 2, 1, SLUICE_MAX_MAX, &job->attempt)) < 0 ||
        (err = reply_int(r, 4, 1, SLUICE_MAX_MAX, &job->lease)) < 0) {
        sluice_job_clear(job);
        return err < 0 ? err : sluice__error(SLUICE_EPROTO, "queue take: "
                                             "malformed job");
    }
    if ((job->payload = malloc(p->len + 1)) == NULL) {
        /* The job stays active and comes back when its lease ends. */
        sluice_job_clear(job);
        return sluice__error(SLUICE_ENOMEM, "cannot hold a payload of %zu "
                             "bytes", (size_t)p->len);
    }
    memcpy(job->payload, p->str, p->len);
    job->payload[p->len] = '\0';
    job->payload_len = p->len;
    return SLUICE_OK;
}

/* Reads take's reply for no job: {0, wait_ms, max} or {-1, next_ms}. */
static int take_wait(const redisReply *r, sluice_take_status *status,
                     uint64_t *wait_ms, uint64_t *max)
{
    bool deferred = r->element[0]->integer == 0;
    uint64_t n = 0;
    int err;

    if (deferred)
        err = sluice__queue_reply_array(r, 3, "queue take");
    else
        err = sluice__queue_reply_array(r, 2, "queue take");
    if (err == 0 && deferred &&
        (err = reply_int(r, 1, 1, SLUICE_NOW_MAX_MS, &n)) == 0)
        err = reply_int(r, 2, 0, SLUICE_MAX_MAX, max);
    else if (err == 0 && !deferred)
        err = reply_int(r, 1, 0, SLUICE_NOW_MAX_MS, &n);
    if (err == 0) {
        *wait_ms = n;
        *status = deferred ? SLUICE_TAKE_DEFERRED : SLUICE_TAKE_EMPTY;
    }
    return err;
}

int sluice__queue_take_read(const redisReply *r, const char *queue,
                            size_t queue_len, sluice_take_status *status,
                            uint64_t *wait_ms, sluice_job *job)
{
    uint64_t max = 0;
    int err = 0;

    *status = SLUICE_TAKE_EMPTY;
    *wait_ms = 0;
    memset(job, 0, sizeof(*job));
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[0]->integer < -1 || r->element[0]->integer > 1)
        err = sluice__error(SLUICE_EPROTO, "queue take: malformed reply");
    else if (r->element[0]->integer == 1 && (err = take_job(r, job)) == 0)
        *status = SLUICE_TAKE_JOB;
    else if (r->element[0]->integer != 1)
        err = take_wait(r, status, wait_ms, &max);
    if (err == 0 && *status == SLUICE_TAKE_DEFERRED &&
        sluice__telemetry_active())
        emit_deferred(queue, queue_len, *wait_ms, max);
    return err;
}

int sluice_queue_take(sluice_take_status *status, uint64_t *wait_ms,
                      sluice_job *job, sluice_store *store, const char *queue,
                      size_t queue_len, uint64_t lease_ms)
{
    return sluice__queue_take(status, wait_ms, job, store, queue, queue_len,
                              lease_ms, SLUICE__STALLED_LIMIT);
}

int sluice__queue_take(sluice_take_status *status, uint64_t *wait_ms,
                       sluice_job *job, sluice_store *store, const char *queue,
                       size_t queue_len, uint64_t lease_ms,
                       uint64_t stalled_limit)
{
    sluice__qsend q;
    redisReply *r = NULL;
    int err;

    if (status == NULL || wait_ms == NULL || job == NULL)
        return sluice__error(SLUICE_EINVAL, "status, wait_ms or job is NULL");
    *status = SLUICE_TAKE_EMPTY;
    *wait_ms = 0;
    sluice_job_clear(job);
    err = sluice__queue_take_build(&q, store, "sluice_queue_take", queue,
                                   queue_len, lease_ms, stalled_limit);
    if (err == 0)
        err = sluice__qsend_run(&q, &r);
    sluice__qsend_free(&q);
    if (err < 0)
        return err;
    err = sluice__queue_take_read(r, queue, queue_len, status, wait_ms, job);
    freeReplyObject(r);
    return err;
}

/* ---- Finishing ------------------------------------------------------------------------ */

/* What a finish op is called in queue_done.lua, and what it may answer
   besides SLUICE__QDONE_LOST: bit (1 << n) for outcome n. */
static const struct finish_op {
    const char *name;
    unsigned outcomes;
} finish_ops[] = {
    [SLUICE__QF_COMPLETE] = {"complete", 1u << SLUICE__QDONE_COMPLETED},
    [SLUICE__QF_FAIL] = {"fail", 1u << SLUICE__QDONE_RETRY |
                                     1u << SLUICE__QDONE_DEAD},
    [SLUICE__QF_EXTEND] = {"extend", 1u << SLUICE__QDONE_EXTENDED},
};

/* The arguments 'op' takes, in range? */
static int finish_check(sluice__qfinish op, uint64_t a, uint64_t b)
{
    if (op == SLUICE__QF_FAIL && (a < 1 || b > SLUICE_WINDOW_MAX_MS))
        return sluice__error(SLUICE_ERANGE, "max_attempts must be >= 1 and "
                             "backoff_ms <= 2^40");
    if (op == SLUICE__QF_EXTEND && (a < 1 || a > SLUICE_WINDOW_MAX_MS))
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is out of range "
                             "1..2^40", (unsigned long long)a);
    return SLUICE_OK;
}

int sluice__queue_finish_build(sluice__qsend *q, const sluice_store *store,
                               const char *call, sluice__qfinish op,
                               const char *queue, size_t queue_len,
                               uint64_t id, uint64_t lease, uint64_t a,
                               uint64_t b)
{
    static const int which[] = {
        SLUICE__QK_WAIT, SLUICE__QK_ACTIVE,   SLUICE__QK_DELAYED,
        SLUICE__QK_DATA, SLUICE__QK_META,     SLUICE__QK_ATTEMPTS,
        SLUICE__QK_FAILED};
    const char *args[6] = {q->num[0], q->num[1], finish_ops[op].name,
                           q->num[2], q->num[3], NULL}; /* NULL: the clock */
    size_t lens[6];
    sluice__qserver s;
    int err;

    memset(q->key, 0, sizeof(q->key));
    q->args = q->args_in; /* freeable whatever fails below */
    if ((err = finish_check(op, a, b)) < 0 ||
        (err = sluice__qserver_of(&s, store, call)) < 0)
        return err;
    lens[0] = sluice__u64_text(q->num[0], id);
    lens[1] = sluice__u64_text(q->num[1], lease);
    lens[2] = strlen(args[2]);
    lens[3] = sluice__u64_text(q->num[2], a);
    lens[4] = sluice__u64_text(q->num[3], b);
    return sluice__qsend_build(q, &s, queue, queue_len,
                               &sluice__script_queue_done, which, 7, 6, args,
                               lens);
}

int sluice__queue_finish_read(const redisReply *r, sluice__qfinish op,
                              uint64_t id, uint64_t lease, uint64_t *outcome)
{
    int err = reply_int(r, 0, 0, 4, outcome);

    if (err == 0 && *outcome != SLUICE__QDONE_LOST &&
        !(finish_ops[op].outcomes & (1u << *outcome)))
        err = sluice__error(SLUICE_EPROTO, "queue %s: the script answered "
                            "%llu", finish_ops[op].name,
                            (unsigned long long)*outcome);
    if (err == 0 && *outcome == SLUICE__QDONE_LOST)
        err = sluice__error(SLUICE_ELEASE, "job %llu: the lease %llu is no "
                            "longer held (the job was finished already, or "
                            "the lease ran out and the job went back to "
                            "wait)", (unsigned long long)id,
                            (unsigned long long)lease);
    return err;
}

/* A blocking finish: build, run, read. */
static int finish(uint64_t *outcome, sluice_store *store, const char *call,
                  sluice__qfinish op, const char *queue, size_t queue_len,
                  uint64_t id, uint64_t lease, uint64_t a, uint64_t b)
{
    sluice__qsend q;
    redisReply *r = NULL;
    int err;

    *outcome = SLUICE__QDONE_LOST;
    err = sluice__queue_finish_build(&q, store, call, op, queue, queue_len, id,
                                     lease, a, b);
    if (err == 0)
        err = sluice__qsend_run(&q, &r);
    sluice__qsend_free(&q);
    if (err < 0)
        return err;
    err = sluice__queue_finish_read(r, op, id, lease, outcome);
    freeReplyObject(r);
    return err;
}

int sluice_queue_complete(sluice_store *store, const char *queue,
                          size_t queue_len, uint64_t id, uint64_t lease)
{
    uint64_t outcome;

    return finish(&outcome, store, "sluice_queue_complete",
                  SLUICE__QF_COMPLETE, queue, queue_len, id, lease, 0, 0);
}

int sluice_queue_fail(int *dead, sluice_store *store, const char *queue,
                      size_t queue_len, uint64_t id, uint64_t lease,
                      uint64_t max_attempts, uint64_t backoff_ms)
{
    uint64_t outcome;
    int err = finish(&outcome, store, "sluice_queue_fail", SLUICE__QF_FAIL,
                     queue, queue_len, id, lease, max_attempts, backoff_ms);

    if (dead != NULL)
        *dead = outcome == SLUICE__QDONE_DEAD;
    return err;
}

int sluice_queue_extend(sluice_store *store, const char *queue,
                        size_t queue_len, uint64_t id, uint64_t lease,
                        uint64_t lease_ms)
{
    uint64_t outcome;

    return finish(&outcome, store, "sluice_queue_extend", SLUICE__QF_EXTEND,
                  queue, queue_len, id, lease, lease_ms, 0);
}
