/*
 * test_queue.c - the job queue's API on a real redis-server: what each call
 * does, answers and leaves in the keys.
 *
 * The server is private to this program and runs with --appendonly yes
 * --appendfsync always, as a queue's server would. Every case starts from
 * FLUSHALL, so job ids start at 1. The cases:
 *
 *   FIFO            add, take and complete keep the order jobs were added;
 *   payloads        bytes with NUL and high bytes, an empty payload, 1 MB,
 *                   binary and empty queue names;
 *   delayed jobs    not taken before their delay, taken after it;
 *   fail and retry  attempts counted, back-off doubling (the EMPTY answer's
 *                   wait and the time until the job comes back), the failed
 *                   set, sluice_queue_failed() oldest first, and
 *                   sluice_queue_retry() with the attempts counted afresh;
 *   leases          a second complete, a wrong token, a stale lease whose job
 *                   another take got: only the current lease finishes a job;
 *   stats           every field, against the keys read with raw commands;
 *   the cap         raised, lowered and removed, seen at the next take, also
 *                   by another store handle;
 *   key layout      exactly emq:{chat:42}:limiter, :meta, ... and nothing
 *                   else, so that the queue-limiter read
 *                   sluice_emq_rate_limit_ttl(store, "chat:42", 0) answers
 *                   the wait of a deferred take;
 *   errors          the embedded store (SLUICE_ENOTSUP) and bad arguments,
 *                   each with a message in sluice_last_error().
 *
 * Waits are compared with the PTTL read right after the call (it can only be
 * lower, by at most the time both calls took). Timing checks have generous
 * upper bounds: the machine may be slow (sanitizers, other jobs); lower
 * bounds only allow for millisecond rounding between this clock and the
 * server's, which is the same machine's.
 */
#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A generous upper bound on how late a timed event may come. */
#define LATE_MS 1500

static rs_server server;
static sluice_store *st;

static const char *const aof_args[] = {"--appendonly", "yes", "--appendfsync",
                                       "always", NULL};

/* ---- Helpers -------------------------------------------------------------- */

static void fresh(const char *what)
{
    test_context("%s", what);
    if (!CHECK(rs_ok(&server, "FLUSHALL") == 0))
        exit(2);
}

static uint64_t add(const char *q, const char *payload, uint64_t delay_ms)
{
    uint64_t id = 0;

    CHECK_OK(sluice_queue_add(&id, st, q, strlen(q), payload, strlen(payload),
                              delay_ms));
    return id;
}

/* One take on 'q'; the status, or 0 if the call failed. */
static sluice_take_status take(uint64_t *wait, sluice_job *job,
                               const char *q, uint64_t lease_ms)
{
    sluice_take_status status = 0;
    uint64_t w = 0;

    if (!CHECK_OK(sluice_queue_take(&status, &w, job, st, q, strlen(q),
                                    lease_ms)))
        return 0;
    if (wait != NULL)
        *wait = w;
    return status;
}

/* Takes from 'q' every 5 ms until a job comes or 'bound_ms' passes. */
static int take_when_ready(sluice_job *job, const char *q, uint64_t bound_ms)
{
    uint64_t deadline = rs_mono_ms() + bound_ms;

    while (rs_mono_ms() < deadline) {
        sluice_take_status s = take(NULL, job, q, 30000);

        if (s == SLUICE_TAKE_JOB)
            return 1;
        if (s == 0)
            return 0;
        rs_sleep_ms(5);
    }
    return 0;
}

static sluice_queue_stats stats(const char *q)
{
    sluice_queue_stats s;

    memset(&s, 0xee, sizeof(s));
    CHECK_OK(sluice_queue_stats_get(&s, st, q, strlen(q)));
    return s;
}

/* True when the string at 'key' (or its hash 'field') reads 'want'. */
static int reads(const char *want, const char *key, const char *field)
{
    redisReply *r = field != NULL ? rs_cmd(&server, "HGET %s %s", key, field)
                                  : rs_cmd(&server, "GET %s", key);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strcmp(r->str, want) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* True when 'wait' is the limiter's PTTL read just after it. */
static int wait_is_pttl(uint64_t wait, const char *limiter, uint64_t t0_us)
{
    long long pttl = rs_int(&server, "PTTL %s", limiter);
    uint64_t took = (rs_mono_us() - t0_us) / 1000 + 1;

    if (pttl > 0 && wait >= (uint64_t)pttl && wait - (uint64_t)pttl <= took)
        return 1;
    fprintf(stderr, "    wait %" PRIu64 " ms, PTTL %lld ms read %" PRIu64
            " ms later\n", wait, pttl, took);
    return 0;
}

/* ---- FIFO ----------------------------------------------------------------- */

static void test_fifo(void)
{
    const char *q = "fifo";
    sluice_job jobs[5], extra = {0};
    uint64_t wait = 1, ids[5];
    sluice_queue_stats s;

    fresh("FIFO");
    memset(jobs, 0, sizeof(jobs));
    for (int i = 0; i < 5; i++) {
        char p[16];

        snprintf(p, sizeof(p), "job-%d", i + 1);
        ids[i] = add(q, p, 0);
        CHECK_EQ_U64(ids[i], (uint64_t)i + 1);
    }
    s = stats(q);
    CHECK_EQ_U64(s.waiting, 5);
    CHECK_EQ_U64(s.active, 0);

    for (int i = 0; i < 5; i++) {
        char p[16];

        snprintf(p, sizeof(p), "job-%d", i + 1);
        CHECK_EQ_U64(take(NULL, &jobs[i], q, 30000), SLUICE_TAKE_JOB);
        CHECK_EQ_U64(jobs[i].id, ids[i]);
        CHECK_EQ_U64(jobs[i].attempt, 1);
        CHECK(jobs[i].lease != 0);
        CHECK(jobs[i].payload != NULL && jobs[i].payload_len == strlen(p) &&
              memcmp(jobs[i].payload, p, strlen(p)) == 0);
        for (int j = 0; j < i; j++)
            CHECK(jobs[j].lease != jobs[i].lease);
    }
    s = stats(q);
    CHECK_EQ_U64(s.waiting, 0);
    CHECK_EQ_U64(s.active, 5);

    /* Nothing left: the wait is when the first lease falls due (~30 s). */
    CHECK_EQ_U64(take(&wait, &extra, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK(wait > 25000 && wait <= 30000);
    CHECK_EQ_U64(extra.id, 0);
    CHECK(extra.payload == NULL);

    /* Completed in any order. */
    for (int i = 4; i >= 0; i--)
        CHECK_OK(sluice_queue_complete(st, q, strlen(q), jobs[i].id,
                                       jobs[i].lease));
    s = stats(q);
    CHECK_EQ_U64(s.active, 0);
    CHECK_EQ_U64(s.completed, 5);
    CHECK_EQ_U64(take(&wait, &extra, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 0);
    /* A completed job's payload is gone from the data hash. */
    CHECK_EQ_U64(rs_int(&server, "HLEN %s", "emq:{fifo}:data"), 0);

    /* Interleaved adds and takes keep the order too. */
    ids[0] = add(q, "a", 0);
    CHECK_EQ_U64(take(NULL, &jobs[0], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[0].id, ids[0]);
    ids[1] = add(q, "b", 0);
    ids[2] = add(q, "c", 0);
    CHECK_EQ_U64(take(NULL, &jobs[1], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[1].id, ids[1]);
    ids[3] = add(q, "d", 0);
    CHECK_EQ_U64(take(NULL, &jobs[2], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[2].id, ids[2]);
    CHECK_EQ_U64(take(NULL, &jobs[3], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[3].id, ids[3]);
    CHECK(jobs[3].payload_len == 1 && jobs[3].payload[0] == 'd');

    /* A take clears the job it is given (no leak: ASan would tell). */
    CHECK_EQ_U64(take(NULL, &jobs[3], q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(jobs[3].id, 0);
    CHECK(jobs[3].payload == NULL);
    for (int i = 0; i < 5; i++)
        sluice_job_clear(&jobs[i]);
    sluice_job_clear(&extra);
    sluice_job_clear(NULL);
}

/* ---- Payloads and names --------------------------------------------------- */

static void check_roundtrip(const char *q, size_t qlen, const void *payload,
                            size_t len, const char *what)
{
    sluice_take_status status = 0;
    sluice_job job = {0};
    uint64_t id = 0, wait;

    test_context("payloads: %s", what);
    CHECK_OK(sluice_queue_add(&id, st, q, qlen, payload, len, 0));
    CHECK_OK(sluice_queue_take(&status, &wait, &job, st, q, qlen, 30000));
    CHECK_EQ_U64(status, SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, id);
    CHECK_EQ_U64(job.payload_len, len);
    CHECK(job.payload != NULL);
    if (job.payload != NULL && job.payload_len == len) {
        CHECK(len == 0 || memcmp(job.payload, payload, len) == 0);
        CHECK(job.payload[len] == '\0');
    }
    CHECK_OK(sluice_queue_complete(st, q, qlen, job.id, job.lease));
    sluice_job_clear(&job);
}

static void test_payloads(void)
{
    unsigned char bytes[512];
    const size_t mb = 1u << 20;
    unsigned char *big = malloc(mb);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static const char bin_name[] = {'q', '\0', '{', 'x', '}', (char)0xff};

    fresh("payloads");
    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (unsigned char)(i & 0xff); /* NULs at 0 and 256 */
    check_roundtrip("bytes", 5, bytes, sizeof(bytes), "every byte value");
    check_roundtrip("bytes", 5, "", 0, "empty (a pointer)");
    check_roundtrip("bytes", 5, NULL, 0, "empty (NULL)");
    check_roundtrip("bytes", 5, "\0", 1, "one NUL");
    if (big == NULL)
        exit(2);
    for (size_t i = 0; i < mb; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big[i] = (unsigned char)x;
    }
    check_roundtrip("bytes", 5, big, mb, "1 MB");
    free(big);

    /* A queue name with NUL, braces and a high byte: its own hashtag. */
    check_roundtrip(bin_name, sizeof(bin_name), "bin", 3, "binary name");
    CHECK_EQ_U64(rs_int(&server, "EXISTS %s",
                        "emq:{q%00%7Bx%7D%FF}:meta"), 1);
    {
        /* A worker serves it by name too, and says which queue (and how
           long its name is) gave the job. */
        const char *names[] = {bin_name, "bytes"};
        const size_t lens[] = {sizeof(bin_name), 5};
        sluice_worker *w = NULL;
        sluice_job job = {0};
        const char *got = NULL;
        size_t got_len = 0;

        uint64_t id = 0;

        CHECK_OK(sluice_queue_add(&id, st, bin_name, sizeof(bin_name), "w", 1,
                                  0));
        CHECK_OK(sluice_worker_new(&w, st, names, lens, 2, NULL));
        CHECK_OK(sluice_worker_next(&job, &got, &got_len, w, 2000));
        CHECK(job.id != 0 && got != NULL && got_len == sizeof(bin_name) &&
              memcmp(got, bin_name, sizeof(bin_name)) == 0);
        CHECK_OK(sluice_queue_complete(st, bin_name, sizeof(bin_name), job.id,
                                       job.lease));
        sluice_job_clear(&job);
        sluice_worker_free(w);
    }
    /* The empty name is a queue too ("%" between the braces). */
    check_roundtrip("", 0, "e", 1, "empty name");
    check_roundtrip(NULL, 0, "e", 1, "NULL name of length 0");
    CHECK_EQ_U64(rs_int(&server, "EXISTS %s", "emq:{%}:meta"), 1);
    CHECK_EQ_U64(stats("").completed, 2);
    test_context(NULL);
}

/* ---- Delayed jobs --------------------------------------------------------- */

static void test_delayed(void)
{
    const char *q = "later";
    sluice_job job = {0};
    uint64_t wait = 0, t0, elapsed, r1, d, r2;

    fresh("delayed jobs");
    r1 = add(q, "r1", 0);
    t0 = rs_mono_ms();
    d = add(q, "delayed", 400);
    r2 = add(q, "r2", 0);
    CHECK_EQ_U64(stats(q).delayed, 1);
    CHECK_EQ_U64(stats(q).waiting, 2);

    /* The ready jobs come first; then nothing, until the delayed one. */
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r1);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r2);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    CHECK_EQ_U64(take(&wait, &job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK(wait > 0 && wait <= 400);

    /* Polled every 5 ms: taken after 400 ms, not before. */
    CHECK(take_when_ready(&job, q, 400 + LATE_MS));
    elapsed = rs_mono_ms() - t0;
    CHECK_EQ_U64(job.id, d);
    CHECK(job.payload_len == 7 && memcmp(job.payload, "delayed", 7) == 0);
    if (!CHECK(elapsed >= 398 && elapsed < 400 + LATE_MS))
        fprintf(stderr, "    the delayed job came after %" PRIu64 " ms\n",
                elapsed);
    CHECK_EQ_U64(stats(q).delayed, 0);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));

    /* A delayed job whose time has come waits behind the ready ones. */
    d = add(q, "d", 50);
    rs_sleep_ms(120);
    r1 = add(q, "r", 0);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r1);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, d);
    sluice_job_clear(&job);
    test_context(NULL);
}

/* ---- Fail, back-off, the failed set, retry -------------------------------- */

/* Fails 'job' and times how long it takes to come back. */
static uint64_t fail_and_time(sluice_job *job, const char *q,
                              uint64_t backoff_ms, uint64_t *empty_wait)
{
    int dead = -1;
    uint64_t t0 = rs_mono_ms(), id = job->id;

    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job->id, job->lease,
                               3, backoff_ms));
    CHECK_EQ_U64(dead, 0);
    CHECK_EQ_U64(stats(q).delayed, 1);
    CHECK_EQ_U64(stats(q).active, 0);
    CHECK_EQ_U64(stats(q).waiting, 0);
    CHECK_EQ_U64(take(empty_wait, job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK(take_when_ready(job, q, 4 * backoff_ms + LATE_MS));
    CHECK_EQ_U64(job->id, id);
    return rs_mono_ms() - t0;
}

static void test_fail_retry(void)
{
    const char *q = "flaky";
    sluice_job job = {0};
    uint64_t ids[4] = {0}, wait = 0, lease1, elapsed, j, k, l;
    size_t n;
    int dead = -1, retried = -1;

    fresh("fail and retry");
    j = add(q, "payload-j", 0);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.attempt, 1);
    lease1 = job.lease;

    /* Attempt 1 failed: back after 150 ms. */
    elapsed = fail_and_time(&job, q, 150, &wait);
    CHECK(wait > 0 && wait <= 150);
    if (!CHECK(elapsed >= 148 && elapsed < 150 + LATE_MS))
        fprintf(stderr, "    back-off 1 took %" PRIu64 " ms\n", elapsed);
    CHECK_EQ_U64(job.attempt, 2);
    CHECK(job.lease != lease1);
    CHECK(job.payload_len == 9 && memcmp(job.payload, "payload-j", 9) == 0);
    /* The first attempt's lease finishes nothing now. */
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), j, lease1),
             SLUICE_ELEASE);

    /* Attempt 2 failed: back after 300 ms, twice the first. */
    elapsed = fail_and_time(&job, q, 150, &wait);
    CHECK(wait > 150 && wait <= 300);
    if (!CHECK(elapsed >= 298 && elapsed < 300 + LATE_MS))
        fprintf(stderr, "    back-off 2 took %" PRIu64 " ms\n", elapsed);
    CHECK_EQ_U64(job.attempt, 3);

    /* Attempt 3 of 3 failed: failed for good. */
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 3,
                               150));
    CHECK_EQ_U64(dead, 1);
    {
        sluice_queue_stats s = stats(q);

        CHECK_EQ_U64(s.failed, 1);
        CHECK_EQ_U64(s.delayed, 0);
        CHECK_EQ_U64(s.waiting, 0);
        CHECK_EQ_U64(s.active, 0);
        CHECK_EQ_U64(s.completed, 0);
    }
    CHECK_EQ_U64(take(&wait, &job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 0);
    n = 4;
    CHECK_OK(sluice_queue_failed(ids, &n, st, q, strlen(q)));
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(ids[0], j);
    n = 0;
    CHECK_OK(sluice_queue_failed(NULL, &n, st, q, strlen(q)));
    CHECK_EQ_U64(n, 0);

    /* Retried: back to wait, attempts counted afresh, payload kept. */
    CHECK_OK(sluice_queue_retry(&retried, st, q, strlen(q), j));
    CHECK_EQ_U64(retried, 1);
    CHECK_EQ_U64(stats(q).failed, 0);
    CHECK_EQ_U64(stats(q).waiting, 1);
    /* Not a failed job (any more, or ever): a result, not an error. */
    CHECK_OK(sluice_queue_retry(&retried, st, q, strlen(q), j));
    CHECK_EQ_U64(retried, 0);
    CHECK_EQ_U64(stats(q).waiting, 1);
    CHECK_OK(sluice_queue_retry(NULL, st, q, strlen(q), 999));
    CHECK_OK(sluice_queue_retry(&retried, st, q, strlen(q), 999));
    CHECK_EQ_U64(retried, 0);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, j);
    CHECK_EQ_U64(job.attempt, 1);
    CHECK(job.payload_len == 9 && memcmp(job.payload, "payload-j", 9) == 0);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), job.id, job.lease));
    CHECK_EQ_U64(stats(q).completed, 1);

    /* No back-off: straight back to wait. 'dead' may be NULL. */
    k = add(q, "k", 0);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(NULL, st, q, strlen(q), job.id, job.lease, 2,
                               0));
    CHECK_EQ_U64(stats(q).waiting, 1);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, k);
    CHECK_EQ_U64(job.attempt, 2);
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 2,
                               0));
    CHECK_EQ_U64(dead, 1);
    rs_sleep_ms(5); /* a later failure time, for the order below */

    /* One attempt allowed: the first failure is final. */
    l = add(q, "l", 0);
    CHECK_EQ_U64(take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 1,
                               1000));
    CHECK_EQ_U64(dead, 1);
    /* A lease fails a job only once. */
    CHECK_RC(sluice_queue_fail(&dead, st, q, strlen(q), job.id, job.lease, 1,
                               1000), SLUICE_ELEASE);

    /* Oldest first; '*n' caps the list and becomes the count. */
    n = 4;
    CHECK_OK(sluice_queue_failed(ids, &n, st, q, strlen(q)));
    CHECK_EQ_U64(n, 2);
    CHECK_EQ_U64(ids[0], k);
    CHECK_EQ_U64(ids[1], l);
    n = 1;
    CHECK_OK(sluice_queue_failed(ids, &n, st, q, strlen(q)));
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(ids[0], k);
    sluice_job_clear(&job);
    test_context(NULL);
}

/* ---- Leases --------------------------------------------------------------- */

static void test_leases(void)
{
    const char *q = "leases";
    sluice_job a = {0}, b = {0};
    uint64_t id, id2;
    int rc;

    fresh("leases");
    /* A second complete, or a fail after it, answers SLUICE_ELEASE. */
    id = add(q, "once", 0);
    CHECK_EQ_U64(take(NULL, &a, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), a.id, a.lease));
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), a.id, a.lease),
             SLUICE_ELEASE);
    CHECK(strlen(sluice_last_error()) > 0);
    CHECK_RC(sluice_queue_fail(NULL, st, q, strlen(q), a.id, a.lease, 3, 10),
             SLUICE_ELEASE);
    CHECK_EQ_U64(stats(q).completed, 1);

    /* A wrong token finishes nothing; the right one still does. */
    id = add(q, "token", 0);
    CHECK_EQ_U64(take(NULL, &a, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(a.id, id);
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), a.id, a.lease + 1000),
             SLUICE_ELEASE);
    CHECK_RC(sluice_queue_fail(NULL, st, q, strlen(q), a.id, a.lease + 1000,
                               3, 10), SLUICE_ELEASE);
    CHECK_EQ_U64(stats(q).active, 1);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), a.id, a.lease));
    /* No such job. */
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), 999, 1), SLUICE_ELEASE);
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), 0, 0), SLUICE_ELEASE);

    /*
     * A stale lease: its 150 ms ran out and another take got the job (at
     * the front of the line, before a job added later) as attempt 2. The
     * first worker's complete and fail answer SLUICE_ELEASE; the second's
     * complete succeeds. Done once.
     */
    id = add(q, "stale", 0);
    CHECK_EQ_U64(take(NULL, &a, q, 150), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(a.id, id);
    id2 = add(q, "later", 0);
    rs_sleep_ms(300);
    CHECK_EQ_U64(take(NULL, &b, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(b.id, id);
    CHECK_EQ_U64(b.attempt, 2);
    CHECK(b.lease != a.lease);
    CHECK(b.payload_len == 5 && memcmp(b.payload, "stale", 5) == 0);
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), a.id, a.lease),
             SLUICE_ELEASE);
    CHECK_RC(sluice_queue_fail(NULL, st, q, strlen(q), a.id, a.lease, 3, 10),
             SLUICE_ELEASE);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), b.id, b.lease));
    CHECK_RC(sluice_queue_complete(st, q, strlen(q), a.id, a.lease),
             SLUICE_ELEASE);
    CHECK_EQ_U64(stats(q).completed, 3);
    CHECK_EQ_U64(take(NULL, &b, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(b.id, id2);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), b.id, b.lease));

    /*
     * A lease that ran out with no take since: the job is still this
     * worker's to finish (nobody else has it), or it is not; either way it
     * is done once. A complete that succeeds leaves nothing to take; one
     * that answers SLUICE_ELEASE leaves the job to be taken again.
     */
    id = add(q, "lapsed", 0);
    CHECK_EQ_U64(take(NULL, &a, q, 100), SLUICE_TAKE_JOB);
    rs_sleep_ms(200);
    rc = sluice_queue_complete(st, q, strlen(q), a.id, a.lease);
    CHECK(rc == SLUICE_OK || rc == SLUICE_ELEASE);
    if (rc == SLUICE_OK) {
        CHECK_EQ_U64(take(NULL, &b, q, 30000), SLUICE_TAKE_EMPTY);
        CHECK_EQ_U64(stats(q).completed, 5);
    } else {
        CHECK_EQ_U64(take(NULL, &b, q, 30000), SLUICE_TAKE_JOB);
        CHECK_EQ_U64(b.id, id);
        CHECK_OK(sluice_queue_complete(st, q, strlen(q), b.id, b.lease));
    }
    sluice_job_clear(&a);
    sluice_job_clear(&b);
    test_context(NULL);
}

/* ---- Stats ---------------------------------------------------------------- */

static void test_stats(void)
{
    const char *q = "stats";
    sluice_job jobs[3];
    sluice_queue_stats s;
    uint64_t t0;
    int dead = 0;

    fresh("stats");
    memset(jobs, 0, sizeof(jobs));
    /* A queue never used: all zero. */
    s = stats("never-used");
    CHECK(s.waiting == 0 && s.active == 0 && s.delayed == 0 &&
          s.failed == 0 && s.completed == 0 && s.max == 0 &&
          s.duration_ms == 0 && s.count == 0 && s.wait_ms == 0);

    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 3, 5000));
    for (int i = 0; i < 6; i++)
        add(q, "s", 0);
    add(q, "delayed", 60000);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_U64(take(NULL, &jobs[i], q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_complete(st, q, strlen(q), jobs[0].id,
                                   jobs[0].lease));
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), jobs[1].id,
                               jobs[1].lease, 1, 0));
    CHECK_EQ_U64(dead, 1);
    t0 = rs_mono_us();
    s = stats(q);
    CHECK_EQ_U64(s.waiting, 3);
    CHECK_EQ_U64(s.active, 1);
    CHECK_EQ_U64(s.delayed, 1);
    CHECK_EQ_U64(s.failed, 1);
    CHECK_EQ_U64(s.completed, 1);
    CHECK_EQ_U64(s.max, 3);
    CHECK_EQ_U64(s.duration_ms, 5000);
    CHECK_EQ_U64(s.count, 3);
    CHECK(s.wait_ms > 4000 && s.wait_ms <= 5000);
    CHECK(wait_is_pttl(s.wait_ms, "emq:{stats}:limiter", t0));
    /* The same figures in the keys. */
    CHECK_EQ_U64(rs_int(&server, "LLEN %s", "emq:{stats}:wait"), 3);
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{stats}:active"), 1);
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{stats}:delayed"), 1);
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{stats}:failed"), 1);
    CHECK(reads("1", "emq:{stats}:meta", "completed"));
    CHECK(reads("3", "emq:{stats}:limiter", NULL));

    /* Under the cap: wait_ms 0. Without one: max and duration 0. */
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 4, 5000));
    s = stats(q);
    CHECK_EQ_U64(s.max, 4);
    CHECK_EQ_U64(s.count, 3);
    CHECK_EQ_U64(s.wait_ms, 0);
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 0, 0));
    s = stats(q);
    CHECK_EQ_U64(s.max, 0);
    CHECK_EQ_U64(s.duration_ms, 0);
    CHECK_EQ_U64(s.wait_ms, 0);
    for (int i = 0; i < 3; i++)
        sluice_job_clear(&jobs[i]);
    test_context(NULL);
}

/* ---- The cap -------------------------------------------------------------- */

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
    CHECK(wait_is_pttl(wait, limiter, t0));
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

static void test_cap(void)
{
    const char *q = "capped", *lim = "emq:{capped}:limiter";
    sluice_store *other = NULL;
    uint64_t wait = 1;

    fresh("the cap");
    CHECK_OK(sluice_store_open(&other, server.url, NULL));
    if (other == NULL)
        exit(2);
    for (int i = 0; i < 30; i++)
        add(q, "c", 0);

    /* 2 per 10 s: two jobs, then a wait of the window's rest. */
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 2, 10000));
    check_job(st, q);
    check_job(other, q);
    check_deferred(st, q, lim, 9000, 10000);
    check_deferred(other, q, lim, 9000, 10000);
    CHECK_EQ_U64(stats(q).count, 2);

    /* Raised to 4: two more in the same window, at once, in both stores. */
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 4, 10000));
    check_job(other, q);
    check_job(st, q);
    check_deferred(other, q, lim, 9000, 10000);
    CHECK(reads("4", lim, NULL));

    /* Lowered to 1: deferred at once. */
    CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 1, 10000));
    check_deferred(st, q, lim, 9000, 10000);
    check_deferred(other, q, lim, 9000, 10000);

    /* Removed (max 0): not limited, and the counter is left alone. */
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 0, 0));
    CHECK_EQ_U64(rs_int(&server, "HEXISTS %s max", "emq:{capped}:meta"), 0);
    for (int i = 0; i < 5; i++) {
        check_job(st, q);
        check_job(other, q);
    }
    CHECK(reads("4", lim, NULL));
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK_EQ_U64(stats(q).wait_ms, 0);

    /* Set again to 5: the counter (still 4) allows one. */
    CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 5, 10000));
    check_job(st, q);
    check_deferred(other, q, lim, 8000, 10000);
    CHECK(reads("5", lim, NULL));

    /* A short window rolls: the counter expires and the budget is whole. */
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 1, 200));
    check_job(st, q);
    check_deferred(st, q, lim, 0, 200);
    rs_sleep_ms(250);
    check_job(other, q);
    check_deferred(other, q, lim, 0, 200);

    /* Out of range. */
    CHECK_RC(sluice_queue_set_cap(st, q, strlen(q), 5, 0), SLUICE_ERANGE);
    CHECK_RC(sluice_queue_set_cap(st, q, strlen(q), 5,
                                  SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);
    CHECK_RC(sluice_queue_set_cap(st, q, strlen(q), SLUICE_MAX_MAX + 1, 10),
             SLUICE_ERANGE);
    CHECK(strlen(sluice_last_error()) > 0);
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), SLUICE_MAX_MAX,
                                  SLUICE_WINDOW_MAX_MS));
    CHECK_EQ_U64(stats(q).max, SLUICE_MAX_MAX);
    sluice_store_free(other);
    test_context(NULL);
}

/* ---- Key layout ----------------------------------------------------------- */

static void test_key_layout(void)
{
    static const char *const suffixes[] = {"wait",    "active",  "delayed",
                                           "failed",  "data",    "attempts",
                                           "meta",    "limiter"};
    const char *q = "chat:42";
    const char *lim = "emq:{chat:42}:limiter", *meta = "emq:{chat:42}:meta";
    sluice_job jobs[3];
    sluice_store *other = NULL;
    uint64_t wait = 0, read = 0, t0, took;
    long long pttl;
    redisReply *r;
    int dead = 0;

    fresh("key layout");
    memset(jobs, 0, sizeof(jobs));
    CHECK_OK(sluice_queue_set_cap(st, q, strlen(q), 2, 5000));
    for (int i = 0; i < 3; i++)
        add(q, "k", 0);
    add(q, "d", 60000);
    CHECK_EQ_U64(take(NULL, &jobs[0], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(take(NULL, &jobs[1], q, 30000), SLUICE_TAKE_JOB);

    /* EchoMQ's names: the counter and the meta hash with the cap. */
    CHECK_EQ_U64(rs_int(&server, "EXISTS %s", lim), 1);
    CHECK_EQ_U64(rs_int(&server, "EXISTS %s", meta), 1);
    CHECK(reads("2", lim, NULL));
    CHECK(reads("2", meta, "max"));
    CHECK(reads("5000", meta, "duration"));
    pttl = rs_int(&server, "PTTL %s", lim);
    CHECK(pttl > 4000 && pttl <= 5000);
    CHECK_EQ_U64(rs_int(&server, "LLEN %s", "emq:{chat:42}:wait"), 1);
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{chat:42}:active"), 2);
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{chat:42}:delayed"), 1);
    CHECK_EQ_U64(rs_int(&server, "HLEN %s", "emq:{chat:42}:data"), 4);
    CHECK_EQ_U64(rs_int(&server, "SISMEMBER %s %s", "emq:queues", q), 1);
    CHECK_OK(sluice_queue_fail(&dead, st, q, strlen(q), jobs[1].id,
                               jobs[1].lease, 1, 0));
    CHECK_EQ_U64(rs_int(&server, "ZCARD %s", "emq:{chat:42}:failed"), 1);
    CHECK_EQ_U64(rs_int(&server, "HEXISTS %s %s", "emq:{chat:42}:attempts",
                        "1"), 1);

    /* Over budget: the take's wait is the queue-limiter read's figure. */
    t0 = rs_mono_us();
    CHECK_EQ_U64(take(&wait, &jobs[2], q, 30000), SLUICE_TAKE_DEFERRED);
    CHECK_OK(sluice_emq_rate_limit_ttl(&read, st, q, strlen(q), 0));
    pttl = rs_int(&server, "PTTL %s", lim);
    took = (rs_mono_us() - t0) / 1000 + 1;
    CHECK(read > 0 && read <= wait && wait - read <= took);
    CHECK(pttl > 0 && (uint64_t)pttl <= read && read - (uint64_t)pttl <= took);
    /* And the read from another store, and with the cap passed in. */
    CHECK_OK(sluice_store_open(&other, server.url, NULL));
    if (other != NULL) {
        CHECK_OK(sluice_emq_rate_limit_ttl(&read, other, q, strlen(q), 2));
        CHECK(read > 0 && read <= wait);
        CHECK_OK(sluice_emq_rate_limit_ttl(&read, other, q, strlen(q), 3));
        CHECK_EQ_U64(read, 0);
        sluice_store_free(other);
    }

    /* Nothing but the queue's eight keys and the registry of names. */
    r = rs_cmd(&server, "KEYS %s", "*");
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

    /* Another prefix (emq_prefix=): the same layout under it. */
    {
        char url[128];

        snprintf(url, sizeof(url), "%s?emq_prefix=jobs", server.url);
        CHECK_OK(sluice_store_open(&other, url, NULL));
        if (other != NULL) {
            uint64_t id = 0;

            CHECK_OK(sluice_queue_add(&id, other, q, strlen(q), "p", 1, 0));
            CHECK_OK(sluice_queue_set_cap(other, q, strlen(q), 1, 5000));
            CHECK_EQ_U64(rs_int(&server, "LLEN %s", "jobs:{chat:42}:wait"), 1);
            CHECK(reads("1", "jobs:{chat:42}:meta", "max"));
            CHECK_EQ_U64(rs_int(&server, "SISMEMBER %s %s", "jobs:queues", q),
                         1);
            sluice_store_free(other);
        }
    }
    for (int i = 0; i < 3; i++)
        sluice_job_clear(&jobs[i]);
    test_context(NULL);
}

/* A queue prefix longer than the library's fixed buffers. */
static void test_long_prefix(void)
{
    char prefix[201], url[400], key[260];
    sluice_store *other = NULL;
    sluice_worker *w = NULL;
    sluice_job job = {0};
    const char *qname = NULL;
    const char *q = "long";
    uint64_t id = 0;

    fresh("a long queue prefix");
    memset(prefix, 'p', 200);
    prefix[200] = '\0';
    snprintf(url, sizeof(url), "%s?emq_prefix=%s", server.url, prefix);
    CHECK_OK(sluice_store_open(&other, url, NULL));
    if (other == NULL)
        return;
    CHECK_OK(sluice_queue_add(&id, other, q, strlen(q), "x", 1, 0));
    snprintf(key, sizeof(key), "%s:queues", prefix);
    CHECK_EQ_U64(rs_int(&server, "SISMEMBER %s %s", key, q), 1);
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

/* ---- Errors --------------------------------------------------------------- */

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

static void test_bad_args(void)
{
    sluice_take_status status;
    sluice_job job = {0};
    sluice_queue_stats s;
    sluice_worker *w = NULL;
    sluice_worker_opts o = SLUICE_WORKER_OPTS_INIT;
    const char *qname;
    const char *const names[] = {"a", NULL};
    uint64_t id, wait, ids[2];
    size_t n = 2;

    fresh("bad arguments");
#define CHECK_ERR(expr, want)                                              \
    do {                                                                   \
        if (CHECK_RC(expr, want))                                          \
            CHECK(strlen(sluice_last_error()) > 0);                        \
    } while (0)
    CHECK_ERR(sluice_queue_add(NULL, st, "q", 1, "x", 1, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, NULL, "q", 1, "x", 1, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, st, NULL, 1, "x", 1, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, st, "q", 1, NULL, 1, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_add(&id, st, "q", 1, "x", 1,
                               SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);

    CHECK_ERR(sluice_queue_take(NULL, &wait, &job, st, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, NULL, &job, st, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, NULL, st, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, NULL, "q", 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, st, NULL, 1, 1000),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, st, "q", 1, 0),
              SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_take(&status, &wait, &job, st, "q", 1,
                                SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);

    CHECK_ERR(sluice_queue_complete(NULL, "q", 1, 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_complete(st, NULL, 1, 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_fail(NULL, NULL, "q", 1, 1, 1, 3, 10),
              SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_fail(NULL, st, "q", 1, 1, 1, 0, 10),
              SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_fail(NULL, st, "q", 1, 1, 1, 3,
                                SLUICE_WINDOW_MAX_MS + 1), SLUICE_ERANGE);
    CHECK_ERR(sluice_queue_retry(NULL, NULL, "q", 1, 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_failed(ids, NULL, st, "q", 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_failed(NULL, &n, st, "q", 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_set_cap(NULL, "q", 1, 5, 10), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_stats_get(NULL, st, "q", 1), SLUICE_EINVAL);
    CHECK_ERR(sluice_queue_stats_get(&s, NULL, "q", 1), SLUICE_EINVAL);

    CHECK_ERR(sluice_worker_new(NULL, st, names, NULL, 1, NULL), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_new(&w, st, NULL, NULL, 0, NULL), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_new(&w, st, names, NULL, 2, NULL), SLUICE_EINVAL);
    CHECK(w == NULL);
    o.version = 99;
    CHECK_ERR(sluice_worker_new(&w, st, names, NULL, 1, &o), SLUICE_EINVAL);
    CHECK(w == NULL);
    o.version = SLUICE_WORKER_OPTS_VERSION;
    o.lease_ms = SLUICE_WINDOW_MAX_MS + 1;
    CHECK_ERR(sluice_worker_new(&w, st, names, NULL, 1, &o), SLUICE_ERANGE);
    CHECK(w == NULL);
    CHECK_OK(sluice_worker_new(&w, st, names, NULL, 1, NULL));
    CHECK_ERR(sluice_worker_next(NULL, &qname, NULL, w, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_next(&job, NULL, NULL, w, 0), SLUICE_EINVAL);
    CHECK_ERR(sluice_worker_next(&job, &qname, NULL, NULL, 0), SLUICE_EINVAL);
    sluice_worker_free(w);
    sluice_worker_free(NULL);
    sluice_job_clear(NULL);
#undef CHECK_ERR
    /* None of these wrote anything. */
    CHECK_EQ_U64(rs_int(&server, "DBSIZE"), 0);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rs_start(&server, aof_args) < 0) {
        fprintf(stderr, "test_queue: cannot start redis-server\n");
        return 1;
    }
    printf("test_queue: server %s (pid %d), AOF, fsync always\n", server.url,
           (int)server.pid);
    {
        char url[128];

        snprintf(url, sizeof(url), "%s?timeout=3000", server.url);
        if (sluice_store_open(&st, url, NULL) != 0) {
            fprintf(stderr, "test_queue: %s\n", sluice_last_error());
            return 1;
        }
    }
    test_fifo();
    test_payloads();
    test_delayed();
    test_fail_retry();
    test_leases();
    test_stats();
    test_cap();
    test_key_layout();
    test_long_prefix();
    test_embedded();
    test_bad_args();
    sluice_store_free(st);
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue");
}
