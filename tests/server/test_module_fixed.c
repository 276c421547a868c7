/*
 * test_module_fixed.c - SLUICE.HIT fixed (sluice.so) against the fixed
 * window's script (fixed.lua) on a real redis-server with the module loaded.
 *
 * Two keys are put in the same state (absent; a count with a TTL; at max;
 * "0"; negative; without a TTL; not a number; a number only Lua's tonumber
 * reads; past 2^53; INCRBY's overflow; a list; a hash), then the same
 * request goes to one through the module and to the other through the
 * script: the four figures must be equal (the waits within the few ms
 * between the two calls), and so must what each key holds after (type,
 * value, PTTL). Then random traces on a pair of keys, a third key where
 * module and script take turns, SLUICE.HITMANY against the script with
 * several keys (one named twice, one foreign), NOW leaving the fixed
 * window's clock alone, and a window's end.
 */
#include "module_fixture.h"
#include "rng.h"
#include "test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rs_server server;

/* The waits of two calls a moment apart may differ by this much. */
#define MARGIN_MS 60

/* A key's state before a request: 'value' NULL for no key, "<list>" or
   "<hash>" for another type; 'px' 0 for no TTL. */
typedef struct setup {
    const char *what;
    const char *value;
    long long px;
} setup;

static const setup setups[] = {
    {"no key", NULL, 0},
    {"a count", "2", 50000},
    {"at max", "3", 50000},
    {"past max", "7", 50000},
    {"zero", "0", 50000},
    {"negative", "-2", 50000},
    {"no TTL", "1", 0},
    {"no TTL at max", "3", 0},
    {"not a number", "abc", 50000},
    {"tonumber only", " 1e0 ", 50000},
    {"leading zero", "01", 50000},
    {"hexadecimal", "0x2", 0},
    {"long, tonumber only",
     "                                                                    "
     "                                        1   ", 50000},
    {"past 2^53", "9007199254740993", 50000},
    {"INCRBY overflows", "9223372036854775807", 50000},
    {"a list", "<list>", 0},
    {"a hash", "<hash>", 0},
};

static void put(const char *key, const setup *st)
{
    rs_ok(&server, "DEL %s", key);
    if (st->value == NULL)
        return;
    if (strcmp(st->value, "<list>") == 0)
        CHECK(rs_ok(&server, "RPUSH %s x", key) == 0);
    else if (strcmp(st->value, "<hash>") == 0)
        CHECK(rs_ok(&server, "HSET %s f v", key) == 0);
    else if (st->px > 0)
        CHECK(rs_ok(&server, "SET %s %s PX %lld", key, st->value, st->px) == 0);
    else
        CHECK(rs_ok(&server, "SET %s %s", key, st->value) == 0);
}

/* Two answers to the same request on keys in the same state. */
static void same_answer(const mf_answer *m, const mf_answer *l)
{
    CHECK(!m->error && !l->error);
    if (m->error || l->error)
        fprintf(stderr, "  module: %s / script: %s\n", m->message, l->message);
    CHECK(m->foreign == l->foreign);
    CHECK_EQ_U64(m->fig[0], l->fig[0]);
    CHECK_EQ_U64(m->fig[1], l->fig[1]);
    CHECK(llabs(m->fig[2] - l->fig[2]) <= MARGIN_MS);
    CHECK(llabs(m->fig[3] - l->fig[3]) <= MARGIN_MS);
}

/* Two keys left the same way: type, value, and TTL (or none). */
static void same_state(const char *mkey, const char *lkey)
{
    mf_state m, l;

    CHECK(mf_state_of(&server, mkey, &m) == 0);
    CHECK(mf_state_of(&server, lkey, &l) == 0);
    CHECK(mf_state_same(&m, &l, MARGIN_MS));
    if (!mf_state_same(&m, &l, MARGIN_MS))
        fprintf(stderr, "  module left %s '%s' pttl %lld, script %s '%s' "
                "pttl %lld\n", m.type, m.value, m.pttl, l.type, l.value,
                l.pttl);
}

/* The request on "m:KEY" through the module and on "l:KEY" through the
   script; both answers compared. */
static void both(const char *key, const mf_request *rq)
{
    char mkey[96], lkey[96];
    mf_answer m, l;

    snprintf(mkey, sizeof(mkey), "m:%s", key);
    snprintf(lkey, sizeof(lkey), "l:%s", key);
    CHECK(mf_module_hit(&server, mkey, rq, &m) == 0);
    CHECK(mf_script_hit(&server, lkey, rq, "tok", &l) == 0);
    same_answer(&m, &l);
    same_state(mkey, lkey);
}

static void test_states(void)
{
    static const struct {
        bool peek;
        uint64_t cost;
    } ops[] = {{false, 1}, {false, 2}, {false, 3}, {true, 1}, {true, 3}};
    mf_request rq = {.algo = SLUICE_FIXED, .max = 3, .window_ms = 5000,
                     .now_ms = -1};

    for (size_t i = 0; i < sizeof(setups) / sizeof(setups[0]); i++) {
        for (size_t j = 0; j < sizeof(ops) / sizeof(ops[0]); j++) {
            test_context("%s, %s cost %" PRIu64, setups[i].what,
                         ops[j].peek ? "peek" : "hit", ops[j].cost);
            put("m:k", &setups[i]);
            put("l:k", &setups[i]);
            rq.peek = ops[j].peek;
            rq.cost = ops[j].cost;
            both("k", &rq);
            /* And a second request on what the first left. */
            rq.peek = false;
            rq.cost = 1;
            both("k", &rq);
        }
    }
    test_context(NULL);
}

/*
 * Random traces: "m:t" through the module, "l:t" through the script, the
 * same requests; and "x:t", where the two take turns, must answer as both.
 */
static void test_traces(uint64_t seed)
{
    rng_state = seed;
    for (int trace = 0; trace < 20; trace++) {
        mf_request rq = {.algo = SLUICE_FIXED, .now_ms = -1};

        rq.max = rng_range(1, 6);
        rq.window_ms = 60000;
        rs_ok(&server, "DEL m:t l:t x:t");
        for (int step = 0; step < 30; step++) {
            mf_answer m, l, x;

            test_context("seed %" PRIu64 " trace %d step %d", seed, trace,
                         step);
            rq.cost = rng_range(1, rq.max);
            rq.peek = rng_pct(25);
            CHECK(mf_module_hit(&server, "m:t", &rq, &m) == 0);
            CHECK(mf_script_hit(&server, "l:t", &rq, "tok", &l) == 0);
            if (step % 2 == 0)
                CHECK(mf_module_hit(&server, "x:t", &rq, &x) == 0);
            else
                CHECK(mf_script_hit(&server, "x:t", &rq, "tok", &x) == 0);
            same_answer(&m, &l);
            same_answer(&m, &x);
            same_state("m:t", "l:t");
            same_state("m:t", "x:t");
        }
    }
    test_context(NULL);
}

/* HITMANY: each key in turn, a key named twice sees the first counted, a
   foreign key answers -1 and three 0s, as the script's one call does. */
static void test_hitmany(void)
{
    const char *mkeys[] = {"m:a", "m:b", "m:a", "m:f", "m:a"};
    const char *lkeys[] = {"l:a", "l:b", "l:a", "l:f", "l:a"};
    const uint64_t costs[] = {2, 1, 2, 1, 1};
    mf_request rq = {.algo = SLUICE_FIXED, .max = 4, .window_ms = 9000,
                     .now_ms = -1};
    long long m[20], l[20];
    char msg[200] = "";

    for (int round = 0; round < 3; round++) {
        test_context("hitmany round %d", round);
        if (round == 0) {
            rs_ok(&server, "DEL m:a m:b m:f l:a l:b l:f");
            rs_ok(&server, "RPUSH m:f x");
            rs_ok(&server, "RPUSH l:f x");
        }
        rq.peek = round == 2;
        CHECK(mf_module_hitmany(&server, mkeys, costs, 5, &rq, m, msg,
                                sizeof(msg)) == 0);
        CHECK(mf_script_hitmany(&server, lkeys, costs, 5, &rq, "tok", l, msg,
                                sizeof(msg)) == 0);
        for (int i = 0; i < 20; i++)
            CHECK(i % 4 >= 2 ? llabs(m[i] - l[i]) <= MARGIN_MS : m[i] == l[i]);
        CHECK_EQ_U64(m[12], -1);
        same_state("m:a", "l:a");
        same_state("m:b", "l:b");
        same_state("m:f", "l:f");
    }
    test_context(NULL);
}

/* NOW does not move the fixed window (nor does the script's ARGV[4]). */
static void test_now_ignored(void)
{
    mf_request rq = {.algo = SLUICE_FIXED, .max = 2, .window_ms = 7000,
                     .cost = 1};
    mf_answer a, b;

    rs_ok(&server, "DEL m:n");
    rq.now_ms = 5;
    CHECK(mf_module_hit(&server, "m:n", &rq, &a) == 0);
    rq.now_ms = 99999999999LL;
    CHECK(mf_module_hit(&server, "m:n", &rq, &b) == 0);
    CHECK_EQ_U64(a.fig[1], 1);
    CHECK_EQ_U64(b.fig[1], 0);
    CHECK(b.fig[3] <= 7000 && b.fig[3] > 7000 - MARGIN_MS);
    CHECK(rs_int(&server, "PTTL m:n") > 7000 - MARGIN_MS);
}

/* At the window's end the key is gone and a new window starts, on both. */
static void test_window_end(void)
{
    mf_request rq = {.algo = SLUICE_FIXED, .max = 1, .window_ms = 40,
                     .cost = 1, .now_ms = -1};
    mf_answer m, l;

    rs_ok(&server, "DEL m:w l:w");
    both("w", &rq);
    both("w", &rq);
    rs_sleep_ms(60);
    CHECK(mf_module_hit(&server, "m:w", &rq, &m) == 0);
    CHECK(mf_script_hit(&server, "l:w", &rq, "tok", &l) == 0);
    CHECK(m.fig[0] == 1 && l.fig[0] == 1);
    same_answer(&m, &l);
}

int main(int argc, char **argv)
{
    uint64_t seed = test_seed(argc, argv, 0, test_random_seed());

    if (mf_start(&server, NULL) < 0) {
        fprintf(stderr, "test_module_fixed: cannot start redis-server with "
                        "the module\n");
        return 1;
    }
    printf("test_module_fixed: server %s, seed %" PRIu64 "\n", server.url,
           seed);
    test_states();
    test_traces(seed);
    test_hitmany();
    test_now_ignored();
    test_window_end();
    rs_stop(&server);
    return test_summary("test_module_fixed");
}
