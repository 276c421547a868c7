/*
 * test_valkey_hit_all.c - sluice_hit_all() on a real redis-server.
 *
 *   - All or nothing: a request one limit refuses counts in none, read back
 *     with raw commands on the limits' keys (PREFIX:{id}:ALGO:WINDOWms);
 *     the largest wait; sluice_hit()'s key is another.
 *   - One script call (EVALSHA, INFO commandstats) per hit_all and
 *     peek_all, whatever the number of limits; one DEL per reset_all.
 *   - Four threads on one id: exactly the tightest max admitted, and every
 *     limit's key counted just that.
 *   - The refused cache is not used: each refusal asks the server.
 *   - A key holding something else: SLUICE_EPROTO naming it, nothing
 *     counted.
 *   - The embedded store and the server agree, decision for decision, on
 *     seeded random traces over every pair of the algorithms that run on
 *     the caller's clock (clock=caller, one virtual clock for both).
 *   - The failure policy stands in for the whole call when the server is
 *     stalled (SIGSTOP): on_error=open admits, closed refuses, both say so
 *     in 'fallback'; the default answers the error.
 *
 * Usage: test_valkey_hit_all [SEED]
 */
#include "algo/model.h" /* which algorithms run on the caller's clock */
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

#define ID "user42"
#define ID_LEN (sizeof(ID) - 1)
#define HOUR 3600000

static sluice_decision hit_all(sluice_store *st, const sluice_limit *l,
                               size_t n, uint64_t cost, sluice_decision *each)
{
    sluice_decision d;

    CHECK_OK(sluice_hit_all(&d, each, st, l, n, ID, ID_LEN, cost));
    return d;
}

/* The number a string key holds (GET), or -1. */
static long long get_int(const char *key)
{
    redisReply *r = rs_cmd(&server, "GET %s", key);
    long long v = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = atoll(r->str);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

/* ---- All or nothing, keys, calls ---------------------------------------------- */

static void test_all_or_nothing(sluice_store *st)
{
    sluice_limit l[3] = {SLUICE_LIMIT(SLUICE_FIXED, 2, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, HOUR),
                         SLUICE_LIMIT(SLUICE_FIXED, 9, 2 * HOUR)};
    sluice_decision d, each[3];
    long long calls;

    test_context("server: all or nothing");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    calls = rs_calls(&server, "evalsha");
    CHECK(hit_all(st, l, 3, 1, NULL).allowed);
    d = hit_all(st, l, 3, 1, each);
    CHECK(d.allowed && d.remaining == 0 && d.limit == 2);
    CHECK_EQ_U64(each[1].remaining, 3);
    CHECK_EQ_U64(each[2].remaining, 7);
    /* One script call each, for three limits. */
    CHECK_EQ_U64(rs_calls(&server, "evalsha") - calls, 2);
    /* The fixed window refuses: neither other limit counts it. */
    d = hit_all(st, l, 3, 1, each);
    CHECK(!d.allowed && d.limit == 2);
    CHECK(d.retry_after_ms > HOUR - 60000 && d.retry_after_ms <= HOUR);
    CHECK(each[1].allowed && each[2].allowed);
    CHECK_EQ_U64(get_int("sluice:{user42}:fixed:3600000ms"), 2);
    CHECK_EQ_U64(rs_int(&server, "ZCARD sluice:{user42}:sliding-log:"
                        "3600000ms"), 2);
    CHECK_EQ_U64(get_int("sluice:{user42}:fixed:7200000ms"), 2);
    CHECK_EQ_U64(rs_int(&server, "EXISTS sluice:{user42}:fixed"), 0);
    CHECK_OK(sluice_peek_all(&d, each, st, l, 3, ID, ID_LEN, 1));
    CHECK_EQ_U64(rs_calls(&server, "evalsha") - calls, 4);
    /* sluice_hit() on the same limit and id counts elsewhere. */
    CHECK_OK(sluice_hit(&d, st, &l[0], ID, ID_LEN, 1));
    CHECK(d.allowed && d.remaining == 1);
    CHECK_EQ_U64(get_int("sluice:{user42}:fixed"), 1);
    /* The larger wait: a fixed 1/2 h refusing beside the 2/1 h one. */
    l[2].max = 2;
    d = hit_all(st, l, 3, 1, each);
    CHECK(!d.allowed && d.limit == 2);
    CHECK(d.retry_after_ms > HOUR && d.retry_after_ms == each[2].retry_after_ms);
    /* Reset: one DEL, and the budgets are whole again. */
    calls = rs_calls(&server, "del");
    CHECK_OK(sluice_reset_all(st, l, 3, ID, ID_LEN));
    CHECK_EQ_U64(rs_calls(&server, "del") - calls, 1);
    CHECK_EQ_U64(rs_int(&server, "EXISTS sluice:{user42}:fixed:3600000ms "
                        "sluice:{user42}:sliding-log:3600000ms "
                        "sluice:{user42}:fixed:7200000ms"), 0);
    CHECK_EQ_U64(rs_int(&server, "EXISTS sluice:{user42}:fixed"), 1);
    d = hit_all(st, l, 3, 1, NULL);
    CHECK(d.allowed && d.remaining == 1);
    test_context(NULL);
}

static void test_foreign(sluice_store *st)
{
    sluice_limit l[2] = {SLUICE_LIMIT(SLUICE_FIXED, 5, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, HOUR)};
    sluice_decision d;

    test_context("server: a foreign value");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK(rs_int(&server, "RPUSH sluice:{user42}:sliding-log:3600000ms x")
          == 1);
    CHECK_RC(sluice_hit_all(&d, NULL, st, l, 2, ID, ID_LEN, 1),
             SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "sliding-log:3600000ms") != NULL);
    CHECK_EQ_U64(rs_int(&server, "EXISTS sluice:{user42}:fixed:3600000ms"),
                 0);
    /* The other order: the foreign key second, the fixed first. */
    l[1] = l[0];
    l[0] = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, HOUR);
    CHECK_RC(sluice_hit_all(&d, NULL, st, l, 2, ID, ID_LEN, 1),
             SLUICE_EPROTO);
    CHECK_EQ_U64(rs_int(&server, "EXISTS sluice:{user42}:fixed:3600000ms"),
                 0);
    test_context(NULL);
}

/* hit_all neither reads nor fills the refused cache: each refusal asks the
   server, even with refused_cache=all. */
static void test_refused_cache(void)
{
    sluice_limit l[2] = {SLUICE_LIMIT(SLUICE_FIXED, 1, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, HOUR)};
    sluice_store *st = test_store_open(server.url,
                                       "timeout=5000&refused_cache=all", NULL);
    sluice_store_stats stats;
    long long calls;

    test_context("server: the refused cache");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    CHECK(hit_all(st, l, 2, 1, NULL).allowed);
    calls = rs_calls(&server, "evalsha");
    for (int i = 0; i < 3; i++)
        CHECK(!hit_all(st, l, 2, 1, NULL).allowed);
    CHECK_EQ_U64(rs_calls(&server, "evalsha") - calls, 3);
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.local_refusals, 0);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Threads ------------------------------------------------------------------ */

#define THREADS 4
#define CALLS 150

typedef struct hammer {
    sluice_store *st;
    const sluice_limit *limits;
    int admitted, errors;
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;

    for (int i = 0; i < CALLS; i++) {
        sluice_decision d;

        if (sluice_hit_all(&d, NULL, h->st, h->limits, 3, ID, ID_LEN, 1) !=
            SLUICE_OK)
            h->errors++;
        else
            h->admitted += d.allowed;
    }
    return NULL;
}

/* Threads on one id, through one store's shared connections: exactly the
   tightest limit's max is admitted, and every limit counted just that. */
static void test_threads(void)
{
    sluice_limit l[3] = {SLUICE_LIMIT(SLUICE_FIXED, 300, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_LOG, 200, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_COUNTER, 250, HOUR)};
    sluice_store *st = test_store_open(server.url, "timeout=5000&pool=3",
                                       NULL);
    pthread_t tids[THREADS];
    hammer h[THREADS];
    int total = 0;

    test_context("server: threads");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (int i = 0; i < THREADS; i++) {
        h[i] = (hammer){st, l, 0, 0};
        CHECK(pthread_create(&tids[i], NULL, hammer_run, &h[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tids[i], NULL);
        total += h[i].admitted;
        CHECK_EQ_U64(h[i].errors, 0);
    }
    CHECK_EQ_U64(total, 200);
    CHECK_EQ_U64(get_int("sluice:{user42}:fixed:3600000ms"), 200);
    CHECK_EQ_U64(rs_int(&server, "ZCARD sluice:{user42}:sliding-log:"
                        "3600000ms"), 200);
    sluice_store_free(st);
    test_context(NULL);
}

/* ---- Embedded against server ------------------------------------------------ */

static void diff_pair(sluice_algo a, sluice_algo b, uint64_t seed)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;
    sluice_vclock *clock = NULL;
    sluice_store *mem, *vk;
    /* Windows of 10 s and more: the server's own expiry (real time) never
       strikes while the trace runs. */
    sluice_limit l[2] = {SLUICE_LIMIT(a, 4, 10000),
                         SLUICE_LIMIT(b, 9, 50000)};
    uint64_t now = 1000000000;

    rng_state = seed;
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    clock = test_vclock_opts(&opts, now);
    mem = test_store_open("mem://", "", &opts);
    vk = test_store_open(server.url, TEST_CALLER_QUERY, &opts);
    for (int step = 0; step < 300; step++) {
        sluice_decision dm, dv, em[2], ev[2];
        uint64_t cost = rng_pct(80) ? 1 : rng_range(1, 4);
        int consume = rng_pct(85);

        test_context("diff %s + %s, seed %llu, step %d", sluice_algo_name(a),
                     sluice_algo_name(b), (unsigned long long)seed, step);
        now += rng_pct(30) ? 0 : rng_range(0, 9000);
        sluice_vclock_set(clock, now);
        if (consume) {
            CHECK_OK(sluice_hit_all(&dm, em, mem, l, 2, ID, ID_LEN, cost));
            CHECK_OK(sluice_hit_all(&dv, ev, vk, l, 2, ID, ID_LEN, cost));
        } else {
            CHECK_OK(sluice_peek_all(&dm, em, mem, l, 2, ID, ID_LEN, cost));
            CHECK_OK(sluice_peek_all(&dv, ev, vk, l, 2, ID, ID_LEN, cost));
        }
        CHECK_SAME(dm, dv);
        CHECK_SAME(em[0], ev[0]);
        CHECK_SAME(em[1], ev[1]);
    }
    test_context(NULL);
    sluice_store_free(vk);
    sluice_store_free(mem);
    sluice_vclock_free(clock);
}

static void test_diff(uint64_t seed)
{
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (int a = 0; a < TEST_ALGO_N; a++)
        for (int b = 0; b < TEST_ALGO_N; b++)
            if (!sluice__models[a]->server_clock &&
                !sluice__models[b]->server_clock)
                diff_pair((sluice_algo)a, (sluice_algo)b,
                          seed + (uint64_t)(a * TEST_ALGO_N + b));
}

/* ---- The failure policy ------------------------------------------------------ */

static void test_policy(void)
{
    sluice_limit l[2] = {SLUICE_LIMIT(SLUICE_FIXED, 5, HOUR),
                         SLUICE_LIMIT(SLUICE_SLIDING_LOG, 5, HOUR)};
    sluice_store *fail = test_store_open(server.url, "timeout=200", NULL);
    sluice_store *open = test_store_open(server.url,
                                         "timeout=200&on_error=open", NULL);
    sluice_store *closed = test_store_open(server.url,
                                           "timeout=200&on_error=closed",
                                           NULL);
    sluice_decision d, each[2];
    sluice_store_stats stats;

    test_context("server: the failure policy");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    /* Each store loads its scripts while the server answers. */
    CHECK(hit_all(fail, l, 2, 1, NULL).allowed);
    CHECK(hit_all(open, l, 2, 1, NULL).allowed);
    CHECK(hit_all(closed, l, 2, 1, NULL).allowed);
    rs_pause(&server);
    CHECK_RC(sluice_hit_all(&d, NULL, fail, l, 2, ID, ID_LEN, 1),
             SLUICE_ETIMEDOUT);
    CHECK(!d.allowed);
    CHECK_OK(sluice_hit_all(&d, each, open, l, 2, ID, ID_LEN, 1));
    CHECK(d.allowed && d.fallback == SLUICE_FELL_OPEN);
    CHECK(each[1].allowed && each[1].fallback == SLUICE_FELL_OPEN &&
          each[1].limit == 5);
    CHECK_OK(sluice_hit_all(&d, each, closed, l, 2, ID, ID_LEN, 1));
    CHECK(!d.allowed && d.fallback == SLUICE_FELL_CLOSED &&
          d.retry_after_ms == 200);
    rs_resume(&server);
    CHECK_OK(sluice_store_stats_get(&stats, open));
    CHECK_EQ_U64(stats.fell_open, 1);
    /* Answered again. The calls that timed out reached the server and may
       have counted there once it ran again (as for sluice_hit()), each one
       all or nothing: both limits agree. */
    CHECK_OK(sluice_peek_all(&d, each, fail, l, 2, ID, ID_LEN, 1));
    CHECK(d.fallback == SLUICE_ANSWERED);
    CHECK_EQ_U64(get_int("sluice:{user42}:fixed:3600000ms"),
                 rs_int(&server, "ZCARD sluice:{user42}:sliding-log:"
                        "3600000ms"));
    sluice_store_free(fail);
    sluice_store_free(open);
    sluice_store_free(closed);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, 7);
    sluice_store *vk;

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_hit_all: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_hit_all: seed %llu\n", (unsigned long long)seed);
    vk = test_store_open(server.url, "timeout=5000", NULL);
    test_all_or_nothing(vk);
    test_foreign(vk);
    sluice_store_free(vk);
    test_refused_cache();
    test_threads();
    test_diff(seed);
    test_policy();
    rs_stop(&server);
    return test_summary("test_valkey_hit_all");
}
