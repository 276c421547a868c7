/*
 * mem_fixture.c - an embedded store on a virtual clock (mem_fixture.h).
 */
#include "mem_fixture.h"

#include "algo/model.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

void fx_open_capped(fixture *fx, uint64_t start_ms, size_t max_keys)
{
    sluice_store_opts opts = SLUICE_STORE_OPTS_INIT;

    fx->clock = NULL;
    fx->store = NULL;
    CHECK_OK(sluice_vclock_new(&fx->clock, start_ms));
    if (fx->clock == NULL)
        exit(2);
    opts.clock_ms = sluice_vclock_now_ms;
    opts.clock_payload = fx->clock;
    opts.max_keys = max_keys;
    CHECK_OK(sluice_store_open(&fx->store, "mem://", &opts));
    if (fx->store == NULL)
        exit(2);
}

void fx_open(fixture *fx, uint64_t start_ms)
{
    fx_open_capped(fx, start_ms, 0);
}

void fx_close(fixture *fx)
{
    sluice_store_free(fx->store);
    sluice_vclock_free(fx->clock);
}

void fx_at(fixture *fx, uint64_t now_ms)
{
    sluice_vclock_set(fx->clock, now_ms);
}

sluice_decision fx_fresh(const sluice_limit *limit, uint64_t now_ms,
                         uint64_t cost)
{
    sluice__model m;
    sluice_decision d;

    sluice__model_init(&m, limit);
    sluice__model_decide(&m, now_ms, cost, false, &d);
    return d;
}

sluice_limit limit_of(sluice_algo algo, uint64_t max, uint64_t window_ms)
{
    sluice_limit l = {0};

    l.algo = algo;
    l.max = max;
    l.window_ms = window_ms;
    return l;
}

sluice_decision fx_decide_at(fixture *fx, const sluice_limit *limit,
                             const char *key, size_t key_len, uint64_t cost,
                             int consume, const char *file, int line)
{
    sluice_decision d;
    int rc;

    memset(&d, 0xA5, sizeof(d));
    if (consume)
        rc = sluice_hit(&d, fx->store, limit, key, key_len, cost);
    else
        rc = sluice_peek(&d, fx->store, limit, key, key_len, cost);
    test_check_rc_at(rc, SLUICE_OK, file, line,
                     consume ? "sluice_hit()" : "sluice_peek()");
    /* The room for fields to come reads 0 (sluice.h). */
    test_check_at(d.reserved[0] == 0 && d.reserved[1] == 0, file, line,
                  "the decision's reserved slots are 0");
    return d;
}

int expect_at(sluice_decision d, const sluice_limit *limit, int allowed,
              uint64_t remaining, uint64_t retry_ms, uint64_t reset_ms,
              const char *file, int line)
{
    sluice_decision want;

    memset(&want, 0, sizeof(want));
    want.allowed = allowed;
    want.limit = limit->max;
    want.remaining = remaining;
    want.retry_after_ms = retry_ms;
    want.reset_after_ms = reset_ms;
    return check_same_answer_at(d, want, file, line, "decision", "expected");
}
