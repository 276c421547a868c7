/*
 * queue.c - the rate-limited job queue on a server store.
 *
 * Each operation is one script of src/queue/lua/queue_*.lua, run on the
 * queue's keys, which all share the hashtag {q} (see sluice.h). This file
 * builds the keys, runs the scripts and reads their replies. The dequeue
 * point, queue_take.lua, is where the queue's budget is enforced: the
 * reference design's fixed window on emq:{q}:limiter, capped by the field
 * 'max' of emq:{q}:meta.
 */
#include "queue/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_BUF 192

/* ---- Keys, scripts and replies ------------------------------------------------------ */

enum { K_WAIT, K_ACTIVE, K_DELAYED, K_DATA, K_META, K_LIMITER, K_ATTEMPTS,
       K_FAILED, NKEYS };

static const char *const key_suffix[NKEYS] = {
    "wait", "active", "delayed", "data", "meta", "limiter", "attempts",
    "failed"};

/* The keys of one queue. */
typedef struct qkeys {
    char buf[NKEYS][KEY_BUF];
    char *key[NKEYS];
    size_t lens[NKEYS];
} qkeys;

static void qkeys_free(qkeys *k)
{
    for (int i = 0; i < NKEYS; i++)
        if (k->key[i] != NULL && k->key[i] != k->buf[i])
            free(k->key[i]);
}

static int qkeys_build(qkeys *k, const sluice__qserver *s, const char *queue,
                       size_t queue_len)
{
    memset(k->key, 0, sizeof(k->key));
    for (int i = 0; i < NKEYS; i++) {
        k->key[i] = sluice__key_build(k->buf[i], KEY_BUF, &k->lens[i],
                                      s->prefix, queue, queue_len,
                                      key_suffix[i]);
        if (k->key[i] == NULL) {
            qkeys_free(k);
            return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
        }
    }
    return SLUICE_OK;
}

int sluice__qserver_of(sluice__qserver *out, const sluice_store *store,
                       const char *call)
{
    int err = sluice__store_server(&out->ops, &out->impl, store, call);

    if (err == 0) {
        out->prefix = store->backend.emq_prefix;
        out->max_payload = store->backend.max_payload;
        err = sluice__store_now(out->now, &out->now_len, store);
    }
    return err;
}

/* A call's script, keys and arguments; an argument NULL is the call's
   clock (the server's now_len and now: src/queue/lua/now.lua). */
typedef struct qcall {
    const sluice__script *script;
    const int *which; /* the keys, in order */
    int nkeys;
    const char **args;
    const size_t *lens;
    int nargs;
} qcall;

/* Runs call 'c' on queue 'queue' of the server 's'. */
static int queue_eval(redisReply **out, const sluice__qserver *s,
                      const char *queue, size_t queue_len, const qcall *c)
{
    size_t argc = (size_t)(c->nkeys + c->nargs);
    const char *stack_a[NKEYS + 8], **a = stack_a;
    size_t stack_l[NKEYS + 8], *l = stack_l;
    qkeys k;
    int err;

    if (queue == NULL && queue_len > 0)
        return sluice__error(SLUICE_EINVAL, "queue is NULL");
    if (argc > NKEYS + 8 && ((a = malloc(argc * sizeof(*a))) == NULL ||
                             (l = malloc(argc * sizeof(*l))) == NULL)) {
        if (a != stack_a)
            free(a);
        return sluice__error(SLUICE_ENOMEM, "no memory for a script call");
    }
    if ((err = qkeys_build(&k, s, queue, queue_len)) == 0) {
        for (int i = 0; i < c->nkeys; i++) {
            a[i] = k.key[c->which[i]];
            l[i] = k.lens[c->which[i]];
        }
        for (int i = 0; i < c->nargs; i++) {
            a[c->nkeys + i] = c->args[i] != NULL ? c->args[i] : s->now;
            l[c->nkeys + i] = c->args[i] != NULL ? c->lens[i] : s->now_len;
        }
        err = s->ops->eval(s->impl, c->script, c->nkeys, (int)argc, a, l, out);
        qkeys_free(&k);
    }
    if (a != stack_a) {
        free(a);
        free(l);
    }
    return err;
}

int sluice__queue_reply_u64(const redisReply *r, size_t i, const char *what,
                            uint64_t lo, uint64_t hi, uint64_t *out)
{
    const redisReply *e = r;

    if (r->type == REDIS_REPLY_ARRAY) {
        if (i >= r->elements)
            return sluice__error(SLUICE_EPROTO, "%s: short reply", what);
        e = r->element[i];
    } else if (i != 0) {
        return sluice__error(SLUICE_EPROTO, "%s: expected a list", what);
    }
    if (e->type != REDIS_REPLY_INTEGER)
        return sluice__error(SLUICE_EPROTO, "%s: expected an integer", what);
    if (e->integer < 0 || (uint64_t)e->integer < lo ||
        (uint64_t)e->integer > hi)
        return sluice__error(SLUICE_EPROTO, "%s: %lld is out of range "
                             "%llu..%llu", what, e->integer,
                             (unsigned long long)lo, (unsigned long long)hi);
    *out = (uint64_t)e->integer;
    return SLUICE_OK;
}

/* An integer in lo..hi, element 'i' of a queue script's reply. */
static int reply_int(const redisReply *r, size_t i, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    return sluice__queue_reply_u64(r, i, "queue script", lo, hi, out);
}

/* A reply that must be an array of exactly 'n' elements. */
static int reply_array(const redisReply *r, size_t n, const char *what)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return sluice__error(SLUICE_EPROTO, "%s: expected a list of %zu",
                             what, n);
    return SLUICE_OK;
}

/* ---- The registry and the wake-up channel ------------------------------------------- */

/* Registers 'queue' for workers that serve a pattern. */
static void registry_add(const sluice__qserver *s, const char *queue,
                         size_t queue_len)
{
    char buf[128];
    size_t n = 0;
    char *key = sluice__queue_registry(buf, sizeof(buf), &n, s);
    const char *argv[] = {"SADD", key, queue};
    size_t lens[] = {4, n, queue_len};
    redisReply *r = NULL;

    /* Best effort: a queue missing from it is still served by name. */
    if (key != NULL && s->ops->command(s->impl, key, n, 3, argv, lens, &r) == 0)
        freeReplyObject(r);
    if (key != buf)
        free(key);
}

/*
 * Tells sleeping workers that 'queue' has a job (best effort: a worker that
 * misses it asks again within a second).
 */
static void wake_workers(const sluice__qserver *s, const char *queue,
                         size_t queue_len)
{
    char channel[SLUICE__CHANNEL_MAX];
    const char *argv[3] = {"PUBLISH", channel, queue_len > 0 ? queue : ""};
    size_t lens[3] = {7, 0, queue_len};
    redisReply *r = NULL;

    sluice__queue_channel(channel, s);
    lens[1] = strlen(channel);
    if (s->ops->command(s->impl, channel, lens[1], 3, argv, lens, &r) == 0)
        freeReplyObject(r);
}

/* ---- Adding and taking ---------------------------------------------------------------- */

void sluice_job_clear(sluice_job *job)
{
    if (job == NULL)
        return;
    free(job->payload);
    memset(job, 0, sizeof(*job));
}

#define ADD_BATCH_JOBS 512
#define ADD_BATCH_BYTES ((size_t)32 << 20)

/* Checks every job of a bulk add before anything is sent. */
static int add_check(const sluice__qserver *s, const sluice_new_job *jobs,
                     size_t n)
{
    if (jobs == NULL && n > 0)
        return sluice__error(SLUICE_EINVAL, "jobs is NULL");
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].payload == NULL && jobs[i].payload_len > 0)
            return sluice__error(SLUICE_EINVAL, "job %zu: payload is NULL", i);
        if (jobs[i].delay_ms > SLUICE_WINDOW_MAX_MS)
            return sluice__error(SLUICE_ERANGE, "job %zu: delay %llu ms is "
                                 "above 2^40", i,
                                 (unsigned long long)jobs[i].delay_ms);
        if (jobs[i].payload_len > s->max_payload)
            return sluice__error(SLUICE_ERANGE, "job %zu: a payload of %zu "
                                 "bytes is over the %llu that a take can "
                                 "read back (raise max_reply_bytes, up to "
                                 "what the server's proto-max-bulk-len of "
                                 "512 MB allows)", i, jobs[i].payload_len,
                                 (unsigned long long)s->max_payload);
    }
    return SLUICE_OK;
}

/* Adds jobs[0..n) (one batch) with one script call; sets their ids. */
static int add_batch(const sluice__qserver *s, const char *queue,
                     size_t queue_len, sluice_new_job *jobs, size_t n)
{
    static const int which[] = {K_WAIT, K_DELAYED, K_DATA, K_META};
    char channel[SLUICE__CHANNEL_MAX], (*delays)[24] = NULL;
    const char **args = malloc((3 + 2 * n) * sizeof(*args));
    size_t *lens = malloc((3 + 2 * n) * sizeof(*lens));
    qcall c = {&sluice__script_queue_add, which, 4, args, lens,
               (int)(3 + 2 * n)};
    redisReply *r = NULL;
    int err = SLUICE_OK;

    if (args == NULL || lens == NULL ||
        (delays = malloc(n * sizeof(*delays))) == NULL)
        err = sluice__error(SLUICE_ENOMEM, "no memory for %zu jobs", n);
    for (size_t i = 0; i < n && err == 0; i++) {
        args[3 + 2 * i] = jobs[i].payload_len > 0 ? jobs[i].payload : "";
        lens[3 + 2 * i] = jobs[i].payload_len;
        args[4 + 2 * i] = delays[i];
        lens[4 + 2 * i] = sluice__u64_text(delays[i], jobs[i].delay_ms);
    }
    if (err == 0) {
        sluice__queue_channel(channel, s);
        args[0] = channel;
        lens[0] = strlen(channel);
        args[1] = queue_len > 0 ? queue : "";
        lens[1] = queue_len;
        args[2] = NULL; /* the clock */
        err = queue_eval(&r, s, queue, queue_len, &c);
    }
    if (err == 0) {
        if ((err = reply_array(r, n, "queue add")) == 0)
            for (size_t i = 0; i < n && err == 0; i++)
                err = reply_int(r, i, 1, SLUICE_MAX_MAX, &jobs[i].id);
        freeReplyObject(r);
    }
    free(args);
    free(lens);
    free(delays);
    return err;
}

int sluice_queue_add_many(sluice_store *store, const char *queue,
                          size_t queue_len, sluice_new_job *jobs, size_t n)
{
    sluice__qserver s;
    int err;

    for (size_t i = 0; i < n && jobs != NULL; i++)
        jobs[i].id = 0;
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_add")) < 0 ||
        (err = add_check(&s, jobs, n)) < 0)
        return err;
    if (queue == NULL && queue_len > 0)
        return sluice__error(SLUICE_EINVAL, "queue is NULL");
    for (size_t at = 0, end; at < n; at = end) {
        size_t bytes = jobs[at].payload_len;

        for (end = at + 1; end < n && end - at < ADD_BATCH_JOBS &&
                           bytes + jobs[end].payload_len <= ADD_BATCH_BYTES;
             end++)
            bytes += jobs[end].payload_len;
        if ((err = add_batch(&s, queue, queue_len, jobs + at, end - at)) < 0)
            return err;
    }
    if (n > 0)
        registry_add(&s, queue, queue_len);
    return SLUICE_OK;
}

int sluice_queue_add(uint64_t *id, sluice_store *store, const char *queue,
                     size_t queue_len, const void *payload, size_t payload_len,
                     uint64_t delay_ms)
{
    sluice_new_job job = {payload, payload_len, delay_ms, 0};
    int err;

    if (id == NULL)
        return sluice__error(SLUICE_EINVAL, "id is NULL");
    err = sluice_queue_add_many(store, queue, queue_len, &job, 1);
    *id = job.id;
    return err;
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
        err = reply_array(r, 3, "queue take");
    else
        err = reply_array(r, 2, "queue take");
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
    static const int which[] = {K_WAIT,    K_ACTIVE,  K_DELAYED,  K_DATA,
                                K_META,    K_LIMITER, K_ATTEMPTS, K_FAILED};
    char lease[24], stalls[24];
    const char *args[3] = {lease, stalls, NULL}; /* NULL: the clock */
    size_t lens[3];
    qcall c = {&sluice__script_queue_take, which, 8, args, lens, 3};
    sluice__qserver s;
    redisReply *r = NULL;
    uint64_t max = 0;
    int err;

    if (status == NULL || wait_ms == NULL || job == NULL)
        return sluice__error(SLUICE_EINVAL, "status, wait_ms or job is NULL");
    *status = SLUICE_TAKE_EMPTY;
    *wait_ms = 0;
    sluice_job_clear(job);
    if (lease_ms < 1 || lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is out of range "
                             "1..2^40", (unsigned long long)lease_ms);
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_take")) < 0)
        return err;
    lens[0] = sluice__u64_text(lease, lease_ms);
    lens[1] = sluice__u64_text(stalls, stalled_limit);
    if ((err = queue_eval(&r, &s, queue, queue_len, &c)) < 0)
        return err;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[0]->integer < -1 || r->element[0]->integer > 1)
        err = sluice__error(SLUICE_EPROTO, "queue take: malformed reply");
    else if (r->element[0]->integer == 1 && (err = take_job(r, job)) == 0)
        *status = SLUICE_TAKE_JOB;
    else if (r->element[0]->integer != 1)
        err = take_wait(r, status, wait_ms, &max);
    freeReplyObject(r);
    if (err == 0 && *status == SLUICE_TAKE_DEFERRED &&
        sluice__telemetry_active())
        emit_deferred(queue, queue_len, *wait_ms, max);
    return err;
}

/* ---- Finishing -------------------------------------------------------------------------- */

/* What a finish may answer: its op, and the outcomes that are not 0. */
static const struct finish_op {
    const char *name;
    unsigned outcomes; /* bit (1 << n): n is an answer of this op */
} FINISH_COMPLETE = {"complete", 1u << 1},
  FINISH_FAIL = {"fail", 1u << 2 | 1u << 3},
  FINISH_EXTEND = {"extend", 1u << 4};

/* complete, fail or extend: the lease is checked by the script. */
static int finish(uint64_t *outcome, sluice_store *store, const char *call,
                  const char *queue, size_t queue_len, const uint64_t nums[4],
                  const struct finish_op *op)
{
    static const int which[] = {K_WAIT, K_ACTIVE,   K_DELAYED, K_DATA,
                                K_META, K_ATTEMPTS, K_FAILED};
    char text[4][24];
    const char *args[6] = {text[0], text[1], op->name, text[2], text[3],
                           NULL}; /* NULL: the clock */
    size_t lens[6];
    qcall c = {&sluice__script_queue_done, which, 7, args, lens, 6};
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if ((err = sluice__qserver_of(&s, store, call)) < 0)
        return err;
    lens[0] = sluice__u64_text(text[0], nums[0]);
    lens[1] = sluice__u64_text(text[1], nums[1]);
    lens[2] = strlen(args[2]);
    lens[3] = sluice__u64_text(text[2], nums[2]);
    lens[4] = sluice__u64_text(text[3], nums[3]);
    if ((err = queue_eval(&r, &s, queue, queue_len, &c)) < 0)
        return err;
    err = reply_int(r, 0, 0, 4, outcome);
    freeReplyObject(r);
    if (err == 0 && *outcome != 0 && !(op->outcomes & (1u << *outcome)))
        err = sluice__error(SLUICE_EPROTO, "queue %s: the script answered "
                            "%llu", op->name, (unsigned long long)*outcome);
    if (err == 0 && *outcome == 0)
        err = sluice__error(SLUICE_ELEASE, "job %llu: the lease %llu is no "
                            "longer held (the job was finished already, or "
                            "the lease ran out and the job went back to "
                            "wait)", (unsigned long long)nums[0],
                            (unsigned long long)nums[1]);
    return err;
}

int sluice_queue_complete(sluice_store *store, const char *queue,
                          size_t queue_len, uint64_t id, uint64_t lease)
{
    const uint64_t nums[4] = {id, lease, 0, 0};
    uint64_t outcome = 0;

    return finish(&outcome, store, "sluice_queue_complete", queue, queue_len,
                  nums, &FINISH_COMPLETE);
}

int sluice_queue_fail(int *dead, sluice_store *store, const char *queue,
                      size_t queue_len, uint64_t id, uint64_t lease,
                      uint64_t max_attempts, uint64_t backoff_ms)
{
    const uint64_t nums[4] = {id, lease, max_attempts, backoff_ms};
    uint64_t outcome = 0;
    int err;

    if (max_attempts < 1 || backoff_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "max_attempts must be >= 1 and "
                             "backoff_ms <= 2^40");
    err = finish(&outcome, store, "sluice_queue_fail", queue, queue_len, nums,
                 &FINISH_FAIL);
    if (dead != NULL)
        *dead = outcome == 3;
    return err;
}

int sluice_queue_extend(sluice_store *store, const char *queue,
                        size_t queue_len, uint64_t id, uint64_t lease,
                        uint64_t lease_ms)
{
    const uint64_t nums[4] = {id, lease, lease_ms, 0};
    uint64_t outcome = 0;

    if (lease_ms < 1 || lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is out of range "
                             "1..2^40", (unsigned long long)lease_ms);
    return finish(&outcome, store, "sluice_queue_extend", queue, queue_len,
                  nums, &FINISH_EXTEND);
}

/* ---- Administration --------------------------------------------------------------------- */

/* Runs one queue_admin.lua operation ('args[0]' names it). */
static int admin(redisReply **out, const sluice__qserver *s, const char *queue,
                 size_t queue_len, int nargs, const char **args,
                 const size_t *lens)
{
    static const int which[] = {K_WAIT, K_ACTIVE,  K_DELAYED,  K_DATA,
                                K_META, K_LIMITER, K_ATTEMPTS, K_FAILED};
    qcall c = {&sluice__script_queue_admin, which, 8, args, lens, nargs};

    return queue_eval(out, s, queue, queue_len, &c);
}

int sluice_queue_retry(int *retried, sluice_store *store, const char *queue,
                       size_t queue_len, uint64_t id)
{
    char ids[24];
    const char *args[2] = {"retry", ids};
    size_t lens[2] = {5, sluice__u64_text(ids, id)};
    sluice__qserver s;
    redisReply *r = NULL;
    uint64_t moved = 0;
    int err;

    if (retried != NULL)
        *retried = 0;
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_retry")) < 0 ||
        (err = admin(&r, &s, queue, queue_len, 2, args, lens)) < 0)
        return err;
    err = reply_int(r, 0, 0, 1, &moved);
    freeReplyObject(r);
    if (err == 0 && moved == 1) {
        if (retried != NULL)
            *retried = 1;
        wake_workers(&s, queue, queue_len);
    }
    return err;
}

int sluice_queue_job_state(sluice_job_state *state, sluice_store *store,
                           const char *queue, size_t queue_len, uint64_t id,
                           uint64_t lease)
{
    char ids[24], leases[24];
    const char *args[3] = {"state", ids, leases};
    size_t lens[3] = {5, sluice__u64_text(ids, id),
                      sluice__u64_text(leases, lease)};
    sluice__qserver s;
    redisReply *r = NULL;
    uint64_t where = 0;
    int err;

    if (state == NULL)
        return sluice__error(SLUICE_EINVAL, "state is NULL");
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_job_state")) < 0 ||
        (err = admin(&r, &s, queue, queue_len, 3, args, lens)) < 0)
        return err;
    err = sluice__queue_reply_u64(r, 0, "queue state", SLUICE_JOB_HELD,
                                  SLUICE_JOB_GONE, &where);
    freeReplyObject(r);
    if (err == 0)
        *state = (sluice_job_state)where;
    return err;
}

int sluice_queue_failed(uint64_t *ids, size_t *n, sluice_store *store,
                        const char *queue, size_t queue_len)
{
    char count[24];
    const char *args[2] = {"failed", count};
    size_t lens[2];
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if (n == NULL || (ids == NULL && *n > 0))
        return sluice__error(SLUICE_EINVAL, "ids or n is NULL");
    if (*n == 0)
        return SLUICE_OK;
    lens[0] = 6;
    lens[1] = sluice__u64_text(count, *n > SLUICE_MAX_MAX ? SLUICE_MAX_MAX
                                                           : *n);
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_failed")) < 0 ||
        (err = admin(&r, &s, queue, queue_len, 2, args, lens)) < 0)
        return err;
    if (r->type != REDIS_REPLY_ARRAY || r->elements > *n) {
        freeReplyObject(r);
        return sluice__error(SLUICE_EPROTO, "queue failed: expected a list of "
                             "at most %zu", *n);
    }
    for (size_t i = 0; i < r->elements && err == 0; i++) {
        const redisReply *e = r->element[i];

        if (e->type != REDIS_REPLY_STRING ||
            sluice__parse_u64(e->str, e->len, 1, SLUICE_MAX_MAX, &ids[i]) < 0)
            err = sluice__error(SLUICE_EPROTO, "queue failed: element %zu is "
                                "no job id", i);
    }
    if (err == 0)
        *n = r->elements;
    freeReplyObject(r);
    return err;
}

int sluice_queue_set_cap(sluice_store *store, const char *queue,
                         size_t queue_len, uint64_t max, uint64_t duration_ms)
{
    char maxs[24], durs[24];
    const char *args[3] = {"cap", maxs, durs};
    size_t lens[3] = {3, sluice__u64_text(maxs, max),
                      sluice__u64_text(durs, duration_ms)};
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if (max > SLUICE_MAX_MAX ||
        (max > 0 && (duration_ms < 1 || duration_ms > SLUICE_WINDOW_MAX_MS)))
        return sluice__error(SLUICE_ERANGE, "a cap needs max <= 2^53 - 1 and "
                             "a duration of 1..2^40 ms");
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_set_cap")) < 0 ||
        (err = admin(&r, &s, queue, queue_len, 3, args, lens)) < 0)
        return err;
    freeReplyObject(r);
    registry_add(&s, queue, queue_len);
    return SLUICE_OK;
}

int sluice_queue_stats_get(sluice_queue_stats *out, sluice_store *store,
                           const char *queue, size_t queue_len)
{
    const char *args[1] = {"stats"};
    size_t lens[1] = {5};
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "stats is NULL");
    memset(out, 0, sizeof(*out));
    if ((err = sluice__qserver_of(&s, store, "sluice_queue_stats_get")) < 0 ||
        (err = admin(&r, &s, queue, queue_len, 1, args, lens)) < 0)
        return err;
    err = reply_array(r, 9, "queue stats");
    {
        /* Taken only now: '&out->...' of a NULL 'out' is undefined. */
        uint64_t *fields[] = {&out->waiting, &out->active,  &out->delayed,
                              &out->failed,  &out->completed, &out->max,
                              &out->duration_ms, &out->count, &out->wait_ms};

        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && err == 0;
             i++)
            err = reply_int(r, i, 0, i == 8 ? SLUICE_NOW_MAX_MS
                                            : (uint64_t)INT64_MAX,
                            fields[i]);
    }
    freeReplyObject(r);
    return err;
}
