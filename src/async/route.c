/*
 * route.c - which node serves an async call, and what a redirection does
 * to it: the async half of valkey/cluster.c and valkey/sentinel.c.
 *
 *   single server  its one node;
 *   cluster        the map's node for the call's slot (v->slots under the
 *                  map's read lock: the map is the store's, shared with the
 *                  blocking path). A slot with no node, or a map marked
 *                  stale (MOVED, a node that failed), is reread by sending
 *                  CLUSTER SLOTS on the handle's own connection to a known
 *                  node, one node after another (those that failed lately
 *                  last), at most once per REFRESH_GAP_MS; calls for a slot
 *                  with no node are parked until it ends. A stale map that
 *                  still names a node is used meanwhile, as the blocking
 *                  path does;
 *   sentinel       the master the sentinels named last; when there is none
 *                  yet, or it failed or answered READONLY, each sentinel is
 *                  asked in turn (SENTINEL GET-MASTER-ADDR-BY-NAME), what
 *                  it names confirmed with ROLE, and the rounds repeat
 *                  after a back-off (10 ms doubling to 200 ms) while calls
 *                  wait, parked, each by its own deadline (handle.c fails
 *                  a parked call at its deadline, as any call sent
 *                  nowhere).
 *
 * Redirections (sluice__async_redirected()) are followed as
 * sluice__vk_follow() follows them, with the same readers
 * (valkey/control.h): MOVED mends the map and dispatches the calls again;
 * ASK queues them once on the named node, after ASKING; TRYAGAIN parks
 * them for 2, 4, ... 50 ms on the handle's timer, not a sleep; a call
 * redirected MAX_SENDS times is in a loop: SLUICE_ECONFIG.
 *
 * The control calls (CLUSTER SLOTS, SENTINEL ..., ROLE) are calls of kind
 * CMD queued on a node's connection like any other, with route.c's
 * callbacks: they count in sluice_async_pending() while they run.
 */
#include "async/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SENDS 5
#define REFRESH_GAP_MS 100
#define TRYAGAIN_FIRST_MS 2
#define TRYAGAIN_MAX_PAUSE_MS 50
#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 200

void sluice__async_routing_init(sluice__async_routing *rs)
{
    memset(rs, 0, sizeof(*rs));
    rs->round_at_ms = UINT64_MAX;
}

/* Keeps 'err' and its message as the last failure of a reread or round. */
static void keep_failure(sluice__async_routing *rs, int err, const char *msg)
{
    rs->err = err;
    snprintf(rs->msg, sizeof(rs->msg), "%s",
             msg != NULL ? msg : sluice_last_error());
}

/* ---- Control calls and parked calls ------------------------------------------------ */

/*
 * Sends the command argv[0..argc) to node 'n' on the handle's connection
 * to it; 'fn' runs once, from the loop, with its reply or an error (an
 * error reply mapped as the blocking path maps it). An error answered
 * here means 'fn' will not run.
 */
static int ctl_send(sluice_async *a, sluice__vk_node *n, int argc,
                    const char **argv, const size_t *lens,
                    sluice__async_reply_fn fn, void *arg)
{
    char *text = NULL, *cmd = NULL;
    long long len = redisFormatCommandArgv(&text, argc, argv, lens);
    sluice__acall *c;

    /* The call owns a malloc() copy (handle.c frees it with free()). */
    if (len >= 0 && (cmd = malloc((size_t)len)) != NULL)
        memcpy(cmd, text, (size_t)len);
    if (text != NULL)
        redisFreeCommand(text);
    if (cmd == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a command");
    if (a->freeing) { /* the handle's last turn: nothing new starts */
        free(cmd);
        return sluice__error(SLUICE_ECANCELED, "the async handle is being "
                             "freed");
    }
    if ((c = sluice__acall_new(a, SLUICE__ACALL_CMD, arg)) == NULL) {
        free(cmd);
        return SLUICE_ENOMEM;
    }
    c->cb.reply = fn;
    c->cmd = cmd;
    c->cmd_len = (size_t)len;
    sluice__aconn_queue(a, n, c);
    return SLUICE_OK;
}

/*
 * The parked calls whose pause is over: dispatched again (err 0), or
 * answered with 'err' and its message 'msg'.
 */
static void unpark(sluice_async *a, int err, const char *msg)
{
    uint64_t now = sluice__monotonic_ms();

    if (a->freeing) /* every call is answered ECANCELED by the free */
        return;
    for (sluice__acall *c = a->calls, *next; c != NULL; c = next) {
        next = c->next;
        if (!c->parked || c->ready || c->wake_ms > now)
            continue;
        c->parked = false;
        if (err == 0) {
            sluice__async_dispatch(a, c);
            continue;
        }
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
        sluice__acall_fail(a, c, err);
    }
}

static bool parked_any(const sluice_async *a)
{
    for (const sluice__acall *c = a->calls; c != NULL; c = c->next)
        if (c->parked && !c->ready)
            return true;
    return false;
}

/* ---- The cluster's map ------------------------------------------------------------ */

static void map_reply(sluice_async *a, int err, redisReply *r,
                      const char *msg, void *arg);

/* The next node to ask for the map: the nodes that did not fail lately,
   then those that did; NULL when every one was asked. */
static sluice__vk_node *map_next_node(sluice__vk_store *v,
                                      sluice__async_routing *rs)
{
    uint64_t now = sluice__monotonic_ms();

    for (;;) {
        sluice__vk_node *n = NULL;
        size_t nn, k = rs->map_k++;

        pthread_rwlock_rdlock(&v->map_lock);
        nn = v->nnodes;
        if (k < 2 * nn)
            n = v->nodes[k % nn];
        pthread_rwlock_unlock(&v->map_lock);
        if (n == NULL)
            return NULL;
        if ((k / nn == 0) !=
            sluice__vk_failed_recently(atomic_load(&n->failed_ms), now))
            return n;
    }
}

/* Sends CLUSTER SLOTS to the next node that takes it: 1 sent, or the last
   failure when no node is left to ask (the reread is then over). */
static int map_ask_next(sluice_async *a)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    static const size_t lens[] = {7, 5};
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    sluice__vk_node *n;

    while ((n = map_next_node(v, rs)) != NULL) {
        int err = ctl_send(a, n, 2, argv, lens, map_reply, n);

        if (err == 0)
            return 1;
        keep_failure(rs, err, NULL);
    }
    rs->map_asking = false;
    rs->map_done_ms = sluice__monotonic_ms();
    rs->map_done_ok = false;
    return sluice__error(rs->err, "cluster: no node answered CLUSTER SLOTS: "
                         "%s", rs->msg);
}

/* Starts a reread of the map: 1 under way, or an error. */
static int map_start(sluice_async *a)
{
    sluice__async_routing *rs = &a->route;

    rs->map_asking = true;
    rs->map_k = 0;
    keep_failure(rs, SLUICE_ECONN, "cluster: no node to ask for the map");
    return map_ask_next(a);
}

/* A node's answer to CLUSTER SLOTS: the map, and the parked calls routed
   again; else the next node asked, and the calls failed when none is
   left. */
static void map_reply(sluice_async *a, int err, redisReply *r,
                      const char *msg, void *arg)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    sluice__vk_node *n = arg;

    if (err == 0) {
        err = sluice__vk_map_apply(v, n, r);
        msg = NULL;
        freeReplyObject(r);
    }
    if (err == 0) {
        atomic_store(&v->map_stale, 0);
        atomic_store(&n->failed_ms, 0);
        rs->map_asking = false;
        rs->map_done_ms = sluice__monotonic_ms();
        rs->map_done_ok = true;
        unpark(a, 0, NULL);
        return;
    }
    keep_failure(rs, err, msg);
    sluice__vk_node_noted(v, n, err);
    if ((err = map_ask_next(a)) < 0)
        unpark(a, err, sluice_last_error());
}

/* A cluster's node for 'slot' (see the top). */
static int cluster_route(sluice_async *a, unsigned slot,
                         sluice__vk_node **out)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    uint64_t now = sluice__monotonic_ms();
    bool recent = rs->map_done_ms != 0 &&
                  now - rs->map_done_ms < REFRESH_GAP_MS;
    int err;

    if (atomic_load(&v->map_stale) && !rs->map_asking && !recent &&
        (err = map_start(a)) < 0 && err == SLUICE_ENOMEM)
        return err; /* else: a failed reread keeps the map */
    *out = NULL;
    pthread_rwlock_rdlock(&v->map_lock);
    if (v->slots[slot] >= 0)
        *out = v->nodes[v->slots[slot]];
    pthread_rwlock_unlock(&v->map_lock);
    if (*out != NULL)
        return SLUICE_OK;
    if (rs->map_asking)
        return 1;
    /* A reread that ended just now named no node for the slot: asking at
       once again would only loop. */
    if (recent && rs->map_done_ok)
        return sluice__error(SLUICE_ECONN, "cluster: no node serves slot %u",
                             slot);
    if (recent)
        return sluice__error(rs->err, "cluster: no node serves slot %u: %s",
                             slot, rs->msg);
    return (err = map_start(a)) < 0 ? err : 1;
}

/* ---- A sentinel store's master ------------------------------------------------------- */

static int sentinel_ask_next(sluice_async *a);

/* A round in which no sentinel named a master (the error kept): the asking
   ends for an error no other round mends; else a new round after the
   back-off (sluice__async_route_tick()), if a call still waits then. */
static int round_failed(sluice_async *a)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    int err = rs->err;

    if (err != SLUICE_ECONFIG && err != SLUICE_EAUTH &&
        err != SLUICE_ENOMEM) {
        rs->round_at_ms = sluice__monotonic_ms() + rs->backoff_ms;
        rs->backoff_ms = rs->backoff_ms * 2 < BACKOFF_MAX_MS
                             ? rs->backoff_ms * 2
                             : BACKOFF_MAX_MS;
        return 1;
    }
    rs->master_asking = false;
    return sluice__error(err, "sentinel: no master '%s' confirmed: %s",
                         v->master_name, rs->msg);
}

/* The back-off is over: a new round, if a call still waits. */
static void round_again(sluice_async *a)
{
    sluice__async_routing *rs = &a->route;
    int err;

    rs->round_at_ms = UINT64_MAX;
    if (!parked_any(a)) {
        rs->master_asking = false;
        return;
    }
    rs->sentinel_i = 0;
    if ((err = sentinel_ask_next(a)) < 0)
        unpark(a, err, sluice_last_error());
}

/* Node 'n''s answer to ROLE: a master is the store's master from now on,
   and the parked calls go to it; else the next sentinel. */
static void role_reply(sluice_async *a, int err, redisReply *r,
                       const char *msg, void *arg)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    sluice__vk_node *n = arg;

    if (err == 0) {
        err = sluice__vk_role_parse(v, n, r);
        msg = NULL;
        freeReplyObject(r);
    }
    if (err == 0) {
        atomic_store(&v->master, n);
        atomic_store(&v->master_stale, 0);
        atomic_store(&v->sentinel_next, rs->sentinel_at);
        rs->master_asking = false;
        rs->backoff_ms = BACKOFF_FIRST_MS;
        unpark(a, 0, NULL);
        return;
    }
    keep_failure(rs, err, msg);
    if ((err = sentinel_ask_next(a)) < 0)
        unpark(a, err, sluice_last_error());
}

/* A sentinel's answer: the master it names, asked for its ROLE. */
static void addr_reply(sluice_async *a, int err, redisReply *r,
                       const char *msg, void *arg)
{
    const char *argv[] = {"ROLE"};
    static const size_t lens[] = {4};
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    sluice__vk_node *s = arg, *n = NULL;
    char host[256];
    int port = 0;

    if (err == 0) {
        err = sluice__vk_sentinel_addr_parse(v, s, r, host, sizeof(host),
                                             &port);
        msg = NULL;
        freeReplyObject(r);
    }
    if (err == 0 &&
        (n = sluice__vk_node_get(v, host, strlen(host), port)) == NULL)
        err = sluice__error(SLUICE_ENOMEM, "no memory for a node");
    if (err == 0 &&
        (err = ctl_send(a, n, 1, argv, lens, role_reply, n)) ==
            0)
        return;
    keep_failure(rs, err, msg);
    if (err == SLUICE_ECONFIG || err == SLUICE_EAUTH || err == SLUICE_ENOMEM)
        rs->sentinel_i = v->nsentinels; /* the round ends, and the asking */
    if ((err = sentinel_ask_next(a)) < 0)
        unpark(a, err, sluice_last_error());
}

/* Asks the next sentinel of the round, from the one that answered last:
   1 asked (or a new round on the timer), or an error that ends it. */
static int sentinel_ask_next(sluice_async *a)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    const char *argv[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                          v->master_name};
    size_t lens[] = {8, 23, strlen(v->master_name)};

    while (rs->sentinel_i < v->nsentinels) {
        unsigned at = (unsigned)((atomic_load(&v->sentinel_next) +
                                  rs->sentinel_i++) % v->nsentinels);
        int err;

        rs->sentinel_at = at;
        err = ctl_send(a, v->sentinels[at], 3, argv, lens,
                                    addr_reply, v->sentinels[at]);
        if (err == 0)
            return 1;
        keep_failure(rs, err, NULL);
    }
    return round_failed(a);
}

/* A sentinel store's master (see the top). */
static int master_route(sluice_async *a, sluice__vk_node **out)
{
    sluice__vk_store *v = a->v;
    sluice__async_routing *rs = &a->route;
    sluice__vk_node *n = atomic_load(&v->master);

    if (n != NULL && !atomic_load(&v->master_stale)) {
        *out = n;
        return SLUICE_OK;
    }
    *out = NULL;
    if (rs->master_asking)
        return 1;
    rs->master_asking = true;
    rs->sentinel_i = 0;
    rs->backoff_ms = BACKOFF_FIRST_MS;
    keep_failure(rs, SLUICE_ECONN, "no sentinel answered");
    return sentinel_ask_next(a);
}

/* ---- The engine's two questions ---------------------------------------------------- */

int sluice__async_route(sluice_async *a, unsigned slot,
                        sluice__vk_node **out)
{
    sluice__vk_store *v = a->v;

    if (v->sentinel)
        return master_route(a, out);
    if (!v->cluster) {
        *out = v->nodes[0];
        return SLUICE_OK;
    }
    return cluster_route(a, slot, out);
}

void sluice__async_dispatch(sluice_async *a, sluice__acall *c)
{
    sluice__vk_node *n = NULL;
    int rc = sluice__async_route(a, c->slot, &n);

    c->conn = NULL;
    if (rc == 0) {
        sluice__aconn_queue(a, n, c);
    } else if (rc == 1) {
        c->parked = true;
        c->wake_ms = 0;
    } else {
        sluice__acall_fail(a, c, rc);
    }
}

uint64_t sluice__async_route_wake(const sluice_async *a)
{
    uint64_t at = a->route.round_at_ms;

    for (const sluice__acall *c = a->calls; c != NULL; c = c->next)
        if (c->parked && !c->ready && c->wake_ms != 0 && c->wake_ms < at)
            at = c->wake_ms;
    return at;
}

void sluice__async_route_tick(sluice_async *a, uint64_t now_ms)
{
    bool paused = false;

    if (a->route.round_at_ms <= now_ms)
        round_again(a);
    for (const sluice__acall *c = a->calls; c != NULL; c = c->next)
        paused |= c->parked && !c->ready && c->wake_ms != 0 &&
                  c->wake_ms <= now_ms;
    if (paused)
        unpark(a, 0, NULL);
}

/* ---- Redirections --------------------------------------------------------------- */

/* The calls batch 'b' answers: its owners (a decision batch), or its one
   call. */
static size_t batch_count(const sluice__abatch *b)
{
    return b->kind == SLUICE__ABATCH_DECIDE ? b->n : 1;
}

static sluice__acall *batch_call(const sluice__abatch *b, size_t i)
{
    return b->kind == SLUICE__ABATCH_DECIDE ? b->owners[i].call : b->call;
}

/*
 * Sends b's calls again, each alone as it was started, and frees 'b'
 * unanswered: to node 'n' after ASKING (ASK), or where they are served
 * now (n NULL), or parked for 'pause_ms' first (TRYAGAIN).
 */
static void batch_again(sluice_async *a, sluice__abatch *b,
                        sluice__vk_node *n, uint64_t pause_ms)
{
    for (size_t i = 0; i < batch_count(b); i++) {
        sluice__acall *c = batch_call(b, i);

        if (c == NULL || c->ready)
            continue;
        c->conn = NULL;
        if (pause_ms > 0) {
            c->parked = true;
            c->wake_ms = sluice__monotonic_ms() + pause_ms;
        } else if (n != NULL) {
            c->asking = true;
            sluice__aconn_queue(a, n, c);
        } else {
            sluice__async_dispatch(a, c);
        }
    }
    sluice__abatch_free(b);
}

/* The most redirections any of b's calls has followed, counting this
   one; each call's count goes up. */
static int batch_sends(sluice__abatch *b)
{
    int most = 0;

    for (size_t i = 0; i < batch_count(b); i++) {
        sluice__acall *c = batch_call(b, i);

        if (c != NULL && ++c->redirects > most)
            most = c->redirects;
    }
    return most;
}

/* TRYAGAIN: the slot's keys are mid-move; again after a pause that does
   not count as a send, while every call's deadline allows. */
static int try_again(sluice_async *a, sluice__abatch *b)
{
    uint64_t now = sluice__monotonic_ms(), pause = TRYAGAIN_FIRST_MS;

    for (size_t i = 0; i < batch_count(b); i++) {
        sluice__acall *c = batch_call(b, i);

        if (c != NULL && c->tryagain_ms > (long)pause)
            pause = (uint64_t)c->tryagain_ms;
    }
    for (size_t i = 0; i < batch_count(b); i++) {
        sluice__acall *c = batch_call(b, i);

        if (c == NULL)
            continue;
        if (now + pause >= c->deadline_ms)
            return sluice__error(SLUICE_ECONN, "cluster: the keys of slot %u "
                                 "stayed mid-move (TRYAGAIN) until the "
                                 "deadline", c->slot);
        c->tryagain_ms = (long)(pause * 2 > TRYAGAIN_MAX_PAUSE_MS
                                    ? TRYAGAIN_MAX_PAUSE_MS
                                    : pause * 2);
    }
    batch_again(a, b, NULL, pause);
    return 1;
}

/* MOVED or ASK, parsed: the map mended (MOVED) and the calls sent again,
   unless one was redirected MAX_SENDS times. */
static int redirect(sluice_async *a, sluice__abatch *b, const redisReply *r,
                    bool ask, const char *host, size_t host_len, int port)
{
    sluice__vk_store *v = a->v;
    sluice__vk_node *n = NULL;
    sluice__acall *first = batch_call(b, 0);

    atomic_fetch_add(&v->redirects, 1);
    if (ask && (n = sluice__vk_node_get(v, host, host_len, port)) == NULL)
        return sluice__error(SLUICE_ENOMEM, "no memory for a node");
    if (!ask && first != NULL)
        sluice__vk_map_moved(v, first->slot, host, host_len, port);
    if (batch_sends(b) >= MAX_SENDS)
        return sluice__error(SLUICE_ECONFIG, "cluster: slot %u still "
                             "redirected after %d tries (last: %.*s): its "
                             "nodes disagree about who serves it",
                             first != NULL ? first->slot : 0, MAX_SENDS,
                             (int)(r->len > 80 ? 80 : r->len), r->str);
    batch_again(a, b, n, 0);
    return 1;
}

int sluice__async_redirected(sluice__aconn *conn, sluice__abatch *b,
                             const redisReply *r)
{
    sluice_async *a = conn->a;
    sluice__vk_store *v = a->v;
    const char *host;
    size_t host_len;
    unsigned slot;
    bool ask;
    int port;

    if (r->type != REDIS_REPLY_ERROR || v == NULL)
        return 0;
    /* A sentinel store's master that is a replica now: the write was
       refused, so it goes again once the sentinels name the new one. */
    if (v->sentinel && r->len >= 8 && strncmp(r->str, "READONLY", 8) == 0) {
        if (batch_sends(b) >= MAX_SENDS)
            return 0;
        atomic_store(&v->master_stale, 1);
        batch_again(a, b, NULL, 0);
        return 1;
    }
    if (!v->cluster)
        return 0;
    if (sluice__vk_redirect_parse(r, &ask, &slot, &host, &host_len,
                                  &port) == 0)
        return redirect(a, b, r, ask, host, host_len, port);
    if (sluice__vk_redirection(r))
        return sluice__error(SLUICE_EPROTO, "cluster: a redirection that "
                             "names no node: %.*s",
                             (int)(r->len > 80 ? 80 : r->len), r->str);
    if (r->len >= 8 && strncmp(r->str, "TRYAGAIN", 8) == 0)
        return try_again(a, b);
    return 0;
}
