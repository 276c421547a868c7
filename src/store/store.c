/*
 * store.c - opening a store by URL, and the calls every store answers.
 *
 * The checks that do not depend on the store (a valid limit, a cost within
 * 1..max, arguments present) are made here once, so each store's table only
 * carries what is its own.
 */
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Opening ------------------------------------------------------------------ */

/* The leading bytes of sluice_store_opts that each version has. */
static const size_t store_opts_size[SLUICE_STORE_OPTS_VERSION + 1] = {
    [1] = offsetof(sluice_store_opts, max_reply_bytes),
    [2] = offsetof(sluice_store_opts, engine),
    [3] = offsetof(sluice_store_opts, tls_ca_file),
    [4] = sizeof(sluice_store_opts),
};

/* The stores, by the start of their URL (in any case, as RFC 3986 has
   schemes): a new store is one line here. */
static const struct backend {
    const char *scheme; /* "" stands for a NULL URL too */
    bool whole;         /* the URL is the scheme and nothing more */
    sluice__open_fn open;
} backends[] = {
    {"", true, sluice__mem_open},
    {"mem://", true, sluice__mem_open},
    {"valkey://", false, sluice__valkey_open},
    {"redis://", false, sluice__valkey_open},
    {"valkey+cluster://", false, sluice__valkey_open},
    {"redis+cluster://", false, sluice__valkey_open},
    {"valkeys://", false, sluice__valkey_open},
    {"rediss://", false, sluice__valkey_open},
    {"valkeys+cluster://", false, sluice__valkey_open},
    {"rediss+cluster://", false, sluice__valkey_open},
    {"unix://", false, sluice__valkey_open},
    {"valkey+unix://", false, sluice__valkey_open},
    {"redis+unix://", false, sluice__valkey_open},
    {"valkey+sentinel://", false, sluice__valkey_open},
    {"redis+sentinel://", false, sluice__valkey_open},
    {"valkeys+sentinel://", false, sluice__valkey_open},
    {"rediss+sentinel://", false, sluice__valkey_open},
};

static const struct backend *backend_of(const char *url)
{
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        const struct backend *b = &backends[i];
        size_t n = strlen(b->scheme);

        if (b->whole ? strcasecmp(url, b->scheme) == 0
                     : strncasecmp(url, b->scheme, n) == 0)
            return b;
    }
    return NULL;
}

int sluice_store_open(sluice_store **out, const char *url,
                      const sluice_store_opts *opts)
{
    sluice_store_opts o = SLUICE_STORE_OPTS_INIT;
    const struct backend *b = backend_of(url != NULL ? url : "");
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
    if (b == NULL) {
        char shown[SLUICE__SHOWN_MAX];

        sluice__url_shown(shown, sizeof(shown), url);
        return sluice__error(SLUICE_EURL,
                             "unsupported store URL '%s' (expected mem://, "
                             "valkey://host:port, redis://host:port, "
                             "valkeys:// or rediss:// (TLS), "
                             "valkey+cluster://host:port,..., "
                             "valkey+sentinel://host:port,.../master or "
                             "unix:///path)",
                             shown);
    }
    if ((store = calloc(1, sizeof(*store))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a store");
    if ((err = b->open(&store->backend, &o, url)) == 0) {
        store->ops = store->backend.ops;
        store->impl = store->backend.impl;
        if (store->backend.remote && (err = sluice__guard_wrap(store, &o)) < 0)
            store->backend.ops->free(store->backend.impl);
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
    return store == NULL ? NULL : store->backend.kind;
}

int sluice__store_server(const sluice__server_ops **ops, void **impl,
                         const sluice_store *store, const char *call)
{
    if (store == NULL)
        return sluice__error(SLUICE_EINVAL, "store is NULL");
    if (store->backend.server == NULL)
        return sluice__error(SLUICE_ENOTSUP,
                             "%s needs a server store (valkey://...); the %s "
                             "store has no queues", call,
                             store->backend.kind);
    *ops = store->backend.server;
    *impl = store->backend.impl;
    return SLUICE_OK;
}

int sluice__store_now(char *buf, size_t *len, const sluice_store *store)
{
    sluice_clock_ms_fn clock = store->backend.caller_clock_ms;
    uint64_t t;

    *len = 0;
    buf[0] = '\0';
    if (clock == NULL)
        return SLUICE_OK;
    if ((t = clock(store->backend.caller_clock_payload)) > SLUICE_NOW_MAX_MS)
        return sluice__error(SLUICE_ERANGE, "the clock reads %llu ms, beyond "
                             "2^53", (unsigned long long)t);
    *len = sluice__u64_text(buf, t);
    return SLUICE_OK;
}

/*
 * The length of the scheme that 'url' starts with, as a message may show
 * it: one of this library's names (any case) and its ':' and '/'s; 0 when
 * it starts with none, so that a URL without its scheme (a user name where
 * the scheme should be) shows none of its userinfo.
 */
static size_t shown_scheme_len(const char *url)
{
    static const char *const names[] = {
        "valkey+cluster",  "redis+cluster",  "valkeys+cluster",
        "rediss+cluster",  "valkey+sentinel", "redis+sentinel",
        "valkeys+sentinel", "rediss+sentinel", "valkey+unix",
        "redis+unix",      "valkey",         "redis",
        "valkeys",         "rediss",         "unix",
        "mem"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);

        if (strncasecmp(url, names[i], n) == 0 && url[n] == ':') {
            while (url[++n] == '/')
                ;
            return n;
        }
    }
    return 0;
}

/*
 * Writes 'url' into 'out' as it may be shown in a message: bytes outside
 * printable ASCII as '?', cut to fit, and the userinfo, user name and
 * password alike, as "***". The userinfo is everything between the scheme
 * (shown_scheme_len(), or the URL's start) and the URL's last '@', wherever
 * that is: not only one before the first '/' or '?', since a password that
 * holds them raw breaks the URL's grammar and must not show in the message
 * that says so, nor in any other malformed shape ("valkey:/u:pw@h://").
 */
void sluice__url_shown(char *out, size_t cap, const char *url)
{
    static const char secret[] = "sentinel_password=";
    const char *from = url + shown_scheme_len(url);
    const char *at = strrchr(from, '@'), *s;
    size_t n = 0;

    if (at == NULL)
        from = NULL;
    for (s = url; *s != '\0' && n + 4 < cap; s++) {
        if (s == from) {
            memcpy(out + n, "***", 3);
            n += 3;
            s = at - 1;
            continue;
        }
        /* The one secret a query may hold: its value shown as "***". */
        if ((s == url || s[-1] == '?' || s[-1] == '&') &&
            strncasecmp(s, secret, sizeof(secret) - 1) == 0 &&
            n + sizeof(secret) + 4 < cap) {
            memcpy(out + n, secret, sizeof(secret) - 1);
            n += sizeof(secret) - 1;
            memcpy(out + n, "***", 3);
            n += 3;
            s += sizeof(secret) - 1; /* the value's first byte */
            while (*s != '\0' && *s != '&')
                s++;
            s--; /* the loop's next step is the '&', or the end */
            continue;
        }
        out[n++] = (*s > 0x20 && *s < 0x7f) ? *s : '?';
    }
    if (*s != '\0' && n + 4 >= cap)
        memcpy(out + n - 3, "...", 3);
    out[n] = '\0';
}

/* ---- Deciding ------------------------------------------------------------------ */

int sluice__key_check(const sluice_store *store, const char *key,
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
    if ((err = sluice__key_check(store, key, key_len)) < 0 ||
        (err = sluice__request_check(limit, cost)) < 0)
        return err;
    err = store->ops->decide(store->impl, limit, key, key_len, cost, consume,
                             out);
    if (err < 0)
        memset(out, 0, sizeof(*out)); /* an error never reads as a decision */
    return err;
}

/*
 * The "sluice.hit.refused" receipt for a refused hit, given until 0.2 to
 * the handlers of its deprecated name "emq.rate_limit.hit" too (now the
 * queue's; sluice/telemetry.h). Only reached when a handler is attached,
 * so the hot path pays one relaxed load.
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
        {"store", store->backend.kind, strlen(store->backend.kind)},
    };
    sluice_event ev = {SLUICE_EVENT_HIT_REFUSED, m, 1, md, 5};

    md[2].value_len = sluice__u64_text(max, limit->max);
    md[3].value_len = sluice__u64_text(window, limit->window_ms);
    sluice__telemetry_emit_alias(&ev, SLUICE_EVENT_EMQ_RATE_LIMIT_HIT);
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
        if ((q->err = sluice__key_check(store, q->key, q->key_len)) == 0 &&
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

    if ((err = sluice__key_check(store, key, key_len)) < 0 ||
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

/* The receipt of a refused sluice_hit_all(), for its deciding limit. */
void sluice__emit_hit(const sluice_store *store, const sluice_limit *limit,
                      const char *key, size_t key_len,
                      const sluice_decision *d)
{
    emit_hit(store, limit, key, key_len, d);
}
