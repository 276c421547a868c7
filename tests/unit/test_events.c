/*
 * test_events.c - the names of the telemetry events, on the embedded store
 * (the call path that emits a refusal is every store's: store.c).
 *
 *   - a refused sluice_hit() emits "sluice.hit.refused", with its wait and
 *     what was limited; an admitted hit, a peek and an error emit nothing;
 *   - a refused request of sluice_hit_many() emits it once per refusal, and
 *     a refused sluice_hit_all() once;
 *   - deprecated, until 0.2: a handler of the old name "emq.rate_limit.hit"
 *     receives each refusal too, named "emq.rate_limit.hit", with the same
 *     figures; one attached to both receives it once under each name;
 *   - the macros spell those names, and SLUICE_EVENT_RATE_LIMIT_HIT is
 *     still the old name, so code attached with it compiles and is served.
 * The queue's own "emq.rate_limit.hit" (a deferred take) is in
 * tests/server/test_queue_limit.c, which needs a server.
 */
#include "events.h"
#include "mem_fixture.h"
#include "test.h"

#include <string.h>

static void test_names(void)
{
    CHECK(strcmp(SLUICE_EVENT_HIT_REFUSED, "sluice.hit.refused") == 0);
    CHECK(strcmp(SLUICE_EVENT_EMQ_RATE_LIMIT_HIT, "emq.rate_limit.hit") == 0);
    CHECK(strcmp(SLUICE_EVENT_RATE_LIMIT_HIT, "emq.rate_limit.hit") == 0);
}

/* One name's handler: a refused hit reaches it, under that name. */
static void test_hit(const char *name)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_FIXED, 1, 1000);
    test_events_seen s = {.want = name};
    sluice_decision d;

    test_context("a handler of %s", name);
    fx_open(&fx, 1000);
    CHECK_OK(sluice_telemetry_attach("test.events", name, test_events_record, &s));
    d = HIT(&fx, &l, "k", 1);
    CHECK(d.allowed);
    d = PEEK(&fx, &l, "k", 1);
    CHECK(!d.allowed);
    CHECK_RC(sluice_hit(&d, fx.store, &l, "k", 1, 2), SLUICE_ECOST);
    CHECK_EQ_U64(s.calls, 0);
    fx_at(&fx, 1400);
    d = HIT(&fx, &l, "k", 1);
    CHECK(!d.allowed);
    CHECK_EQ_U64(s.calls, 1);
    CHECK_EQ_U64(s.bad_name, 0);
    CHECK_EQ_U64((uint64_t)s.delay_ms, 600);
    CHECK(strcmp(s.key, "k") == 0 && strcmp(s.algorithm, "fixed") == 0);
    CHECK_OK(sluice_telemetry_detach("test.events"));
    fx_close(&fx);
    test_context(NULL);
}

/* Both names at once: each refusal once under each; hit_many, hit_all. */
static void test_both(void)
{
    fixture fx;
    sluice_limit l = limit_of(SLUICE_SLIDING_LOG, 1, 1000);
    sluice_limit two[2] = {limit_of(SLUICE_FIXED, 5, 1000),
                           limit_of(SLUICE_GCRA, 1, 2000)};
    test_events_seen now = {.want = SLUICE_EVENT_HIT_REFUSED};
    test_events_seen old = {.want = SLUICE_EVENT_EMQ_RATE_LIMIT_HIT};
    sluice_request reqs[3] = {{"a", 1, 1, 0, {0}}, {"a", 1, 1, 0, {0}},
                              {"b", 1, 1, 0, {0}}};
    sluice_decision d;

    fx_open(&fx, 1000);
    CHECK_OK(sluice_telemetry_attach("test.now", SLUICE_EVENT_HIT_REFUSED,
                                     test_events_record, &now));
    CHECK_OK(sluice_telemetry_attach("test.old", SLUICE_EVENT_RATE_LIMIT_HIT,
                                     test_events_record, &old));
    /* The second request of "a" is refused: one event each. */
    CHECK_OK(sluice_hit_many(fx.store, &l, reqs, 3));
    CHECK(reqs[0].decision.allowed && !reqs[1].decision.allowed &&
          reqs[2].decision.allowed);
    CHECK_EQ_U64(now.calls, 1);
    CHECK_EQ_U64(old.calls, 1);
    CHECK(now.delay_ms == old.delay_ms && now.delay_ms == 1000);

    CHECK_OK(sluice_hit_all(&d, NULL, fx.store, two, 2, "c", 1, 1));
    CHECK(d.allowed);
    CHECK_OK(sluice_hit_all(&d, NULL, fx.store, two, 2, "c", 1, 1));
    CHECK(!d.allowed);
    CHECK_EQ_U64(now.calls, 2);
    CHECK_EQ_U64(old.calls, 2);
    CHECK(strcmp(now.algorithm, "gcra") == 0 && strcmp(old.algorithm, "gcra") == 0);
    CHECK_EQ_U64(now.bad_name, 0);
    CHECK_EQ_U64(old.bad_name, 0);

    /* The new name alone, once the old one's handler is gone. */
    CHECK_OK(sluice_telemetry_detach("test.old"));
    d = HIT(&fx, &l, "a", 1);
    CHECK(!d.allowed);
    CHECK_EQ_U64(now.calls, 3);
    CHECK_EQ_U64(old.calls, 2);
    CHECK_OK(sluice_telemetry_detach("test.now"));
    fx_close(&fx);
}

int main(void)
{
    test_names();
    test_hit(SLUICE_EVENT_HIT_REFUSED);
    test_hit(SLUICE_EVENT_RATE_LIMIT_HIT);
    test_both();
    return test_summary("test_events");
}
