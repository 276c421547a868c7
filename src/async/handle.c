/*
 * handle.c - the async handle: its calls, the ready list, the one timer,
 * and the loop's way in.
 *
 * A call is answered in two steps. Whatever answers it (a reply, an
 * error, the embedded store, the refused-key cache, a deadline) moves it
 * to the ready list; the ready list is called back at the end of the entry
 * point that filled it (on_fd, on_timer), or at the timer the handle asks
 * for at once (0 ms) when a call was answered inside the call that started
 * it. So no callback ever runs inside the call that started it, and a
 * callback may start calls, or free the handle (then freed once the
 * callbacks of that turn are done).
 *
 * The timer is the nearest of: the ready list (now), every pending call's
 * deadline, and each connection's connect deadline. It is set through the
 * hooks only when that changes.
 */
#include "async/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Calls ---------------------------------------------------------------------- */

sluice__acall *sluice__acall_new(sluice_async *a, sluice__acall_kind kind,
                                 void *user)
{
    sluice__acall *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        sluice__error(SLUICE_ENOMEM, "no memory for an async call");
        return NULL;
    }
    c->kind = kind;
    c->user = user;
    c->idx = SIZE_MAX;
    c->deadline_ms = sluice__monotonic_ms() +
                     (a->v != NULL ? a->v->command_timeout_ms : 0);
    c->next = a->calls;
    if (a->calls != NULL)
        a->calls->prev = c;
    a->calls = c;
    a->pending++;
    return c;
}

/* A hit_many's request answered: into its place; the hit_many answered
   with its last, with the first error in array order, as
   sluice_hit_many() answers. */
static void child_answered(sluice_async *a, sluice__acall *c)
{
    sluice__acall *p = c->parent;
    sluice_request *q = &p->reqs[c->idx];

    q->err = c->err;
    q->decision = c->err == 0 ? c->one.decision : (sluice_decision){0};
    if (c->err < 0 && p->msg[0] == '\0')
        snprintf(p->msg, sizeof(p->msg), "%s", c->msg);
    if (--p->left > 0)
        return;
    for (size_t i = 0; i < p->n; i++)
        if (p->reqs[i].err < 0) {
            p->err = p->reqs[i].err;
            break;
        }
    sluice__acall_ready(a, p, p->err);
}

void sluice__acall_ready(sluice_async *a, sluice__acall *c, int err)
{
    if (c->ready)
        return; /* answered once only: a late answer is dropped */
    c->ready = true;
    c->err = err;
    if (err < 0 && c->msg[0] == '\0')
        snprintf(c->msg, sizeof(c->msg), "%s", sluice_last_error());
    c->conn = NULL;
    c->qnext = NULL;
    *a->ready_tail = c;
    a->ready_tail = &c->qnext;
    if (c->parent != NULL)
        child_answered(a, c);
}

static void acall_free(sluice_async *a, sluice__acall *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        a->calls = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    if (c->parent == NULL)
        a->pending--;
    if (c->reply != NULL)
        freeReplyObject(c->reply);
    free(c->key);
    free(c->cmd);
    free(c->module_cmd);
    free(c);
}

void sluice__acall_drop(sluice_async *a, sluice__acall *c)
{
    acall_free(a, c);
}

/* The receipt of a refused hit, as sluice_hit() emits it. */
static void emit_refused(sluice_async *a, const sluice__acall *c,
                         const sluice_request *q)
{
    if (c->consume && !q->decision.allowed && sluice__telemetry_active() &&
        q->decision.fallback == SLUICE_ANSWERED)
        sluice__emit_hit(a->store, &c->limit, q->key, q->key_len,
                         &q->decision);
}

/* Calls 'c' back: its last error set to its message first. */
static void acall_back(sluice_async *a, sluice__acall *c)
{
    int err = c->err;

    if (c->parent != NULL)
        return; /* its hit_many is called back */
    if (err < 0)
        sluice__error(err, "%s", c->msg);
    switch (c->kind) {
    case SLUICE__ACALL_DECIDE:
        if (err == 0)
            emit_refused(a, c, &c->one);
        c->cb.decision(a, err, err == 0 ? &c->one.decision : NULL, c->user);
        break;
    case SLUICE__ACALL_MANY:
        for (size_t i = 0; i < c->n; i++)
            if (c->reqs[i].err == 0)
                emit_refused(a, c, &c->reqs[i]);
        c->cb.many(a, err, c->reqs, c->n, c->user);
        break;
    case SLUICE__ACALL_ALL:
        c->cb.all(a, err, err == 0 ? &c->all_out : NULL,
                  err == 0 ? c->all_each : NULL, c->all_n, c->user);
        break;
    case SLUICE__ACALL_CMD: {
        redisReply *r = c->reply;

        c->reply = NULL;
        c->cb.reply(a, err, err == 0 ? r : NULL, err < 0 ? c->msg : NULL,
                    c->user);
        if (err < 0 && r != NULL)
            freeReplyObject(r);
        break;
    }
    }
}

/* Calls back what is on the ready list now; what those callbacks answer
   in turn without I/O waits for the next turn (a timer of 0 ms), so a
   chain of answers never keeps the loop from its other work. */
static void run_ready(sluice_async *a)
{
    sluice__acall *c = a->ready, *next;

    a->ready = NULL;
    a->ready_tail = &a->ready;
    for (; c != NULL; c = next) {
        next = c->qnext;
        acall_back(a, c);
        acall_free(a, c);
    }
}

/* ---- The timer ------------------------------------------------------------------- */

/* Sets the hooks' timer to the nearest thing due, when that changed. */
static void rearm(sluice_async *a)
{
    uint64_t at = UINT64_MAX, now = sluice__monotonic_ms();

    if (a->ready != NULL) {
        at = now;
    } else {
        for (const sluice__acall *c = a->calls; c != NULL; c = c->next)
            if (!c->ready && c->deadline_ms < at)
                at = c->deadline_ms;
        if (a->v != NULL && sluice__async_route_wake(a) < at)
            at = sluice__async_route_wake(a); /* a pause, a back-off */
        for (size_t i = 0; i < a->nconns; i++) {
            const sluice__aconn *k = a->conns[i];

            if ((k->state == SLUICE__ACONN_CONNECTING ||
                 k->state == SLUICE__ACONN_HELLO) &&
                k->connect_deadline_ms < at)
                at = k->connect_deadline_ms;
        }
    }
    if (at == a->timer_at && at != now)
        return;
    a->timer_at = at;
    if (at == UINT64_MAX)
        a->hooks.timer(a->hooks.loop_data, -1);
    else
        a->hooks.timer(a->hooks.loop_data,
                       at > now ? (long long)(at - now) : 0);
}

/* The end of every entry point: callbacks, then the timer, then a free
   asked for from inside a callback. */
static void turn_end(sluice_async *a, bool callbacks)
{
    if (a->depth == 1 && callbacks)
        run_ready(a);
    a->depth--;
    if (a->depth == 0 && a->free_asked) {
        a->free_asked = false;
        sluice_async_free(a);
        return;
    }
    if (a->depth == 0 && !a->freeing)
        rearm(a);
}

/* ---- Connections ------------------------------------------------------------------ */

sluice__aconn *sluice__async_conn(sluice_async *a, sluice__vk_node *node)
{
    sluice__aconn *k, **grown;

    for (size_t i = 0; i < a->nconns; i++)
        if (a->conns[i]->node == node)
            return a->conns[i];
    if ((k = calloc(1, sizeof(*k))) == NULL)
        return NULL;
    if ((grown = realloc(a->conns, (a->nconns + 1) * sizeof(*grown))) ==
        NULL) {
        free(k);
        return NULL;
    }
    a->conns = grown;
    k->a = a;
    k->node = node;
    k->fd = -1;
    k->queue_tail = &k->queue;
    k->sent_tail = &k->sent;
    a->conns[a->nconns++] = k;
    return k;
}

void sluice__async_watch(sluice_async *a, sluice__aconn *conn, int fd,
                         int events)
{
    if (conn->fd >= 0 && conn->fd != fd) {
        a->hooks.watch(a->hooks.loop_data, conn->fd, 0);
        conn->fd = -1;
        conn->events = 0;
    }
    if (fd < 0 || (fd == conn->fd && events == conn->events))
        return;
    conn->fd = events != 0 ? fd : -1;
    conn->events = events;
    a->hooks.watch(a->hooks.loop_data, fd, events);
}

/* ---- The guard ----------------------------------------------------------------------- */

int sluice__async_settle(sluice_async *a, const sluice__acall *c,
                         sluice_request *q, int err)
{
    if (a->guard != NULL)
        err = sluice__guard_settle(a->guard, &c->limit, q->key, q->key_len,
                                   q->cost, c->consume, c->asked_ms, err,
                                   &q->decision);
    if (err < 0)
        memset(&q->decision, 0, sizeof(q->decision));
    return err;
}

/* ---- The handle ---------------------------------------------------------------------- */

int sluice_async_new(sluice_async **out, sluice_store *store,
                     const sluice_async_hooks *hooks)
{
    sluice_async *a;

    if (out != NULL)
        *out = NULL;
    if (out == NULL || store == NULL || hooks == NULL ||
        hooks->watch == NULL || hooks->timer == NULL)
        return sluice__error(SLUICE_EINVAL, "out, store, hooks, or their "
                             "watch or timer hook is NULL");
    if (hooks->reserved[0] != NULL || hooks->reserved[1] != NULL)
        return sluice__error(SLUICE_EINVAL, "the hooks' reserved fields "
                             "must be NULL");
    if ((a = calloc(1, sizeof(*a))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for an async handle");
    a->store = store;
    a->hooks = *hooks;
    a->ready_tail = &a->ready;
    a->timer_at = UINT64_MAX;
    sluice__async_routing_init(&a->route);
    if (store->backend.server != NULL)
        a->v = store->backend.impl;
    a->guard = sluice__guard_of(store);
    *out = a;
    return SLUICE_OK;
}

void sluice_async_free(sluice_async *a)
{
    if (a == NULL || a->freeing)
        return;
    if (a->depth > 0) { /* from a callback: at the end of this turn */
        a->free_asked = true;
        return;
    }
    a->freeing = true;
    a->depth++;
    for (size_t i = 0; i < a->nconns; i++)
        sluice__aconn_free(a->conns[i],
                           sluice__error(SLUICE_ECANCELED, "the async handle "
                                         "was freed with the call pending"));
    free(a->conns);
    a->conns = NULL;
    a->nconns = 0;
    /* Answered or not, a call not yet called back is cancelled: what it
       did on the store (an embedded decision, a server's count) stands. */
    for (sluice__acall *c = a->calls; c != NULL; c = c->next) {
        if (c->ready && c->parent == NULL) {
            c->err = SLUICE_ECANCELED;
            if (c->kind == SLUICE__ACALL_MANY)
                for (size_t i = 0; i < c->n; i++)
                    c->reqs[i].err = SLUICE_ECANCELED;
        }
        snprintf(c->msg, sizeof(c->msg), "the async handle was freed with "
                 "the call pending");
        sluice__acall_ready(a, c, SLUICE_ECANCELED);
    }
    while (a->ready != NULL) /* calls started from these answer ECANCELED */
        run_ready(a);
    a->hooks.timer(a->hooks.loop_data, -1);
    if (a->hooks.cleanup != NULL)
        a->hooks.cleanup(a->hooks.loop_data);
    free(a);
}

void sluice_async_on_fd(sluice_async *a, int fd, int events)
{
    if (a == NULL || a->freeing)
        return;
    a->depth++;
    for (size_t i = 0; i < a->nconns; i++)
        if (a->conns[i]->fd == fd && fd >= 0) {
            sluice__aconn_on_fd(a->conns[i], events);
            break;
        }
    turn_end(a, true);
}

void sluice_async_on_timer(sluice_async *a)
{
    uint64_t now;

    if (a == NULL || a->freeing)
        return;
    a->depth++;
    a->timer_at = UINT64_MAX; /* it fired: set it again */
    now = sluice__monotonic_ms();
    for (size_t i = 0; i < a->nconns; i++)
        (void)sluice__aconn_tick(a->conns[i], now);
    if (a->v != NULL)
        sluice__async_route_tick(a, now);
    /* What is overdue and sent nowhere (queued on no connection). */
    for (sluice__acall *c = a->calls; c != NULL; c = c->next)
        if (!c->ready && c->conn == NULL && c->deadline_ms <= now &&
            a->v != NULL && c->kind != SLUICE__ACALL_MANY) {
            snprintf(c->msg, sizeof(c->msg), "async call: timed out (no "
                     "answer within %llu ms)",
                     (unsigned long long)a->v->command_timeout_ms);
            c->parked = false;
            /* A decision through the guard: the policy answers for it. */
            sluice__acall_fail(a, c, SLUICE_ETIMEDOUT);
        }
    turn_end(a, true);
}

size_t sluice_async_pending(const sluice_async *a)
{
    return a != NULL ? a->pending : 0;
}

/* The start of a call's entry point, and its end (handle.c's turn). */
int sluice__async_enter(sluice_async *a)
{
    if (a == NULL)
        return sluice__error(SLUICE_EINVAL, "the async handle is NULL");
    if (a->freeing)
        return sluice__error(SLUICE_ECANCELED, "the async handle is being "
                             "freed");
    a->depth++;
    return SLUICE_OK;
}

void sluice__async_leave(sluice_async *a)
{
    turn_end(a, false); /* never a callback inside the call that starts it */
}
