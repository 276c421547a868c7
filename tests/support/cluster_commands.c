/*
 * cluster_commands.c - commands sent to a cluster (cluster.h): like a
 * cluster client (following MOVED and ASK), to every master, and the steps
 * of moving a slot by hand.
 */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Commands ------------------------------------------------------------ */

/* ASKING, then the command, on node 'i's helper connection; NULL if none. */
static redisReply *asking_cmdargv(rc_cluster *c, int i, int argc,
                                  const char **argv, const size_t *lens)
{
    redisContext *ctx = rs_conn(&c->nodes[i].srv);
    void *v = NULL;

    if (ctx == NULL)
        return NULL;
    redisAppendCommand(ctx, "ASKING");
    redisAppendCommandArgv(ctx, argc, argv, lens);
    if (redisGetReply(ctx, &v) != REDIS_OK)
        return NULL;
    freeReplyObject(v);
    if (redisGetReply(ctx, &v) != REDIS_OK)
        return NULL;
    return v;
}

redisReply *rc_cmdargv(rc_cluster *c, int at, int argc, const char **argv,
                       const size_t *lens, int *served)
{
    int i = at >= 0 ? at : rc_first_live(c, 1), asking = 0;

    for (int hop = 0; hop < 8 && i >= 0; hop++) {
        redisReply *r;
        const char *sp, *colon;
        int port;

        r = asking ? asking_cmdargv(c, i, argc, argv, lens)
                   : rs_cmdargv(&c->nodes[i].srv, argc, argv, lens);
        if (r == NULL)
            return NULL;
        if (r->type != REDIS_REPLY_ERROR ||
            (strncmp(r->str, "MOVED ", 6) != 0 &&
             strncmp(r->str, "ASK ", 4) != 0)) {
            if (served != NULL)
                *served = i;
            return r;
        }
        asking = r->str[0] == 'A';
        sp = strrchr(r->str, ' ');
        colon = strrchr(r->str, ':');
        port = colon != NULL && sp != NULL && colon > sp ? atoi(colon + 1) : -1;
        freeReplyObject(r);
        if ((i = rc_node_by_port(c, port)) < 0)
            fprintf(stderr, "cluster.c: redirected to port %d, which is not "
                    "ours\n", port);
    }
    return NULL;
}

int rc_keyslot(rc_cluster *c, const char *key, size_t len)
{
    const char *argv[] = {"CLUSTER", "KEYSLOT", key};
    size_t lens[] = {7, 7, len};
    int live = rc_first_live(c, 0);
    redisReply *r = live >= 0 ? rs_cmdargv(&c->nodes[live].srv, 3, argv, lens)
                              : NULL;
    int slot = -1;

    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        slot = (int)r->integer;
    if (r != NULL)
        freeReplyObject(r);
    return slot;
}

int rc_masters_by_slot(const rc_cluster *c, int *out)
{
    int n = 0;

    for (int s = 0; s < RC_SLOTS; s++) {
        int o = c->owner[s], seen = 0;

        for (int i = 0; i < n; i++)
            seen |= out[i] == o;
        if (o >= 0 && !seen && n < RC_MAX_NODES)
            out[n++] = o;
    }
    return n;
}

long long rc_key_int(rc_cluster *c, const char *cmd, const char *key)
{
    return rc_key_intn(c, cmd, key, strlen(key));
}

long long rc_key_intn(rc_cluster *c, const char *cmd, const char *key,
                      size_t key_len)
{
    const char *argv[] = {cmd, key};
    size_t lens[] = {strlen(cmd), key_len};
    redisReply *r = rc_cmdargv(c, -1, 2, argv, lens, NULL);
    long long v = -1;

    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r != NULL && r->type == REDIS_REPLY_NIL)
        v = 0;
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

int rc_hset(rc_cluster *c, const char *key, size_t key_len, const char *field,
            const char *value)
{
    const char *argv[] = {"HSET", key, field, value};
    size_t lens[] = {4, key_len, strlen(field), strlen(value)};
    redisReply *r = rc_cmdargv(c, -1, 4, argv, lens, NULL);
    int ok = r != NULL && r->type == REDIS_REPLY_INTEGER;

    if (r != NULL)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

int rc_flush(rc_cluster *c)
{
    int failed = 0;

    for (int i = 0; i < c->n; i++)
        if (!c->nodes[i].dead && c->nodes[i].is_master)
            failed += rs_ok(&c->nodes[i].srv, "FLUSHALL") != 0;
    return failed;
}

/* ---- Moving a slot by hand ----------------------------------------------- */

int rc_slot_open(rc_cluster *c, int slot, int from, int to)
{
    if (rs_ok(&c->nodes[to].srv, "CLUSTER SETSLOT %d IMPORTING %s", slot,
              c->nodes[from].id) < 0 ||
        rs_ok(&c->nodes[from].srv, "CLUSTER SETSLOT %d MIGRATING %s", slot,
              c->nodes[to].id) < 0)
        return -1;
    return 0;
}

int rc_migrate(rc_cluster *c, int from, int to, const char *const *keys,
               const size_t *lens, size_t n)
{
    char port[16];
    const char *argv[17] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000",
                            "KEYS"};
    size_t alens[17];
    int argc = 7;
    redisReply *m;

    if (n > 10)
        return -1;
    snprintf(port, sizeof(port), "%d", c->nodes[to].srv.port);
    for (int i = 0; i < argc; i++)
        alens[i] = strlen(argv[i]);
    for (size_t i = 0; i < n; i++) {
        argv[argc] = keys[i];
        alens[argc++] = lens[i];
    }
    m = rs_cmdargv(&c->nodes[from].srv, argc, argv, alens);
    if (m == NULL || m->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "    MIGRATE: %s\n", m ? m->str : "no reply");
        if (m != NULL)
            freeReplyObject(m);
        return -1;
    }
    freeReplyObject(m);
    return 0;
}

int rc_slot_close(rc_cluster *c, int slot, int from, int to)
{
    const char *id = c->nodes[to].id;

    if (rs_ok(&c->nodes[to].srv, "CLUSTER SETSLOT %d NODE %s", slot, id) < 0 ||
        rs_ok(&c->nodes[from].srv, "CLUSTER SETSLOT %d NODE %s", slot, id) < 0)
        return -1;
    for (int i = 0; i < c->n; i++)
        if (i != from && i != to && !c->nodes[i].dead &&
            c->nodes[i].is_master)
            rs_ok(&c->nodes[i].srv, "CLUSTER SETSLOT %d NODE %s", slot, id);
    return 0;
}
