/*
 * guard.c - what wraps every store on a server: the refused-key cache and
 * the failure policy.
 *
 * The guard is a store's table of its own around the server store's
 * (store.h). Before a decision goes to the server it asks the cache
 * (refusals.c): a request refused with a wait is refused here, without a
 * round trip, until the wait ends. After the server answers, a refusal is
 * remembered and an admission forgets what a cheaper request admitted here
 * made stale. When the server cannot answer (SLUICE_ECONN,
 * SLUICE_ETIMEDOUT), the policy (on_error) answers instead: the error, an
 * admission or a refusal, and the decision's 'fallback' says which. A reply
 * that is wrong (SLUICE_EPROTO) is always an error.
 *
 * Any store on a server gets both by being opened with 'remote' set: none
 * of this lives in the server's own code.
 */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define REFUSALS_CAP 65536 /* keys remembered as refused, per store */

typedef struct guard {
    const sluice__store_ops *inner;
    void *inner_impl;
    sluice_on_error on_error;
    uint64_t closed_wait_ms;    /* a fail-closed refusal's retry_after_ms */
    int caller_clock;           /* the cache's clock: the caller's, or not */
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;
    sluice__refusals *refusals; /* NULL when off */
    unsigned cached_algos;      /* bit (1 << algo): its refusals cached */
    _Atomic uint64_t errors, fell_open, fell_closed;
} guard;

/* The clock of the cache: the caller's when it decides, else monotonic. */
static uint64_t guard_now(const guard *g)
{
    return g->caller_clock ? g->clock_ms(g->clock_payload)
                           : sluice__monotonic_ms();
}

static bool cached_for(const guard *g, const sluice_limit *limit)
{
    return g->refusals != NULL && (g->cached_algos & (1u << limit->algo));
}

/* The policy's answer for a request the server could not answer; answers
   the request's error code (0 when the policy stood in). */
static int fall_back(guard *g, const sluice_limit *limit, int err,
                     sluice_decision *out)
{
    atomic_fetch_add(&g->errors, 1);
    if (g->on_error == SLUICE_ON_ERROR_FAIL)
        return err;
    /* The policy stands in for the server; the detail stays readable. */
    memset(out, 0, sizeof(*out));
    out->limit = limit->max;
    if (g->on_error == SLUICE_ON_ERROR_OPEN) {
        atomic_fetch_add(&g->fell_open, 1);
        out->allowed = 1;
        out->fallback = SLUICE_FELL_OPEN;
    } else {
        atomic_fetch_add(&g->fell_closed, 1);
        out->fallback = SLUICE_FELL_CLOSED;
        out->retry_after_ms = g->closed_wait_ms;
    }
    return SLUICE_OK;
}

/*
 * Settles one request that went to the server, asked at 'asked_ms' (a wait
 * counts from then, so a local refusal never outlasts the server's): the
 * policy where the server could not answer, the cache where it did.
 */
static int settle(guard *g, const sluice_limit *limit, const char *key,
                  size_t key_len, uint64_t cost, bool consume,
                  uint64_t asked_ms, int err, sluice_decision *d)
{
    if (err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT)
        return fall_back(g, limit, err, d);
    if (err < 0 || !cached_for(g, limit))
        return err;
    if (!d->allowed)
        sluice__refusals_note(g->refusals, limit, key, key_len, cost,
                              asked_ms, d);
    else if (consume)
        /* A cheaper request admitted here pushes the wait of a refused
           one further out: ask the server again for it. */
        sluice__refusals_forget(g->refusals, limit->algo, key, key_len);
    return SLUICE_OK;
}

static int guard_decide(void *impl, const sluice_limit *limit,
                        const char *key, size_t key_len, uint64_t cost,
                        bool consume, sluice_decision *out)
{
    guard *g = impl;
    uint64_t asked_ms;
    int err;

    if (sluice__guard_check(g, limit, key, key_len, cost, &asked_ms, out))
        return SLUICE_OK;
    err = g->inner->decide(g->inner_impl, limit, key, key_len, cost, consume,
                           out);
    return settle(g, limit, key, key_len, cost, consume, asked_ms, err, out);
}

/* A batch: what the cache does not answer goes to the server. */
static int guard_decide_many(void *impl, const sluice_limit *limit,
                             sluice_request *reqs, const size_t *todo,
                             size_t n)
{
    guard *g = impl;
    bool cached = cached_for(g, limit);
    uint64_t asked_ms = cached ? guard_now(g) : 0;
    size_t *send = malloc(n * sizeof(*send)), m = 0;

    if (send == NULL) {
        int err = sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu",
                                n);

        for (size_t t = 0; t < n; t++)
            reqs[todo[t]].err = err;
        return err;
    }
    for (size_t t = 0; t < n; t++) {
        sluice_request *q = &reqs[todo[t]];

        if (cached && sluice__refusals_check(g->refusals, limit, q->key,
                                             q->key_len, q->cost, asked_ms,
                                             &q->decision))
            q->err = SLUICE_OK;
        else
            send[m++] = todo[t];
    }
    if (m > 0 && g->inner->decide_many != NULL)
        g->inner->decide_many(g->inner_impl, limit, reqs, send, m);
    else
        for (size_t t = 0; t < m; t++) {
            sluice_request *q = &reqs[send[t]];

            q->err = g->inner->decide(g->inner_impl, limit, q->key,
                                      q->key_len, q->cost, true,
                                      &q->decision);
        }
    for (size_t t = 0; t < m; t++) {
        sluice_request *q = &reqs[send[t]];

        q->err = settle(g, limit, q->key, q->key_len, q->cost, true, asked_ms,
                        q->err, &q->decision);
    }
    free(send);
    return SLUICE_OK;
}

/*
 * sluice_hit_all(): straight to the server, around the refused cache (its
 * keys are not sluice_hit()'s, so nothing there is stale after it either).
 * When the server cannot answer, the policy answers for every limit alike,
 * counted once.
 */
static int guard_decide_all(void *impl, const sluice_limit *limits, size_t n,
                            const char *key, size_t key_len, uint64_t cost,
                            sluice__all how, sluice_decision *each)
{
    guard *g = impl;
    int err = g->inner->decide_all(g->inner_impl, limits, n, key, key_len,
                                   cost, how, each);

    if ((err != SLUICE_ECONN && err != SLUICE_ETIMEDOUT) ||
        how == SLUICE__ALL_RESET || (err = fall_back(g, &limits[0], err,
                                                     &each[0])) < 0)
        return err;
    for (size_t i = 1; i < n; i++)
        each[i] = each[0]; /* 'limit' is set by the caller (hit_all.c) */
    return SLUICE_OK;
}

static int guard_reset(void *impl, const sluice_limit *limit, const char *key,
                       size_t key_len)
{
    guard *g = impl;

    sluice__guard_forget(g, limit, key, key_len);
    return g->inner->reset(g->inner_impl, limit, key, key_len);
}

static int guard_stats(void *impl, sluice_store_stats *out)
{
    guard *g = impl;
    int err = g->inner->stats(g->inner_impl, out);

    out->errors = atomic_load(&g->errors);
    out->fell_open = atomic_load(&g->fell_open);
    out->fell_closed = atomic_load(&g->fell_closed);
    out->local_refusals = sluice__refusals_hits(g->refusals);
    return err;
}

static void guard_free(void *impl)
{
    guard *g = impl;

    g->inner->free(g->inner_impl);
    sluice__refusals_free(g->refusals);
    free(g);
}

static const sluice__store_ops guard_ops = {
    .decide = guard_decide,
    .decide_many = guard_decide_many,
    .reset = guard_reset,
    .decide_all = guard_decide_all,
    .stats = guard_stats,
    .free = guard_free,
};

/* ---- The same, one request at a time (the async API's) -------------------- */

void *sluice__guard_of(const sluice_store *store)
{
    return store->ops == &guard_ops ? store->impl : NULL;
}

bool sluice__guard_check(void *gv, const sluice_limit *limit, const char *key,
                         size_t key_len, uint64_t cost, uint64_t *asked_ms,
                         sluice_decision *out)
{
    guard *g = gv;
    bool cached = cached_for(g, limit);

    *asked_ms = cached ? guard_now(g) : 0;
    return cached && sluice__refusals_check(g->refusals, limit, key, key_len,
                                            cost, *asked_ms, out);
}

int sluice__guard_settle(void *gv, const sluice_limit *limit, const char *key,
                         size_t key_len, uint64_t cost, bool consume,
                         uint64_t asked_ms, int err, sluice_decision *d)
{
    return settle(gv, limit, key, key_len, cost, consume, asked_ms, err, d);
}

void sluice__guard_forget(void *gv, const sluice_limit *limit, const char *key,
                          size_t key_len)
{
    guard *g = gv;

    if (g->refusals != NULL)
        sluice__refusals_forget(g->refusals, limit->algo, key, key_len);
}

/* Which algorithms' refusals are cached: each algorithm says for itself
   whether it is by default. */
static unsigned cached_algos(sluice_refused_cache setting)
{
    unsigned bits = 0;

    for (unsigned a = 0; a < SLUICE__ALGO_N; a++)
        if (setting == SLUICE_REFUSED_CACHE_ALL ||
            (setting == SLUICE_REFUSED_CACHE_DEFAULT &&
             sluice__algo_servers[a]->refused_cache_default))
            bits |= 1u << a;
    return bits;
}

int sluice__guard_wrap(sluice_store *store, const sluice_store_opts *o)
{
    guard *g;
    int err;

    if (o->on_error < SLUICE_ON_ERROR_FAIL ||
        o->on_error > SLUICE_ON_ERROR_CLOSED)
        return sluice__error(SLUICE_EINVAL, "on_error %d is not a policy",
                             (int)o->on_error);
    if (o->refused_cache < SLUICE_REFUSED_CACHE_DEFAULT ||
        o->refused_cache > SLUICE_REFUSED_CACHE_ALL)
        return sluice__error(SLUICE_EINVAL, "refused_cache %d is not a "
                             "setting", (int)o->refused_cache);
    if ((g = calloc(1, sizeof(*g))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate the store");
    g->inner = store->ops;
    g->inner_impl = store->impl;
    g->on_error = o->on_error;
    g->closed_wait_ms = o->command_timeout_ms;
    g->caller_clock = o->caller_clock;
    g->clock_ms = o->clock_ms;
    g->clock_payload = o->clock_payload;
    if (o->refused_cache != SLUICE_REFUSED_CACHE_OFF) {
        g->cached_algos = cached_algos(o->refused_cache);
        err = sluice__refusals_new(&g->refusals, REFUSALS_CAP,
                                   sluice__random_seed());
        if (err < 0) {
            free(g);
            return err;
        }
    }
    store->ops = &guard_ops;
    store->impl = g;
    return SLUICE_OK;
}
