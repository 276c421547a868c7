/*
 * cluster.c - the cluster's map of slots to nodes, and the one place that
 * follows its redirections.
 *
 * Each of the 16384 slots names the node that serves it, learnt from
 * CLUSTER SLOTS. A call goes to its key's slot's node (slot.c):
 *
 *   MOVED slot host:port   the slot has moved for good: the map is mended
 *                          for that slot at once, reread in full on the next
 *                          call, and the call is sent again;
 *   ASK slot host:port     the slot is being moved: this one call is sent
 *                          again to that node, after ASKING;
 *   TRYAGAIN               keys of the slot are mid-move: again shortly,
 *                          for as long as the call's deadline allows;
 *   no answer              the node may be down: the error goes back to the
 *                          caller (within the timeout), and the next call
 *                          rereads the map, so once the cluster has promoted
 *                          a replica, calls reach it.
 *
 * Every call follows them here (sluice__vk_follow()), a decision's in its
 * call set (decide_calls.c), another's alone (sluice__vk_call_routed()):
 * at most MAX_SENDS sends per call. A call
 * still redirected then is in a loop (nodes that disagree about who serves
 * the slot): SLUICE_ECONFIG, which no failure policy stands in for, since
 * waiting mends nothing that a reshard's single hop would not have. Map rereads are at most one per REFRESH_GAP_MS, and nodes
 * that just failed are asked for the map last.
 */
#include "valkey/control.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SENDS 5
#define REFRESH_GAP_MS 100
#define FAILED_FOR_MS 5000
#define TRYAGAIN_MAX_PAUSE_MS 50

/* ---- Nodes --------------------------------------------------------------------- */

/*
 * The index of the node at host:port, added if new. Called with the map's
 * write lock held. -1 when out of memory.
 */
static int node_index_locked(sluice__vk_store *v, const char *host,
                             size_t host_len, int port)
{
    sluice__vk_node *n;

    for (size_t i = 0; i < v->nnodes; i++)
        if (v->nodes[i]->port == port && strlen(v->nodes[i]->host) == host_len &&
            memcmp(v->nodes[i]->host, host, host_len) == 0)
            return (int)i;
    if (v->nnodes == v->nodes_cap) {
        size_t cap = v->nodes_cap ? 2 * v->nodes_cap : 8;
        sluice__vk_node **nodes = realloc(v->nodes, cap * sizeof(*nodes));

        if (nodes == NULL)
            return -1;
        v->nodes = nodes;
        v->nodes_cap = cap;
    }
    if ((n = sluice__vk_node_new(host, host_len, port, v->transport,
                                 v->pool_size)) == NULL)
        return -1;
    if (v->sentinel) /* every node of a sentinel store is a master named */
        n->master_stale = &v->master_stale;
    v->nodes[v->nnodes] = n;
    return (int)v->nnodes++;
}

sluice__vk_node *sluice__vk_node_get(sluice__vk_store *v, const char *host,
                                     size_t host_len, int port)
{
    sluice__vk_node *n = NULL;
    int i;

    pthread_rwlock_wrlock(&v->map_lock);
    if ((i = node_index_locked(v, host, host_len, port)) >= 0)
        n = v->nodes[i];
    pthread_rwlock_unlock(&v->map_lock);
    return n;
}

/* ---- The map ------------------------------------------------------------------------ */

sluice__vk_node *sluice__vk_node_for_slot(sluice__vk_store *v, unsigned slot,
                                  uint64_t deadline_ms)
{
    sluice__vk_node *n = NULL;

    if (v->sentinel) {
        (void)sluice__vk_sentinel_node(v, deadline_ms, &n);
        return n;
    }
    if (!v->cluster)
        return v->nodes[0];
    pthread_rwlock_rdlock(&v->map_lock);
    if (v->slots[slot] >= 0)
        n = v->nodes[v->slots[slot]];
    pthread_rwlock_unlock(&v->map_lock);
    return n;
}

/* Splits "host:port" (the port after the last ':'); -1 if malformed. */
static int split_endpoint(const char *s, size_t len, size_t *host_len,
                          int *port)
{
    const char *colon = NULL;
    long p = 0;

    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (colon == NULL || colon == s || colon + 1 == s + len)
        return -1;
    for (const char *d = colon + 1; d < s + len; d++) {
        if (*d < '0' || *d > '9' || p > 65535)
            return -1;
        p = p * 10 + (*d - '0');
    }
    if (p < 1 || p > 65535)
        return -1;
    *host_len = (size_t)(colon - s);
    *port = (int)p;
    return 0;
}

/* True when 'range' is a well-formed entry of CLUSTER SLOTS: {first, last,
   {host, port, ...}, ...} with 0 <= first <= last < 16384. */
static bool range_ok(const redisReply *range)
{
    const redisReply *master;

    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER ||
        range->element[2]->type != REDIS_REPLY_ARRAY)
        return false;
    master = range->element[2];
    return master->elements >= 2 &&
           master->element[0]->type == REDIS_REPLY_STRING &&
           master->element[1]->type == REDIS_REPLY_INTEGER &&
           master->element[1]->integer >= 1 &&
           master->element[1]->integer <= 65535 &&
           range->element[0]->integer >= 0 &&
           range->element[1]->integer < (long long)SLUICE__SLOTS &&
           range->element[0]->integer <= range->element[1]->integer;
}

/*
 * Maps the slots of the CLUSTER SLOTS reply 'r' (from node 'n') into
 * 'slots', adding nodes as they are named. A master's host may be answered
 * empty (or "?"), meaning the host we asked. Under the map's write lock.
 */
static int map_fill_locked(sluice__vk_store *v, sluice__vk_node *n,
                           const redisReply *r, int32_t *slots)
{
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i], *master;
        const char *host;
        size_t host_len;
        int idx;

        if (!range_ok(range))
            return sluice__error(SLUICE_EPROTO, "valkey %s: CLUSTER SLOTS "
                                 "answered a malformed range", n->name);
        master = range->element[2];
        host = master->element[0]->str;
        host_len = master->element[0]->len;
        if (host_len == 0 || (host_len == 1 && host[0] == '?')) {
            host = n->host;
            host_len = strlen(n->host);
        }
        idx = node_index_locked(v, host, host_len,
                                (int)master->element[1]->integer);
        if (idx < 0)
            return sluice__error(SLUICE_ENOMEM, "out of memory");
        for (long long s = range->element[0]->integer;
             s <= range->element[1]->integer; s++)
            slots[s] = idx;
    }
    return SLUICE_OK;
}

int sluice__vk_map_apply(sluice__vk_store *v, sluice__vk_node *from,
                         const redisReply *r)
{
    int32_t *slots;
    int err;

    if (r->type == REDIS_REPLY_ERROR)
        return sluice__vk_reply_error(from, r, "CLUSTER SLOTS");
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: CLUSTER SLOTS "
                             "answered no slots", from->name);
    if ((slots = malloc(sizeof(v->slots))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "out of memory");
    for (unsigned s = 0; s < SLUICE__SLOTS; s++)
        slots[s] = -1;
    pthread_rwlock_wrlock(&v->map_lock);
    if ((err = map_fill_locked(v, from, r, slots)) == 0)
        memcpy(v->slots, slots, sizeof(v->slots));
    pthread_rwlock_unlock(&v->map_lock);
    free(slots);
    return err;
}

/* Reads CLUSTER SLOTS from node 'n' into the map. */
static int map_read_from(sluice__vk_store *v, sluice__vk_node *n)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    size_t lens[] = {7, 5};
    uint64_t deadline = sluice__monotonic_ms() + v->command_timeout_ms;
    redisReply *r = NULL;
    int err;

    if ((err = sluice__vk_node_command(v, n, false, deadline, 2, argv, lens,
                                       &r)) < 0)
        return err;
    err = sluice__vk_map_apply(v, n, r);
    freeReplyObject(r);
    return err;
}

bool sluice__vk_failed_recently(uint64_t failed_ms, uint64_t now_ms)
{
    /* A failure noted after 'now_ms' was read is the most recent of all
       (and must not wrap around into "long ago"). */
    return failed_ms != 0 &&
           (failed_ms >= now_ms || now_ms - failed_ms <= FAILED_FOR_MS);
}

/* Asks the nodes for the map, those that failed a call lately last: one
   that hangs would cost a whole timeout, on every reread. */
static int map_ask_nodes(sluice__vk_store *v)
{
    uint64_t now = sluice__monotonic_ms();
    int err = sluice__error(SLUICE_ECONN, "cluster: no node to ask for the "
                            "map");
    size_t n;

    pthread_rwlock_rdlock(&v->map_lock);
    n = v->nnodes;
    pthread_rwlock_unlock(&v->map_lock);
    for (int pass = 0; pass < 2 && err != 0; pass++)
        for (size_t i = 0; i < n; i++) {
            sluice__vk_node *node;

            pthread_rwlock_rdlock(&v->map_lock);
            node = v->nodes[i];
            pthread_rwlock_unlock(&v->map_lock);
            if ((pass == 0) == sluice__vk_failed_recently(
                                   atomic_load(&node->failed_ms), now))
                continue;
            if ((err = map_read_from(v, node)) == 0) {
                atomic_store(&node->failed_ms, 0);
                break;
            }
        }
    return err;
}

/*
 * Rereads the map from the first node that answers: the known nodes, seeds
 * first. With 'force' 0, only if it was marked stale, the last reread is
 * REFRESH_GAP_MS old and no other caller is rereading it (the caller then
 * goes on with the map it has, rather than wait on a reread that may be
 * waiting on a stalled node). With 'force', a caller waits for a reread in
 * progress and uses it.
 */
int sluice__vk_map_refresh(sluice__vk_store *v, bool force)
{
    int err = SLUICE_OK;

    if (!force && !atomic_load(&v->map_stale))
        return SLUICE_OK;
    if (force)
        pthread_mutex_lock(&v->refresh_lock);
    else if (pthread_mutex_trylock(&v->refresh_lock) != 0)
        return SLUICE_OK;
    if (!force && (!atomic_load(&v->map_stale) ||
                   sluice__monotonic_ms() - v->last_refresh_ms <
                       REFRESH_GAP_MS)) {
        pthread_mutex_unlock(&v->refresh_lock);
        return SLUICE_OK;
    }
    err = map_ask_nodes(v);
    v->last_refresh_ms = sluice__monotonic_ms();
    if (err == 0)
        atomic_store(&v->map_stale, 0);
    pthread_mutex_unlock(&v->refresh_lock);
    return err;
}

void sluice__vk_map_moved(sluice__vk_store *v, unsigned slot,
                          const char *host, size_t host_len, int port)
{
    int idx;

    pthread_rwlock_wrlock(&v->map_lock);
    if ((idx = node_index_locked(v, host, host_len, port)) >= 0)
        v->slots[slot] = idx;
    pthread_rwlock_unlock(&v->map_lock);
    atomic_store(&v->map_stale, 1);
}

int sluice__vk_redirect_parse(const redisReply *r, bool *ask, unsigned *slot,
                              const char **host, size_t *host_len, int *port)
{
    const char *s = r->str, *end = r->str + r->len, *sp;
    uint64_t num;

    if (r->type != REDIS_REPLY_ERROR)
        return -1;
    if (r->len > 6 && strncmp(s, "MOVED ", 6) == 0) {
        *ask = false;
        s += 6;
    } else if (r->len > 4 && strncmp(s, "ASK ", 4) == 0) {
        *ask = true;
        s += 4;
    } else {
        return -1;
    }
    sp = memchr(s, ' ', (size_t)(end - s));
    if (sp == NULL ||
        sluice__parse_u64(s, (size_t)(sp - s), 0, SLUICE__SLOTS - 1, &num) < 0)
        return -1;
    *slot = (unsigned)num;
    *host = sp + 1;
    return split_endpoint(sp + 1, (size_t)(end - sp - 1), host_len, port);
}

void sluice__vk_node_noted(sluice__vk_store *v, sluice__vk_node *n, int err)
{
    if (err == SLUICE_ECONN || err == SLUICE_ETIMEDOUT) {
        uint64_t now = sluice__monotonic_ms();

        atomic_store(&n->failed_ms, now ? now : 1);
        if (v->cluster)
            atomic_store(&v->map_stale, 1); /* a failover? look again */
        if (v->sentinel && n == atomic_load(&v->master))
            atomic_store(&v->master_stale, 1); /* ask the sentinels again */
    } else if (err == 0 && atomic_load(&n->failed_ms) != 0) {
        atomic_store(&n->failed_ms, 0);
    }
}

/* ---- Calls and their redirections ------------------------------------------------ */

void sluice__vk_route_init(sluice__vk_route *rt, unsigned slot,
                           uint64_t deadline_ms)
{
    rt->slot = slot;
    rt->sends = 0;
    rt->ask = NULL;
    rt->tryagain_ms = 2;
    rt->started_ms = sluice__monotonic_ms();
    rt->deadline_ms = deadline_ms;
}

/*
 * TRYAGAIN is no redirection: the slot's keys are mid-move. The call goes
 * again after a pause (2, 4, ... 50 ms) for as long as the command timeout
 * allows, and the pause does not count as a send.
 */
static int try_again(sluice__vk_route *rt)
{
    uint64_t now = sluice__monotonic_ms(), elapsed = now - rt->started_ms;
    struct timespec pause = {0, rt->tryagain_ms * 1000000L};

    if (now + (uint64_t)rt->tryagain_ms >= rt->deadline_ms)
        return sluice__error(SLUICE_ECONN, "cluster: the keys of slot %u "
                             "stayed mid-move (TRYAGAIN) for %llu ms",
                             rt->slot, (unsigned long long)elapsed);
    nanosleep(&pause, NULL);
    rt->tryagain_ms = rt->tryagain_ms * 2 > TRYAGAIN_MAX_PAUSE_MS
                          ? TRYAGAIN_MAX_PAUSE_MS
                          : rt->tryagain_ms * 2;
    rt->sends--;
    return 1;
}

int sluice__vk_follow(sluice__vk_store *v, sluice__vk_route *rt,
                      const redisReply *r)
{
    const char *host;
    size_t host_len;
    unsigned slot;
    bool ask;
    int port;

    if (r->type != REDIS_REPLY_ERROR)
        return 0;
    /* A sentinel store's master that is a replica now: the write was
       refused, so it goes again once the sentinels name the new master
       (sluice__vk_route_node(), by the call's deadline). */
    if (v->sentinel && r->len >= 8 && strncmp(r->str, "READONLY", 8) == 0 &&
        rt->sends < MAX_SENDS) {
        atomic_store(&v->master_stale, 1);
        return 1;
    }
    if (!v->cluster)
        return 0;
    /* The call's own slot is mended, not the one named: they are the same
       unless a node answers for a slot it was not asked about. */
    if (sluice__vk_redirect_parse(r, &ask, &slot, &host, &host_len,
                                  &port) == 0) {
        atomic_fetch_add(&v->redirects, 1);
        if (ask)
            rt->ask = sluice__vk_node_get(v, host, host_len, port);
        else
            sluice__vk_map_moved(v, rt->slot, host, host_len, port);
        if (rt->sends >= MAX_SENDS)
            return sluice__error(SLUICE_ECONFIG, "cluster: slot %u still "
                                 "redirected after %d tries (last: %.*s): "
                                 "its nodes disagree about who serves it",
                                 rt->slot, MAX_SENDS,
                                 (int)(r->len > 80 ? 80 : r->len), r->str);
        return 1;
    }
    if (sluice__vk_redirection(r))
        return sluice__error(SLUICE_EPROTO, "cluster: a redirection that "
                             "names no node: %.*s",
                             (int)(r->len > 80 ? 80 : r->len), r->str);
    if (r->len >= 8 && strncmp(r->str, "TRYAGAIN", 8) == 0)
        return try_again(rt);
    return 0;
}

int sluice__vk_route_node(sluice__vk_store *v, const sluice__vk_route *rt,
                          sluice__vk_node **out)
{
    int err;

    if (v->sentinel)
        return sluice__vk_sentinel_node(v, rt->deadline_ms, out);
    if ((*out = sluice__vk_node_for_slot(v, rt->slot, rt->deadline_ms)) != NULL)
        return SLUICE_OK;
    if ((err = sluice__vk_map_refresh(v, true)) < 0)
        return err;
    if ((*out = sluice__vk_node_for_slot(v, rt->slot, rt->deadline_ms)) ==
        NULL)
        return sluice__error(SLUICE_ECONN, "cluster: no node serves slot %u",
                             rt->slot);
    return SLUICE_OK;
}

int sluice__vk_call_routed(sluice__vk_store *v, sluice__vk_route *rt,
                           const sluice__script *script, int argc,
                           const char **argv, const size_t *lens,
                           redisReply **out)
{
    if (v->cluster)
        sluice__vk_map_refresh(v, false); /* a failed reread keeps the map */
    for (;;) {
        redisReply *r = NULL;
        sluice__vk_node *n = rt->ask;
        bool asking = n != NULL;
        int err, again;

        if (n == NULL && (err = sluice__vk_route_node(v, rt, &n)) < 0)
            return err;
        rt->ask = NULL;
        rt->sends++;
        err = sluice__vk_node_send(v, n, asking, rt->deadline_ms, script,
                                   argc, argv, lens,
                                   &r);
        sluice__vk_node_noted(v, n, err);
        if (err < 0)
            return err;
        if (r->type != REDIS_REPLY_ERROR) {
            *out = r;
            return SLUICE_OK;
        }
        if ((again = sluice__vk_follow(v, rt, r)) == 0) {
            sluice__vk_reply_noted(n, r);
            err = sluice__vk_reply_error(n, r, argv[0]);
        }
        freeReplyObject(r);
        if (again <= 0)
            return again < 0 ? again : err;
    }
}

int sluice__vk_call(sluice__vk_store *v, const char *key, size_t key_len,
                    const sluice__script *script, int argc, const char **argv,
                    const size_t *lens, redisReply **out)
{
    sluice__vk_route rt;

    sluice__vk_route_init(&rt, v->cluster ? sluice__key_slot(key, key_len) : 0,
                          sluice__monotonic_ms() + v->command_timeout_ms);
    return sluice__vk_call_routed(v, &rt, script, argc, argv, lens, out);
}
