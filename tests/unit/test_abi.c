/*
 * test_abi.c - how sluice_limit and sluice_decision grow (sluice.h): their
 * layout is pinned, a limit's reserved slots must be 0, and a decision's
 * come back 0, on the embedded store.
 *
 *   - on LP64 ABIs, sluice_limit and sluice_decision are 64 bytes each and
 *     sluice_request 96, with every field at the offset it has had: a field
 *     added anywhere but in a reserved slot fails here;
 *   - SLUICE_LIMIT() and "= {0}" zero the reserved slots;
 *   - a limit with any reserved slot set is SLUICE_EINVAL, naming the slot,
 *     for sluice_limit_check(), hit, peek, reset, hit_many, hit_all,
 *     peek_all and reset_all, and nothing is counted;
 *   - every call that answers a decision writes 0 into its reserved slots
 *     (the decisions are filled with junk first); so does a failed call
 *     into the decision it zeroes ('out', each request's).
 * The server stores' decisions: tests/server/test_valkey_abi.c.
 */
#include "mem_fixture.h"
#include "test.h"

#include <stddef.h>
#include <string.h>

#define NRESERVED(s) (sizeof((s).reserved) / sizeof((s).reserved[0]))

static void test_layout(void)
{
    if (sizeof(void *) != 8) {
        printf("test_abi: not LP64, the layout is not pinned here\n");
        return;
    }
    CHECK_EQ_U64(sizeof(sluice_limit), 64);
    CHECK_EQ_U64(offsetof(sluice_limit, algo), 0);
    CHECK_EQ_U64(offsetof(sluice_limit, max), 8);
    CHECK_EQ_U64(offsetof(sluice_limit, window_ms), 16);
    CHECK_EQ_U64(offsetof(sluice_limit, burst), 24);
    CHECK_EQ_U64(offsetof(sluice_limit, reserved), 32);

    CHECK_EQ_U64(sizeof(sluice_decision), 64);
    CHECK_EQ_U64(offsetof(sluice_decision, allowed), 0);
    CHECK_EQ_U64(offsetof(sluice_decision, limit), 8);
    CHECK_EQ_U64(offsetof(sluice_decision, remaining), 16);
    CHECK_EQ_U64(offsetof(sluice_decision, retry_after_ms), 24);
    CHECK_EQ_U64(offsetof(sluice_decision, reset_after_ms), 32);
    CHECK_EQ_U64(offsetof(sluice_decision, fallback), 40);
    CHECK_EQ_U64(offsetof(sluice_decision, reserved), 48);

    CHECK_EQ_U64(sizeof(sluice_request), 96);
    CHECK_EQ_U64(offsetof(sluice_request, decision), 32);
}

static void test_zeroed_by_initialisers(void)
{
    sluice_limit a = SLUICE_LIMIT(SLUICE_GCRA, 10, 1000);
    sluice_limit b = {0};

    for (size_t i = 0; i < NRESERVED(a); i++)
        CHECK(a.reserved[i] == 0 && b.reserved[i] == 0);
    CHECK_OK(sluice_limit_check(&a));
}

/* Each reserved slot set, alone, is refused by every call; nothing counts. */
static void test_reserved_refused(void)
{
    fixture fx;
    sluice_limit good = limit_of(SLUICE_FIXED, 1, 1000);
    sluice_request req = {"k", 1, 1, 0, {0}};
    sluice_decision d;
    char want[32];

    fx_open(&fx, 1000);
    for (size_t i = 0; i < NRESERVED(good); i++) {
        sluice_limit bad = good;
        sluice_limit pair[2] = {limit_of(SLUICE_GCRA, 5, 1000), bad};

        bad.reserved[i] = 7;
        pair[1] = bad;
        test_context("reserved[%zu] set", i);
        snprintf(want, sizeof(want), "reserved[%zu]", i);
        CHECK_RC(sluice_limit_check(&bad), SLUICE_EINVAL);
        CHECK(strstr(sluice_last_error(), want) != NULL);
        CHECK_RC(sluice_hit(&d, fx.store, &bad, "k", 1, 1), SLUICE_EINVAL);
        CHECK_RC(sluice_peek(&d, fx.store, &bad, "k", 1, 1), SLUICE_EINVAL);
        CHECK_RC(sluice_reset(fx.store, &bad, "k", 1), SLUICE_EINVAL);
        CHECK_RC(sluice_hit_many(fx.store, &bad, &req, 1), SLUICE_EINVAL);
        CHECK_RC(req.err, SLUICE_EINVAL);
        CHECK_RC(sluice_hit_all(&d, NULL, fx.store, pair, 2, "k", 1, 1),
                 SLUICE_EINVAL);
        CHECK_RC(sluice_peek_all(&d, NULL, fx.store, pair, 2, "k", 1, 1),
                 SLUICE_EINVAL);
        CHECK_RC(sluice_reset_all(fx.store, pair, 2, "k", 1), SLUICE_EINVAL);
    }
    test_context(NULL);
    /* Nothing was counted: the good limit's one unit is still there. */
    EXPECT(HIT(&fx, &good, "k", 1), &good, 1, 0, 0, 1000);
    fx_close(&fx);
}

static void junk(void *p, size_t n)
{
    memset(p, 0xA5, n);
}

static int zero(const sluice_decision *d)
{
    return d->reserved[0] == 0 && d->reserved[1] == 0;
}

/* Every call that answers decisions writes 0 into their reserved slots. */
static void test_decisions_zeroed(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_SLIDING_LOG, 1, 1000);
    sluice_limit two[2] = {limit_of(SLUICE_FIXED, 1, 1000),
                           limit_of(SLUICE_GCRA, 3, 1000)};
    sluice_request reqs[3] = {{"a", 1, 1, 0, {0}}, {"a", 1, 1, 0, {0}},
                              {"b", 1, 5, 0, {0}}};
    sluice_decision d, each[2];

    fx_open(&fx, 1000);
    for (int round = 0; round < 2; round++) { /* admitted, then refused */
        junk(&d, sizeof(d));
        CHECK_OK(sluice_hit(&d, fx.store, &l, "k", 1, 1));
        CHECK(zero(&d) && d.allowed == (round == 0));
        junk(&d, sizeof(d));
        CHECK_OK(sluice_peek(&d, fx.store, &l, "k", 1, 1));
        CHECK(zero(&d));
        junk(&d, sizeof(d));
        junk(each, sizeof(each));
        CHECK_OK(sluice_hit_all(&d, each, fx.store, two, 2, "k", 1, 1));
        CHECK(zero(&d) && zero(&each[0]) && zero(&each[1]));
        CHECK(d.allowed == (round == 0));
        junk(&d, sizeof(d));
        junk(each, sizeof(each));
        CHECK_OK(sluice_peek_all(&d, each, fx.store, two, 2, "k", 1, 1));
        CHECK(zero(&d) && zero(&each[0]) && zero(&each[1]));
    }
    /* A batch: admitted, refused, and an error (cost above max). */
    for (size_t i = 0; i < 3; i++)
        junk(&reqs[i].decision, sizeof(reqs[i].decision));
    CHECK_RC(sluice_hit_many(fx.store, &l, reqs, 3), SLUICE_ECOST);
    CHECK(reqs[0].decision.allowed && !reqs[1].decision.allowed);
    for (size_t i = 0; i < 3; i++)
        CHECK(zero(&reqs[i].decision));
    /* Errors. */
    junk(&d, sizeof(d));
    CHECK_RC(sluice_hit(&d, fx.store, &l, "k", 1, 2), SLUICE_ECOST);
    CHECK(zero(&d));
    junk(&d, sizeof(d));
    CHECK_RC(sluice_hit_all(&d, NULL, fx.store, two, 2, "k", 1, 9),
             SLUICE_ECOST);
    CHECK(zero(&d));
    fx_close(&fx);
}

int main(void)
{
    test_layout();
    test_zeroed_by_initialisers();
    test_reserved_refused();
    test_decisions_zeroed();
    return test_summary("test_abi");
}
