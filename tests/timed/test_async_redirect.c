/*
 * test_async_redirect.c - how the async API follows MOVED, ASK and
 * TRYAGAIN, against the scripted fake cluster nodes of
 * test_cluster_redirect.c (support/fake_cluster.h). No server runs.
 *
 *   - MOVED: the call is sent again at the new node and answered, one
 *     redirect in all; the next call goes straight there;
 *   - ASK: ASKING and the command at the new node (the node counts an
 *     EVALSHA right after ASKING), and the map is not changed;
 *   - MOVED to itself, and MOVED back and forth: exactly MAX_SENDS sends,
 *     then SLUICE_ECONFIG, quickly;
 *   - TRYAGAIN twice then a decision: answered after three sends, the
 *     pauses on the handle's timer; TRYAGAIN forever: SLUICE_ECONN within
 *     the command timeout and a slack.
 * Every callback runs exactly once.
 */
#include "../async/route_loop.h"
#include "fake_cluster.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* The message of the last call that failed. */
static char last_msg[200];

/* One async hit on 'key' (fixed, 10 a minute) through a handle of its own,
   answered: its code, the decision into 'd', the time it took. */
static int async_hit(sluice_store *st, const char *key, sluice_decision *d,
                     uint64_t *ms)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    sluice_async_hooks hooks;
    sluice_async *a = NULL;
    rl_answer ans;
    uint64_t t0 = rs_mono_ms();
    rl_loop l;

    memset(&ans, 0, sizeof(ans));
    rl_init(&l, &hooks);
    if (!CHECK_OK(sluice_async_new(&a, st, &hooks)))
        return -1;
    CHECK_OK(sluice_async_hit(a, &lim, key, strlen(key), 1, rl_on_decision,
                              &ans));
    CHECK(rl_drain(a, &l, 10000) == 0);
    *ms = rs_mono_ms() - t0;
    sluice_async_free(a);
    CHECK_EQ_U64(ans.calls, 1);
    *d = ans.d;
    snprintf(last_msg, sizeof(last_msg), "%s", ans.msg);
    return ans.err;
}

static void test_moved(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("async MOVED");
    fc_reset();
    fake_lock();
    fc_slots_all(fc_nodes[NODE_A].slots_after,
                 sizeof(fc_nodes[NODE_A].slots_after), NODE_B);
    fake_unlock();
    fc_mode(NODE_A, EV_MOVED, NODE_B);
    st = fc_open_on(NODE_A);
    CHECK_OK(async_hit(st, "user1", &d, &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_redirects(st), 1);
    /* The map was mended: straight to B. */
    CHECK_OK(async_hit(st, "user1", &d, &ms));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 2);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_ask(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("async ASK");
    fc_reset();
    fc_mode(NODE_A, EV_ASK, NODE_B);
    fc_mode(NODE_B, EV_IMPORTING, NODE_A);
    st = fc_open_on(NODE_A);
    CHECK_OK(async_hit(st, "user1", &d, &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_asked_evals(NODE_B), 1);
    /* ASK is one-shot: the next call asks A again. */
    CHECK_OK(async_hit(st, "user1", &d, &ms));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 2);
    CHECK_EQ_U64(fc_asked_evals(NODE_B), 2);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_loops(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("async MOVED to itself");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_A);
    st = fc_open_on(NODE_A);
    CHECK_RC(async_hit(st, "user1", &d, &ms), SLUICE_ECONFIG);
    CHECK(strstr(last_msg, "redirected") != NULL);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), MAX_SENDS);
    sluice_store_free(st);

    test_context("async MOVED back and forth");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_B);
    fc_mode(NODE_B, EV_MOVED, NODE_A);
    st = fc_open_on(NODE_A);
    CHECK_RC(async_hit(st, "user1", &d, &ms), SLUICE_ECONFIG);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA") + fc_count(NODE_B, "EVALSHA"),
                 MAX_SENDS);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_tryagain(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("async TRYAGAIN, then a decision");
    fc_reset();
    fc_mode(NODE_A, EV_TRYAGAIN, NODE_A);
    fake_lock();
    fc_nodes[NODE_A].tryagain = 2;
    fake_unlock();
    st = fc_open_on(NODE_A);
    CHECK_OK(async_hit(st, "user1", &d, &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_redirects(st), 0);

    test_context("async TRYAGAIN forever");
    fake_lock();
    fc_nodes[NODE_A].tryagain = 1000;
    fake_unlock();
    CHECK_RC(async_hit(st, "user1", &d, &ms), SLUICE_ECONN);
    CHECK(strstr(last_msg, "slot") != NULL);
    CHECK(ms < 1000 + CALL_BOUND_MS);
    CHECK(fc_count(NODE_A, "EVALSHA") >= 3 + MAX_SENDS);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    fc_start();
    test_moved();
    test_ask();
    test_loops();
    test_tryagain();
    fc_stop();
    return test_summary("test_async_redirect");
}
