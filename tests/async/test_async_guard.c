/*
 * test_async_guard.c - what the guard does around a decision, through the
 * async API: the refused-key cache and the failure policy, with the same
 * counters and telemetry as the blocking path.
 *
 *   cache      once the server refuses a key with a wait, the same hits
 *              are refused by the cache: no EVALSHA reaches the server
 *              (INFO commandstats), the store's local_refusals counts
 *              them, each is called back on a later turn (never inside the
 *              call), and each emits "sluice.hit.refused" as sluice_hit()
 *              does (a peek is answered by the cache too, as the blocking
 *              guard does, with no event); a reset forgets the key, so
 *              the next hit asks the server again
 *   policy     on_error=closed and =open over a port where nothing
 *              listens: hits, peeks and a hit_many are answered by the
 *              policy (fallback set, retry_after_ms the store's timeout
 *              for a fail-closed refusal), counted in errors, fell_open
 *              and fell_closed, and a fail-closed refusal emits no event
 *              (it is no limit being hit); on_error=error: SLUICE_ECONN
 *   embedded   on mem:// every callback runs on a later turn too, and
 *              hit_all and peek_all answer as the blocking calls do
 */
#include "events.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include "sluice/adapters/poll.h"
#include "sluice/telemetry.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;
static bool inside_call; /* set while a sluice_async_* call runs */

typedef struct rec {
    int fired;
    int err;
    bool inside; /* called back from inside the call that started it */
    sluice_decision d;
} rec;

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    rec *r = user;

    (void)a;
    r->fired++;
    r->err = err;
    r->inside |= inside_call;
    if (d != NULL)
        r->d = *d;
}

static void on_many(sluice_async *a, int err, sluice_request *reqs, size_t n,
                    void *user)
{
    rec *r = user;

    (void)a;
    (void)reqs;
    (void)n;
    r->fired++;
    r->err = err;
    r->inside |= inside_call;
}

static void on_done(sluice_async *a, int err, void *user)
{
    rec *r = user;

    (void)a;
    r->fired++;
    r->err = err;
    r->inside |= inside_call;
}

static void drain(sluice_poll_loop *loop, sluice_async *a)
{
    uint64_t until = rs_mono_ms() + 10000;

    while (sluice_async_pending(a) > 0 && rs_mono_ms() < until)
        if (sluice_poll_run(loop, a, 50) < 0)
            break;
    CHECK(sluice_async_pending(a) == 0);
}

/* One hit (or peek) started and called back: its record. */
static rec decide(sluice_poll_loop *loop, sluice_async *a,
                  const sluice_limit *lim, const char *key, bool consume)
{
    rec r;

    memset(&r, 0, sizeof(r));
    inside_call = true;
    if (consume)
        CHECK_OK(sluice_async_hit(a, lim, key, strlen(key), 1, on_decision,
                                  &r));
    else
        CHECK_OK(sluice_async_peek(a, lim, key, strlen(key), 1, on_decision,
                                   &r));
    inside_call = false;
    CHECK(r.fired == 0);
    drain(loop, a);
    CHECK(r.fired == 1 && !r.inside);
    return r;
}

static int open_handle(sluice_store **st, sluice_async **a,
                       sluice_poll_loop *loop, const char *url)
{
    if (!CHECK_OK(sluice_store_open(st, url, NULL)))
        return -1;
    if (!CHECK_OK(sluice_async_poll_new(a, *st, loop))) {
        sluice_store_free(*st);
        return -1;
    }
    return 0;
}

static sluice_store_stats stats_of(sluice_store *st)
{
    sluice_store_stats s;

    CHECK_OK(sluice_store_stats_get(&s, st));
    return s;
}

/* ---- The refused-key cache --------------------------------------------------------- */

static void cache(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 2, 60000);
    test_events_seen seen = {.want = SLUICE_EVENT_HIT_REFUSED};
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    char url[128];
    long long evalsha;
    rec r;

    test_context("the refused-key cache");
    snprintf(url, sizeof(url), "%s?refused_cache=all&prefix=cache",
             server.url);
    if (open_handle(&st, &a, &loop, url) < 0)
        return;
    CHECK(decide(&loop, a, &lim, "c", true).d.allowed);
    CHECK(decide(&loop, a, &lim, "c", true).d.allowed);
    r = decide(&loop, a, &lim, "c", true); /* the server's refusal */
    CHECK(r.err == 0 && !r.d.allowed && r.d.retry_after_ms > 0);
    CHECK_OK(sluice_telemetry_attach("async-guard", seen.want,
                                     test_events_record, &seen));
    evalsha = rs_calls(&server, "evalsha");
    for (int i = 0; i < 10; i++) {
        r = decide(&loop, a, &lim, "c", true);
        CHECK(r.err == 0 && !r.d.allowed && r.d.retry_after_ms > 0 &&
              r.d.fallback == SLUICE_ANSWERED && r.d.limit == 2);
    }
    CHECK(rs_calls(&server, "evalsha") == evalsha); /* no I/O */
    CHECK_EQ_U64(stats_of(st).local_refusals, 10);
    CHECK(seen.calls == 10 && strcmp(seen.key, "c") == 0 &&
          strcmp(seen.algorithm, "fixed") == 0);
    /* A peek is answered by the cache too, as the blocking guard does,
       but it is no hit: no event. */
    r = decide(&loop, a, &lim, "c", false);
    CHECK(r.err == 0 && !r.d.allowed);
    CHECK(rs_calls(&server, "evalsha") == evalsha);
    CHECK_EQ_U64(stats_of(st).local_refusals, 11);
    CHECK(seen.calls == 10);
    /* A reset forgets the key: the next hit asks the server. */
    r.fired = 0;
    inside_call = true;
    CHECK_OK(sluice_async_reset(a, &lim, "c", 1, on_done, &r));
    inside_call = false;
    drain(&loop, a);
    CHECK(r.fired == 1 && r.err == 1 && !r.inside); /* 1: a count was there */
    evalsha = rs_calls(&server, "evalsha"); /* the reset is a script too */
    r = decide(&loop, a, &lim, "c", true);
    CHECK(r.err == 0 && r.d.allowed && r.d.remaining == 1);
    CHECK(rs_calls(&server, "evalsha") == evalsha + 1);
    CHECK_EQ_U64(stats_of(st).local_refusals, 11);
    /* A key never hit: 0, nothing was there. */
    r.fired = 0;
    CHECK_OK(sluice_async_reset(a, &lim, "never", 5, on_done, &r));
    drain(&loop, a);
    CHECK(r.fired == 1 && r.err == 0);
    CHECK_OK(sluice_telemetry_detach("async-guard"));
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- The failure policy --------------------------------------------------------------- */

static void policy(const char *on_error)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 5, 1000);
    test_events_seen seen = {.want = SLUICE_EVENT_HIT_REFUSED};
    sluice_request reqs[3] = {{"p1", 2, 1, 0, {0}}, {"p2", 2, 1, 0, {0}},
                              {"p3", 2, 1, 0, {0}}};
    bool open = strcmp(on_error, "open") == 0;
    bool closed = strcmp(on_error, "closed") == 0;
    sluice_poll_loop loop;
    sluice_store_stats s;
    sluice_store *st;
    sluice_async *a;
    char url[160];
    rec r, many;

    test_context("on_error=%s over a port where nothing listens", on_error);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d?on_error=%s&"
             "timeout=250&connect_timeout=250", rs_free_port(), on_error);
    if (open_handle(&st, &a, &loop, url) < 0)
        return;
    CHECK_OK(sluice_telemetry_attach("async-guard", seen.want,
                                     test_events_record, &seen));
    for (int i = 0; i < 4; i++) {
        r = decide(&loop, a, &lim, "p", i % 2 == 0);
        if (open)
            CHECK(r.err == 0 && r.d.allowed &&
                  r.d.fallback == SLUICE_FELL_OPEN && r.d.limit == 5);
        else if (closed)
            CHECK(r.err == 0 && !r.d.allowed &&
                  r.d.fallback == SLUICE_FELL_CLOSED &&
                  r.d.retry_after_ms == 250);
        else
            CHECK_RC(r.err, SLUICE_ECONN);
    }
    memset(&many, 0, sizeof(many));
    CHECK_OK(sluice_async_hit_many(a, &lim, reqs, 3, on_many, &many));
    drain(&loop, a);
    CHECK(many.fired == 1);
    CHECK_RC(many.err, open || closed ? SLUICE_OK : SLUICE_ECONN);
    for (size_t i = 0; i < 3; i++)
        CHECK(open || closed ? reqs[i].err == 0 &&
                                   reqs[i].decision.fallback ==
                                       (open ? SLUICE_FELL_OPEN
                                             : SLUICE_FELL_CLOSED)
                             : reqs[i].err == SLUICE_ECONN);
    s = stats_of(st);
    CHECK_EQ_U64(s.errors, 7);
    CHECK_EQ_U64(s.fell_open, open ? 7 : 0);
    CHECK_EQ_U64(s.fell_closed, closed ? 7 : 0);
    CHECK(seen.calls == 0); /* a policy's refusal is no limit hit */
    CHECK_OK(sluice_telemetry_detach("async-guard"));
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

static sluice_decision all_out, all_each[3];

static void on_all(sluice_async *a, int err, const sluice_decision *out,
                   const sluice_decision *each, size_t n, void *user)
{
    rec *r = user;

    (void)a;
    r->fired++;
    r->err = err;
    r->inside |= inside_call;
    if (out != NULL) {
        all_out = *out;
        memcpy(all_each, each, n * sizeof(*each));
    }
}

/* hit_all and peek_all on 'st' through the handle, against the blocking
   calls on 'ref' (the same kind of store, on the same clock). */
static void all_against(sluice_poll_loop *loop, sluice_async *a,
                        sluice_store *ref)
{
    sluice_limit lims[3] = {SLUICE_LIMIT(SLUICE_FIXED, 4, 60000),
                            SLUICE_LIMIT(SLUICE_GCRA, 3, 1000),
                            SLUICE_LIMIT(SLUICE_SLIDING_LOG, 6, 10000)};
    sluice_decision out, each[3];

    for (int i = 0; i < 6; i++) {
        bool hit = i % 3 != 2;
        rec r = {0};
        int err;

        inside_call = true;
        CHECK_OK(hit ? sluice_async_hit_all(a, lims, 3, "all", 3, 1, on_all,
                                            &r)
                     : sluice_async_peek_all(a, lims, 3, "all", 3, 1, on_all,
                                             &r));
        inside_call = false;
        drain(loop, a);
        CHECK(r.fired == 1 && !r.inside);
        err = hit ? sluice_hit_all(&out, each, ref, lims, 3, "all", 3, 1)
                  : sluice_peek_all(&out, each, ref, lims, 3, "all", 3, 1);
        CHECK_RC(r.err, err);
        CHECK(out.allowed == all_out.allowed &&
              out.remaining == all_out.remaining);
        for (int k = 0; k < 3; k++)
            CHECK(each[k].allowed == all_each[k].allowed &&
                  each[k].remaining == all_each[k].remaining);
    }
}

/* ---- The embedded store -------------------------------------------------------------- */

static void embedded(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_GCRA, 3, 1000);
    sluice_poll_loop loop;
    sluice_store *st, *ref = NULL;
    sluice_async *a;
    rec r;

    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1000);

    test_context("mem://");
    st = test_store_open("mem://", "", &opts);
    ref = test_store_open("mem://", "", &opts); /* the same clock */
    if (!CHECK_OK(sluice_async_poll_new(&a, st, &loop)))
        return;
    for (int i = 0; i < 5; i++) {
        r = decide(&loop, a, &lim, "e", true);
        CHECK(r.err == 0 && r.d.allowed == (i < 3));
    }
    all_against(&loop, a, ref);
    sluice_async_free(a);
    sluice_store_free(st);
    sluice_store_free(ref);
    sluice_vclock_free(clock);
    test_context(NULL);
}

int main(void)
{
    if (rs_start(&server, NULL) < 0)
        return TEST_SKIP;
    cache();
    policy("error");
    policy("open");
    policy("closed");
    embedded();
    rs_stop(&server);
    return test_summary("test_async_guard");
}
