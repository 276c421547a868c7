/*
 * pubsub.c - a subscription to one channel, on a connection of its own.
 *
 * The queue's workers sleep on one (src/queue/worker.c): every add
 * publishes its queue's name, which wakes them. The connection is the
 * store's kind of connection (wire.c): every wait is bounded by the caller,
 * and a message over the store's reply caps is refused like any reply.
 */
#include "valkey/valkey.h"

#include <stdlib.h>
#include <string.h>

struct sluice__sub {
    sluice__vk_store *v;
    sluice__vk_node *node;
    sluice__vk_conn conn; /* not shared: only the subscriber uses it */
};

int sluice__vk_subscribe(void *impl, const char *channel, sluice__sub **out)
{
    sluice__vk_store *v = impl;
    const char *argv[] = {"SUBSCRIBE", channel};
    size_t lens[] = {9, strlen(channel)};
    redisReply *r = NULL;
    sluice__sub *s;
    uint64_t deadline;
    int err;

    *out = NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a subscription");
    s->v = v;
    pthread_mutex_init(&s->conn.lock, NULL);
    /* One deadline for the connect and SUBSCRIBE; a message may follow the
       confirmation at once, so the connection may hold more than it. */
    deadline = sluice__deadline_ms(v->command_timeout_ms);
    if (v->sentinel) {
        err = sluice__vk_sentinel_node(v, deadline, &s->node);
    } else {
        pthread_rwlock_rdlock(&v->map_lock);
        s->node = v->nodes[0];
        pthread_rwlock_unlock(&v->map_lock);
        err = SLUICE_OK;
    }
    if (err == 0 &&
        (err = sluice__vk_conn_ready(v, s->node, &s->conn, deadline)) == 0 &&
        (err = sluice__vk_conn_exchange(v, s->node, &s->conn, deadline, false,
                                        "SUBSCRIBE", 2, argv, lens, &r)) == 0) {
        if (r->type == REDIS_REPLY_ERROR)
            err = sluice__vk_reply_error(s->node, r, "SUBSCRIBE");
        freeReplyObject(r); /* the confirmation: ["subscribe", channel, 1] */
    }
    if (err < 0) {
        sluice__vk_sub_free(s);
        return err;
    }
    *out = s;
    return SLUICE_OK;
}

/* The payload of a "message" push ["message", channel, payload]; NULL for
   anything else (a confirmation, a pong). */
static const redisReply *message_payload(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[0]->len != 7 || memcmp(r->element[0]->str, "message", 7) ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return NULL;
    return r->element[2];
}

int sluice__vk_sub_next(sluice__sub *s, uint64_t wait_ms, char **payload,
                        size_t *len)
{
    uint64_t deadline = sluice__deadline_ms(wait_ms);
    int err;

    *payload = NULL;
    *len = 0;
    for (;;) {
        redisReply *r = NULL;
        const redisReply *p;

        if (s->conn.ctx == NULL)
            return sluice__error(SLUICE_ECONN, "the subscription is closed");
        err = sluice__vk_wire_read(s->node, s->conn.ctx, &s->conn.caps,
                                   deadline, wait_ms, &r);
        if (err == SLUICE_ETIMEDOUT)
            return SLUICE_OK; /* nothing came in time */
        if (err < 0)
            return err;
        if ((p = message_payload(r)) != NULL) {
            if ((*payload = malloc(p->len + 1)) == NULL) {
                freeReplyObject(r);
                return sluice__error(SLUICE_ENOMEM, "cannot hold a message");
            }
            memcpy(*payload, p->str, p->len);
            (*payload)[p->len] = '\0';
            *len = p->len;
            freeReplyObject(r);
            return SLUICE_OK;
        }
        freeReplyObject(r);
    }
}

void sluice__vk_sub_free(sluice__sub *s)
{
    if (s == NULL)
        return;
    sluice__vk_wire_close(s->conn.ctx);
    pthread_mutex_destroy(&s->conn.lock);
    free(s);
}
