/*
 * test_batch.c - sluice_hit_many(): many requests against one limit, decided
 * as sluice_hit() would one after the other.
 *
 * On the embedded store and on a real redis-server:
 *   - a key named several times in one batch sees the earlier requests
 *     counted (exact remaining and waits for the fixed window);
 *   - a bad request (cost 0, cost above max, a NULL key) fails alone, and
 *     the call answers the first error (in array order); n = 0 is fine, NULL arguments are
 *     errors;
 *   - on the server, one batch is one EVALSHA (INFO commandstats), and a
 *     batch larger than one script call takes is split and still exact;
 *   - a key holding a foreign value fails alone with SLUICE_EPROTO, and the
 *     requests around it are decided and counted;
 *   - long (1,000-byte), binary and empty keys share a call, each with its
 *     own budget;
 *   - requests the refused cache knows are answered without the server;
 *   - each refused request emits one "emq.rate_limit.hit" event;
 *   - threads calling sluice_hit() at once on one server store are combined
 *     into shared script calls (fewer EVALSHAs than decisions), and still
 *     each key admits exactly its max, peeks count nothing, and a failing
 *     request (a foreign value) fails alone with its own message.
 * Every algorithm's batches are checked request by request against the
 * embedded store, on one virtual clock, on one server and on a cluster, in
 * test_cluster's differential test.
 */
#include "server.h"
#include "test.h"

#include "sluice.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

static uint64_t evalsha_calls(void)
{
    return (uint64_t)rs_calls(&server, "evalsha");
}

static sluice_store *open_store(const char *url)
{
    sluice_store *st = NULL;

    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(1);
    return st;
}

static sluice_request req(const char *key, uint64_t cost)
{
    sluice_request q = {key, key == NULL ? 1 : strlen(key), cost, -99, {0}};

    return q;
}

/* Repeats in one batch; bad requests fail alone. */
static void test_order_and_errors(sluice_store *st, const char *kind)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 3, 60000);
    sluice_request q[] = {
        req("a", 1), req("b", 2), req("a", 1), req("a", 0), req("a", 1),
        req("a", 1), req("b", 1), req(NULL, 1), req("b", 1), req("c", 4),
    };
    size_t n = sizeof(q) / sizeof(q[0]);

    test_context("%s: order and errors", kind);
    CHECK_RESET(sluice_reset(st, &lim, "a", 1));
    CHECK_RESET(sluice_reset(st, &lim, "b", 1));
    CHECK_RC(sluice_hit_many(st, &lim, q, n), SLUICE_ERANGE);
    /* a: 1, 1, (cost 0), 1, then refused */
    CHECK_OK(q[0].err);
    CHECK(q[0].decision.allowed);
    CHECK_EQ_U64(q[0].decision.remaining, 2);
    CHECK_EQ_U64(q[0].decision.limit, 3);
    CHECK_OK(q[2].err);
    CHECK_EQ_U64(q[2].decision.remaining, 1);
    CHECK_RC(q[3].err, SLUICE_ERANGE);
    CHECK(q[3].decision.allowed == 0 && q[3].decision.limit == 0);
    CHECK_OK(q[4].err);
    CHECK(q[4].decision.allowed);
    CHECK_EQ_U64(q[4].decision.remaining, 0);
    CHECK_OK(q[5].err);
    CHECK(!q[5].decision.allowed);
    CHECK(q[5].decision.retry_after_ms > 50000 &&
          q[5].decision.retry_after_ms <= 60000);
    CHECK_EQ_U64(q[5].decision.reset_after_ms, q[5].decision.retry_after_ms);
    /* b: 2, 1, (NULL key), refused */
    CHECK(q[1].decision.allowed && q[1].decision.remaining == 1);
    CHECK(q[6].decision.allowed && q[6].decision.remaining == 0);
    CHECK_RC(q[7].err, SLUICE_EINVAL);
    CHECK_OK(q[8].err);
    CHECK(!q[8].decision.allowed);
    /* c: a cost above max */
    CHECK_RC(q[9].err, SLUICE_ECOST);

    /* What was counted is what single hits see next. */
    {
        sluice_decision d;

        CHECK_OK(sluice_peek(&d, st, &lim, "a", 1, 1));
        CHECK(!d.allowed && d.remaining == 0);
        CHECK_OK(sluice_peek(&d, st, &lim, "b", 1, 1));
        CHECK(!d.allowed && d.remaining == 0);
    }
    /* Nothing to do, and bad arguments. */
    CHECK_OK(sluice_hit_many(st, &lim, NULL, 0));
    CHECK_RC(sluice_hit_many(st, &lim, NULL, 1), SLUICE_EINVAL);
    CHECK_RC(sluice_hit_many(NULL, &lim, q, 1), SLUICE_EINVAL);
    {
        sluice_limit bad = SLUICE_LIMIT(SLUICE_FIXED, 0, 1000);
        sluice_request one = req("a", 1);

        CHECK_RC(sluice_hit_many(st, &bad, &one, 1), SLUICE_ERANGE);
        CHECK_RC(one.err, SLUICE_ERANGE);
    }
    test_context(NULL);
}

typedef struct seen {
    int calls;
    char last_key[32];
} seen;

static void on_hit(const sluice_event *ev, void *payload)
{
    seen *s = payload;

    s->calls++;
    for (size_t i = 0; i < ev->n_metadata; i++)
        if (strcmp(ev->metadata[i].name, "key") == 0)
            snprintf(s->last_key, sizeof(s->last_key), "%.*s",
                     (int)ev->metadata[i].value_len, ev->metadata[i].value);
}

/* One "emq.rate_limit.hit" per refused request, none for the others. */
static void test_telemetry(sluice_store *st, const char *kind)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 2, 60000);
    sluice_request q[] = {req("t1", 1), req("t1", 1), req("t1", 1),
                          req("t2", 1), req("t1", 2), req("t2", 3)};
    seen s = {0, ""};

    test_context("%s: telemetry", kind);
    CHECK_RESET(sluice_reset(st, &lim, "t1", 2));
    CHECK_RESET(sluice_reset(st, &lim, "t2", 2));
    CHECK_OK(sluice_telemetry_attach("test.batch", SLUICE_EVENT_RATE_LIMIT_HIT,
                                     on_hit, &s));
    CHECK_RC(sluice_hit_many(st, &lim, q, 6), SLUICE_ECOST);
    CHECK_OK(sluice_telemetry_detach("test.batch"));
    CHECK(q[0].decision.allowed && q[1].decision.allowed);
    CHECK(!q[2].decision.allowed && q[3].decision.allowed);
    CHECK(!q[4].decision.allowed);
    CHECK_EQ_U64(s.calls, 2); /* q[2] and q[4]; q[5] is an error */
    CHECK(strcmp(s.last_key, "t1") == 0);
    test_context(NULL);
}

/* One EVALSHA per batch; a batch beyond one call is split, still exact. */
static void test_server_calls(sluice_store *st)
{
    enum { N = 1500, KEYS = 700 };
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 2, 60000);
    sluice_request *q = calloc(N, sizeof(*q));
    char (*keys)[16] = calloc(KEYS, sizeof(*keys));
    unsigned *count = calloc(KEYS, sizeof(*count));
    uint64_t before;
    int wrong = 0;

    test_context("server: calls per batch");
    if (q == NULL || keys == NULL || count == NULL)
        exit(2);
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (size_t i = 0; i < 50; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
        q[i] = req(keys[i], 1);
    }
    before = evalsha_calls();
    CHECK_OK(sluice_hit_many(st, &lim, q, 50));
    CHECK_EQ_U64(evalsha_calls() - before, 1);

    /* 1,500 requests over 700 keys, each admitted twice, then refused: the
       store sends them as several calls, in order. */
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (size_t i = 0; i < KEYS; i++)
        snprintf(keys[i], sizeof(keys[i]), "u%zu", i);
    for (size_t i = 0; i < N; i++)
        q[i] = req(keys[(i * 7919) % KEYS], 1);
    before = evalsha_calls();
    CHECK_OK(sluice_hit_many(st, &lim, q, N));
    CHECK(evalsha_calls() - before >= 2);
    CHECK(evalsha_calls() - before <= 4);
    for (size_t i = 0; i < N; i++) {
        size_t k = (i * 7919) % KEYS;
        int want = ++count[k] <= 2;

        if (q[i].err != SLUICE_OK || q[i].decision.allowed != want ||
            q[i].decision.remaining != (want ? 2 - count[k] : 0))
            wrong++;
    }
    CHECK_EQ_U64(wrong, 0);
    free(count);
    free(keys);
    free(q);
    test_context(NULL);
}

/* Long and binary keys in one call: each its own budget, nothing leaked. */
static void test_odd_keys(sluice_store *st)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_SLIDING_LOG, 1, 60000);
    char long_key[1000], bin_key[] = {'a', '\0', '{', '}', '%', 'z'};
    sluice_request q[6];
    sluice_decision d;

    test_context("server: long and binary keys in a batch");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    memset(long_key, 'k', sizeof(long_key));
    for (int i = 0; i < 6; i++) {
        q[i] = req("", 1);
        if (i % 3 == 0) {
            q[i].key = long_key;
            q[i].key_len = sizeof(long_key);
        } else if (i % 3 == 1) {
            q[i].key = bin_key;
            q[i].key_len = sizeof(bin_key);
        } else {
            q[i].key_len = 0; /* the empty id is a key too */
        }
    }
    CHECK_OK(sluice_hit_many(st, &lim, q, 6));
    for (int i = 0; i < 6; i++)
        CHECK(q[i].decision.allowed == (i < 3 ? 1 : 0));
    CHECK_OK(sluice_peek(&d, st, &lim, bin_key, sizeof(bin_key) - 1, 1));
    CHECK(d.allowed); /* a prefix is another key, still fresh */
    test_context(NULL);
}

/* A foreign value fails its request alone; its neighbours are counted. */
static void test_foreign(sluice_store *st)
{
    for (int a = 0; a < TEST_ALGO_N; a++) {
        const char *name = sluice_algo_name((sluice_algo)a);
        sluice_limit lim = SLUICE_LIMIT((sluice_algo)a, 5, 60000);
        sluice_request q[] = {req("f1", 1), req("junk", 1), req("f1", 2),
                              req("junk", 1)};
        sluice_decision d;

        test_context("server: %s, a foreign value in a batch", name);
        CHECK(rs_ok(&server, "FLUSHALL") == 0);
        /* A list is no type any algorithm writes. */
        CHECK(rs_int(&server, "RPUSH sluice:{junk}:%s x", name) == 1);
        CHECK_RC(sluice_hit_many(st, &lim, q, 4), SLUICE_EPROTO);
        CHECK_OK(q[0].err);
        CHECK(q[0].decision.allowed && q[0].decision.remaining == 4);
        CHECK_RC(q[1].err, SLUICE_EPROTO);
        CHECK(strstr(sluice_last_error(), "junk") != NULL);
        CHECK_OK(q[2].err);
        CHECK(q[2].decision.allowed && q[2].decision.remaining == 2);
        CHECK_RC(q[3].err, SLUICE_EPROTO);
        CHECK_OK(sluice_peek(&d, st, &lim, "f1", 2, 1));
        CHECK_EQ_U64(d.remaining, 1);
        CHECK(rs_int(&server, "LLEN sluice:{junk}:%s", name) == 1);
    }
    test_context(NULL);
}

/* Requests the refused cache knows never reach the server. */
static void test_refused_cache(sluice_store *st)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1, 60000);
    sluice_request q[8];
    uint64_t before, refusals_before;
    sluice_store_stats stats;

    test_context("server: refused cache");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    q[0] = req("hot", 1);
    q[1] = req("hot", 1); /* refused by the server: now remembered */
    CHECK_OK(sluice_hit_many(st, &lim, q, 2));
    CHECK(q[0].decision.allowed && !q[1].decision.allowed);
    for (int i = 0; i < 8; i++)
        q[i] = req("hot", 1);
    CHECK_OK(sluice_store_stats_get(&stats, st));
    refusals_before = stats.local_refusals;
    before = evalsha_calls();
    CHECK_OK(sluice_hit_many(st, &lim, q, 8));
    CHECK_EQ_U64(evalsha_calls(), before); /* none went to the server */
    for (int i = 0; i < 8; i++) {
        CHECK(!q[i].decision.allowed);
        CHECK(q[i].decision.retry_after_ms > 50000);
    }
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.local_refusals - refusals_before, 8);
    /* Mixed with a fresh key: one call, for the fresh key only. */
    q[3] = req("cold", 1);
    CHECK_OK(sluice_hit_many(st, &lim, q, 8));
    CHECK_EQ_U64(evalsha_calls(), before + 1);
    CHECK(q[3].decision.allowed && !q[2].decision.allowed &&
          !q[4].decision.allowed);
    test_context(NULL);
}

/* ---- Combining: many threads calling sluice_hit() at once ---------------- */

#define COMBINE_THREADS 12
#define COMBINE_KEYS 20
#define COMBINE_CALLS 600

typedef struct combine_arg {
    sluice_store *st;
    int id;
    long admitted[TEST_ALGO_N][COMBINE_KEYS]; /* per algorithm and key */
    long errors, foreign_ok, peeks_wrong;
} combine_arg;

/* Each algorithm's limit: max 7, 5, 9 (and over again), per minute. */
static sluice_limit combine_limits[TEST_ALGO_N];

static void combine_limits_init(void)
{
    static const uint64_t maxes[] = {7, 5, 9};
    const int nmax = (int)(sizeof(maxes) / sizeof(maxes[0]));

    /* gcra refills a unit every window / max (8.6 s here), which a slow
       run may reach: its window is 2^40 ms instead. */
    for (int a = 0; a < TEST_ALGO_N; a++)
        combine_limits[a] = SLUICE_LIMIT(
            (sluice_algo)a, maxes[a % nmax],
            a == SLUICE_GCRA ? SLUICE_WINDOW_MAX_MS : 60000);
}

static void *combine_thread(void *p)
{
    combine_arg *a = p;
    unsigned r = (unsigned)a->id * 2654435761u + 1;

    for (int i = 0; i < COMBINE_CALLS; i++) {
        int alg, k;
        char key[24];
        size_t klen;
        sluice_decision d;
        int err;

        r = r * 1103515245u + 12345u;
        alg = (int)((r >> 8) % TEST_ALGO_N);
        k = (int)((r >> 12) % COMBINE_KEYS);
        klen = (size_t)snprintf(key, sizeof(key), "c%d", k);
        if (a->id == 0) {
            /* This thread's keys hold a foreign value: its errors must be
               its own, named after its key, and never reach the others. */
            err = sluice_hit(&d, a->st, &combine_limits[alg], "junk", 4, 1);
            if (err == SLUICE_EPROTO &&
                strstr(sluice_last_error(), "junk") != NULL)
                a->foreign_ok++;
            continue;
        }
        if (a->id == 1) {
            /* Peeks count nothing, whatever rounds they share. */
            err = sluice_peek(&d, a->st, &combine_limits[alg], key, klen, 1);
            if (err != SLUICE_OK || d.limit != combine_limits[alg].max)
                a->peeks_wrong++;
            continue;
        }
        err = sluice_hit(&d, a->st, &combine_limits[alg], key, klen, 1);
        if (err != SLUICE_OK)
            a->errors++;
        else if (d.allowed)
            a->admitted[alg][k]++;
    }
    return NULL;
}

/*
 * Threads deciding at once on one store are combined into shared script
 * calls: each key of each limit admits exactly its max, a peek or a failing
 * request shares a round without harm, and the server sees fewer calls
 * than decisions.
 */
static void test_combining(void)
{
    static combine_arg args[COMBINE_THREADS];
    pthread_t th[COMBINE_THREADS];
    sluice_store *st;
    char url[160];
    uint64_t before, calls;
    long wrong = 0;

    test_context("server: combining");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    combine_limits_init();
    for (int a = 0; a < TEST_ALGO_N; a++)
        CHECK(rs_int(&server, "RPUSH sluice:{junk}:%s x",
                     sluice_algo_name(combine_limits[a].algo)) == 1);
    snprintf(url, sizeof(url), "%s?timeout=5000&refused_cache=off",
             server.url);
    st = open_store(url);
    before = evalsha_calls();
    for (int i = 0; i < COMBINE_THREADS; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].st = st;
        args[i].id = i;
        CHECK(pthread_create(&th[i], NULL, combine_thread, &args[i]) == 0);
    }
    for (int i = 0; i < COMBINE_THREADS; i++)
        pthread_join(th[i], NULL);
    calls = evalsha_calls() - before;
    for (int alg = 0; alg < TEST_ALGO_N; alg++)
        for (int k = 0; k < COMBINE_KEYS; k++) {
            long sum = 0;

            for (int i = 0; i < COMBINE_THREADS; i++)
                sum += args[i].admitted[alg][k];
            if (sum != (long)combine_limits[alg].max && wrong++ < 5)
                fprintf(stderr, "    %s key c%d: %ld admitted, max %" PRIu64
                        "\n", sluice_algo_name(combine_limits[alg].algo), k,
                        sum, combine_limits[alg].max);
        }
    CHECK_EQ_U64(wrong, 0);
    for (int i = 2; i < COMBINE_THREADS; i++)
        CHECK_EQ_U64(args[i].errors, 0);
    CHECK_EQ_U64(args[0].foreign_ok, COMBINE_CALLS);
    CHECK_EQ_U64(args[1].peeks_wrong, 0);
    printf("  combining: %d decisions by %d threads in %" PRIu64
           " script calls\n", COMBINE_THREADS * COMBINE_CALLS,
           COMBINE_THREADS, calls);
    CHECK(calls < (uint64_t)COMBINE_THREADS * COMBINE_CALLS);
    sluice_store_free(st);
    test_context(NULL);
}

/* gcra with a burst of its own per thread, each on its own key: 9 per
   2^40 ms (4 years apart), so within the test a key admits its burst. */
static void *burst_thread(void *p)
{
    combine_arg *a = p;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_GCRA, 9, SLUICE_WINDOW_MAX_MS);
    char key[24];
    size_t klen = (size_t)snprintf(key, sizeof(key), "b%d", a->id);

    lim.burst = 1 + (uint64_t)a->id % 9;
    for (int i = 0; i < COMBINE_CALLS / 4; i++) {
        sluice_decision d;

        if (sluice_hit(&d, a->st, &lim, key, klen, 1) != SLUICE_OK)
            a->errors++;
        else if (d.allowed)
            a->admitted[0][0]++;
    }
    return NULL;
}

/* Calls that differ only in their burst are never combined as one: each
   thread's key admits its own burst. */
static void test_combining_bursts(void)
{
    static combine_arg args[COMBINE_THREADS];
    pthread_t th[COMBINE_THREADS];
    sluice_store *st;
    char url[160];

    test_context("server: combining calls of different bursts");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s?timeout=5000&refused_cache=off",
             server.url);
    st = open_store(url);
    for (int i = 0; i < COMBINE_THREADS; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].st = st;
        args[i].id = i;
        CHECK(pthread_create(&th[i], NULL, burst_thread, &args[i]) == 0);
    }
    for (int i = 0; i < COMBINE_THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < COMBINE_THREADS; i++) {
        CHECK_EQ_U64(args[i].errors, 0);
        CHECK_EQ_U64(args[i].admitted[0][0], 1 + i % 9);
    }
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    sluice_store *mem, *vk;
    char url[160];

    mem = open_store("mem://");
    test_order_and_errors(mem, "embedded");
    test_telemetry(mem, "embedded");
    sluice_store_free(mem);

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_batch: cannot start redis-server\n");
        return 1;
    }
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    vk = open_store(url);
    test_order_and_errors(vk, "server");
    test_telemetry(vk, "server");
    test_server_calls(vk);
    test_foreign(vk);
    test_odd_keys(vk);
    test_refused_cache(vk);
    sluice_store_free(vk);
    test_combining();
    test_combining_bursts();
    rs_stop(&server);
    return test_summary("test_batch");
}
