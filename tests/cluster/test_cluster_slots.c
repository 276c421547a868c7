/*
 * test_cluster_slots.c - sluice__key_slot() against the server's own
 * CLUSTER KEYSLOT, and every key sluice builds for an id in that id's slot.
 *
 * The reference is a real redis-server in cluster mode (a node of the
 * cluster of the ctest run, cluster.h), never a second CRC16 of ours:
 * tests/server/test_valkey_keys.c already checks CRC16 vectors against the
 * specification. The test changes no slot and no node. Here every key is
 * sent binary-safe (redisCommandArgv, in pipelined batches) and the
 * server's slot must equal the library's:
 *
 *   - the hashtag rule's corners: the empty key, "{}", "{}{x}", "{{a}}",
 *     "{a}}", "}{x}", an unclosed '{', a tag at the very end, a tag of one
 *     byte, NUL or a high byte inside and outside a tag;
 *   - random keys over a small alphabet rich in braces, so that every shape
 *     of tag comes up many times;
 *   - thousands of random binary keys (any byte, lengths 0 to 80) and a few
 *     long ones.
 *
 * Then hostile ids: for each, the keys sluice builds (one per algorithm,
 * the queue limiter and its meta hash), under the default and other
 * prefixes, must share one slot by the server's reckoning, equal to the
 * library's. Finally a cluster store seeded with that node runs every
 * script (each algorithm's and the queue's) for every hostile id: a key
 * outside its id's hashtag would make the two-key queue read fail with
 * CROSSSLOT.
 *
 * Usage: test_cluster_slots [SEED] (or SLUICE_TEST_SEED=N); the seed is
 * printed.
 */
#include "cluster.h"
#include "rng.h"
#include "test.h"
#include "valkey/valkey.h" /* sluice__key_slot, sluice__key_build */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rc_cluster cluster;
static rs_server *node; /* the node asked: a live master */

/* ---- Keys against CLUSTER KEYSLOT ---------------------------------------- */

typedef struct key_set {
    char **keys;
    size_t *lens;
    size_t n, cap;
} key_set;

static void keys_add(key_set *s, const char *key, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->keys = realloc(s->keys, s->cap * sizeof(*s->keys));
        s->lens = realloc(s->lens, s->cap * sizeof(*s->lens));
        if (s->keys == NULL || s->lens == NULL)
            exit(2);
    }
    if ((s->keys[s->n] = malloc(len + 1)) == NULL)
        exit(2);
    memcpy(s->keys[s->n], key, len);
    s->keys[s->n][len] = '\0';
    s->lens[s->n++] = len;
}

static void keys_free(key_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s->lens);
    memset(s, 0, sizeof(*s));
}

/* A key printed readably for a failure message. */
static void key_show(char *out, size_t cap, const char *key, size_t len)
{
    out[0] = '\0';
    test_append_escaped(out, cap, key, len);
}

/*
 * Asks the server for the slot of every key in 's' (pipelined, 1000 at a
 * time) into 'slots'. Returns the number of keys it answered for.
 */
static size_t server_slots(const key_set *s, int *slots)
{
    const size_t batch = 1000;
    size_t answered = 0;

    for (size_t start = 0; start < s->n; start += batch) {
        redisContext *ctx = rs_conn(node);
        size_t end = start + batch < s->n ? start + batch : s->n;

        if (ctx == NULL)
            return answered;
        for (size_t i = start; i < end; i++) {
            const char *argv[] = {"CLUSTER", "KEYSLOT", s->keys[i]};
            size_t lens[] = {7, 7, s->lens[i]};

            redisAppendCommandArgv(ctx, 3, argv, lens);
        }
        for (size_t i = start; i < end; i++) {
            void *v = NULL;
            redisReply *r;

            if (redisGetReply(ctx, &v) != REDIS_OK)
                return answered;
            r = v;
            slots[i] = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
            answered++;
            freeReplyObject(r);
        }
    }
    return answered;
}

/* Every key's library slot must be the server's. */
static void check_against_server(const char *label, const key_set *s)
{
    int *slots = malloc((s->n ? s->n : 1) * sizeof(int));
    size_t differ = 0;

    if (slots == NULL)
        exit(2);
    test_context("%s: %zu keys against CLUSTER KEYSLOT", label, s->n);
    CHECK_EQ_U64(server_slots(s, slots), s->n);
    for (size_t i = 0; i < s->n; i++) {
        unsigned mine = sluice__key_slot(s->keys[i], s->lens[i]);

        if (!CHECK(slots[i] >= 0 && (unsigned)slots[i] == mine) &&
            differ++ < 10) {
            char shown[400];

            key_show(shown, sizeof(shown), s->keys[i], s->lens[i]);
            fprintf(stderr, "    key \"%s\" (%zu bytes): server %d, "
                    "sluice__key_slot %u\n", shown, s->lens[i], slots[i],
                    mine);
        }
    }
    printf("  %-28s %6zu keys, %zu differ\n", label, s->n, differ);
    free(slots);
    test_context(NULL);
}

#define ADD(s, lit) keys_add((s), lit, sizeof(lit) - 1)

static void test_corners(void)
{
    key_set s = {0};
    char big[20000];

    ADD(&s, "");
    ADD(&s, "{");
    ADD(&s, "}");
    ADD(&s, "{}");
    ADD(&s, "}{");
    ADD(&s, "{}{x}");
    ADD(&s, "{{a}}");
    ADD(&s, "{a}}");
    ADD(&s, "{{}}");
    ADD(&s, "}{x}");
    ADD(&s, "{x");
    ADD(&s, "x}");
    ADD(&s, "x{");
    ADD(&s, "x{}");
    ADD(&s, "{}x");
    ADD(&s, "x{y");
    ADD(&s, "x{y}");
    ADD(&s, "{y}x");
    ADD(&s, "a{b}c{d}");
    ADD(&s, "foo{}{bar}");
    ADD(&s, "foo{{bar}}zap");
    ADD(&s, "foo{bar}{zap}");
    ADD(&s, "{user1000}.following");
    ADD(&s, "{user1000}.followers");
    ADD(&s, "{ }");
    ADD(&s, "{a}");
    ADD(&s, "a");
    ADD(&s, "\0");
    ADD(&s, "\0\0");
    ADD(&s, "a\0b");
    ADD(&s, "{\0}");
    ADD(&s, "{a\0b}c");
    ADD(&s, "a\0b{c}");
    ADD(&s, "{\0");
    ADD(&s, "\0}");
    ADD(&s, "\x80");
    ADD(&s, "\xff");
    ADD(&s, "\xff\xfe\xfd");
    ADD(&s, "{\xff}");
    ADD(&s, "{\xc3\xa9}t\xc3\xa9");
    ADD(&s, "\x7b\x7d\x7b\x7d");
    ADD(&s, "sluice:{user42}:fixed");
    ADD(&s, "sluice:{%}:fixed");
    ADD(&s, "emq:{q}:limiter");
    ADD(&s, "emq:{q}:meta");
    ADD(&s, "123456789");
    /* Long keys: the tag at the start, at the very end, none at all. */
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    keys_add(&s, big, sizeof(big));
    big[0] = '{';
    big[3] = '}';
    keys_add(&s, big, sizeof(big));
    big[0] = 'a';
    big[3] = 'd';
    big[sizeof(big) - 3] = '{';
    big[sizeof(big) - 1] = '}';
    keys_add(&s, big, sizeof(big));
    big[sizeof(big) - 2] = '}'; /* "{}}" at the end: an empty tag */
    keys_add(&s, big, sizeof(big));
    check_against_server("hashtag corners", &s);
    keys_free(&s);
}

static void test_random_keys(void)
{
    static const char alphabet[] = "{}{}ab\0\xff:";
    key_set braces = {0}, binary = {0};
    char key[128];

    /* Small alphabet, many braces: every tag shape, many times. */
    for (int i = 0; i < 6000; i++) {
        size_t len = (size_t)(rng_next() % 12);

        for (size_t j = 0; j < len; j++)
            key[j] = alphabet[rng_next() % (sizeof(alphabet) - 1)];
        keys_add(&braces, key, len);
    }
    check_against_server("random keys, brace-rich", &braces);
    /* Any byte; braces a little more likely than chance. */
    for (int i = 0; i < 10000; i++) {
        size_t len = (size_t)(rng_next() % 81);

        for (size_t j = 0; j < len; j++) {
            uint64_t r = rng_next();

            key[j] = (r & 0xf00) == 0 ? ((r & 1) ? '{' : '}') : (char)r;
        }
        keys_add(&binary, key, len);
    }
    check_against_server("random binary keys", &binary);
    keys_free(&braces);
    keys_free(&binary);
}

/* ---- Hostile ids --------------------------------------------------------- */

typedef struct id {
    char *bytes;
    size_t len;
} id;

static id *ids;
static size_t nids;

/* Adds an id unless it is there already: each id's budget is its own. */
static void id_add(const char *bytes, size_t len)
{
    for (size_t i = 0; i < nids; i++)
        if (ids[i].len == len && memcmp(ids[i].bytes, bytes, len) == 0)
            return;
    ids = realloc(ids, (nids + 1) * sizeof(*ids));
    if (ids == NULL || (ids[nids].bytes = malloc(len + 1)) == NULL)
        exit(2);
    memcpy(ids[nids].bytes, bytes, len);
    ids[nids].len = len;
    nids++;
}

#define ID(lit) id_add(lit, sizeof(lit) - 1)

static void make_ids(void)
{
    char buf[600];

    ID("");
    ID("plain");
    ID("a{b");
    ID("a}b");
    ID("{a}");
    ID("{}");
    ID("}{");
    ID("{}{x}");
    ID("{{a}}");
    ID("%");
    ID("%7B");
    ID("%7D");
    ID("a%7Bb");
    ID(":");
    ID("x:{y}:z");
    ID("sluice:{x}:fixed");
    ID("user42}:fixed");
    ID("\0");
    ID("a\0b");
    ID("{\0}");
    ID("\xff\xfe");
    ID("caf\xc3\xa9");
    ID(" \t\r\n");
    for (size_t i = 0; i < 300; i++)
        buf[i] = i % 2 ? '}' : '{';
    id_add(buf, 300);
    for (size_t i = 0; i < 256; i++)
        buf[i] = (char)i;
    id_add(buf, 256);
    /* Random binary ids, brace-rich. */
    for (int i = 0; i < 400; i++) {
        size_t len = (size_t)(rng_next() % 40);

        for (size_t j = 0; j < len; j++) {
            uint64_t r = rng_next();

            buf[j] = (r & 0x300) == 0 ? ((r & 1) ? '{' : '}') : (char)r;
        }
        id_add(buf, len);
    }
}

static void free_ids(void)
{
    for (size_t i = 0; i < nids; i++)
        free(ids[i].bytes);
    free(ids);
    ids = NULL;
    nids = 0;
}

/* The keys of one id, as the store builds them: one per algorithm (under
   the store's prefix), then the queue's limiter and meta hash (under the
   queue's). */
enum { PER_ID = TEST_ALGO_N + 2 };

static const char *key_suffix(int k)
{
    if (k < TEST_ALGO_N)
        return sluice_algo_name((sluice_algo)k);
    return k == TEST_ALGO_N ? "limiter" : "meta";
}

/* Prints the slots of one id's keys, which should all be one. */
static void print_split(const key_set *s, const int *slots, size_t k)
{
    char shown[400];

    key_show(shown, sizeof(shown), s->keys[k], s->lens[k]);
    fprintf(stderr, "    the keys of id #%zu (\"%s\"...) span slots",
            (k / PER_ID) % nids, shown);
    for (int j = 0; j < PER_ID; j++)
        fprintf(stderr, " %d", slots[k + (size_t)j]);
    fprintf(stderr, "\n");
}

static void test_id_keys_share_a_slot(void)
{
    static const char *const prefixes[][2] = {
        {"sluice", "emq"}, {"a:b", "q:%"}, {"%7B", "x"}, {"s", "e"}};
    key_set s = {0};
    int *slots;
    size_t split = 0;

    for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++)
        for (size_t i = 0; i < nids; i++)
            for (int k = 0; k < PER_ID; k++) {
                char buf[256], *key;
                size_t len;

                key = sluice__key_build(buf, sizeof(buf), &len,
                                        prefixes[p][k < TEST_ALGO_N ? 0 : 1],
                                        ids[i].bytes, ids[i].len,
                                        key_suffix(k));
                if (key == NULL)
                    exit(2);
                keys_add(&s, key, len);
                if (key != buf)
                    free(key);
            }
    check_against_server("keys of hostile ids", &s);
    if ((slots = malloc(s.n * sizeof(int))) == NULL)
        exit(2);
    test_context("one id, one slot");
    CHECK_EQ_U64(server_slots(&s, slots), s.n);
    for (size_t k = 0; k + PER_ID <= s.n; k += PER_ID) {
        int same = 1;

        for (int j = 1; j < PER_ID; j++)
            same &= slots[k + j] == slots[k];
        if (!CHECK(same) && split++ < 5)
            print_split(&s, slots, k);
    }
    printf("  %zu ids x %zu prefixes: %zu split over several slots\n", nids,
           sizeof(prefixes) / sizeof(prefixes[0]), split);
    free(slots);
    keys_free(&s);
    test_context(NULL);
}

/*
 * Every script for every id on a cluster store: the server refuses a
 * script whose keys span slots (CROSSSLOT), and answers MOVED for a key of
 * a slot it does not serve (none here: the store routes by the map it
 * read, and nothing moves meanwhile).
 */
static void test_scripts_on_cluster(void)
{
    sluice_store *st = NULL;
    sluice_store_stats stats;
    char url[160];
    long ok = 0;

    test_context("every script for every hostile id on a cluster store");
    snprintf(url, sizeof(url), "redis+cluster://127.0.0.1:%d?timeout=5000",
             node->port);
    CHECK_OK(sluice_store_open(&st, url, NULL));
    if (st == NULL)
        exit(2);
    CHECK(strcmp(sluice_store_kind(st), "valkey-cluster") == 0);
    for (size_t i = 0; i < nids; i++) {
        sluice_decision d;
        uint64_t count = 0, ttl = 0, wait = 1;
        int all = 1;

        for (int a = 0; a < TEST_ALGO_N; a++) {
            sluice_limit lim = SLUICE_LIMIT((sluice_algo)a, 10, 60000);

            all &= CHECK_OK(sluice_hit(&d, st, &lim, ids[i].bytes, ids[i].len,
                                       1));
            all &= CHECK(d.allowed);
        }
        all &= CHECK_OK(sluice_emq_limiter_incr(&count, &ttl, st, ids[i].bytes,
                                                ids[i].len, 60000));
        all &= CHECK_OK(sluice_emq_rate_limit_ttl(&wait, st, ids[i].bytes,
                                                  ids[i].len, 1));
        all &= CHECK(wait > 0); /* the count 1 has reached the cap 1 */
        ok += all;
    }
    CHECK_OK(sluice_store_stats_get(&stats, st));
    CHECK_EQ_U64(stats.redirects, 0);
    CHECK_EQ_U64(stats.errors, 0);
    printf("  %ld of %zu ids ran every script on the cluster\n", ok, nids);
    sluice_store_free(st);
    test_context(NULL);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());
    uint64_t t0 = rs_mono_ms();

    rng_state = seed;
    printf("test_cluster_slots: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (rc_shared_begin(&cluster, "test_cluster_slots") < 0)
        return 1;
    node = &cluster.nodes[rc_first_live(&cluster, 1)].srv;
    printf("  asking the node on port %d\n", node->port);
    test_corners();
    test_random_keys();
    make_ids();
    test_id_keys_share_a_slot();
    test_scripts_on_cluster();
    free_ids();
    rc_shared_close(&cluster);
    printf("  total %" PRIu64 " ms\n", rs_mono_ms() - t0);
    return test_summary("test_cluster_slots");
}
