/*
 * decide.c - decisions on a server: one script call for many requests.
 *
 * A decision script decides any number of keys in one call (see
 * src/algo/prelude.lua for its arguments), and most of a call's cost on the
 * server is the call itself, not the commands it runs. Where the node's
 * native module decides the algorithm, the call is SLUICE.HITMANY instead
 * of EVALSHA (engine.c), with the same keys and the same flat reply, so
 * everything below serves both. So a batch
 * (sluice_hit_many()) is one call per slot among its keys (in a cluster) and
 * per GROUP_MAX requests. The calls of a batch are queued on their nodes'
 * connections together, written to every node before any reply is read, and
 * only then awaited (a call set, vk_calls), so the nodes work at once. A
 * call that was redirected or met a server without the script did not run,
 * and goes again alone, following the cluster (cluster.c). Each key's
 * decision stays atomic and in its caller's order; the batch as a whole is
 * no transaction.
 *
 * The guard (src/store/guard.c) wraps all of this: the refused-key cache
 * and the failure policy are not here.
 */
#include "valkey/valkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The most requests one script call decides: a larger batch is sent as
 * several calls, in turn. The arguments of one call stay under a few MB.
 */
#define GROUP_MAX 512

/* ---- One script call ---------------------------------------------------------------- */

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

/* Reads request 'i's four integers from a script's flat reply. */
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

/*
 * The arguments of one call for 'n' requests. To a script: EVALSHA, the
 * SHA1, NUMKEYS, the n keys, then max, window, consume, now and token, then
 * the n costs, then the burst (src/algo/prelude.lua). To the module:
 * SLUICE.HITMANY algo max window [BURST b] [PEEK] [NOW ms] KEYS, then each
 * key and its cost. One block holds them (the caller's 'stack' when they
 * fit), unless a key is too long for its VK_KEY_BUF slot.
 */
typedef struct group_args {
    int argc;
    size_t key0, kstep; /* key i is argv[key0 + kstep * i] */
    const char **argv;
    size_t *lens;
    char (*keys)[VK_KEY_BUF];
    char (*nums)[24]; /* numkeys, max, window, now, burst, then the costs */
    char token[40];   /* the store's seed and a count, in hex */
    void *block;
    bool on_heap;
} group_args;

static void group_args_free(group_args *g, size_t n)
{
    for (size_t i = 0; i < n && g->block != NULL; i++) {
        const char *k = g->argv[g->key0 + g->kstep * i];

        if (k != NULL && k != g->keys[i])
            free((char *)k);
    }
    if (g->on_heap)
        free(g->block);
}

/* Lays out the block of 'g' for 'n' requests: every pointer, then the
   keys' and numbers' room. */
static int group_args_alloc(group_args *g, void *stack, size_t stack_cap,
                            size_t n)
{
    size_t argc = 10 + 2 * n; /* the module's, at most; a script's 9 + 2n */
    size_t need = argc * (sizeof(char *) + sizeof(size_t)) +
                  n * VK_KEY_BUF + (5 + n) * 24;

    g->argc = (int)argc;
    g->key0 = 3;
    g->kstep = 1;
    g->on_heap = need > stack_cap;
    g->block = g->on_heap ? calloc(1, need) : memset(stack, 0, need);
    if (g->block == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", n);
    g->argv = g->block;
    g->lens = (size_t *)(g->argv + argc);
    g->keys = (char (*)[VK_KEY_BUF])(g->lens + argc);
    g->nums = (char (*)[24])(g->keys + n);
    return SLUICE_OK;
}

/* Sets argument 'j' of 'g' to the number 'v', written into 'buf'. */
static void group_arg_u64(group_args *g, size_t j, char *buf, uint64_t v)
{
    g->argv[j] = buf;
    g->lens[j] = sluice__u64_text(buf, v);
}

/* Sets argument 'j' of 'g' to the literal 'text'. */
static void group_arg_text(group_args *g, size_t j, const char *text)
{
    g->argv[j] = text;
    g->lens[j] = strlen(text);
}

/* Sets key i of 'g' to request q's key name. */
static int group_arg_key(group_args *g, size_t i, vk_store *v,
                         const sluice__algo *algo, const sluice_request *q)
{
    size_t j = g->key0 + g->kstep * i;

    g->argv[j] = sluice__key_build(g->keys[i], VK_KEY_BUF, &g->lens[j],
                                   v->prefix, q->key, q->key_len, algo->name);
    if (g->argv[j] == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot build a key name");
    return SLUICE_OK;
}

/* The arguments of SLUICE.HITMANY (see group_args), in the laid out 'g'. */
static int group_args_module(group_args *g, vk_store *v,
                             const sluice_limit *limit, bool consume,
                             const sluice_request *reqs, const size_t *todo,
                             size_t n)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    size_t j = 0, now_len = 0, token_len = 0;
    int err;

    group_arg_text(g, j++, "SLUICE.HITMANY");
    group_arg_text(g, j++, algo->name);
    group_arg_u64(g, j++, g->nums[1], limit->max);
    group_arg_u64(g, j++, g->nums[2], limit->window_ms);
    if (limit->burst != 0) {
        group_arg_text(g, j++, "BURST");
        group_arg_u64(g, j++, g->nums[4], limit->burst);
    }
    if (!consume)
        group_arg_text(g, j++, "PEEK");
    if ((err = sluice__vk_now_token(v, g->nums[3], &now_len, g->token,
                                    &token_len)) < 0)
        return err;
    if (now_len > 0) { /* clock=caller */
        group_arg_text(g, j++, "NOW");
        g->argv[j] = g->nums[3];
        g->lens[j++] = now_len;
    }
    group_arg_text(g, j++, "KEYS");
    g->key0 = j;
    g->kstep = 2;
    for (size_t i = 0; i < n; i++) {
        if ((err = group_arg_key(g, i, v, algo, &reqs[todo[i]])) < 0)
            return err;
        group_arg_u64(g, j + 2 * i + 1, g->nums[5 + i], reqs[todo[i]].cost);
    }
    g->argc = (int)(j + 2 * n);
    return SLUICE_OK;
}

/* The arguments of one call: to the module when 'module', else to the
   algorithm's script. */
static int group_args_build(group_args *g, void *stack, size_t stack_cap,
                            vk_store *v, const sluice_limit *limit,
                            bool consume, const sluice_request *reqs,
                            const size_t *todo, size_t n, bool module)
{
    const sluice__algo *algo = sluice__algos[limit->algo];
    size_t j = 3 + n;
    int err = group_args_alloc(g, stack, stack_cap, n);

    if (err < 0)
        return err;
    if (module)
        return group_args_module(g, v, limit, consume, reqs, todo, n);
    g->argc = (int)(9 + 2 * n);
    g->argv[0] = "EVALSHA";
    g->lens[0] = 7;
    g->argv[1] = sluice__algo_scripts[limit->algo]->sha1;
    g->lens[1] = 40;
    group_arg_u64(g, 2, g->nums[0], n);
    for (size_t i = 0; i < n; i++)
        if ((err = group_arg_key(g, i, v, algo, &reqs[todo[i]])) < 0)
            return err;
    group_arg_u64(g, j++, g->nums[1], limit->max);
    group_arg_u64(g, j++, g->nums[2], limit->window_ms);
    g->argv[j] = consume ? "1" : "0";
    g->lens[j++] = 1;
    g->argv[j] = g->nums[3];
    g->argv[j + 1] = g->token;
    if ((err = sluice__vk_now_token(v, g->nums[3], &g->lens[j], g->token,
                                    &g->lens[j + 1])) < 0)
        return err;
    j += 2;
    for (size_t i = 0; i < n; i++)
        group_arg_u64(g, j++, g->nums[5 + i], reqs[todo[i]].cost);
    group_arg_u64(g, j, g->nums[4], sluice__limit_burst(limit));
    return SLUICE_OK;
}

/*
 * Hands out a script call's answer to its requests reqs[todo[0..n)]: the
 * reply 'r' (freed here), or the error 'err' for each. A failed request's
 * message goes to msgs[todo[i]] when 'msgs' is not NULL.
 */
static void group_answer(const sluice_limit *limit, sluice_request *reqs,
                         const size_t *todo, size_t n, vk_msg *msgs,
                         const group_args *g, int err, redisReply *r)
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
            snprintf(msgs[todo[i]], sizeof(vk_msg), "%s", sluice_last_error());
    }
    if (r != NULL)
        freeReplyObject(r);
}

/* The cluster slot of request q's key under 'limit' (0 for one server;
   out of memory, 0 too, and the call itself will say so). */
static unsigned request_slot(vk_store *v, const sluice_limit *limit,
                             const sluice_request *q)
{
    char kbuf[VK_KEY_BUF];
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

/* Whether the call of 'algo' on route 'rt' goes to the module ('*module',
   engine.c), or SLUICE_ENOTSUP (engine=module, a module without it). */
static int route_engine(vk_store *v, const vk_route *rt, sluice_algo algo,
                        bool *module)
{
    vk_node *n = rt->ask;

    if (n == NULL && v->cluster)
        sluice__vk_map_refresh(v, false); /* a failed reread keeps the map */
    if (n == NULL)
        n = sluice__vk_node_for_slot(v, rt->slot, rt->deadline_ms);
    return sluice__vk_engine_pick(v, n, algo, module);
}

/*
 * Decides requests reqs[todo[0..n)], whose keys share one slot, with one
 * call on 'rt' (NULL: the route of the first key, answered by
 * 'deadline_ms'), to the module where its node's module decides the
 * algorithm (never when 'lua_only'), and sets each one's 'err' and
 * 'decision' (and msgs[todo[i]] as group_answer() does). A server that lost
 * the module, or the algorithm, since it was asked gets the script at once
 * (engine=auto).
 */
static void decide_group(vk_store *v, vk_route *rt, uint64_t deadline_ms,
                         const sluice_limit *limit, bool consume,
                         sluice_request *reqs, const size_t *todo, size_t n,
                         vk_msg *msgs, bool lua_only)
{
    _Alignas(max_align_t) char stack[1024];
    group_args g = {0};
    redisReply *r = NULL;
    vk_route own;
    bool module = false;
    int err = SLUICE_OK;

    if (rt == NULL) {
        rt = &own;
        sluice__vk_route_init(rt, request_slot(v, limit, &reqs[todo[0]]),
                              deadline_ms);
    }
    if (!lua_only)
        err = route_engine(v, rt, limit->algo, &module);
    if (err == 0)
        err = group_args_build(&g, stack, sizeof(stack), v, limit, consume,
                               reqs, todo, n, module);
    if (err == 0)
        err = sluice__vk_call_routed(
            v, rt, module ? NULL : sluice__algo_scripts[limit->algo],
            g.argc, g.argv, g.lens, &r);
    if (module && err == SLUICE_ENOTSUP && v->engine == SLUICE_ENGINE_AUTO) {
        group_args_free(&g, n);
        decide_group(v, rt, deadline_ms, limit, consume, reqs, todo, n, msgs,
                     true);
        return;
    }
    if (module && err == 0)
        atomic_fetch_add(&v->module_calls, 1);
    group_answer(limit, reqs, todo, n, msgs, &g, err, err == 0 ? r : NULL);
    group_args_free(&g, n);
}

/* ---- Call sets ------------------------------------------------------------------------ */

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

/* One script call of a set. */
typedef struct slot_call {
    struct slot_call *next;
    const sluice_limit *limit;
    bool consume;
    const size_t *todo; /* its requests: reqs[todo[0..n)] */
    size_t n;
    unsigned slot;
    vk_node *node;      /* NULL: not queued; sent alone when awaited */
    vk_conn *conn;
    vk_request *led;    /* the batch this call's set wrote on 'conn' */
    int led_err;        /* and what writing it answered */
    bool module;        /* sent to the module, not to the script */
    group_args g;
    char *cmd;
    vk_request e;
} slot_call;

/* The connection a call to 'node' queues on: the set's own, if another of
   its calls goes there already, so they leave in one write. */
static vk_conn *set_conn(const vk_calls *cs, const slot_call *c)
{
    for (const slot_call *o = cs->head; o != c; o = o->next)
        if (o->node == c->node)
            return o->conn;
    return sluice__vk_node_pick(c->node);
}

/*
 * Adds the call for requests reqs[todo[0..n)], whose keys are in 'slot', and
 * queues it on its node's connection. Out of memory, it is decided at once.
 */
static void calls_add_one(vk_calls *cs, const sluice_limit *limit,
                          bool consume, const size_t *todo, size_t n,
                          unsigned slot)
{
    vk_store *v = cs->v;
    slot_call *c = calloc(1, sizeof(*c));
    long long len;

    if (c == NULL) {
        decide_group(v, NULL, cs->deadline_ms, limit, consume, cs->reqs, todo,
                     n, cs->msgs, false);
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
    c->slot = slot;
    /* Not queued (decided alone when awaited) if any step fails here. */
    c->node = sluice__vk_node_for_slot(v, slot, cs->deadline_ms);
    if (c->node == NULL ||
        sluice__vk_engine_pick(v, c->node, limit->algo, &c->module) < 0 ||
        group_args_build(&c->g, NULL, 0, v, limit, consume, cs->reqs, todo,
                         n, c->module) < 0 ||
        (len = redisFormatCommandArgv(&c->cmd, c->g.argc, c->g.argv,
                                      c->g.lens)) < 0) {
        c->node = NULL;
        return;
    }
    c->e.cmd = c->cmd;
    c->e.len = (size_t)len;
    c->e.ncmds = 1;
    c->e.deadline_ms = cs->deadline_ms;
    c->conn = set_conn(cs, c);
    sluice__vk_conn_submit(c->conn, &c->e);
}

/* Orders reqs[send[0..m)] by their keys' slots; answers the slots, in the
   new order, or NULL when out of memory. */
static slot_place *by_slot(const vk_calls *cs, const sluice_limit *limit,
                           size_t *send, size_t m)
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

int sluice__vk_calls_add(vk_calls *cs, const sluice_limit *limit,
                         bool consume, size_t *send, size_t m)
{
    slot_place *sp;

    if (!cs->v->cluster) {
        for (size_t s = 0; s < m; s += GROUP_MAX)
            calls_add_one(cs, limit, consume, send + s,
                          m - s < GROUP_MAX ? m - s : GROUP_MAX, 0);
        return SLUICE_OK;
    }
    if ((sp = by_slot(cs, limit, send, m)) == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a batch of %zu", m);
    sluice__vk_map_refresh(cs->v, false); /* a failed reread keeps the map */
    for (size_t s = 0, e; s < m; s = e) {
        for (e = s; e < m && e - s < GROUP_MAX && sp[e].slot == sp[s].slot;)
            e++;
        calls_add_one(cs, limit, consume, send + s, e - s, sp[s].slot);
    }
    free(sp);
    return SLUICE_OK;
}

/*
 * Reads what the set's leads wrote, each connection as its replies arrive
 * (one at a time, in order, should there be no memory for the list).
 */
static void leads_end(vk_calls *cs)
{
    vk_lead stack[16], *leads = stack;
    size_t n = 0, i = 0;
    slot_call *c;

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
            leads[i++] = (vk_lead){c->node, c->conn, c->led, c->led_err};
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
static void calls_write_all(vk_calls *cs)
{
    slot_call *c;

    for (c = cs->head; c != NULL; c = c->next) {
        bool first = c->node != NULL;

        for (slot_call *o = cs->head; o != c && first; o = o->next)
            first = o->conn != c->conn;
        if (first)
            c->led = sluice__vk_conn_lead(cs->v, c->node, c->conn,
                                          &c->led_err);
    }
    leads_end(cs);
}

/*
 * Answers call 'c' of the set from its reply: as it is, or, when it did not
 * run (a redirection, a server without the script, or without the module
 * or the algorithm since it was asked: noted on the node), by sending it
 * again alone on its route.
 */
static void call_answer(vk_calls *cs, slot_call *c)
{
    vk_store *v = cs->v;
    int err = sluice__vk_conn_await(v, c->node, c->conn, &c->e);
    redisReply *r = c->e.reply;
    vk_route rt;
    int again;

    sluice__vk_node_noted(v, c->node, err);
    if (err == 0 && r->type == REDIS_REPLY_ERROR) {
        bool lost = c->module &&
                    sluice__vk_reply_noted(c->node, r) != VK_LACK_NONE &&
                    v->engine == SLUICE_ENGINE_AUTO;

        sluice__vk_route_init(&rt, c->slot, cs->deadline_ms);
        rt.sends = 1;
        again = sluice__vk_noscript(r) || lost ? 1
                                               : sluice__vk_follow(v, &rt, r);
        if (again > 0) {
            freeReplyObject(r);
            decide_group(v, &rt, 0, c->limit, c->consume, cs->reqs, c->todo,
                         c->n, cs->msgs, lost);
            return;
        }
        err = again < 0 ? again
                        : sluice__vk_reply_error(c->node, r, c->g.argv[0]);
        freeReplyObject(r);
    } else if (err == 0 && c->module) {
        atomic_fetch_add(&v->module_calls, 1);
    }
    group_answer(c->limit, cs->reqs, c->todo, c->n, cs->msgs, &c->g, err,
                 err == 0 ? r : NULL);
}

void sluice__vk_calls_finish(vk_calls *cs)
{
    slot_call *c, *next;

    calls_write_all(cs);
    for (c = cs->head; c != NULL; c = next) {
        next = c->next;
        if (c->node == NULL)
            decide_group(cs->v, NULL, cs->deadline_ms, c->limit, c->consume,
                         cs->reqs, c->todo, c->n, cs->msgs, false);
        else
            call_answer(cs, c);
        if (c->cmd != NULL)
            redisFreeCommand(c->cmd);
        group_args_free(&c->g, c->n);
        free(c);
    }
    cs->head = NULL;
    cs->tail = &cs->head;
}

/* ---- The store's decisions -------------------------------------------------------- */

int sluice__vk_decide_many(void *impl, const sluice_limit *limit,
                           sluice_request *reqs, const size_t *todo, size_t n)
{
    vk_store *v = impl;
    size_t *send = malloc(n * sizeof(*send));
    vk_calls cs = VK_CALLS_INIT(v, reqs, NULL,
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
    vk_store *v = impl;
    sluice_request q = {key, key_len, cost, 0, {0}};
    const size_t only = 0;

    decide_group(v, NULL, sluice__monotonic_ms() + v->command_timeout_ms,
                 limit, consume, &q, &only, 1, NULL, false);
    *out = q.decision;
    return q.err;
}

int sluice__vk_now_token(vk_store *v, char *now, size_t *now_len, char *token,
                         size_t *token_len)
{
    *now_len = 0; /* "": the server's clock */
    if (v->caller_clock) {
        uint64_t t = v->clock_ms(v->clock_payload);

        if (t > SLUICE_NOW_MAX_MS)
            return sluice__error(SLUICE_ERANGE,
                                 "the clock reads %llu ms, beyond 2^53",
                                 (unsigned long long)t);
        *now_len = sluice__u64_text(now, t);
    }
    *token_len = (size_t)snprintf(
        token, 40, "%016llx%llx", (unsigned long long)v->token_seed,
        (unsigned long long)atomic_fetch_add(&v->token_next, 1));
    return SLUICE_OK;
}
