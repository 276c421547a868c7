/*
 * engine.c - the engine: the server's native module (sluice.so) for the
 * algorithms a node's module decides, the Lua scripts for the rest.
 *
 * Each new connection asks its server SLUICE.VERSION (engine=auto and
 * engine=module; engine=lua never sends a SLUICE.* command). The answer
 *
 *   sluice.so VERSION api N algos NAME [NAME ...]
 *
 * with this library's VERSION means the module, deciding the algorithms
 * it names (a module of this version that names none, as before the list,
 * is taken to decide every one); an unknown command, any other error or
 * another version means none. The words after "api N" are new, so a client
 * that reads only that far takes the reply as it did. The answer is noted
 * on the node, so every connection of a node, and each node of a cluster,
 * is known on its own, and a server restarted with or without the module
 * is known again from its next connect.
 *
 * A decision goes to the module when its node's note has the module and
 * its algorithm (engine=auto), else to the algorithm's script; engine=module
 * sends every one to the module, and an algorithm the module does not
 * decide is SLUICE_ENOTSUP. A call that met a server which has lost the
 * module since the note (an unknown SLUICE.* command) or the algorithm
 * (the module's "no module glue" reply) did not run: the caller notes the
 * loss on the node (sluice__vk_engine_lost()) and sends the call again as
 * the script (engine=auto), or fails with SLUICE_ENOTSUP (engine=module).
 * Each connect notes afresh what SLUICE.VERSION says, so a module that
 * names none but lacks one costs that one refused call per new connection.
 *
 * The module's commands answer exactly what the scripts answer (the spec:
 * SLUICE.HITMANY's flat reply; a server interface's twin of a script, such
 * as the queue limiter's SLUICE.EMQTTL, that script's reply), so one reader
 * serves both. sluice_hit_all() stays a script on every engine.
 */
#include "valkey/valkey.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What SLUICE.VERSION answers for the module of this library, then the
   api number and the list of the algorithms it decides. */
#define MODULE_VERSION_PREFIX "sluice.so " SLUICE_VERSION " api "
#define MODULE_ALGOS " algos"

/* The start of a server's answer to a command it does not know. */
#define UNKNOWN_SLUICE "ERR unknown command 'sluice."

/* The start of the module's answer for an algorithm it does not decide,
   the algorithm's name after it. */
#define NO_GLUE "ERR sluice: no module glue for algorithm "

/* Every algorithm, as a node's note holds them. */
#define ALGOS_ALL                                                              \
    (SLUICE__VK_MODULE_ALGO(SLUICE__ALGO_N) - SLUICE__VK_MODULE_ALGO(0))
_Static_assert(SLUICE__ALGO_N <= 29, "a node's note holds 29 algorithms");

/* ---- Detection ------------------------------------------------------------------- */

/* The algorithm named by the 'len' bytes at 'name', or SLUICE__ALGO_N. */
static unsigned algo_named(const char *name, size_t len)
{
    for (unsigned a = 0; a < SLUICE__ALGO_N; a++)
        if (strlen(sluice__algos[a]->name) == len &&
            strncasecmp(sluice__algos[a]->name, name, len) == 0)
            return a;
    return SLUICE__ALGO_N;
}

/*
 * The algorithms that the module's answer 'r' (this library's prefix
 * checked) says it decides, as a note's bits: after the api number,
 * " algos" and the names, each after a space; a name this library does not
 * know is passed over. No list at all: every algorithm.
 */
static unsigned module_algos(const redisReply *r)
{
    const char *p = r->str + strlen(MODULE_VERSION_PREFIX);
    const char *end = r->str + r->len;
    unsigned algos = 0;

    while (p < end && *p >= '0' && *p <= '9')
        p++;
    if ((size_t)(end - p) < strlen(MODULE_ALGOS) ||
        memcmp(p, MODULE_ALGOS, strlen(MODULE_ALGOS)) != 0)
        return ALGOS_ALL;
    for (p += strlen(MODULE_ALGOS); p < end;) {
        const char *name;
        unsigned a;

        while (p < end && *p == ' ')
            p++;
        for (name = p; p < end && *p != ' ';)
            p++;
        if (p > name && (a = algo_named(name, (size_t)(p - name))) <
                            SLUICE__ALGO_N)
            algos |= SLUICE__VK_MODULE_ALGO(a);
    }
    return algos;
}

/* Notes on 'n' what SLUICE.VERSION answered ('r', an error reply too). */
static unsigned module_note(sluice__vk_node *n, const redisReply *r)
{
    bool yes = (r->type == REDIS_REPLY_STRING ||
                r->type == REDIS_REPLY_STATUS) &&
               r->len > strlen(MODULE_VERSION_PREFIX) &&
               memcmp(r->str, MODULE_VERSION_PREFIX,
                      strlen(MODULE_VERSION_PREFIX)) == 0;
    unsigned note =
        yes ? SLUICE__VK_MODULE_YES | module_algos(r) : SLUICE__VK_MODULE_NO;

    atomic_store(&n->module, note);
    return note;
}

/* The error of engine=module on node 'n', which has no module; 'why' says
   what SLUICE.VERSION answered. */
static int module_refused(const sluice__vk_node *n, const char *why)
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
static int version_ask(sluice__vk_store *v, sluice__vk_node *n,
                       sluice__vk_conn *c, uint64_t deadline_ms,
                       redisReply **out)
{
    const char *argv[] = {"SLUICE.VERSION"};
    size_t lens[] = {14};

    return sluice__vk_conn_exchange(v, n, c, deadline_ms, true,
                                    "SLUICE.VERSION", 1, argv, lens, out);
}

int sluice__vk_engine_note(sluice__vk_store *v, sluice__vk_node *n,
                           const redisReply *r)
{
    char why[80];

    /* A server that cannot answer now (LOADING, BUSY, ...) says nothing
       of its module: the connect fails as it would on the next command. */
    if (r->type == REDIS_REPLY_ERROR && sluice__vk_unavailable(r))
        return sluice__vk_reply_error(n, r, "SLUICE.VERSION");
    if (module_note(n, r) == SLUICE__VK_MODULE_NO &&
        v->engine == SLUICE_ENGINE_MODULE) {
        version_shown(why, sizeof(why), r);
        return module_refused(n, why);
    }
    return SLUICE_OK;
}

/* A connection that fails here is closed by the caller (conn.c). */
int sluice__vk_engine_detect(sluice__vk_store *v, sluice__vk_node *n,
                             sluice__vk_conn *c, uint64_t deadline_ms)
{
    redisReply *r = NULL;
    int err;

    if (v->engine == SLUICE_ENGINE_LUA)
        return SLUICE_OK;
    if ((err = version_ask(v, n, c, deadline_ms, &r)) < 0)
        return err; /* no answer to note */
    err = sluice__vk_engine_note(v, n, r);
    freeReplyObject(r);
    return err;
}

/* ---- What a reply says of the module ------------------------------------------ */

sluice__vk_lack sluice__vk_module_lack(const redisReply *r, unsigned *algo)
{
    size_t n = strlen(NO_GLUE);

    if (r->type != REDIS_REPLY_ERROR)
        return SLUICE__VK_LACK_NONE;
    if (r->len >= strlen(UNKNOWN_SLUICE) &&
        strncasecmp(r->str, UNKNOWN_SLUICE, strlen(UNKNOWN_SLUICE)) == 0)
        return SLUICE__VK_LACK_MODULE;
    /* Exactly the module's words, then one name this library knows. */
    if (r->len <= n || memcmp(r->str, NO_GLUE, n) != 0 ||
        (*algo = algo_named(r->str + n, r->len - n)) == SLUICE__ALGO_N)
        return SLUICE__VK_LACK_NONE;
    return SLUICE__VK_LACK_ALGO;
}

sluice__vk_lack sluice__vk_engine_lost(sluice__vk_node *n, const redisReply *r)
{
    unsigned algo = 0;
    sluice__vk_lack lack = sluice__vk_module_lack(r, &algo);

    if (lack == SLUICE__VK_LACK_MODULE)
        atomic_store(&n->module, SLUICE__VK_MODULE_NO);
    else if (lack == SLUICE__VK_LACK_ALGO)
        atomic_fetch_and(&n->module, ~SLUICE__VK_MODULE_ALGO(algo));
    return lack;
}

/* ---- The choice, call by call -------------------------------------------------- */

/*
 * engine=auto sends a call to the module only where the node's last
 * connect found it: a node not asked yet gets the script, and its connect
 * (made to send that very call) asks. engine=module sends every call to
 * the module, so that a server without it answers SLUICE_ENOTSUP from the
 * connect (or the command) each time, until it has it.
 */
bool sluice__vk_engine_module(const sluice__vk_store *v, sluice__vk_node *n)
{
    switch (v->engine) {
    case SLUICE_ENGINE_MODULE:
        return true;
    case SLUICE_ENGINE_AUTO:
        return n != NULL && (atomic_load(&n->module) &
                             SLUICE__VK_MODULE_STATE) == SLUICE__VK_MODULE_YES;
    default:
        return false;
    }
}

int sluice__vk_engine_pick(const sluice__vk_store *v, sluice__vk_node *n,
                           sluice_algo algo, bool *module)
{
    unsigned note =
        n != NULL ? atomic_load(&n->module) : SLUICE__VK_MODULE_UNKNOWN;
    bool yes = (note & SLUICE__VK_MODULE_STATE) == SLUICE__VK_MODULE_YES;

    *module = false;
    switch (v->engine) {
    case SLUICE_ENGINE_MODULE:
        /* Not asked yet: the connect, or the module's reply, says. */
        if (yes && (note & SLUICE__VK_MODULE_ALGO(algo)) == 0)
            return sluice__error(SLUICE_ENOTSUP, "valkey %s: engine=module, "
                                 "but the server's sluice module does not "
                                 "decide %s; load a sluice.so that does, or "
                                 "use engine=auto or lua", n->name,
                                 sluice__algos[algo]->name);
        *module = true;
        return SLUICE_OK;
    case SLUICE_ENGINE_AUTO:
        *module = yes && (note & SLUICE__VK_MODULE_ALGO(algo)) != 0;
        return SLUICE_OK;
    default:
        return SLUICE_OK;
    }
}

/* ---- A script's twin: the server interface's eval_module -------------------------- */

#define TWIN_ARGS_MAX 8

int sluice__vk_engine_eval(sluice__vk_store *v, const char *command, int argc,
                           const char *const *args, const size_t *arglens,
                           redisReply **out, bool *done)
{
    const char *argv[TWIN_ARGS_MAX];
    size_t lens[TWIN_ARGS_MAX];
    unsigned slot = v->cluster ? sluice__key_slot(args[0], arglens[0]) : 0;
    int err;

    *done = false;
    if (argc + 1 > TWIN_ARGS_MAX || v->engine == SLUICE_ENGINE_LUA)
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
