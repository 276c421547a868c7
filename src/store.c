/*
 * store.c - opening a store by URL, and the calls every store answers.
 *
 * The checks that do not depend on the store (a valid limit, a cost within
 * 1..max, arguments present) are made here once, so each store's table only
 * carries what is its own.
 */
#include "sluice_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The leading bytes of sluice_store_opts that each version has. */
static const size_t store_opts_size[SLUICE_STORE_OPTS_VERSION + 1] = {
    [1] = sizeof(sluice_store_opts),
};

int sluice__opts_copy(void *dst, const void *src, unsigned version,
                      const size_t *sizes, unsigned current, const char *what)
{
    if (version < 1 || version > current)
        return sluice__error(SLUICE_EINVAL,
                             "%s version %u is not one of 1..%u; initialise "
                             "them with their _INIT macro", what, version,
                             current);
    memcpy(dst, src, sizes[version]);
    return SLUICE_OK;
}

int sluice_store_open(sluice_store **out, const char *url,
                      const sluice_store_opts *opts)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *store;
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "sluice_store_open: out is NULL");
    *out = NULL;
    if (opts != NULL &&
        (err = sluice__opts_copy(&o, opts, opts->version, store_opts_size,
                                 SLUICE_STORE_OPTS_VERSION,
                                 "store options")) < 0)
        return err;
    if (o.clock_ms == NULL) {
        o.clock_ms = sluice_clock_realtime_ms;
        o.clock_payload = NULL;
    }
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a store");

    if (url == NULL || url[0] == '\0' || strcmp(url, "mem://") == 0) {
        err = sluice__store_mem_open(&store->impl, &store->ops, &o);
    } else if (strncmp(url, "valkey://", 9) == 0 ||
               strncmp(url, "redis://", 8) == 0 ||
               strncmp(url, "valkey+cluster://", 17) == 0 ||
               strncmp(url, "redis+cluster://", 16) == 0) {
        err = sluice__store_valkey_open(&store->impl, &store->ops, &o, url);
    } else {
        char shown[160];

        sluice__url_shown(shown, sizeof(shown), url);
        err = sluice__error(SLUICE_EURL,
                            "unsupported store URL '%s' (expected mem://, "
                            "valkey://host:port, redis://host:port or "
                            "valkey+cluster://host:port,...)",
                            shown);
    }
    if (err < 0) {
        free(store);
        return err;
    }
    *out = store;
    return SLUICE_OK;
}

void sluice_store_free(sluice_store *store)
{
    if (store == NULL)
        return;
    store->ops->free(store->impl);
    free(store);
}

const char *sluice_store_kind(const sluice_store *store)
{
    return store == NULL ? NULL : store->ops->kind;
}

static int key_check(const sluice_store *store, const char *key,
                     size_t key_len)
{
    if (store == NULL)
        return sluice__error(SLUICE_EINVAL, "store is NULL");
    if (key == NULL && key_len > 0)
        return sluice__error(SLUICE_EINVAL, "key is NULL");
    if (key_len > UINT32_MAX)
        return sluice__error(SLUICE_ERANGE, "key of %zu bytes is too long",
                             key_len);
    return SLUICE_OK;
}

static int decide(sluice_decision *out, sluice_store *store,
                  const sluice_limit *limit, const char *key, size_t key_len,
                  uint64_t cost, bool consume)
{
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "decision is NULL");
    memset(out, 0, sizeof(*out));
    if ((err = key_check(store, key, key_len)) < 0 ||
        (err = sluice__request_check(limit, cost)) < 0)
        return err;
    err = store->ops->decide(store->impl, limit, key, key_len, cost, consume,
                             out);
    if (err < 0)
        memset(out, 0, sizeof(*out)); /* an error never reads as a decision */
    return err;
}

/* Writes 'v' in decimal into 'buf' (24 bytes); answers the length. */
static size_t u64_text(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

/*
 * The "emq.rate_limit.hit" receipt for a refused hit. Only reached when a
 * handler is attached, so the hot path pays one relaxed load.
 */
static void emit_hit(const sluice_store *store, const sluice_limit *limit,
                     const char *key, size_t key_len,
                     const sluice_decision *d)
{
    char max[24], window[24];
    const char *algo = sluice_algo_name(limit->algo);
    sluice_measurement m[] = {{"delay_ms", (double)d->retry_after_ms}};
    sluice_metadata md[] = {
        {"key", key, key_len},
        {"algorithm", algo, strlen(algo)},
        {"limit", max, 0},
        {"window_ms", window, 0},
        {"store", store->ops->kind, strlen(store->ops->kind)},
    };
    sluice_event ev = {SLUICE_EVENT_RATE_LIMIT_HIT, m, 1, md, 5};

    md[2].value_len = u64_text(max, limit->max);
    md[3].value_len = u64_text(window, limit->window_ms);
    sluice_telemetry_emit(&ev);
}

int sluice_hit(sluice_decision *out, sluice_store *store,
               const sluice_limit *limit, const char *key, size_t key_len,
               uint64_t cost)
{
    int err = decide(out, store, limit, key, key_len, cost, true);

    /* A refusal by a fail-closed policy is no limit being hit. */
    if (err == SLUICE_OK && !out->allowed && sluice__telemetry_active() &&
        out->fallback == SLUICE_ANSWERED)
        emit_hit(store, limit, key, key_len, out);
    return err;
}

int sluice_hit_many(sluice_store *store, const sluice_limit *limit,
                    sluice_request *reqs, size_t n)
{
    size_t stack[64], *todo = stack, ntodo = 0;
    int err;

    if (store == NULL)
        return sluice__error(SLUICE_EINVAL, "store is NULL");
    if (reqs == NULL && n > 0)
        return sluice__error(SLUICE_EINVAL, "requests are NULL");
    if (n > sizeof(stack) / sizeof(stack[0]) &&
        (todo = malloc(n * sizeof(*todo))) == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
        for (size_t i = 0; i < n; i++) {
            memset(&reqs[i].decision, 0, sizeof(reqs[i].decision));
            reqs[i].err = err;
        }
        return err;
    }
    for (size_t i = 0; i < n; i++) {
        sluice_request *q = &reqs[i];

        memset(&q->decision, 0, sizeof(q->decision));
        if ((q->err = key_check(store, q->key, q->key_len)) == 0 &&
            (q->err = sluice__request_check(limit, q->cost)) == 0)
            todo[ntodo++] = i;
    }
    if (store->ops->decide_many != NULL && ntodo > 0)
        store->ops->decide_many(store->impl, limit, reqs, todo, ntodo);
    else
        for (size_t t = 0; t < ntodo; t++) {
            sluice_request *q = &reqs[todo[t]];

            q->err = store->ops->decide(store->impl, limit, q->key,
                                        q->key_len, q->cost, true,
                                        &q->decision);
        }
    err = SLUICE_OK;
    for (size_t i = 0; i < n; i++) {
        sluice_request *q = &reqs[i];

        if (q->err < 0) {
            memset(&q->decision, 0, sizeof(q->decision));
            if (err == SLUICE_OK)
                err = q->err;
        } else if (!q->decision.allowed && sluice__telemetry_active() &&
                   q->decision.fallback == SLUICE_ANSWERED) {
            emit_hit(store, limit, q->key, q->key_len, &q->decision);
        }
    }
    if (todo != stack)
        free(todo);
    return err;
}

int sluice_peek(sluice_decision *out, sluice_store *store,
                const sluice_limit *limit, const char *key, size_t key_len,
                uint64_t cost)
{
    return decide(out, store, limit, key, key_len, cost, false);
}

int sluice_reset(sluice_store *store, const sluice_limit *limit,
                 const char *key, size_t key_len)
{
    int err;

    if ((err = key_check(store, key, key_len)) < 0 ||
        (err = sluice_limit_check(limit)) < 0)
        return err;
    return store->ops->reset(store->impl, limit, key, key_len);
}

int sluice_store_stats_get(sluice_store_stats *out, sluice_store *store)
{
    if (out == NULL || store == NULL)
        return sluice__error(SLUICE_EINVAL, "stats or store is NULL");
    memset(out, 0, sizeof(*out));
    return store->ops->stats(store->impl, out);
}

/* ---- The queue limiter ------------------------------------------------------ */

static int queue_check(sluice_store *store, const char *queue,
                       size_t queue_len, const char *call)
{
    int err = key_check(store, queue, queue_len);

    if (err < 0)
        return err;
    if (store->ops->emq_ttl == NULL)
        return sluice__error(SLUICE_ENOTSUP,
                             "%s needs a server store (valkey://...); the %s "
                             "store has no queues", call, store->ops->kind);
    return SLUICE_OK;
}

int sluice_emq_rate_limit_ttl(uint64_t *wait_ms, sluice_store *store,
                              const char *queue, size_t queue_len,
                              uint64_t max)
{
    int err;

    if (wait_ms == NULL)
        return sluice__error(SLUICE_EINVAL, "wait_ms is NULL");
    *wait_ms = 0;
    if ((err = queue_check(store, queue, queue_len,
                           "sluice_emq_rate_limit_ttl")) < 0)
        return err;
    if (max > SLUICE_MAX_MAX)
        return sluice__error(SLUICE_ERANGE, "max %llu is above 2^53 - 1",
                             (unsigned long long)max);
    return store->ops->emq_ttl(store->impl, queue, queue_len, max, wait_ms);
}

int sluice_emq_limiter_incr(uint64_t *count, uint64_t *ttl_ms,
                            sluice_store *store, const char *queue,
                            size_t queue_len, uint64_t window_ms)
{
    uint64_t c = 0, t = 0;
    int err;

    if ((err = queue_check(store, queue, queue_len,
                           "sluice_emq_limiter_incr")) < 0)
        return err;
    if (window_ms < 1 || window_ms > SLUICE_WINDOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE,
                             "window %llu ms is out of range 1..%llu ms",
                             (unsigned long long)window_ms,
                             (unsigned long long)SLUICE_WINDOW_MAX_MS);
    err = store->ops->emq_incr(store->impl, queue, queue_len, window_ms, &c, &t);
    if (count != NULL)
        *count = c;
    if (ttl_ms != NULL)
        *ttl_ms = t;
    return err;
}
