/*
 * test_valkey_emq.c - the queue limiter on a real redis-server, and the
 * telemetry event of a refused hit, "sluice.hit.refused", also under its
 * deprecated name "emq.rate_limit.hit".
 *
 * The queue limiter is EchoMQ's fixed window: a counter at emq:{q}:limiter,
 * armed with PEXPIRE by the increment that creates it, its cap in the hash
 * emq:{q}:meta (field "max"). sluice_emq_rate_limit_ttl() is the read (the
 * counter's PTTL when it has reached the cap, else 0) and
 * sluice_emq_limiter_incr() the admit step. Each case below sets the keys up
 * by hand with raw commands, so the layout itself is what is tested: the
 * exact key names, the cap from the meta hash, an explicit cap overriding
 * it, a manual block (a counter of 2^53 - 1), a window that has just
 * expired, and an expiry armed only once.
 *
 * Waits are compared with the PTTL read right after the call: the PTTL can
 * only be lower, by at most the time the two calls took. The only sleeps are
 * for short real windows, whose clock is the server's.
 */
#include "events.h"
#include "store/store.h" /* sluice__key_build */
#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* The limiter and meta key names of queue 'q' under 'prefix'. */
static void emq_names(char *lim, char *meta, size_t cap, const char *prefix,
                      const char *q, size_t qlen)
{
    size_t len;

    if (sluice__key_build(lim, cap, &len, prefix, q, qlen, "limiter") != lim)
        exit(2);
    lim[len] = '\0';
    if (sluice__key_build(meta, cap, &len, prefix, q, qlen, "meta") != meta)
        exit(2);
    meta[len] = '\0';
}

/*
 * Reads the queue's wait and, right after, the limiter's PTTL; 'took' is the
 * span of both in ms (rounded up).
 */
static int ttl_then_pttl(uint64_t *wait, sluice_store *st, const char *q,
                         uint64_t max, const char *lim, long long *pttl,
                         uint64_t *took)
{
    uint64_t t0 = rs_mono_us();
    int rc = sluice_emq_rate_limit_ttl(wait, st, q, strlen(q), max);

    *pttl = rs_int(&server, "PTTL %s", lim);
    *took = (rs_mono_us() - t0) / 1000 + 1;
    return rc;
}

/* True when the string at 'key' is 'want'. */
static int get_is(const char *key, const char *want)
{
    redisReply *r = rs_cmd(&server, "GET %s", key);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strcmp(r->str, want) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* True when 'wait' is the PTTL read just after it (within 'took'). */
static int wait_is_pttl(uint64_t wait, long long pttl, uint64_t took)
{
    return pttl > 0 && wait >= (uint64_t)pttl && wait - (uint64_t)pttl <= took;
}

/* The queue of the test of sluice_emq_rate_limit_ttl(), and its keys. */
typedef struct ttl_queue {
    sluice_store *st;
    const char *q;
    char lim[256], meta[256];
} ttl_queue;

/* No key, under the cap, at the cap (the first increment arms the
   window). */
static void ttl_counts(const ttl_queue *t)
{
    sluice_store *st = t->st;
    const char *q = t->q, *lim = t->lim;
    uint64_t wait = 12345, took, count = 0, ttl = 0;
    long long pttl;

    /* No key: admit. */
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 10));
    CHECK_EQ_U64(wait, 0);

    /* Under the cap: admit. The first increment arms the window. */
    for (int i = 1; i <= 9; i++) {
        CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q),
                                         5000));
        CHECK_EQ_U64(count, (uint64_t)i);
    }
    CHECK(rs_int(&server, "EXISTS %s", lim) == 1);
    wait = 12345;
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 10));
    CHECK_EQ_U64(wait, 0);

    /* At the cap: the PTTL, about the window. */
    CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 5000));
    CHECK_EQ_U64(count, 10);
    CHECK_OK(ttl_then_pttl(&wait, st, q, 10, lim, &pttl, &took));
    CHECK(wait_is_pttl(wait, pttl, took));
    CHECK(wait > 4000 && wait <= 5000);

}

/* The cap from the meta hash, an explicit one, and none known. */
static void ttl_caps(const ttl_queue *t)
{
    sluice_store *st = t->st;
    const char *q = t->q, *lim = t->lim, *meta = t->meta;
    uint64_t wait = 12345, took;
    long long pttl;

    /* The cap from the meta hash, when the caller passes 0 (with its
       duration: a cap without one is an error, see test_queue_reliability). */
    CHECK(rs_ok(&server, "HSET %s max 10 duration 5000", meta) == 0);
    CHECK_OK(ttl_then_pttl(&wait, st, q, 0, lim, &pttl, &took));
    CHECK(wait_is_pttl(wait, pttl, took));
    CHECK(rs_ok(&server, "HSET %s max 11", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(rs_ok(&server, "HSET %s max 3", meta) == 0);
    CHECK_OK(ttl_then_pttl(&wait, st, q, 0, lim, &pttl, &took));
    CHECK(wait_is_pttl(wait, pttl, took));

    /* An explicit cap overrides the meta hash, both ways. */
    CHECK(rs_ok(&server, "HSET %s max 100", meta) == 0);
    CHECK_OK(ttl_then_pttl(&wait, st, q, 10, lim, &pttl, &took));
    CHECK(wait_is_pttl(wait, pttl, took));
    CHECK(rs_ok(&server, "HSET %s max 1", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 11));
    CHECK_EQ_U64(wait, 0);

    /* No cap known (no meta, or no usable max in it): admit. */
    CHECK(rs_ok(&server, "DEL %s", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(rs_ok(&server, "HSET %s other 1", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(rs_ok(&server, "HSET %s max notanumber", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK_EQ_U64(wait, 0);
    CHECK(rs_ok(&server, "DEL %s", meta) == 0);

}

/* A manual block, a counter left without a TTL, a window just expired. */
static void ttl_by_hand(const ttl_queue *t)
{
    sluice_store *st = t->st;
    const char *q = t->q, *lim = t->lim, *meta = t->meta;
    uint64_t wait = 12345, took, count = 0;
    long long pttl;

    /* A manual block: the counter at 2^53 - 1 for 5 s holds any cap. */
    CHECK(rs_ok(&server, "SET %s 9007199254740991 PX 5000", lim) == 0);
    CHECK_OK(ttl_then_pttl(&wait, st, q, 10, lim, &pttl, &took));
    CHECK(wait_is_pttl(wait, pttl, took));
    CHECK(wait > 4000 && wait <= 5000);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q),
                                       SLUICE_MAX_MAX));
    CHECK(wait > 4000 && wait <= 5000);
    CHECK(rs_ok(&server, "HSET %s max 1000000 duration 5000", meta) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
    CHECK(wait > 4000 && wait <= 5000);
    CHECK(rs_ok(&server, "DEL %s", meta) == 0);

    /* At the cap but with no TTL (left by hand): nothing to wait for. */
    CHECK(rs_ok(&server, "SET %s 50", lim) == 0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 10));
    CHECK_EQ_U64(wait, 0);

    /* A window that has just expired: admit. */
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, q, strlen(q), 150));
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, q, strlen(q), 150));
    CHECK_EQ_U64(count, 2);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 2));
    CHECK(wait > 0 && wait <= 150);
    {
        uint64_t deadline = rs_mono_ms() + 3000;

        while (rs_int(&server, "EXISTS %s", lim) != 0 &&
               rs_mono_ms() < deadline)
            rs_sleep_ms(5);
    }
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 2));
    CHECK_EQ_U64(wait, 0);

}

static void test_rate_limit_ttl(sluice_store *st)
{
    ttl_queue t = {.st = st, .q = "chat:42"};
    const char *q = t.q;
    uint64_t wait = 12345;

    test_context("sluice_emq_rate_limit_ttl");
    emq_names(t.lim, t.meta, sizeof(t.lim), "emq", q, strlen(q));
    /* EchoMQ's own names for an ordinary queue name. */
    CHECK(strcmp(t.lim, "emq:{chat:42}:limiter") == 0);
    CHECK(strcmp(t.meta, "emq:{chat:42}:meta") == 0);
    CHECK(rs_ok(&server, "DEL %s %s", t.lim, t.meta) == 0);
    ttl_counts(&t);
    ttl_caps(&t);
    ttl_by_hand(&t);
    /* Out of range and missing arguments. */
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q),
                                       SLUICE_MAX_MAX + 1),
             SLUICE_ERANGE);
    CHECK_RC(sluice_emq_rate_limit_ttl(NULL, st, q, strlen(q), 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, NULL, q, strlen(q), 1),
             SLUICE_EINVAL);
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, st, NULL, 3, 1), SLUICE_EINVAL);
    test_context(NULL);
}

static void test_limiter_incr(sluice_store *st)
{
    char lim[256], meta[256];
    const char *q = "jobs.incr";
    uint64_t count = 0, ttl = 0, ttl2 = 0;
    long long pttl, prev;

    test_context("sluice_emq_limiter_incr");
    emq_names(lim, meta, sizeof(lim), "emq", q, strlen(q));
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);

    /* The first increment creates the counter and arms the window. */
    CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 4000));
    CHECK_EQ_U64(count, 1);
    CHECK_EQ_U64(ttl, 4000);
    pttl = rs_int(&server, "PTTL %s", lim);
    CHECK(pttl > 3000 && pttl <= 4000);
    prev = pttl;

    /* Later ones never move it, even with another window: it only falls. */
    for (int i = 2; i <= 4; i++) {
        rs_sleep_ms(15);
        CHECK_OK(sluice_emq_limiter_incr(&count, &ttl2, st, q, strlen(q),
                                         i == 3 ? 60000 : 4000));
        CHECK_EQ_U64(count, (uint64_t)i);
        pttl = rs_int(&server, "PTTL %s", lim);
        CHECK(pttl > 0 && pttl < prev);
        CHECK(ttl2 >= (uint64_t)pttl && ttl2 < ttl);
        prev = pttl;
    }
    CHECK(get_is(lim, "4"));

    /* A counter left without a TTL is given one: no queue blocks forever. */
    CHECK(rs_ok(&server, "SET %s 7", lim) == 0);
    CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 3000));
    CHECK_EQ_U64(count, 8);
    CHECK_EQ_U64(ttl, 3000);
    pttl = rs_int(&server, "PTTL %s", lim);
    CHECK(pttl > 2000 && pttl <= 3000);

    /* NULL outputs are allowed. */
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, q, strlen(q), 3000));
    CHECK(get_is(lim, "9"));

    /* Not a counter: a protocol error, and nothing is changed. */
    CHECK(rs_ok(&server, "SET %s abc", lim) == 0);
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 3000),
             SLUICE_EPROTO);
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);
    CHECK(rs_ok(&server, "HSET %s a 1", lim) == 0);
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 3000),
             SLUICE_EPROTO);
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);

    /* Out of range windows. */
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q), 0),
             SLUICE_ERANGE);
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q),
                                     SLUICE_WINDOW_MAX_MS + 1),
             SLUICE_ERANGE);
    CHECK(rs_int(&server, "EXISTS %s", lim) == 0);
    test_context(NULL);
}

/*
 * The millisecond of expiry. During it the counter is still there and PTTL
 * answers 0; the fixed window (src/algo/fixed/) takes the window as over then,
 * and so must the admit step, which shares its counter step: the increment
 * that meets such a counter starts a new window (count 1, the whole window
 * ahead), never "count n + 1 with 0 ms left". Increments are sent back to
 * back through the last milliseconds of a window, so that millisecond is
 * sampled many times over.
 */
static void test_limiter_incr_expiry_instant(sluice_store *st)
{
    char lim[256], meta[256];
    const char *q = "jobs.instant";
    long zero = 0, calls = 0;
    uint64_t count = 0, ttl = 0, deadline;

    test_context("sluice_emq_limiter_incr: the millisecond of expiry");
    emq_names(lim, meta, sizeof(lim), "emq", q, strlen(q));
    for (int round = 0; round < 3; round++) {
        CHECK(rs_ok(&server, "SET %s 1000 PX 120", lim) == 0);
        deadline = rs_mono_ms() + 3000;
        while (rs_int(&server, "PTTL %s", lim) > 15 && rs_mono_ms() < deadline)
            rs_sleep_ms(3);
        do {
            /* A window far longer than what is left: a new one shows. */
            CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, q, strlen(q),
                                             60000));
            calls++;
            zero += ttl == 0;
        } while (count > 1 && rs_mono_ms() < deadline);
        CHECK_EQ_U64(count, 1);
        CHECK_EQ_U64(ttl, 60000);
    }
    if (!CHECK_EQ_U64(zero, 0))
        fprintf(stderr, "    %ld of %ld increments answered 0 ms left\n", zero,
                calls);
    printf("  limiter expiry instant: %ld increments, %ld with 0 ms left\n",
           calls, zero);
    CHECK(rs_ok(&server, "DEL %s", lim) == 0);
    test_context(NULL);
}

/* The limiter and the read together, as a queue's dequeue loop uses them. */
static void test_admit_loop(sluice_store *st)
{
    const char *q = "room:7";
    uint64_t wait = 0, count = 0;
    int admitted = 0;
    char lim[256], meta[256];

    test_context("the admit loop");
    emq_names(lim, meta, sizeof(lim), "emq", q, strlen(q));
    CHECK(rs_ok(&server, "DEL %s %s", lim, meta) == 0);
    CHECK(rs_ok(&server, "HSET %s max 5 duration 1000", meta) == 0);
    for (int i = 0; i < 20; i++) {
        CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, q, strlen(q), 0));
        if (wait > 0)
            continue;
        CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, q, strlen(q),
                                         10000));
        admitted++;
    }
    CHECK_EQ_U64(admitted, 5);
    CHECK_EQ_U64(count, 5);
    CHECK(wait > 9000 && wait <= 10000);
    test_context(NULL);
}

static void test_key_names(void)
{
    sluice_store *st = NULL, *jobs = NULL;
    char url[200], lim[256], meta[256];
    uint64_t wait = 0, count = 0;

    test_context("queue key names");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    snprintf(url, sizeof(url), "%s?timeout=5000&emq_prefix=jobs", server.url);
    CHECK_OK(sluice_store_open(&jobs, url, NULL));
    if (st == NULL || jobs == NULL)
        exit(2);

    /* EchoMQ's exact names, checked by asking the server. */
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, "chat:42", 7, 60000));
    CHECK(rs_int(&server, "EXISTS emq:{chat:42}:limiter") == 1);
    CHECK(rs_int(&server, "DBSIZE") == 1);
    CHECK(rs_ok(&server, "HSET emq:{chat:42}:meta max 1 duration 60000") ==
          0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, "chat:42", 7, 0));
    CHECK(wait > 50000 && wait <= 60000);

    /* emq_prefix moves both keys. */
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, jobs, "chat:42", 7, 60000));
    CHECK_EQ_U64(count, 1);
    CHECK(rs_int(&server, "EXISTS jobs:{chat:42}:limiter") == 1);
    CHECK(get_is("emq:{chat:42}:limiter", "1"));
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, jobs, "chat:42", 7, 0));
    CHECK_EQ_U64(wait, 0); /* no jobs:{chat:42}:meta yet */
    CHECK(rs_ok(&server, "HSET jobs:{chat:42}:meta max 1 duration 60000") ==
          0);
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, jobs, "chat:42", 7, 0));
    CHECK(wait > 50000 && wait <= 60000);
    CHECK(rs_int(&server, "DBSIZE") == 4);

    /* The option in the struct, too; the URL's wins. */
    {
        sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
        sluice_store *s2 = NULL;

        o.emq_prefix = "q2";
        snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
        CHECK_OK(sluice_store_open(&s2, url, &o));
        CHECK_OK(sluice_emq_limiter_incr(&count, NULL, s2, "x", 1, 60000));
        CHECK(rs_int(&server, "EXISTS q2:{x}:limiter") == 1);
        sluice_store_free(s2);
        s2 = NULL;
        snprintf(url, sizeof(url), "%s?timeout=5000&emq_prefix=q3",
                 server.url);
        CHECK_OK(sluice_store_open(&s2, url, &o));
        CHECK_OK(sluice_emq_limiter_incr(&count, NULL, s2, "x", 1, 60000));
        CHECK(rs_int(&server, "EXISTS q3:{x}:limiter") == 1);
        sluice_store_free(s2);
    }

    /* Names that are not ordinary are escaped, and stay in their tag. */
    emq_names(lim, meta, sizeof(lim), "emq", "a{b}", 4);
    CHECK(strcmp(lim, "emq:{a%7Bb%7D}:limiter") == 0);
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, "a{b}", 4, 60000));
    CHECK(rs_int(&server, "EXISTS %s", lim) == 1);
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, "", 0, 60000));
    CHECK(rs_int(&server, "EXISTS emq:{%%}:limiter") == 1);

    sluice_store_free(jobs);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_embedded_not_supported(void)
{
    sluice_store *mem = NULL;
    uint64_t wait = 77, count = 77, ttl = 77;

    test_context("the embedded store has no queues");
    CHECK_OK(sluice_store_open(&mem, "mem://", NULL));
    CHECK_RC(sluice_emq_rate_limit_ttl(&wait, mem, "q", 1, 10),
             SLUICE_ENOTSUP);
    CHECK_EQ_U64(wait, 0);
    CHECK(sluice_last_error()[0] != '\0');
    CHECK_RC(sluice_emq_limiter_incr(&count, &ttl, mem, "q", 1, 1000),
             SLUICE_ENOTSUP);
    sluice_store_free(mem);
    test_context(NULL);
}

/* ---- Telemetry ----------------------------------------------------------- */

static void on_other(const sluice_event *ev, void *payload)
{
    (void)ev;
    (*(int *)payload)++;
}

/*
 * One store's telemetry, to a handler of 'name': a refused hit emits once;
 * nothing else does. Run for "sluice.hit.refused" and for its deprecated
 * name "emq.rate_limit.hit", which until 0.2 receives refusals too.
 */
static void telemetry_on(sluice_store *st, const char *kind, const char *name)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 2, 60000);
    static const char key[] = "tele\0metry"; /* binary: an embedded NUL */
    const size_t klen = sizeof(key) - 1;
    test_events_seen seen;
    sluice_decision d;
    int other = 0;

    test_context("telemetry on the %s store, to %s", kind, name);
    memset(&seen, 0, sizeof(seen));
    seen.want = name;
    CHECK_RESET(sluice_reset(st, &lim, key, klen));
    CHECK_OK(sluice_telemetry_attach("test.hit", name, test_events_record, &seen));
    CHECK_OK(sluice_telemetry_attach("test.other", "emq.something.else",
                                     on_other, &other));
    /* The same id again, even for another event: refused. */
    CHECK_RC(sluice_telemetry_attach("test.hit", "x", on_other, &other),
             SLUICE_EINVAL);

    /* Admitted hits and peeks (refused or not) emit nothing. */
    CHECK_OK(sluice_hit(&d, st, &lim, key, klen, 1));
    CHECK_OK(sluice_hit(&d, st, &lim, key, klen, 1));
    CHECK(d.allowed);
    CHECK_OK(sluice_peek(&d, st, &lim, key, klen, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(seen.calls, 0);

    /* A refused hit emits once, with its wait and what was limited. */
    CHECK_OK(sluice_hit(&d, st, &lim, key, klen, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(seen.calls, 1);
    CHECK_EQ_U64(seen.bad_name, 0);
    CHECK(d.retry_after_ms > 0);
    CHECK(seen.delay_ms == (double)d.retry_after_ms);
    CHECK(seen.key_len == klen && memcmp(seen.key, key, klen) == 0);
    CHECK(strcmp(seen.algorithm, "sliding-log") == 0);
    CHECK(strcmp(seen.limit, "2") == 0);
    CHECK(strcmp(seen.window, "60000") == 0);
    CHECK(strcmp(seen.store, kind) == 0);
    CHECK_EQ_U64(other, 0);

    /* Errors emit nothing either. */
    CHECK_RC(sluice_hit(&d, st, &lim, key, klen, 3), SLUICE_ECOST);
    CHECK_EQ_U64(seen.calls, 1);

    /* Detached: silence. Detaching twice, or an unknown id: refused. */
    CHECK_OK(sluice_telemetry_detach("test.hit"));
    CHECK_OK(sluice_hit(&d, st, &lim, key, klen, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(seen.calls, 1);
    CHECK_RC(sluice_telemetry_detach("test.hit"), SLUICE_EINVAL);
    CHECK_RC(sluice_telemetry_detach("no.such.handler"), SLUICE_EINVAL);
    CHECK_OK(sluice_telemetry_detach("test.other"));
    CHECK_EQ_U64(other, 0);

    /* The id is free again once detached. */
    CHECK_OK(sluice_telemetry_attach("test.hit", name, test_events_record, &seen));
    CHECK_OK(sluice_hit(&d, st, &lim, key, klen, 1));
    CHECK_EQ_U64(seen.calls, 2);
    CHECK_OK(sluice_telemetry_detach("test.hit"));

    /* Bad arguments. */
    CHECK_RC(sluice_telemetry_attach(NULL, "e", test_events_record, &seen),
             SLUICE_EINVAL);
    CHECK_RC(sluice_telemetry_attach("id", NULL, test_events_record, &seen),
             SLUICE_EINVAL);
    CHECK_RC(sluice_telemetry_attach("id", "e", NULL, &seen), SLUICE_EINVAL);
    CHECK_RC(sluice_telemetry_detach(NULL), SLUICE_EINVAL);
    test_context(NULL);
}

static void test_telemetry(void)
{
    sluice_store *mem = NULL, *vk = NULL;
    char url[200];

    CHECK_OK(sluice_store_open(&mem, "mem://", NULL));
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&vk, url, NULL));
    if (mem == NULL || vk == NULL)
        exit(2);
    telemetry_on(mem, "mem", SLUICE_EVENT_HIT_REFUSED);
    telemetry_on(vk, "valkey", SLUICE_EVENT_HIT_REFUSED);
    telemetry_on(mem, "mem", SLUICE_EVENT_RATE_LIMIT_HIT);
    telemetry_on(vk, "valkey", SLUICE_EVENT_RATE_LIMIT_HIT);
    sluice_store_free(vk);
    sluice_store_free(mem);
}

int main(void)
{
    sluice_store *st = NULL;
    char url[200];
    uint64_t t0 = rs_mono_ms();

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_emq: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_emq: server %s (pid %d)\n", server.url,
           (int)server.pid);
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        return 1;
    test_rate_limit_ttl(st);
    test_limiter_incr(st);
    test_limiter_incr_expiry_instant(st);
    test_admit_loop(st);
    sluice_store_free(st);
    test_key_names();
    test_embedded_not_supported();
    test_telemetry();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_emq");
}
