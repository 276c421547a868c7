/*
 * decide.c - the async API's calls: each checks what the blocking call
 * checks, then is answered at once (the embedded store, the refused-key
 * cache) or queued on the connection of the node that serves its key.
 */
#include "async/async.h"

#include <stdlib.h>
#include <string.h>

/* ---- Starting a call ----------------------------------------------------------------- */

/* The slot of 'key' under 'algo's key name (0 but in a cluster). */
static unsigned decide_slot(const sluice_async *a, sluice_algo algo,
                            const char *key, size_t key_len)
{
    char kbuf[SLUICE__VK_KEY_BUF];
    size_t klen = 0;
    char *k;
    unsigned slot;

    if (!a->v->cluster)
        return 0;
    k = sluice__key_build(kbuf, sizeof(kbuf), &klen, a->v->prefix, key,
                          key_len, sluice__algos[algo]->name);
    slot = k != NULL ? sluice__key_slot(k, klen) : 0;
    if (k != NULL && k != kbuf)
        free(k);
    return slot;
}

/* Sends 'c' to the node of its slot, or answers it with why it cannot. */
static void call_route(sluice_async *a, sluice__acall *c)
{
    sluice__async_dispatch(a, c); /* queued, parked, or answered */
}

/* Decides request 'c' (DECIDE, its 'one' set): the embedded store now;
   the cache; else the server. */
static void decide_start(sluice_async *a, sluice__acall *c)
{
    sluice_request *q = &c->one;

    if (a->v == NULL) {
        q->err = a->store->ops->decide(a->store->impl, &c->limit, q->key,
                                       q->key_len, q->cost, c->consume,
                                       &q->decision);
        if (q->err < 0)
            memset(&q->decision, 0, sizeof(q->decision));
        sluice__acall_ready(a, c, q->err);
        return;
    }
    if (a->guard != NULL &&
        sluice__guard_check(a->guard, &c->limit, q->key, q->key_len, q->cost,
                            &c->asked_ms, &q->decision)) {
        sluice__acall_ready(a, c, SLUICE_OK);
        return;
    }
    c->slot = decide_slot(a, c->limit.algo, q->key, q->key_len);
    call_route(a, c);
}

static int decide_one(sluice_async *a, const sluice_limit *limit,
                      const char *key, size_t key_len, uint64_t cost,
                      bool consume, sluice_async_decision_cb cb, void *user)
{
    sluice__acall *c;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (cb == NULL)
        err = sluice__error(SLUICE_EINVAL, "the callback is NULL");
    else if ((err = sluice__key_check(a->store, key, key_len)) == 0)
        err = sluice__request_check(limit, cost);
    if (err == 0 && (c = sluice__acall_new(a, SLUICE__ACALL_DECIDE, user)) ==
                        NULL)
        err = SLUICE_ENOMEM;
    if (err == 0 && key_len > 0 && (c->key = malloc(key_len)) == NULL) {
        sluice__acall_drop(a, c);
        err = sluice__error(SLUICE_ENOMEM, "no memory for a key");
    }
    if (err == 0) {
        if (key_len > 0)
            memcpy(c->key, key, key_len);
        c->cb.decision = cb;
        c->limit = *limit;
        c->consume = consume;
        c->one = (sluice_request){c->key, key_len, cost, 0, {0}};
        decide_start(a, c);
    }
    sluice__async_leave(a);
    return err;
}

int sluice_async_hit(sluice_async *a, const sluice_limit *limit,
                     const char *key, size_t key_len, uint64_t cost,
                     sluice_async_decision_cb cb, void *user)
{
    return decide_one(a, limit, key, key_len, cost, true, cb, user);
}

int sluice_async_peek(sluice_async *a, const sluice_limit *limit,
                      const char *key, size_t key_len, uint64_t cost,
                      sluice_async_decision_cb cb, void *user)
{
    return decide_one(a, limit, key, key_len, cost, false, cb, user);
}

/* ---- A batch ---------------------------------------------------------------------------- */

/* Request i of hit_many 'p', checked, as a call of its own. */
static void many_child(sluice_async *a, sluice__acall *p, size_t i)
{
    sluice_request *q = &p->reqs[i];
    sluice__acall *c = sluice__acall_new(a, SLUICE__ACALL_DECIDE, NULL);

    if (c == NULL) {
        q->err = SLUICE_ENOMEM;
        if (--p->left == 0)
            sluice__acall_ready(a, p, SLUICE_ENOMEM);
        return;
    }
    a->pending--; /* the hit_many is the pending call */
    c->parent = p;
    c->idx = i;
    c->limit = p->limit;
    c->consume = true;
    c->deadline_ms = p->deadline_ms;
    c->one = (sluice_request){q->key, q->key_len, q->cost, 0, {0}};
    decide_start(a, c);
}

int sluice_async_hit_many(sluice_async *a, const sluice_limit *limit,
                          sluice_request *reqs, size_t n,
                          sluice_async_many_cb cb, void *user)
{
    sluice__acall *p = NULL;
    size_t todo = 0;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (cb == NULL || (reqs == NULL && n > 0))
        err = sluice__error(SLUICE_EINVAL, "the callback or the requests "
                            "are NULL");
    else if ((p = sluice__acall_new(a, SLUICE__ACALL_MANY, user)) == NULL)
        err = SLUICE_ENOMEM;
    if (err < 0) {
        sluice__async_leave(a);
        return err;
    }
    p->cb.many = cb;
    p->limit = *limit;
    p->consume = true;
    p->reqs = reqs;
    p->n = n;
    for (size_t i = 0; i < n; i++) {
        sluice_request *q = &reqs[i];

        memset(&q->decision, 0, sizeof(q->decision));
        if ((q->err = sluice__key_check(a->store, q->key, q->key_len)) == 0 &&
            (q->err = sluice__request_check(limit, q->cost)) == 0)
            todo++;
    }
    p->left = todo + 1; /* one more, let go below: none answers it early */
    for (size_t i = 0; i < n; i++)
        if (reqs[i].err == 0)
            many_child(a, p, i);
    if (--p->left == 0) {
        for (size_t i = 0; i < n && p->err == 0; i++)
            p->err = reqs[i].err;
        sluice__acall_ready(a, p, p->err);
    }
    sluice__async_leave(a);
    return SLUICE_OK;
}

/* ---- All or nothing ------------------------------------------------------------------------ */

static int decide_all(sluice_async *a, const sluice_limit *limits, size_t n,
                      const char *key, size_t key_len, uint64_t cost,
                      bool consume, sluice_async_all_cb cb, void *user)
{
    sluice__acall *c = NULL;
    int err;

    if ((err = sluice__async_enter(a)) < 0)
        return err;
    if (cb == NULL)
        err = sluice__error(SLUICE_EINVAL, "the callback is NULL");
    else if (a->v != NULL) {
        /* On a server: one script call of its own (route.h). */
        err = sluice__async_all(a, limits, n, key, key_len, cost, consume,
                                cb, user);
        sluice__async_leave(a);
        return err;
    }
    else if (n == 0 || n > SLUICE_HIT_ALL_MAX || limits == NULL)
        err = sluice__error(SLUICE_EINVAL, "hit_all takes 1..%d limits",
                            SLUICE_HIT_ALL_MAX);
    else if ((c = sluice__acall_new(a, SLUICE__ACALL_ALL, user)) == NULL)
        err = SLUICE_ENOMEM;
    if (err == 0) {
        c->cb.all = cb;
        c->all_n = n;
        err = consume ? sluice_hit_all(&c->all_out, c->all_each, a->store,
                                       limits, n, key, key_len, cost)
                      : sluice_peek_all(&c->all_out, c->all_each, a->store,
                                        limits, n, key, key_len, cost);
        if (err < 0) { /* bad arguments: no callback, as the others */
            sluice__acall_drop(a, c);
        } else {
            sluice__acall_ready(a, c, SLUICE_OK);
        }
    }
    sluice__async_leave(a);
    return err;
}

int sluice_async_hit_all(sluice_async *a, const sluice_limit *limits, size_t n,
                         const char *key, size_t key_len, uint64_t cost,
                         sluice_async_all_cb cb, void *user)
{
    return decide_all(a, limits, n, key, key_len, cost, true, cb, user);
}

int sluice_async_peek_all(sluice_async *a, const sluice_limit *limits,
                          size_t n, const char *key, size_t key_len,
                          uint64_t cost, sluice_async_all_cb cb, void *user)
{
    return decide_all(a, limits, n, key, key_len, cost, false, cb, user);
}
