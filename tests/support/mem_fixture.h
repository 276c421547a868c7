/*
 * mem_fixture.h - an embedded store on a virtual clock, and checks of the
 * decisions it makes: what the unit tests of the algorithms stand on. No
 * test that uses it ever sleeps.
 *
 *   fixture fx;
 *   fx_open(&fx, 1000);                  the clock reads 1000 ms
 *   EXPECT(HIT(&fx, &l, "key", 1), &l, allowed, remaining, retry, reset);
 *   fx_at(&fx, 1100);                    move the clock (back, too)
 *   CHECK_SAME(PEEK(&fx, &l, "key", 1), d);   compare.h
 *   fx_close(&fx);
 */
#ifndef SLUICE_TEST_MEM_FIXTURE_H
#define SLUICE_TEST_MEM_FIXTURE_H

#include "compare.h"
#include "sluice.h"

#include <stddef.h>
#include <stdint.h>

/* A virtual clock and an embedded store that reads it. */
typedef struct fixture {
    sluice_vclock *clock;
    sluice_store *store;
} fixture;

/* Opens 'fx' with the clock at 'start_ms'; a failure ends the program. */
void fx_open(fixture *fx, uint64_t start_ms);
/* The same, with a key cap of 'max_keys' (0: the store's default). */
void fx_open_capped(fixture *fx, uint64_t start_ms, size_t max_keys);
void fx_close(fixture *fx);
/* Sets the clock to 'now_ms'. */
void fx_at(fixture *fx, uint64_t now_ms);

/* A limit of 'max' units per 'window_ms'. */
sluice_limit limit_of(sluice_algo algo, uint64_t max, uint64_t window_ms);

/*
 * Asks the store (a hit when 'consume', else a peek) and checks that the
 * call succeeded, reporting the caller's 'file':'line'. The decision is
 * poisoned first, so a field the store forgets to set shows up, and its
 * reserved slots must come back 0.
 */
sluice_decision fx_decide_at(fixture *fx, const sluice_limit *limit,
                             const char *key, size_t key_len, uint64_t cost,
                             int consume, const char *file, int line);

/* 'key' must be a string literal here (it may hold NUL bytes). */
#define HIT(fx, l, key, cost) \
    fx_decide_at((fx), (l), "" key "", sizeof("" key "") - 1, (cost), 1, \
                 __FILE__, __LINE__)
#define PEEK(fx, l, key, cost) \
    fx_decide_at((fx), (l), "" key "", sizeof("" key "") - 1, (cost), 0, \
                 __FILE__, __LINE__)
#define HITN(fx, l, key, len, cost) \
    fx_decide_at((fx), (l), (key), (len), (cost), 1, __FILE__, __LINE__)
#define PEEKN(fx, l, key, len, cost) \
    fx_decide_at((fx), (l), (key), (len), (cost), 0, __FILE__, __LINE__)

/*
 * What a peek of 'cost' at 'now_ms' answers on a fresh key under 'limit', by
 * the algorithm's reference model (src/algo/FOLDER/model.c): so a test that
 * loops over every algorithm expects each one's own figure, a new one's too.
 */
sluice_decision fx_fresh(const sluice_limit *limit, uint64_t now_ms,
                         uint64_t cost);

/* A check that every field of 'd' has the expected value. */
int expect_at(sluice_decision d, const sluice_limit *limit, int allowed,
              uint64_t remaining, uint64_t retry_ms, uint64_t reset_ms,
              const char *file, int line);
#define EXPECT(d, l, allowed, remaining, retry, reset) \
    expect_at((d), (l), (allowed), (remaining), (retry), (reset), __FILE__, \
              __LINE__)

#endif /* SLUICE_TEST_MEM_FIXTURE_H */
