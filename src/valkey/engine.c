/*
 * engine.c - the engine: the server's native module (sluice.so) where a
 * node has it, the Lua scripts elsewhere.
 *
 * Each new connection asks its server SLUICE.VERSION (engine=auto and
 * engine=module; engine=lua never sends a SLUICE.* command). The answer
 * "sluice.so VERSION api N" with this library's VERSION means the module;
 * an unknown command, any other error or another version means none. The
 * answer is noted on the node, so every connection of a node, and each
 * node of a cluster, is known on its own, and a server restarted with or
 * without the module is known again from its next connect. A call is then
 * sent as the module's command or as the script, by its node's note
 * (sluice__vk_engine_module()); a call that met a server which has lost the
 * module since (an unknown SLUICE.* command) did not run, and goes again
 * as the script (engine=auto) or fails with SLUICE_ENOTSUP (engine=module).
 *
 * The module's commands answer exactly what the scripts answer (the spec:
 * SLUICE.HITMANY's flat reply, SLUICE.EMQTTL and SLUICE.EMQINCR the queue
 * scripts' replies), so one reader serves both. sluice_hit_all() stays a
 * script on every engine.
 */
#include "valkey/valkey.h"
#include "queue/queue.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What SLUICE.VERSION answers for the module of this library. */
#define MODULE_VERSION_PREFIX "sluice.so " SLUICE_VERSION " api "

/* The start of a server's answer to a command it does not know. */
#define UNKNOWN_SLUICE "ERR unknown command 'sluice."

/* ---- Detection ------------------------------------------------------------------- */

/* Notes on 'n' what SLUICE.VERSION answered ('r', an error reply too). */
static int module_note(vk_node *n, const redisReply *r)
{
    bool yes = (r->type == REDIS_REPLY_STRING ||
                r->type == REDIS_REPLY_STATUS) &&
               r->len > strlen(MODULE_VERSION_PREFIX) &&
               memcmp(r->str, MODULE_VERSION_PREFIX,
                      strlen(MODULE_VERSION_PREFIX)) == 0;

    atomic_store(&n->module, yes ? VK_MODULE_YES : VK_MODULE_NO);
    return yes ? VK_MODULE_YES : VK_MODULE_NO;
}

/* The error of engine=module on node 'n', which has no module; 'why' says
   what SLUICE.VERSION answered. */
static int module_refused(const vk_node *n, const char *why)
{
    return sluice__error(SLUICE_ENOTSUP, "valkey %s: engine=module, but the "
                         "server has no sluice module %s (SLUICE.VERSION: "
                         "%s); load sluice.so or use engine=auto or lua",
                         n->name, SLUICE_VERSION, why);
}

/* The text of what SLUICE.VERSION answered, for a message. */
static void version_shown(char *buf, size_t cap, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        snprintf(buf, cap, "%.*s%s", r->len > 60 ? 60 : (int)r->len, r->str,
                 r->len > 60 ? "..." : "");
    else
        snprintf(buf, cap, "a reply of type %d", r->type);
}

/* Sends SLUICE.VERSION on the new connection 'c' and reads its reply
   (an error reply too) by 'deadline_ms'. */
static int version_ask(vk_store *v, vk_node *n, vk_conn *c,
                       uint64_t deadline_ms, redisReply **out)
{
    const char *argv[] = {"SLUICE.VERSION"};
    size_t lens[] = {14};

    return sluice__vk_conn_exchange(v, n, c, deadline_ms, true,
                                    "SLUICE.VERSION", 1, argv, lens, out);
}

/* A connection that fails here is closed by the caller (conn.c). */
int sluice__vk_engine_detect(vk_store *v, vk_node *n, vk_conn *c,
                             uint64_t deadline_ms)
{
    redisReply *r = NULL;
    char why[80];
    int err;

    if (v->engine == SLUICE_ENGINE_LUA)
        return SLUICE_OK;
    if ((err = version_ask(v, n, c, deadline_ms, &r)) < 0)
        return err; /* no answer to note */
    /* A server that cannot answer now (LOADING, BUSY, ...) says nothing
       of its module: the connect fails as it would on the next command. */
    if (r->type == REDIS_REPLY_ERROR && sluice__vk_unavailable(r)) {
        err = sluice__vk_reply_error(n, r, "SLUICE.VERSION");
        freeReplyObject(r);
        return err;
    }
    err = SLUICE_OK;
    if (module_note(n, r) == VK_MODULE_NO &&
        v->engine == SLUICE_ENGINE_MODULE) {
        version_shown(why, sizeof(why), r);
        err = module_refused(n, why);
    }
    freeReplyObject(r);
    return err;
}

bool sluice__vk_module_missing(vk_node *n, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ERROR || r->len < strlen(UNKNOWN_SLUICE) ||
        strncasecmp(r->str, UNKNOWN_SLUICE, strlen(UNKNOWN_SLUICE)) != 0)
        return false;
    atomic_store(&n->module, VK_MODULE_NO);
    return true;
}

/*
 * engine=auto sends a call to the module only where the node's last
 * connect found it: a node not asked yet gets the script, and its connect
 * (made to send that very call) asks. engine=module sends every call to
 * the module, so that a server without it answers SLUICE_ENOTSUP from the
 * connect (or the command) each time, until it has it.
 */
bool sluice__vk_engine_module(const vk_store *v, vk_node *n)
{
    switch (v->engine) {
    case SLUICE_ENGINE_MODULE:
        return true;
    case SLUICE_ENGINE_AUTO:
        return n != NULL && atomic_load(&n->module) == VK_MODULE_YES;
    default:
        return false;
    }
}

/* ---- The queue limiter's commands -------------------------------------------------- */

/* The module's twin of each queue script: the same keys and arguments. */
static const struct {
    const sluice__script *script;
    const char *command;
} twins[] = {
    {&sluice__script_emq_ttl, "SLUICE.EMQTTL"},
    {&sluice__script_emq_incr, "SLUICE.EMQINCR"},
};

#define TWIN_ARGS_MAX 4

int sluice__vk_engine_eval(vk_store *v, const sluice__script *script,
                           int argc, const char *const *args,
                           const size_t *arglens, redisReply **out,
                           bool *done)
{
    const char *argv[TWIN_ARGS_MAX];
    size_t lens[TWIN_ARGS_MAX];
    const char *command = NULL;
    unsigned slot = v->cluster ? sluice__key_slot(args[0], arglens[0]) : 0;
    int err;

    *done = false;
    for (size_t i = 0; i < sizeof(twins) / sizeof(twins[0]); i++)
        if (twins[i].script == script)
            command = twins[i].command;
    if (command == NULL || argc + 1 > TWIN_ARGS_MAX ||
        v->engine == SLUICE_ENGINE_LUA)
        return SLUICE_OK;
    if (v->cluster)
        sluice__vk_map_refresh(v, false); /* a failed reread keeps the map */
    if (!sluice__vk_engine_module(
            v, sluice__vk_node_for_slot(v, slot, sluice__deadline_ms(
                                                     v->command_timeout_ms))))
        return SLUICE_OK;
    argv[0] = command;
    lens[0] = strlen(command);
    for (int i = 0; i < argc; i++) {
        argv[1 + i] = args[i];
        lens[1 + i] = arglens[i];
    }
    err = sluice__vk_call(v, args[0], arglens[0], NULL, argc + 1, argv, lens,
                          out);
    /* A server that lost the module since: the script runs instead. */
    if (err == SLUICE_ENOTSUP && v->engine == SLUICE_ENGINE_AUTO)
        return SLUICE_OK;
    *done = true;
    if (err == 0)
        atomic_fetch_add(&v->module_calls, 1);
    return err;
}
