/*
 * store.c - opening a store by URL, and the calls every store answers.
 *
 * The checks that do not depend on the store (a valid limit, a cost within
 * 1..max, arguments present) are made here once, so each store's table only
 * carries what is its own.
 */
#include "sluice_private.h"

#include <stdlib.h>
#include <string.h>

int sluice_store_open(sluice_store **out, const char *url,
                      const sluice_store_opts *opts)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    sluice_store *store;
    int err;

    if (out == NULL)
        return sluice__error(SLUICE_EINVAL, "sluice_store_open: out is NULL");
    *out = NULL;
    if (opts != NULL) {
        if (opts->version != SLUICE_STORE_OPTS_VERSION)
            return sluice__error(SLUICE_EINVAL,
                                 "store options version %u is not %u; "
                                 "initialise with SLUICE_STORE_OPTS_INIT",
                                 opts->version, SLUICE_STORE_OPTS_VERSION);
        o = *opts;
    }
    if (o.clock_ms == NULL) {
        o.clock_ms = sluice_clock_realtime_ms;
        o.clock_payload = NULL;
    }
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a store");

    if (url == NULL || url[0] == '\0' || strcmp(url, "mem://") == 0) {
        err = sluice__store_mem_open(&store->impl, &store->ops, &o);
    } else {
        err = sluice__error(SLUICE_EURL,
                            "unsupported store URL '%s' (expected mem://)",
                            url);
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
    return store->ops->decide(store->impl, limit, key, key_len, cost, consume,
                              out);
}

int sluice_hit(sluice_decision *out, sluice_store *store,
               const sluice_limit *limit, const char *key, size_t key_len,
               uint64_t cost)
{
    return decide(out, store, limit, key, key_len, cost, true);
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
