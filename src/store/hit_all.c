/*
 * hit_all.c - one request against several limits of one id, all or nothing
 * (sluice_hit_all(), sluice_peek_all(), sluice_reset_all()).
 *
 * The checks that do not depend on the store are made here, once: 1 <= n
 * <= SLUICE_HIT_ALL_MAX, every limit valid, the cost within every max, and
 * no two limits of one algorithm and window (they would share a state).
 * The store decides every limit at once (its 'decide_all': mem/mem_all.c,
 * valkey/hit_all.c, and the guard around a server store); this file then
 * combines the limits' answers into one decision (see include/sluice.h).
 */
#include "store/store.h"

#include <string.h>

/* ---- Checks ------------------------------------------------------------------- */

int sluice__all_check(const sluice_store *store, const sluice_limit *limits,
                      size_t n, const char *key, size_t key_len,
                      uint64_t cost, bool reset)
{
    int err = sluice__key_check(store, key, key_len);

    if (err < 0)
        return err;
    if (limits == NULL || n == 0 || n > SLUICE_HIT_ALL_MAX)
        return sluice__error(SLUICE_EINVAL, "%zu limits: an all-or-nothing "
                             "call takes 1 to %d", limits == NULL ? 0 : n,
                             SLUICE_HIT_ALL_MAX);
    for (size_t i = 0; i < n; i++) {
        err = reset ? sluice_limit_check(&limits[i])
                    : sluice__request_check(&limits[i], cost);
        if (err < 0)
            return err;
        for (size_t j = 0; j < i; j++)
            if (limits[j].algo == limits[i].algo &&
                limits[j].window_ms == limits[i].window_ms)
                return sluice__error(SLUICE_EINVAL, "limits %zu and %zu are "
                                     "both %s over %llu ms: they would share "
                                     "one state", j + 1, i + 1,
                                     sluice_algo_name(limits[i].algo),
                                     (unsigned long long)limits[i].window_ms);
    }
    return SLUICE_OK;
}

/* ---- Combining ------------------------------------------------------------------ */

/*
 * The combined decision of each[0..n) (include/sluice.h): admitted iff all
 * are; the largest wait among the refusals and the largest reset; the least
 * budget left (a limit that admits has 'cost' more left while nothing is
 * counted); 'limit' of the deciding limit, whose place it answers.
 */
static size_t combine(sluice_decision *out, const sluice_decision *each,
                      size_t n, uint64_t cost)
{
    size_t decider = 0;

    memset(out, 0, sizeof(*out));
    out->allowed = 1;
    out->remaining = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (!each[i].allowed)
            out->allowed = 0;
    for (size_t i = 0; i < n; i++) {
        const sluice_decision *d = &each[i];
        uint64_t left = d->remaining + (out->allowed || !d->allowed ? 0 : cost);

        if (out->allowed ? left < out->remaining
                         : !d->allowed &&
                               (each[decider].allowed ||
                                d->retry_after_ms >
                                    each[decider].retry_after_ms))
            decider = i;
        if (left < out->remaining)
            out->remaining = left;
        if (d->retry_after_ms > out->retry_after_ms && !d->allowed)
            out->retry_after_ms = d->retry_after_ms;
        if (d->reset_after_ms > out->reset_after_ms)
            out->reset_after_ms = d->reset_after_ms;
        if (d->fallback != SLUICE_ANSWERED)
            out->fallback = d->fallback;
    }
    out->limit = each[decider].limit;
    return decider;
}

void sluice__all_finish(sluice_decision *out, sluice_decision *each,
                        sluice_store *store, const sluice_limit *limits,
                        size_t n, const char *key, size_t key_len,
                        uint64_t cost, sluice__all how)
{
    size_t decider;

    for (size_t i = 0; i < n; i++)
        each[i].limit = limits[i].max;
    decider = combine(out, each, n, cost);
    /* One receipt for a refusal, of the limit that decided it. */
    if (how == SLUICE__ALL_HIT && !out->allowed &&
        out->fallback == SLUICE_ANSWERED && sluice__telemetry_active())
        sluice__emit_hit(store, &limits[decider], key, key_len, out);
}

/* ---- The calls ------------------------------------------------------------------- */

static int decide_all(sluice_decision *out, sluice_decision *each,
                      sluice_store *store, const sluice_limit *limits,
                      size_t n, const char *key, size_t key_len,
                      uint64_t cost, sluice__all how)
{
    sluice_decision own[SLUICE_HIT_ALL_MAX];
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "decision is NULL");
    memset(out, 0, sizeof(*out));
    if (each == NULL)
        each = own;
    if ((err = sluice__all_check(store, limits, n, key, key_len, cost, false)) < 0)
        return err;
    memset(each, 0, n * sizeof(*each));
    err = store->ops->decide_all(store->impl, limits, n, key, key_len, cost,
                                 how, each);
    if (err < 0) {
        memset(each, 0, n * sizeof(*each)); /* never read as decisions */
        return err;
    }
    sluice__all_finish(out, each, store, limits, n, key, key_len, cost, how);
    return SLUICE_OK;
}

int sluice_hit_all(sluice_decision *out, sluice_decision *each,
                   sluice_store *store, const sluice_limit *limits, size_t n,
                   const char *key, size_t key_len, uint64_t cost)
{
    return decide_all(out, each, store, limits, n, key, key_len, cost,
                      SLUICE__ALL_HIT);
}

int sluice_peek_all(sluice_decision *out, sluice_decision *each,
                    sluice_store *store, const sluice_limit *limits, size_t n,
                    const char *key, size_t key_len, uint64_t cost)
{
    return decide_all(out, each, store, limits, n, key, key_len, cost,
                      SLUICE__ALL_PEEK);
}

int sluice_reset_all(sluice_store *store, const sluice_limit *limits,
                     size_t n, const char *key, size_t key_len)
{
    int err = sluice__all_check(store, limits, n, key, key_len, 0, true);

    if (err < 0)
        return err;
    return store->ops->decide_all(store->impl, limits, n, key, key_len, 0,
                                  SLUICE__ALL_RESET, NULL);
}
