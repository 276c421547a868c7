/*
 * test_queue_reliability.c - the queue under long jobs, stalled workers,
 * bulk adds, hostile names and foreign settings, on a real redis-server.
 *
 *   extend         a lease renewed by sluice_queue_extend() keeps the job
 *                  this worker's past its first deadline; a lost one says
 *                  SLUICE_ELEASE;
 *   stalled        a job whose lease runs out goes back once (the stalled
 *                  limit, 1), and the next time fails for good; a worker's
 *                  stalled_limit changes how often;
 *   add many       5,000 jobs in one call: one script call per batch of
 *                  512, ids consecutive, taken back in order; a payload no
 *                  take could read back is SLUICE_ERANGE before anything is
 *                  sent;
 *   names          a queue's keys are EchoMQ's own, byte for byte, for
 *                  names with spaces, UTF-8 and control bytes; only '{',
 *                  '}' and '%' are escaped;
 *   interop        a cap of 0 or less in the meta hash, as BullMQ's read
 *                  takes it; a cap without a duration is an error at the
 *                  take; the read and the take agree on a counter that has
 *                  no expiry;
 *   job state      sluice_queue_job_state() tells a complete that was
 *                  applied (gone) from one that was not (held, or back to
 *                  wait once the lease ran out), and where a failed job went:
 *                  what 'sluice work' asks when a finish's reply was lost;
 *   worker         sluice_worker_next() with a timeout of UINT64_MAX waits
 *                  (it does not return at once), and a take's error is kept
 *                  until the timeout.
 *
 * Extend, stalled and job state run on the caller's clock (a store with
 * clock=caller on a virtual clock): they move time and never sleep, so a
 * lease is checked a ms before it runs out and at that ms. The worker's
 * cases run on the server's clock, end to end: a worker waits real time.
 */
#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;
static sluice_store *st;           /* the store the helpers use */
static sluice_vclock *vclock;      /* the caller's clock, of 'on_clock' */
static sluice_store *on_server, *on_clock; /* clock=server, clock=caller */

static void fresh(const char *what)
{
    test_context("%s", what);
    if (!CHECK(rs_ok(&server, "FLUSHALL") == 0))
        exit(2);
}

static uint64_t add(const char *q, const char *payload)
{
    uint64_t id = 0;

    CHECK_OK(sluice_queue_add(&id, st, q, strlen(q), payload, strlen(payload),
                              0));
    return id;
}

static sluice_take_status take(sluice_job *job, const char *q,
                               uint64_t lease_ms)
{
    sluice_take_status status = 0;
    uint64_t wait = 0;

    if (!CHECK_OK(sluice_queue_take(&status, &wait, job, st, q, strlen(q),
                                    lease_ms)))
        return 0;
    return status;
}

/* A take that must find nothing: its wait (when the next job or lease
   falls due), or UINT64_MAX if it answered anything else. */
static uint64_t take_wait(sluice_job *job, const char *q, uint64_t lease_ms)
{
    sluice_take_status status = 0;
    uint64_t wait = 0;

    if (!CHECK_OK(sluice_queue_take(&status, &wait, job, st, q, strlen(q),
                                    lease_ms)) ||
        !CHECK_EQ_U64(status, SLUICE_TAKE_EMPTY))
        return UINT64_MAX;
    return wait;
}

static sluice_queue_stats stats(const char *q)
{
    sluice_queue_stats s;

    memset(&s, 0, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, st, q, strlen(q)));
    return s;
}

/* ---- Leases: extended, stalled ------------------------------------------ */

static void test_extend(void)
{
    const char *q = "long";
    sluice_job job = {0}, other = {0};

    fresh("extend");
    add(q, "slow");
    CHECK_EQ_U64(take(&job, q, 300), SLUICE_TAKE_JOB);
    /* Renewed three times, it outlives its first lease by far: each
       renewal's 300 ms count from when it was made. */
    for (int i = 0; i < 3; i++) {
        sluice_vclock_advance(vclock, 200);
        CHECK_OK(sluice_queue_extend(st, q, strlen(q), job.id, job.lease,
                                     300));
    }
    sluice_vclock_advance(vclock, 299);
    CHECK_EQ_U64(take_wait(&other, q, 300), 1); /* a ms of the lease left */
    CHECK_EQ_U64(stats(q).active, 1);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    /* Finished: there is no lease to extend any more. */
    CHECK_RC(sluice_queue_extend(st, q, strlen(q), job.id, job.lease, 300),
             SLUICE_ELEASE);
    CHECK_RC(sluice_queue_extend(st, q, strlen(q), job.id, job.lease, 0),
             SLUICE_ERANGE);
    sluice_job_clear(&job);
    sluice_job_clear(&other);
}

static void test_stalled(void)
{
    const char *q = "stalls";
    sluice_job job = {0};
    uint64_t ids[4];
    size_t n = 4;
    int retried = 0;

    fresh("stalled: the default limit of 1");
    add(q, "crashes its worker");
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_JOB);
    sluice_vclock_advance(vclock, 99);
    CHECK_EQ_U64(take_wait(&job, q, 100), 1); /* not yet */
    /* The lease runs out: the worker is presumed dead. */
    sluice_vclock_advance(vclock, 1);
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_JOB); /* back once */
    CHECK_EQ_U64(job.attempt, 2);
    sluice_vclock_advance(vclock, 100);
    /* The second time it ran out, it failed for good. */
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(stats(q).failed, 1);
    CHECK_OK(sluice_queue_failed(ids, &n, st, q, strlen(q)));
    CHECK_EQ_U64(n, 1);
    /* Retried by hand, it counts its stalls afresh. */
    CHECK_OK(sluice_queue_retry(&retried, st, q, strlen(q), ids[0]));
    CHECK_EQ_U64(retried, 1);
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_JOB);
    sluice_vclock_advance(vclock, 100);
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    sluice_job_clear(&job);
}

/* A caller's clock past 2^53 ms is no clock the scripts can count on:
   every queue call on that store is SLUICE_ERANGE, as a limiter's is, and
   nothing is sent. */
static void test_clock_range(void)
{
    const char *q = "far";
    sluice_job job = {0};
    sluice_take_status status = 0;
    uint64_t id = 0, wait = 0;

    fresh("the caller's clock past 2^53");
    sluice_vclock_set(vclock, SLUICE_NOW_MAX_MS + 1);
    CHECK_RC(sluice_queue_add(&id, st, q, strlen(q), "x", 1, 0),
             SLUICE_ERANGE);
    CHECK_RC(sluice_queue_take(&status, &wait, &job, st, q, strlen(q), 100),
             SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "2^53") != NULL);
    CHECK_EQ_U64(rs_int(&server, "DBSIZE"), 0);
    /* At 2^53 exactly it counts. */
    sluice_vclock_set(vclock, SLUICE_NOW_MAX_MS);
    add(q, "x");
    CHECK_EQ_U64(take(&job, q, 100), SLUICE_TAKE_JOB);
    {
        redisReply *r = rs_cmd(&server, "ZSCORE emq:{far}:active 1");

        /* The lease's deadline: 2^53 + 100, which a double holds. */
        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strcmp(r->str, "9007199254741092") == 0);
        freeReplyObject(r);
    }
    sluice_job_clear(&job);
}

/* ---- A finish whose answer was lost -------------------------------------- */

static sluice_job_state state_of(const char *q, const sluice_job *job,
                                 uint64_t lease)
{
    sluice_job_state where = 0;

    CHECK_OK(sluice_queue_job_state(&where, st, q, strlen(q), job->id,
                                    lease));
    return where;
}

static void test_job_state(void)
{
    const char *q = "states";
    sluice_job job = {0}, late = {0};
    sluice_store *mem = NULL;
    sluice_job_state where = 0;
    int dead = 0;

    fresh("job state: held, then gone once completed");
    add(q, "a");
    CHECK_EQ_U64(take(&job, q, 5000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_HELD);
    CHECK_EQ_U64(state_of(q, &job, job.lease + 1), SLUICE_JOB_TAKEN);
    /* The complete reached the server, its answer did not: asked again,
       the complete answers ELEASE, and the state says it was applied. */
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), job.id, job.lease),
             SLUICE_ELEASE);
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_GONE);
    CHECK_EQ_U64(stats(q).completed, 1);

    fresh("job state: a complete that was not applied, the lease run out");
    add(q, "b");
    CHECK_EQ_U64(take(&late, q, 100), SLUICE_TAKE_JOB);
    sluice_vclock_advance(vclock, 150);
    /* Not yet taken again: the late lease still counts. */
    CHECK_EQ_U64(state_of(q, &late, late.lease), SLUICE_JOB_HELD);
    CHECK_EQ_U64(take(&job, q, 5000), SLUICE_TAKE_JOB);
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), late.id, late.lease),
             SLUICE_ELEASE);
    CHECK_EQ_U64(state_of(q, &late, late.lease), SLUICE_JOB_TAKEN);
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_HELD);

    test_context("job state: a fail, to wait, delayed, and for good");
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 5,
                               0));
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_WAITING);
    CHECK_EQ_U64(take(&job, q, 5000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 5,
                               60000));
    CHECK_EQ_U64(stats(q).delayed, 1);
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_WAITING);
    add(q, "c");
    CHECK_EQ_U64(take(&job, q, 5000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 1,
                               0));
    CHECK_EQ_U64(dead, 1);
    CHECK_EQ_U64(state_of(q, &job, job.lease), SLUICE_JOB_FAILED);
    job.id = 999;
    CHECK_EQ_U64(state_of(q, &job, 1), SLUICE_JOB_GONE);

    test_context("job state: bad arguments, and a store without queues");
    CHECK_RC(sluice_queue_job_state(NULL, st, q, strlen(q), 1, 1),
             SLUICE_EINVAL);
    CHECK_OK(sluice_store_open(&mem, "mem://", NULL));
    CHECK_RC(sluice_queue_job_state(&where, mem, q, strlen(q), 1, 1),
             SLUICE_ENOTSUP);
    sluice_store_free(mem);
    sluice_job_clear(&job);
    sluice_job_clear(&late);
}

static void test_stalled_worker_limit(void)
{
    const char *q = "stalls3", *names[] = {q};
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *got;
    int runs = 0;

    fresh("stalled: a worker's stalled_limit of 3");
    add(q, "x");
    o.lease_ms = 100;
    o.stalled_limit = 3;
    CHECK_OK(sluice_worker_new(&w, st, names, NULL, 1, &o));
    /* Taken, never finished: 1 + 3 runs, then failed. */
    for (int i = 0; i < 10; i++) {
        CHECK_OK(sluice_worker_next(&job, &got, NULL, w, 300));
        if (job.id != 0)
            runs++;
        sluice_job_clear(&job);
    }
    CHECK_EQ_U64(runs, 4);
    CHECK_EQ_U64(stats(q).failed, 1);
    sluice_worker_free(w);
}

/* ---- Bulk adds ------------------------------------------------------------ */

#define MANY 5000

static void test_add_many(void)
{
    const char *q = "bulk";
    sluice_new_job *jobs = calloc(MANY, sizeof(*jobs));
    char (*payloads)[16] = calloc(MANY, sizeof(*payloads));
    sluice_new_job big = {NULL, (size_t)64 << 20, 0, 0}, bad[2];
    long long before;
    sluice_job job = {0};

    fresh("add many");
    if (jobs == NULL || payloads == NULL)
        exit(2);
    for (size_t i = 0; i < MANY; i++) {
        snprintf(payloads[i], sizeof(payloads[i]), "p%zu", i);
        jobs[i].payload = payloads[i];
        jobs[i].payload_len = strlen(payloads[i]);
    }
    before = rs_calls(&server, "evalsha");
    CHECK_OK(sluice_queue_add_many(st, q, strlen(q), jobs, MANY));
    /* One script call per batch of 512 jobs. */
    CHECK_EQ_U64(rs_calls(&server, "evalsha") - before, (MANY + 511) / 512);
    for (size_t i = 0; i < MANY; i++)
        CHECK_EQ_U64(jobs[i].id, i + 1);
    CHECK_EQ_U64(stats(q).waiting, MANY);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_U64(take(&job, q, 30000), SLUICE_TAKE_JOB);
        CHECK(job.payload_len == strlen(payloads[i]) &&
              memcmp(job.payload, payloads[i], job.payload_len) == 0);
    }
    sluice_job_clear(&job);
    /* Nothing is sent when one job is bad: not the good one before it. */
    bad[0] = (sluice_new_job){"fine", 4, 0, 0};
    bad[1] = (sluice_new_job){"late", 4, SLUICE_WINDOW_MAX_MS + 1, 0};
    CHECK_RC(sluice_queue_add_many(st, "none", 4, bad, 2), SLUICE_ERANGE);
    CHECK_EQ_U64(stats("none").waiting, 0);
    /* A payload no take could read back (the default reply cap is 64 MB). */
    big.payload = "";
    CHECK_RC(sluice_queue_add_many(st, q, strlen(q), &big, 1), SLUICE_ERANGE);
    CHECK(strstr(sluice_last_error(), "max_reply_bytes") != NULL);
    CHECK_OK(sluice_queue_add_many(st, q, strlen(q), NULL, 0));
    free(jobs);
    free(payloads);
}

/* ---- Names ---------------------------------------------------------------- */

static void test_names(void)
{
    static const struct {
        const char *name;
        size_t len;
        const char *key; /* EchoMQ's emq:{q}:meta, or sluice's escaped one */
        size_t key_len;
    } cases[] = {
#define NAME(n, k) {n, sizeof(n) - 1, k, sizeof(k) - 1}
        NAME("chat 1", "emq:{chat 1}:meta"),
        NAME("caf\xc3\xa9", "emq:{caf\xc3\xa9}:meta"),
        NAME("a\tb\x1b", "emq:{a\tb\x1b}:meta"),
        NAME("n\0ul", "emq:{n\0ul}:meta"),
        NAME("50%", "emq:{50%25}:meta"),
        NAME("a{b}", "emq:{a%7Bb%7D}:meta"),
#undef NAME
    };

    fresh("queue names");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t id = 0;
        const char *argv[] = {"EXISTS", cases[i].key};
        size_t lens[] = {6, cases[i].key_len};
        redisReply *r;

        test_context("queue name %zu", i);
        CHECK_OK(sluice_queue_add(&id, st, cases[i].name, cases[i].len, "x", 1,
                                  0));
        r = rs_cmdargv(&server, 2, argv, lens);
        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* ---- Interop with the reference read ---------------------------------------- */

static void test_interop(void)
{
    const char *q = "ref";
    uint64_t wait = 0;
    sluice_job job = {0};
    sluice_take_status status = 0;

    fresh("interop: a cap of 0 in the meta hash, as BullMQ reads it");
    add(q, "x");
    CHECK(rs_ok(&server, "HSET emq:{ref}:meta max 0 duration 5000") == 0);
    CHECK(rs_ok(&server, "SET emq:{ref}:limiter 3 PX 5000") == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK(wait > 4000 && wait <= 5000);
    CHECK_OK(sluice_queue_take(&status, &wait, &job, st, q, strlen(q), 1000));
    CHECK_EQ_U64(status, SLUICE_TAKE_DEFERRED);
    CHECK(wait > 4000 && wait <= 5000);
    CHECK(rs_ok(&server, "HSET emq:{ref}:meta max -2") == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK(wait > 4000 && wait <= 5000);

    fresh("interop: a cap without a duration cannot be enforced");
    add(q, "x");
    CHECK(rs_ok(&server, "HSET emq:{ref}:meta max 5") == 0);
    CHECK_RC(sluice_queue_take(&status, &wait, &job, st, q, strlen(q), 1000),
             SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "no duration") != NULL);
    CHECK_EQ_U64(rs_int(&server, "LLEN emq:{ref}:wait"), 1); /* not taken */
    /* The read of that cap fails as the take does (it answered 0); a cap
       passed by the caller needs no duration. */
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0),
             SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "no duration") != NULL);
    CHECK(rs_ok(&server, "SET emq:{ref}:limiter 5 PX 5000") == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 5));
    CHECK(wait > 4000 && wait <= 5000);

    fresh("interop: a full counter without an expiry");
    add(q, "x");
    CHECK(rs_ok(&server, "HSET emq:{ref}:meta max 2 duration 5000") == 0);
    CHECK(rs_ok(&server, "SET emq:{ref}:limiter 7") == 0);
    /* No window: the read says go, and so does the take, which gives the
       counter its window; then both say wait. */
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK_EQ_U64(take(&job, q, 1000), SLUICE_TAKE_JOB);
    CHECK(rs_int(&server, "PTTL emq:{ref}:limiter") > 4000);
    add(q, "y");
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK(wait > 4000);
    CHECK_EQ_U64(take(&job, q, 1000), SLUICE_TAKE_DEFERRED);
    sluice_job_clear(&job);
}

/* ---- The worker's timeouts ---------------------------------------------------- */

typedef struct adder {
    const char *q;
    uint64_t after_ms;
} adder;

static void *add_later(void *arg)
{
    const adder *a = arg;

    rs_sleep_ms(a->after_ms);
    add(a->q, "late");
    return NULL;
}

static void test_worker_timeouts(void)
{
    const char *q = "forever", *names[] = {q};
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *got = NULL;
    adder a = {q, 300};
    pthread_t t;
    uint64_t t0;

    fresh("worker: no timeout at all");
    CHECK_OK(sluice_worker_new(&w, st, names, NULL, 1, NULL));
    pthread_create(&t, NULL, add_later, &a);
    t0 = rs_mono_ms();
    /* start + UINT64_MAX once wrapped to a deadline in the past. */
    CHECK_OK(sluice_worker_next(&job, &got, NULL, w, UINT64_MAX));
    pthread_join(t, NULL);
    CHECK(job.id != 0);
    CHECK(rs_mono_ms() - t0 >= 250);
    sluice_job_clear(&job);
    sluice_worker_free(w);
}

/* A store on a port where nothing listens: every take fails. */
static void test_worker_errors_surface(void)
{
    const char *names[] = {"q"};
    sluice_store *dead = NULL;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *got = NULL;
    char url[64];

    test_context("worker: an unreachable store is an error at the timeout");
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d?connect_timeout=100",
             rs_free_port());
    CHECK_OK(sluice_store_open(&dead, url, NULL));
    if (dead == NULL)
        return;
    CHECK_OK(sluice_worker_new(&w, dead, names, NULL, 1, NULL));
    /* Each call spans several passes: the error of the first must not be
       forgotten by the last (which may have asked nothing). */
    for (int i = 0; i < 3; i++)
        CHECK_RC(sluice_worker_next(&job, &got, NULL, w, 350), SLUICE_ECONN);
    sluice_worker_free(w);
    sluice_store_free(dead);
}

int main(void)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    char url[160];

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_queue_reliability: cannot start redis-server\n");
        return 1;
    }
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&on_server, url, NULL));
    CHECK_OK(sluice_vclock_new(&vclock, 1700000000000ULL));
    o.clock_ms = sluice_vclock_now_ms;
    o.clock_payload = vclock;
    snprintf(url, sizeof(url), "%s?timeout=5000&clock=caller", server.url);
    CHECK_OK(sluice_store_open(&on_clock, url, &o));
    if (on_server == NULL || on_clock == NULL)
        return 1;
    st = on_clock;
    test_extend();
    test_stalled();
    test_job_state();
    test_clock_range();
    st = on_server;
    test_stalled_worker_limit();
    test_add_many();
    test_names();
    test_interop();
    test_worker_timeouts();
    test_worker_errors_surface();
    test_context(NULL);
    sluice_store_free(on_server);
    sluice_store_free(on_clock);
    sluice_vclock_free(vclock);
    rs_stop(&server);
    return test_summary("test_queue_reliability");
}
