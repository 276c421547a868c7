/*
 * calls.c - what an async connection sends, and what it does with the
 * replies.
 *
 * When a connection may write, its queue is taken whole. Decisions are
 * grouped by limit and by hit or peek, and each group is one call of up
 * to SLUICE__VK_GROUP_MAX requests: EVALSHA of the algorithm's script or
 * SLUICE.HITMANY of the module, whichever the node's engine decides it
 * (sluice__vk_engine_pick()), with the arguments and the reply checks of
 * the blocking path (decide.h). A command (a reset's DEL, the queue's
 * scripts) is one call of its own.
 *
 * A call that did not run goes again on the same connection: after
 * NOSCRIPT, with SCRIPT LOAD written before it (once; a second NOSCRIPT is
 * the error); to the script, when the module lacks the algorithm
 * (engine=auto: noted on the node, as the blocking path notes it); where a
 * cluster's redirection says (route.c).
 */
#include "async/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Failing and answering calls ----------------------------------------------------- */

void sluice__acall_fail(sluice_async *a, sluice__acall *c, int err)
{
    if (c->kind == SLUICE__ACALL_DECIDE) {
        if (err < 0 && c->msg[0] == '\0')
            snprintf(c->msg, sizeof(c->msg), "%s", sluice_last_error());
        c->one.err = err;
        err = sluice__async_settle(a, c, &c->one, err);
    }
    sluice__acall_ready(a, c, err);
}

void sluice__abatch_free(sluice__abatch *b)
{
    if (b == NULL)
        return;
    sluice__vk_args_free(&b->g, b->n);
    free(b->reqs);
    free(b->owners);
    free(b);
}

/* Hands request i of decision batch 'b' (answered: err and decision) to
   the call it came from. */
static void owner_answer(sluice_async *a, sluice__abatch *b, size_t i,
                         const char *msg)
{
    sluice__acall *c = b->owners[i].call;
    const sluice_request *q = &b->reqs[i];

    c->one.err = q->err;
    c->one.decision = q->decision;
    if (q->err < 0 && msg != NULL)
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
    sluice__acall_ready(a, c, sluice__async_settle(a, c, &c->one, q->err));
}

/* ---- Writing -------------------------------------------------------------------------- */

static void batch_sent(sluice__aconn *conn, sluice__abatch *b)
{
    b->next = NULL;
    *conn->sent_tail = b;
    conn->sent_tail = &b->next;
    conn->a->calls_sent++;
}

/* Writes SCRIPT LOAD of 'script' before a call sent again after NOSCRIPT;
   its reply is read and dropped (the call's own says what went wrong). */
static int script_load(sluice__aconn *conn, const sluice__script *script,
                       uint64_t deadline_ms)
{
    const char *argv[] = {"SCRIPT", "LOAD", script->text};
    size_t lens[] = {6, 4, script->len};
    sluice__abatch *b = calloc(1, sizeof(*b));
    int err;

    if (b == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for SCRIPT LOAD");
    if ((err = sluice__vk_wire_append_argv(conn->w, 3, argv, lens)) < 0) {
        free(b);
        return err;
    }
    b->kind = SLUICE__ABATCH_HELLO;
    b->hello = 3; /* aconn.c's HELLO_SCRIPT */
    b->deadline_ms = deadline_ms;
    batch_sent(conn, b);
    return SLUICE_OK;
}

/* Formats decision batch 'b' onto the wire: to the module or the script. */
/* ASKING, when a cluster's ASK sent 'b' here: right before b's command
   (after any SCRIPT LOAD), as it holds for the next command only; its
   +OK is skipped before b's reply. */
static int asking_write(sluice__aconn *conn, sluice__abatch *b)
{
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";

    b->skip = b->asking ? 1 : 0;
    if (!b->asking)
        return SLUICE_OK;
    return sluice__vk_wire_append(conn->w, asking, sizeof(asking) - 1);
}

static int decide_send(sluice__aconn *conn, sluice__abatch *b)
{
    sluice_async *a = conn->a;
    size_t ident[SLUICE__VK_GROUP_MAX];
    int err = SLUICE_OK;

    for (size_t i = 0; i < b->n; i++)
        ident[i] = i;
    b->module = false;
    sluice__vk_args_free(&b->g, b->n);
    if (!b->lua_only)
        err = sluice__vk_engine_pick(a->v, conn->node, b->limit.algo,
                                     &b->module);
    if (err == 0)
        err = sluice__vk_args_build(&b->g, NULL, 0, a->v, &b->limit,
                                    b->consume, b->reqs, ident, b->n,
                                    b->module);
    if (err == 0 && b->script_given && !b->module)
        err = script_load(conn, sluice__algo_scripts[b->limit.algo],
                          b->deadline_ms);
    if (err == 0)
        err = asking_write(conn, b);
    if (err == 0)
        err = sluice__vk_wire_append_argv(conn->w, b->g.argc, b->g.argv,
                                          b->g.lens);
    return err;
}

/* Formats command batch 'b' onto the wire: the module's twin where the
   node has the module, else the command (EVALSHA of its script). */
static int cmd_send(sluice__aconn *conn, sluice__abatch *b)
{
    sluice__acall *c = b->call;
    bool module = c->module_cmd != NULL && !b->lua_only &&
                  sluice__vk_engine_module(conn->a->v, conn->node);
    int err = SLUICE_OK;

    b->module = module;
    if (b->script_given && c->script != NULL && !module)
        err = script_load(conn, c->script, b->deadline_ms);
    if (err == 0)
        err = asking_write(conn, b);
    if (err == 0)
        err = module ? sluice__vk_wire_append(conn->w, c->module_cmd,
                                              c->module_len)
                     : sluice__vk_wire_append(conn->w, c->cmd, c->cmd_len);
    return err;
}

/* Sends 'b' (again): onto the wire and the sent list, or answered with
   the error that kept it from being formatted. */
static void batch_send(sluice__aconn *conn, sluice__abatch *b)
{
    int err = b->kind == SLUICE__ABATCH_DECIDE ? decide_send(conn, b)
                                               : cmd_send(conn, b);

    if (err < 0) {
        sluice__acalls_answer(conn, b, err, sluice_last_error(), NULL);
        return;
    }
    batch_sent(conn, b);
}

void sluice__aconn_resend(sluice__aconn *conn, sluice__abatch *b)
{
    batch_send(conn, b);
    if (conn->w != NULL)
        sluice__async_watch(conn->a, conn, conn->w->fd,
                            SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE);
}

/* One group of decisions queued: one limit, hit or peek; in a cluster,
   one slot (a script's keys must share one), and sent after ASKING or
   not. A call that was redirected (or met TRYAGAIN) goes alone, as the
   blocking path sends it again: a group's keys may be split by a slot's
   move, and one key never is. */
typedef struct group {
    sluice_limit limit;
    bool consume;
    unsigned slot;
    bool asking;
    bool solo; /* a redirected call: alone, as the blocking path resends */
    sluice__acall *head, **tail;
    size_t n;
} group;

static bool limit_same(const sluice_limit *x, const sluice_limit *y)
{
    return x->algo == y->algo && x->max == y->max &&
           x->window_ms == y->window_ms && x->burst == y->burst;
}

/*
 * The group call 'c' joins, or 'ngroups' for a new one. Calls keep their
 * order where it matters: one of an algorithm's keys (a hit, a peek; any
 * limit of that algorithm names the same key) joins a group only when no
 * later group holds calls of the same algorithm (in a cluster: and slot).
 * Another algorithm's keys are other keys, so its groups are passed over.
 * In a cluster a group is one slot (one call may not cross slots); a call
 * sent after ASKING goes with others of that ASK only, and a redirected
 * one alone, as the blocking path resends it.
 */
static size_t group_find(const group *groups, size_t ngroups,
                         const sluice__acall *c, bool cluster)
{
    bool solo = c->redirects > 0 || c->tryagain_ms > 0;

    for (size_t i = ngroups; i-- > 0;) {
        const group *g = &groups[i];
        bool same_slot = !cluster || g->slot == c->slot;

        if (!solo && !g->solo && g->consume == c->consume &&
            limit_same(&g->limit, &c->limit) && g->asking == c->asking &&
            same_slot)
            return i;
        /* In a cluster, a key is in one slot: another slot's group holds
           other keys. */
        if (g->limit.algo == c->limit.algo && same_slot)
            break;
    }
    return ngroups;
}

/* A batch of the next 'n' calls of group 'g'. */
static sluice__abatch *group_batch(group *g, size_t n)
{
    sluice__abatch *b = calloc(1, sizeof(*b));

    if (b == NULL || (b->reqs = calloc(n, sizeof(*b->reqs))) == NULL ||
        (b->owners = calloc(n, sizeof(*b->owners))) == NULL) {
        if (b != NULL)
            free(b->reqs);
        free(b);
        return NULL;
    }
    b->kind = SLUICE__ABATCH_DECIDE;
    b->limit = g->limit;
    b->consume = g->consume;
    b->asking = g->asking;
    b->n = n;
    b->deadline_ms = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        sluice__acall *c = g->head;

        g->head = c->qnext;
        c->qnext = NULL;
        b->reqs[i] = c->one;
        b->owners[i].call = c;
        c->asking = false; /* once per ASK */
        if (c->deadline_ms < b->deadline_ms)
            b->deadline_ms = c->deadline_ms;
    }
    return b;
}

/* Sends group 'g' as calls of up to SLUICE__VK_GROUP_MAX requests. */
static void group_send(sluice__aconn *conn, group *g)
{
    while (g->n > 0) {
        size_t n = g->n < SLUICE__VK_GROUP_MAX ? g->n : SLUICE__VK_GROUP_MAX;
        sluice__abatch *b = group_batch(g, n);

        g->n -= n;
        if (b == NULL) {
            int err = sluice__error(SLUICE_ENOMEM, "no memory for a batch");

            for (size_t i = 0; i < n && g->head != NULL; i++) {
                sluice__acall *c = g->head;

                g->head = c->qnext;
                sluice__acall_fail(conn->a, c, err);
            }
            continue;
        }
        batch_send(conn, b);
    }
}

static void cmd_batch(sluice__aconn *conn, sluice__acall *c)
{
    sluice__abatch *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        sluice__acall_fail(conn->a, c, sluice__error(SLUICE_ENOMEM, "no "
                                                     "memory for a call"));
        return;
    }
    b->kind = SLUICE__ABATCH_CMD;
    b->call = c;
    b->asking = c->asking;
    c->asking = false; /* once per ASK */
    b->deadline_ms = c->deadline_ms;
    batch_send(conn, b);
}

void sluice__acalls_write(sluice__aconn *conn)
{
    group stack[8], *groups = stack;
    size_t ngroups = 0, cap = 8;
    sluice__acall *c = conn->queue, *next;

    conn->queue = NULL;
    conn->queue_tail = &conn->queue;
    for (; c != NULL; c = next) {
        size_t i;

        next = c->qnext;
        c->qnext = NULL;
        if (c->kind != SLUICE__ACALL_DECIDE) {
            /* A command (a reset) may name a key decided before it: what
               is grouped so far goes first, in order. */
            for (i = 0; i < ngroups && conn->w != NULL; i++)
                group_send(conn, &groups[i]);
            ngroups = 0;
            if (conn->w != NULL)
                cmd_batch(conn, c);
            else
                sluice__acall_fail(conn->a, c, conn->last_err);
            continue;
        }
        i = group_find(groups, ngroups, c, conn->a->v->cluster);
        if (i == ngroups && ngroups == cap) {
            group *grown = malloc(2 * cap * sizeof(*grown));

            if (grown == NULL) { /* send what is grouped, this one alone */
                sluice__acall_fail(conn->a, c, sluice__error(SLUICE_ENOMEM,
                                   "no memory for a batch"));
                continue;
            }
            memcpy(grown, groups, ngroups * sizeof(*grown));
            if (groups != stack)
                free(groups);
            groups = grown;
            cap *= 2;
        }
        if (i == ngroups) {
            groups[i] = (group){c->limit, c->consume, c->slot, c->asking,
                                c->redirects > 0 || c->tryagain_ms > 0,
                                NULL, NULL, 0};
            groups[i].tail = &groups[i].head;
            ngroups++;
        }
        *groups[i].tail = c;
        groups[i].tail = &c->qnext;
        groups[i].n++;
    }
    for (size_t i = 0; i < ngroups && conn->w != NULL; i++)
        group_send(conn, &groups[i]);
    if (groups != stack)
        free(groups);
}

/* ---- Replies ---------------------------------------------------------------------------- */

/*
 * What error reply 'r' to 'b' means: 1 it was sent again (NOSCRIPT, a
 * module that lacks the algorithm, a redirection), else the error.
 */
static int batch_refused(sluice__aconn *conn, sluice__abatch *b,
                         const redisReply *r, const char *doing)
{
    sluice__vk_store *v = conn->a->v;
    bool scripted = b->kind == SLUICE__ABATCH_DECIDE || b->call->script != NULL;
    int again;

    if (!b->module && scripted && !b->script_given &&
        sluice__vk_noscript(r)) {
        b->script_given = true;
        sluice__aconn_resend(conn, b);
        return 1;
    }
    if ((again = sluice__async_redirected(conn, b, r)) != 0)
        return again;
    if (sluice__vk_reply_noted(conn->node, r) != SLUICE__VK_LACK_NONE &&
        b->module && v->engine == SLUICE_ENGINE_AUTO) {
        b->lua_only = true;
        sluice__aconn_resend(conn, b);
        return 1;
    }
    return sluice__vk_reply_error(conn->node, r, doing);
}

static void decide_answer(sluice__aconn *conn, sluice__abatch *b, int err,
                          const char *msg, redisReply *r)
{
    sluice_async *a = conn->a;
    size_t ident[SLUICE__VK_GROUP_MAX];
    sluice__vk_msg *msgs = calloc(b->n, sizeof(*msgs));

    for (size_t i = 0; i < b->n; i++)
        ident[i] = i;
    if (err == 0 && b->module)
        atomic_fetch_add(&a->v->module_calls, 1);
    sluice__vk_answer(&b->limit, b->reqs, ident, b->n, msgs,
                      b->g.argv != NULL ? &b->g : NULL, err, r);
    for (size_t i = 0; i < b->n; i++)
        owner_answer(a, b, i,
                     msgs != NULL && msgs[i][0] != '\0' ? msgs[i] : msg);
    free(msgs);
    sluice__abatch_free(b);
}

void sluice__acalls_answer(sluice__aconn *conn, sluice__abatch *b, int err,
                           const char *msg, redisReply *r)
{
    const char *doing = b->kind == SLUICE__ABATCH_DECIDE && b->g.argv != NULL
                            ? b->g.argv[0]
                            : "call";
    int rc;

    if (r != NULL && b->skip > 0) { /* ASKING's +OK */
        b->skip--;
        freeReplyObject(r);
        b->next = conn->sent; /* its own reply comes next */
        conn->sent = b;
        if (b->next == NULL)
            conn->sent_tail = &b->next;
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        rc = batch_refused(conn, b, r, doing);
        freeReplyObject(r);
        r = NULL;
        if (rc == 1)
            return;
        err = rc;
        msg = sluice_last_error();
    }
    if (b->kind == SLUICE__ABATCH_DECIDE) {
        decide_answer(conn, b, err, msg, r);
        return;
    }
    if (err < 0 && msg != NULL)
        snprintf(b->call->msg, sizeof(b->call->msg), "%s", msg);
    else if (b->module)
        atomic_fetch_add(&conn->a->v->module_calls, 1);
    b->call->reply = r;
    sluice__acall_ready(conn->a, b->call, err);
    sluice__abatch_free(b);
}
