/*
 * scripts.c - running the library's Lua scripts on a server.
 *
 * Every script's SHA1 is computed when the library is built
 * (cmake/embed_lua.cmake), so a call is EVALSHA from the start; nothing is
 * learnt from the server. Scripts are kept per server, not per connection:
 * the store loads them all on its first connection, and a server that lacks
 * one later (restarted, another cluster node, SCRIPT FLUSH) answers
 * NOSCRIPT, is given the script with SCRIPT LOAD, and the call is sent once
 * more.
 */
#include "valkey/valkey.h"

#include <stdio.h>
#include <string.h>

/*
 * Checks SCRIPT LOAD's reply 'r' for 'script': the SHA1 the server
 * computed must be the one built in, or every EVALSHA would miss.
 */
static int load_reply(sluice__vk_node *n, const sluice__script *script,
                      const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR)
        return sluice__vk_reply_error(n, r, "SCRIPT LOAD");
    if (r->type != REDIS_REPLY_STRING || r->len != 40)
        return sluice__error(SLUICE_EPROTO, "valkey %s: SCRIPT LOAD did "
                             "not answer a SHA1", n->name);
    if (memcmp(r->str, script->sha1, 40) != 0)
        return sluice__error(SLUICE_EPROTO, "valkey %s: SCRIPT LOAD of %s "
                             "answered SHA1 %.40s, not %s", n->name,
                             script->name, r->str, script->sha1);
    return SLUICE_OK;
}

int sluice__vk_scripts_load(sluice__vk_store *v, sluice__vk_node *n,
                            sluice__vk_conn *c, uint64_t deadline_ms)
{
    for (size_t i = 0; sluice__scripts[i] != NULL; i++) {
        const sluice__script *s = sluice__scripts[i];
        const char *argv[] = {"SCRIPT", "LOAD", s->text};
        size_t lens[] = {6, 4, s->len};
        redisReply *r = NULL;
        int err = sluice__vk_conn_command(v, n, c, deadline_ms, &r,
                                          "SCRIPT LOAD", 3, argv, lens);

        if (err == 0) {
            err = load_reply(n, s, r);
            freeReplyObject(r);
        }
        if (err < 0)
            return err;
    }
    return SLUICE_OK;
}

bool sluice__vk_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           strncmp(r->str, "NOSCRIPT", 8) == 0;
}

int sluice__vk_script_give(sluice__vk_store *v, sluice__vk_node *n,
                           uint64_t deadline_ms, const sluice__script *script)
{
    const char *argv[] = {"SCRIPT", "LOAD", script->text};
    size_t lens[] = {6, 4, script->len};
    redisReply *r = NULL;
    int err = sluice__vk_node_command(v, n, false, deadline_ms, 3, argv, lens,
                                      &r);

    if (err < 0)
        return err;
    err = load_reply(n, script, r);
    freeReplyObject(r);
    return err;
}

int sluice__vk_node_send(sluice__vk_store *v, sluice__vk_node *n, bool asking,
                         uint64_t deadline_ms, const sluice__script *script,
                         int argc, const char **argv, const size_t *lens,
                         redisReply **out)
{
    redisReply *r = NULL;
    int err;

    if (script != NULL)
        argv[1] = script->sha1;
    for (int attempt = 0;; attempt++) {
        if ((err = sluice__vk_node_command(v, n, asking, deadline_ms, argc,
                                           argv, lens, &r)) < 0)
            return err;
        if (script == NULL || attempt > 0 || !sluice__vk_noscript(r))
            break;
        freeReplyObject(r);
        r = NULL;
        if ((err = sluice__vk_script_give(v, n, deadline_ms, script)) < 0)
            return err;
    }
    *out = r;
    return SLUICE_OK;
}
