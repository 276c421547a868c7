/*
 * route.c - which node serves a slot, for the async API, and what a
 * redirection means.
 *
 * One server: its one node; a redirection reaching it is a cluster node
 * behind a valkey:// URL, SLUICE_ECONFIG (sluice__vk_reply_error() says
 * so), never followed. A cluster: the store's map, shared with the
 * blocking path. A sentinel store: the master the sentinels named last.
 */
#include "async/async.h"

int sluice__async_route(sluice_async *a, unsigned slot, sluice__vk_node **out)
{
    sluice__vk_store *v = a->v;
    sluice__vk_node *n = NULL;

    *out = NULL;
    if (v->sentinel) {
        n = atomic_load(&v->master);
        if (n == NULL || atomic_load(&v->master_stale))
            return sluice__error(SLUICE_ENOTSUP, "sentinel: the async API "
                                 "does not ask the sentinels yet, and no "
                                 "master '%s' is known", v->master_name);
    } else if (!v->cluster) {
        n = v->nodes[0];
    } else {
        pthread_rwlock_rdlock(&v->map_lock);
        if (v->slots[slot] >= 0)
            n = v->nodes[v->slots[slot]];
        pthread_rwlock_unlock(&v->map_lock);
        if (n == NULL)
            return sluice__error(SLUICE_ECONN, "cluster: no node serves slot "
                                 "%u", slot);
    }
    *out = n;
    return SLUICE_OK;
}

int sluice__async_redirected(sluice__aconn *conn, sluice__abatch *b,
                             const redisReply *r)
{
    (void)conn;
    (void)b;
    (void)r;
    return 0;
}
