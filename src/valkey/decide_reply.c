/*
 * decide_reply.c - the reply of a decision call on a server.
 *
 * A script's call (EVALSHA) and the module's (SLUICE.HITMANY) answer one
 * flat array: four integers per request, in the call's order (allowed,
 * remaining, retry_after_ms, reset_after_ms), with allowed -1 for a key
 * that holds a value sluice did not write (a foreign value, WRONGTYPE on
 * the server). Each decision is checked against what every algorithm
 * answers: a reply that breaks it is SLUICE_EPROTO, never a decision.
 */
#include "valkey/decide.h"

#include <stdio.h>

/* Reads element 'i' of an array reply as an integer >= 0. */
static int reply_u64(const redisReply *r, size_t i, uint64_t *out)
{
    const redisReply *e;

    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return sluice__error(SLUICE_EPROTO,
                             "valkey: the script answered no array");
    e = r->element[i];
    if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
        return sluice__error(SLUICE_EPROTO,
                             "valkey: the script answered a non-integer");
    *out = (uint64_t)e->integer;
    return SLUICE_OK;
}

/*
 * Checks a decision read from a server against what every algorithm's
 * script answers for a request of 'cost' under 'limit': a reply that breaks
 * it is wrong, whatever the server meant (SLUICE_EPROTO), and never taken
 * for a decision.
 */
static int decision_check(const sluice_decision *d, uint64_t allowed,
                          const sluice_limit *limit, uint64_t cost)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    uint64_t windows = sluice__algo_servers[limit->algo]->reset_windows;
    const char *wrong = NULL;

    if (allowed > 1)
        wrong = "allowed is neither 0 nor 1";
    else if (d->remaining > limit->max)
        wrong = "more remaining than max";
    else if (allowed && d->retry_after_ms != 0)
        wrong = "an admission with a wait";
    else if (allowed && d->remaining > limit->max - cost)
        wrong = "an admission that leaves more than max - cost";
    else if (!allowed && d->retry_after_ms == 0)
        wrong = "a refusal without a wait";
    else if (!allowed && d->retry_after_ms > d->reset_after_ms)
        wrong = "a wait longer than the reset";
    else if (windows != 0 && d->reset_after_ms > windows * limit->window_ms)
        wrong = "a reset further out than the algorithm reaches";
    if (wrong == NULL)
        return SLUICE_OK;
    return sluice__error(SLUICE_EPROTO, "valkey: the %s script answered %s "
                         "(allowed %llu, remaining %llu, retry_after_ms %llu, "
                         "reset_after_ms %llu; max %llu, cost %llu)",
                         algo->name, wrong, (unsigned long long)allowed,
                         (unsigned long long)d->remaining,
                         (unsigned long long)d->retry_after_ms,
                         (unsigned long long)d->reset_after_ms,
                         (unsigned long long)limit->max,
                         (unsigned long long)cost);
}

int sluice__vk_reply_decision(const redisReply *r, size_t i,
                              const sluice_limit *limit, uint64_t cost,
                              sluice_decision *out, bool *foreign)
{
    const redisReply *e = r->element[4 * i];
    uint64_t allowed = 0;
    int err;

    *foreign = e->type == REDIS_REPLY_INTEGER && e->integer == -1;
    if (*foreign)
        return SLUICE_OK;
    if ((err = reply_u64(r, 4 * i, &allowed)) == 0 &&
        (err = reply_u64(r, 4 * i + 1, &out->remaining)) == 0 &&
        (err = reply_u64(r, 4 * i + 2, &out->retry_after_ms)) == 0 &&
        (err = reply_u64(r, 4 * i + 3, &out->reset_after_ms)) == 0)
        err = decision_check(out, allowed, limit, cost);
    out->allowed = allowed == 1;
    return err;
}

void sluice__vk_answer(const sluice_limit *limit, sluice_request *reqs,
                       const size_t *todo, size_t n, sluice__vk_msg *msgs,
                       const sluice__vk_args *g, int err, redisReply *r)
{
    if (err == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * n))
        err = sluice__error(SLUICE_EPROTO, "valkey: the %s script answered "
                            "%s for %zu requests", sluice_algo_name(limit->algo),
                            r->type == REDIS_REPLY_ARRAY ? "another count"
                                                         : "no array", n);
    for (size_t i = 0; i < n; i++) {
        sluice_request *q = &reqs[todo[i]];
        bool foreign = false;

        q->err = err;
        if (err == 0) {
            q->decision.limit = limit->max;
            q->err = sluice__vk_reply_decision(r, i, limit, q->cost,
                                               &q->decision,
                                               &foreign);
        }
        if (q->err == 0 && foreign)
            q->err = sluice__error(SLUICE_EPROTO, "valkey: %.*s does not hold "
                                   "%s, as sluice writes it there",
                                   (int)g->lens[g->key0 + g->kstep * i],
                                   g->argv[g->key0 + g->kstep * i],
                                   sluice__algo_servers[limit->algo]->value);
        if (q->err < 0 && msgs != NULL)
            snprintf(msgs[todo[i]], sizeof(sluice__vk_msg), "%s",
                     sluice_last_error());
    }
    if (r != NULL)
        freeReplyObject(r);
}
