/*
 * test_async_faults.c - the async API (sluice/async.h) when things go
 * wrong, on real redis-servers started by the harness (server.h) and, for
 * the replies no server sends, a fake node on loopback (fake_node.h). The
 * loop is the poll adapter (sluice/adapters/poll.h).
 *
 *   1. A stalled server (SIGSTOP), then a killed one (SIGKILL), then the
 *      same one restarted on its port, with 200 calls in flight each time
 *      (store timeout=300): every callback fires exactly once, within its
 *      deadline plus SLACK_MS, timed per call; stalled is
 *      SLUICE_ETIMEDOUT, killed SLUICE_ECONN with no wait (the back-off
 *      answers at once); on_error=open and closed stand in with their
 *      fallback; after SIGCONT the stalled replies go to closed
 *      connections (no callback twice); after the restart calls succeed
 *      once the back-off (at most 2 s) is over.
 *   2. NOSCRIPT: SCRIPT FLUSH between rounds of a seeded trace; every
 *      decision is the blocking embedded store's on the same trace and
 *      clock, and INFO commandstats shows SCRIPT LOAD ran again.
 *   3. Hostile replies (a wrong type, a bare LF, a huge bulk length, an
 *      error reply): SLUICE_EPROTO, never ECONN, never stood in for by
 *      on_error=open, and the next call is answered. Where the stream is
 *      out of step (the bare LF, the huge length, a reply nobody asked
 *      for) the connection is closed and a new one serves the next call;
 *      a well-formed reply of the wrong shape leaves it in step, and it
 *      is kept (as the blocking path keeps it). A reply nobody asked for
 *      read together with the call's fails the call (either may be its
 *      own, as the blocking path says); read after the call was answered,
 *      it fails only the connection.
 *   4. Automatic pipelining: 100 hits of one limit started together leave
 *      in one write as one EVALSHA (INFO commandstats), or with the module
 *      (engine=module) one SLUICE.HITMANY.
 *   5. engine=auto with the module loaded sends SLUICE.HITMANY; over a
 *      Unix socket and TLS the async API decides as the blocking one on
 *      the same trace.
 *   6. A wrong password: SLUICE_EAUTH, never admitted by on_error=open.
 */
#include "algo/model.h" /* which algorithms run on the server's clock */
#include "async/async.h" /* the handle's write counter (a->writes) */
#include "compare.h"
#include "fake_node.h"
#include "server.h"
#include "stores.h"
#include "test.h"
#include "tls_certs.h"
#include "rng.h"

#include "sluice/adapters/poll.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FLIGHT 200
#define TIMEOUT_MS 300
/* How far past its deadline a callback may come on a loaded machine. */
#define SLACK_MS 250
/* A call that needs no wait (a refused connect, the back-off) takes less. */
#define QUICK_MS 200
#define BACKOFF_MAX_MS 2000

static rs_server server;

/* ---- A handle on a poll loop ------------------------------------------------ */

typedef struct loop {
    sluice_poll_loop poll;
    sluice_async *a;
    sluice_store *st;
} loop;

static void loop_open(loop *l, const char *base, const char *query)
{
    l->st = test_store_open(base, query, NULL);
    if (!CHECK_OK(sluice_async_poll_new(&l->a, l->st, &l->poll)))
        exit(2);
}

static void loop_over(loop *l, sluice_store *st)
{
    l->st = st;
    if (!CHECK_OK(sluice_async_poll_new(&l->a, l->st, &l->poll)))
        exit(2);
}

static void loop_close(loop *l)
{
    sluice_async_free(l->a);
    sluice_store_free(l->st);
    memset(l, 0, sizeof(*l));
}

/* Turns the loop until no call is pending; false (a failed check) if
   some still are after 'bound_ms'. */
static int drain(loop *l, uint64_t bound_ms)
{
    uint64_t t0 = rs_mono_ms();

    while (sluice_async_pending(l->a) > 0) {
        if (rs_mono_ms() - t0 > bound_ms) {
            CHECK(!"calls still pending past their bound");
            return 0;
        }
        CHECK(sluice_poll_run(&l->poll, l->a, 50) >= 0);
    }
    return 1;
}

/* Turns the loop for 'ms' with nothing pending: what arrives now (a late
   reply, a reply nobody asked for) is read and dealt with. */
static void idle(loop *l, uint64_t ms)
{
    uint64_t t0 = rs_mono_ms();

    while (rs_mono_ms() - t0 < ms)
        sluice_poll_run(&l->poll, l->a, 20);
}

/* ---- Calls that count their callbacks ---------------------------------------- */

typedef struct answer {
    int calls; /* callbacks: must be 1 */
    int err;
    sluice_decision d;
    uint64_t start_us, end_us;
} answer;

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    answer *ans = user;

    (void)a;
    ans->calls++;
    ans->err = err;
    ans->end_us = rs_mono_us();
    if (d != NULL)
        ans->d = *d;
    else
        memset(&ans->d, 0, sizeof(ans->d));
}

/* Starts 'n' hits of 'lim' on keys "PREFIX:i % nkeys", timed each. */
static void start_hits(loop *l, const sluice_limit *lim, answer *ans, int n,
                       const char *prefix, int nkeys)
{
    char key[64];

    for (int i = 0; i < n; i++) {
        memset(&ans[i], 0, sizeof(ans[i]));
        snprintf(key, sizeof(key), "%s:%d", prefix, i % nkeys);
        ans[i].start_us = rs_mono_us();
        CHECK_OK(sluice_async_hit(l->a, lim, key, strlen(key), 1,
                                  on_decision, &ans[i]));
    }
}

/* One hit, drained: its answer. */
static answer one_hit(loop *l, const sluice_limit *lim, const char *key)
{
    answer ans;

    start_hits(l, lim, &ans, 1, key, 1);
    drain(l, 5000);
    return ans;
}

/* ---- 1. Stalled, killed, restarted -------------------------------------------- */

typedef enum policy { POLICY_NONE, POLICY_OPEN, POLICY_CLOSED } policy;

static const char *const policy_name[] = {"none", "open", "closed"};
static const char *const policy_query[] = {
    "timeout=300&connect_timeout=300",
    "timeout=300&connect_timeout=300&on_error=open",
    "timeout=300&connect_timeout=300&on_error=closed"};

/* Whether 'ans' is what an outage ending in 'err' answers under 'pol':
   the error itself, or the policy's stand-in, saying so. */
static int outage_answer(const answer *ans, policy pol, int err)
{
    switch (pol) {
    case POLICY_OPEN:
        return ans->err == 0 && ans->d.allowed &&
               ans->d.fallback == SLUICE_FELL_OPEN;
    case POLICY_CLOSED:
        return ans->err == 0 && !ans->d.allowed &&
               ans->d.fallback == SLUICE_FELL_CLOSED;
    default:
        return ans->err == err && !ans->d.allowed;
    }
}

/* Every one of 'n' called back once, within 'bound_ms' of its start, as
   an outage ending in 'err' answers under 'pol'. */
static void check_round(const answer *ans, int n, policy pol, int err,
                        uint64_t bound_ms, const char *what)
{
    long twice = 0, wrong = 0, late = 0;
    uint64_t worst = 0;

    for (int i = 0; i < n; i++) {
        uint64_t took = (ans[i].end_us - ans[i].start_us) / 1000;

        if (ans[i].calls != 1) {
            twice++;
            continue;
        }
        worst = took > worst ? took : worst;
        late += took > bound_ms;
        if (!outage_answer(&ans[i], pol, err) && wrong++ == 0)
            fprintf(stderr, "    %s: call %d: %s, allowed %d, fallback %d\n",
                    what, i, sluice_err_name(ans[i].err), ans[i].d.allowed,
                    (int)ans[i].d.fallback);
    }
    CHECK_EQ_U64(twice, 0);
    CHECK_EQ_U64(wrong, 0);
    if (!CHECK_EQ_U64(late, 0))
        fprintf(stderr, "    %s: %ld calls past %" PRIu64 " ms\n", what,
                late, bound_ms);
    printf("  %s (on_error=%s): worst call %" PRIu64 " ms\n", what,
           policy_name[pol], worst);
}

/* Every one of 'n' called back exactly once still. */
static void check_once(const answer *ans, int n)
{
    long twice = 0;

    for (int i = 0; i < n; i++)
        twice += ans[i].calls != 1;
    CHECK_EQ_U64(twice, 0);
}

/* Stalled: the live connection times out, then a new one's handshake. */
static void flight_stalled(loop *l, policy pol, const sluice_limit *lim,
                           answer *first, answer *second)
{
    rs_pause(&server);
    start_hits(l, lim, first, FLIGHT, "st", 7);
    drain(l, 5000);
    check_round(first, FLIGHT, pol, SLUICE_ETIMEDOUT, TIMEOUT_MS + SLACK_MS,
                "stalled");
    start_hits(l, lim, second, FLIGHT, "st2", 7);
    drain(l, 5000);
    check_round(second, FLIGHT, pol, SLUICE_ETIMEDOUT,
                TIMEOUT_MS + SLACK_MS, "stalled, a new connection");
    rs_resume(&server);
    /* The server now answers what it read while stopped, onto sockets the
       handle has closed: nothing may be called back again. */
    idle(l, 300);
    check_once(first, FLIGHT);
    check_once(second, FLIGHT);
}

/* Calls until one is answered by the server; the time it took from
   'since_ms', or UINT64_MAX after 'bound_ms'. */
static uint64_t until_answered(loop *l, const sluice_limit *lim,
                               uint64_t since_ms, uint64_t bound_ms)
{
    while (rs_mono_ms() - since_ms < bound_ms) {
        answer ans = one_hit(l, lim, "back");

        if (ans.calls == 1 && ans.err == 0 &&
            ans.d.fallback == SLUICE_ANSWERED)
            return rs_mono_ms() - since_ms;
        rs_sleep_ms(20);
    }
    return UINT64_MAX;
}

/* A listener on loopback 'port' that accepts (the kernel does) and never
   answers: a connect to it succeeds, and its handshake waits for ever. */
static int hold_port(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 256) < 0) {
        perror("hold_port");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/*
 * Killed: what was on the connection ends at once, and so does a connect
 * refused. Then the back-off answers the next round with no I/O: the port
 * is held meanwhile by a listener that never answers, so a connect tried
 * in the back-off would cost the calls their timeout (late, and
 * SLUICE_ETIMEDOUT).
 */
static void flight_killed(loop *l, policy pol, const sluice_limit *lim,
                          answer *ans)
{
    static const char *const rounds[] = {
        "killed, on the old connection", "killed, a connect refused",
        "killed, backing off"};
    int held = -1;

    rs_kill(&server);
    for (int r = 0; r < 3; r++) {
        if (r == 2)
            CHECK((held = hold_port(server.port)) >= 0);
        start_hits(l, lim, ans, FLIGHT, "kl", 7);
        drain(l, 5000);
        check_round(ans, FLIGHT, pol, SLUICE_ECONN, QUICK_MS, rounds[r]);
    }
    if (held >= 0)
        close(held);
}

static void test_flight(policy pol)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000000, 60000);
    answer *a1 = calloc(FLIGHT, sizeof(*a1));
    answer *a2 = calloc(FLIGHT, sizeof(*a2));
    uint64_t restarted, took;
    loop l;

    test_context("stalled, killed, restarted: on_error=%s", policy_name[pol]);
    if (a1 == NULL || a2 == NULL)
        exit(2);
    loop_open(&l, server.url, policy_query[pol]);
    start_hits(&l, &lim, a1, FLIGHT, "warm", 7);
    drain(&l, 5000);
    for (int i = 0; i < FLIGHT; i++)
        CHECK(a1[i].calls == 1 && a1[i].err == 0 && a1[i].d.allowed &&
              a1[i].d.fallback == SLUICE_ANSWERED);
    flight_stalled(&l, pol, &lim, a1, a2);
    took = until_answered(&l, &lim, rs_mono_ms(), BACKOFF_MAX_MS + 1000);
    CHECK(took != UINT64_MAX);
    flight_killed(&l, pol, &lim, a1);
    if (!CHECK(rs_restart(&server) == 0))
        exit(1);
    restarted = rs_mono_ms();
    took = until_answered(&l, &lim, restarted, BACKOFF_MAX_MS + 1000);
    CHECK(took <= BACKOFF_MAX_MS + SLACK_MS);
    printf("  restarted (on_error=%s): answered again after %" PRIu64
           " ms\n", policy_name[pol], took);
    start_hits(&l, &lim, a1, FLIGHT, "after", 7);
    drain(&l, 5000);
    for (int i = 0; i < FLIGHT; i++)
        CHECK(a1[i].calls == 1 && a1[i].err == 0 && a1[i].d.allowed &&
              a1[i].d.fallback == SLUICE_ANSWERED);
    loop_close(&l);
    free(a1);
    free(a2);
    test_context(NULL);
}

/* ---- 2 and 5. A trace against the blocking API ------------------------------- */

#define TRACE_ROUNDS 4
#define TRACE_STEPS 48
#define TRACE_KEYS 5
/* The clocks move this much between rounds: the fixed window's waits,
   counted on the server's clock, may differ by it, round by round. */
#define TRACE_STEP_MS 300
#define FIXED_TOLERANCE_MS (TRACE_ROUNDS * TRACE_STEP_MS + 2000)

typedef struct step {
    sluice_algo algo;
    int peek, key;
    uint64_t cost;
} step;

static void step_key(char *out, size_t cap, const char *who, const step *s)
{
    snprintf(out, cap, "tr:%s:%s:%d", who, sluice_algo_name(s->algo), s->key);
}

/* One round through the handle on 'l', all in flight together. */
static void round_async(loop *l, const step *t, const sluice_limit *lims,
                        answer *ans)
{
    char key[96];

    for (int i = 0; i < TRACE_STEPS; i++) {
        memset(&ans[i], 0, sizeof(ans[i]));
        step_key(key, sizeof(key), "a", &t[i]);
        CHECK_OK((t[i].peek ? sluice_async_peek : sluice_async_hit)(
            l->a, &lims[t[i].algo], key, strlen(key), t[i].cost,
            on_decision, &ans[i]));
    }
    drain(l, 10000);
}

/* The round's blocking answers on 'ref', compared with the async ones. */
static void round_compare(sluice_store *ref, const step *t,
                          const sluice_limit *lims, const answer *ans)
{
    char key[96];
    sluice_decision d;

    for (int i = 0; i < TRACE_STEPS; i++) {
        int (*call)(sluice_decision *, sluice_store *, const sluice_limit *,
                    const char *, size_t, uint64_t) =
            t[i].peek ? sluice_peek : sluice_hit;

        step_key(key, sizeof(key), "r", &t[i]);
        CHECK_OK(call(&d, ref, &lims[t[i].algo], key, strlen(key),
                      t[i].cost));
        CHECK(ans[i].calls == 1);
        if (!CHECK_OK(ans[i].err))
            continue;
        if (!sluice__models[t[i].algo]->server_clock) {
            CHECK_SAME(ans[i].d, d);
            continue;
        }
        /* The fixed window's waits (and any algorithm's on the server's
           clock) are its key's expiry (PEXPIRE), not the caller's: the
           rest is exact. */
        if (!CHECK(decision_close(&ans[i].d, &d, FIXED_TOLERANCE_MS))) {
            decision_print("async", ans[i].err, &ans[i].d);
            decision_print("blocking", 0, &d);
        }
    }
}

/*
 * A seeded trace of hits and peeks of every algorithm, round by round,
 * through the handle on 'l' (its store on clock 'ac') and through the
 * blocking calls on 'ref' (clock 'rc'); both clocks move together between
 * rounds. With 'flush', the server's scripts are flushed between rounds.
 */
static void trace_compare(loop *l, sluice_vclock *ac, sluice_store *ref,
                          sluice_vclock *rc, rs_server *flush)
{
    sluice_limit lims[TEST_ALGO_N];
    step t[TRACE_STEPS];
    answer ans[TRACE_STEPS];
    long long loads;

    rng_state = 0x5eed22;
    for (int a = 0; a < TEST_ALGO_N; a++)
        lims[a] = SLUICE_LIMIT((sluice_algo)a, 12, 10000);
    for (int r = 0; r < TRACE_ROUNDS; r++) {
        for (int i = 0; i < TRACE_STEPS; i++) {
            t[i].algo = (sluice_algo)rng_below(TEST_ALGO_N);
            t[i].peek = rng_below(5) == 0;
            t[i].key = (int)rng_below(TRACE_KEYS);
            t[i].cost = 1 + rng_below(3);
        }
        loads = flush != NULL ? rs_calls(flush, "script|load") : 0;
        round_async(l, t, lims, ans);
        round_compare(ref, t, lims, ans);
        /* After a flush, the round met NOSCRIPT and loaded its scripts. */
        if (flush != NULL && r > 0)
            CHECK(rs_calls(flush, "script|load") > loads);
        if (flush != NULL)
            CHECK(rs_ok(flush, "SCRIPT FLUSH") == 0);
        sluice_vclock_advance(ac, TRACE_STEP_MS);
        sluice_vclock_advance(rc, TRACE_STEP_MS);
    }
}

static void test_noscript(void)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *ac, *rc = test_vclock_opts(&o, 1000000);
    sluice_store *mem = NULL;
    long long loads;
    loop l;

    test_context("NOSCRIPT: SCRIPT FLUSH between rounds");
    CHECK_OK(sluice_store_open(&mem, "mem://", &o));
    loop_over(&l, test_caller_store(&ac, server.url, 1000000));
    CHECK(rs_ok(&server, "CONFIG RESETSTAT") == 0);
    trace_compare(&l, ac, mem, rc, &server);
    loads = rs_calls(&server, "script|load");
    printf("  NOSCRIPT: %lld SCRIPT LOADs over %d rounds\n", loads,
           TRACE_ROUNDS);
    CHECK(loads >= TRACE_ROUNDS);
    loop_close(&l);
    sluice_store_free(mem);
    sluice_vclock_free(ac);
    sluice_vclock_free(rc);
    test_context(NULL);
}

/* ---- 3. Hostile replies ------------------------------------------------------- */

#define HOSTILE_CAP 65536
#define HOSTILE_CAP_TEXT "65536"
/* GOOD dripped at this pace takes 560 ms, within the store's timeout of
   1000 ms. */
#define HOSTILE_DRIP_MS 20

/* The fixed window's answer to a first hit of max 10 per minute. */
#define GOOD "*4\r\n:1\r\n:9\r\n:0\r\n:60000\r\n"

/* What the fake answers to EVALSHA, and on which connection it was last
   asked (under the fakes' lock). */
static struct {
    const char *reply;
    size_t filler; /* bytes of 'x' sent after it */
    int conn;
} hostile;

static fake_node *hostile_node;

static int hostile_handler(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    (void)payload;
    if (!fake_cmd_is(cmd, "EVALSHA"))
        return 0;
    hostile.conn = fake_conn_id(c);
    fake_reply(c, hostile.reply, strlen(hostile.reply));
    if (hostile.filler > 0)
        fake_reply_fill(c, 'x', hostile.filler);
    return 1;
}

static void hostile_set(const char *reply, size_t filler)
{
    fake_lock();
    hostile.reply = reply;
    hostile.filler = filler;
    fake_unlock();
}

static int hostile_conn(void)
{
    int id;

    fake_lock();
    id = hostile.conn;
    fake_unlock();
    return id;
}

typedef struct hostile_case {
    const char *name;
    const char *reply;
    size_t filler;
    /* A byte every HOSTILE_DRIP_MS: a reply nobody asked for comes after
       the call was answered, its own reply whole, nothing behind it. */
    int drip;
    /* The call kept the reply it was given (then only the connection
       fails). */
    int answered;
    /* The stream is out of step: the connection must be closed. A
       well-formed reply of the wrong shape leaves it in step, and both
       paths keep it. */
    int closes;
} hostile_case;

static void hostile_one(loop *l, const hostile_case *k)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    answer ans;
    int conn;

    test_context("a hostile reply: %s", k->name);
    hostile_set(k->reply, k->filler);
    fake_node_pace(hostile_node, 0, k->drip ? HOSTILE_DRIP_MS : 0);
    ans = one_hit(l, &lim, "h");
    CHECK(ans.calls == 1);
    if (k->answered && ans.err == SLUICE_EPROTO) {
        /* A loop held up past a drip read the extra's first byte with
           the call's reply: the case of the one before, not a failure. */
        printf("  NOTE: %s: read together with the call's (a slow loop)\n",
               k->name);
        fake_node_pace(hostile_node, 0, 0);
    } else if (k->answered) {
        CHECK_OK(ans.err);
        idle(l, k->drip ? 40 * HOSTILE_DRIP_MS : 100); /* the extra is read */
        fake_node_pace(hostile_node, 0, 0);
    } else {
        if (!CHECK_RC(ans.err, SLUICE_EPROTO))
            fprintf(stderr, "    %s\n", sluice_last_error());
        CHECK(!ans.d.allowed);
        CHECK((ans.end_us - ans.start_us) / 1000 < TIMEOUT_MS);
    }
    CHECK(ans.calls == 1);
    conn = hostile_conn();
    hostile_set(GOOD, 0);
    ans = one_hit(l, &lim, "h");
    CHECK(ans.calls == 1 && ans.err == 0 && ans.d.allowed &&
          ans.d.fallback == SLUICE_ANSWERED);
    /* Out of step, the connection that read it was closed: a new one
       asked. */
    if (k->closes && !CHECK(hostile_conn() > conn))
        fprintf(stderr, "    %s: the next call came on connection %d\n",
                k->name, conn);
    if (!k->closes)
        CHECK(hostile_conn() == conn);
}

static void test_hostile(void)
{
    static const hostile_case cases[] = {
        {"a wrong type", "$3\r\nabc\r\n", 0, 0, 0, 0},
        {"a bare LF", "*4\n:1\r\n:9\r\n:0\r\n:60000\r\n", 0, 0, 0, 1},
        /* More than max_reply_bytes of it sent: refused before the rest
           comes (hiredis takes a length of 2^40 as it is). */
        {"a bulk of 2^40 bytes", "$1099511627776\r\n", 3 * HOSTILE_CAP, 0,
         0, 1},
        {"an error reply", "-ERR x\r\n", 0, 0, 0, 0},
        /* Read with the call's own: either may be the call's. */
        {"a reply nobody asked for", GOOD GOOD, 0, 0, 0, 1},
        /* Read after the call was answered, alone. */
        {"a reply nobody asked for, later", GOOD GOOD, 0, 1, 1, 1},
    };
    fake_node *n = fake_node_start(0, hostile_handler, NULL);
    char url[96];
    loop l;

    if (!CHECK(n != NULL))
        return;
    hostile_node = n;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", fake_node_port(n));
    hostile_set(GOOD, 0);
    loop_open(&l, url, "engine=lua&timeout=1000&on_error=open&"
                       "max_reply_bytes=" HOSTILE_CAP_TEXT);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        hostile_one(&l, &cases[i]);
    loop_close(&l);
    fake_node_stop(n);
    test_context(NULL);
}

/* ---- 4 and 5. Pipelining and the engine ---------------------------------------- */

#define PIPELINED 100

/* 'PIPELINED' hits of one limit started together, after a first one (the
   script loaded, the connection made); the handle's writes for them. */
static uint64_t pipelined(loop *l, rs_server *s)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    answer ans[PIPELINED];
    uint64_t writes;
    long admitted = 0;

    CHECK_OK(one_hit(l, &lim, "pipe").err);
    CHECK(rs_ok(s, "CONFIG RESETSTAT") == 0);
    writes = l->a->writes;
    start_hits(l, &lim, ans, PIPELINED, "pipe", 1);
    drain(l, 5000);
    writes = l->a->writes - writes;
    for (int i = 0; i < PIPELINED; i++)
        admitted += ans[i].calls == 1 && ans[i].err == 0 && ans[i].d.allowed;
    CHECK_EQ_U64(admitted, PIPELINED);
    return writes;
}

static void test_pipelining(rs_server *moded)
{
    loop l;

    test_context("automatic pipelining, engine=lua");
    loop_open(&l, server.url, "engine=lua&timeout=2000");
    CHECK_EQ_U64(pipelined(&l, &server), 1);
    CHECK_EQ_U64(rs_calls(&server, "evalsha"), 1);
    loop_close(&l);
    if (moded == NULL)
        return;
    test_context("automatic pipelining, engine=module");
    loop_open(&l, moded->url, "engine=module&timeout=2000");
    CHECK_EQ_U64(pipelined(&l, moded), 1);
    CHECK_EQ_U64(rs_calls(moded, "sluice.hitmany"), 1);
    CHECK_EQ_U64(rs_calls(moded, "evalsha"), 0);
    loop_close(&l);
    test_context(NULL);
}

static void test_engine_auto(rs_server *moded)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1000, 60000);
    sluice_store_stats stats;
    answer ans[10];
    loop l;

    test_context("engine=auto, the module loaded");
    loop_open(&l, moded->url, "engine=auto&timeout=2000");
    CHECK(rs_ok(moded, "CONFIG RESETSTAT") == 0);
    start_hits(&l, &lim, ans, 10, "auto", 3);
    drain(&l, 5000);
    for (int i = 0; i < 10; i++)
        CHECK(ans[i].calls == 1 && ans[i].err == 0 && ans[i].d.allowed);
    CHECK_OK(sluice_store_stats_get(&stats, l.st));
    CHECK(stats.module_calls >= 1);
    CHECK(rs_calls(moded, "sluice.hitmany") >= 1);
    CHECK_EQ_U64(rs_calls(moded, "evalsha"), 0);
    loop_close(&l);
    test_context(NULL);
}

/* The trace through the async API and the blocking one on server 'url'. */
static void transport_compare(const char *what, const char *url)
{
    sluice_vclock *ac, *rc;
    sluice_store *ref;
    loop l;

    test_context("the async API over %s", what);
    ref = test_caller_store(&rc, url, 5000000);
    loop_over(&l, test_caller_store(&ac, url, 5000000));
    trace_compare(&l, ac, ref, rc, NULL);
    loop_close(&l);
    sluice_store_free(ref);
    sluice_vclock_free(ac);
    sluice_vclock_free(rc);
    test_context(NULL);
}

static void test_transports(void)
{
    const rs_certs *c = rs_certs_get();
    rs_server u, t;
    char url[1400];

    if (CHECK(rs_start_unix(&u, NULL) == 0)) {
        transport_compare("a Unix socket", u.url);
        rs_stop(&u);
    }
    if (!CHECK(c != NULL))
        return;
    if (CHECK(rs_start_tls(&t, "no", NULL) == 0)) {
        snprintf(url, sizeof(url), "%s?tls_ca=%s", t.url, c->ca_cert);
        transport_compare("TLS", url);
        rs_stop(&t);
    }
}

/* ---- 6. A wrong password ------------------------------------------------------- */

static void test_wrong_password(void)
{
    static const char *const args[] = {"--requirepass", "secret", NULL};
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 60000);
    answer ans[3];
    rs_server s;
    char url[128];
    loop l;

    test_context("a wrong password, on_error=open");
    if (!CHECK(rs_start(&s, args) == 0))
        return;
    snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d", s.port);
    loop_open(&l, url, "timeout=300&on_error=open");
    /* The first round meets the handshake, the next the back-off. */
    for (int r = 0; r < 2; r++) {
        start_hits(&l, &lim, ans, 3, "pw", 2);
        drain(&l, 5000);
        for (int i = 0; i < 3; i++) {
            CHECK(ans[i].calls == 1);
            CHECK_RC(ans[i].err, SLUICE_EAUTH);
            CHECK(!ans[i].d.allowed);
        }
    }
    loop_close(&l);
    rs_stop(&s);
    test_context(NULL);
}

int main(void)
{
    const char *const *module = rs_module_args();
    rs_server moded;
    int have_module = 0;

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_async_faults: cannot start redis-server\n");
        return 1;
    }
    if (module[0] != NULL && CHECK(rs_start(&moded, module) == 0))
        have_module = test_module_glue(&moded, SLUICE_FIXED);
    else
        printf("  NOTE: no module in this build: its parts are skipped\n");
    test_flight(POLICY_NONE);
    test_flight(POLICY_OPEN);
    test_flight(POLICY_CLOSED);
    test_noscript();
    test_hostile();
    test_pipelining(have_module ? &moded : NULL);
    if (have_module)
        test_engine_auto(&moded);
    test_transports();
    test_wrong_password();
    if (module[0] != NULL)
        rs_stop(&moded);
    rs_stop(&server);
    return test_summary("test_async_faults");
}
