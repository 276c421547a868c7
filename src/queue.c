/*
 * queue.c - the rate-limited job queue on a server store, and the worker
 * that serves many queues fairly.
 *
 * Each operation is one script of src/lua/queue_*.lua, run on the queue's
 * keys, which all share the hashtag {q} (see sluice.h). This file builds the
 * keys, runs the scripts and reads their replies; the worker adds the turn
 * taking and the sleeping.
 *
 * The worker. Its queues are a ring; each call to sluice_worker_next() starts
 * one past the queue that gave the last job, so every queue with work gets one
 * job per round. A queue that answers a wait is not asked again before the
 * wait ends ('ready_ms'); an empty one is asked again when a job is added to
 * it (a message on the channel EMQ ":added", which every add publishes), or
 * when a delayed job or a lease of it falls due. When no queue can be asked,
 * the worker blocks in poll() on its subscription until the earliest of those
 * times: no busy loop. The channel is a wake-up call, not a delivery: a
 * message lost (say, while reconnecting) costs at most IDLE_RECHECK_MS.
 */
#include "sluice_private.h"

#include <hiredis/hiredis.h>

#include <fnmatch.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_LEASE_MS 30000u
#define IDLE_RECHECK_MS 1000u    /* an empty queue is asked again at least this often */
#define DISCOVER_EVERY_MS 1000u  /* a pattern worker looks for new queues */
#define KEY_BUF 192

enum { K_WAIT, K_ACTIVE, K_DELAYED, K_DATA, K_META, K_LIMITER, K_ATTEMPTS,
       K_FAILED, NKEYS };

static const char *const key_suffix[NKEYS] = {
    "wait", "active", "delayed", "data", "meta", "limiter", "attempts",
    "failed"};

/* The keys of one queue; 'args' and 'lens' are ready for a script call. */
typedef struct qkeys {
    char buf[NKEYS][KEY_BUF];
    char *key[NKEYS];
    const char *args[NKEYS + 8];
    size_t lens[NKEYS + 8];
} qkeys;

static void qkeys_free(qkeys *k)
{
    for (int i = 0; i < NKEYS; i++)
        if (k->key[i] != NULL && k->key[i] != k->buf[i])
            free(k->key[i]);
}

static int qkeys_build(qkeys *k, sluice_store *store, const char *queue,
                       size_t queue_len)
{
    const char *prefix;

    memset(k->key, 0, sizeof(k->key));
    if (store == NULL || (queue == NULL && queue_len > 0))
        return sluice__error(SLUICE_EINVAL, "store or queue is NULL");
    if ((prefix = sluice__server_emq_prefix(store)) == NULL)
        return sluice__error(SLUICE_ENOTSUP,
                             "queues need a server store (valkey://...); "
                             "the %s store has none", sluice_store_kind(store));
    for (int i = 0; i < NKEYS; i++) {
        k->key[i] = sluice__key_build(k->buf[i], KEY_BUF, &k->lens[i], prefix,
                                      queue, queue_len, key_suffix[i]);
        if (k->key[i] == NULL) {
            qkeys_free(k);
            return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
        }
        k->args[i] = k->key[i];
    }
    return SLUICE_OK;
}

/* Puts the keys 'which' (in order) then 'nargs' arguments into the call. */
static int qkeys_call(qkeys *k, sluice_store *store, int script,
                      const int *which, int nkeys, const char **args,
                      const size_t *lens, int nargs, redisReply **out)
{
    const char *a[NKEYS + 8];
    size_t l[NKEYS + 8];

    for (int i = 0; i < nkeys; i++) {
        a[i] = k->key[which[i]];
        l[i] = k->lens[which[i]];
    }
    for (int i = 0; i < nargs; i++) {
        a[nkeys + i] = args[i];
        l[nkeys + i] = lens[i];
    }
    return sluice__server_eval(store, script, nkeys, nkeys + nargs, a, l, out);
}

static size_t u64_arg(char *buf, uint64_t v)
{
    return (size_t)snprintf(buf, 24, "%llu", (unsigned long long)v);
}

static int reply_int(const redisReply *r, size_t i, uint64_t *out)
{
    const redisReply *e = r;

    if (r->type == REDIS_REPLY_ARRAY) {
        if (i >= r->elements)
            return sluice__error(SLUICE_EPROTO, "queue script: short reply");
        e = r->element[i];
    }
    if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
        return sluice__error(SLUICE_EPROTO, "queue script: expected an "
                             "integer");
    *out = (uint64_t)e->integer;
    return SLUICE_OK;
}

/*
 * The name of the registry of queue names, EMQ ":queues", in 'buf' or, when
 * the prefix is too long for it, in memory the caller frees; NULL if out of
 * memory.
 */
static char *registry_key(char *buf, size_t cap, size_t *len,
                          sluice_store *store)
{
    const char *prefix = sluice__server_emq_prefix(store);
    size_t need = strlen(prefix) + sizeof(":queues");
    char *key = need <= cap ? buf : malloc(need);

    if (key != NULL)
        *len = (size_t)snprintf(key, need, "%s:queues", prefix);
    return key;
}

/* The registry of queue names, for workers that serve a pattern. */
static void registry_add(sluice_store *store, const char *queue,
                         size_t queue_len)
{
    char buf[128];
    size_t n = 0;
    char *key = registry_key(buf, sizeof(buf), &n, store);
    const char *argv[] = {"SADD", key, queue};
    size_t lens[] = {4, n, queue_len};
    redisReply *r = NULL;

    /* Best effort: a queue missing from it is still served by name. */
    if (key != NULL &&
        sluice__server_command(store, key, n, 3, argv, lens, &r) == 0)
        freeReplyObject(r);
    if (key != buf)
        free(key);
}

static void added_channel(char *buf, size_t cap, sluice_store *store)
{
    snprintf(buf, cap, "%s:added", sluice__server_emq_prefix(store));
}

/*
 * Tells sleeping workers that 'queue' has a job (best effort: a worker that
 * misses it asks again within IDLE_RECHECK_MS).
 */
static void wake_workers(sluice_store *store, const char *queue,
                         size_t queue_len)
{
    char channel[SLUICE__PREFIX_MAX + 8];
    const char *argv[3] = {"PUBLISH", channel, queue_len > 0 ? queue : ""};
    size_t lens[3] = {7, 0, queue_len};
    redisReply *r = NULL;

    added_channel(channel, sizeof(channel), store);
    lens[1] = strlen(channel);
    if (sluice__server_command(store, channel, lens[1], 3, argv, lens, &r) == 0)
        freeReplyObject(r);
}

/* ---- Operations --------------------------------------------------------------- */

void sluice_job_clear(sluice_job *job)
{
    if (job == NULL)
        return;
    free(job->payload);
    memset(job, 0, sizeof(*job));
}

int sluice_queue_add(uint64_t *id, sluice_store *store, const char *queue,
                     size_t queue_len, const void *payload, size_t payload_len,
                     uint64_t delay_ms)
{
    static const int which[] = {K_WAIT, K_DELAYED, K_DATA, K_META};
    char delay[24], channel[SLUICE__PREFIX_MAX + 8];
    const char *args[4];
    size_t lens[4];
    redisReply *r = NULL;
    qkeys k;
    int err;

    if (id == NULL || (payload == NULL && payload_len > 0))
        return sluice__error(SLUICE_EINVAL, "id or payload is NULL");
    *id = 0;
    if (delay_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "delay %llu ms is above 2^40",
                             (unsigned long long)delay_ms);
    if ((err = qkeys_build(&k, store, queue, queue_len)) < 0)
        return err;
    added_channel(channel, sizeof(channel), store);
    args[0] = payload_len > 0 ? payload : "";
    lens[0] = payload_len;
    args[1] = delay;
    lens[1] = u64_arg(delay, delay_ms);
    args[2] = channel;
    lens[2] = strlen(channel);
    args[3] = queue_len > 0 ? queue : "";
    lens[3] = queue_len;
    err = qkeys_call(&k, store, SLUICE__SCRIPT_QUEUE_ADD, which, 4, args, lens,
                     4, &r);
    qkeys_free(&k);
    if (err < 0)
        return err;
    err = reply_int(r, 0, id);
    freeReplyObject(r);
    if (err == 0)
        registry_add(store, queue, queue_len);
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
    sluice_event ev = {SLUICE_EVENT_RATE_LIMIT_HIT, m, 1, md, 3};

    md[2].value_len = u64_arg(limit, max);
    sluice_telemetry_emit(&ev);
}

int sluice_queue_take(sluice_take_status *status, uint64_t *wait_ms,
                      sluice_job *job, sluice_store *store, const char *queue,
                      size_t queue_len, uint64_t lease_ms)
{
    static const int which[] = {K_WAIT,    K_ACTIVE,  K_DELAYED, K_DATA,
                                K_META,    K_LIMITER, K_ATTEMPTS};
    char lease[24];
    const char *args[1] = {lease};
    size_t lens[1];
    redisReply *r = NULL;
    uint64_t kind = 0, n = 0, max = 0;
    qkeys k;
    int err;

    if (status == NULL || wait_ms == NULL || job == NULL)
        return sluice__error(SLUICE_EINVAL, "status, wait_ms or job is NULL");
    *status = SLUICE_TAKE_EMPTY;
    *wait_ms = 0;
    sluice_job_clear(job);
    if (lease_ms < 1 || lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is out of range "
                             "1..2^40", (unsigned long long)lease_ms);
    if ((err = qkeys_build(&k, store, queue, queue_len)) < 0)
        return err;
    lens[0] = u64_arg(lease, lease_ms);
    err = qkeys_call(&k, store, SLUICE__SCRIPT_QUEUE_TAKE, which, 7, args, lens,
                     1, &r);
    qkeys_free(&k);
    if (err < 0)
        return err;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        return sluice__error(SLUICE_EPROTO, "queue take: malformed reply");
    }
    if (r->element[0]->integer == 1) {
        const redisReply *p = r->elements == 5 ? r->element[3] : NULL;

        if (p == NULL || p->type != REDIS_REPLY_STRING ||
            (err = reply_int(r, 1, &job->id)) < 0 ||
            (err = reply_int(r, 2, &job->attempt)) < 0 ||
            (err = reply_int(r, 4, &job->lease)) < 0) {
            freeReplyObject(r);
            sluice_job_clear(job);
            return err < 0 ? err : sluice__error(SLUICE_EPROTO, "queue take: "
                                                 "malformed job");
        }
        if ((job->payload = malloc(p->len + 1)) == NULL) {
            /* The job stays active and comes back when its lease ends. */
            freeReplyObject(r);
            sluice_job_clear(job);
            return sluice__error(SLUICE_ENOMEM, "cannot hold a payload of %zu "
                                 "bytes", (size_t)p->len);
        }
        memcpy(job->payload, p->str, p->len);
        job->payload[p->len] = '\0';
        job->payload_len = p->len;
        *status = SLUICE_TAKE_JOB;
    } else {
        kind = (uint64_t)(r->element[0]->integer == 0);
        if ((err = reply_int(r, 1, &n)) == 0 &&
            (!kind || r->elements < 3 || (err = reply_int(r, 2, &max)) == 0)) {
            *wait_ms = n;
            *status = kind ? SLUICE_TAKE_DEFERRED : SLUICE_TAKE_EMPTY;
        }
    }
    freeReplyObject(r);
    if (err == 0 && *status == SLUICE_TAKE_DEFERRED &&
        sluice__telemetry_active())
        emit_deferred(queue, queue_len, *wait_ms, max);
    return err;
}

/* complete or fail: the lease is checked by the script. */
static int finish(uint64_t *outcome, sluice_store *store, const char *queue,
                  size_t queue_len, uint64_t id, uint64_t lease, bool complete,
                  uint64_t max_attempts, uint64_t backoff_ms)
{
    static const int which[] = {K_WAIT, K_ACTIVE,   K_DELAYED, K_DATA,
                                K_META, K_ATTEMPTS, K_FAILED};
    char ids[24], leases[24], maxs[24], backoffs[24];
    const char *args[5] = {ids, leases, complete ? "complete" : "fail", maxs,
                           backoffs};
    size_t lens[5];
    redisReply *r = NULL;
    qkeys k;
    int err;

    if ((err = qkeys_build(&k, store, queue, queue_len)) < 0)
        return err;
    lens[0] = u64_arg(ids, id);
    lens[1] = u64_arg(leases, lease);
    lens[2] = strlen(args[2]);
    lens[3] = u64_arg(maxs, max_attempts);
    lens[4] = u64_arg(backoffs, backoff_ms);
    err = qkeys_call(&k, store, SLUICE__SCRIPT_QUEUE_DONE, which, 7, args, lens,
                     5, &r);
    qkeys_free(&k);
    if (err < 0)
        return err;
    err = reply_int(r, 0, outcome);
    freeReplyObject(r);
    if (err == 0 && *outcome == 0)
        err = sluice__error(SLUICE_ELEASE, "job %llu: the lease %llu is no "
                            "longer held (the job was finished already, or "
                            "the lease ran out and the job went back to "
                            "wait)", (unsigned long long)id,
                            (unsigned long long)lease);
    return err;
}

int sluice_queue_complete(sluice_store *store, const char *queue,
                          size_t queue_len, uint64_t id, uint64_t lease)
{
    uint64_t outcome;

    return finish(&outcome, store, queue, queue_len, id, lease, true, 0, 0);
}

int sluice_queue_fail(int *dead, sluice_store *store, const char *queue,
                      size_t queue_len, uint64_t id, uint64_t lease,
                      uint64_t max_attempts, uint64_t backoff_ms)
{
    uint64_t outcome = 0;
    int err;

    if (max_attempts < 1 || backoff_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "max_attempts must be >= 1 and "
                             "backoff_ms <= 2^40");
    err = finish(&outcome, store, queue, queue_len, id, lease, false,
                 max_attempts, backoff_ms);
    if (dead != NULL)
        *dead = outcome == 3;
    return err;
}

/* Runs one queue_admin.lua operation. */
static int admin(redisReply **out, sluice_store *store, const char *queue,
                 size_t queue_len, int nargs, const char **args,
                 const size_t *lens)
{
    static const int which[] = {K_WAIT, K_ACTIVE,  K_DELAYED,  K_DATA,
                                K_META, K_LIMITER, K_ATTEMPTS, K_FAILED};
    qkeys k;
    int err;

    if ((err = qkeys_build(&k, store, queue, queue_len)) < 0)
        return err;
    err = qkeys_call(&k, store, SLUICE__SCRIPT_QUEUE_ADMIN, which, 8, args,
                     lens, nargs, out);
    qkeys_free(&k);
    return err;
}

int sluice_queue_retry(int *retried, sluice_store *store, const char *queue,
                       size_t queue_len, uint64_t id)
{
    char ids[24];
    const char *args[2] = {"retry", ids};
    size_t lens[2] = {5, u64_arg(ids, id)};
    redisReply *r = NULL;
    uint64_t moved = 0;
    int err;

    if (retried != NULL)
        *retried = 0;
    if ((err = admin(&r, store, queue, queue_len, 2, args, lens)) < 0)
        return err;
    err = reply_int(r, 0, &moved);
    freeReplyObject(r);
    if (err == 0 && moved > 1)
        err = sluice__error(SLUICE_EPROTO, "queue retry: the script answered "
                            "%llu", (unsigned long long)moved);
    if (err == 0 && moved == 1) {
        if (retried != NULL)
            *retried = 1;
        wake_workers(store, queue, queue_len);
    }
    return err;
}

int sluice_queue_failed(uint64_t *ids, size_t *n, sluice_store *store,
                        const char *queue, size_t queue_len)
{
    char count[24];
    const char *args[2] = {"failed", count};
    size_t lens[2];
    redisReply *r = NULL;
    int err;

    if (n == NULL || (ids == NULL && *n > 0))
        return sluice__error(SLUICE_EINVAL, "ids or n is NULL");
    if (*n == 0)
        return SLUICE_OK;
    lens[0] = 6;
    lens[1] = u64_arg(count, *n > SLUICE_MAX_MAX ? SLUICE_MAX_MAX : *n);
    if ((err = admin(&r, store, queue, queue_len, 2, args, lens)) < 0)
        return err;
    if (r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        return sluice__error(SLUICE_EPROTO, "queue failed: expected a list");
    }
    *n = r->elements < *n ? r->elements : *n;
    for (size_t i = 0; i < *n; i++)
        ids[i] = r->element[i]->type == REDIS_REPLY_STRING
                     ? strtoull(r->element[i]->str, NULL, 10)
                     : 0;
    freeReplyObject(r);
    return SLUICE_OK;
}

int sluice_queue_set_cap(sluice_store *store, const char *queue,
                         size_t queue_len, uint64_t max, uint64_t duration_ms)
{
    char maxs[24], durs[24];
    const char *args[3] = {"cap", maxs, durs};
    size_t lens[3];
    redisReply *r = NULL;
    int err;

    if (max > SLUICE_MAX_MAX ||
        (max > 0 && (duration_ms < 1 || duration_ms > SLUICE_WINDOW_MAX_MS)))
        return sluice__error(SLUICE_ERANGE, "a cap needs max <= 2^53 - 1 and "
                             "a duration of 1..2^40 ms");
    lens[0] = 3;
    lens[1] = u64_arg(maxs, max);
    lens[2] = u64_arg(durs, duration_ms);
    if ((err = admin(&r, store, queue, queue_len, 3, args, lens)) < 0)
        return err;
    freeReplyObject(r);
    registry_add(store, queue, queue_len);
    return SLUICE_OK;
}

int sluice_queue_stats_get(sluice_queue_stats *out, sluice_store *store,
                           const char *queue, size_t queue_len)
{
    const char *args[1] = {"stats"};
    size_t lens[1] = {5};
    redisReply *r = NULL;
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "stats is NULL");
    memset(out, 0, sizeof(*out));
    if ((err = admin(&r, store, queue, queue_len, 1, args, lens)) < 0)
        return err;
    {
        /* Taken only now: '&out->...' of a NULL 'out' is undefined. */
        uint64_t *fields[] = {&out->waiting, &out->active,  &out->delayed,
                              &out->failed,  &out->completed, &out->max,
                              &out->duration_ms, &out->count, &out->wait_ms};

        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && err == 0;
             i++)
            err = reply_int(r, i, fields[i]);
    }
    freeReplyObject(r);
    return err;
}

/* ---- The worker ------------------------------------------------------------- */

typedef struct wqueue {
    char *name;
    size_t len;
    uint64_t ready_ms; /* not asked before this (monotonic ms) */
    bool idle;         /* empty when last asked: wait for a wake-up */
} wqueue;

struct sluice_worker {
    sluice_store *store;
    uint64_t lease_ms;
    char *pattern;
    wqueue *queues;
    size_t n, cap;
    size_t next;            /* where the next round starts */
    uint64_t discovered_ms; /* when the pattern was last looked for */
    redisContext *sub;      /* subscribed to EMQ:added; NULL if broken */
    char channel[SLUICE__PREFIX_MAX + 8];
};

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static wqueue *worker_find(sluice_worker *w, const char *name, size_t len)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->queues[i].len == len && memcmp(w->queues[i].name, name, len) == 0)
            return &w->queues[i];
    return NULL;
}

static int worker_add(sluice_worker *w, const char *name, size_t len)
{
    wqueue *q;

    if (worker_find(w, name, len) != NULL)
        return SLUICE_OK;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        wqueue *qs = realloc(w->queues, cap * sizeof(*qs));

        if (qs == NULL)
            return sluice__error(SLUICE_ENOMEM, "out of memory");
        w->queues = qs;
        w->cap = cap;
    }
    q = &w->queues[w->n];
    if ((q->name = malloc(len + 1)) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    memcpy(q->name, name, len);
    q->name[len] = '\0';
    q->len = len;
    q->ready_ms = 0;
    q->idle = false;
    w->n++;
    return SLUICE_OK;
}

/* A pattern worker takes in the queues added since it last looked. */
static void worker_discover(sluice_worker *w, uint64_t now)
{
    char buf[128], *key;
    size_t n = 0;
    const char *argv[2] = {"SMEMBERS", NULL};
    size_t lens[2] = {8, 0};
    redisReply *r = NULL;
    int err;

    if (w->pattern == NULL || now - w->discovered_ms < DISCOVER_EVERY_MS)
        return;
    w->discovered_ms = now;
    if ((key = registry_key(buf, sizeof(buf), &n, w->store)) == NULL)
        return;
    argv[1] = key;
    lens[1] = n;
    err = sluice__server_command(w->store, key, n, 2, argv, lens, &r);
    if (key != buf)
        free(key);
    if (err < 0)
        return;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];

            if (e->type == REDIS_REPLY_STRING && strlen(e->str) == e->len &&
                fnmatch(w->pattern, e->str, 0) == 0)
                (void)worker_add(w, e->str, e->len);
        }
    freeReplyObject(r);
}

/* (Re)subscribes to the added channel; a failure leaves polling by time. */
static void worker_subscribe(sluice_worker *w)
{
    redisReply *r;

    if (w->sub != NULL)
        return;
    if (sluice__server_connect(w->store, &w->sub) < 0) {
        w->sub = NULL;
        return;
    }
    r = redisCommand(w->sub, "SUBSCRIBE %s", w->channel);
    if (r == NULL) {
        redisFree(w->sub);
        w->sub = NULL;
        return;
    }
    freeReplyObject(r);
}

/*
 * Sleeps until 'deadline' (monotonic ms) or a message on the channel,
 * whichever comes first; a message wakes the queue it names.
 */
static void worker_sleep(sluice_worker *w, uint64_t deadline)
{
    uint64_t now = mono_ms();
    struct pollfd p;
    void *reply;

    worker_subscribe(w);
    if (deadline <= now)
        return;
    if (w->sub == NULL) {
        struct timespec ts = {(time_t)((deadline - now) / 1000),
                              (long)((deadline - now) % 1000) * 1000000L};

        nanosleep(&ts, NULL);
        return;
    }
    p.fd = w->sub->fd;
    p.events = POLLIN;
    if (poll(&p, 1, (int)(deadline - now)) <= 0)
        return;
    if (redisBufferRead(w->sub) != REDIS_OK) {
        redisFree(w->sub);
        w->sub = NULL;
        return;
    }
    while (redisGetReplyFromReader(w->sub, &reply) == REDIS_OK &&
           reply != NULL) {
        redisReply *r = reply;

        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING) {
            wqueue *q = worker_find(w, r->element[2]->str, r->element[2]->len);

            if (q == NULL && w->pattern != NULL &&
                strlen(r->element[2]->str) == r->element[2]->len &&
                fnmatch(w->pattern, r->element[2]->str, 0) == 0 &&
                worker_add(w, r->element[2]->str, r->element[2]->len) == 0)
                q = worker_find(w, r->element[2]->str, r->element[2]->len);
            if (q != NULL && q->idle) {
                q->idle = false;
                q->ready_ms = 0;
            }
        }
        freeReplyObject(r);
    }
}

/* The leading bytes of sluice_worker_opts that each version has. */
static const size_t worker_opts_size[SLUICE_WORKER_OPTS_VERSION + 1] = {
    [1] = sizeof(sluice_worker_opts),
};

int sluice_worker_new(sluice_worker **out, sluice_store *store,
                      const char *const *queues, const size_t *queue_lens,
                      size_t nqueues, const sluice_worker_opts *opts)
{
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    sluice_worker *w;
    int err = SLUICE_OK;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "out is NULL");
    *out = NULL;
    if (opts != NULL &&
        (err = sluice__opts_copy(&o, opts, opts->version, worker_opts_size,
                                 SLUICE_WORKER_OPTS_VERSION,
                                 "worker options")) < 0)
        return err;
    if (store == NULL || sluice__server_emq_prefix(store) == NULL)
        return sluice__error(SLUICE_ENOTSUP, "a worker needs a server store "
                             "(valkey://...)");
    if (o.lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is above 2^40",
                             (unsigned long long)o.lease_ms);
    if (nqueues == 0 && o.pattern == NULL)
        return sluice__error(SLUICE_EINVAL, "a worker needs queues or a "
                             "pattern");
    if ((w = calloc(1, sizeof(*w))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    w->store = store;
    w->lease_ms = o.lease_ms ? o.lease_ms : DEFAULT_LEASE_MS;
    added_channel(w->channel, sizeof(w->channel), store);
    if (o.pattern != NULL && (w->pattern = malloc(strlen(o.pattern) + 1)) != NULL)
        strcpy(w->pattern, o.pattern);
    else if (o.pattern != NULL)
        err = sluice__error(SLUICE_ENOMEM, "out of memory");
    for (size_t i = 0; i < nqueues && err == 0; i++)
        err = queues[i] == NULL
                  ? sluice__error(SLUICE_EINVAL, "queue %zu is NULL", i)
                  : worker_add(w, queues[i], queue_lens != NULL
                                                 ? queue_lens[i]
                                                 : strlen(queues[i]));
    if (err < 0) {
        sluice_worker_free(w);
        return err;
    }
    *out = w;
    return SLUICE_OK;
}

void sluice_worker_free(sluice_worker *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->queues[i].name);
    free(w->queues);
    free(w->pattern);
    if (w->sub != NULL)
        redisFree(w->sub);
    free(w);
}

int sluice_worker_next(sluice_job *job, const char **queue, size_t *queue_len,
                       sluice_worker *w, uint64_t timeout_ms)
{
    uint64_t start = mono_ms(), deadline = start + timeout_ms;

    if (job == NULL || queue == NULL || w == NULL)
        return sluice__error(SLUICE_EINVAL, "job, queue or worker is NULL");
    sluice_job_clear(job);
    *queue = NULL;
    if (queue_len != NULL)
        *queue_len = 0;
    worker_subscribe(w); /* before looking, so no add is missed */
    for (;;) {
        uint64_t now = mono_ms(), wake = deadline;
        int last_err = SLUICE_OK;

        worker_discover(w, now);
        for (size_t i = 0; i < w->n; i++) {
            size_t at = (w->next + i) % w->n;
            wqueue *q = &w->queues[at];
            sluice_take_status status;
            uint64_t wait;
            int err;

            if (q->ready_ms > now)
                continue;
            err = sluice_queue_take(&status, &wait, job, w->store, q->name,
                                    q->len, w->lease_ms);
            if (err < 0) {
                last_err = err; /* try the others; report if none serves */
                q->ready_ms = now + 100;
                continue;
            }
            if (status == SLUICE_TAKE_JOB) {
                w->next = at + 1;
                *queue = q->name;
                if (queue_len != NULL)
                    *queue_len = q->len;
                return SLUICE_OK;
            }
            if (status == SLUICE_TAKE_DEFERRED) {
                q->idle = false;
                q->ready_ms = now + wait;
            } else {
                q->idle = true;
                q->ready_ms = now + (wait > 0 && wait < IDLE_RECHECK_MS
                                         ? wait
                                         : IDLE_RECHECK_MS);
            }
        }
        if (last_err < 0 && now >= deadline)
            return last_err;
        if (now >= deadline)
            return SLUICE_OK; /* timed out: job->id == 0 */
        for (size_t i = 0; i < w->n; i++)
            if (w->queues[i].ready_ms < wake)
                wake = w->queues[i].ready_ms;
        if (w->pattern != NULL && w->discovered_ms + DISCOVER_EVERY_MS < wake)
            wake = w->discovered_ms + DISCOVER_EVERY_MS;
        worker_sleep(w, wake);
    }
}
