/*
 * test_queue.c - the job queue's API on a real redis-server: what each call
 * does, answers and leaves in the keys, job by job.
 *
 * The server is private to this program and runs with --appendonly yes
 * --appendfsync always, as a queue's server would (support/queue_fixture.h).
 * Every case starts from FLUSHALL, so job ids start at 1. The cases:
 *
 *   FIFO            add, take and complete keep the order jobs were added;
 *   payloads        bytes with NUL and high bytes, an empty payload, 1 MB,
 *                   binary and empty queue names;
 *   delayed jobs    not taken before their delay, taken after it, on the
 *                   server's clock (end to end, timed); and on the caller's
 *                   (clock=caller, a virtual clock): the EMPTY answer's
 *                   wait is the delay to the ms, the job is not taken a ms
 *                   before it falls due and is taken at that ms, and a due
 *                   job waits behind the ready ones;
 *   fail and retry  (the caller's clock) attempts counted, back-off
 *                   doubling (the EMPTY answer's wait, and the job back at
 *                   exactly 150 ms, then 300 ms, not a ms before), the
 *                   failed set, sluice_queue_failed() oldest first, and
 *                   sluice_queue_retry() with the attempts counted afresh;
 *   leases          (the caller's clock) a second complete, a wrong token,
 *                   a stale lease whose job another take got at the very ms
 *                   the lease ran out (not a ms before): only the current
 *                   lease finishes a job.
 *
 * A queue's stats, cap, key layout and errors: test_queue_keys.c.
 *
 * The same cases run over every transport: "--transport tls" (mutual TLS),
 * "unix" or "sentinel" on the command line (support/queue_fixture.h), as
 * ctest's NAME_tls, NAME_unix and NAME_sentinel; TCP without it.
 *
 * On the caller's clock (support/queue_fixture.h: queue_clock_start()) the
 * cases move time and never sleep, so their figures are exact. The one
 * timed case has generous upper bounds: the machine may be slow
 * (sanitizers, other jobs); its lower bounds only allow for millisecond
 * rounding between this clock and the server's, which is the same
 * machine's.
 */
#include "queue_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A generous upper bound on how late a timed event may come. */
#define LATE_MS 1500

/* ---- FIFO ---------------------------------------------------------------- */

/* Five jobs added, taken and completed, in order. */
static void fifo_in_order(const char *q, sluice_job *jobs, sluice_job *extra)
{
    uint64_t wait = 1, ids[5];
    sluice_queue_stats s;

    for (int i = 0; i < 5; i++) {
        char p[16];

        snprintf(p, sizeof(p), "job-%d", i + 1);
        ids[i] = queue_add(q, p, 0);
        CHECK_EQ_U64(ids[i], (uint64_t)i + 1);
    }
    s = queue_stats(q);
    CHECK_EQ_U64(s.waiting, 5);
    CHECK_EQ_U64(s.active, 0);

    for (int i = 0; i < 5; i++) {
        char p[16];

        snprintf(p, sizeof(p), "job-%d", i + 1);
        CHECK_EQ_U64(queue_take(NULL, &jobs[i], q, 30000), SLUICE_TAKE_JOB);
        CHECK_EQ_U64(jobs[i].id, ids[i]);
        CHECK_EQ_U64(jobs[i].attempt, 1);
        CHECK(jobs[i].lease != 0);
        CHECK(jobs[i].payload != NULL && jobs[i].payload_len == strlen(p) &&
              memcmp(jobs[i].payload, p, strlen(p)) == 0);
        for (int j = 0; j < i; j++)
            CHECK(jobs[j].lease != jobs[i].lease);
    }
    s = queue_stats(q);
    CHECK_EQ_U64(s.waiting, 0);
    CHECK_EQ_U64(s.active, 5);

    /* Nothing left: the wait is when the first lease falls due (~30 s). */
    CHECK_EQ_U64(queue_take(&wait, extra, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK(wait > 25000 && wait <= 30000);
    CHECK_EQ_U64(extra->id, 0);
    CHECK(extra->payload == NULL);

    /* Completed in any order. */
    for (int i = 4; i >= 0; i--)
        CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), jobs[i].id,
                                       jobs[i].lease));
    s = queue_stats(q);
    CHECK_EQ_U64(s.active, 0);
    CHECK_EQ_U64(s.completed, 5);
    CHECK_EQ_U64(queue_take(&wait, extra, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 0);
    /* A completed job's payload is gone from the data hash. */
    CHECK_EQ_U64(rs_int(queue_server, "HLEN %s", "emq:{fifo}:data"), 0);
}

static void test_fifo(void)
{
    const char *q = "fifo";
    sluice_job jobs[5], extra = {0};
    uint64_t ids[5];

    queue_fresh("FIFO");
    memset(jobs, 0, sizeof(jobs));
    fifo_in_order(q, jobs, &extra);

    /* Interleaved adds and takes keep the order too. */
    ids[0] = queue_add(q, "a", 0);
    CHECK_EQ_U64(queue_take(NULL, &jobs[0], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[0].id, ids[0]);
    ids[1] = queue_add(q, "b", 0);
    ids[2] = queue_add(q, "c", 0);
    CHECK_EQ_U64(queue_take(NULL, &jobs[1], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[1].id, ids[1]);
    ids[3] = queue_add(q, "d", 0);
    CHECK_EQ_U64(queue_take(NULL, &jobs[2], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[2].id, ids[2]);
    CHECK_EQ_U64(queue_take(NULL, &jobs[3], q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(jobs[3].id, ids[3]);
    CHECK(jobs[3].payload_len == 1 && jobs[3].payload[0] == 'd');

    /* A take clears the job it is given (no leak: ASan would tell). */
    CHECK_EQ_U64(queue_take(NULL, &jobs[3], q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(jobs[3].id, 0);
    CHECK(jobs[3].payload == NULL);
    for (int i = 0; i < 5; i++)
        sluice_job_clear(&jobs[i]);
    sluice_job_clear(&extra);
    sluice_job_clear(NULL);
}

/* ---- Payloads and names -------------------------------------------------- */

static void check_roundtrip(const char *q, size_t qlen, const void *payload,
                            size_t len, const char *what)
{
    sluice_take_status status = 0;
    sluice_job job = {0};
    uint64_t id = 0, wait;

    test_context("payloads: %s", what);
    CHECK_OK(sluice_queue_add(&id, queue_store, q, qlen, payload, len, 0));
    CHECK_OK(
        sluice_queue_take(&status, &wait, &job, queue_store, q, qlen, 30000));
    CHECK_EQ_U64(status, SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, id);
    CHECK_EQ_U64(job.payload_len, len);
    CHECK(job.payload != NULL);
    if (job.payload != NULL && job.payload_len == len) {
        CHECK(len == 0 || memcmp(job.payload, payload, len) == 0);
        CHECK(job.payload[len] == '\0');
    }
    CHECK_OK(sluice_queue_complete(queue_store, q, qlen, job.id, job.lease));
    sluice_job_clear(&job);
}

static void test_payloads(void)
{
    unsigned char bytes[512];
    const size_t mb = 1u << 20;
    unsigned char *big = malloc(mb);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    static const char bin_name[] = {'q', '\0', '{', 'x', '}', (char)0xff};

    queue_fresh("payloads");
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
    {
        /* Only the braces are escaped: the NUL and 0xff are as they are. */
        static const char key[] = "emq:{q\0%7Bx%7D\xff}:meta";
        const char *argv[] = {"EXISTS", key};
        size_t lens[] = {6, sizeof(key) - 1};
        redisReply *r = rs_cmdargv(queue_server, 2, argv, lens);

        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        if (r != NULL)
            freeReplyObject(r);
    }
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

        CHECK_OK(sluice_queue_add(&id, queue_store, bin_name, sizeof(bin_name),
                                  "w", 1, 0));
        CHECK_OK(sluice_worker_new(&w, queue_store, names, lens, 2, NULL));
        CHECK_OK(sluice_worker_next(&job, &got, &got_len, w, 2000));
        CHECK(job.id != 0 && got != NULL && got_len == sizeof(bin_name) &&
              memcmp(got, bin_name, sizeof(bin_name)) == 0);
        CHECK_OK(sluice_queue_complete(queue_store, bin_name, sizeof(bin_name),
                                       job.id, job.lease));
        sluice_job_clear(&job);
        sluice_worker_free(w);
    }
    /* The empty name is a queue too ("%" between the braces). */
    check_roundtrip("", 0, "e", 1, "empty name");
    check_roundtrip(NULL, 0, "e", 1, "NULL name of length 0");
    CHECK_EQ_U64(rs_int(queue_server, "EXISTS %s", "emq:{%}:meta"), 1);
    CHECK_EQ_U64(queue_stats("").completed, 2);
    test_context(NULL);
}

/* ---- Delayed jobs -------------------------------------------------------- */

static void test_delayed(void)
{
    const char *q = "later";
    sluice_job job = {0};
    uint64_t wait = 0, t0, elapsed, r1, d, r2;

    queue_fresh("delayed jobs");
    r1 = queue_add(q, "r1", 0);
    t0 = rs_mono_ms();
    d = queue_add(q, "delayed", 400);
    r2 = queue_add(q, "r2", 0);
    CHECK_EQ_U64(queue_stats(q).delayed, 1);
    CHECK_EQ_U64(queue_stats(q).waiting, 2);

    /* The ready jobs come first; then nothing, until the delayed one. */
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r1);
    CHECK_OK(
        sluice_queue_complete(queue_store, q, strlen(q), job.id, job.lease));
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r2);
    CHECK_OK(
        sluice_queue_complete(queue_store, q, strlen(q), job.id, job.lease));
    CHECK_EQ_U64(queue_take(&wait, &job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK(wait > 0 && wait <= 400);

    /* Polled every 5 ms: taken after 400 ms, not before. */
    CHECK(queue_take_when_ready(&job, q, 400 + LATE_MS));
    elapsed = rs_mono_ms() - t0;
    CHECK_EQ_U64(job.id, d);
    CHECK(job.payload_len == 7 && memcmp(job.payload, "delayed", 7) == 0);
    if (!CHECK(elapsed >= 398 && elapsed < 400 + LATE_MS))
        fprintf(stderr, "    the delayed job came after %" PRIu64 " ms\n",
                elapsed);
    CHECK_EQ_U64(queue_stats(q).delayed, 0);
    CHECK_OK(
        sluice_queue_complete(queue_store, q, strlen(q), job.id, job.lease));
    sluice_job_clear(&job);
    test_context(NULL);
}

/* The same on the caller's clock, to the ms, and a due job's place. */
static void test_delayed_exact(void)
{
    const char *q = "later";
    sluice_job job = {0};
    uint64_t wait = 0, r1, d, r2;

    queue_fresh("delayed jobs, the caller's clock");
    r1 = queue_add(q, "r1", 0);
    d = queue_add(q, "delayed", 400);
    r2 = queue_add(q, "r2", 0);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r1);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r2);
    /* The active jobs' leases fall due later: the wait is the delay's. */
    CHECK_EQ_U64(queue_take(&wait, &job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 400);
    sluice_vclock_advance(queue_vclock, 399);
    CHECK_EQ_U64(queue_take(&wait, &job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 1);
    CHECK_EQ_U64(queue_stats(q).delayed, 1);
    sluice_vclock_advance(queue_vclock, 1);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, d);
    CHECK(job.payload_len == 7 && memcmp(job.payload, "delayed", 7) == 0);
    CHECK_EQ_U64(queue_stats(q).delayed, 0);

    /* A delayed job whose time has come waits behind the ready ones. */
    d = queue_add(q, "d", 50);
    sluice_vclock_advance(queue_vclock, 70);
    r1 = queue_add(q, "r", 0);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, r1);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, d);
    sluice_job_clear(&job);
    test_context(NULL);
}

/* ---- Fail, back-off, the failed set, retry ------------------------------- */

/* Fails 'job' with a back-off of 'backoff_ms' doubled per attempt, and
   checks that it comes back after exactly 'after_ms' (not a ms before). */
static void fail_and_wait(sluice_job *job, const char *q, uint64_t backoff_ms,
                          uint64_t after_ms)
{
    int dead = -1;
    uint64_t id = job->id, wait = 0;

    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), job->id,
                               job->lease, 3, backoff_ms));
    CHECK_EQ_U64(dead, 0);
    CHECK_EQ_U64(queue_stats(q).delayed, 1);
    CHECK_EQ_U64(queue_stats(q).active, 0);
    CHECK_EQ_U64(queue_stats(q).waiting, 0);
    CHECK_EQ_U64(queue_take(&wait, job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, after_ms);
    sluice_vclock_advance(queue_vclock, after_ms - 1);
    CHECK_EQ_U64(queue_take(&wait, job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 1);
    sluice_vclock_advance(queue_vclock, 1);
    CHECK_EQ_U64(queue_take(NULL, job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job->id, id);
}

/* Attempts 1 and 2 of job 'j' fail: back after 150 ms, then 300 ms. */
static void fail_backoff(const char *q, sluice_job *job, uint64_t j)
{
    uint64_t lease1 = job->lease;

    /* Attempt 1 failed: back after 150 ms. */
    fail_and_wait(job, q, 150, 150);
    CHECK_EQ_U64(job->attempt, 2);
    CHECK(job->lease != lease1);
    CHECK(job->payload_len == 9 && memcmp(job->payload, "payload-j", 9) == 0);
    /* The first attempt's lease finishes nothing now. */
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), j, lease1),
             SLUICE_ELEASE);

    /* Attempt 2 failed: back after 300 ms, twice the first. */
    fail_and_wait(job, q, 150, 300);
    CHECK_EQ_U64(job->attempt, 3);
}

/* Attempt 3 of 3 fails: failed for good, in the failed set. */
static void fail_for_good(const char *q, sluice_job *job, uint64_t j)
{
    uint64_t ids[4] = {0}, wait = 0;
    size_t n;
    int dead = -1;

    /* Attempt 3 of 3 failed: failed for good. */
    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), job->id,
                               job->lease, 3, 150));
    CHECK_EQ_U64(dead, 1);
    {
        sluice_queue_stats s = queue_stats(q);

        CHECK_EQ_U64(s.failed, 1);
        CHECK_EQ_U64(s.delayed, 0);
        CHECK_EQ_U64(s.waiting, 0);
        CHECK_EQ_U64(s.active, 0);
        CHECK_EQ_U64(s.completed, 0);
    }
    CHECK_EQ_U64(queue_take(&wait, job, q, 30000), SLUICE_TAKE_EMPTY);
    CHECK_EQ_U64(wait, 0);
    n = 4;
    CHECK_OK(sluice_queue_failed(ids, &n, queue_store, q, strlen(q)));
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(ids[0], j);
    n = 0;
    CHECK_OK(sluice_queue_failed(NULL, &n, queue_store, q, strlen(q)));
    CHECK_EQ_U64(n, 0);
}

/* Retried: back to wait, attempts counted afresh, payload kept. */
static void fail_retried(const char *q, sluice_job *job, uint64_t j)
{
    int retried = -1;

    CHECK_OK(sluice_queue_retry(&retried, queue_store, q, strlen(q), j));
    CHECK_EQ_U64(retried, 1);
    CHECK_EQ_U64(queue_stats(q).failed, 0);
    CHECK_EQ_U64(queue_stats(q).waiting, 1);
    /* Not a failed job (any more, or ever): a result, not an error. */
    CHECK_OK(sluice_queue_retry(&retried, queue_store, q, strlen(q), j));
    CHECK_EQ_U64(retried, 0);
    CHECK_EQ_U64(queue_stats(q).waiting, 1);
    CHECK_OK(sluice_queue_retry(NULL, queue_store, q, strlen(q), 999));
    CHECK_OK(sluice_queue_retry(&retried, queue_store, q, strlen(q), 999));
    CHECK_EQ_U64(retried, 0);
    CHECK_EQ_U64(queue_take(NULL, job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job->id, j);
    CHECK_EQ_U64(job->attempt, 1);
    CHECK(job->payload_len == 9 && memcmp(job->payload, "payload-j", 9) == 0);
    CHECK_OK(
        sluice_queue_complete(queue_store, q, strlen(q), job->id, job->lease));
    CHECK_EQ_U64(queue_stats(q).completed, 1);
}

static void test_fail_retry(void)
{
    const char *q = "flaky";
    sluice_job job = {0};
    uint64_t ids[4] = {0}, j, k, l;
    size_t n;
    int dead = -1;

    queue_fresh("fail and retry");
    j = queue_add(q, "payload-j", 0);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.attempt, 1);
    fail_backoff(q, &job, j);
    fail_for_good(q, &job, j);
    fail_retried(q, &job, j);
    /* No back-off: straight back to wait. 'dead' may be NULL. */
    k = queue_add(q, "k", 0);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(NULL, queue_store, q, strlen(q), job.id,
                               job.lease, 2, 0));
    CHECK_EQ_U64(queue_stats(q).waiting, 1);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(job.id, k);
    CHECK_EQ_U64(job.attempt, 2);
    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), job.id,
                               job.lease, 2, 0));
    CHECK_EQ_U64(dead, 1);
    sluice_vclock_advance(queue_vclock, 5); /* a later failure time, for
                                                the order below */

    /* One attempt allowed: the first failure is final. */
    l = queue_add(q, "l", 0);
    CHECK_EQ_U64(queue_take(NULL, &job, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_fail(&dead, queue_store, q, strlen(q), job.id,
                               job.lease, 1, 1000));
    CHECK_EQ_U64(dead, 1);
    /* A lease fails a job only once. */
    CHECK_RC(sluice_queue_fail(&dead, queue_store, q, strlen(q), job.id,
                               job.lease, 1, 1000),
             SLUICE_ELEASE);

    /* Oldest first; '*n' caps the list and becomes the count. */
    n = 4;
    CHECK_OK(sluice_queue_failed(ids, &n, queue_store, q, strlen(q)));
    CHECK_EQ_U64(n, 2);
    CHECK_EQ_U64(ids[0], k);
    CHECK_EQ_U64(ids[1], l);
    n = 1;
    CHECK_OK(sluice_queue_failed(ids, &n, queue_store, q, strlen(q)));
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(ids[0], k);
    sluice_job_clear(&job);
    test_context(NULL);
}

/* ---- Leases -------------------------------------------------------------- */

/*
 * A stale lease: its 150 ms ran out and another take got the job (at the
 * front of the line, before a job added later) as attempt 2. A ms before,
 * a take got a job added after it: the lease still held. The first
 * worker's complete and fail answer SLUICE_ELEASE; the second's complete
 * succeeds. Done once.
 */
static void lease_stale(const char *q, sluice_job *a, sluice_job *b)
{
    uint64_t id, id2, id3;

    id = queue_add(q, "stale", 0);
    CHECK_EQ_U64(queue_take(NULL, a, q, 150), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(a->id, id);
    id2 = queue_add(q, "later", 0);
    sluice_vclock_advance(queue_vclock, 149);
    CHECK_EQ_U64(queue_take(NULL, b, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(b->id, id2);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), b->id, b->lease));
    id3 = queue_add(q, "latest", 0);
    sluice_vclock_advance(queue_vclock, 1);
    CHECK_EQ_U64(queue_take(NULL, b, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(b->id, id);
    CHECK_EQ_U64(b->attempt, 2);
    CHECK(b->lease != a->lease);
    CHECK(b->payload_len == 5 && memcmp(b->payload, "stale", 5) == 0);
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), a->id, a->lease),
             SLUICE_ELEASE);
    CHECK_RC(sluice_queue_fail(NULL, queue_store, q, strlen(q), a->id, a->lease,
                               3, 10),
             SLUICE_ELEASE);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), b->id, b->lease));
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), a->id, a->lease),
             SLUICE_ELEASE);
    CHECK_EQ_U64(queue_stats(q).completed, 4);
    CHECK_EQ_U64(queue_take(NULL, b, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(b->id, id3);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), b->id, b->lease));
}

/*
 * A lease that ran out with no take since: the job is still this worker's
 * to finish (nobody else has it), or it is not; either way it is done
 * once. A complete that succeeds leaves nothing to take; one that answers
 * SLUICE_ELEASE leaves the job to be taken again.
 */
static void lease_lapsed(const char *q, sluice_job *a, sluice_job *b)
{
    uint64_t id;
    int rc;

    id = queue_add(q, "lapsed", 0);
    CHECK_EQ_U64(queue_take(NULL, a, q, 100), SLUICE_TAKE_JOB);
    sluice_vclock_advance(queue_vclock, 200);
    rc = sluice_queue_complete(queue_store, q, strlen(q), a->id, a->lease);
    CHECK(rc == SLUICE_OK || rc == SLUICE_ELEASE);
    if (rc == SLUICE_OK) {
        CHECK_EQ_U64(queue_take(NULL, b, q, 30000), SLUICE_TAKE_EMPTY);
        CHECK_EQ_U64(queue_stats(q).completed, 6);
    } else {
        CHECK_EQ_U64(queue_take(NULL, b, q, 30000), SLUICE_TAKE_JOB);
        CHECK_EQ_U64(b->id, id);
        CHECK_OK(
            sluice_queue_complete(queue_store, q, strlen(q), b->id, b->lease));
    }
}

static void test_leases(void)
{
    const char *q = "leases";
    sluice_job a = {0}, b = {0};
    uint64_t id;

    queue_fresh("leases");
    /* A second complete, or a fail after it, answers SLUICE_ELEASE. */
    id = queue_add(q, "once", 0);
    CHECK_EQ_U64(queue_take(NULL, &a, q, 30000), SLUICE_TAKE_JOB);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), a.id, a.lease));
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), a.id, a.lease),
             SLUICE_ELEASE);
    CHECK(strlen(sluice_last_error()) > 0);
    CHECK_RC(sluice_queue_fail(NULL, queue_store, q, strlen(q), a.id, a.lease,
                               3, 10),
             SLUICE_ELEASE);
    CHECK_EQ_U64(queue_stats(q).completed, 1);

    /* A wrong token finishes nothing; the right one still does. */
    id = queue_add(q, "token", 0);
    CHECK_EQ_U64(queue_take(NULL, &a, q, 30000), SLUICE_TAKE_JOB);
    CHECK_EQ_U64(a.id, id);
    CHECK_RC(
        sluice_queue_complete(queue_store, q, strlen(q), a.id, a.lease + 1000),
        SLUICE_ELEASE);
    CHECK_RC(sluice_queue_fail(NULL, queue_store, q, strlen(q), a.id,
                               a.lease + 1000, 3, 10),
             SLUICE_ELEASE);
    CHECK_EQ_U64(queue_stats(q).active, 1);
    CHECK_OK(sluice_queue_complete(queue_store, q, strlen(q), a.id, a.lease));
    /* No such job. */
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), 999, 1),
             SLUICE_ELEASE);
    CHECK_RC(sluice_queue_complete(queue_store, q, strlen(q), 0, 0),
             SLUICE_ELEASE);

    lease_stale(q, &a, &b);
    lease_lapsed(q, &a, &b);
    sluice_job_clear(&a);
    sluice_job_clear(&b);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t t0 = rs_mono_ms();

    if (queue_start("test_queue", argc, argv) < 0)
        return 1;
    test_fifo();
    test_payloads();
    test_delayed();
    if (queue_clock_start(1700000000000ULL) == 0) {
        test_delayed_exact();
        test_fail_retry();
        test_leases();
        queue_clock_stop();
    }
    queue_stop();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_queue");
}
