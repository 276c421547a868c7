/*
 * test_valkey_faults.c - the Valkey store when the server is gone, stalled,
 * busy, restarted, flushed, or refuses us; its URLs; and many threads on one
 * store.
 *
 * Each fault is made for real: the private server is killed (SIGKILL, like a
 * crash), stopped (SIGSTOP: it keeps its sockets and answers nothing), kept
 * busy by a script that never ends, restarted on the same port, or told to
 * SCRIPT FLUSH. The store is opened once with ?timeout=200&connect_timeout=200
 * and never reopened, and every call is timed:
 *
 *   - while the server is down or stalled, every call fails with
 *     SLUICE_ECONN or SLUICE_ETIMEDOUT (never a decision: 'allowed' stays 0),
 *     and returns within the timeout plus slack (under 1 s here);
 *   - once the server is back, calls succeed again;
 *   - with ?on_error=open or closed, the policy stands in and says so in
 *     'fallback', and sluice_store_stats_get() counts each case; a wrong
 *     reply (SLUICE_EPROTO) is never papered over.
 *
 * Also: malformed URLs, AUTH (a password, an ACL user, escapes in the URL),
 * the database number, and eight threads sharing a pool of two connections,
 * which must neither fail nor over-admit (run under TSan too).
 */
#include "store/store.h" /* sluice__key_build */
#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call must come back within the timeout (200 ms) plus this much slack. */
#define CALL_BOUND_MS 1000

static rs_server server;

static int is_unavailable(int rc)
{
    return rc == SLUICE_ECONN || rc == SLUICE_ETIMEDOUT;
}

static sluice_store *open_store(const char *query)
{
    sluice_store *st = NULL;
    char url[256];

    snprintf(url, sizeof(url), "%s?%s", server.url, query);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    return st;
}

/* One timed hit: its code, decision and duration in ms. */
static int timed_hit(sluice_decision *d, sluice_store *st,
                     const sluice_limit *lim, const char *key, uint64_t *ms)
{
    uint64_t t0 = rs_mono_us();
    int rc;

    memset(d, 0x5a, sizeof(*d)); /* so a stale field cannot pass for 0 */
    rc = sluice_hit(d, st, lim, key, strlen(key), 1);
    *ms = (rs_mono_us() - t0) / 1000;
    return rc;
}

/* ---- Down, stalled, busy, back ------------------------------------------- */

static void test_killed_and_restarted(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 1000000, 60000);
    sluice_store *st = open_store("timeout=200&connect_timeout=200&pool=2");
    sluice_store_stats stats;
    sluice_decision d;
    uint64_t ms, worst = 0, wait;

    test_context("server killed, then restarted");
    for (int i = 0; i < 10; i++) {
        CHECK_OK(timed_hit(&d, st, &lim, "k", &ms));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    }
    rs_kill(&server);
    for (int i = 0; i < 10; i++) {
        int rc = timed_hit(&d, st, &lim, "k", &ms);

        if (!CHECK(is_unavailable(rc)))
            fprintf(stderr, "    call %d: %s: %s\n", i, sluice_err_name(rc),
                    sluice_last_error());
        CHECK(d.allowed == 0);
        CHECK(sluice_last_error()[0] != '\0');
        worst = ms > worst ? ms : worst;
        CHECK(ms < CALL_BOUND_MS);
    }
    CHECK(is_unavailable(sluice_peek(&d, st, &lim, "k", 1, 1)));
    CHECK(d.allowed == 0);
    CHECK(is_unavailable(sluice_reset(st, &lim, "k", 1)));
    CHECK(is_unavailable(sluice_emq_rate_limit_ttl(&wait, st, "q", 1, 5)));
    CHECK(is_unavailable(sluice_emq_limiter_incr(NULL, NULL, st, "q", 1,
                                                 1000)));
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK(stats.errors >= 11);
    CHECK_EQ_U64(stats.fell_open, 0);
    CHECK_EQ_U64(stats.fell_closed, 0);
    printf("  killed: worst call %" PRIu64 " ms\n", worst);

    /* Back on the same port, empty (no scripts, no keys): the same store
       reconnects and loads its scripts again. */
    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
    for (int i = 0; i < 10; i++) {
        int rc = timed_hit(&d, st, &lim, "k", &ms);

        if (!CHECK_OK(rc))
            fprintf(stderr, "    call %d after restart\n", i);
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 1000000 - 1 - (uint64_t)i);
    }
    CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, "q", 1, 5));
    sluice_store_free(st);
    test_context(NULL);
}

static void test_stalled(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000, 60000);
    sluice_store *st = open_store("timeout=200&connect_timeout=200&pool=2");
    sluice_store *fresh = NULL;
    sluice_decision d;
    uint64_t ms, worst = 0;

    test_context("server stalled (SIGSTOP), then resumed");
    CHECK_OK(timed_hit(&d, st, &lim, "s", &ms));
    rs_pause(&server);
    for (int i = 0; i < 4; i++) {
        int rc = timed_hit(&d, st, &lim, "s", &ms);

        if (!CHECK_RC(rc, SLUICE_ETIMEDOUT))
            fprintf(stderr, "    stalled call %d took %" PRIu64 " ms\n", i,
                    ms);
        CHECK(d.allowed == 0);
        CHECK(ms < CALL_BOUND_MS);
        CHECK(ms >= 150); /* it did wait for the server */
        worst = ms > worst ? ms : worst;
    }
    CHECK(strstr(sluice_last_error(), "timed out") != NULL);
    /* A store that has not loaded its scripts yet: the load times out. */
    fresh = open_store("timeout=200&connect_timeout=200");
    {
        int rc = timed_hit(&d, fresh, &lim, "s", &ms);

        CHECK(is_unavailable(rc));
        CHECK(ms < CALL_BOUND_MS);
    }
    rs_resume(&server);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(timed_hit(&d, st, &lim, "s", &ms));
        CHECK(d.allowed);
    }
    CHECK_OK(timed_hit(&d, fresh, &lim, "s", &ms));
    CHECK(d.allowed);
    /* 1 + 5 + 1 admitted. A call that timed out may or may not have been
       counted: its request sat in the stopped server's socket, and the
       server ran it when it resumed, after the caller had given up. So
       the count is 7 plus at most the 4 stalled hits. */
    CHECK_OK(sluice_peek(&d, st, &lim, "s", 1, 1));
    CHECK(d.remaining <= 1000000 - 7 - 1 &&
          d.remaining >= 1000000 - 7 - 4 - 1);
    printf("  stalled: %" PRIu64 " of 4 timed-out hits were counted after "
           "the server resumed\n", 1000000 - 7 - 1 - d.remaining);
    printf("  stalled: worst call %" PRIu64 " ms\n", worst);
    sluice_store_free(fresh);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * A server busy in a script (past busy-reply-threshold) answers BUSY: the
 * store reads that as "unavailable", like a timeout, so policies apply.
 */
static void test_busy_script(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    sluice_store *st = open_store("timeout=500&connect_timeout=200");
    sluice_store *open = open_store("timeout=500&on_error=open");
    sluice_decision d;
    redisContext *busy;
    struct timeval tv = {2, 0};
    redisReply *r;
    uint64_t ms;
    int rc;

    test_context("server busy in a script");
    CHECK_OK(timed_hit(&d, st, &lim, "b", &ms));
    CHECK_OK(timed_hit(&d, open, &lim, "b", &ms));
    busy = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    if (!CHECK(busy != NULL && busy->err == 0))
        exit(1);
    redisAppendCommand(busy, "EVAL %s 0", "while true do end");
    {
        int done = 0;

        while (!done)
            if (redisBufferWrite(busy, &done) != REDIS_OK)
                break;
    }
    rs_sleep_ms(300); /* past the server's busy-reply-threshold of 100 ms */
    rc = timed_hit(&d, st, &lim, "b", &ms);
    if (!CHECK_RC(rc, SLUICE_ECONN))
        fprintf(stderr, "    busy: %s\n", sluice_last_error());
    CHECK(strstr(sluice_last_error(), "BUSY") != NULL);
    CHECK(d.allowed == 0);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_OK(timed_hit(&d, open, &lim, "b", &ms));
    CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);
    r = rs_cmd(&server, "SCRIPT KILL");
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    if (r != NULL)
        freeReplyObject(r);
    if (redisGetReply(busy, (void **)&r) == REDIS_OK && r != NULL)
        freeReplyObject(r); /* the killed script's error */
    redisFree(busy);
    CHECK_OK(timed_hit(&d, st, &lim, "b", &ms));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    CHECK_EQ_U64(d.remaining, 10 - 3); /* the fell-open hit never counted */
    sluice_store_free(open);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_script_flush(void)
{
    sluice_limit lims[TEST_ALGO_N];
    sluice_store *st = open_store("timeout=2000&pool=3");
    sluice_decision d;
    uint64_t wait, count;

    test_context("SCRIPT FLUSH under a live store");
    for (int a = 0; a < TEST_ALGO_N; a++)
        lims[a] = SLUICE_LIMIT((sluice_algo)a, 100, 60000);
    for (int round = 0; round < 3; round++) {
        /* Two hits of each algorithm a round. */
        for (int i = 0; i < 2 * TEST_ALGO_N; i++)
            CHECK_OK(sluice_hit(&d, st, &lims[i % TEST_ALGO_N], "f", 1, 1));
        CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, "fq", 2, 60000));
        CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, "fq", 2, 100));
        CHECK(rs_ok(&server, "SCRIPT FLUSH") == 0);
    }
    for (int a = 0; a < TEST_ALGO_N; a++) {
        CHECK_OK(sluice_peek(&d, st, &lims[a], "f", 1, 1));
        CHECK_EQ_U64(d.remaining, 100 - 6 - 1);
    }
    CHECK_OK(sluice_emq_limiter_incr(&count, NULL, st, "fq", 2, 60000));
    CHECK_EQ_U64(count, 4);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Policies ------------------------------------------------------------ */

static void test_policies(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 5, 60000);
    sluice_store *open =
        open_store("timeout=200&connect_timeout=200&on_error=open");
    sluice_store *closed =
        open_store("timeout=200&connect_timeout=200&on_error=closed");
    sluice_store *fail = open_store("timeout=200&connect_timeout=200");
    sluice_store_stats st;
    sluice_decision d;
    uint64_t ms;
    char key[128];
    size_t klen;

    test_context("fail-open and fail-closed");
    /* While the server answers, the policies change nothing. */
    for (int i = 0; i < 6; i++) {
        CHECK_OK(timed_hit(&d, open, &lim, "p", &ms));
        CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    }
    CHECK(!d.allowed); /* the sixth: a real refusal */
    CHECK_OK(timed_hit(&d, closed, &lim, "p", &ms));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    CHECK_OK(sluice_store_stats_get(&st, open));
    CHECK_EQ_U64(st.errors, 0);

    /* A wrong reply is an error whatever the policy. */
    sluice__key_build(key, sizeof(key), &klen, "sluice", "junk", 4,
                      "sliding-counter");
    key[klen] = '\0';
    CHECK(rs_ok(&server, "SET %s x", key) == 0);
    CHECK_RC(sluice_hit(&d, open, &lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK(!d.allowed);
    CHECK_RC(sluice_hit(&d, closed, &lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK_OK(sluice_store_stats_get(&st, open));
    CHECK_EQ_U64(st.errors, 0);

    /* Down: open admits, closed refuses for one timeout, fail fails. */
    rs_kill(&server);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(timed_hit(&d, open, &lim, "p", &ms));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.fallback, SLUICE_FELL_OPEN);
        CHECK_EQ_U64(d.limit, 5);
        CHECK(ms < CALL_BOUND_MS);
        CHECK_OK(sluice_peek(&d, open, &lim, "p", 1, 1));
        CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);

        CHECK_OK(timed_hit(&d, closed, &lim, "p", &ms));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.fallback, SLUICE_FELL_CLOSED);
        CHECK_EQ_U64(d.retry_after_ms, 200);
        CHECK_EQ_U64(d.limit, 5);
        CHECK(ms < CALL_BOUND_MS);

        CHECK(is_unavailable(timed_hit(&d, fail, &lim, "p", &ms)));
        CHECK(!d.allowed);
    }
    /* The queue calls have no policy: they report the error. */
    CHECK(is_unavailable(sluice_emq_limiter_incr(NULL, NULL, open, "q", 1,
                                                 1000)));

    /* Stalled: the same, after the timeout. */
    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
    rs_pause(&server);
    /* Another key: a timed-out request may still run when it resumes. */
    CHECK_OK(timed_hit(&d, open, &lim, "p-stalled", &ms));
    CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_OK(timed_hit(&d, closed, &lim, "p-stalled", &ms));
    CHECK(!d.allowed && d.fallback == SLUICE_FELL_CLOSED);
    CHECK(ms < CALL_BOUND_MS);
    rs_resume(&server);

    CHECK_OK(sluice_store_stats_get(&st, open));
    CHECK_EQ_U64(st.errors, 3 + 3 + 1);
    CHECK_EQ_U64(st.fell_open, 3 + 3 + 1);
    CHECK_EQ_U64(st.fell_closed, 0);
    CHECK_OK(sluice_store_stats_get(&st, closed));
    CHECK_EQ_U64(st.errors, 4);
    CHECK_EQ_U64(st.fell_open, 0);
    CHECK_EQ_U64(st.fell_closed, 4);
    CHECK_OK(sluice_store_stats_get(&st, fail));
    CHECK_EQ_U64(st.errors, 3);
    CHECK_EQ_U64(st.fell_open + st.fell_closed, 0);

    /* Back: answered again (the restarted server is empty). */
    CHECK_OK(timed_hit(&d, open, &lim, "p", &ms));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    CHECK_EQ_U64(d.remaining, 4);
    CHECK_OK(timed_hit(&d, closed, &lim, "p", &ms));
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);

    /* The policy from the options struct; the URL's wins. */
    {
        sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
        sluice_store *s1 = NULL;
        char url[200];

        o.on_error = SLUICE_ON_ERROR_CLOSED;
        o.command_timeout_ms = 200;
        o.connect_timeout_ms = 200;
        CHECK_OK(sluice_store_open(&s1, server.url, &o));
        rs_kill(&server);
        CHECK_OK(sluice_hit(&d, s1, &lim, "p", 1, 1));
        CHECK(d.fallback == SLUICE_FELL_CLOSED && !d.allowed);
        sluice_store_free(s1);
        s1 = NULL;
        snprintf(url, sizeof(url), "%s?on_error=open", server.url);
        CHECK_OK(sluice_store_open(&s1, url, &o));
        CHECK_OK(sluice_hit(&d, s1, &lim, "p", 1, 1));
        CHECK(d.fallback == SLUICE_FELL_OPEN && d.allowed);
        sluice_store_free(s1);
        o.on_error = 7;
        CHECK_RC(sluice_store_open(&s1, server.url, &o), SLUICE_EINVAL);
        if (!CHECK(rs_restart(&server) == 0))
            exit(1);
    }
    sluice_store_free(fail);
    sluice_store_free(closed);
    sluice_store_free(open);
    test_context(NULL);
}

/* ---- Killed in the middle of a run, with threads ------------------------- */

#define RUN_THREADS 4
#define RUN_MAX_CALLS 20000

typedef struct call_rec {
    uint64_t start_us, end_us;
    int rc;
    int allowed;
} call_rec;

typedef struct run_thread {
    sluice_store *st;
    int index;
    atomic_int *stop;
    call_rec *calls;
    size_t n;
} run_thread;

static void *run_worker(void *arg)
{
    run_thread *t = arg;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 1000000000, 60000);
    char key[16];

    snprintf(key, sizeof(key), "run%d", t->index % 2);
    while (!atomic_load(t->stop) && t->n < RUN_MAX_CALLS) {
        call_rec *c = &t->calls[t->n++];
        sluice_decision d;

        c->start_us = rs_mono_us();
        memset(&d, 0, sizeof(d));
        c->rc = sluice_hit(&d, t->st, &lim, key, strlen(key), 1);
        c->allowed = d.allowed;
        c->end_us = rs_mono_us();
        rs_sleep_ms(1); /* a steady stream, not a spin */
    }
    return NULL;
}

static void test_killed_mid_run(void)
{
    sluice_store *st = open_store("timeout=200&connect_timeout=200&pool=2");
    run_thread th[RUN_THREADS];
    pthread_t tid[RUN_THREADS];
    atomic_int stop;
    uint64_t kill_begin, kill_done, restart_begin, restart_done;
    long before = 0, down = 0, after = 0, bad = 0, slow = 0;
    uint64_t worst_us = 0;

    test_context("server killed in the middle of a threaded run");
    atomic_init(&stop, 0);
    for (int i = 0; i < RUN_THREADS; i++) {
        th[i].st = st;
        th[i].index = i;
        th[i].stop = &stop;
        th[i].n = 0;
        th[i].calls = calloc(RUN_MAX_CALLS, sizeof(call_rec));
        if (th[i].calls == NULL)
            exit(2);
        pthread_create(&tid[i], NULL, run_worker, &th[i]);
    }
    rs_sleep_ms(200);
    kill_begin = rs_mono_us();
    rs_kill(&server);
    kill_done = rs_mono_us();
    rs_sleep_ms(500);
    restart_begin = rs_mono_us();
    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
    restart_done = rs_mono_us();
    rs_sleep_ms(300);
    atomic_store(&stop, 1);
    for (int i = 0; i < RUN_THREADS; i++)
        pthread_join(tid[i], NULL);

    for (int i = 0; i < RUN_THREADS; i++) {
        for (size_t j = 0; j < th[i].n; j++) {
            const call_rec *c = &th[i].calls[j];
            uint64_t took = c->end_us - c->start_us;

            worst_us = took > worst_us ? took : worst_us;
            if (took >= CALL_BOUND_MS * 1000u)
                slow++;
            /* No call ever fails in another way, or decides on an error. */
            if (c->rc != SLUICE_OK && (!is_unavailable(c->rc) || c->allowed))
                bad++;
            if (c->end_us < kill_begin) {
                before++;
                bad += c->rc != SLUICE_OK || !c->allowed;
            } else if (c->start_us > kill_done && c->end_us < restart_begin) {
                down++;
                bad += c->rc == SLUICE_OK;
            } else if (c->start_us > restart_done) {
                after++;
                bad += c->rc != SLUICE_OK || !c->allowed;
            }
        }
        free(th[i].calls);
    }
    printf("  mid-run kill: %ld calls before, %ld while down, %ld after the "
           "restart; worst call %" PRIu64 " ms\n",
           before, down, after, worst_us / 1000);
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(slow, 0);
    CHECK(before > 0 && down > 0 && after > 0);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- URLs ---------------------------------------------------------------- */

static void test_urls(void)
{
    static const struct {
        const char *url;
        int rc;
        const char *says; /* a word the message must hold */
    } bad[] = {
        {"http://127.0.0.1:6379", SLUICE_EURL, "http"},
        {"redis:/127.0.0.1", SLUICE_EURL, "redis:/"},
        {"valkey//127.0.0.1", SLUICE_EURL, ""},
        {"redis://", SLUICE_EURL, "host"},
        {"redis://:6379", SLUICE_EURL, "host"},
        {"redis://127.0.0.1:0", SLUICE_EURL, "port"},
        {"redis://127.0.0.1:65536", SLUICE_EURL, "port"},
        {"redis://127.0.0.1:99999", SLUICE_EURL, "port"},
        {"redis://127.0.0.1:-1", SLUICE_EURL, "port"},
        {"redis://127.0.0.1:63a9", SLUICE_EURL, "port"},
        {"redis://127.0.0.1:", SLUICE_EURL, "port"},
        {"redis://127.0.0.1/x", SLUICE_EURL, "database"},
        {"redis://127.0.0.1/-1", SLUICE_EURL, "database"},
        {"redis://127.0.0.1?bogus=1", SLUICE_EURL, "bogus"},
        {"redis://127.0.0.1?timeout", SLUICE_EURL, "timeout"},
        {"redis://127.0.0.1?timeout=0", SLUICE_EURL, "timeout"},
        {"redis://127.0.0.1?timeout=abc", SLUICE_EURL, "timeout"},
        {"redis://127.0.0.1?connect_timeout=3600001", SLUICE_EURL,
         "connect_timeout"},
        {"redis://127.0.0.1?pool=0", SLUICE_EURL, "pool"},
        {"redis://127.0.0.1?pool=1025", SLUICE_EURL, "pool"},
        {"redis://127.0.0.1?clock=local", SLUICE_EURL, "clock"},
        {"redis://127.0.0.1?on_error=maybe", SLUICE_EURL, "on_error"},
        {"redis://127.0.0.1?prefix=a%zzb", SLUICE_EURL, "escape"},
        {"redis://127.0.0.1?prefix=a%4", SLUICE_EURL, "escape"},
        {"redis://127.0.0.1?prefix=a%00b", SLUICE_EURL, "escape"},
        {"redis://:se%zzret@127.0.0.1", SLUICE_EURL, "escape"},
        {"redis://user@127.0.0.1", SLUICE_EURL, "password"},
        {"redis://[::1:6379", SLUICE_EURL, "["},
        {"redis://127.0.0.1?prefix=a{b", SLUICE_EINVAL, "brace"},
        {"redis://127.0.0.1?prefix=a}b", SLUICE_EINVAL, "brace"},
        {"redis://127.0.0.1?prefix=a%7Bb", SLUICE_EINVAL, "brace"},
        {"redis://127.0.0.1?prefix=", SLUICE_EINVAL, "non-empty"},
        {"redis://127.0.0.1?emq_prefix=q{", SLUICE_EINVAL, "brace"},
        {"redis://127.0.0.1?emq_prefix=%7D", SLUICE_EINVAL, "brace"},
    };
    static const char *const good[] = {
        "redis://127.0.0.1",
        "valkey://127.0.0.1:6380/2",
        "redis://localhost:1?timeout=1&connect_timeout=3600000&pool=1024",
        "redis://:pw@h?clock=server&on_error=error",
        "redis://u:p%40ss@h:7/15?prefix=a%3Ab&emq_prefix=q&clock=caller",
        "redis://[::1]:6379",
        "redis://h?on_error=closed&on_error=open",
        "redis://h/",
    };
    sluice_store *st = NULL;

    test_context("store URLs");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sluice_store_open(&st, bad[i].url, NULL);

        if (!CHECK_RC(rc, bad[i].rc))
            fprintf(stderr, "    url '%s'\n", bad[i].url);
        CHECK(st == NULL);
        if (!CHECK(sluice_last_error()[0] != '\0' &&
                   strstr(sluice_last_error(), bad[i].says) != NULL))
            fprintf(stderr, "    url '%s': message \"%s\" lacks \"%s\"\n",
                    bad[i].url, sluice_last_error(), bad[i].says);
        sluice_store_free(st);
        st = NULL;
    }
    /* A message never shows the password. */
    {
        static const char *const secret_urls[] = {
            "redis://:hunter2@127.0.0.1:99999",
            "redis://u:hunter2@127.0.0.1?bogus=1",
            "valkey://u:hunter2@?timeout=1",
            "redis://u:hunter2@127.0.0.1/x",
        };

        for (size_t i = 0; i < sizeof(secret_urls) / sizeof(secret_urls[0]);
             i++) {
            CHECK_RC(sluice_store_open(&st, secret_urls[i], NULL),
                     SLUICE_EURL);
            if (!CHECK(strstr(sluice_last_error(), "hunter2") == NULL))
                fprintf(stderr, "    message: %s\n", sluice_last_error());
        }
    }
    /* Valid URLs open without connecting (the servers need not exist). */
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!CHECK_OK(sluice_store_open(&st, good[i], NULL)))
            fprintf(stderr, "    url '%s'\n", good[i]);
        if (st != NULL)
            CHECK(strcmp(sluice_store_kind(st), "valkey") == 0);
        sluice_store_free(st);
        st = NULL;
    }
    /* Prefixes from the options struct are checked the same way. */
    {
        sluice_store_opts o = SLUICE_STORE_OPTS_INIT;

        o.key_prefix = "bad{";
        CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
        o.key_prefix = NULL;
        o.emq_prefix = "}";
        CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
        o.emq_prefix = NULL;
        o.pool_size = 5000;
        CHECK_RC(sluice_store_open(&st, "redis://h", &o), SLUICE_EINVAL);
        CHECK(st == NULL);
    }
    test_context(NULL);
}

/* ---- AUTH and databases -------------------------------------------------- */

static void test_auth(void)
{
    static const char *const args[] = {"--requirepass", "secret", NULL};
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    rs_server as;
    sluice_store *st = NULL;
    sluice_decision d;
    char url[256];
    int rc;

    test_context("AUTH");
    if (!CHECK(rs_start(&as, args) == 0))
        return;
    CHECK(rs_ok(&as, "ACL SETUSER alice on >pw ~* +@all") == 0);
    CHECK(rs_ok(&as, "ACL SETUSER bob on >p@ss:w/rd%%x ~* +@all") == 0);
    CHECK(rs_ok(&as, "ACL SETUSER carol on >pw ~other:* +@all") == 0);

    /* No password: the server says NOAUTH, and the message shows it. */
    snprintf(url, sizeof(url), "%s?timeout=2000", as.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    rc = sluice_hit(&d, st, &lim, "a", 1, 1);
    CHECK(rc == SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "NOAUTH") != NULL);
    CHECK(!d.allowed);
    sluice_store_free(st);

    /* A wrong password: a clear error, not a decision, whatever the
       policy (a refused login is not an unreachable server). */
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d?on_error=open",
             as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    rc = sluice_hit(&d, st, &lim, "a", 1, 1);
    CHECK_RC(rc, SLUICE_EPROTO);
    CHECK(!d.allowed);
    if (!CHECK(strstr(sluice_last_error(), "AUTH") != NULL &&
               (strstr(sluice_last_error(), "WRONGPASS") != NULL ||
                strstr(sluice_last_error(), "invalid") != NULL)))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    /* Again: a refused AUTH must not leave a half-open connection that
       later calls would use unauthenticated. */
    CHECK_RC(sluice_hit(&d, st, &lim, "a", 1, 1), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "AUTH") != NULL);
    sluice_store_free(st);

    /* The right password. */
    snprintf(url, sizeof(url), "redis://:secret@127.0.0.1:%d", as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, &lim, "a", 1, 1));
    CHECK(d.allowed);
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, "q", 1, 60000));
    sluice_store_free(st);

    /* An ACL user, and one whose password needs escapes in a URL. */
    snprintf(url, sizeof(url), "redis://alice:pw@127.0.0.1:%d", as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, &lim, "a", 1, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 8);
    sluice_store_free(st);
    snprintf(url, sizeof(url),
             "redis://bob:p%%40ss%%3Aw%%2Frd%%25x@127.0.0.1:%d", as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, &lim, "a", 1, 1));
    CHECK_EQ_U64(d.remaining, 7);
    sluice_store_free(st);
    snprintf(url, sizeof(url), "redis://alice:nope@127.0.0.1:%d", as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_RC(sluice_hit(&d, st, &lim, "a", 1, 1), SLUICE_EPROTO);
    sluice_store_free(st);

    /* A user without access to the keys: the server's NOPERM, as it is. */
    snprintf(url, sizeof(url), "redis://carol:pw@127.0.0.1:%d", as.port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    rc = sluice_hit(&d, st, &lim, "a", 1, 1);
    CHECK_RC(rc, SLUICE_EPROTO);
    if (!CHECK(strstr(sluice_last_error(), "NOPERM") != NULL ||
               strstr(sluice_last_error(), "permission") != NULL))
        fprintf(stderr, "    message: %s\n", sluice_last_error());
    sluice_store_free(st);

    rs_stop(&as);
    test_context(NULL);
}

static void test_database(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    sluice_store *st = NULL;
    sluice_decision d;
    char url[256];

    test_context("database selection");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s/3?timeout=2000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_OK(sluice_hit(&d, st, &lim, "dbkey", 5, 1));
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, "dbq", 3, 60000));
    CHECK(rs_int(&server, "EXISTS sluice:{dbkey}:fixed") == 0);
    CHECK(rs_ok(&server, "SELECT 3") == 0);
    CHECK(rs_int(&server, "EXISTS sluice:{dbkey}:fixed") == 1);
    CHECK(rs_int(&server, "EXISTS emq:{dbq}:limiter") == 1);
    CHECK(rs_int(&server, "DBSIZE") == 2);
    CHECK(rs_ok(&server, "SELECT 0") == 0);
    CHECK(rs_int(&server, "DBSIZE") == 0);
    /* Reconnections select the database again. */
    CHECK(rs_ok(&server, "CLIENT KILL TYPE normal SKIPME yes") == 0);
    CHECK_OK(sluice_hit(&d, st, &lim, "dbkey", 5, 1));
    CHECK_EQ_U64(d.remaining, 8);
    CHECK(rs_int(&server, "DBSIZE") == 0);
    sluice_store_free(st);

    /* A database the server does not have: its error, as it is. */
    snprintf(url, sizeof(url), "%s/99?timeout=2000", server.url);
    st = NULL;
    CHECK_OK(sluice_store_open(&st, url, NULL));
    CHECK_RC(sluice_hit(&d, st, &lim, "dbkey", 5, 1), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "SELECT") != NULL);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Threads on one store ------------------------------------------------ */

#define SHARE_THREADS 8
/* Calls per thread: 400 for three algorithms, so that each algorithm's
   shared key sees more than its max (1000) of requests. */
#define SHARE_CALLS (400 * TEST_ALGO_N / 3)

typedef struct share_thread {
    sluice_store *st;
    int index;
    long errors, admitted[TEST_ALGO_N], emq;
} share_thread;

static void *share_worker(void *arg)
{
    share_thread *t = arg;

    for (int i = 0; i < SHARE_CALLS; i++) {
        sluice_algo algo = (sluice_algo)((i + t->index) % TEST_ALGO_N);
        /* One shared key per algorithm, max 1000 against 8 x 400 / 3. */
        sluice_limit shared = SLUICE_LIMIT(algo, 1000, 600000);
        sluice_limit own = SLUICE_LIMIT(algo, 5, 600000);
        sluice_decision d;
        char key[24];
        int rc;

        rc = sluice_hit(&d, t->st, &shared, "shared", 6, 1);
        if (rc != SLUICE_OK) {
            if (t->errors++ < 3)
                fprintf(stderr, "    thread %d: %s: %s\n", t->index,
                        sluice_err_name(rc), sluice_last_error());
        } else if (d.allowed) {
            t->admitted[algo]++;
        }
        snprintf(key, sizeof(key), "t%d-%d", t->index, i % 7);
        rc = i % 2 ? sluice_peek(&d, t->st, &own, key, strlen(key), 1)
                   : sluice_hit(&d, t->st, &own, key, strlen(key), 1);
        t->errors += rc != SLUICE_OK;
        if (i % 10 == 0) {
            uint64_t count, wait;

            rc = sluice_emq_limiter_incr(&count, NULL, t->st, "shared-q", 8,
                                         600000);
            t->errors += rc != SLUICE_OK;
            t->emq += rc == SLUICE_OK;
            rc = sluice_emq_rate_limit_ttl(&wait, t->st, "shared-q", 8, 0);
            t->errors += rc != SLUICE_OK;
        }
    }
    return NULL;
}

static void test_threads_share_a_pool(void)
{
    sluice_store *st = open_store("timeout=5000&pool=2");
    share_thread th[SHARE_THREADS];
    pthread_t tid[SHARE_THREADS];
    long errors = 0, admitted[TEST_ALGO_N] = {0}, emq = 0;
    long per_algo[TEST_ALGO_N] = {0};
    uint64_t t0 = rs_mono_ms();

    test_context("eight threads, a pool of two");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (int i = 0; i < SHARE_THREADS; i++) {
        memset(&th[i], 0, sizeof(th[i]));
        th[i].st = st;
        th[i].index = i;
        pthread_create(&tid[i], NULL, share_worker, &th[i]);
    }
    for (int i = 0; i < SHARE_THREADS; i++) {
        pthread_join(tid[i], NULL);
        errors += th[i].errors;
        emq += th[i].emq;
        for (int a = 0; a < TEST_ALGO_N; a++)
            admitted[a] += th[i].admitted[a];
    }
    for (int i = 0; i < SHARE_THREADS; i++)
        for (int c = 0; c < SHARE_CALLS; c++)
            per_algo[(c + i) % TEST_ALGO_N]++;
    CHECK_EQ_U64(errors, 0);
    /* Demand above max: exactly max admitted on each algorithm's key. */
    for (int a = 0; a < TEST_ALGO_N; a++) {
        CHECK(per_algo[a] > 1000);
        CHECK_EQ_U64(admitted[a], 1000);
    }
    {
        redisReply *r = rs_cmd(&server, "GET emq:{shared-q}:limiter");

        CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
              strtol(r->str, NULL, 10) == emq);
        if (r != NULL)
            freeReplyObject(r);
    }
    printf("  %d threads x %d rounds on a pool of 2: %" PRIu64 " ms\n",
           SHARE_THREADS, SHARE_CALLS, rs_mono_ms() - t0);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    static const char *const args[] = {"--busy-reply-threshold", "100", NULL};
    uint64_t t0 = rs_mono_ms();

    test_urls();
    if (rs_start(&server, args) < 0) {
        fprintf(stderr, "test_valkey_faults: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_faults: server %s (pid %d)\n", server.url,
           (int)server.pid);
    test_killed_and_restarted();
    test_stalled();
    test_busy_script();
    test_script_flush();
    test_policies();
    test_killed_mid_run();
    test_database();
    test_threads_share_a_pool();
    test_auth();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_faults");
}
