/*
 * test_valkey_fixed.c - the fixed window on a real redis-server, whose
 * clock is the server's expiry clock whatever clock the store was given:
 * it is checked with short real windows (the only sleeps of its kind).
 *
 * The first hit arms PTTL = window, later hits never move it, a refusal's
 * retry_after_ms is the PTTL, after expiry a fresh window starts, 2 x max -
 * 1 are admitted across the seam in a short span, the very millisecond of
 * expiry is never a refusal with a wait of 0, a counter left without a TTL
 * gets one, and a key holding something that is not a counter (or another
 * algorithm's key holding a string) answers SLUICE_EPROTO. All of it
 * twice: by the script (engine=lua) and by the native module
 * (engine=module, loaded into the server), which must behave alike.
 */
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* The engine of this pass: "lua", then "module". */
static const char *engine = "lua";

/* 'base' (a URL query) with this pass's engine. */
static const char *engine_query(const char *base)
{
    static char query[160];

    snprintf(query, sizeof(query), "%s%sengine=%s", base,
             base[0] != '\0' ? "&" : "", engine);
    return query;
}

/* The fixed counter's key for 'id'. */
static void fixed_key(char *buf, size_t cap, const char *id)
{
    test_key_of(buf, cap, "sluice", id, strlen(id),
                sluice_algo_name(SLUICE_FIXED));
}

/* Waits until 'key' is gone (its window expired), up to 'limit_ms'. */
static int wait_gone(const char *key, uint64_t limit_ms)
{
    uint64_t deadline = rs_mono_ms() + limit_ms;

    while (rs_mono_ms() < deadline) {
        if (rs_int(&server, "EXISTS %s", key) == 0)
            return 1;
        rs_sleep_ms(5);
    }
    return 0;
}

/* Runs a hit and, right after it, reads PTTL; 'took' is the span in ms. */
static int hit_then_pttl(sluice_decision *d, sluice_store *st,
                         const sluice_limit *lim, const char *id,
                         const char *key, long long *pttl, uint64_t *took)
{
    uint64_t t0 = rs_mono_us();
    int rc = sluice_hit(d, st, lim, id, strlen(id), 1);

    *pttl = rs_int(&server, "PTTL %s", key);
    *took = (rs_mono_us() - t0) / 1000 + 1;
    return rc;
}

/* A store on the server whose caller's clock never moves, at 5: the
   fixed window must not care. */
static sluice_store *still_clock_store(sluice_vclock **clock)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    *clock = test_vclock_opts(&opts, 5);
    return test_store_open(server.url, engine_query(TEST_CALLER_QUERY),
                           &opts);
}

/* Three hits of a max of 3: the first arms the window (PTTL = window, as
   the reply says), the later ones never move it. */
static void fixed_fill(sluice_store *st, const sluice_limit *lim,
                       const char *key)
{
    const uint64_t W = lim->window_ms;
    sluice_decision d;
    long long pttl, prev;
    uint64_t took;

    CHECK_OK(hit_then_pttl(&d, st, lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.retry_after_ms, 0);
    CHECK_EQ_U64(d.reset_after_ms, W);
    CHECK(pttl > 0 && (uint64_t)pttl <= W && W - (uint64_t)pttl <= took);
    prev = pttl;
    /* Later hits never move it: the PTTL only goes down. */
    rs_sleep_ms(40);
    CHECK_OK(hit_then_pttl(&d, st, lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 1);
    CHECK(pttl > 0 && pttl < prev);
    CHECK(d.reset_after_ms >= (uint64_t)pttl &&
          d.reset_after_ms - (uint64_t)pttl <= took);
    prev = pttl;
    rs_sleep_ms(20);
    CHECK_OK(hit_then_pttl(&d, st, lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 0);
    CHECK(pttl > 0 && pttl < prev);
}

/* Refused: the wait is the PTTL, and a refusal changes nothing; a peek
   says the same and arms nothing. */
static void fixed_refuse(sluice_store *st, const sluice_limit *lim,
                         const char *key)
{
    sluice_decision d;
    long long pttl;
    uint64_t took;
    redisReply *r;

    CHECK_OK(hit_then_pttl(&d, st, lim, "fx", key, &pttl, &took));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.remaining, 0);
    CHECK(pttl > 0 && d.retry_after_ms >= (uint64_t)pttl &&
          d.retry_after_ms - (uint64_t)pttl <= took);
    CHECK_EQ_U64(d.retry_after_ms, d.reset_after_ms);
    CHECK(d.retry_after_ms <= lim->window_ms);
    r = rs_cmd(&server, "GET %s", key);
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
          strcmp(r->str, "3") == 0);
    if (r != NULL)
        freeReplyObject(r);
    CHECK_OK(sluice_peek(&d, st, lim, "fx", 2, 1));
    CHECK(!d.allowed);
}

/* A peek on a fresh key creates nothing; a cost above 1 counts as that
   many units. */
static void fixed_fresh_and_costs(sluice_store *st, const sluice_limit *lim)
{
    sluice_limit l10 = SLUICE_LIMIT(SLUICE_FIXED, 10, 5000);
    sluice_decision d;
    char k2[128];

    CHECK_OK(sluice_peek(&d, st, lim, "fx-none", 7, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.reset_after_ms, lim->window_ms);
    fixed_key(k2, sizeof(k2), "fx-none");
    CHECK(rs_int(&server, "EXISTS %s", k2) == 0);
    CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 7));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 3);
    CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 4));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.remaining, 3);
    CHECK_OK(sluice_hit(&d, st, &l10, "fx-cost", 7, 3));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 0);
}

static void test_fixed_server_clock(void)
{
    const uint64_t W = 300;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 3, W);
    sluice_vclock *clock;
    sluice_store *st;
    sluice_decision d;
    char key[128];
    long long pttl;
    uint64_t took;

    test_context("fixed window on the server's clock, engine=%s", engine);
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    st = still_clock_store(&clock);
    fixed_key(key, sizeof(key), "fx");
    fixed_fill(st, &lim, key);
    fixed_refuse(st, &lim, key);
    /* After expiry: a fresh window, armed again by its first hit. */
    CHECK(wait_gone(key, 5 * W));
    CHECK_OK(hit_then_pttl(&d, st, &lim, "fx", key, &pttl, &took));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.reset_after_ms, W);
    CHECK(pttl > 0 && W - (uint64_t)pttl <= took);
    fixed_fresh_and_costs(st, &lim);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * The seam: one hit arms a window; near its end max - 1 more are admitted;
 * right after it expires max more are. 2 x max - 1 admitted in a span much
 * shorter than a window, while each window held max.
 */
static void test_fixed_seam(void)
{
    const uint64_t W = 300, MAX = 5;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, MAX, W);
    sluice_store *st;
    sluice_decision d;
    char key[128];
    long long pttl;
    uint64_t burst_start, burst_end, deadline;
    int admitted = 0;

    test_context("fixed window: the seam, engine=%s", engine);
    st = test_store_open(server.url, engine_query("timeout=5000"), NULL);
    fixed_key(key, sizeof(key), "seam");
    CHECK(rs_ok(&server, "DEL %s", key) == 0);

    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    CHECK(d.allowed);
    /* Wait for the last 60 ms of the window. */
    deadline = rs_mono_ms() + 5 * W;
    while ((pttl = rs_int(&server, "PTTL %s", key)) > 60 &&
           rs_mono_ms() < deadline)
        rs_sleep_ms(5);
    burst_start = rs_mono_ms();
    for (uint64_t i = 0; i < MAX - 1; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
        admitted += d.allowed;
    }
    /* The window's last moment: the one after max is refused, unless the
       machine was so slow that the window already rolled. */
    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    if (d.allowed) {
        printf("  seam: the window rolled during the burst (slow machine); "
               "skipped the exact count\n");
        sluice_store_free(st);
        test_context(NULL);
        return;
    }
    CHECK(wait_gone(key, 5 * W));
    for (uint64_t i = 0; i < MAX; i++) {
        CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
        admitted += d.allowed;
    }
    burst_end = rs_mono_ms();
    CHECK_EQ_U64(admitted, 2 * MAX - 1);
    CHECK_OK(sluice_hit(&d, st, &lim, "seam", 4, 1));
    CHECK(!d.allowed);
    printf("  seam: %d admitted in %" PRIu64 " ms across the seam (window "
           "%" PRIu64 " ms, max %" PRIu64 ")\n",
           admitted, burst_end - burst_start, W, MAX);
    sluice_store_free(st);
    test_context(NULL);
}

/*
 * The instant of expiry. The server deletes a key once its clock has passed
 * the expiry time; during that very millisecond the key is still there and
 * PTTL answers 0. The C reference (src/algo/fixed/fixed.c) counts the
 * window as over from expires_ms on (now >= expires_ms), so a request then
 * is admitted in a fresh window. Whatever the script does then, it must
 * not refuse with retry_after_ms 0: a refusal promises a wait of at least
 * 1 ms. Peeks are sent back to back through the last milliseconds of a
 * full window, so that millisecond is sampled many times over.
 */
static void test_fixed_expiry_instant(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 4, 200);
    sluice_store *st = NULL;
    sluice_decision d;
    char key[128];
    long refused = 0, refused_now = 0, calls = 0;
    uint64_t deadline;

    test_context("fixed window: the millisecond of expiry, engine=%s",
                 engine);
    st = test_store_open(server.url, engine_query("timeout=5000"), NULL);
    fixed_key(key, sizeof(key), "instant");
    for (int round = 0; round < 3; round++) {
        CHECK(rs_ok(&server, "SET %s 4 PX 120", key) == 0);
        deadline = rs_mono_ms() + 3000;
        while (rs_int(&server, "PTTL %s", key) > 15 && rs_mono_ms() < deadline)
            rs_sleep_ms(3);
        for (;;) {
            int rc = sluice_peek(&d, st, &lim, "instant", 7, 1);

            calls++;
            if (!CHECK_OK(rc) || d.allowed || rs_mono_ms() > deadline)
                break;
            refused++;
            if (d.retry_after_ms == 0)
                refused_now++;
        }
        CHECK(d.allowed);
    }
    if (!CHECK_EQ_U64(refused_now, 0))
        fprintf(stderr, "    %ld of %ld refusals said retry_after_ms 0 "
                "(the key's PTTL was 0)\n", refused_now, refused);
    printf("  expiry instant: %ld peeks, %ld refused, %ld with a wait of 0\n",
           calls, refused, refused_now);
    sluice_store_free(st);
    test_context(NULL);
}

/* A counter without a TTL gets one on the next call, admitted or not,
   even on a peek (otherwise the key would block forever). */
static void fixed_without_ttl(sluice_store *st, const sluice_limit *lim)
{
    sluice_decision d;
    char key[128];
    long long pttl;

    fixed_key(key, sizeof(key), "nottl");
    CHECK(rs_ok(&server, "SET %s 2", key) == 0);
    CHECK(rs_int(&server, "PTTL %s", key) == -1);
    CHECK_OK(sluice_hit(&d, st, lim, "nottl", 5, 1));
    CHECK(d.allowed);
    CHECK_EQ_U64(d.remaining, 2);
    CHECK_EQ_U64(d.reset_after_ms, 4000);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);

    fixed_key(key, sizeof(key), "nottl-full");
    CHECK(rs_ok(&server, "SET %s 5", key) == 0);
    CHECK_OK(sluice_hit(&d, st, lim, "nottl-full", 10, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(d.retry_after_ms, 4000);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);

    /* Even a peek repairs it: otherwise the key would block forever. */
    fixed_key(key, sizeof(key), "nottl-peek");
    CHECK(rs_ok(&server, "SET %s 5", key) == 0);
    CHECK_OK(sluice_peek(&d, st, lim, "nottl-peek", 10, 1));
    CHECK(!d.allowed);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 3000 && pttl <= 4000);
}

/* Not a number, or the wrong type: a protocol error, never a crash or a
   decision; and another algorithm's key holding a string, too. */
static void fixed_not_a_counter(sluice_store *st, const sluice_limit *lim)
{
    sluice_decision d;
    char key[128];
    redisReply *r;

    fixed_key(key, sizeof(key), "junk");
    CHECK(rs_ok(&server, "SET %s abc", key) == 0);
    memset(&d, 0x5a, sizeof(d));
    CHECK_RC(sluice_hit(&d, st, lim, "junk", 4, 1), SLUICE_EPROTO);
    CHECK(d.allowed == 0);
    CHECK(strstr(sluice_last_error(), "number") != NULL);
    CHECK_RC(sluice_peek(&d, st, lim, "junk", 4, 1), SLUICE_EPROTO);
    r = rs_cmd(&server, "GET %s", key);
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
          strcmp(r->str, "abc") == 0);
    if (r != NULL)
        freeReplyObject(r);
    /* A fractional count is not a counter either: INCRBY refuses it. */
    fixed_key(key, sizeof(key), "frac");
    CHECK(rs_ok(&server, "SET %s 1.5", key) == 0);
    CHECK_RC(sluice_hit(&d, st, lim, "frac", 4, 1), SLUICE_EPROTO);
    /* The wrong type: a hash where a counter should be, and so on. */
    fixed_key(key, sizeof(key), "hash");
    CHECK(rs_ok(&server, "HSET %s a 1", key) == 0);
    CHECK_RC(sluice_hit(&d, st, lim, "hash", 4, 1), SLUICE_EPROTO);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit other = SLUICE_LIMIT((sluice_algo)a, 5, 4000);

        if (a == SLUICE_FIXED)
            continue; /* its string is a number: above */
        if (strcmp(engine, "module") == 0 &&
            !test_module_glue(&server, (sluice_algo)a))
            continue; /* engine=module refuses it (SLUICE_ENOTSUP) */
        test_key_of(key, sizeof(key), "sluice", "str", 3,
                    sluice_algo_name((sluice_algo)a));
        CHECK(rs_ok(&server, "SET %s x", key) == 0);
        CHECK_RC(sluice_hit(&d, st, &other, "str", 3, 1), SLUICE_EPROTO);
    }
}

/* Keys the script did not write: no TTL, or not a counter at all. */
static void test_fixed_foreign_values(void)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 4000);
    sluice_store *st;
    sluice_decision d;

    test_context("fixed window: values written by hand, engine=%s",
                 engine);
    st = test_store_open(server.url, engine_query("timeout=5000"), NULL);
    fixed_without_ttl(st, &lim);
    fixed_not_a_counter(st, &lim);
    /* The store is still fine afterwards. */
    CHECK_OK(sluice_hit(&d, st, &lim, "after", 5, 1));
    CHECK(d.allowed);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rs_start(&server, rs_module_args()) < 0) {
        fprintf(stderr, "test_valkey_fixed: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_fixed: server %s (pid %d)\n", server.url,
           (int)server.pid);
    for (int e = 0; e < 2; e++) {
        engine = e == 0 ? "lua" : "module";
        if (e == 1 && rs_module_path() == NULL) {
            printf("  NOTE: this build made no module: engine=module is not "
                   "tested\n");
            break;
        }
        printf("  engine=%s\n", engine);
        test_fixed_server_clock();
        test_fixed_seam();
        test_fixed_expiry_instant();
        test_fixed_foreign_values();
    }
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_fixed");
}
