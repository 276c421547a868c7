/*
 * test_async_outage.c - the async API (sluice/async.h) when the server
 * misbehaves: every callback runs exactly once, each within its deadline
 * and a generous slack, and what a wrong reply is never passes for an
 * outage.
 *
 *   outage     a private redis-server stalled (SIGSTOP) with calls in
 *              flight, then killed, then restarted on its port: the
 *              stalled calls time out (ETIMEDOUT, or the policy's answer
 *              with on_error=open), the calls to the dead server fail fast
 *              (ECONN, the back-off's "reconnecting"), and once it is back
 *              the handle connects again by itself and decides
 *   free       the handle freed with calls pending (queued, in flight,
 *              answered and not yet called back, on a server and on the
 *              embedded store): each one called back once with
 *              SLUICE_ECANCELED, and a call started from such a callback
 *              refused at once with no callback
 *   hostile    a scripted fake node (loopback) answering decisions with
 *              what no server sends: a status, a decision out of range, a
 *              negative array, a bare LF, a string over max_reply_bytes, an
 *              integer beyond 64 bits, a reply nobody asked for: each is
 *              SLUICE_EPROTO under on_error=open (never a fallback), while
 *              a node that answers nothing is an outage the policy answers
 *
 * Run under ASan, the free cases also say that nothing leaks.
 */
#include "fake_node.h"
#include "server.h"
#include "test.h"

#include "sluice/adapters/poll.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a call may take past its deadline: a loaded machine, a sanitizer. */
#define SLACK_MS 1500
#define TIMEOUT_MS 300
#define FLIGHT 20

static rs_server server;
static char server_name[32]; /* "127.0.0.1:PORT", as messages name it */
static long started, fired;

/* ---- One call's record, and the loop ------------------------------------------ */

typedef struct rec {
    int fired;
    int err;
    int allowed;
    sluice_fallback fallback;
    uint64_t remaining;
    uint64_t started_ms, called_ms;
    char msg[160];
    sluice_async *restart_on; /* start a call from the callback (free) */
    int restart_rc;
} rec;

static void note(rec *r, int err, const sluice_decision *d)
{
    fired++;
    r->fired++;
    r->err = err;
    r->called_ms = rs_mono_ms();
    if (d != NULL) {
        r->allowed = d->allowed;
        r->fallback = d->fallback;
        r->remaining = d->remaining;
    } else {
        snprintf(r->msg, sizeof(r->msg), "%s", sluice_last_error());
    }
}

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    rec *r = user;
    static const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

    (void)a;
    note(r, err, d);
    if (r->restart_on != NULL)
        r->restart_rc = sluice_async_hit(r->restart_on, &lim, "late", 4, 1,
                                         on_decision, r);
}

static void on_many(sluice_async *a, int err, sluice_request *reqs, size_t n,
                    void *user)
{
    (void)a;
    (void)reqs;
    (void)n;
    note(user, err, NULL);
}

static void on_done(sluice_async *a, int err, void *user)
{
    (void)a;
    note(user, err, NULL);
}

static int hit(sluice_async *a, const sluice_limit *lim, const char *key,
               rec *r)
{
    int rc;

    memset(r, 0, sizeof(*r));
    r->started_ms = rs_mono_ms();
    rc = sluice_async_hit(a, lim, key, strlen(key), 1, on_decision, r);
    started += rc == SLUICE_OK;
    return rc;
}

/* Runs the loop until nothing is pending, or 'bound_ms' (a test's guard,
   never the handle's: a hang fails the check below, it does not hang). */
static void drain(sluice_poll_loop *loop, sluice_async *a, uint64_t bound_ms)
{
    uint64_t until = rs_mono_ms() + bound_ms;

    while (sluice_async_pending(a) > 0 && rs_mono_ms() < until)
        if (sluice_poll_run(loop, a, 50) < 0)
            break;
    CHECK(sluice_async_pending(a) == 0);
}

/* Each of recs[0..n): called back once, within 'bound_ms' of its start. */
static void check_once(const rec *recs, size_t n, uint64_t bound_ms)
{
    for (size_t i = 0; i < n; i++) {
        test_context("call %zu (err %d: %s)", i, recs[i].err, recs[i].msg);
        CHECK(recs[i].fired == 1);
        CHECK(recs[i].called_ms - recs[i].started_ms <= bound_ms);
    }
    test_context(NULL);
}

/* Opens a store at 'base' with 'query' and a handle over it. */
static int open_handle(sluice_store **st, sluice_async **a,
                       sluice_poll_loop *loop, const char *base,
                       const char *query)
{
    char url[256];

    snprintf(url, sizeof(url), "%s%s%s", base, query != NULL ? "?" : "",
             query != NULL ? query : "");
    if (!CHECK_OK(sluice_store_open(st, url, NULL)))
        return -1;
    if (!CHECK_OK(sluice_async_poll_new(a, *st, loop))) {
        sluice_store_free(*st);
        return -1;
    }
    return 0;
}

/* ---- A stalled, then killed, then restarted server ------------------------------- */

/* Calls while the server is stalled: each times out, or the policy
   answers for it ('open'). */
static void stalled(sluice_poll_loop *loop, sluice_async *a, bool open)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    rec recs[FLIGHT];

    rs_pause(&server);
    for (size_t i = 0; i < FLIGHT; i++)
        CHECK_OK(hit(a, &lim, i % 2 ? "stall-a" : "stall-b", &recs[i]));
    drain(loop, a, 10000);
    check_once(recs, FLIGHT, TIMEOUT_MS + SLACK_MS);
    for (size_t i = 0; i < FLIGHT; i++) {
        test_context("stalled call %zu: %s", i, recs[i].msg);
        if (open)
            CHECK(recs[i].err == 0 && recs[i].allowed &&
                  recs[i].fallback == SLUICE_FELL_OPEN);
        else if (CHECK_RC(recs[i].err, SLUICE_ETIMEDOUT))
            /* sluice_last_error() in the callback: the call's own */
            CHECK(strstr(recs[i].msg, server_name) != NULL &&
                  strstr(recs[i].msg, "timed out") != NULL);
    }
    test_context(NULL);
}

/* Calls while the server is dead: each fails (or falls open) at once:
   a refused connect, or the back-off's fast failure. */
static void killed(sluice_poll_loop *loop, sluice_async *a, bool open)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    rec recs[FLIGHT];

    rs_kill(&server);
    for (size_t round = 0; round < 3; round++) {
        for (size_t i = 0; i < FLIGHT; i++)
            CHECK_OK(hit(a, &lim, "dead", &recs[i]));
        drain(loop, a, 10000);
        check_once(recs, FLIGHT, TIMEOUT_MS + SLACK_MS);
        for (size_t i = 0; i < FLIGHT; i++) {
            test_context("call %zu to a dead server: %s", i, recs[i].msg);
            if (open)
                CHECK(recs[i].err == 0 && recs[i].allowed &&
                      recs[i].fallback == SLUICE_FELL_OPEN);
            else
                CHECK((recs[i].err == SLUICE_ECONN ||
                       recs[i].err == SLUICE_ETIMEDOUT) &&
                      strstr(recs[i].msg, server_name) != NULL);
        }
        test_context(NULL);
    }
}

/* The server back on its port: within the back-off's longest wait and a
   slack, calls are decided again, each by the server. */
static void restarted(sluice_poll_loop *loop, sluice_async *a)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    uint64_t until;
    rec r, recs[8];
    bool back = false;

    if (!CHECK(rs_restart(&server) == 0))
        return;
    until = rs_mono_ms() + 2000 + 2 * SLACK_MS + 2000;
    while (!back && rs_mono_ms() < until) {
        CHECK_OK(hit(a, &lim, "probe", &r));
        drain(loop, a, 10000);
        CHECK(r.fired == 1);
        back = r.err == 0 && r.fallback == SLUICE_ANSWERED;
        if (!back)
            rs_sleep_ms(50);
    }
    CHECK(back);
    for (size_t i = 0; i < 8; i++)
        CHECK_OK(hit(a, &lim, "after", &recs[i]));
    drain(loop, a, 10000);
    check_once(recs, 8, TIMEOUT_MS + SLACK_MS);
    for (size_t i = 0; i < 8; i++) {
        test_context("call %zu after the restart: %s", i, recs[i].msg);
        CHECK_RC(recs[i].err, SLUICE_OK);
        CHECK(recs[i].fallback == SLUICE_ANSWERED);
        CHECK(recs[i].allowed == (i < 5));
    }
    test_context(NULL);
}

static void outage(const char *policy)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    char query[128];
    rec recs[FLIGHT];
    bool open = strcmp(policy, "open") == 0;

    test_context("on_error=%s", policy);
    snprintf(query, sizeof(query), "timeout=%d&connect_timeout=%d&"
             "on_error=%s&prefix=%s", TIMEOUT_MS, TIMEOUT_MS, policy, policy);
    if (open_handle(&st, &a, &loop, server.url, query) < 0)
        return;
    for (size_t i = 0; i < FLIGHT; i++)
        CHECK_OK(hit(a, &lim, "warm", &recs[i]));
    drain(&loop, a, 10000);
    check_once(recs, FLIGHT, TIMEOUT_MS + SLACK_MS);
    for (size_t i = 0; i < FLIGHT; i++)
        CHECK(recs[i].err == 0 && recs[i].fallback == SLUICE_ANSWERED &&
              recs[i].remaining == 1000 - 1 - i);
    stalled(&loop, a, open);
    killed(&loop, a, open);
    restarted(&loop, a);
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Freeing the handle with calls pending ------------------------------------- */

/* 'n' hits, a hit_many and a reset started; 'spin' loop turns run; then
   the handle is freed: every call called back once, ECANCELED unless its
   answer was called back before. */
static void free_pending(const char *url, int spin)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 100000, 60000);
    sluice_request reqs[10];
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    rec recs[50], many, reset;
    int cancelled = 0;

    test_context("free with calls pending on %s after %d turns", url, spin);
    if (open_handle(&st, &a, &loop, url,
                    strncmp(url, "mem:", 4) ? "timeout=2000" : NULL) < 0)
        return;
    for (size_t i = 0; i < 50; i++)
        CHECK_OK(hit(a, &lim, i % 3 ? "f1" : "f2", &recs[i]));
    recs[0].restart_on = a; /* its callback starts a call: refused */
    memset(&many, 0, sizeof(many));
    memset(&reset, 0, sizeof(reset));
    for (size_t i = 0; i < 10; i++)
        reqs[i] = (sluice_request){"m", 1, 1, 0, {0}};
    many.started_ms = reset.started_ms = rs_mono_ms();
    CHECK_OK(sluice_async_hit_many(a, &lim, reqs, 10, on_many, &many));
    CHECK_OK(sluice_async_reset(a, &lim, "f2", 2, on_done, &reset));
    started += 2;
    CHECK(sluice_async_pending(a) == 52);
    for (int t = 0; t < spin; t++)
        sluice_poll_run(&loop, a, 0);
    sluice_async_free(a); /* frees the loop's data too (cleanup hook) */
    check_once(recs, 50, 10000);
    check_once(&many, 1, 10000);
    check_once(&reset, 1, 10000);
    for (size_t i = 0; i < 50; i++) {
        CHECK(recs[i].err == SLUICE_OK || recs[i].err == SLUICE_ECANCELED);
        cancelled += recs[i].err == SLUICE_ECANCELED;
    }
    if (spin == 0) /* nothing could be called back before the free */
        CHECK(cancelled == 50 && many.err == SLUICE_ECANCELED &&
              reset.err == SLUICE_ECANCELED);
    if (recs[0].err == SLUICE_ECANCELED)
        CHECK_RC(recs[0].restart_rc, SLUICE_ECANCELED);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Hostile replies ------------------------------------------------------------- */

/* What the fake node answers a decision with, set by the test. */
typedef enum mode {
    ANSWER_STATUS,
    ANSWER_RANGE,
    ANSWER_NEGATIVE,
    ANSWER_BARE_LF,
    ANSWER_HUGE,
    ANSWER_WIDE_INT,
    ANSWER_EXTRA,
    ANSWER_FRESH,
    ANSWER_NOTHING,
    MODES
} mode;

static const char *const mode_name[MODES] = {
    "a status", "allowed 7", "a negative array", "a bare LF",
    "a string over max_reply_bytes", "an integer beyond 64 bits",
    "a reply nobody asked for", "a fresh reply", "nothing"};

static mode answer_mode;

static int hostile(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    (void)payload;
    if (!fake_cmd_is(cmd, "EVALSHA"))
        return 0; /* SLUICE.VERSION: unknown command, so the scripts */
    switch (answer_mode) {
    case ANSWER_STATUS:
        fake_replyf(c, "+OK\r\n");
        break;
    case ANSWER_RANGE:
        fake_replyf(c, "*4\r\n:7\r\n:9\r\n:0\r\n:1000\r\n");
        break;
    case ANSWER_NEGATIVE:
        fake_replyf(c, "*-5\r\n");
        break;
    case ANSWER_BARE_LF:
        fake_replyf(c, "*4\n:1\n:9\n:0\n:1000\n");
        break;
    case ANSWER_HUGE:
        fake_replyf(c, "$100000\r\n");
        fake_reply_fill(c, 'x', 100000);
        fake_replyf(c, "\r\n");
        break;
    case ANSWER_WIDE_INT:
        fake_replyf(c, "*4\r\n:1\r\n:99999999999999999999999\r\n:0\r\n"
                    ":1000\r\n");
        break;
    case ANSWER_EXTRA: /* a decision, and one more nobody asked for */
        fake_replyf(c, "*4\r\n:1\r\n:9\r\n:0\r\n:1000\r\n"
                    "*4\r\n:1\r\n:1\r\n:0\r\n:1000\r\n");
        break;
    case ANSWER_FRESH:
        fake_replyf(c, "*4\r\n:1\r\n:5\r\n:0\r\n:1000\r\n");
        break;
    default:
        break; /* a server that never answers */
    }
    return 1;
}

static void set_mode(mode m)
{
    fake_lock();
    answer_mode = m;
    fake_unlock();
}

/* One hit answered with mode 'm': its record. */
static void hostile_one(sluice_poll_loop *loop, sluice_async *a, mode m,
                        rec *r)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

    set_mode(m);
    CHECK_OK(hit(a, &lim, "hostile", r));
    drain(loop, a, 10000);
    check_once(r, 1, TIMEOUT_MS + SLACK_MS);
}

static void hostile_replies(void)
{
    fake_node *n = fake_node_start(0, hostile, NULL);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    char base[64];
    rec r, fresh;

    if (!CHECK(n != NULL))
        return;
    snprintf(base, sizeof(base), "redis://127.0.0.1:%d", fake_node_port(n));
    if (open_handle(&st, &a, &loop, base, "on_error=open&timeout=300&"
                    "connect_timeout=300&max_reply_bytes=4096") < 0) {
        fake_node_stop(n);
        return;
    }
    for (mode m = ANSWER_STATUS; m <= ANSWER_WIDE_INT; m++) {
        test_context("a decision answered with %s", mode_name[m]);
        hostile_one(&loop, a, m, &r);
        CHECK_RC(r.err, SLUICE_EPROTO);
    }
    /* A reply nobody asked for closes the connection: it answers no later
       call (that one has a reply of its own, on a new connection). */
    test_context("a decision answered with %s", mode_name[ANSWER_EXTRA]);
    hostile_one(&loop, a, ANSWER_EXTRA, &r);
    CHECK(r.err == SLUICE_OK || r.err == SLUICE_EPROTO);
    CHECK(r.fallback == SLUICE_ANSWERED);
    hostile_one(&loop, a, ANSWER_FRESH, &fresh);
    CHECK_RC(fresh.err, SLUICE_OK);
    CHECK(fresh.remaining == 5);
    /* The policy is in force here: a node that answers nothing is an
       outage, and on_error=open answers for it. */
    test_context("a decision answered with %s", mode_name[ANSWER_NOTHING]);
    hostile_one(&loop, a, ANSWER_NOTHING, &r);
    CHECK(r.err == SLUICE_OK && r.allowed && r.fallback == SLUICE_FELL_OPEN);
    test_context(NULL);
    sluice_async_free(a);
    sluice_store_free(st);
    fake_node_stop(n);
}

int main(void)
{
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_async_outage: no redis-server\n");
        return TEST_SKIP;
    }
    snprintf(server_name, sizeof(server_name), "127.0.0.1:%d", server.port);
    outage("error");
    outage("open");
    free_pending(server.url, 0);
    free_pending(server.url, 1);
    free_pending(server.url, 3);
    free_pending("mem://", 0);
    hostile_replies();
    CHECK(started == fired);
    rs_stop(&server);
    return test_summary("test_async_outage");
}
