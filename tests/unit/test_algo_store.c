/*
 * test_algo_store.c - how the embedded store keeps each algorithm's state:
 * a peek never counts, and a hit answers what the peek before it said;
 * reset forgets one key and nothing else; algorithms and keys are
 * independent (binary keys, the empty key, keys that differ in their last
 * byte, a 100,000-byte key, copied so the caller's buffer may change);
 * different limits of one algorithm on one key share one budget.
 *
 * On a virtual clock (no test here ever sleeps).
 */
#include "mem_fixture.h"
#include "test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Peek, reset, independence ------------------------------------------- */

static void test_peek_does_not_consume(void)
{
    fixture fx;

    fx_open(&fx, 777);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 3, 100);
        sluice_decision first, p, h;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        first = PEEK(&fx, &l, "p", 1);
        CHECK(first.allowed);
        CHECK_EQ_U64(first.remaining, 2);
        for (int i = 0; i < 100; i++) {
            p = PEEK(&fx, &l, "p", 1 + (uint64_t)i % 3);
            CHECK(p.allowed);
        }
        CHECK_SAME(PEEK(&fx, &l, "p", 1), first);
        /* A hit answers what the peek before it said. */
        for (int i = 0; i < 4; i++) {
            p = PEEK(&fx, &l, "p", 1);
            h = HIT(&fx, &l, "p", 1);
            CHECK_SAME(p, h);
        }
        CHECK(!PEEK(&fx, &l, "p", 1).allowed);
        /* A peek at an unknown key keeps nothing. */
        CHECK_SAME(PEEK(&fx, &l, "never-hit", 2),
                   PEEK(&fx, &l, "never-hit", 2));
    }
    test_context(NULL);
    fx_close(&fx);
}

static void test_reset(void)
{
    fixture fx;
    sluice_store_stats st;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 2, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        CHECK(HIT(&fx, &l, "other", 2).allowed);
        CHECK(!HIT(&fx, &l, "r", 1).allowed);
        /* 1: it removed a count. */
        CHECK_RC(sluice_reset(fx.store, &l, "r", 1), 1);
        CHECK_SAME(PEEK(&fx, &l, "r", 2), fx_fresh(&l, 1000, 2));
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        /* Only that key was forgotten. */
        CHECK(!HIT(&fx, &l, "other", 1).allowed);
        /* Forgetting an unknown key is fine, and so is doing it twice:
           0, nothing was there. */
        CHECK_RC(sluice_reset(fx.store, &l, "unknown", 7), 0);
        CHECK_RC(sluice_reset(fx.store, &l, "r", 1), 1);
        CHECK_RC(sluice_reset(fx.store, &l, "r", 1), 0);
        /* A peek counts nothing, so leaves nothing to remove. */
        CHECK(PEEK(&fx, &l, "r", 1).allowed);
        CHECK_RC(sluice_reset(fx.store, &l, "r", 1), 0);
        CHECK(HIT(&fx, &l, "r", 2).allowed);
        /* The answer does not depend on the max and window given. */
        {
            sluice_limit wide = limit_of((sluice_algo)a, 50, 60000);

            CHECK_RC(sluice_reset(fx.store, &wide, "r", 1), 1);
        }
        CHECK_RC(sluice_reset(fx.store, &l, "other", 5), 1);
        /* A count whose budget is whole again (the key idle, not yet
           swept) is nothing there, as a server's key that expired. */
        CHECK(HIT(&fx, &l, "late", 1).allowed);
        fx_at(&fx, 1000 + 3 * 1000);
        CHECK_RC(sluice_reset(fx.store, &l, "late", 4), 0);
        CHECK(HIT(&fx, &l, "late", 1).allowed);
        fx_at(&fx, 1000 + 3 * 1000 + 1);
        CHECK_RC(sluice_reset(fx.store, &l, "late", 4), 1);
        fx_at(&fx, 1000);
    }
    test_context(NULL);
    /* Nothing is left. */
    CHECK_OK(sluice_store_stats_get(&st, fx.store));
    CHECK_EQ_U64(st.keys, 0);
    fx_close(&fx);
}

static void test_algorithms_independent(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit full = limit_of((sluice_algo)a, 5, 1000);

        test_context("filled %s", sluice_algo_name((sluice_algo)a));
        CHECK(HIT(&fx, &full, "shared", 5).allowed);
        CHECK(!PEEK(&fx, &full, "shared", 1).allowed);
        for (int b = a + 1; b < TEST_ALGO_N; b++) {
            sluice_limit other = limit_of((sluice_algo)b, 5, 1000);

            CHECK_SAME(PEEK(&fx, &other, "shared", 5),
                       fx_fresh(&other, 1000, 5));
        }
    }
    /* Resetting one algorithm's state (the first's) leaves the others'. */
    {
        sluice_limit first = limit_of((sluice_algo)0, 5, 1000);

        CHECK_RC(sluice_reset(fx.store, &first, "shared", 6), 1);
        CHECK(PEEK(&fx, &first, "shared", 5).allowed);
        for (int b = 1; b < TEST_ALGO_N; b++) {
            sluice_limit other = limit_of((sluice_algo)b, 5, 1000);

            CHECK(!PEEK(&fx, &other, "shared", 1).allowed);
        }
    }
    test_context(NULL);
    fx_close(&fx);
}

/*
 * gcra's shared budget is its TAT, a time: 5 units of 10 per 100 ms (10 ms
 * apart) put it 50 ms ahead, which is 2.5 units of 5 per 100 ms (20 ms
 * apart): 2 more fit (70 ms <= 100), not 3 (110 ms; 10 ms to wait).
 */
static void shared_budget_gcra(fixture *fx, const sluice_limit *big,
                               const sluice_limit *small)
{
    EXPECT(HIT(fx, big, "budget", 5), big, 1, 5, 0, 50);
    EXPECT(PEEK(fx, small, "budget", 1), small, 1, 1, 0, 70);
    EXPECT(PEEK(fx, small, "budget", 3), small, 0, 2, 10, 50);
    EXPECT(HIT(fx, small, "budget", 2), small, 1, 0, 0, 90);
    EXPECT(HIT(fx, big, "budget", 2), big, 0, 1, 10, 90);
    EXPECT(HIT(fx, big, "budget", 1), big, 1, 0, 0, 100);
}

/* Different limits of one algorithm on one key share one budget. */
static void test_shared_budget(void)
{
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit big = limit_of((sluice_algo)a, 10, 100);
        sluice_limit small = limit_of((sluice_algo)a, 5, 100);
        sluice_decision d;

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        if (a == SLUICE_GCRA) {
            shared_budget_gcra(&fx, &big, &small);
            continue;
        }
        CHECK(HIT(&fx, &big, "budget", 5).allowed);
        d = PEEK(&fx, &small, "budget", 1);
        CHECK(!d.allowed);
        CHECK_EQ_U64(d.limit, 5);
        CHECK_EQ_U64(d.remaining, 0);
        d = HIT(&fx, &big, "budget", 5);
        CHECK(d.allowed);
        CHECK_EQ_U64(d.remaining, 0);
        CHECK(!HIT(&fx, &small, "budget", 1).allowed);
    }
    test_context(NULL);
    fx_close(&fx);
}

static void test_binary_keys(void)
{
    static const struct {
        const char *bytes;
        size_t len;
    } keys[] = {
        {"", 0},          {"\0", 1},        {"\0\0", 2},     {"a", 1},
        {"a\0", 2},       {"a\0b", 3},      {"a\0c", 3},     {"\0a", 2},
        {"ab", 2},        {"abcdefg", 7},   {"abcdefgh", 8}, {"abcdefgi", 8},
        {"abcdefgh\0", 9}, {"abcdefghi", 9}, {"\xff", 1},     {"\xff\xfe", 2},
    };
    size_t n = sizeof(keys) / sizeof(keys[0]);
    char *longkey;
    fixture fx;

    fx_open(&fx, 1000);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 1, 1000);

        test_context("algo %s", sluice_algo_name((sluice_algo)a));
        /* Each key has a budget of its own: one admission each. */
        for (size_t i = 0; i < n; i++)
            CHECK(HITN(&fx, &l, keys[i].bytes, keys[i].len, 1).allowed);
        for (size_t i = 0; i < n; i++)
            CHECK(!HITN(&fx, &l, keys[i].bytes, keys[i].len, 1).allowed);
        /* The empty key may be given as NULL. */
        CHECK(!HITN(&fx, &l, NULL, 0, 1).allowed);
        CHECK_RC(sluice_reset(fx.store, &l, NULL, 0), 1);
        CHECK(PEEKN(&fx, &l, "", 0, 1).allowed);
        CHECK(HITN(&fx, &l, NULL, 0, 1).allowed);
        /* Resetting "a\0b" leaves "a\0c" and "a". */
        CHECK_RC(sluice_reset(fx.store, &l, "a\0b", 3), 1);
        CHECK(PEEKN(&fx, &l, "a\0b", 3, 1).allowed);
        CHECK(!PEEKN(&fx, &l, "a\0c", 3, 1).allowed);
        CHECK(!PEEKN(&fx, &l, "a", 1, 1).allowed);
    }

    /* Keys of every length up to 40 that differ only in their last byte,
       and a long one; the key is copied, so the caller's buffer may change. */
    longkey = malloc(100000);
    if (longkey == NULL)
        exit(2);
    for (int a = 0; a < TEST_ALGO_N; a++) {
        sluice_limit l = limit_of((sluice_algo)a, 1, 1000);

        test_context("algo %s, generated keys",
                     sluice_algo_name((sluice_algo)a));
        memset(longkey, 'k', 100000);
        for (size_t len = 1; len <= 40; len++) {
            longkey[len - 1] = 'x';
            CHECK(HITN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'y';
            CHECK(HITN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'k';
        }
        for (size_t len = 1; len <= 40; len++) {
            longkey[len - 1] = 'x';
            CHECK(!PEEKN(&fx, &l, longkey, len, 1).allowed);
            longkey[len - 1] = 'k';
        }
        CHECK(HITN(&fx, &l, longkey, 100000, 1).allowed);
        longkey[99999] = 'z';
        CHECK(HITN(&fx, &l, longkey, 100000, 1).allowed);
        CHECK(!HITN(&fx, &l, longkey, 100000, 1).allowed);
        longkey[99999] = 'k';
        CHECK(!HITN(&fx, &l, longkey, 100000, 1).allowed);
    }
    test_context(NULL);
    free(longkey);
    fx_close(&fx);
}


int main(void)
{
    test_peek_does_not_consume();
    test_reset();
    test_algorithms_independent();
    test_shared_budget();
    test_binary_keys();
    return test_summary("test_algo_store");
}
