/*
 * call.c - a queue call, built and then sent: the queue's keys, a script's
 * arguments with the call's clock, and the readers every reply shares.
 *
 * Building is apart from sending so that the blocking calls (queue.c,
 * take.c) and the async ones (src/async/queue.c) send the same call, built
 * and checked by the same code.
 */
#include "queue/queue.h"

#include <stdlib.h>
#include <string.h>

static const char *const key_suffix[SLUICE__QKEYS] = {
    "wait", "active", "delayed", "data", "meta", "limiter", "attempts",
    "failed"};

int sluice__qserver_of(sluice__qserver *out, const sluice_store *store,
                       const char *call)
{
    int err = sluice__store_server(&out->ops, &out->impl, store, call);

    if (err == 0) {
        out->prefix = store->backend.emq_prefix;
        out->max_payload = store->backend.max_payload;
        err = sluice__store_now(out->now, &out->now_len, store);
    }
    return err;
}

/* ---- Building and sending -------------------------------------------------------- */

void sluice__qsend_free(sluice__qsend *q)
{
    for (int i = 0; i < SLUICE__QKEYS; i++)
        if (q->key[i] != NULL && q->key[i] != q->key_buf[i])
            free(q->key[i]);
    memset(q->key, 0, sizeof(q->key));
    if (q->args != q->args_in) {
        free(q->args);
        free(q->lens);
    }
    q->args = NULL;
    q->lens = NULL;
}

/* Room for 'argc' arguments: in place, or malloc'd for a long call. */
static int qsend_room(sluice__qsend *q, size_t argc)
{
    q->args = q->args_in;
    q->lens = q->lens_in;
    if (argc <= SLUICE__QKEYS + SLUICE__QARGS)
        return SLUICE_OK;
    q->args = malloc(argc * sizeof(*q->args));
    q->lens = malloc(argc * sizeof(*q->lens));
    if (q->args == NULL || q->lens == NULL) {
        free(q->args);
        free(q->lens);
        q->args = q->args_in; /* nothing for sluice__qsend_free() to free */
        q->lens = q->lens_in;
        return sluice__error(SLUICE_ENOMEM, "no memory for a script call");
    }
    return SLUICE_OK;
}

int sluice__qsend_build(sluice__qsend *q, const sluice__qserver *s,
                        const char *queue, size_t queue_len,
                        const sluice__script *script, const int *which,
                        int nkeys, int nargs, const char *const *args,
                        const size_t *lens)
{
    int err;

    memset(q->key, 0, sizeof(q->key));
    q->args = q->args_in;
    q->lens = q->lens_in;
    q->s = *s;
    q->script = script;
    q->nkeys = nkeys;
    q->argc = nkeys + nargs;
    if (queue == NULL && queue_len > 0)
        return sluice__error(SLUICE_EINVAL, "queue is NULL");
    if ((err = qsend_room(q, (size_t)q->argc)) < 0)
        return err;
    for (int i = 0; i < nkeys; i++) {
        int k = which[i];

        if (q->key[k] == NULL &&
            (q->key[k] = sluice__key_build(q->key_buf[k], SLUICE__QKEY_BUF,
                                           &q->key_len[k], s->prefix, queue,
                                           queue_len, key_suffix[k])) == NULL)
            return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
        q->args[i] = q->key[k];
        q->lens[i] = q->key_len[k];
    }
    for (int i = 0; i < nargs; i++) {
        q->args[nkeys + i] = args[i] != NULL ? args[i] : q->s.now;
        q->lens[nkeys + i] = args[i] != NULL ? lens[i] : q->s.now_len;
    }
    return SLUICE_OK;
}

int sluice__qsend_run(const sluice__qsend *q, redisReply **out)
{
    return q->s.ops->eval(q->s.impl, q->script, q->nkeys, q->argc, q->args,
                          q->lens, out);
}

/* ---- Reading replies -------------------------------------------------------------- */

int sluice__queue_reply_u64(const redisReply *r, size_t i, const char *what,
                            uint64_t lo, uint64_t hi, uint64_t *out)
{
    const redisReply *e = r;

    if (r->type == REDIS_REPLY_ARRAY) {
        if (i >= r->elements)
            return sluice__error(SLUICE_EPROTO, "%s: short reply", what);
        e = r->element[i];
    } else if (i != 0) {
        return sluice__error(SLUICE_EPROTO, "%s: expected a list", what);
    }
    if (e->type != REDIS_REPLY_INTEGER)
        return sluice__error(SLUICE_EPROTO, "%s: expected an integer", what);
    if (e->integer < 0 || (uint64_t)e->integer < lo ||
        (uint64_t)e->integer > hi)
        return sluice__error(SLUICE_EPROTO, "%s: %lld is out of range "
                             "%llu..%llu", what, e->integer,
                             (unsigned long long)lo, (unsigned long long)hi);
    *out = (uint64_t)e->integer;
    return SLUICE_OK;
}

int sluice__queue_reply_array(const redisReply *r, size_t n, const char *what)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return sluice__error(SLUICE_EPROTO, "%s: expected a list of %zu",
                             what, n);
    return SLUICE_OK;
}
