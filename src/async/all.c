/*
 * all.c - sluice_async_hit_all() and _peek_all() on a server store: the
 * one script call of valkey/hit_all.c, sent through the engine's eval
 * primitive (so it is routed, redirected, reloaded after NOSCRIPT and
 * bounded by its deadline like any call), and its reply read and combined
 * by the blocking path's own functions.
 */
#include "async/async.h"

#include <stdlib.h>
#include <string.h>

/* One call in flight: what the reply is read against, and the caller's. */
typedef struct all_call {
    sluice_limit limits[SLUICE_HIT_ALL_MAX];
    size_t n;
    uint64_t cost;
    sluice__all how;
    char *key;
    size_t key_len;
    sluice_async_all_cb cb;
    void *user;
    sluice__vk_all_args args; /* its keys name the limits in messages */
} all_call;

static void all_call_free(all_call *c)
{
    sluice__vk_all_free(&c->args);
    free(c->key);
    free(c);
}

/* The script's reply: every limit's decision, combined, to the caller. */
static void all_reply(struct sluice_async *a, int err, redisReply *r,
                      const char *msg, void *arg)
{
    all_call *c = arg;
    sluice_decision out, each[SLUICE_HIT_ALL_MAX];

    memset(each, 0, sizeof(each));
    if (err == 0) {
        err = sluice__vk_all_read(&c->args, r, c->limits, c->cost, each);
        freeReplyObject(r);
    } else {
        sluice__error(err, "%s", msg != NULL ? msg : "no reply");
    }
    /* A server that did not answer: the policy answers for every limit
       alike, as the blocking guard does for sluice_hit_all() (its keys
       are not sluice_hit()'s: the refused cache is not asked). */
    if ((err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT) && a->guard != NULL &&
        (err = sluice__guard_settle(a->guard, &c->limits[0], c->key,
                                    c->key_len, c->cost,
                                    c->how == SLUICE__ALL_HIT, 0, err,
                                    &each[0])) == 0)
        for (size_t i = 1; i < c->n; i++)
            each[i] = each[0];
    if (err == 0) {
        sluice__all_finish(&out, each, a->store, c->limits,
                           c->n, c->key, c->key_len, c->cost, c->how);
        c->cb(a, 0, &out, each, c->n, c->user);
    } else {
        c->cb(a, err, NULL, NULL, c->n, c->user);
    }
    all_call_free(c);
}

int sluice__async_all(struct sluice_async *a, const sluice_limit *limits,
                      size_t n, const char *key, size_t key_len,
                      uint64_t cost, bool consume, sluice_async_all_cb cb,
                      void *user)
{
    sluice__vk_store *v = a->v;
    all_call *c;
    int err;

    if (cb == NULL)
        return sluice__error(SLUICE_EINVAL, "the callback is NULL");
    if ((err = sluice__all_check(a->store, limits, n, key,
                                 key_len, cost, false)) < 0)
        return err;
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (c->key = malloc(key_len ? key_len : 1)) == NULL) {
        free(c);
        return sluice__error(SLUICE_ENOMEM, "no memory for a call");
    }
    memcpy(c->limits, limits, n * sizeof(*limits));
    memcpy(c->key, key, key_len);
    c->n = n;
    c->key_len = key_len;
    c->cost = cost;
    c->how = consume ? SLUICE__ALL_HIT : SLUICE__ALL_PEEK;
    c->cb = cb;
    c->user = user;
    /* argv[0..3) are EVALSHA, the SHA1 and the key count: the eval
       primitive writes its own. */
    if ((err = sluice__vk_all_build(&c->args, v, limits, n, key, key_len,
                                    cost, c->how)) < 0 ||
        (err = sluice__async_eval(a, c->args.script, NULL, (int)n,
                                  c->args.argc - 3, c->args.argv + 3,
                                  c->args.lens + 3, all_reply, c)) < 0) {
        all_call_free(c);
        return err;
    }
    return SLUICE_OK;
}
