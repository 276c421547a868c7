/*
 * test_functions.c - the Functions library (FUNCTION LOAD, src/algo/
 * fn_prelude.lua) on a real redis-server, against the script store and the
 * embedded store.
 *
 * - sluice_functions_load() loads it; FCALL sluice_version answers the
 *   version built in; a second load replaces it; the embedded store and a
 *   user whose ACL lacks FUNCTION get clear errors.
 * - The differential: for every algorithm of SLUICE_ALGO_MAP that runs on
 *   the caller's clock, a seeded random trace of hits, peeks and resets goes
 *   to the embedded store (a virtual clock), the Valkey store (?clock=caller,
 *   prefix "sluice") and FCALL (NOW_MS, keys under prefix "fn"): every
 *   decision must be identical, and so must the two keys on the server
 *   (type, value, PTTL within the real time between the calls); the
 *   sliding log's members (each a running total, no token) compared whole,
 *   with their scores. After each step
 *   both keys lose their TTL (PERSIST), so that the server's real clock
 *   never expires what the virtual one keeps. The fixed window runs on the
 *   server's expiry clock, so it is compared with the script store only,
 *   on a long window.
 * - Mixing: FCALL and sluice_hit() take turns on one key (the server's
 *   clock for both) and spend one budget.
 * - Bad arguments get errors naming the problem; the bounds agree with
 *   sluice_limit_check() for every algorithm, at their edges.
 *
 * Usage: test_functions [SEED] (or SLUICE_TEST_SEED=N); the seed is printed.
 */
#include "algo/model.h" /* which algorithms run on the caller's clock */
#include "compare.h"
#include "rng.h"
#include "server.h"
#include "stores.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* ---- FCALL ----------------------------------------------------------------- */

/*
 * FCALL 'fn' on 'key' with 'argc' arguments: answers the reply (the
 * caller's), or NULL when the connection failed (a failed check).
 */
static redisReply *fcall(const char *fn, const char *key, int argc,
                         const char **args)
{
    const char *argv[12] = {"FCALL", fn, "1", key};
    size_t lens[12] = {5, strlen(fn), 1, strlen(key)};
    redisReply *r;

    for (int i = 0; i < argc; i++) {
        argv[4 + i] = args[i];
        lens[4 + i] = strlen(args[i]);
    }
    r = rs_cmdargv(&server, 4 + argc, argv, lens);
    CHECK(r != NULL);
    return r;
}

/* FCALL sluice_hit / sluice_peek as a decision; 0, or -1 (reported). */
static int fcall_decide(sluice_decision *d, bool consume, const char *key,
                        const sluice_limit *l, uint64_t cost, int64_t now)
{
    char a[6][24];
    const char *args[6] = {sluice_algo_name(l->algo), a[1], a[2], a[3], a[4],
                           a[5]};
    redisReply *r;
    int ok;

    snprintf(a[1], 24, "%" PRIu64, l->max);
    snprintf(a[2], 24, "%" PRIu64, l->window_ms);
    snprintf(a[3], 24, "%" PRIu64, cost);
    snprintf(a[4], 24, "%" PRIu64, l->burst);
    snprintf(a[5], 24, "%" PRId64, now);
    r = fcall(consume ? "sluice_hit" : "sluice_peek", key, now < 0 ? 5 : 6,
              args);
    if (r == NULL)
        return -1;
    ok = r->type == REDIS_REPLY_ARRAY && r->elements == 4;
    for (size_t i = 0; ok && i < 4; i++)
        ok = r->element[i]->type == REDIS_REPLY_INTEGER &&
             r->element[i]->integer >= 0;
    if (!CHECK(ok)) {
        fprintf(stderr, "    FCALL on %s: %s\n", key,
                r->type == REDIS_REPLY_ERROR ? r->str : "not 4 integers");
        freeReplyObject(r);
        return -1;
    }
    d->allowed = (int)r->element[0]->integer;
    d->remaining = (uint64_t)r->element[1]->integer;
    d->retry_after_ms = (uint64_t)r->element[2]->integer;
    d->reset_after_ms = (uint64_t)r->element[3]->integer;
    freeReplyObject(r);
    return 0;
}

/* The error FCALL answers for 'args' (NULL, reported, if none). */
static char *fcall_error(const char *fn, const char *key, int argc,
                         const char **args)
{
    redisReply *r = fcall(fn, key, argc, args);
    char *msg = NULL;

    if (r != NULL && CHECK(r->type == REDIS_REPLY_ERROR))
        msg = strdup(r->str);
    if (r != NULL)
        freeReplyObject(r);
    return msg;
}

#define CHECK_FCALL_ERROR(fn, key, want, ...)                                \
    do {                                                                     \
        const char *args_[] = {__VA_ARGS__};                                 \
        char *msg_ = fcall_error(fn, key, sizeof(args_) / sizeof(*args_),    \
                                 args_);                                     \
        if (!CHECK(msg_ != NULL && strstr(msg_, want) != NULL))              \
            fprintf(stderr, "    wanted '%s' in: %s\n", want,               \
                    msg_ != NULL ? msg_ : "(no error)");                     \
        free(msg_);                                                          \
    } while (0)

/* ---- The keys written ------------------------------------------------------ */

/* Appends the strings of the reply 'r' to 'out' (of 'cap' bytes). */
static void dump_append(char *out, size_t cap, const redisReply *r)
{
    size_t used = strlen(out);

    for (size_t i = 0; i < r->elements && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s ",
                                 r->element[i]->str != NULL
                                     ? r->element[i]->str : "?");
}

/* What 'key' holds, as text: its type and value (a hash's fields sorted). */
static void key_dump(const char *key, char *out, size_t cap)
{
    redisReply *t = rs_cmd(&server, "TYPE %s", key), *r = NULL;

    out[0] = '\0';
    if (t == NULL)
        return;
    snprintf(out, cap, "%s: ", t->str);
    if (strcmp(t->str, "string") == 0) {
        r = rs_cmd(&server, "GET %s", key);
        if (r != NULL)
            snprintf(out + strlen(out), cap - strlen(out), "%s", r->str);
    } else if (strcmp(t->str, "hash") == 0) {
        r = rs_cmd(&server, "EVAL %s 1 %s", "local t = redis.call('HGETALL',"
                   " KEYS[1]) local o = {} for i = 1, #t, 2 do o[#o + 1] = "
                   "t[i] .. '=' .. t[i + 1] end table.sort(o) return o", key);
        if (r != NULL)
            dump_append(out, cap, r);
    } else if (strcmp(t->str, "zset") == 0) {
        /* The sliding log's members hold no token: they are compared
           whole, with their scores. */
        r = rs_cmd(&server, "EVAL %s 1 %s", "local t = redis.call('ZRANGE',"
                   " KEYS[1], 0, -1, 'WITHSCORES') local o = {} for i = 1, "
                   "#t, 2 do o[#o + 1] = t[i + 1] .. '@' .. t[i] end "
                   "return o", key);
        if (r != NULL)
            dump_append(out, cap, r);
    }
    if (r != NULL)
        freeReplyObject(r);
    freeReplyObject(t);
}

/* PTTL of 'key', then PERSIST it (see the top of this file). */
static long long key_life(const char *key)
{
    redisReply *r = rs_cmd(&server, "EVAL %s 1 %s",
                           "local t = redis.call('PTTL', KEYS[1]) if t >= 0 "
                           "then redis.call('PERSIST', KEYS[1]) end return t",
                           key);
    long long t = r != NULL ? r->integer : -3;

    if (r != NULL)
        freeReplyObject(r);
    return t;
}

/* The script store's key 'a' and FCALL's key 'b' must hold the same (and
   the same life, within 'slack_ms'). */
static void check_same_keys(const char *a, const char *b, long long slack_ms,
                            bool persist)
{
    char da[4096], db[4096];
    long long la, lb;

    key_dump(a, da, sizeof(da));
    key_dump(b, db, sizeof(db));
    if (!CHECK(strcmp(da, db) == 0))
        fprintf(stderr, "    %s holds  %s\n    %s holds  %s\n", a, da, b, db);
    if (!persist)
        return;
    la = key_life(a);
    lb = key_life(b);
    if (!CHECK((la < 0) == (lb < 0) && llabs(la - lb) <= slack_ms))
        fprintf(stderr, "    PTTL %s %lld, %s %lld\n", a, la, b, lb);
}

/* ---- The differential ------------------------------------------------------ */

typedef struct trio {
    sluice_vclock *clock;
    sluice_store *mem, *vk;
    uint64_t now;
} trio;

static void trio_open(trio *t, uint64_t start_ms)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    t->clock = test_vclock_opts(&opts, start_ms);
    t->mem = test_store_open("mem://", "", &opts);
    t->vk = test_store_open(server.url, TEST_CALLER_QUERY, &opts);
    t->now = start_ms;
}

static void trio_close(trio *t)
{
    sluice_store_free(t->vk);
    sluice_store_free(t->mem);
    sluice_vclock_free(t->clock);
}

/* The limit of key 'k' of 'algo': one of a few, with a burst of its own
   (0 to max) where the algorithm takes one. */
static sluice_limit limit_for(sluice_algo algo, int k)
{
    static const uint64_t cfg[][2] = {{5, 1000}, {3, 100}, {100, 60000},
                                      {1, 50}, {10, 250}};
    sluice_limit l = SLUICE_LIMIT(algo, cfg[k % 5][0], cfg[k % 5][1]);

    l.burst = 1;
    if (sluice_limit_check(&l) < 0)
        l.burst = 0;
    else
        l.burst = (uint64_t)(k * 3 + 1) % (l.max + 1);
    return l;
}

/* A gap of 0, a little, exactly a window, or many windows. */
static uint64_t gap_for(uint64_t w)
{
    switch (rng_below(6)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return rng_below(w / 3 + 1);
    case 3: return w;
    case 4: return rng_below(w) + 1;
    default: return w * rng_range(2, 5);
    }
}

/* One step on id 'k': a reset, a peek or a hit to the three. */
static void trio_step(trio *t, sluice_algo algo, int k, int step)
{
    sluice_limit l = limit_for(algo, k);
    const char *name = sluice_algo_name(algo);
    char id[16], ka[96], kb[96];
    sluice_decision dm, dv, df;
    unsigned op = (unsigned)rng_below(100);
    uint64_t cost = rng_pct(80) ? 1 : rng_range(1, l.burst ? l.burst : l.max);

    snprintf(id, sizeof(id), "id%d", k);
    test_key_of(ka, sizeof(ka), "sluice", id, strlen(id), name);
    test_key_of(kb, sizeof(kb), "fn", id, strlen(id), name);
    test_context("%s step %d %s at %" PRIu64 ": op %u cost %" PRIu64
                 " max %" PRIu64 " window %" PRIu64 " burst %" PRIu64, name,
                 step, id, t->now, op, cost, l.max, l.window_ms, l.burst);
    if (op < 8) {
        CHECK_RESET(sluice_reset(t->mem, &l, id, strlen(id)));
        CHECK_RESET(sluice_reset(t->vk, &l, id, strlen(id)));
        CHECK(rs_ok(&server, "FCALL sluice_reset 1 %s", kb) == 0);
    } else {
        bool hit = op >= 30;
        int (*call)(sluice_decision *, sluice_store *, const sluice_limit *,
                    const char *, size_t, uint64_t) = hit ? sluice_hit
                                                          : sluice_peek;

        CHECK_OK(call(&dm, t->mem, &l, id, strlen(id), cost));
        CHECK_OK(call(&dv, t->vk, &l, id, strlen(id), cost));
        if (fcall_decide(&df, hit, kb, &l, cost, (int64_t)t->now) == 0) {
            CHECK_SAME(dv, dm);
            CHECK_EQ_U64(df.allowed, dm.allowed);
            CHECK_EQ_U64(df.remaining, dm.remaining);
            CHECK_EQ_U64(df.retry_after_ms, dm.retry_after_ms);
            CHECK_EQ_U64(df.reset_after_ms, dm.reset_after_ms);
        }
    }
    check_same_keys(ka, kb, 50, true);
}

static void test_differential(uint64_t seed)
{
    for (unsigned a = 0; a < sluice_algo_count(); a++) {
        trio t;

        if (sluice__models[a]->server_clock)
            continue;
        rng_state = seed + a;
        trio_open(&t, 1733000000000ULL);
        for (int step = 0; step < 400; step++) {
            int k = (int)rng_below(7);

            t.now += gap_for(limit_for((sluice_algo)a, k).window_ms);
            sluice_vclock_set(t.clock, t.now);
            trio_step(&t, (sluice_algo)a, k, step);
        }
        trio_close(&t);
        test_context(NULL);
        printf("  %s: FCALL == script store == embedded store, keys alike\n",
               sluice_algo_name((sluice_algo)a));
    }
}

/*
 * The algorithms on the server's clock (the fixed window): FCALL against
 * the script store, both on the server's clock, on a window long enough
 * that nothing expires meanwhile; the waits agree within the real time
 * between the calls.
 */
static void test_server_clock(uint64_t seed)
{
    sluice_store *vk = test_store_open(server.url, "refused_cache=off", NULL);

    rng_state = seed;
    for (unsigned a = 0; a < sluice_algo_count(); a++) {
        if (!sluice__models[a]->server_clock)
            continue;
        for (int step = 0; step < 200; step++) {
            int k = (int)rng_below(4);
            sluice_limit l = SLUICE_LIMIT((sluice_algo)a, 3 + 4 * (uint64_t)k,
                                          600000);
            const char *name = sluice_algo_name(l.algo);
            uint64_t cost = rng_pct(70) ? 1 : rng_range(1, l.max);
            unsigned op = (unsigned)rng_below(100);
            char id[16], ka[96], kb[96];
            sluice_decision dv, df;

            snprintf(id, sizeof(id), "id%d", k);
            test_key_of(ka, sizeof(ka), "sluice", id, strlen(id), name);
            test_key_of(kb, sizeof(kb), "fn", id, strlen(id), name);
            test_context("%s step %d %s op %u cost %" PRIu64, name, step, id,
                         op, cost);
            if (op < 5) {
                CHECK_RESET(sluice_reset(vk, &l, id, strlen(id)));
                CHECK(rs_ok(&server, "FCALL sluice_reset 1 %s", kb) == 0);
            } else {
                CHECK_OK((op < 30 ? sluice_peek : sluice_hit)(
                    &dv, vk, &l, id, strlen(id), cost));
                if (fcall_decide(&df, op >= 30, kb, &l, cost, -1) == 0) {
                    CHECK_EQ_U64(df.allowed, dv.allowed);
                    CHECK_EQ_U64(df.remaining, dv.remaining);
                    CHECK(u64_distance(df.retry_after_ms,
                                       dv.retry_after_ms) <= 50);
                    CHECK(u64_distance(df.reset_after_ms,
                                       dv.reset_after_ms) <= 50);
                }
            }
            check_same_keys(ka, kb, 50, false);
        }
        test_context(NULL);
        printf("  %s: FCALL == script store on the server's clock\n",
               sluice_algo_name((sluice_algo)a));
    }
    sluice_store_free(vk);
}

/* FCALL and sluice_hit() take turns on one key: one budget. */
static void test_mixing(void)
{
    sluice_store *vk = test_store_open(server.url, "refused_cache=off", NULL);

    CHECK(rs_ok(&server, "FLUSHALL") == 0);
    for (unsigned a = 0; a < sluice_algo_count(); a++) {
        sluice_limit l = SLUICE_LIMIT((sluice_algo)a, 6, 600000);
        char key[96];

        test_key_of(key, sizeof(key), "sluice", "mix", 3,
                    sluice_algo_name(l.algo));
        for (uint64_t i = 1; i <= 7; i++) {
            sluice_decision d;

            test_context("%s: call %" PRIu64, sluice_algo_name(l.algo), i);
            if (i % 2 == 1)
                CHECK_OK(sluice_hit(&d, vk, &l, "mix", 3, 1));
            else
                CHECK(fcall_decide(&d, true, key, &l, 1, -1) == 0);
            CHECK_EQ_U64(d.allowed, i <= 6);
            CHECK_EQ_U64(d.remaining, i <= 6 ? 6 - i : 0);
        }
        CHECK(rs_ok(&server, "FCALL sluice_reset 1 %s", key) == 0);
        {
            sluice_decision d;

            CHECK_OK(sluice_peek(&d, vk, &l, "mix", 3, 6));
            CHECK_EQ_U64(d.allowed, 1);
        }
    }
    test_context(NULL);
    sluice_store_free(vk);
    printf("  mixing: FCALL and sluice_hit() spend one budget\n");
    {
        /* Without NOW_MS, the clock is the server's TIME, in ms: a sliding
           log's member is scored with it. */
        const char *args[] = {"sliding-log", "5", "60000"};
        redisReply *r = fcall("sluice_hit", "clock", 3, args), *t, *z;

        if (r != NULL)
            freeReplyObject(r);
        t = rs_cmd(&server, "TIME");
        z = rs_cmd(&server, "ZRANGE clock 0 -1 WITHSCORES");
        if (CHECK(t != NULL && z != NULL && z->elements == 2)) {
            long long now = atoll(t->element[0]->str) * 1000 +
                            atoll(t->element[1]->str) / 1000;
            long long at = atoll(z->element[1]->str);

            CHECK(at <= now && now - at < 5000);
        }
        if (t != NULL)
            freeReplyObject(t);
        if (z != NULL)
            freeReplyObject(z);
    }
}

/* ---- Bad arguments, and the bounds ------------------------------------------ */

static void test_bad_arguments(void)
{
    CHECK(rs_ok(&server, "SET foreign x") == 0);
    CHECK_FCALL_ERROR("sluice_hit", "k", "unknown algorithm \"nope\"", "nope",
                      "3", "1000");
    CHECK_FCALL_ERROR("sluice_hit", "k", "max 0 is out of range", "fixed",
                      "0", "1000");
    CHECK_FCALL_ERROR("sluice_peek", "k", "window 0 is out of range",
                      "sliding-log", "3", "0");
    CHECK_FCALL_ERROR("sluice_hit", "k", "cost 4 exceeds max 3", "fixed", "3",
                      "1000", "4");
    CHECK_FCALL_ERROR("sluice_hit", "k", "not 2 arguments", "fixed", "3");
    CHECK_FCALL_ERROR("sluice_hit", "k", "not 7 arguments", "fixed", "3", "1",
                      "1", "0", "0", "0");
    CHECK_FCALL_ERROR("sluice_hit", "k", "max must be a whole number",
                      "fixed", "-3", "1000");
    CHECK_FCALL_ERROR("sluice_hit", "k", "cost must be a whole number",
                      "fixed", "3", "1000", "1.5");
    CHECK_FCALL_ERROR("sluice_hit", "k", "fixed has no burst", "fixed", "3",
                      "1000", "1", "2");
    CHECK_FCALL_ERROR("sluice_hit", "foreign", "WRONGTYPE", "sliding-log", "3",
                      "1000");
    CHECK_FCALL_ERROR("sluice_reset", "k", "takes 1 key", "extra");
    {
        redisReply *r = rs_cmd(&server, "FCALL sluice_hit 2 a b fixed 3 1000");

        CHECK(r != NULL && r->type == REDIS_REPLY_ERROR &&
              strstr(r->str, "takes 1 key") != NULL);
        if (r != NULL)
            freeReplyObject(r);
    }
    printf("  bad arguments: clear errors\n");
}

/*
 * For every algorithm, the library refuses a limit exactly where
 * sluice_limit_check() does: a burst (has_burst, read from NAME.c when it
 * is built), and the algorithm's own bounds (its fn_check.lua beside its C
 * check()), at their edges.
 */
static void test_bounds_agree(void)
{
    static const uint64_t cases[][3] = {
        {10, 1000, 0}, {10, 1000, 3}, {10, 1000, 11},
        {9007199254740991ULL, 1000, 0}, {8796093022208ULL, 1024, 0},
        {8796093022209ULL, 1024, 0}, {1, 1099511627776ULL, 0},
        {1, 1099511627777ULL, 0},
        /* 2^53 / 3 and one more: max x 3 rounds to 2^53 in a double. */
        {3002399751580330ULL, 3, 0}, {3002399751580331ULL, 3, 0},
        {16384, 1000, 0}, {16385, 1000, 0}};

    for (unsigned a = 0; a < sluice_algo_count(); a++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            sluice_limit l = SLUICE_LIMIT((sluice_algo)a, cases[i][0],
                                          cases[i][1]);
            char m[24], w[24], b[24];
            const char *args[] = {sluice_algo_name(l.algo), m, w, "1", b};
            redisReply *r;

            l.burst = cases[i][2];
            snprintf(m, sizeof(m), "%" PRIu64, l.max);
            snprintf(w, sizeof(w), "%" PRIu64, l.window_ms);
            snprintf(b, sizeof(b), "%" PRIu64, l.burst);
            test_context("%s max %s window %s burst %s", args[0], m, w, b);
            r = fcall("sluice_peek", "bounds", 5, args);
            if (r != NULL) {
                CHECK_EQ_U64(r->type == REDIS_REPLY_ERROR,
                             sluice_limit_check(&l) < 0);
                freeReplyObject(r);
            }
            CHECK(rs_ok(&server, "DEL bounds") == 0);
        }
    }
    test_context(NULL);
    printf("  bounds: as sluice_limit_check() for every algorithm\n");
}

/* ---- Loading ---------------------------------------------------------------- */

static void test_load(void)
{
    sluice_store *vk = test_store_open(server.url, "", NULL);
    sluice_store *mem = test_store_open("mem://", "", NULL);
    sluice_store *denied;
    size_t len = 0;
    const char *text = sluice_functions_text(&len);
    redisReply *r;
    size_t servers = 0;

    CHECK(len > 0 && strncmp(text, "#!lua name=sluice\n", 18) == 0);
    CHECK(strlen(text) == len);
    CHECK(strlen(sluice_functions_version()) > 6);

    CHECK_OK(sluice_functions_load(vk, &servers));
    CHECK_EQ_U64(servers, 1);
    CHECK_OK(sluice_functions_load(vk, NULL)); /* REPLACE: again is fine */
    r = rs_cmd(&server, "FCALL sluice_version 0");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING &&
          strcmp(r->str, sluice_functions_version()) == 0);
    if (r != NULL)
        freeReplyObject(r);
    CHECK_RC(sluice_functions_load(mem, NULL), SLUICE_ENOTSUP);
    CHECK(rs_ok(&server, "ACL SETUSER nofn on >pw ~* &* +@all -function") == 0);
    {
        char url[128];

        snprintf(url, sizeof(url), "redis://nofn:pw@127.0.0.1:%d", server.port);
        denied = test_store_open(url, "", NULL);
        CHECK_RC(sluice_functions_load(denied, NULL), SLUICE_EPROTO);
        CHECK(strstr(sluice_last_error(), "ACL") != NULL &&
              strstr(sluice_last_error(), "NOPERM") != NULL);
        sluice_store_free(denied);
    }
    sluice_store_free(mem);
    sluice_store_free(vk);
    printf("  load: loaded, replaced, version %s; refusals named\n",
           sluice_functions_version());
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 10, test_random_seed());

    printf("test_functions: seed %" PRIu64 "\n", seed);
    fflush(stdout);
    if (rs_start(&server, NULL) < 0) {
        fprintf(stderr, "test_functions: cannot start redis-server\n");
        return 1;
    }
    test_load();
    test_bad_arguments();
    test_bounds_agree();
    test_differential(seed);
    test_server_clock(seed);
    test_mixing();
    rs_stop(&server);
    return test_summary("test_functions");
}
