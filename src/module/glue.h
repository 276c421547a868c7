/*
 * glue.h - what an algorithm gives the server module (sluice.so): its
 * decision made inside the server, on the very key and value its Lua mirror
 * keeps (src/algo/NAME/NAME.lua), so that module, script and Functions
 * clients of one fleet share one budget.
 *
 * Each algorithm's glue is one file in its own folder, src/algo/NAME/module.c,
 * defining 'const sluice__module_glue sluice__module_NAME' (NAME as in
 * SLUICE_ALGO_MAP). It is compiled into sluice.so only: libsluice never
 * depends on the module API. The glue is a codec: it opens the key into a
 * view of its state (view.h: the script's readings and writes), decides
 * with the algorithm's own C code -- the decision the embedded store makes
 * (src/algo/NAME/NAME.h; gcra's table) --, and writes back what changed,
 * which the view replicates.
 *
 * Replication: what a decision wrote reaches replicas and the AOF as its
 * effects -- commands that set the key's value and its absolute expiry
 * (SET ... PXAT, PEXPIREAT, ZADD, ZREMRANGEBYSCORE, HSET ...) through
 * RedisModule_Replicate() -- never the SLUICE.* command itself, which a
 * replica or a reload would decide again on another clock.
 *
 * Events: each write the script's commands would make fires, through
 * sluice__mod_event(), the keyspace event that command fires, of its class
 * and in the script's order (INCRBY "incrby", PEXPIRE "expire", HSET
 * "hset", ...), and signals the key modified (WATCH, client tracking) as
 * the command does, once a decision (sluice__mod_event_more() for the
 * writes after the first). The module opens keys without the server's
 * implicit signal (module.c), so a decision that writes nothing -- a
 * refusal, a peek -- fires and signals nothing, as the script. Events are
 * fired after the write they stand for, so that the server's own "new",
 * for a key the write made, comes first, as the command fires it.
 */
#ifndef SLUICE_MODULE_GLUE_H
#define SLUICE_MODULE_GLUE_H

#include "module/redismodule_api.h"
#include "algo/algo.h"

/* A glue's answer when the key holds something its algorithm never writes
   there: nothing was changed (the scripts answer allowed = -1). */
#define SLUICE__MODULE_FOREIGN 1

/* One request of a SLUICE.* call, for one key. */
typedef struct sluice__mod_call {
    RedisModuleCtx *ctx;
    RedisModuleString *key;     /* the key's name, as the caller sent it */
    const sluice_limit *limit;  /* checked (sluice__request_check()) */
    uint64_t cost;              /* checked: 1 <= cost <= max, <= burst */
    bool consume;               /* false for PEEK: nothing is written */
    /* The call's clock, read once for every request of the call: NOW when
       the caller sent one (as the scripts' clock=caller), else the server's
       own time in ms (as the scripts' TIME). The fixed window keeps the
       server's expiry clock (PTTL), as its script does. */
    uint64_t now_ms;
    /* The server's own time in ms (RedisModule_Milliseconds()), read once
       for the call: what a relative expiry the scripts set (PEXPIRE, PX)
       counts from, and the fixed window's clock. Equal to 'now_ms' when
       the caller sent no NOW. */
    uint64_t server_ms;
    /* What makes this request's writes unique, where an algorithm needs it
       (the scripts' ARGV[5]; none of the five does now): a token unique to
       the call, and the request's place in the call (1, 2, ...). */
    const char *token;
    size_t token_len;
    unsigned place;
} sluice__mod_call;

/*
 * One write of the script's: 'event' of class 'type' (REDISMODULE_NOTIFY_*)
 * on the call's key, and the key signalled as modified, as the server's
 * command does (signal first, then the event).
 */
static inline void sluice__mod_event(const sluice__mod_call *call, int type,
                                     const char *event)
{
    RedisModule_SignalModifiedKey(call->ctx, call->key);
    RedisModule_NotifyKeyspaceEvent(call->ctx, type, event, call->key);
}

/*
 * A further write of the same decision on the same key, after one that
 * went through sluice__mod_event(): its event only. The key is signalled
 * once a decision: a second signal would show a watcher or a tracking
 * client nothing more (no client runs between the two).
 */
static inline void sluice__mod_event_more(const sluice__mod_call *call,
                                          int type, const char *event)
{
    RedisModule_NotifyKeyspaceEvent(call->ctx, type, event, call->key);
}

/*
 * Opens the call's key to read and write it, for an algorithm whose state
 * is one value of 'type' (REDISMODULE_KEYTYPE_*): the key, with '*found'
 * EMPTY or 'type'; or NULL, the key closed, when it holds another type
 * (another's value: the glue answers SLUICE__MODULE_FOREIGN).
 */
static inline RedisModuleKey *sluice__mod_open_as(const sluice__mod_call *call,
                                                  int type, int *found)
{
    RedisModuleKey *key = RedisModule_OpenKey(
        call->ctx, call->key, REDISMODULE_READ | REDISMODULE_WRITE);

    *found = RedisModule_KeyType(key);
    if (*found != REDISMODULE_KEYTYPE_EMPTY && *found != type) {
        RedisModule_CloseKey(key);
        return NULL;
    }
    return key;
}

typedef struct sluice__module_glue {
    /* Decides 'call' as the algorithm's script does, every field of 'out'
       (allowed, remaining, retry_after_ms, reset_after_ms) equal to what the
       script answers on the same key and clock. Returns 0;
       SLUICE__MODULE_FOREIGN (nothing changed); or a negative SLUICE_E*. */
    int (*decide)(const sluice__mod_call *call, sluice_decision *out);
} sluice__module_glue;

/* Each algorithm's glue, named after its folder. */
#define SLUICE__MODULE_DECLARE(name, val, folder) \
    extern const sluice__module_glue sluice__module_##folder;
SLUICE_ALGO_MAP(SLUICE__MODULE_DECLARE)
#undef SLUICE__MODULE_DECLARE

#endif /* SLUICE_MODULE_GLUE_H */
