/*
 * test_queue_keys.c - a job queue's keys on a real redis-server: what its
 * stats read from them, its cap, their exact layout, and the errors of the
 * queue's calls.
 *
 * The server is private to this program and runs with --appendonly yes
 * --appendfsync always, as a queue's server would (support/queue_fixture.h).
 * Every case starts from FLUSHALL, so job ids start at 1. The cases:
 *
 *   stats           every field, against the keys read with raw commands;
 *   the cap         raised, lowered and removed, seen at the next take, also
 *                   by another store handle;
 *   key layout      exactly emq:{chat:42}:limiter, :meta, ... and nothing
 *                   else, so that the queue-limiter read
 *                   sluice_emq_rate_limit_ttl(store, "chat:42", 0) answers
 *                   the wait of a deferred take; a long prefix;
 *   errors          the embedded store (SLUICE_ENOTSUP) and bad arguments,
 *                   each with a message in sluice_last_error().
 *
 * The same cases run over every transport: "--transport tls" (mutual TLS),
 * "unix" or "sentinel" on the command line (support/queue_fixture.h), as
 * ctest's NAME_tls, NAME_unix and NAME_sentinel; TCP without it.
 *
 * Waits are compared with the PTTL read right after the call (it can only be
 * lower, by at most the time both calls took). Timing checks have generous
 * upper bounds: the machine may be slow (sanitizers, other jobs); lower
 * bounds only allow for millisecond rounding between this clock and the
 * server's, which is the same machine's.
 */
#include "queue_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- Stats --------------------------------------------------------------- */

static void test_stats(void)
{
    const char *q = "stats";
    sluice_job jobs[3];
    sluice_queue_stats s;
    uint64_t t0;
    int dead = 0;

    queue_fresh("stats");
    memset(jobs, 0, sizeof(jobs));
    /* A queue never used: all zero. */
    s = queue_stats("never-used");
    CHECK(s.waiting == 0 && s.active == 0 && s.delayed == 0 &&
          s.failed == 0 && s.completed == 0 && s.max == 0 &&
          s.duration_ms == 0 && s.count == 0 && s.wait_ms == 0);

    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 3, 5000));
    for (int i = 0; i < 6; i++)
        queue_add(q, "s", 0);
    queue_add(q, "delayed", 60000);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_U64(queue_take(NULL, &jobs[i], q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), jobs[0].id,
                                   jobs[0].lease));
    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), jobs[1].id,
                               jobs[1].lease, 1, 0));
    CHECK_EQ_U64(dead, 1);
    t0 = rs_mono_us();
    s = queue_stats(q);
    CHECK_EQ_U64(s.waiting, 3);
    CHECK_EQ_U64(s.active, 1);
    CHECK_EQ_U64(s.delayed, 1);
    CHECK_EQ_U64(s.failed, 1);
    CHECK_EQ_U64(s.completed, 1);
    CHECK_EQ_U64(s.max, 3);
    CHECK_EQ_U64(s.duration_ms, 5000);
    CHECK_EQ_U64(s.count, 3);
    CHECK(s.wait_ms > 4000 && s.wait_ms <= 5000);
    CHECK(queue_wait_is_pttl(queue_server, s.wait_ms, "emq:{stats}:limiter",
                             t0));
    /* The same figures in the keys. */
    CHECK_EQ_U64(rs_int(queue_server, "LLEN %s", "emq:{stats}:wait"), 3);
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{stats}:active"), 1);
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{stats}:delayed"), 1);
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{stats}:failed"), 1);
    CHECK(queue_reads("1", "emq:{stats}:meta", "completed"));
    CHECK(queue_reads("3", "emq:{stats}:limiter", NULL));

    /* Under the cap: wait_ms 0. Without one: max and duration 0. */
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 4, 5000));
    s = queue_stats(q);
    CHECK_EQ_U64(s.max, 4);
    CHECK_EQ_U64(s.count, 3);
    CHECK_EQ_U64(s.wait_ms, 0);
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 0, 0));
    s = queue_stats(q);
    CHECK_EQ_U64(s.max, 0);
    CHECK_EQ_U64(s.duration_ms, 0);
    CHECK_EQ_U64(s.wait_ms, 0);
    for (int i = 0; i < 3; i++)
        sluice_job_clear(&jobs[i]);
    test_context(NULL);
}

/* ---- The cap ------------------------------------------------------------- */

/* A take that must be deferred with the limiter's PTTL as its wait. */
static void check_deferred(sluice_store *store, const char *q,
                           const char *limiter, uint64_t lo, uint64_t hi)
{
    sluice_take_status status = 0;
    sluice_job job = {0};
    uint64_t wait = 0, t0 = rs_mono_us();

    CHECK_OK(sluice_queue_take(&status, &wait, &job, store, q, strlen(q),
                               30000));
    if (!CHECK_EQ_U64(status, SLUICE_TAKE_DEFERRED))
        return;
    CHECK(queue_wait_is_pttl(queue_server, wait, limiter, t0));
    CHECK(wait > lo && wait <= hi);
    CHECK_EQ_U64(job.id, 0);
}

static void check_job(sluice_store *store, const char *q)
{
    sluice_take_status status = 0;
    sluice_job job = {0};
    uint64_t wait = 0;

    CHECK_OK(sluice_queue_take(&status, &wait, &job, store, q, strlen(q),
                               30000));
    CHECK_EQ_U64(status, SLUICE_TAKE_JOB);
    if (status == SLUICE_TAKE_JOB)
        CHECK_OK(sluice_queue_complete(store, q, strlen(q), job.id,
                                       job.lease));
    sluice_job_clear(&job);
}

/* A cap out of range, and the largest in range. */
static void cap_out_of_range(const char *q)
{
    CHECK_RC(sluice_queue_set_cap(queue_store, q, strlen(q), 5, 0),
             SLUICE_ERANGE);
    CHECK_RC(sluice_queue_set_cap(queue_store, q, strlen(q), 5,
                                  SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);
    CHECK_RC(
        sluice_queue_set_cap(queue_store, q, strlen(q), SLUICE_MAX_MAX + 1, 10),
        SLUICE_ERANGE);
    CHECK(strlen(sluice_last_error()) > 0);
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), SLUICE_MAX_MAX,
                                  SLUICE_WINDOW_MAX_MS));
    CHECK_EQ_U64(queue_stats(q).max, SLUICE_MAX_MAX);
}

static void test_cap(void)
{
    const char *q = "capped", *lim = "emq:{capped}:limiter";
    sluice_store *other = NULL;
    uint64_t wait = 1;

    queue_fresh("the cap");
    CHECK_OK(sluice_store_open(&other, queue_url, NULL));
    if (other == NULL)
        exit(2);
    for (int i = 0; i < 30; i++)
        queue_add(q, "c", 0);

    /* 2 per 10 s: two jobs, then a wait of the window's rest. */
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 2, 10000));
    check_job(queue_store, q);
    check_job(other, q);
    check_deferred(queue_store, q, lim, 9000, 10000);
    check_deferred(other, q, lim, 9000, 10000);
    CHECK_EQ_U64(queue_stats(q).count, 2);

    /* Raised to 4: two more in the same window, at once, in both stores. */
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 4, 10000));
    check_job(other, q);
    check_job(queue_store, q);
    check_deferred(other, q, lim, 9000, 10000);
    CHECK(queue_reads("4", lim, NULL));

    /* Lowered to 1: deferred at once. */
    CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 1, 10000));
    check_deferred(queue_store, q, lim, 9000, 10000);
    check_deferred(other, q, lim, 9000, 10000);

    /* Removed (max 0): not limited, and the counter is left alone. */
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 0, 0));
    CHECK_EQ_U64(rs_int(queue_server, "HEXISTS %s max", "emq:{capped}:meta"),
                 0);
    for (int i = 0; i < 5; i++) {
        check_job(queue_store, q);
        check_job(other, q);
    }
    CHECK(queue_reads("4", lim, NULL));
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, queue_store, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK_EQ_U64(queue_stats(q).wait_ms, 0);

    /* Set again to 5: the counter (still 4) allows one. */
    CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 5, 10000));
    check_job(queue_store, q);
    check_deferred(other, q, lim, 8000, 10000);
    CHECK(queue_reads("5", lim, NULL));

    /* A short window rolls: the counter expires and the budget is whole. */
    CHECK(rs_ok(queue_server, "DEL %s", lim) == 0);
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 1, 200));
    check_job(queue_store, q);
    check_deferred(queue_store, q, lim, 0, 200);
    rs_sleep_ms(250);
    check_job(other, q);
    check_deferred(other, q, lim, 0, 200);
    cap_out_of_range(q);
    sluice_store_free(other);
    test_context(NULL);
}

/* ---- Key layout ---------------------------------------------------------- */

#define LAYOUT_Q "chat:42"
#define LAYOUT_LIMITER "emq:{chat:42}:limiter"
#define LAYOUT_META "emq:{chat:42}:meta"

/* EchoMQ's names: the counter and the meta hash with the cap, the lists
   and sets of the jobs ('jobs[1]' is failed on the way). */
static void layout_names(sluice_job *jobs)
{
    const char *q = LAYOUT_Q, *lim = LAYOUT_LIMITER, *meta = LAYOUT_META;
    long long pttl;
    int dead = 0;

    CHECK_EQ_U64(rs_int(queue_server, "EXISTS %s", lim), 1);
    CHECK_EQ_U64(rs_int(queue_server, "EXISTS %s", meta), 1);
    CHECK(queue_reads("2", lim, NULL));
    CHECK(queue_reads("2", meta, "max"));
    CHECK(queue_reads("5000", meta, "duration"));
    pttl = rs_int(queue_server, "PTTL %s", lim);
    CHECK(pttl > 4000 && pttl <= 5000);
    CHECK_EQ_U64(rs_int(queue_server, "LLEN %s", "emq:{chat:42}:wait"), 1);
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{chat:42}:active"), 2);
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{chat:42}:delayed"), 1);
    CHECK_EQ_U64(rs_int(queue_server, "HLEN %s", "emq:{chat:42}:data"), 4);
    CHECK_EQ_U64(rs_int(queue_server, "SISMEMBER %s %s", "emq:queues", q), 1);
    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), jobs[1].id,
                               jobs[1].lease, 1, 0));
    CHECK_EQ_U64(rs_int(queue_server, "ZCARD %s", "emq:{chat:42}:failed"), 1);
    CHECK_EQ_U64(
        rs_int(queue_server, "HEXISTS %s %s", "emq:{chat:42}:attempts", "1"),
        1);

}

/* Over budget: the take's wait is the queue-limiter read's figure, also
   read from another store, and with the cap passed in. */
static void layout_deferred(sluice_job *job)
{
    const char *q = LAYOUT_Q, *lim = LAYOUT_LIMITER;
    sluice_store *other = NULL;
    uint64_t wait = 0, read = 0, t0, took;
    long long pttl;

    t0 = rs_mono_us();
    CHECK_EQ_U64(queue_take(&wait, job, q, 30000), SLUICE_TAKE_DEFERRED);
    CHECK_OK(sluice_emq_rate_limit_ttl(&read, queue_store, q, strlen(q), 0));
    pttl = rs_int(queue_server, "PTTL %s", lim);
    took = (rs_mono_us() - t0) / 1000 + 1;
    CHECK(read > 0 && read <= wait && wait - read <= took);
    CHECK(pttl > 0 && (uint64_t)pttl <= read && read - (uint64_t)pttl <= took);
    /* And the read from another store, and with the cap passed in. */
    CHECK_OK(sluice_store_open(&other, queue_url, NULL));
    if (other != NULL) {
        CHECK_OK(sluice_emq_rate_limit_ttl(&read, other, q, strlen(q), 2));
        CHECK(read > 0 && read <= wait);
        CHECK_OK(sluice_emq_rate_limit_ttl(&read, other, q, strlen(q), 3));
        CHECK_EQ_U64(read, 0);
        sluice_store_free(other);
    }

}

/* Nothing but the queue's eight keys and the registry of names. */
static void layout_only_these(void)
{
    static const char *const suffixes[] = {"wait",    "active",  "delayed",
                                           "failed",  "data",    "attempts",
                                           "meta",    "limiter"};
    redisReply *r;

    r = rs_cmd(queue_server, "KEYS %s", "*");
    if (CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY)) {
        for (size_t i = 0; i < r->elements; i++) {
            const char *k = r->element[i]->str;
            int known = strcmp(k, "emq:queues") == 0;

            for (size_t s = 0; s < 8 && !known; s++) {
                char want[64];

                snprintf(want, sizeof(want), "emq:{chat:42}:%s", suffixes[s]);
                known = strcmp(k, want) == 0;
            }
            if (!CHECK(known))
                fprintf(stderr, "    unexpected key %s\n", k);
        }
        CHECK(r->elements == 9);
    }
    if (r != NULL)
        freeReplyObject(r);

}

/* Another prefix (emq_prefix=): the same layout under it. */
static void layout_prefix(void)
{
    const char *q = LAYOUT_Q;
    sluice_store *other = NULL;
    uint64_t id = 0;
    char url[sizeof(queue_url) + 32];

    snprintf(url, sizeof(url), "%s&emq_prefix=jobs", queue_url);
    CHECK_OK(sluice_store_open(&other, url, NULL));
    if (other == NULL)
        return;
    CHECK_OK(sluice_queue_add(&id, other, q, strlen(q), "p", 1, 0));
    CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 1, 5000));
    CHECK_EQ_U64(rs_int(queue_server, "LLEN %s", "jobs:{chat:42}:wait"), 1);
    CHECK(queue_reads("1", "jobs:{chat:42}:meta", "max"));
    CHECK_EQ_U64(rs_int(queue_server, "SISMEMBER %s %s", "jobs:queues", q),
                 1);
    sluice_store_free(other);
}

static void test_key_layout(void)
{
    const char *q = LAYOUT_Q;
    sluice_job jobs[3];

    queue_fresh("key layout");
    memset(jobs, 0, sizeof(jobs));
    CHECK_OK(sluice_queue_set_cap(queue_store, q, strlen(q), 2, 5000));
    for (int i = 0; i < 3; i++)
        queue_add(q, "k", 0);
    queue_add(q, "d", 60000);
    CHECK_EQ_U64(queue_take(NULL, &jobs[0], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(queue_take(NULL, &jobs[1], q, 30000), SLUICE_TAKE_JOB);
    layout_names(jobs);
    layout_deferred(&jobs[2]);
    layout_only_these();
    layout_prefix();
    for (int i = 0; i < 3; i++)
        sluice_job_clear(&jobs[i]);
    test_context(NULL);
}

/* A queue prefix longer than the library's fixed buffers. */
static void test_long_prefix(void)
{
    char prefix[201], url[sizeof(queue_url) + 240], key[260];
    sluice_store *other = NULL;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *qname = NULL;
    const char *q = "long";
    uint64_t id = 0;

    queue_fresh("a long queue prefix");
    memset(prefix, 'p', 200);
    prefix[200] = '\0';
    snprintf(url, sizeof(url), "%s&emq_prefix=%s", queue_url, prefix);
    CHECK_OK(sluice_store_open(&other, url, NULL));
    if (other == NULL)
        return;
    CHECK_OK(sluice_queue_add(&id, other, q, strlen(q), "x", 1, 0));
    snprintf(key, sizeof(key), "%s:queues", prefix);
    CHECK_EQ_U64(rs_int(queue_server, "SISMEMBER %s %s", key, q), 1);
    /* A pattern worker finds it in the registry. */
    {
        sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;

        o.pattern = "lo*";
        CHECK_OK(sluice_worker_new(&w, other, NULL, NULL, 0, &o));
        if (w != NULL) {
            CHECK_OK(sluice_worker_next(&job, &qname, NULL, w, 3000));
            CHECK_EQ_U64(job.id, id);
            CHECK(qname != NULL && strcmp(qname, q) == 0);
        }
    }
    sluice_worker_free(w);
    sluice_job_clear(&job);
    sluice_store_free(other);
    test_context(NULL);
}

/* ---- Errors -------------------------------------------------------------- */

static void test_embedded(void)
{
    sluice_store *mem = NULL;
    sluice_take_status status;
    sluice_job job = {0};
    sluice_queue_stats s;
    sluice_worker *w = (sluice_worker *)&s; /* not NULL: must be cleared */
    uint64_t id = 7, wait, ids[2];
    size_t n = 2;
    const char *const names[] = {"a"};

    test_context("the embedded store");
    CHECK_OK(sluice_store_open(&mem, "mem://", NULL));
    if (mem == NULL)
        exit(2);
    CHECK_RC(sluice_queue_add(&id, mem, "q", 1, "x", 1, 0), SLUICE_ENOTSUP);
    CHECK(strlen(sluice_last_error()) > 0);
    CHECK_EQ_U64(id, 0);
    CHECK_RC(sluice_queue_take(&status, &wait, &job, mem, "q", 1, 1000),
             SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_complete(mem, "q", 1, 1, 1), SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_fail(NULL, mem, "q", 1, 1, 1, 3, 10),
             SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_retry(NULL, mem, "q", 1, 1), SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_failed(ids, &n, mem, "q", 1), SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_set_cap(mem, "q", 1, 5, 1000), SLUICE_ENOTSUP);
    CHECK_RC(sluice_queue_stats_get(&s, mem, "q", 1), SLUICE_ENOTSUP);
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, mem, "q", 1, 0), SLUICE_ENOTSUP);
    CHECK_RC(sluice_worker_new(&w, mem, names, NULL, 1, NULL), SLUICE_ENOTSUP);
    CHECK(w == NULL);
    sluice_store_free(mem);
    test_context(NULL);
}

/* 'expr' fails with 'want', and says why in sluice_last_error(). */
#define CHECK_ERR(expr, want)                                              \
    do {                                                                   \
        if (CHECK_RC(expr, want))                                          \
            CHECK(strlen(sluice_last_error()) > 0);                        \
    } while (0)

/* The queue's calls, each argument missing or out of range. */
static void bad_queue_args(void)
{
    sluice_take_status status;
    sluice_job job = {0};
    sluice_queue_stats s;
    uint64_t id, wait, ids[2];
    size_t n = 2;

    CHECK_ERR(sluice_queue_add(NULL, queue_store, "q", 1, "x", 1, 0),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, NULL, "q", 1, "x", 1, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, queue_store, NULL, 1, "x", 1, 0),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, queue_store, "q", 1, NULL, 1, 0),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, queue_store, "q", 1, "x", 1,
                               SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);

    CHECK_ERR(sluice_queue_take(NULL, &wait, &job, queue_store, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, NULL, &job, queue_store, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(
        sluice_queue_take(&status, &wait, NULL, queue_store, "q", 1, 1000),
        SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, NULL, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(
        sluice_queue_take(&status, &wait, &job, queue_store, NULL, 1, 1000),
        SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, queue_store, "q", 1, 0),
              SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, queue_store, "q", 1,
                                SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);

    CHECK_ERR(sluice_queue_complete(NULL, "q", 1, 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_complete(queue_store, NULL, 1, 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_fail(NULL, NULL, "q", 1, 1, 1, 3, 10),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_fail(NULL, queue_store, "q", 1, 1, 1, 0, 10),
              SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_fail(NULL, queue_store, "q", 1, 1, 1, 3,
                                SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_retry(NULL, NULL, "q", 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_failed(ids, NULL, queue_store, "q", 1),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_failed(NULL, &n, queue_store, "q", 1),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_set_cap(NULL, "q", 1, 5, 10), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_stats_get(NULL, queue_store, "q", 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_stats_get(&s, NULL, "q", 1), SLUICE_EINVAL);

}

/* The worker's calls, likewise. */
static void bad_worker_args(void)
{
    sluice_job job = {0};
    sluice_worker *w = NULL;
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    const char *qname;
    const char *const names[] = {"a", NULL};

    CHECK_ERR(sluice_worker_new(NULL, queue_store, names, NULL, 1, NULL),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_new(&w, queue_store, NULL, NULL, 0, NULL),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_new(&w, queue_store, names, NULL, 2, NULL),
              SLUICE_EINVAL);
    CHECK(w == NULL);
    o.version = 99;
    CHECK_ERR(sluice_worker_new(&w, queue_store, names, NULL, 1, &o),
              SLUICE_EINVAL);
    CHECK(w == NULL);
    o.version = SLUICE_WORKER_OPTS_VERSION;
    o.lease_ms = SLUICE_WINDOW_MAX_MS + 1;
    CHECK_ERR(sluice_worker_new(&w, queue_store, names, NULL, 1, &o),
              SLUICE_ERANGE);
    CHECK(w == NULL);
    CHECK_OK(sluice_worker_new(&w, queue_store, names, NULL, 1, NULL));
    CHECK_ERR(sluice_worker_next(NULL, &qname, NULL, w, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_next(&job, NULL, NULL, w, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_next(&job, &qname, NULL, NULL, 0), SLUICE_EINVAL);
    sluice_worker_free(w);
    sluice_worker_free(NULL);
    sluice_job_clear(NULL);
}

static void test_bad_args(void)
{
    queue_fresh("bad arguments");
    bad_queue_args();
    bad_worker_args();
    /* None of these wrote anything. */
    CHECK_EQ_U64(rs_int(queue_server, "DBSIZE"), 0);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t t0 = rs_mono_ms();

    if (queue_start("test_queue_keys", argc, argv) < 0)
        return 1;
    test_stats();
    test_cap();
    test_key_layout();
    test_long_prefix();
    test_embedded();
    test_bad_args();
    queue_stop();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue_keys");
}
