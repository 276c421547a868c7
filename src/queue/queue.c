/*
 * queue.c - the rate-limited job queue on a server store.
 *
 * Each operation is one script of src/queue/lua/queue_*.lua, run on the
 * queue's keys, which all share the hashtag {q} (see sluice.h). This file
 * adds jobs and administers a queue; take.c takes and finishes jobs (the
 * dequeue point, queue_take.lua, is where the queue's budget is enforced:
 * the reference design's fixed window on emq:{q}:limiter, capped by the
 * field 'max' of emq:{q}:meta); call.c builds and sends the calls.
 */
#include "queue/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Scripts and replies ------------------------------------------------------------ */

enum { K_WAIT = SLUICE__QK_WAIT, K_ACTIVE = SLUICE__QK_ACTIVE,
       K_DELAYED = SLUICE__QK_DELAYED, K_DATA = SLUICE__QK_DATA,
       K_META = SLUICE__QK_META, K_LIMITER = SLUICE__QK_LIMITER,
       K_ATTEMPTS = SLUICE__QK_ATTEMPTS, K_FAILED = SLUICE__QK_FAILED };

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
    sluice__qsend q;
    int err = sluice__qsend_build(&q, s, queue, queue_len, c->script,
                                  c->which, c->nkeys, c->nargs, c->args,
                                  c->lens);

    if (err == 0)
        err = sluice__qsend_run(&q, out);
    sluice__qsend_free(&q);
    return err;
}

/* An integer in lo..hi, element 'i' of a queue script's reply. */
static int reply_int(const redisReply *r, size_t i, uint64_t lo, uint64_t hi,
                     uint64_t *out)
{
    return sluice__queue_reply_u64(r, i, "queue script", lo, hi, out);
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
        if ((err = sluice__queue_reply_array(r, n, "queue add")) == 0)
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
    err = sluice__queue_reply_array(r, 9, "queue stats");
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
