/*
 * test_cluster_redirect.c - how the cluster store follows MOVED, ASK and
 * TRYAGAIN, against three scripted fake nodes (support/fake_cluster.h,
 * after libvalkey's fake-node tests of MOVED and ASK). No server runs.
 *
 *   - MOVED: the call is sent again at the new node and answered; later
 *     calls for that slot go straight there (one redirect in all, not one
 *     per call), also after the map is reread;
 *   - ASK: ASKING and the command at the new node, on one connection, and
 *     the next call goes to the old node again (ASK is one-shot, and does
 *     not touch the map);
 *   - a node that answers MOVED to itself, or two that send a call back
 *     and forth: exactly MAX_SENDS (5) sends, then SLUICE_ECONFIG with a
 *     message, quickly, also under on_error=open (a redirect loop is the
 *     cluster's misconfiguration, not an outage a policy may stand in for);
 *   - TRYAGAIN then a decision: retried, answered; TRYAGAIN forever: a
 *     bounded number of sends, within the command timeout, then an error;
 *   - NOSCRIPT: SCRIPT LOAD at that node, and the call again;
 *   - a node that never answers: the command timeout;
 *   - malformed redirections: SLUICE_EPROTO with a message, no crash, no
 *     hang;
 *   - a store of one server (valkey://) on a node that redirects: MOVED and
 *     ASK are SLUICE_ECONFIG naming valkey+cluster://, under on_error=open
 *     too, while LOADING, BUSY, MASTERDOWN, TRYAGAIN and CLUSTERDOWN stay
 *     outages, which the policy stands in for.
 */
#include "fake_cluster.h"
#include "server.h" /* rs_free_port(), rs_sleep_ms() */
#include "test.h"
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- MOVED --------------------------------------------------------------- */

static void test_moved(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int loads;

    test_context("MOVED");
    fc_reset();
    /* A serves everything until it has sent a MOVED; then B does. */
    fake_lock();
    fc_slots_all(fc_nodes[NODE_A].slots_after,
                 sizeof(fc_nodes[NODE_A].slots_after), NODE_B);
    fake_unlock();
    fc_mode(NODE_A, EV_MOVED, NODE_B);
    st = fc_open_on(NODE_A);

    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_redirects(st), 1);
    loads = fc_count(NODE_A, "SCRIPT");
    /* Later calls for that slot go straight to B: no redirect per call. */
    for (int i = 0; i < 5; i++) {
        CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
        CHECK(fc_is_decision(&d));
    }
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 6);
    CHECK_EQ_U64(fc_redirects(st), 1);
    /* The map is reread (once the refresh gap has passed): B still. */
    rs_sleep_ms(150);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK_OK(fc_timed_hit(&d, st, "user2", &ms));
    CHECK(fc_count(NODE_A, "CLUSTER SLOTS") >= 2);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 8);
    CHECK_EQ_U64(fc_redirects(st), 1);
    /* The scripts were loaded once per store, on its first connection
       (A's); B never needed them (a SHA1 is the same everywhere). */
    CHECK(loads > 0);
    CHECK_EQ_U64(fc_count(NODE_A, "SCRIPT"), loads);
    CHECK_EQ_U64(fc_count(NODE_B, "SCRIPT"), 0);
    sluice_store_free(st);
    test_context(NULL);
}

/* MOVED mends the one slot at once; other slots wait for the reread. */
static void test_moved_mends_one_slot(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int a0;

    test_context("MOVED mends its slot only");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_B); /* A's map never changes */
    st = fc_open_on(NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "one", &ms));
    a0 = fc_count(NODE_A, "EVALSHA");
    CHECK_EQ_U64(a0, 1);
    /* Another slot: still A's in the map, so A first, then B. */
    CHECK_OK(fc_timed_hit(&d, st, "two", &ms));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 2);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 2);
    CHECK_EQ_U64(fc_redirects(st), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- ASK ----------------------------------------------------------------- */

/* The next entry of log[0..n) after 'i' that is not a connect's question
   for the module (SLUICE.VERSION, which the fakes do not know); n if none. */
static size_t log_next(const fake_log_entry *log, size_t n, size_t i)
{
    while (++i < n && fake_log_is(&log[i], "SLUICE.VERSION"))
        ;
    return i;
}

/*
 * The fakes' log, in order: each EVALSHA at A followed by ASKING and then
 * EVALSHA at B on one connection (so that EVALSHA was asked), 'times'
 * times in all.
 */
static int ask_order_ok(int times)
{
    const fake_node *a = fc_nodes[NODE_A].fake, *b = fc_nodes[NODE_B].fake;
    const fake_log_entry *log;
    size_t n;
    int ok = 1, seen = 0;

    fake_lock();
    log = fake_log(&n);
    for (size_t i = 0; i < n; i++) {
        size_t j, k;

        if (!fake_log_is(&log[i], "EVALSHA") || log[i].node != a)
            continue;
        seen++;
        j = log_next(log, n, i);
        k = log_next(log, n, j);
        ok &= k < n && log[j].node == b && fake_log_is(&log[j], "ASKING") &&
              log[k].node == b && fake_log_is(&log[k], "EVALSHA") &&
              log[k].conn == log[j].conn;
    }
    fake_unlock();
    return ok && seen == times;
}

static void test_ask(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int ok_order;

    test_context("ASK");
    fc_reset();
    fc_mode(NODE_A, EV_ASK, NODE_B);
    fc_mode(NODE_B, EV_IMPORTING, NODE_A); /* without ASKING: MOVED to A */
    st = fc_open_on(NODE_A);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
        CHECK(fc_is_decision(&d));
    }
    /* Each call: A first (ASK is one-shot), then ASKING + EVALSHA at B. */
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_count(NODE_B, "ASKING"), 3);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_asked_evals(NODE_B), 3);
    CHECK_EQ_U64(fc_redirects(st), 3);
    /* ASK leaves the map alone: no reread. */
    CHECK_EQ_U64(fc_count(NODE_A, "CLUSTER SLOTS"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "CLUSTER SLOTS"), 0);
    /* The log, in order: A EVALSHA, B ASKING, B EVALSHA (asked, same
       connection), three times. */
    ok_order = ask_order_ok(3);
    CHECK(ok_order);
    /* When the slot has moved for good, A says MOVED and B serves it. */
    fc_mode(NODE_A, EV_MOVED, NODE_B);
    fc_mode(NODE_B, EV_DECIDE, NODE_B);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 4);
    CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 5);
    sluice_store_free(st);

    /* ASK to a node that lacks the script: SCRIPT LOAD there, then
       ASKING and the command once more. */
    test_context("ASK to a node without the script");
    fc_reset();
    fc_mode(NODE_A, EV_ASK, NODE_B);
    fc_mode(NODE_B, EV_NOSCRIPT, NODE_A);
    st = fc_open_on(NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_B, "SCRIPT"), 1);
    CHECK_EQ_U64(fc_count(NODE_B, "ASKING"), 2);
    CHECK_EQ_U64(fc_asked_evals(NODE_B), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ASK to a node that is down: an error, quickly; the next call goes to A. */
static void test_ask_to_dead_node(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("ASK to a node that is down");
    fc_reset();
    fake_lock();
    fc_nodes[NODE_A].mode = EV_RAW;
    snprintf(fc_nodes[NODE_A].raw, sizeof(fc_nodes[NODE_A].raw),
             "-ASK 1 127.0.0.1:%d\r\n", rs_free_port());
    fake_unlock();
    st = fc_open_on(NODE_A);
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(d.allowed == 0 || d.allowed == 0x5a5a5a5a);
    CHECK(ms < CALL_BOUND_MS);
    fc_mode(NODE_A, EV_DECIDE, NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 2);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Loops and TRYAGAIN -------------------------------------------------- */

static void test_moved_loops(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("MOVED to itself");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_A);
    st = fc_open_on(NODE_A);
    for (int round = 1; round <= 2; round++) {
        CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONFIG);
        CHECK(strstr(sluice_last_error(), "redirected") != NULL);
        CHECK(ms < CALL_BOUND_MS);
        CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), MAX_SENDS * round);
    }
    sluice_store_free(st);

    test_context("MOVED back and forth between two nodes");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_B);
    fc_mode(NODE_B, EV_MOVED, NODE_A);
    st = fc_open_on(NODE_A);
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONFIG);
    CHECK(strstr(sluice_last_error(), "redirected") != NULL);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA") + fc_count(NODE_B, "EVALSHA"),
                 MAX_SENDS);
    /* ASK back and forth, too. */
    fc_mode(NODE_A, EV_ASK, NODE_B);
    fc_mode(NODE_B, EV_ASK, NODE_A);
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONFIG);
    CHECK(ms < CALL_BOUND_MS);
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA") + fc_count(NODE_B, "EVALSHA"),
                 2 * MAX_SENDS);
    sluice_store_free(st);

    /* No failure policy stands in for a loop: on_error=open and =closed
       answer the error, never a decision, and count no fallback. */
    for (int policy = 0; policy < 2; policy++) {
        char seed[32];
        sluice_store_stats stats;

        test_context("MOVED loop under on_error=%s",
                     policy ? "closed" : "open");
        fc_reset();
        fc_mode(NODE_A, EV_MOVED, NODE_B);
        fc_mode(NODE_B, EV_MOVED, NODE_A);
        snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(NODE_A));
        st = fc_open(seed, policy ? "timeout=1000&on_error=closed"
                                  : "timeout=1000&on_error=open");
        for (int i = 0; i < 3; i++) {
            CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONFIG);
            CHECK(!d.allowed && d.fallback == SLUICE_ANSWERED);
        }
        CHECK_OK(sluice_store_stats_get(&stats, st));
        CHECK_EQ_U64(stats.fell_open + stats.fell_closed, 0);
        sluice_store_free(st);
    }
    test_context(NULL);
}

static void test_tryagain(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;

    test_context("TRYAGAIN, then a decision");
    fc_reset();
    fc_mode(NODE_A, EV_TRYAGAIN, NODE_A);
    fake_lock();
    fc_nodes[NODE_A].tryagain = 2;
    fake_unlock();
    st = fc_open_on(NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    CHECK_EQ_U64(fc_redirects(st), 0);

    test_context("TRYAGAIN forever");
    fake_lock();
    fc_nodes[NODE_A].tryagain = 1000;
    fake_unlock();
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ECONN);
    CHECK(strstr(sluice_last_error(), "slot") != NULL);
    /* Bounded: at least MAX_SENDS tries, and no longer than the command
       timeout (1000 ms) allows. */
    CHECK(ms < 1000 + CALL_BOUND_MS);
    CHECK(fc_count(NODE_A, "EVALSHA") >= 3 + MAX_SENDS);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_noscript(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    int loads;

    test_context("NOSCRIPT at a node that never saw the script");
    fc_reset();
    st = fc_open_on(NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms)); /* loads the scripts */
    loads = fc_count(NODE_A, "SCRIPT");
    CHECK(loads > 0);
    fc_mode(NODE_A, EV_NOSCRIPT, NODE_A);
    CHECK_OK(fc_timed_hit(&d, st, "user1", &ms));
    CHECK(fc_is_decision(&d));
    CHECK_EQ_U64(fc_count(NODE_A, "SCRIPT"), loads + 1); /* that one script */
    CHECK_EQ_U64(fc_count(NODE_A, "EVALSHA"), 3);
    sluice_store_free(st);
    test_context(NULL);
}

static void test_silent_node(void)
{
    sluice_store *st;
    sluice_decision d;
    uint64_t ms;
    char seed[32];

    test_context("MOVED to a node that never answers");
    fc_reset();
    fc_mode(NODE_A, EV_MOVED, NODE_C);
    fc_mode(NODE_C, EV_SILENT, NODE_C);
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(NODE_A));
    st = fc_open(seed, "timeout=300&connect_timeout=300");
    CHECK_RC(fc_timed_hit(&d, st, "user1", &ms), SLUICE_ETIMEDOUT);
    CHECK(ms >= 250 && ms < 300 + CALL_BOUND_MS);
    CHECK_EQ_U64(fc_count(NODE_C, "EVALSHA"), 1);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * A stalled node keeps no other node's callers waiting. Slots 0-8191 on C,
 * which never answers, the rest on A; one connection per node (pool=1).
 * Thread 1 decides a batch with keys on both, so it leads both
 * connections and waits on C until its timeout. 100 ms in, thread 2 hits a
 * key of A: its request queues on A's connection behind thread 1's, and is
 * sent when thread 1 has read A's replies. Those came at once, so thread 2
 * is answered at once, not after C's timeout, though C's call comes first
 * in the batch (its slot is lower).
 */
typedef struct stalled_run {
    sluice_store *st;
    const char *key;
    int rc;
    uint64_t ms;
} stalled_run;

static const sluice_limit stalled_lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);

/* Keys of A's half of the slots and of C's. */
static char key_a[2][16], key_c[16];

static void stalled_keys(void)
{
    bool have_c = false;
    int na = 0;

    for (int i = 0; na < 2 || !have_c; i++) {
        char k[16];
        int len = snprintf(k, sizeof(k), "k%d", i);
        bool on_a = sluice__key_slot(k, (size_t)len) >= 8192;

        if (on_a && na < 2) {
            memcpy(key_a[na++], k, (size_t)len + 1);
        } else if (!on_a && !have_c) {
            memcpy(key_c, k, (size_t)len + 1);
            have_c = true;
        }
    }
}

static void *stalled_batch(void *arg)
{
    stalled_run *r = arg;
    sluice_request reqs[2] = {
        {.key = key_c, .key_len = strlen(key_c), .cost = 1},
        {.key = key_a[0], .key_len = strlen(key_a[0]), .cost = 1}};
    uint64_t t0 = rs_mono_us();

    r->rc = sluice_hit_many(r->st, &stalled_lim, reqs, 2);
    r->ms = (rs_mono_us() - t0) / 1000;
    return NULL;
}

static void test_stalled_node_alone(void)
{
    char seed[32];
    stalled_run batch = {0};
    pthread_t tid;
    sluice_decision d;
    uint64_t ms;
    int rc;

    test_context("a stalled node keeps no other node's callers waiting");
    fc_reset();
    stalled_keys();
    fake_lock();
    for (int i = 0; i < NNODES; i++)
        snprintf(fc_nodes[i].slots, sizeof(fc_nodes[i].slots),
                 "*2\r\n*3\r\n:0\r\n:8191\r\n*2\r\n$9\r\n127.0.0.1\r\n"
                 ":%d\r\n*3\r\n:8192\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1"
                 "\r\n:%d\r\n", fc_port(NODE_C), fc_port(NODE_A));
    fake_unlock();
    fc_mode(NODE_C, EV_SILENT, NODE_C);
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(NODE_A));
    batch.st = fc_open(seed, "timeout=1000&connect_timeout=1000&pool=1");
    /* Connected, map read and scripts loaded, so only the calls wait. */
    CHECK_OK(fc_timed_hit(&d, batch.st, key_a[1], &ms));
    pthread_create(&tid, NULL, stalled_batch, &batch);
    rs_sleep_ms(100);
    rc = fc_timed_hit(&d, batch.st, key_a[0], &ms);
    pthread_join(tid, NULL);
    CHECK_OK(rc);
    CHECK(fc_is_decision(&d));
    CHECK(ms < 500); /* not the ~900 ms left of C's timeout */
    CHECK_RC(batch.rc, SLUICE_ETIMEDOUT);
    CHECK(batch.ms >= 950);
    printf("  stalled node: a caller of another node answered in %" PRIu64
           " ms while a batch waited %" PRIu64 " ms on it\n", ms, batch.ms);
    sluice_store_free(batch.st);
    test_context(NULL);
}

/*
 * A map reread that waits on a stalled node keeps no other caller waiting.
 * Slots 0-5460 on B, 5461-10922 on A (the seed, asked first for the map),
 * the rest on C. B stops answering calls, and A stops answering CLUSTER
 * SLOTS. A call to B times out, which marks the map stale; the next call
 * (thread 1) rereads it, and waits on A. 50 ms later, a call for C goes on
 * with the map it has and is answered at once, instead of waiting for the
 * reread to give up.
 */
static void *stalled_reread(void *arg)
{
    stalled_run *r = arg;
    sluice_decision d;

    r->rc = fc_timed_hit(&d, r->st, r->key, &r->ms);
    return NULL;
}

static void test_stalled_reread(void)
{
    char seed[32], key_b[16] = "", key_live[16] = "";
    stalled_run reread = {.key = key_live};
    pthread_t tid;
    sluice_decision d;
    uint64_t ms;
    int rc;

    test_context("a reread stalled on a node keeps no other caller waiting");
    fc_reset();
    fake_lock();
    for (int i = 0; i < NNODES; i++)
        snprintf(fc_nodes[i].slots, sizeof(fc_nodes[i].slots),
                 "*3\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$9\r\n127.0.0.1\r\n"
                 ":%d\r\n*3\r\n:5461\r\n:10922\r\n*2\r\n$9\r\n127.0.0.1"
                 "\r\n:%d\r\n*3\r\n:10923\r\n:16383\r\n*2\r\n$9\r\n"
                 "127.0.0.1\r\n:%d\r\n", fc_port(NODE_B), fc_port(NODE_A),
                 fc_port(NODE_C));
    fake_unlock();
    for (int i = 0; key_b[0] == '\0' || key_live[0] == '\0'; i++) {
        char k[16];
        int len = snprintf(k, sizeof(k), "r%d", i);
        unsigned slot = sluice__key_slot(k, (size_t)len);

        if (slot <= 5460 && key_b[0] == '\0')
            memcpy(key_b, k, (size_t)len + 1);
        else if (slot >= 10923 && key_live[0] == '\0')
            memcpy(key_live, k, (size_t)len + 1);
    }
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", fc_port(NODE_A));
    reread.st = fc_open(seed, "timeout=400&connect_timeout=400");
    CHECK_OK(fc_timed_hit(&d, reread.st, key_live, &ms)); /* the map read */
    fc_mode(NODE_B, EV_SILENT, NODE_B);
    fake_lock();
    fc_nodes[NODE_A].slots_silent = 1;
    fake_unlock();
    CHECK_RC(fc_timed_hit(&d, reread.st, key_b, &ms), SLUICE_ETIMEDOUT);
    rs_sleep_ms(150); /* past the gap between rereads */
    pthread_create(&tid, NULL, stalled_reread, &reread);
    rs_sleep_ms(50);
    rc = fc_timed_hit(&d, reread.st, key_live, &ms);
    pthread_join(tid, NULL);
    CHECK_OK(rc);
    CHECK(ms < 200); /* not the ~350 ms left of the reread's timeout */
    CHECK(fc_count(NODE_A, "CLUSTER SLOTS") >= 2); /* the reread asked A */
    printf("  stalled reread: another caller answered in %" PRIu64 " ms "
           "(the rereading caller: %s after %" PRIu64 " ms)\n", ms,
           sluice_err_name(reread.rc), reread.ms);
    sluice_store_free(reread.st);
    test_context(NULL);
}

/* ---- Malformed redirections ---------------------------------------------- */

static void test_malformed_redirects(void)
{
    static const char *const bad[] = {
        "-MOVED\r\n",
        "-MOVED 1\r\n",
        "-MOVED 1 \r\n",
        "-MOVED 1 127.0.0.1\r\n",
        "-MOVED 1 127.0.0.1:\r\n",
        "-MOVED 1 :6379\r\n",
        "-MOVED 1 127.0.0.1:0\r\n",
        "-MOVED 1 127.0.0.1:65536\r\n",
        "-MOVED 1 127.0.0.1:99999999999999999999\r\n",
        "-MOVED 1 127.0.0.1:12ab\r\n",
        "-ASK\r\n",
        "-ASK 1 nowhere\r\n",
        "-ASKING\r\n",
        "-MOVEDX 1 127.0.0.1:1\r\n",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sluice_store *st;
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("malformed redirection '%.*s'",
                     (int)strlen(bad[i]) - 2, bad[i]);
        fc_reset();
        fake_lock();
        fc_nodes[NODE_A].mode = EV_RAW;
        snprintf(fc_nodes[NODE_A].raw, sizeof(fc_nodes[NODE_A].raw), "%s",
                 bad[i]);
        fake_unlock();
        st = fc_open_on(NODE_A);
        rc = fc_timed_hit(&d, st, "user1", &ms);
        if (!CHECK_RC(rc, SLUICE_EPROTO) ||
            !CHECK(ms < CALL_BOUND_MS))
            fprintf(stderr, "    rc %s, %" PRIu64 " ms, \"%s\"\n",
                    sluice_err_name(rc), ms, sluice_last_error());
        CHECK(sluice_last_error()[0] != '\0');
        if (getenv("SLUICE_TEST_VERBOSE") != NULL)
            printf("  redirect #%-2zu %-7s %s\n", i, sluice_err_name(rc),
                   sluice_last_error());
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* ---- A cluster node behind valkey:// ------------------------------------ */

static void test_one_server_url(void)
{
    static const struct {
        const char *reply;
        int rc; /* under on_error=open: 0 when the policy stands in */
    } cases[] = {
        {"-MOVED 1 127.0.0.1:%d\r\n", SLUICE_ECONFIG},
        {"-ASK 1 127.0.0.1:%d\r\n", SLUICE_ECONFIG},
        {"-LOADING Redis is loading the dataset in memory\r\n", 0},
        {"-BUSY Redis is busy running a script\r\n", 0},
        {"-MASTERDOWN Link with MASTER is down\r\n", 0},
        {"-TRYAGAIN Multiple keys request during rehashing\r\n", 0},
        {"-CLUSTERDOWN The cluster is down\r\n", 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char url[96];
        sluice_store *st = NULL;
        sluice_decision d;
        uint64_t ms;
        int rc;

        test_context("valkey:// answered '%.12s'", cases[i].reply + 1);
        fc_reset();
        fake_lock();
        fc_nodes[NODE_A].mode = EV_RAW;
        snprintf(fc_nodes[NODE_A].raw, sizeof(fc_nodes[NODE_A].raw),
                 cases[i].reply, fc_port(NODE_B));
        fake_unlock();
        snprintf(url, sizeof(url), "valkey://127.0.0.1:%d?timeout=1000&"
                 "on_error=open", fc_port(NODE_A));
        CHECK_OK(sluice_store_open(&st, url, NULL));
        rc = fc_timed_hit(&d, st, "user1", &ms);
        CHECK_RC(rc, cases[i].rc);
        CHECK(ms < CALL_BOUND_MS);
        if (cases[i].rc == 0) {
            CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);
        } else {
            CHECK(!d.allowed && d.fallback == SLUICE_ANSWERED);
            if (!CHECK(strstr(sluice_last_error(), "this server is a cluster "
                                                   "node: use valkey+cluster"
                                                   "://") != NULL))
                fprintf(stderr, "    message: %s\n", sluice_last_error());
        }
        /* The redirection is followed nowhere: B was never asked. */
        CHECK_EQ_U64(fc_count(NODE_B, "EVALSHA"), 0);
        sluice_store_free(st);
    }
    test_context(NULL);
}

/* ---- One route: a single hit and a batch of one ------------------------- */

/* What the fakes saw of one decision, and what it answered. */
typedef struct route_seen {
    int rc;
    long evals[NNODES], scripts[NNODES], asking[NNODES];
    int asked[NNODES];
    uint64_t redirects;
} route_seen;

/* The scenarios: node A's and B's EVALSHA behaviour (and A's TRYAGAINs). */
static const struct {
    const char *name;
    int a_mode, a_target, b_mode, b_target, tryagain;
} route_cases[] = {
    {"a decision", EV_DECIDE, NODE_A, EV_DECIDE, NODE_B, 0},
    {"MOVED", EV_MOVED, NODE_B, EV_DECIDE, NODE_B, 0},
    {"ASK", EV_ASK, NODE_B, EV_IMPORTING, NODE_A, 0},
    {"ASK to a node without the script", EV_ASK, NODE_B, EV_NOSCRIPT, NODE_A,
     0},
    {"NOSCRIPT", EV_NOSCRIPT, NODE_A, EV_DECIDE, NODE_B, 0},
    {"TRYAGAIN", EV_TRYAGAIN, NODE_A, EV_DECIDE, NODE_B, 2},
    {"MOVED to itself", EV_MOVED, NODE_A, EV_DECIDE, NODE_B, 0},
};

/* Runs scenario 'k' on a new store, its one decision by sluice_hit(), or
   by sluice_hit_many() of one request when 'many'. */
static void route_run(size_t k, bool many, route_seen *out)
{
    static const sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    sluice_decision d;
    sluice_store *st;
    uint64_t ms;

    fc_reset();
    fc_mode(NODE_A, route_cases[k].a_mode, route_cases[k].a_target);
    fc_mode(NODE_B, route_cases[k].b_mode, route_cases[k].b_target);
    fake_lock();
    fc_nodes[NODE_A].tryagain = route_cases[k].tryagain;
    fake_unlock();
    st = fc_open_on(NODE_A);
    memset(out, 0, sizeof(*out));
    if (many) {
        sluice_request q = {"user1", 5, 1, 0, {0}};
        int rc = sluice_hit_many(st, &lim, &q, 1);

        out->rc = q.err;
        CHECK_RC(rc, q.err); /* the batch's answer is its one request's */
        d = q.decision;
    } else {
        out->rc = fc_timed_hit(&d, st, "user1", &ms);
    }
    CHECK(out->rc < 0 || fc_is_decision(&d));
    for (int i = 0; i < NNODES; i++) { /* since fc_reset(), the connect's too */
        out->evals[i] = fc_count(i, "EVALSHA");
        out->scripts[i] = fc_count(i, "SCRIPT");
        out->asking[i] = fc_count(i, "ASKING");
        out->asked[i] = fc_asked_evals(i);
    }
    out->redirects = fc_redirects(st);
    sluice_store_free(st);
}

/*
 * A single sluice_hit() on a cluster goes the way a batch does (one call
 * set, decide_calls.c): through every redirection, the same commands reach
 * the same nodes, and the same answer comes back. (The batch of one once
 * took another way after NOSCRIPT: sent again without the script given.)
 */
static void test_one_route(void)
{
    for (size_t k = 0; k < sizeof(route_cases) / sizeof(route_cases[0]); k++) {
        route_seen one, many;

        test_context("one route: %s", route_cases[k].name);
        route_run(k, false, &one);
        route_run(k, true, &many);
        CHECK_RC(one.rc, many.rc);
        CHECK_EQ_U64(one.redirects, many.redirects);
        for (int i = 0; i < NNODES; i++) {
            CHECK_EQ_U64(one.evals[i], many.evals[i]);
            CHECK_EQ_U64(one.scripts[i], many.scripts[i]);
            CHECK_EQ_U64(one.asking[i], many.asking[i]);
            CHECK_EQ_U64(one.asked[i], many.asked[i]);
        }
    }
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    fc_start();
    printf("test_cluster_redirect: fake nodes A:%d B:%d C:%d\n",
           fc_port(NODE_A), fc_port(NODE_B), fc_port(NODE_C));
    test_moved();
    test_moved_mends_one_slot();
    test_ask();
    test_ask_to_dead_node();
    test_moved_loops();
    test_tryagain();
    test_noscript();
    test_one_route();
    test_silent_node();
    test_stalled_node_alone();
    test_stalled_reread();
    test_malformed_redirects();
    test_one_server_url();
    fc_stop();
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_redirect");
}
