/*
 * test_valkey_faults.c - the Valkey store when the server is gone, stalled,
 * busy, restarted or flushed; its failure policies; and many threads on one
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
 * Also: eight threads sharing a pool of two connections, which must neither
 * fail nor over-admit (run under TSan too). URLs are checked in
 * tests/unit/test_valkey_urls.c, logins and databases in
 * test_valkey_auth.c.
 */
#include "server.h"
#include "stores.h"
#include "test.h"

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
    return test_store_open(server.url, query, NULL);
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

/* The three stores of the policies' test: fail-open, fail-closed, and
   neither (the errors themselves). */
typedef struct policy_stores {
    sluice_store *open, *closed, *fail;
} policy_stores;

/* While the server answers, the policies change nothing; a wrong reply is
   an error whatever the policy. */
static void policies_answered(const policy_stores *p, const sluice_limit *lim)
{
    sluice_store_stats st;
    sluice_decision d;
    uint64_t ms;
    char key[128];

    for (int i = 0; i < 6; i++) {
        CHECK_OK(timed_hit(&d, p->open, lim, "p", &ms));
        CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    }
    CHECK(!d.allowed); /* the sixth: a real refusal */
    CHECK_OK(timed_hit(&d, p->closed, lim, "p", &ms));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    CHECK_OK(sluice_store_stats_get(&st, p->open));
    CHECK_EQ_U64(st.errors, 0);

    test_key_of(key, sizeof(key), "sluice", "junk", 4,
                sluice_algo_name(lim->algo));
    CHECK(rs_ok(&server, "SET %s x", key) == 0);
    CHECK_RC(sluice_hit(&d, p->open, lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK(!d.allowed);
    CHECK_RC(sluice_hit(&d, p->closed, lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK_OK(sluice_store_stats_get(&st, p->open));
    CHECK_EQ_U64(st.errors, 0);
}

/* Down: open admits, closed refuses for one timeout, fail fails; the
   queue calls have no policy. */
static void policies_down(const policy_stores *p, const sluice_limit *lim)
{
    sluice_decision d;
    uint64_t ms;

    rs_kill(&server);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(timed_hit(&d, p->open, lim, "p", &ms));
        CHECK(d.allowed);
        CHECK_EQ_U64(d.fallback, SLUICE_FELL_OPEN);
        CHECK_EQ_U64(d.limit, 5);
        CHECK(ms < CALL_BOUND_MS);
        CHECK_OK(sluice_peek(&d, p->open, lim, "p", 1, 1));
        CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);

        CHECK_OK(timed_hit(&d, p->closed, lim, "p", &ms));
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.fallback, SLUICE_FELL_CLOSED);
        CHECK_EQ_U64(d.retry_after_ms, 200);
        CHECK_EQ_U64(d.limit, 5);
        CHECK(ms < CALL_BOUND_MS);

        CHECK(is_unavailable(timed_hit(&d, p->fail, lim, "p", &ms)));
        CHECK(!d.allowed);
    }
    /* The queue calls have no policy: they report the error. */
    CHECK(is_unavailable(sluice_emq_limiter_incr(NULL, NULL, p->open, "q", 1,
                                                 1000)));
}

/* Stalled: the same, after the timeout. */
static void policies_stalled(const policy_stores *p, const sluice_limit *lim)
{
    sluice_decision d;
    uint64_t ms;

    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
    rs_pause(&server);
    /* Another key: a timed-out request may still run when it resumes. */
    CHECK_OK(timed_hit(&d, p->open, lim, "p-stalled", &ms));
    CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_OK(timed_hit(&d, p->closed, lim, "p-stalled", &ms));
    CHECK(!d.allowed && d.fallback == SLUICE_FELL_CLOSED);
    CHECK(ms < CALL_BOUND_MS);
    rs_resume(&server);
}

/* Each store counted its errors and what its policy answered. */
static void policies_counted(const policy_stores *p)
{
    sluice_store_stats st;

    CHECK_OK(sluice_store_stats_get(&st, p->open));
    CHECK_EQ_U64(st.errors, 3 + 3 + 1);
    CHECK_EQ_U64(st.fell_open, 3 + 3 + 1);
    CHECK_EQ_U64(st.fell_closed, 0);
    CHECK_OK(sluice_store_stats_get(&st, p->closed));
    CHECK_EQ_U64(st.errors, 4);
    CHECK_EQ_U64(st.fell_open, 0);
    CHECK_EQ_U64(st.fell_closed, 4);
    CHECK_OK(sluice_store_stats_get(&st, p->fail));
    CHECK_EQ_U64(st.errors, 3);
    CHECK_EQ_U64(st.fell_open + st.fell_closed, 0);
}

/* The policy from the options struct; the URL's wins. */
static void policies_from_options(const sluice_limit *lim)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *s1 = NULL;
    sluice_decision d;
    char url[200];

    o.on_error = SLUICE_ON_ERROR_CLOSED;
    o.command_timeout_ms = 200;
    o.connect_timeout_ms = 200;
    CHECK_OK(sluice_store_open(&s1, server.url, &o));
    rs_kill(&server);
    CHECK_OK(sluice_hit(&d, s1, lim, "p", 1, 1));
    CHECK(d.fallback == SLUICE_FELL_CLOSED && !d.allowed);
    sluice_store_free(s1);
    s1 = NULL;
    snprintf(url, sizeof(url), "%s?on_error=open", server.url);
    CHECK_OK(sluice_store_open(&s1, url, &o));
    CHECK_OK(sluice_hit(&d, s1, lim, "p", 1, 1));
    CHECK(d.fallback == SLUICE_FELL_OPEN && d.allowed);
    sluice_store_free(s1);
    o.on_error = 7;
    CHECK_RC(sluice_store_open(&s1, server.url, &o), SLUICE_EINVAL);
    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
}

static void test_policies(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 5, 60000);
    policy_stores p;
    sluice_decision d;
    uint64_t ms;

    p.open = open_store("timeout=200&connect_timeout=200&on_error=open");
    p.closed = open_store("timeout=200&connect_timeout=200&on_error=closed");
    p.fail = open_store("timeout=200&connect_timeout=200");
    test_context("fail-open and fail-closed");
    policies_answered(&p, &lim);
    policies_down(&p, &lim);
    policies_stalled(&p, &lim);
    policies_counted(&p);
    /* Back: answered again (the restarted server is empty). */
    CHECK_OK(timed_hit(&d, p.open, &lim, "p", &ms));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    CHECK_EQ_U64(d.remaining, 4);
    CHECK_OK(timed_hit(&d, p.closed, &lim, "p", &ms));
    CHECK_EQ_U64(d.fallback, SLUICE_ANSWERED);
    policies_from_options(&lim);
    sluice_store_free(p.fail);
    sluice_store_free(p.closed);
    sluice_store_free(p.open);
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
        /* One shared key per algorithm, max 1000 against 8 x 400 / 3.
           gcra refills a unit every window / max (600 ms at 10 minutes,
           within a slow run's time): its window is 2^40 ms instead. */
        sluice_limit shared = SLUICE_LIMIT(
            algo, 1000, algo == SLUICE_GCRA ? SLUICE_WINDOW_MAX_MS : 600000);
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
    test_threads_share_a_pool();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_faults");
}
