/*
 * limiter.c - the queue limiter: EchoMQ's read and admit step, on its exact
 * keys.
 *
 * Queue 'q' keeps its fixed-window counter at EMQ ":{q}:limiter" and its
 * settings in the hash EMQ ":{q}:meta" (field 'max' is the cap); the {q}
 * hashtag pins both to one cluster slot, so each script is atomic and
 * slot-legal. The read (emq_ttl.lua) answers the counter's PTTL when it has
 * reached the cap, else 0; the admit step (emq_incr.lua) is the fixed
 * window's own counter step (src/algo/fixed/counter.lua).
 */
#include "queue/queue.h"

#include <stdlib.h>

#define KEY_BUF 192

/* The server of 'store', for a queue named by a valid pointer. */
static int queue_check(sluice__qserver *s, sluice_store *store,
                       const char *queue, size_t queue_len, const char *call)
{
    int err = sluice__qserver_of(s, store, call);

    if (err == 0 && queue == NULL && queue_len > 0)
        err = sluice__error(SLUICE_EINVAL, "queue is NULL");
    return err;
}

/*
 * Runs a queue-limiter script, or its twin 'command' in the server's native
 * module (the same keys, arguments and reply) where the store uses the
 * module: on EMQ:{q}:limiter alone, or with EMQ:{q}:meta too when
 * 'with_meta', then the one number 'arg'.
 */
static int limiter_eval(redisReply **out, const sluice__qserver *s,
                        const char *command, const sluice__script *script,
                        const char *queue, size_t queue_len, bool with_meta,
                        uint64_t arg)
{
    char lbuf[KEY_BUF], mbuf[KEY_BUF], num[24];
    const char *args[3];
    size_t lens[3];
    int nkeys = with_meta ? 2 : 1;
    char *lim, *meta;
    int err;

    lim = sluice__key_build(lbuf, KEY_BUF, &lens[0], s->prefix, queue,
                            queue_len, "limiter");
    meta = sluice__key_build(mbuf, KEY_BUF, &lens[1], s->prefix, queue,
                             queue_len, "meta");
    if (lim == NULL || meta == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    } else {
        args[0] = lim;
        args[1] = meta;
        args[nkeys] = num;
        lens[nkeys] = sluice__u64_text(num, arg);
        err = s->ops->eval_module(s->impl, command, script, nkeys,
                                  nkeys + 1, args, lens, out);
    }
    if (lim != NULL && lim != lbuf)
        free(lim);
    if (meta != NULL && meta != mbuf)
        free(meta);
    return err;
}

int sluice_emq_rate_limit_ttl(uint64_t *wait_ms, sluice_store *store,
                              const char *queue, size_t queue_len,
                              uint64_t max)
{
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if (wait_ms == NULL)
        return sluice__error(SLUICE_EINVAL, "wait_ms is NULL");
    *wait_ms = 0;
    if ((err = queue_check(&s, store, queue, queue_len,
                           "sluice_emq_rate_limit_ttl")) < 0)
        return err;
    if (max > SLUICE_MAX_MAX)
        return sluice__error(SLUICE_ERANGE, "max %llu is above 2^53 - 1",
                             (unsigned long long)max);
    if ((err = limiter_eval(&r, &s, "SLUICE.EMQTTL",
                            &sluice__script_emq_ttl, queue, queue_len, true,
                            max)) < 0)
        return err;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
        (uint64_t)r->integer > SLUICE_NOW_MAX_MS)
        err = sluice__error(SLUICE_EPROTO,
                            "valkey: the queue limiter read answered no "
                            "wait");
    else
        *wait_ms = (uint64_t)r->integer;
    freeReplyObject(r);
    return err;
}

int sluice_emq_limiter_incr(uint64_t *count, uint64_t *ttl_ms,
                            sluice_store *store, const char *queue,
                            size_t queue_len, uint64_t window_ms)
{
    const char *what = "valkey: the queue limiter's increment";
    uint64_t c = 0, t = 0;
    sluice__qserver s;
    redisReply *r = NULL;
    int err;

    if ((err = queue_check(&s, store, queue, queue_len,
                           "sluice_emq_limiter_incr")) < 0)
        ;
    else if (window_ms < 1 || window_ms > SLUICE_WINDOW_MAX_MS)
        err = sluice__error(SLUICE_ERANGE,
                            "window %llu ms is out of range 1..%llu ms",
                            (unsigned long long)window_ms,
                            (unsigned long long)SLUICE_WINDOW_MAX_MS);
    else
        err = limiter_eval(&r, &s, "SLUICE.EMQINCR",
                           &sluice__script_emq_incr, queue, queue_len, false,
                           window_ms);
    if (err == 0) {
        if ((err = sluice__queue_reply_u64(r, 0, what, 1, SLUICE_MAX_MAX,
                                           &c)) == 0)
            err = sluice__queue_reply_u64(r, 1, what, 1, SLUICE_NOW_MAX_MS,
                                          &t);
        freeReplyObject(r);
    }
    if (count != NULL)
        *count = c;
    if (ttl_ms != NULL)
        *ttl_ms = t;
    return err;
}
