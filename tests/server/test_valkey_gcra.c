/*
 * test_valkey_gcra.c - what gcra.lua writes on a real redis-server, and
 * what it makes of values written by hand.
 *
 *   - the key holds the TAT in ms, as an integer string when it is whole
 *     ("1700000010000", which the server keeps as an integer) and with
 *     ':' and its remainder in 1/max ms otherwise ("1700000033333:1"),
 *     and expires (PX) when the bucket is full again: PTTL = reset_after_ms;
 *   - a TAT past 2^53 (a clock near 2^53 plus a window) is written exactly,
 *     digit for digit, as the C code's;
 *   - a TAT written by hand is taken as it is (a remainder >= max as one
 *     more whole ms); anything else ("hello", "12:ab", 17 digits) is a
 *     foreign value: SLUICE_EPROTO naming what the key should hold, and the
 *     key is left alone.
 *
 * On the caller's clock (a virtual one), so every figure is exact.
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

#define T0 ((uint64_t)1700000000000ULL)

/* gcra's key for 'id'. */
static void gcra_key(char *buf, size_t cap, const char *id)
{
    test_key_of(buf, cap, "sluice", id, strlen(id),
                sluice_algo_name(SLUICE_GCRA));
}

/* CHECKs that 'key' holds the string 'want'. */
static void check_value(const char *key, const char *want)
{
    redisReply *r = rs_cmd(&server, "GET %s", key);

    if (!CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
               strcmp(r->str, want) == 0))
        fprintf(stderr, "    %s holds '%s', expected '%s'\n", key,
                r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "?",
                want);
    if (r != NULL)
        freeReplyObject(r);
}

/* CHECKs that 'key' is kept as 'want' (OBJECT ENCODING). */
static void check_encoding(const char *key, const char *want)
{
    redisReply *r = rs_cmd(&server, "OBJECT ENCODING %s", key);

    CHECK(r != NULL &&
          (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
          strcmp(r->str, want) == 0);
    if (r != NULL)
        freeReplyObject(r);
}

static sluice_store *caller_clock_store(sluice_vclock **clock, uint64_t at)
{
    return test_caller_store(clock, server.url, at);
}

/*
 * 10 per 100 s: T = 10 s, TAT T0 + 10000, a whole ms: an integer. 3 per
 * 100 s: T = 33333 1/3 ms: TAT T0 + 33333 and 1/3, then + 66666 and 2/3,
 * then T0 + 100000 again whole.
 */
static void test_values(void)
{
    sluice_limit ten = SLUICE_LIMIT(SLUICE_GCRA, 10, 100000);
    sluice_limit three = SLUICE_LIMIT(SLUICE_GCRA, 3, 100000);
    sluice_vclock *clock;
    sluice_store *st = caller_clock_store(&clock, T0);
    sluice_decision d;
    char key[64], want[64];
    long long pttl;

    test_context("gcra: the values it writes");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    gcra_key(key, sizeof(key), "ten");
    CHECK_OK(sluice_hit(&d, st, &ten, "ten", 3, 1));
    CHECK(d.allowed && d.reset_after_ms == 10000);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 9000 && pttl <= 10000);
    snprintf(want, sizeof(want), "%" PRIu64, T0 + 10000);
    check_value(key, want);
    check_encoding(key, "int");
    gcra_key(key, sizeof(key), "three");
    CHECK_OK(sluice_hit(&d, st, &three, "three", 5, 1));
    CHECK(d.allowed && d.remaining == 2 && d.reset_after_ms == 33334);
    snprintf(want, sizeof(want), "%" PRIu64 ":1", T0 + 33333);
    check_value(key, want);
    check_encoding(key, "embstr");
    CHECK_OK(sluice_hit(&d, st, &three, "three", 5, 1));
    snprintf(want, sizeof(want), "%" PRIu64 ":2", T0 + 66666);
    check_value(key, want);
    CHECK_OK(sluice_hit(&d, st, &three, "three", 5, 1));
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 100000);
    snprintf(want, sizeof(want), "%" PRIu64, T0 + 100000);
    check_value(key, want);
    pttl = rs_int(&server, "PTTL %s", key);
    CHECK(pttl > 99000 && pttl <= 100000);
    /* A peek writes nothing. */
    CHECK_OK(sluice_peek(&d, st, &three, "three", 5, 1));
    CHECK(!d.allowed && d.retry_after_ms == 33334);
    check_value(key, want);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/*
 * At 2^53 - 10 ms, 3 per 100 s: TAT 2^53 - 10 + 33333 1/3 =
 * 9007199254774315 and 1/3, past a double's exact integers, written as C
 * computes it. 1 ms later the debt is 33332 1/3 ms: a unit fits, TAT
 * 9007199254807648 and 2/3 (1 left, reset 66666); another, TAT
 * 9007199254840982 (0 left, reset 99999); the next waits 33333.
 */
static void test_past_2_53(void)
{
    sluice_limit three = SLUICE_LIMIT(SLUICE_GCRA, 3, 100000);
    sluice_vclock *clock;
    sluice_store *st = caller_clock_store(&clock, SLUICE_NOW_MAX_MS - 10);
    sluice_decision d;
    char key[64];

    test_context("gcra: a TAT past 2^53");
    gcra_key(key, sizeof(key), "top");
    CHECK_OK(sluice_hit(&d, st, &three, "top", 3, 1));
    check_value(key, "9007199254774315:1");
    sluice_vclock_advance(clock, 1);
    CHECK_OK(sluice_hit(&d, st, &three, "top", 3, 1));
    check_value(key, "9007199254807648:2");
    CHECK(d.allowed && d.remaining == 1 && d.reset_after_ms == 66666);
    CHECK_OK(sluice_hit(&d, st, &three, "top", 3, 1));
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 99999);
    check_value(key, "9007199254840982");
    CHECK_OK(sluice_hit(&d, st, &three, "top", 3, 1));
    CHECK(!d.allowed && d.retry_after_ms == 33333);
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

/* A value that is not gcra's: refused with its name, and left alone. */
static void check_foreign(sluice_store *st, const char *value)
{
    sluice_limit lim = SLUICE_LIMIT(SLUICE_GCRA, 3, 100000);
    sluice_decision d;
    char key[64];

    gcra_key(key, sizeof(key), "f");
    CHECK(rs_ok(&server, "SET %s %s", key, value) == 0);
    CHECK_RC(sluice_hit(&d, st, &lim, "f", 1, 1), SLUICE_EPROTO);
    CHECK(strstr(sluice_last_error(), "does not hold a string: the TAT") !=
          NULL);
    check_value(key, value);
}

/*
 * Values written by hand: a TAT 5 s ahead at 10 per 100 s owes half a unit,
 * so one more leaves 8 and a reset of 15000; a remainder of 5 under max 3
 * is one more ms (TAT T0 + 1001, a unit more: reset 1001 + 33333 1/3); a
 * TAT in the past is a full bucket.
 */
static void test_by_hand(void)
{
    sluice_limit ten = SLUICE_LIMIT(SLUICE_GCRA, 10, 100000);
    sluice_limit three = SLUICE_LIMIT(SLUICE_GCRA, 3, 100000);
    sluice_vclock *clock;
    sluice_store *st = caller_clock_store(&clock, T0);
    sluice_decision d;
    char key[64];

    test_context("gcra: values written by hand");
    gcra_key(key, sizeof(key), "h");
    CHECK(rs_ok(&server, "SET %s %" PRIu64, key, T0 + 5000) == 0);
    CHECK_OK(sluice_peek(&d, st, &ten, "h", 1, 1));
    CHECK(d.allowed && d.remaining == 8 && d.reset_after_ms == 15000);
    CHECK_OK(sluice_hit(&d, st, &ten, "h", 1, 1));
    CHECK(d.allowed && d.remaining == 8 && d.reset_after_ms == 15000);
    CHECK(rs_ok(&server, "SET %s %" PRIu64 ":5", key, T0 + 1000) == 0);
    CHECK_OK(sluice_peek(&d, st, &three, "h", 1, 1));
    CHECK(d.allowed && d.reset_after_ms == 1001 + 33334);
    CHECK(rs_ok(&server, "SET %s 12:2", key) == 0);
    CHECK_OK(sluice_peek(&d, st, &three, "h", 1, 3));
    CHECK(d.allowed && d.remaining == 0 && d.reset_after_ms == 100000);
    check_foreign(st, "hello");
    check_foreign(st, "12:ab");
    check_foreign(st, "12:");
    check_foreign(st, ":3");
    check_foreign(st, "1:2:3");
    check_foreign(st, "-5");
    check_foreign(st, "12345678901234567");
    sluice_store_free(st);
    sluice_vclock_free(clock);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_gcra: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_gcra: server %s (pid %d)\n", server.url,
           (int)server.pid);
    test_values();
    test_past_2_53();
    test_by_hand();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_gcra");
}
