/*
 * worker.c - a worker that serves many queues fairly.
 *
 * Its queues are a ring; each call to sluice_worker_next() starts one past
 * the queue that gave the last job, so every queue with work gets one job
 * per round. A queue that answers a wait is not asked again before the wait
 * ends ('ready_ms'); an empty one is asked again when a job is added to it
 * (a message on the channel EMQ ":added", which every add publishes), or
 * when a delayed job or a lease of it falls due. When no queue can be
 * asked, the worker blocks in poll() on its subscription until the earliest
 * of those times: no busy loop. The channel is a wake-up call, not a
 * delivery: a message lost (say, while reconnecting) costs at most
 * IDLE_RECHECK_MS.
 *
 * A worker is used by one thread at a time; its store may be shared.
 */
#include "queue/queue.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDLE_RECHECK_MS 1000u    /* an empty queue is asked again at least this often */
#define DISCOVER_EVERY_MS 1000u  /* a pattern worker looks for new queues */

typedef struct wqueue {
    char *name;
    size_t len;
    uint64_t ready_ms; /* not asked before this (monotonic ms) */
    bool idle;         /* empty when last asked: wait for a wake-up */
} wqueue;

struct sluice_worker {
    sluice_store *store;
    sluice__qserver server;
    uint64_t lease_ms;
    uint64_t stalled_limit;
    char *pattern;
    wqueue *queues;
    size_t n, cap;
    size_t next;            /* where the next round starts */
    uint64_t discovered_ms; /* when the pattern was last looked for */
    sluice__sub *sub;       /* subscribed to EMQ:added; NULL if broken */
    char channel[SLUICE__CHANNEL_MAX];
    char err_msg[512];      /* the message of the last take that failed */
};

/* The names a worker watches (queue.h), which every add writes to
   (queue.c): the registry of queue names, and the wake-up channel. */
char *sluice__queue_registry(char *buf, size_t cap, size_t *len,
                             const sluice__qserver *s)
{
    size_t need = strlen(s->prefix) + sizeof(":queues");
    char *key = need <= cap ? buf : malloc(need);

    if (key != NULL)
        *len = (size_t)snprintf(key, need, "%s:queues", s->prefix);
    return key;
}

void sluice__queue_channel(char *buf, const sluice__qserver *s)
{
    snprintf(buf, SLUICE__CHANNEL_MAX, "%s:added", s->prefix);
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
    if ((key = sluice__queue_registry(buf, sizeof(buf), &n, &w->server)) ==
        NULL)
        return;
    argv[1] = key;
    lens[1] = n;
    err = w->server.ops->command(w->server.impl, key, n, 2, argv, lens, &r);
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
    if (w->sub == NULL &&
        w->server.ops->subscribe(w->server.impl, w->channel, &w->sub) < 0)
        w->sub = NULL;
}

/* A message named queue 'name': wake it, or take it in if the pattern
   covers it. */
static void worker_wake(sluice_worker *w, const char *name, size_t len)
{
    wqueue *q = worker_find(w, name, len);

    if (q == NULL && w->pattern != NULL && strlen(name) == len &&
        fnmatch(w->pattern, name, 0) == 0 && worker_add(w, name, len) == 0)
        q = worker_find(w, name, len);
    if (q != NULL && q->idle) {
        q->idle = false;
        q->ready_ms = 0;
    }
}

/*
 * Sleeps until 'deadline' (monotonic ms) or a message on the channel,
 * whichever comes first; a message wakes the queue it names, and so does
 * every other one that came with it.
 */
static void worker_sleep(sluice_worker *w, uint64_t deadline)
{
    uint64_t now = sluice__monotonic_ms(), wait = deadline - now;
    char *name = NULL;
    size_t len;

    worker_subscribe(w);
    if (deadline <= now)
        return;
    if (w->sub == NULL) {
        struct timespec ts = {(time_t)(wait / 1000),
                              (long)(wait % 1000) * 1000000L};

        nanosleep(&ts, NULL);
        return;
    }
    for (;;) {
        if (w->server.ops->sub_next(w->sub, wait, &name, &len) < 0) {
            w->server.ops->sub_free(w->sub);
            w->sub = NULL;
            return;
        }
        if (name == NULL)
            return;
        worker_wake(w, name, len);
        free(name);
        wait = 0; /* then only what came with it */
    }
}

/*
 * Checks a pattern's brackets: fnmatch() takes an unclosed '[' as a plain
 * byte, so "chat:[" would match nothing the user meant, without a word.
 * A ']' right after '[' or "[!" belongs to the set; '\' escapes.
 */
static int glob_check(const char *pattern)
{
    for (const char *p = pattern; *p != '\0'; p++) {
        if (*p == '\\' && p[1] != '\0') {
            p++;
        } else if (*p == '[') {
            const char *q = p + 1;

            if (*q == '!' || *q == '^')
                q++;
            if (*q == ']')
                q++;
            while (*q != '\0' && *q != ']')
                q++;
            if (*q == '\0')
                return sluice__error(SLUICE_EINVAL, "pattern '%.60s': the "
                                     "'[' at byte %zu is never closed",
                                     pattern, (size_t)(p - pattern));
            p = q;
        }
    }
    return SLUICE_OK;
}

/* The leading bytes of sluice_worker_opts that each version has. */
static const size_t worker_opts_size[SLUICE_WORKER_OPTS_VERSION + 1] = {
    [1] = offsetof(sluice_worker_opts, stalled_limit),
    [2] = sizeof(sluice_worker_opts),
};

int sluice_worker_new(sluice_worker **out, sluice_store *store,
                      const char *const *queues, const size_t *queue_lens,
                      size_t nqueues, const sluice_worker_opts *opts)
{
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    sluice__qserver s;
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
    if ((err = sluice__qserver_of(&s, store, "a worker")) < 0 ||
        (o.pattern != NULL && (err = glob_check(o.pattern)) < 0))
        return err;
    if (o.lease_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "lease %llu ms is above 2^40",
                             (unsigned long long)o.lease_ms);
    if (nqueues == 0 && o.pattern == NULL)
        return sluice__error(SLUICE_EINVAL, "a worker needs queues or a "
                             "pattern");
    if ((w = calloc(1, sizeof(*w))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    w->store = store;
    w->server = s;
    w->lease_ms = o.lease_ms ? o.lease_ms : SLUICE_LEASE_DEFAULT_MS;
    w->stalled_limit = o.stalled_limit ? o.stalled_limit
                                       : SLUICE__STALLED_LIMIT;
    sluice__queue_channel(w->channel, &s);
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
        w->server.ops->sub_free(w->sub);
    free(w);
}

/*
 * One pass over the queues that may be asked now ('now' on the monotonic
 * clock). Answers 1 with a job (its queue in '*got'), 0 without one. A take
 * that failed is remembered in '*err' and its queue asked again a little
 * later; one that answered clears '*err'.
 */
static int worker_pass(sluice_worker *w, sluice_job *job, wqueue **got,
                       uint64_t now, int *err)
{
    for (size_t i = 0; i < w->n; i++) {
        size_t at = (w->next + i) % w->n;
        wqueue *q = &w->queues[at];
        sluice_take_status status;
        uint64_t wait;
        int rc;

        if (q->ready_ms > now)
            continue;
        rc = sluice__queue_take(&status, &wait, job, w->store, q->name,
                                q->len, w->lease_ms, w->stalled_limit);
        if (rc < 0) {
            /* Try the others; reported if none answers in time. */
            *err = rc;
            snprintf(w->err_msg, sizeof(w->err_msg), "%s",
                     sluice_last_error());
            q->ready_ms = now + 100;
            continue;
        }
        *err = SLUICE_OK;
        if (status == SLUICE_TAKE_JOB) {
            w->next = at + 1;
            *got = q;
            return 1;
        }
        q->idle = status != SLUICE_TAKE_DEFERRED;
        if (!q->idle)
            q->ready_ms = now + wait;
        else
            q->ready_ms = now + (wait > 0 && wait < IDLE_RECHECK_MS
                                     ? wait
                                     : IDLE_RECHECK_MS);
    }
    return 0;
}

/* When the worker next has something to do: a queue's wait ends, or the
   pattern is looked for again; at the latest 'deadline'. */
static uint64_t worker_wake_at(const sluice_worker *w, uint64_t deadline)
{
    uint64_t wake = deadline;

    for (size_t i = 0; i < w->n; i++)
        if (w->queues[i].ready_ms < wake)
            wake = w->queues[i].ready_ms;
    if (w->pattern != NULL && w->discovered_ms + DISCOVER_EVERY_MS < wake)
        wake = w->discovered_ms + DISCOVER_EVERY_MS;
    return wake;
}

int sluice_worker_next(sluice_job *job, const char **queue, size_t *queue_len,
                       sluice_worker *w, uint64_t timeout_ms)
{
    uint64_t deadline = sluice__deadline_ms(timeout_ms);
    wqueue *got = NULL;
    int err = SLUICE_OK;

    if (job == NULL || queue == NULL || w == NULL)
        return sluice__error(SLUICE_EINVAL, "job, queue or worker is NULL");
    sluice_job_clear(job);
    *queue = NULL;
    if (queue_len != NULL)
        *queue_len = 0;
    worker_subscribe(w); /* before looking, so no add is missed */
    for (;;) {
        uint64_t now = sluice__monotonic_ms();

        worker_discover(w, now);
        if (worker_pass(w, job, &got, now, &err)) {
            *queue = got->name;
            if (queue_len != NULL)
                *queue_len = got->len;
            return SLUICE_OK;
        }
        /* Timed out: job->id == 0, or the error that kept every queue from
           answering since the last one did. */
        if (now >= deadline)
            return err < 0 ? sluice__error(err, "%s", w->err_msg) : SLUICE_OK;
        worker_sleep(w, worker_wake_at(w, deadline));
    }
}
