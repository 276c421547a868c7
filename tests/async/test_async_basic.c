/*
 * test_async_basic.c - the async API on a real redis-server decides as the
 * blocking API does, for every algorithm and engine.
 *
 * For each algorithm, and each engine of the server store (engine=lua; and
 * engine=module where the loaded sluice.so decides the algorithm), a
 * seeded trace of batches goes through a sluice_async handle over the
 * server store: each batch is several hits, peeks, hit_manys and resets
 * on a few keys, all started in one loop iteration (so they leave in one
 * write, grouped), then the loop is run until all are called back. The
 * same calls, in the same order, then go to a reference store through the
 * blocking API, and every answer must be the same. Every ten batches the
 * limit changes, its keys reset on both sides.
 *
 *   - an algorithm on the caller's clock: the reference is the embedded
 *     store, both on one virtual clock (the server store with
 *     ?clock=caller), and every field must be equal. The server expires
 *     keys on its real clock, so after each batch the keys touched lose
 *     their expiry (PERSIST) as in test_valkey_diff.c; a key that had
 *     less than a few ms to live is forgotten on both sides (a resync);
 *   - the fixed window, which runs on the server's own clock: the
 *     reference is a second server store (another prefix) through the
 *     blocking calls, in an hour's window: every field equal but the
 *     waits, which may differ by the real time between the calls.
 *
 * The server listens on the transport $SLUICE_TEST_TRANSPORT names: tcp
 * (the default), tls or unix (test_async_basic_tls, _unix).
 *
 * Usage: test_async_basic [SEED] (or SLUICE_TEST_SEED=N); the seed is
 * printed.
 */
#include "algo/model.h"
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"
#include "tls_certs.h"

#include "sluice/adapters/poll.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 60
#define BATCH_MAX 8
#define MANY_MAX 4
#define KEYS 5
#define WAIT_TOLERANCE_MS 2000

static rs_server server;
/* The store's URL on 'server' over the run's transport (TLS: with its
   tls_ca option). */
static char base_url[600];
static long resyncs;

/* ---- One batch's calls ---------------------------------------------------------- */

typedef enum op_kind { OP_HIT, OP_PEEK, OP_MANY, OP_RESET } op_kind;

typedef struct op {
    op_kind kind;
    int key;                       /* OP_HIT, OP_PEEK, OP_RESET */
    uint64_t cost;
    size_t n;                      /* OP_MANY */
    sluice_request reqs[MANY_MAX]; /* OP_MANY: the async call's */
    int rc;                        /* what starting it answered */
    int fired;
    int err;
    sluice_decision d;
} op;

static const char *const key_names[KEYS] = {"k0", "k1", "k2", "k3", "k4"};

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    op *o = user;

    (void)a;
    o->fired++;
    o->err = err;
    if (d != NULL)
        o->d = *d;
}

static void on_many(sluice_async *a, int err, sluice_request *reqs, size_t n,
                    void *user)
{
    op *o = user;

    (void)a;
    (void)reqs;
    (void)n;
    o->fired++;
    o->err = err;
}

static void on_done(sluice_async *a, int err, void *user)
{
    op *o = user;

    (void)a;
    o->fired++;
    o->err = err;
}

static uint64_t cost_of(const sluice_limit *lim)
{
    return rng_pct(70) ? 1 : rng_range(1, lim->max);
}

static void op_make(op *o, const sluice_limit *lim)
{
    unsigned roll = (unsigned)rng_below(100);

    memset(o, 0, sizeof(*o));
    o->kind = roll < 55 ? OP_HIT : roll < 80 ? OP_PEEK
              : roll < 95 ? OP_MANY : OP_RESET;
    o->key = (int)rng_below(KEYS);
    o->cost = cost_of(lim);
    if (o->kind == OP_MANY) {
        o->n = (size_t)rng_range(1, MANY_MAX);
        for (size_t i = 0; i < o->n; i++) {
            const char *k = key_names[rng_below(KEYS)];

            o->reqs[i] = (sluice_request){k, strlen(k), cost_of(lim), 0, {0}};
        }
    }
}

static int op_start(sluice_async *a, const sluice_limit *lim, op *o)
{
    const char *k = key_names[o->key];

    switch (o->kind) {
    case OP_HIT:
        return sluice_async_hit(a, lim, k, 2, o->cost, on_decision, o);
    case OP_PEEK:
        return sluice_async_peek(a, lim, k, 2, o->cost, on_decision, o);
    case OP_MANY:
        return sluice_async_hit_many(a, lim, o->reqs, o->n, on_many, o);
    default:
        return sluice_async_reset(a, lim, k, 2, on_done, o);
    }
}

/* ---- The reference's answers ----------------------------------------------------- */

/* The two answers held against each other: exactly, or but the waits. */
static void same(const sluice_decision *got, const sluice_decision *want,
                 bool exact)
{
    if (exact) {
        CHECK_SAME(*got, *want);
        CHECK(got->fallback == want->fallback);
    } else if (!CHECK(decision_close(got, want, WAIT_TOLERANCE_MS))) {
        decision_print("async", 0, got);
        decision_print("blocking", 0, want);
    }
}

/* The same call through the blocking API on 'ref', held against 'o'. */
static void op_check(sluice_store *ref, const sluice_limit *lim, const op *o,
                     bool exact)
{
    const char *k = key_names[o->key];
    sluice_request reqs[MANY_MAX];
    sluice_decision d;
    int err;

    /* A call refused at its start (a cost over gcra's burst) is called
       back never, and the blocking call refuses it alike. */
    CHECK(o->fired == (o->rc == SLUICE_OK));
    switch (o->kind) {
    case OP_HIT:
    case OP_PEEK:
        err = o->kind == OP_HIT ? sluice_hit(&d, ref, lim, k, 2, o->cost)
                                : sluice_peek(&d, ref, lim, k, 2, o->cost);
        CHECK_RC(o->rc < 0 ? o->rc : o->err, err);
        if (err == 0 && o->err == 0)
            same(&o->d, &d, exact);
        break;
    case OP_MANY:
        memcpy(reqs, o->reqs, sizeof(reqs));
        err = sluice_hit_many(ref, lim, reqs, o->n);
        CHECK_RC(o->rc < 0 ? o->rc : o->err, err);
        for (size_t i = 0; i < o->n; i++) {
            CHECK_RC(o->reqs[i].err, reqs[i].err);
            if (reqs[i].err == 0 && o->reqs[i].err == 0)
                same(&o->reqs[i].decision, &reqs[i].decision, exact);
        }
        break;
    default:
        /* Each store's clock says whether a count was there (the
           server's PERSISTed keys never expire): both must have done it. */
        CHECK_RC(o->rc < 0 ? o->rc : test_reset_rc(o->err),
                 test_reset_rc(sluice_reset(ref, lim, k, 2)));
    }
}

/* The keys a batch touched lose their expiry on the server (see the top);
   one with next to no life left, or gone, is forgotten on both sides. */
static const char persist_script[] =
    "local t = redis.call('PTTL', KEYS[1]) "
    "if t >= 0 and t < 50 then redis.call('DEL', KEYS[1]) return -2 end "
    "if t >= 0 then redis.call('PERSIST', KEYS[1]) end return t";

static void keys_persist(sluice_store *ref, const sluice_limit *lim,
                         const char *prefix)
{
    for (int i = 0; i < KEYS; i++) {
        char key[128];
        redisReply *r;

        test_key_of(key, sizeof(key), prefix, key_names[i], 2,
                    sluice_algo_name(lim->algo));
        r = rs_cmd(&server, "EVAL %s 1 %s", persist_script, key);
        if (!CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER))
            continue;
        if (r->integer == -2) {
            sluice_decision d;

            /* Gone on the server: whole there, so whole here too. */
            if (sluice_peek(&d, ref, lim, key_names[i], 2, lim->max) == 0 &&
                !d.allowed)
                resyncs++;
            CHECK_RESET(sluice_reset(ref, lim, key_names[i], 2));
        }
        freeReplyObject(r);
    }
}

/* Prints batch 'b' (its call 'bad' failed a check), to explain it. */
static void batch_print(int b, const sluice_limit *lim, const op *ops,
                        size_t n, size_t bad)
{
    static const char *const kinds[] = {"hit", "peek", "hit_many", "reset"};

    fprintf(stderr, "  batch %d (max %llu, window %llu, burst %llu):\n", b,
            (unsigned long long)lim->max, (unsigned long long)lim->window_ms,
            (unsigned long long)lim->burst);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "  %s %s %s cost %llu:", i == bad ? "->" : "  ",
                kinds[ops[i].kind], key_names[ops[i].key],
                (unsigned long long)ops[i].cost);
        for (size_t j = 0; ops[i].kind == OP_MANY && j < ops[i].n; j++)
            fprintf(stderr, " %.2s/%llu", ops[i].reqs[j].key,
                    (unsigned long long)ops[i].reqs[j].cost);
        fprintf(stderr, " rc %d err %d remaining %llu\n", ops[i].rc,
                ops[i].err, (unsigned long long)ops[i].d.remaining);
    }
}

/* Runs the loop until nothing is pending (bounded: a hang fails a check). */
static void drain(sluice_poll_loop *loop, sluice_async *a)
{
    uint64_t until = rs_mono_ms() + 20000;

    while (sluice_async_pending(a) > 0 && rs_mono_ms() < until)
        if (sluice_poll_run(loop, a, 50) < 0)
            break;
    CHECK(sluice_async_pending(a) == 0);
}

/* ---- A trace ----------------------------------------------------------------------- */

static sluice_limit limit_for(sluice_algo algo, bool server_clock)
{
    static const uint64_t windows[] = {1000, 10000, 60000};
    sluice_limit lim = SLUICE_LIMIT(algo, rng_range(1, 20),
                                    windows[rng_below(3)]);

    if (server_clock)
        lim.window_ms = 3600 * 1000;
    if (algo == SLUICE_GCRA && rng_pct(50))
        lim.burst = rng_range(1, lim.max);
    return lim;
}

/* The virtual clock's step before a batch: none, a little, a window... */
static uint64_t gap_for(const sluice_limit *lim)
{
    switch (rng_below(6)) {
    case 0:
    case 1:
        return 0;
    case 2:
        return rng_range(1, lim->window_ms / 10 + 1);
    case 3:
        return lim->window_ms / 3;
    case 4:
        return lim->window_ms;
    default:
        return 3 * lim->window_ms;
    }
}

static void trace(sluice_algo algo, const char *engine, uint64_t seed)
{
    bool server_clock = sluice__models[algo]->server_clock;
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 1000000);
    sluice_store *st, *ref;
    sluice_poll_loop loop;
    sluice_async *a;
    char query[256], prefix[64];
    op ops[BATCH_MAX];
    sluice_limit lim;

    rng_state = seed ^ ((uint64_t)algo << 32);
    snprintf(prefix, sizeof(prefix), "b%s%d", engine, (int)algo);
    snprintf(query, sizeof(query), "%s&engine=%s&prefix=%s",
             server_clock ? "timeout=5000&refused_cache=off"
                          : TEST_CALLER_QUERY, engine, prefix);
    st = test_store_open(base_url, query, &opts);
    if (server_clock) {
        snprintf(query, sizeof(query), "timeout=5000&refused_cache=off&"
                 "engine=lua&prefix=%sref", prefix);
        ref = test_store_open(base_url, query, NULL);
    } else {
        ref = test_store_open("mem://", "", &opts);
    }
    if (!CHECK_OK(sluice_async_poll_new(&a, st, &loop)))
        return;
    for (int b = 0; b < BATCHES; b++) {
        size_t n = (size_t)rng_range(1, BATCH_MAX);

        /* A limit for ten batches, then another on keys made whole: a
           state the old limit let lapse (which the embedded store may
           have dropped, while the server's PERSISTed copy keeps it) is not the same state under
           a longer window. */
        if (b % 10 == 0) {
            lim = limit_for(algo, server_clock);
            for (int k = 0; k < KEYS; k++) {
                CHECK_RESET(sluice_reset(st, &lim, key_names[k], 2));
                CHECK_RESET(sluice_reset(ref, &lim, key_names[k], 2));
            }
        }
        if (!server_clock)
            sluice_vclock_advance(clock, gap_for(&lim));
        for (size_t i = 0; i < n; i++) {
            op_make(&ops[i], &lim);
            ops[i].rc = op_start(a, &lim, &ops[i]);
            CHECK(ops[i].rc == SLUICE_OK || ops[i].rc == SLUICE_ECOST);
        }
        drain(&loop, a);
        for (size_t i = 0; i < n; i++) {
            long failed = test_failures;

            op_check(ref, &lim, &ops[i], !server_clock);
            if (test_failures != failed || getenv("TEST_PRINT_BATCHES"))
                batch_print(b, &lim, ops, n, i);
        }
        if (!server_clock)
            keys_persist(ref, &lim, prefix);
    }
    if (strcmp(engine, "module") == 0)
        test_check_engine_used(st, engine);
    sluice_async_free(a);
    sluice_store_free(st);
    sluice_store_free(ref);
    sluice_vclock_free(clock);
}

/*
 * A hit and then a reset of its key, started in one loop iteration on a
 * new connection to a server without the scripts (SCRIPT FLUSH): the
 * reset runs after the hit, so a peek after them finds the key whole.
 * (Were the scripts given only after NOSCRIPT, the hit would be sent
 * again after the reset had run.) Then the scripts are flushed under the
 * open connection, and the same three calls keep their order (the reset
 * is a script too, sent again after the hit).
 */
static void order_after_flush(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 10, 60000);
    sluice_poll_loop loop;
    sluice_store *st;
    sluice_async *a;
    op hit = {.kind = OP_HIT, .key = 0, .cost = 4};
    op reset = {.kind = OP_RESET, .key = 0};
    op peek = {.kind = OP_PEEK, .key = 0, .cost = 1};

    test_context("a hit, then a reset, after SCRIPT FLUSH");
    CHECK(rs_ok(&server, "SCRIPT FLUSH") == 0);
    st = test_store_open(base_url, "engine=lua&prefix=order", NULL);
    if (!CHECK_OK(sluice_async_poll_new(&a, st, &loop)))
        return;
    CHECK_OK(op_start(a, &lim, &hit));
    CHECK_OK(op_start(a, &lim, &reset));
    CHECK_OK(op_start(a, &lim, &peek));
    drain(&loop, a);
    CHECK(hit.fired == 1 && hit.err == 0 && hit.d.remaining == 6);
    CHECK(reset.fired == 1 && reset.err == 1);
    CHECK(peek.fired == 1 && peek.err == 0 && peek.d.remaining == 9);
    /* The same with the connection open: the hit and the reset both meet
       NOSCRIPT, and go again in their order. */
    CHECK(rs_ok(&server, "SCRIPT FLUSH") == 0);
    CHECK_OK(op_start(a, &lim, &hit));
    CHECK_OK(op_start(a, &lim, &reset));
    CHECK_OK(op_start(a, &lim, &peek));
    drain(&loop, a);
    CHECK(hit.fired == 2 && hit.err == 0 && hit.d.remaining == 6);
    CHECK(reset.fired == 2 && reset.err == 1);
    CHECK(peek.fired == 2 && peek.err == 0 && peek.d.remaining == 9);
    sluice_async_free(a);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * More than SLUICE__VK_GROUP_MAX (512) calls of one limit at once: 1100
 * hits started in one loop iteration leave as three script calls (512,
 * 512, 76, in their order), and a hit_many of 1300 requests likewise;
 * every answer that of the embedded store on the same virtual clock.
 */
#define WIDE_HITS 1100
#define WIDE_MANY 1300

static void wide(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 700, 60000);
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = test_vclock_opts(&opts, 5000000);
    sluice_store *st = test_store_open(base_url, TEST_CALLER_QUERY
                                       "&engine=lua&prefix=wide", &opts);
    sluice_store *ref = test_store_open("mem://", "", &opts);
    op *ops = calloc(WIDE_HITS + 1, sizeof(*ops));
    sluice_request *reqs = calloc(WIDE_MANY, sizeof(*reqs));
    sluice_poll_loop loop;
    sluice_async *a;
    long long evalsha;
    op many = {.kind = OP_MANY};

    test_context("%d hits at once, and a hit_many of %d", WIDE_HITS,
                 WIDE_MANY);
    if (!CHECK(ops != NULL && reqs != NULL) ||
        !CHECK_OK(sluice_async_poll_new(&a, st, &loop)))
        goto out;
    evalsha = rs_calls(&server, "evalsha");
    for (size_t i = 0; i < WIDE_HITS; i++) {
        ops[i] = (op){.kind = OP_HIT, .key = (int)(i % 3), .cost = 1};
        CHECK_OK(op_start(a, &lim, &ops[i]));
    }
    drain(&loop, a);
    CHECK(rs_calls(&server, "evalsha") == evalsha + 3);
    for (size_t i = 0; i < WIDE_HITS; i++)
        op_check(ref, &lim, &ops[i], true);
    for (size_t i = 0; i < WIDE_MANY; i++)
        reqs[i] = (sluice_request){key_names[i % KEYS], 2, 1, 0, {0}};
    CHECK_OK(sluice_async_hit_many(a, &lim, reqs, WIDE_MANY, on_many,
                                   &many));
    drain(&loop, a);
    CHECK(many.fired == 1 && many.err == 0);
    for (size_t i = 0; i < WIDE_MANY; i++) {
        sluice_decision d;

        CHECK_RC(reqs[i].err, sluice_hit(&d, ref, &lim, reqs[i].key, 2, 1));
        CHECK_SAME(reqs[i].decision, d);
    }
    sluice_async_free(a);
out:
    free(ops);
    free(reqs);
    sluice_store_free(st);
    sluice_store_free(ref);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * The server of the run, over the transport $SLUICE_TEST_TRANSPORT names:
 * tcp (the default), tls (the run's certificates) or unix, as
 * test_valkey_diff.c's; sets base_url.
 */
static int start_server(void)
{
    const char *transport = getenv("SLUICE_TEST_TRANSPORT");
    const rs_certs *c;
    int rc;

    if (transport == NULL || transport[0] == '\0' ||
        strcmp(transport, "tcp") == 0)
        rc = rs_start(&server, rs_module_args());
    else if (strcmp(transport, "unix") == 0)
        rc = rs_start_unix(&server, rs_module_args());
    else if (strcmp(transport, "tls") == 0)
        rc = (c = rs_certs_get()) == NULL
                 ? -1 : rs_start_tls(&server, "no", rs_module_args());
    else
        rc = -1;
    if (rc < 0)
        return -1;
    if (transport != NULL && strcmp(transport, "tls") == 0)
        snprintf(base_url, sizeof(base_url), "%s?tls_ca=%s", server.url,
                 rs_certs_get()->ca_cert);
    else
        snprintf(base_url, sizeof(base_url), "%s", server.url);
    printf("test_async_basic: server %s\n", base_url);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    printf("test_async_basic: seed %" PRIu64 "\n", seed);
    if (start_server() < 0)
        return TEST_SKIP;
    order_after_flush();
    wide();
    for (int algo = 0; algo < TEST_ALGO_N; algo++) {
        test_context("%s, engine=lua, seed %" PRIu64,
                     sluice_algo_name((sluice_algo)algo), seed);
        trace((sluice_algo)algo, "lua", seed);
        if (rs_module_path() != NULL &&
            test_module_glue(&server, (sluice_algo)algo)) {
            test_context("%s, engine=module, seed %" PRIu64,
                         sluice_algo_name((sluice_algo)algo), seed);
            trace((sluice_algo)algo, "module", seed);
        }
    }
    test_context(NULL);
    printf("test_async_basic: %ld resyncs\n", resyncs);
    rs_stop(&server);
    return test_summary("test_async_basic");
}
