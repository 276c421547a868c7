/*
 * sentinel.c - a master found through Sentinel
 * (valkey+sentinel://HOST:PORT[,HOST:PORT...]/MASTER_NAME).
 *
 * A sentinel store has one master at a time, the node its sentinels named
 * last; it is a node like a single server's, with the same pool of
 * connections. The sentinels are asked for it (SENTINEL
 * GET-MASTER-ADDR-BY-NAME) the first time a call needs it, and again once
 * it fails (a connection error or timeout: sluice__vk_node_noted()) or
 * answers READONLY (it is a replica now: conn.c), and what they name is
 * confirmed with ROLE before any call goes to it, so a sentinel that has
 * not seen the failover yet never sends writes to a replica.
 *
 * Each sentinel is asked in turn, starting from the one that answered
 * last, and all of them again after a pause that doubles, from 10 to
 * 200 ms, until a master is confirmed or the call's deadline comes: a
 * call made during a failover fails (SLUICE_ECONN or SLUICE_ETIMEDOUT, so
 * on_error applies) for no longer than the failover takes. One caller asks
 * at a time (the store's refresh lock); the others wait for its answer, by
 * their own deadlines. A sentinel that does not know the master's name is
 * SLUICE_ECONFIG; one that refuses our password, SLUICE_EAUTH: both are
 * errors that no policy stands in for.
 *
 * The sentinels have a user and password of their own (sentinel_user=,
 * sentinel_password=); the URL's userinfo is the master's. The transport
 * is the store's: valkeys+sentinel:// speaks TLS to both.
 */
#include "valkey/control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKOFF_FIRST_MS 10
#define BACKOFF_MAX_MS 200

/* ---- Asking ------------------------------------------------------------------------- */

int sluice__vk_sentinel_addr_parse(const sluice__vk_store *v,
                                   sluice__vk_node *s, const redisReply *r,
                                   char *host, size_t cap, int *port)
{
    static const char what[] = "SENTINEL GET-MASTER-ADDR-BY-NAME";
    uint64_t num;

    if (r->type == REDIS_REPLY_ERROR)
        return sluice__vk_reply_error(s, r, what);
    if (r->type == REDIS_REPLY_NIL)
        return sluice__error(SLUICE_ECONFIG, "sentinel %s: it knows no master "
                             "named '%s' (the URL's /MASTER_NAME)", s->name,
                             v->master_name);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[0]->len == 0 || r->element[0]->len >= cap ||
        sluice__parse_u64(r->element[1]->str, r->element[1]->len, 1, 65535,
                          &num) < 0)
        return sluice__error(SLUICE_EPROTO, "sentinel %s: %s: not an address",
                             s->name, what);
    memcpy(host, r->element[0]->str, r->element[0]->len);
    host[r->element[0]->len] = '\0';
    *port = (int)num;
    return SLUICE_OK;
}

/* Sentinel 's's address of the master: host into 'host' (of 'cap'), and
   its port. */
static int ask_sentinel(sluice__vk_store *v, sluice__vk_node *s,
                        uint64_t deadline_ms, char *host, size_t cap, int *port)
{
    const char *argv[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                          v->master_name};
    size_t lens[] = {8, 23, strlen(v->master_name)};
    redisReply *r = NULL;
    int err = sluice__vk_node_send(v, s, false, deadline_ms, NULL, 3, argv,
                                   lens, &r);

    if (err < 0)
        return err;
    err = sluice__vk_sentinel_addr_parse(v, s, r, host, cap, port);
    freeReplyObject(r);
    return err;
}

int sluice__vk_role_parse(const sluice__vk_store *v, sluice__vk_node *n,
                          const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR)
        return sluice__vk_reply_error(n, r, "ROLE");
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return sluice__error(SLUICE_EPROTO, "valkey %s: ROLE: not a role",
                             n->name);
    if (strcmp(r->element[0]->str, "master") != 0)
        return sluice__error(SLUICE_ECONN, "valkey %s: the sentinels name it "
                             "master '%s', but it is a %s (a failover in "
                             "progress?)", n->name, v->master_name,
                             r->element[0]->str);
    return SLUICE_OK;
}

/* Whether node 'n' says it is a master (ROLE); SLUICE_ECONN when it is a
   replica, as a sentinel may still name one during a failover. */
static int confirm_master(sluice__vk_store *v, sluice__vk_node *n,
                          uint64_t deadline_ms)
{
    const char *argv[] = {"ROLE"};
    size_t lens[] = {4};
    redisReply *r = NULL;
    int err = sluice__vk_node_send(v, n, false, deadline_ms, NULL, 1, argv,
                                   lens, &r);

    if (err < 0)
        return err;
    err = sluice__vk_role_parse(v, n, r);
    freeReplyObject(r);
    return err;
}

/* One round: each sentinel in turn, until one names a confirmed master. */
static int ask_round(sluice__vk_store *v, uint64_t deadline_ms,
                     sluice__vk_node **out)
{
    unsigned first = atomic_load(&v->sentinel_next);
    int err = SLUICE_OK;

    for (size_t i = 0; i < v->nsentinels; i++) {
        unsigned at = (unsigned)((first + i) % v->nsentinels);
        char host[256];
        int port = 0;
        sluice__vk_node *n;

        if ((err = ask_sentinel(v, v->sentinels[at], deadline_ms, host,
                                sizeof(host), &port)) < 0)
            continue;
        if ((n = sluice__vk_node_get(v, host, strlen(host), port)) == NULL)
            return sluice__error(SLUICE_ENOMEM, "no memory for a node");
        if ((err = confirm_master(v, n, deadline_ms)) < 0)
            continue;
        atomic_store(&v->sentinel_next, at);
        *out = n;
        return SLUICE_OK;
    }
    return err;
}

/* ---- The master --------------------------------------------------------------------- */

/* Sleeps 'ms' (< 1000) milliseconds. */
static void pause_ms(uint64_t ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};

    nanosleep(&ts, NULL);
}

/* Takes the store's refresh lock by 'deadline_ms'; false at the deadline. */
static bool lock_by(pthread_mutex_t *lock, uint64_t deadline_ms)
{
    struct timespec at;

    if (pthread_mutex_trylock(lock) == 0)
        return true;
    sluice__realtime_at(&at, deadline_ms);
    return pthread_mutex_timedlock(lock, &at) == 0;
}

int sluice__vk_sentinel_node(sluice__vk_store *v, uint64_t deadline_ms,
                             sluice__vk_node **out)
{
    uint64_t pause = BACKOFF_FIRST_MS;
    sluice__vk_node *n = atomic_load(&v->master);
    int err;

    *out = NULL;
    if (n != NULL && !atomic_load(&v->master_stale)) {
        *out = n;
        return SLUICE_OK;
    }
    if (!lock_by(&v->refresh_lock, deadline_ms))
        return sluice__error(SLUICE_ETIMEDOUT, "sentinel: the master '%s' "
                             "was still being asked for at the deadline",
                             v->master_name);
    /* Another caller may have asked while this one waited. */
    n = atomic_load(&v->master);
    if (n != NULL && !atomic_load(&v->master_stale)) {
        pthread_mutex_unlock(&v->refresh_lock);
        *out = n;
        return SLUICE_OK;
    }
    for (;;) {
        uint64_t now;

        if ((err = ask_round(v, deadline_ms, &n)) == 0) {
            atomic_store(&v->master, n);
            atomic_store(&v->master_stale, 0);
            break;
        }
        /* Errors that another round cannot mend end the asking. */
        if (err == SLUICE_ECONFIG || err == SLUICE_EAUTH ||
            err == SLUICE_ENOMEM)
            break;
        now = sluice__monotonic_ms();
        if (now + pause >= deadline_ms)
            break;
        pause_ms(pause);
        pause = pause * 2 < BACKOFF_MAX_MS ? pause * 2 : BACKOFF_MAX_MS;
    }
    pthread_mutex_unlock(&v->refresh_lock);
    if (err < 0) {
        char why[256];

        snprintf(why, sizeof(why), "%s", sluice_last_error());
        return sluice__error(err, "sentinel: no master '%s' confirmed: %s",
                             v->master_name, why);
    }
    *out = n;
    return SLUICE_OK;
}
