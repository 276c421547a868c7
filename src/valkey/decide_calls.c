/*
 * decide_calls.c - decisions on a server: call sets, the one way from a
 * decision to the wire.
 *
 * A decision call decides any number of keys of one limit (decide_args.c),
 * and most of a call's cost on the server is the call itself, not the
 * commands it runs. So a batch (sluice_hit_many()) is one call per slot
 * among its keys (in a cluster) and per SLUICE__VK_GROUP_MAX requests. The
 * calls of a set are queued on their nodes' connections together, written to
 * every node before any reply is read, and only then awaited, so the nodes
 * work at once. A single sluice_hit() is a set of one call, on every kind
 * of store: one server (combine.c makes a set of the threads deciding at
 * once), a cluster, a sentinel's master.
 *
 * A call that did not run goes again, with the set's next round, until it
 * has its answer or the set's deadline: redirected (MOVED, ASK, TRYAGAIN,
 * a sentinel's master turned replica: followed by cluster.c on the call's
 * route, at most MAX_SENDS sends), sent to a server without the script
 * (given it once, SCRIPT LOAD), or to a module that lost the algorithm
 * since it was asked (then to the script, engine=auto). Each key's
 * decision stays atomic and in its caller's order; the batch as a whole
 * is no transaction.
 *
 * The guard (src/store/guard.c) wraps all of this: the refused-key cache
 * and the failure policy are not here.
 */
#include "valkey/decide.h"

#include <stdlib.h>
#include <string.h>

/* The room in a call for its arguments, enough for one request's (a
   single hit's): more take a block of their own (decide_args.c). */
#define CALL_ARGS_ROOM 640

/* The ASKING that goes before a call an ASK redirected, in one write. */
static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";

/* ---- A call's sends ------------------------------------------------------------ */

/* One call of a set: its requests, its route, and its send in flight. */
typedef struct sluice__slot_call {
    struct sluice__slot_call *next;
    const sluice_limit *limit;
    bool consume;
    const size_t *todo; /* its requests: reqs[todo[0..n)] */
    size_t n;
    sluice__vk_route rt;        /* its slot, its sends, an ASK's node */
    bool lua_only;      /* the module lost the algorithm: the script */
    bool script_given;  /* a NOSCRIPT was answered with the script once */
    bool again;         /* to be sent again in the set's next round */
    sluice__vk_node *node;      /* the send in flight went there; NULL: none */
    sluice__vk_conn *conn;
    sluice__vk_request *led;    /* the batch this call's set wrote on 'conn' */
    int led_err;        /* and what writing it answered */
    bool module;        /* sent to the module, not to the script */
    sluice__vk_args g;
    char *cmd;          /* the formatted call, after ASKING if 'asking' */
    bool asking;
    sluice__vk_request e;
    _Alignas(max_align_t) char args_room[CALL_ARGS_ROOM];
} sluice__slot_call;

/* Frees what the last send of 'c' took. */
static void call_clear(sluice__slot_call *c)
{
    if (c->cmd != NULL && c->asking)
        free(c->cmd);
    else if (c->cmd != NULL)
        redisFreeCommand(c->cmd);
    c->cmd = NULL;
    sluice__vk_args_free(&c->g, c->n);
}

/* Answers every request of 'c' with the error 'err', sent or not. */
static void call_fail(sluice__vk_calls *cs, sluice__slot_call *c, int err)
{
    sluice__vk_answer(c->limit, cs->reqs, c->todo, c->n, cs->msgs, &c->g, err,
                      NULL);
    c->node = NULL;
}

/* The connection a call to 'node' queues on: the set's own, if another of
   its calls in flight goes there already, so they leave in one write. */
static sluice__vk_conn *set_conn(const sluice__vk_calls *cs,
                                 const sluice__slot_call *c)
{
    for (const sluice__slot_call *o = cs->head; o != c; o = o->next)
        if (o->node == c->node)
            return o->conn;
    return sluice__vk_node_pick(c->node);
}

/* Formats the arguments of 'c' into c->cmd, after ASKING when 'asking'. */
static int call_format(sluice__slot_call *c, bool asking)
{
    size_t alen = sizeof(asking_cmd) - 1;
    long long len = redisFormatCommandArgv(&c->cmd, c->g.argc, c->g.argv,
                                           c->g.lens);
    char *both;

    if (len < 0)
        return sluice__error(SLUICE_ENOMEM, "cannot format a command");
    c->e.len = (size_t)len;
    c->e.ncmds = 1;
    if (asking) {
        if ((both = malloc(alen + (size_t)len)) == NULL)
            return sluice__error(SLUICE_ENOMEM, "cannot format a command");
        memcpy(both, asking_cmd, alen);
        memcpy(both + alen, c->cmd, (size_t)len);
        redisFreeCommand(c->cmd);
        c->cmd = both;
        c->asking = true;
        c->e.len += alen;
        c->e.ncmds = 2;
    }
    c->e.cmd = c->cmd;
    return SLUICE_OK;
}

/*
 * Queues the next send of call 'c' on its node's connection: to the node
 * an ASK named, else to the one that serves its slot; to the module where
 * that node's module decides the algorithm (never once it lost it). A step
 * that fails answers the call with its error, unsent.
 */
static void call_send(sluice__vk_calls *cs, sluice__slot_call *c)
{
    sluice__vk_store *v = cs->v;
    bool asking = c->rt.ask != NULL;
    int err = SLUICE_OK;

    call_clear(c);
    c->asking = false;
    c->module = false;
    c->node = c->rt.ask;
    c->rt.ask = NULL;
    if (c->node == NULL && v->cluster && c->rt.sends > 0)
        sluice__vk_map_refresh(v, false); /* a failed reread keeps the map */
    if (c->node == NULL)
        err = sluice__vk_route_node(v, &c->rt, &c->node);
    if (err == 0 && !c->lua_only)
        err = sluice__vk_engine_pick(v, c->node, c->limit->algo, &c->module);
    if (err == 0)
        err = sluice__vk_args_build(&c->g, c->args_room, sizeof(c->args_room),
                                    v, c->limit, c->consume, cs->reqs,
                                    c->todo, c->n, c->module);
    if (err == 0)
        err = call_format(c, asking);
    if (err < 0) {
        call_fail(cs, c, err);
        return;
    }
    c->rt.sends++;
    c->e.deadline_ms = c->rt.deadline_ms;
    c->conn = set_conn(cs, c);
    sluice__vk_conn_submit(c->conn, &c->e);
}

/*
 * What the error reply 'r' to a send of 'c' means: 1, send it again (with
 * the script given to a node that lacked it, a redirection followed, or,
 * engine=auto, the script for a module that lost the algorithm); else the
 * error to answer it with.
 */
static int call_refused(sluice__vk_calls *cs, sluice__slot_call *c,
                        const redisReply *r)
{
    sluice__vk_store *v = cs->v;
    int again, err;

    if (!c->module && !c->script_given && sluice__vk_noscript(r)) {
        c->script_given = true;
        c->rt.sends--; /* the send the script was missing for is no try */
        if (c->asking)
            c->rt.ask = c->node; /* again where the ASK sent it */
        err = sluice__vk_script_give(
            v, c->node, c->rt.deadline_ms,
            sluice__algo_scripts[c->limit->algo]);
        return err < 0 ? err : 1;
    }
    if ((again = sluice__vk_follow(v, &c->rt, r)) != 0)
        return again;
    if (sluice__vk_reply_noted(c->node, r) != SLUICE__VK_LACK_NONE &&
        c->module && v->engine == SLUICE_ENGINE_AUTO) {
        c->lua_only = true;
        return 1;
    }
    return sluice__vk_reply_error(c->node, r, c->g.argv[0]);
}

/* Answers call 'c' from the reply to its send, or marks it to go again. */
static void call_answer(sluice__vk_calls *cs, sluice__slot_call *c)
{
    sluice__vk_store *v = cs->v;
    int err = sluice__vk_conn_await(v, c->node, c->conn, &c->e);
    redisReply *r = c->e.reply;

    sluice__vk_node_noted(v, c->node, err);
    if (err == 0 && r->type == REDIS_REPLY_ERROR) {
        err = call_refused(cs, c, r);
        freeReplyObject(r);
        r = NULL;
        if (err > 0) {
            c->again = true;
            c->node = NULL;
            return;
        }
    } else if (err == 0 && c->module) {
        atomic_fetch_add(&v->module_calls, 1);
    }
    sluice__vk_answer(c->limit, cs->reqs, c->todo, c->n, cs->msgs, &c->g, err,
                      err == 0 ? r : NULL);
    c->node = NULL;
}

/* ---- Call sets ----------------------------------------------------------------- */

/* A request's place in a batch, and its key's slot. */
typedef struct slot_place {
    unsigned slot;
    size_t place;
} slot_place;

static int slot_place_cmp(const void *a, const void *b)
{
    const slot_place *x = a, *y = b;

    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->place < y->place ? -1 : x->place > y->place;
}

/*
 * Adds the call for requests reqs[todo[0..n)], whose keys are in 'slot', and
 * queues it on its node's connection. Out of memory, its requests fail.
 */
static void calls_add_one(sluice__vk_calls *cs, const sluice_limit *limit,
                          bool consume, const size_t *todo, size_t n,
                          unsigned slot)
{
    sluice__slot_call *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        sluice__vk_answer(limit, cs->reqs, todo, n, cs->msgs, NULL,
                          sluice__error(SLUICE_ENOMEM, "no memory for a "
                                        "batch of %zu", n), NULL);
        return;
    }
    if (cs->tail == NULL)
        cs->tail = &cs->head;
    *cs->tail = c;
    cs->tail = &c->next;
    c->limit = limit;
    c->consume = consume;
    c->todo = todo;
    c->n = n;
    sluice__vk_route_init(&c->rt, slot, cs->deadline_ms);
    call_send(cs, c);
}

/* The cluster slot of request q's key under 'limit' (0 for one server;
   out of memory, 0 too, and the call itself will say so). */
static unsigned request_slot(sluice__vk_store *v, const sluice_limit *limit,
                             const sluice_request *q)
{
    char kbuf[SLUICE__VK_KEY_BUF];
    size_t klen = 0;
    char *k;
    unsigned slot;

    if (!v->cluster)
        return 0;
    k = sluice__key_build(kbuf, sizeof(kbuf), &klen, v->prefix, q->key,
                          q->key_len, sluice__algos[limit->algo]->name);
    slot = k != NULL ? sluice__key_slot(k, klen) : 0;
    if (k != NULL && k != kbuf)
        free(k);
    return slot;
}

/* Orders reqs[send[0..m)] by their keys' slots; answers the slots, in the
   new order, or NULL when out of memory. */
static slot_place *by_slot(const sluice__vk_calls *cs,
                           const sluice_limit *limit, size_t *send, size_t m)
{
    slot_place *sp = malloc(m * sizeof(*sp));

    if (sp == NULL)
        return NULL;
    for (size_t i = 0; i < m; i++) {
        sp[i].slot = request_slot(cs->v, limit, &cs->reqs[send[i]]);
        sp[i].place = send[i];
    }
    qsort(sp, m, sizeof(*sp), slot_place_cmp);
    for (size_t i = 0; i < m; i++)
        send[i] = sp[i].place;
    return sp;
}

int sluice__vk_calls_add(sluice__vk_calls *cs, const sluice_limit *limit,
                         bool consume, size_t *send, size_t m)
{
    slot_place *sp, one;

    if (!cs->v->cluster) {
        for (size_t s = 0; s < m; s += SLUICE__VK_GROUP_MAX)
            calls_add_one(
                cs, limit, consume, send + s,
                m - s < SLUICE__VK_GROUP_MAX ? m - s : SLUICE__VK_GROUP_MAX, 0);
        return SLUICE_OK;
    }
    if (m == 1) { /* a single hit: no order to make */
        one = (slot_place){request_slot(cs->v, limit, &cs->reqs[send[0]]),
                           send[0]};
        sp = &one;
    } else if ((sp = by_slot(cs, limit, send, m)) == NULL) {
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", m);
    }
    sluice__vk_map_refresh(cs->v, false); /* a failed reread keeps the map */
    for (size_t s = 0, e; s < m; s = e) {
        for (e = s;
             e < m && e - s < SLUICE__VK_GROUP_MAX && sp[e].slot == sp[s].slot;)
            e++;
        calls_add_one(cs, limit, consume, send + s, e - s, sp[s].slot);
    }
    if (sp != &one)
        free(sp);
    return SLUICE_OK;
}

/*
 * Reads what the set's leads wrote, each connection as its replies arrive
 * (one at a time, in order, should there be no memory for the list).
 */
static void leads_end(sluice__vk_calls *cs)
{
    sluice__vk_lead stack[16], *leads = stack;
    size_t n = 0, i = 0;
    sluice__slot_call *c;

    for (c = cs->head; c != NULL; c = c->next)
        n += c->led != NULL;
    if (n > sizeof(stack) / sizeof(stack[0]) &&
        (leads = malloc(n * sizeof(*leads))) == NULL) {
        for (c = cs->head; c != NULL; c = c->next)
            if (c->led != NULL)
                sluice__vk_conn_lead_end(cs->v, c->node, c->conn, c->led,
                                         c->led_err);
        return;
    }
    for (c = cs->head; c != NULL; c = c->next)
        if (c->led != NULL)
            leads[i++] =
                (sluice__vk_lead){c->node, c->conn, c->led, c->led_err};
    sluice__vk_conn_lead_end_all(cs->v, leads, n);
    if (leads != stack)
        free(leads);
}

/*
 * Writes what the set queued, node by node: on each connection the set
 * uses, unless another caller leads it already (then that caller writes
 * it). Then reads each batch written as its replies arrive, which waits
 * on nothing but the network: so a caller never waits for another while
 * it holds a connection that it wrote to, and a stalled node holds up
 * only its own connection.
 */
static void calls_write_all(sluice__vk_calls *cs)
{
    sluice__slot_call *c;

    for (c = cs->head; c != NULL; c = c->next) {
        bool first = c->node != NULL;

        c->led = NULL;
        for (sluice__slot_call *o = cs->head; o != c && first; o = o->next)
            first = o->node == NULL || o->conn != c->conn;
        if (first)
            c->led = sluice__vk_conn_lead(cs->v, c->node, c->conn,
                                          &c->led_err);
    }
    leads_end(cs);
}

/*
 * Rounds: writes every call in flight, answers each from its reply, then
 * sends again, together, those that did not run; until none is left.
 */
void sluice__vk_calls_finish(sluice__vk_calls *cs)
{
    sluice__slot_call *c, *next;
    bool in_flight = true;

    while (in_flight) {
        calls_write_all(cs);
        for (c = cs->head; c != NULL; c = c->next)
            if (c->node != NULL)
                call_answer(cs, c);
        in_flight = false;
        for (c = cs->head; c != NULL; c = c->next)
            if (c->again) {
                c->again = false;
                call_send(cs, c);
                in_flight |= c->node != NULL;
            }
    }
    for (c = cs->head; c != NULL; c = next) {
        next = c->next;
        call_clear(c);
        free(c);
    }
    cs->head = NULL;
    cs->tail = &cs->head;
}

/* ---- The store's decisions ----------------------------------------------------- */

int sluice__vk_decide_many(void *impl, const sluice_limit *limit,
                           sluice_request *reqs, const size_t *todo, size_t n)
{
    sluice__vk_store *v = impl;
    size_t *send = malloc(n * sizeof(*send));
    sluice__vk_calls cs = SLUICE__VK_CALLS_INIT(v, reqs, NULL,
                                sluice__monotonic_ms() + v->command_timeout_ms);
    int err;

    if (send == NULL) {
        err = sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
        for (size_t t = 0; t < n; t++)
            reqs[todo[t]].err = err;
        return err;
    }
    memcpy(send, todo, n * sizeof(*send));
    err = sluice__vk_calls_add(&cs, limit, true, send, n);
    sluice__vk_calls_finish(&cs);
    for (size_t t = 0; t < n && err < 0; t++)
        reqs[send[t]].err = err;
    free(send);
    return err;
}

int sluice__vk_decide(void *impl, const sluice_limit *limit, const char *key,
                      size_t key_len, uint64_t cost, bool consume,
                      sluice_decision *out)
{
    sluice__vk_store *v = impl;
    sluice_request q = {key, key_len, cost, 0, {0}};
    size_t only = 0;
    sluice__vk_calls cs = SLUICE__VK_CALLS_INIT(v, &q, NULL,
                                sluice__monotonic_ms() + v->command_timeout_ms);
    int err = sluice__vk_calls_add(&cs, limit, consume, &only, 1);

    sluice__vk_calls_finish(&cs);
    *out = q.decision;
    return err < 0 ? err : q.err;
}
