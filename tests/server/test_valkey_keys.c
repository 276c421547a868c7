/*
 * test_valkey_keys.c - hostile ids on a real redis-server: every id has keys
 * of its own, and all of one id's keys share one cluster slot.
 *
 * An id may hold any bytes: braces that would move the hashtag, ':', spaces,
 * NUL, bytes above 0x7f, nothing at all, or exactly the text another id is
 * escaped to ("a%7Bb" against "a{b"). Only '{', '}' and '%' are escaped,
 * so every other byte reaches the key as it is. For a set of such ids this
 * test
 *
 *   - hits each one with every algorithm and counts with the queue
 *     limiter, then asks the server (EXISTS) for the exact key names that
 *     sluice__key_build() gives, and checks that the server holds exactly
 *     those keys and no others;
 *   - spends each id's whole budget (max 1) and checks that no other id was
 *     touched, so no two ids share a key;
 *   - computes every key's cluster slot with its own CRC16 (XMODEM) and the
 *     cluster specification's hashtag rule, and checks that one id's keys
 *     (one per algorithm, limiter, meta) fall in one slot.
 *
 * The CRC16 here is written from the specification, not taken from the
 * library; it is checked on the specification's vectors and against a
 * server started with cluster support (CLUSTER KEYSLOT).
 */
#include "store/store.h" /* sluice__key_build */
#include "test.h"
#include "server.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* ---- Cluster slots ------------------------------------------------------- */

/* CRC16-XMODEM (polynomial 0x1021, initial value 0), bit by bit. */
static uint16_t crc16_xmodem(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

/*
 * The slot of a key, by the cluster specification: if the key holds a '{'
 * and, after it, a '}' with at least one byte between them, only the bytes
 * between the first '{' and the first '}' after it are hashed; otherwise the
 * whole key is.
 */
static unsigned key_slot(const char *key, size_t n)
{
    const unsigned char *k = (const unsigned char *)key;
    size_t open, close;

    for (open = 0; open < n && k[open] != '{'; open++)
        ;
    if (open < n) {
        for (close = open + 1; close < n && k[close] != '}'; close++)
            ;
        if (close < n && close > open + 1)
            return crc16_xmodem(k + open + 1, close - open - 1) & 16383;
    }
    return crc16_xmodem(k, n) & 16383;
}

static void test_slot_vectors(void)
{
    static const char *const pairs[][2] = {
        {"{user1000}.following", "{user1000}.followers"},
        {"foo{bar}{zap}", "bar"},
        {"foo{{bar}}zap", "{bar"},
        {"foo{}{bar}", "foo{}{bar}"},
        {"{}", "{}"},
        {"a{b}c{d}", "b"},
        {"}{x}", "x"},
    };

    test_context("CRC16 and the hashtag rule");
    CHECK_EQ_U64(crc16_xmodem((const unsigned char *)"123456789", 9), 0x31C3);
    CHECK_EQ_U64(crc16_xmodem((const unsigned char *)"", 0), 0);
    CHECK_EQ_U64(key_slot("123456789", 9), 0x31C3 & 16383);
    /* Slots quoted in the cluster tutorial and the server's tests. */
    CHECK_EQ_U64(key_slot("foo", 3), 12182);
    CHECK_EQ_U64(key_slot("bar", 3), 5061);
    CHECK_EQ_U64(key_slot("hello", 5), 866);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        CHECK_EQ_U64(key_slot(pairs[i][0], strlen(pairs[i][0])),
                     key_slot(pairs[i][1], strlen(pairs[i][1])));
    /* "foo{}{bar}" hashes the whole key, not "bar". */
    CHECK(key_slot("foo{}{bar}", 10) != key_slot("bar", 3));
    test_context(NULL);
}

/*
 * Compares key_slot() with CLUSTER KEYSLOT on a server started with cluster
 * support (it answers KEYSLOT without being part of a cluster).
 */
static void test_slots_against_server(const char *const *keys,
                                      const size_t *lens, size_t n)
{
    static const char *const args[] = {"--cluster-enabled", "yes", NULL};
    rs_server cs;
    int compared = 0;

    test_context("CRC16 against CLUSTER KEYSLOT");
    if (rs_start(&cs, args) < 0) {
        CHECK(!"cannot start a redis-server with cluster support");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"CLUSTER", "KEYSLOT", keys[i]};
        size_t alens[] = {7, 7, lens[i]};
        redisReply *r = rs_cmdargv(&cs, 3, argv, alens);

        if (CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER)) {
            CHECK_EQ_U64(r->integer, key_slot(keys[i], lens[i]));
            compared++;
        }
        if (r != NULL)
            freeReplyObject(r);
    }
    rs_stop(&cs);
    printf("  %d key slots agree with CLUSTER KEYSLOT\n", compared);
    test_context(NULL);
}

/* ---- Hostile ids --------------------------------------------------------- */

typedef struct id {
    const char *bytes;
    size_t len;
} id;

#define ID(lit) {lit, sizeof(lit) - 1}

static char long_braces[300];
static char long_mixed[1000];

static const id ids[] = {
        ID("plain"),
        ID(""),
        ID("a{b"),
        ID("a%7Bb"),
        ID("a%7bb"),
        ID("a}b"),
        ID("a%7Db"),
        ID("{a}"),
        ID("%7Ba%7D"),
        ID("{}"),
        ID("}{"),
        ID("%"),
        ID("%%"),
        ID("%25"),
        ID("a b"),
        ID("a%20b"),
        ID("x:y"),
        ID("x:{y}:z"),
        ID("\0"),
        ID("\0\0"),
        ID("a\0b"),
        ID("a%00b"),
        ID("\xff\xfe"),
        ID("%FF%FE"),
        ID("caf\xc3\xa9"),
        ID("\t\r\n"),
        ID("sluice:{x}:fixed"),
        ID("user42"),
        ID("user42}:fixed"),
        {long_braces, sizeof(long_braces)},
        {long_mixed, sizeof(long_mixed)},
};
#define NIDS (sizeof(ids) / sizeof(ids[0]))

/* Per id, the keys the library builds: one per algorithm (prefix
   "sluice"), then the queue's limiter and meta hash (prefix "emq"). */
enum { LIMITER = TEST_ALGO_N, META, PER_ID };

static char *names[NIDS][PER_ID];
static size_t lens[NIDS][PER_ID];
static const char *flat[NIDS * PER_ID];
static size_t flat_lens[NIDS * PER_ID];

/* The names, built the library's way. */
static void build_names(void)
{
    for (size_t i = 0; i < sizeof(long_braces); i++)
        long_braces[i] = i % 2 ? '}' : '{';
    for (size_t i = 0; i < sizeof(long_mixed); i++)
        long_mixed[i] = (char)(i * 37 + 11);
    for (size_t i = 0; i < NIDS; i++) {
        for (int a = 0; a < PER_ID; a++) {
            const char *prefix = a < TEST_ALGO_N ? "sluice" : "emq";
            const char *suffix = a < TEST_ALGO_N
                                     ? sluice_algo_name((sluice_algo)a)
                                 : a == LIMITER ? "limiter"
                                                : "meta";

            names[i][a] = sluice__key_build(NULL, 0, &lens[i][a], prefix,
                                            ids[i].bytes, ids[i].len, suffix);
            if (names[i][a] == NULL)
                exit(2);
            flat[i * PER_ID + (size_t)a] = names[i][a];
            flat_lens[i * PER_ID + (size_t)a] = lens[i][a];
        }
    }
}

/* Every name is different, and each holds exactly one pair of braces, at
   the hashtag, with a non-empty tag; the escaping, spot-checked; one slot
   per id. */
static void check_names(void)
{
    for (size_t x = 0; x < NIDS * PER_ID; x++) {
        size_t opens = 0, closes = 0;

        for (size_t c = 0; c < flat_lens[x]; c++) {
            opens += flat[x][c] == '{';
            closes += flat[x][c] == '}';
        }
        CHECK(opens == 1 && closes == 1);
        for (size_t y = x + 1; y < NIDS * PER_ID; y++)
            if (flat_lens[x] == flat_lens[y] &&
                memcmp(flat[x], flat[y], flat_lens[x]) == 0) {
                CHECK(!"two keys share a name");
                fprintf(stderr, "    '%.*s'\n", (int)flat_lens[x], flat[x]);
            }
    }
    CHECK(lens[0][0] == strlen("sluice:{plain}:fixed") &&
          memcmp(names[0][0], "sluice:{plain}:fixed", lens[0][0]) == 0);
    CHECK(lens[1][0] == strlen("sluice:{%}:fixed") &&
          memcmp(names[1][0], "sluice:{%}:fixed", lens[1][0]) == 0);
    CHECK(lens[2][0] == strlen("sluice:{a%7Bb}:fixed") &&
          memcmp(names[2][0], "sluice:{a%7Bb}:fixed", lens[2][0]) == 0);
    CHECK(lens[3][0] == strlen("sluice:{a%257Bb}:fixed") &&
          memcmp(names[3][0], "sluice:{a%257Bb}:fixed", lens[3][0]) == 0);
    /* Only '{', '}' and '%' are escaped: every other byte is as it is, so
       a queue's keys are EchoMQ's own. */
    CHECK(lens[14][0] == strlen("sluice:{a b}:fixed") &&
          memcmp(names[14][0], "sluice:{a b}:fixed", lens[14][0]) == 0);
    CHECK(lens[18][META] == sizeof("emq:{\0}:meta") - 1 &&
          memcmp(names[18][META], "emq:{\0}:meta", lens[18][META]) == 0);
    CHECK(lens[24][LIMITER] == strlen("emq:{caf\xc3\xa9}:limiter") &&
          memcmp(names[24][LIMITER], "emq:{caf\xc3\xa9}:limiter",
                 lens[24][LIMITER]) == 0);
    for (size_t i = 0; i < NIDS; i++) {
        unsigned slot = key_slot(names[i][0], lens[i][0]);

        for (int a = 1; a < PER_ID; a++)
            if (!CHECK_EQ_U64(key_slot(names[i][a], lens[i][a]), slot))
                fprintf(stderr, "    id %zu: '%.*s'\n", i, (int)lens[i][a],
                        names[i][a]);
    }
}

/* Spend each id's budget (max 1) on every algorithm, one id at a time;
   after each, every id not yet spent must still be admitted. */
static void spend_budgets(sluice_store *st)
{
    for (size_t i = 0; i < NIDS; i++) {
        for (int a = 0; a < TEST_ALGO_N; a++) {
            sluice_limit lim = SLUICE_LIMIT((sluice_algo)a, 1, 600000);
            sluice_decision d;

            CHECK_OK(sluice_hit(&d, st, &lim, ids[i].bytes, ids[i].len, 1));
            if (!CHECK(d.allowed))
                fprintf(stderr, "    id %zu (%s) was spent already\n", i,
                        sluice_algo_name((sluice_algo)a));
            CHECK_OK(sluice_hit(&d, st, &lim, ids[i].bytes, ids[i].len, 1));
            CHECK(!d.allowed);
            if (i + 1 < NIDS) {
                CHECK_OK(sluice_peek(&d, st, &lim, ids[i + 1].bytes,
                                     ids[i + 1].len, 1));
                CHECK(d.allowed);
            }
        }
        CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, ids[i].bytes,
                                         ids[i].len, 600000));
    }
}

/* The server holds exactly the names built above (the meta hash is not
   written yet). */
static void check_server_keys(void)
{
    for (size_t i = 0; i < NIDS; i++) {
        for (int a = 0; a <= LIMITER; a++) {
            const char *argv[] = {"EXISTS", names[i][a]};
            size_t alens[] = {6, lens[i][a]};
            redisReply *r = rs_cmdargv(&server, 2, argv, alens);

            if (!CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER &&
                       r->integer == 1))
                fprintf(stderr, "    missing key '%.*s'\n", (int)lens[i][a],
                        names[i][a]);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    CHECK_EQ_U64(rs_int(&server, "DBSIZE"), NIDS * (LIMITER + 1));
}

/* The meta key is the one the read consults: a cap of 1 there, with the
   counter at 1, makes the read wait. */
static void check_queue_reads(sluice_store *st)
{
    for (size_t i = 0; i < NIDS; i++) {
        const char *argv[] = {"HSET", names[i][META], "max", "1",
                              "duration", "60000"};
        size_t alens[] = {4, lens[i][META], 3, 1, 8, 5};
        redisReply *r = rs_cmdargv(&server, 6, argv, alens);
        uint64_t wait = 0;

        CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER);
        if (r != NULL)
            freeReplyObject(r);
        CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, ids[i].bytes,
                                           ids[i].len, 0));
        CHECK(wait > 0);
        if (i + 1 < NIDS) {
            CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, ids[i + 1].bytes,
                                               ids[i + 1].len, 0));
            CHECK_EQ_U64(wait, 0);
        }
    }
}

static void test_hostile_ids(void)
{
    sluice_store *st = NULL;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 1, 600000);
    char url[200];

    test_context("hostile ids");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s?timeout=5000", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    build_names();
    check_names();
    spend_budgets(st);
    check_server_keys();
    check_queue_reads(st);
    /* Reset removes exactly its own key, and says it did (1); a second
       finds nothing (0). */
    CHECK_RC(sluice_reset(st, &lim, "a{b", 3), 1);
    CHECK(rs_int(&server, "EXISTS sluice:{a%%7Bb}:fixed") == 0);
    CHECK_RC(sluice_reset(st, &lim, "a{b", 3), 0);
    CHECK(rs_int(&server, "EXISTS sluice:{a%%257Bb}:fixed") == 1);
    CHECK_EQ_U64(rs_int(&server, "DBSIZE"), NIDS * PER_ID - 1);
    test_slots_against_server(flat, flat_lens, NIDS * PER_ID);
    for (size_t i = 0; i < NIDS; i++)
        for (int a = 0; a < PER_ID; a++)
            free(names[i][a]);
    sluice_store_free(st);
    test_context(NULL);
}

/* A prefix of the caller's choice moves the algorithm keys only. */
static void test_prefix(void)
{
    sluice_store *st = NULL;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 5, 60000);
    sluice_decision d;
    char url[200];

    test_context("key prefix");
    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    snprintf(url, sizeof(url), "%s?timeout=5000&prefix=app%%3Arl", server.url);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    CHECK_OK(sluice_hit(&d, st, &lim, "u1", 2, 1));
    CHECK(rs_int(&server, "EXISTS app:rl:{u1}:fixed") == 1);
    CHECK_OK(sluice_emq_limiter_incr(NULL, NULL, st, "u1", 2, 60000));
    CHECK(rs_int(&server, "EXISTS emq:{u1}:limiter") == 1);
    CHECK_EQ_U64(rs_int(&server, "DBSIZE"), 2);
    sluice_store_free(st);
    test_context(NULL);
}

int main(void)
{
    uint64_t t0 = rs_mono_ms();

    test_slot_vectors();
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_valkey_keys: cannot start redis-server\n");
        return 1;
    }
    printf("test_valkey_keys: server %s (pid %d)\n", server.url,
           (int)server.pid);
    test_hostile_ids();
    test_prefix();
    rs_stop(&server);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_valkey_keys");
}
