/*
 * combine.c - one server: threads deciding at once share script calls.
 *
 * Many threads calling sluice_hit() at once would each send a script call of
 * one key, and the server's cost of a call is mostly the call itself. So a
 * decision joins a queue; while fewer than 'pool_size' callers are
 * combining, the caller takes the whole queue and decides it as a batch
 * (one script call per distinct limit, decide_calls.c), then hands out the
 * answers. Callers that arrive meanwhile wait for the next round, so no
 * caller waits longer than the round in flight plus its own. Alone, a
 * caller combines only its own request. A cluster decides each alone (its
 * keys rarely share a slot).
 *
 * A waiter sleeps on a word of its own (core/park.c) and is woken by its
 * address alone, so no waiter touches a shared lock on the way out.
 */
#include "valkey/valkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sluice__vk_waiter {
    struct sluice__vk_waiter *next;
    const sluice_limit *limit;
    bool consume;
    sluice_request req;
    sluice__vk_msg msg;       /* req.err's message, for its caller to set */
    uint64_t started_ms;      /* the caller's call began: its deadline */
    _Atomic uint32_t state;   /* WAITER_DONE, WAITER_LEAD, or 0 */
} sluice__vk_waiter;

#define WAITER_DONE 1u /* decided; from then on it may be gone */
#define WAITER_LEAD 2u /* asked to combine the next round */
#define ROUND_STACK 64 /* waiters a round holds without allocating */

/* Tells waiter 'w' that it is decided, or that it may combine. */
static void waiter_tell(sluice__vk_waiter *w, uint32_t what)
{
    atomic_fetch_or(&w->state, what);
    sluice__unpark(&w->state); /* by address alone: 'w' may be gone */
}

/* One round's requests, in the order of its waiters, and their groups. */
typedef struct round {
    size_t n;
    sluice__vk_waiter **w;
    sluice_request *reqs;
    size_t *send;  /* the places, group after group */
    sluice__vk_msg *msgs;
    bool *sent;
    sluice__vk_waiter *stack_w[ROUND_STACK];
    sluice_request stack_q[ROUND_STACK];
    size_t stack_send[ROUND_STACK];
} round;

static void round_free(round *rd)
{
    free(rd->msgs);
    if (rd->w != rd->stack_w)
        free(rd->w);
    if (rd->reqs != rd->stack_q)
        free(rd->reqs);
    if (rd->send != rd->stack_send)
        free(rd->send);
}

/* Lays out a round for the waiters of 'batch'; -1 when out of memory. */
static int round_init(round *rd, sluice__vk_waiter *batch)
{
    size_t n = 0;

    for (sluice__vk_waiter *b = batch; b != NULL; b = b->next)
        n++;
    rd->n = n;
    rd->w = rd->stack_w;
    rd->reqs = rd->stack_q;
    rd->send = rd->stack_send;
    rd->msgs = calloc(n, sizeof(*rd->msgs) + sizeof(*rd->sent));
    if (n > ROUND_STACK) {
        rd->w = malloc(n * sizeof(*rd->w));
        rd->reqs = malloc(n * sizeof(*rd->reqs));
        rd->send = malloc(n * sizeof(*rd->send));
    }
    if (rd->msgs == NULL || rd->w == NULL || rd->reqs == NULL ||
        rd->send == NULL) {
        round_free(rd);
        return -1;
    }
    rd->sent = (bool *)(rd->msgs + n);
    n = 0;
    for (sluice__vk_waiter *b = batch; b != NULL; b = b->next) {
        rd->w[n] = b;
        rd->reqs[n++] = b->req;
    }
    return 0;
}

static bool same_group(const sluice__vk_waiter *a, const sluice__vk_waiter *b)
{
    return a->consume == b->consume && a->limit->algo == b->limit->algo &&
           a->limit->max == b->limit->max &&
           a->limit->window_ms == b->limit->window_ms &&
           a->limit->burst == b->limit->burst;
}

/* Adds the calls of waiter i's group (its limit and consume, every waiter
   of the round that shares them) to 'cs'; 'used' places of 'send' are
   taken by earlier groups. Answers the places this group takes. */
static size_t round_group(round *rd, sluice__vk_calls *cs, size_t i,
                          size_t used)
{
    size_t m = 0, *group = rd->send + used;
    int err;

    for (size_t j = i; j < rd->n; j++)
        if (!rd->sent[j] && same_group(rd->w[j], rd->w[i])) {
            rd->sent[j] = true;
            group[m++] = j;
        }
    err = sluice__vk_calls_add(cs, rd->w[i]->limit, rd->w[i]->consume, group,
                               m);
    for (size_t k = 0; k < m && err < 0; k++) {
        rd->reqs[group[k]].err = err;
        snprintf(rd->msgs[group[k]], sizeof(sluice__vk_msg), "%s",
                 sluice_last_error());
    }
    return m;
}

/* Decides a round: a group of script calls per limit (and consume), all of
   them queued before any is awaited. */
static void combine_round(sluice__vk_store *v, sluice__vk_waiter *batch)
{
    sluice__vk_calls cs = SLUICE__VK_CALLS_INIT(v, NULL, NULL, UINT64_MAX);
    round rd;

    /* The round is answered by its oldest caller's deadline: no caller
       waits past its own. */
    for (sluice__vk_waiter *b = batch; b != NULL; b = b->next)
        if (b->started_ms + v->command_timeout_ms < cs.deadline_ms)
            cs.deadline_ms = b->started_ms + v->command_timeout_ms;

    if (round_init(&rd, batch) < 0) {
        /* No memory for a round: decide each alone. */
        for (sluice__vk_waiter *b = batch; b != NULL; b = b->next)
            if ((b->req.err = sluice__vk_decide(
                     v, b->limit, b->req.key, b->req.key_len, b->req.cost,
                     b->consume, &b->req.decision)) < 0)
                snprintf(b->msg, sizeof(b->msg), "%s", sluice_last_error());
        return;
    }
    cs.reqs = rd.reqs;
    cs.msgs = rd.msgs;
    for (size_t i = 0, used = 0; i < rd.n; i++)
        if (!rd.sent[i])
            used += round_group(&rd, &cs, i, used);
    sluice__vk_calls_finish(&cs);
    for (size_t i = 0; i < rd.n; i++) {
        rd.w[i]->req = rd.reqs[i];
        memcpy(rd.w[i]->msg, rd.msgs[i], sizeof(sluice__vk_msg));
    }
    round_free(&rd);
}

/*
 * Combines the round that the caller 'me' took ('batch', under way: the
 * lock is not held), then wakes its waiters, and asks the first caller
 * waiting since to lead the next. Returns with the lock held.
 */
static void lead_round(sluice__vk_store *v, sluice__vk_waiter *me,
                       sluice__vk_waiter *batch)
{
    combine_round(v, batch);
    while (batch != NULL) {
        sluice__vk_waiter *next = batch->next; /* before it may be gone */

        if (batch == me)
            atomic_fetch_or(&me->state, WAITER_DONE);
        else
            waiter_tell(batch, WAITER_DONE);
        batch = next;
    }
    pthread_mutex_lock(&v->combine_lock);
    v->combining--;
    if (v->waiting != NULL) /* the first waiting combines next */
        waiter_tell(v->waiting, WAITER_LEAD);
}

int sluice__vk_decide_combined(void *impl, const sluice_limit *limit,
                               const char *key, size_t key_len, uint64_t cost,
                               bool consume, sluice_decision *out)
{
    sluice__vk_store *v = impl;
    sluice__vk_waiter me = {.limit = limit, .consume = consume,
                    .req = {key, key_len, cost, 0, {0}},
                    .started_ms = sluice__monotonic_ms()};

    pthread_mutex_lock(&v->combine_lock);
    *v->waiting_tail = &me;
    v->waiting_tail = &me.next;
    for (;;) {
        uint32_t state;

        if (v->combining < v->pool_size && v->waiting != NULL) {
            sluice__vk_waiter *batch = v->waiting;

            v->waiting = NULL;
            v->waiting_tail = &v->waiting;
            v->combining++;
            pthread_mutex_unlock(&v->combine_lock);
            lead_round(v, &me, batch);
        }
        pthread_mutex_unlock(&v->combine_lock);
        /* Wait to be decided, or to be asked to combine. */
        while ((state = atomic_load(&me.state)) == 0)
            sluice__park(&me.state, 0);
        if (state & WAITER_DONE)
            break;
        atomic_fetch_and(&me.state, ~WAITER_LEAD);
        pthread_mutex_lock(&v->combine_lock);
    }
    *out = me.req.decision;
    if (me.req.err < 0)
        return sluice__error(me.req.err, "%s", me.msg);
    return SLUICE_OK;
}
