/*
 * emq.c - the job queue's limiter as module commands, exactly as its
 * scripts (src/queue/lua/):
 *
 *   SLUICE.EMQINCR limiter window_ms [now]   emq_incr.lua: the fixed
 *       window's counter step (counter.lua), one unit -> [count, pttl]
 *   SLUICE.EMQTTL limiter meta [max [now]]   emq_ttl.lua (limiter.lua's
 *       limiter_state()): the wait in ms; 'max' 0 or absent reads the
 *       field 'max' of the meta hash, and then a hash with a numeric
 *       'max' and no duration above 0 is the dequeue point's error
 *
 * 'now' is the caller's clock in ms, or "" for the server's, as every
 * queue script takes it (src/queue/lua/now.lua): checked as SLUICE.HIT's
 * NOW (0 to 2^53), and then unused by both, as by their scripts: the
 * limiter's window is the counter's own lifetime (PTTL), the server's
 * clock, as the fixed window keeps it under clock=caller.
 *
 * The key 'limiter' is the queue's emq:{q}:limiter, the same string and
 * expiry the scripts keep; errors the scripts pass on (a key of the wrong
 * type, a counter that is not an integer) are the server's own.
 */
#include "module/view.h"

#include <limits.h>
#include <string.h>

#define NOT_INTEGER "ERR value is not an integer or out of range"
#define OVERFLOW "ERR increment or decrement would overflow"

/*
 * The optional 'now' of a queue script's twin, argv[at] when argc reaches
 * it: "" or absent leaves '*now' (the server's clock); else a number 0 to
 * 2^53 (an error reply and -1 otherwise).
 */
static int now_arg(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                   int at, uint64_t *now)
{
    size_t len = 0;

    if (argc <= at)
        return 0;
    RedisModule_StringPtrLen(argv[at], &len);
    if (len == 0)
        return 0;
    return sluice__mod_number(ctx, argv[at], "now", 0, SLUICE_NOW_MAX_MS, now);
}

int sluice__mod_emqincr(RedisModuleCtx *ctx, RedisModuleString **argv,
                        int argc)
{
    sluice_limit limit = {.algo = SLUICE_FIXED, .max = SLUICE_MAX_MAX};
    sluice__mod_call call = {.ctx = ctx, .limit = &limit, .cost = 1,
                             .consume = true};
    sluice__mod_counter v;
    unsigned did;
    long long n;
    int rc;

    if (argc != 3 && argc != 4)
        return sluice__mod_error(ctx, "wrong number of arguments for "
                                 "SLUICE.EMQINCR (expected limiter "
                                 "window_ms [now])");
    call.server_ms = (uint64_t)RedisModule_Milliseconds();
    call.now_ms = call.server_ms;
    if (sluice__mod_number(ctx, argv[2], "window_ms", 1, SLUICE_WINDOW_MAX_MS,
                           &limit.window_ms) < 0 ||
        now_arg(ctx, argv, argc, 3, &call.now_ms) < 0)
        return REDISMODULE_OK;
    call.key = argv[1];
    rc = sluice__mod_counter_open(&call, 1, &v);
    if (rc == SLUICE__MODULE_WRONGTYPE)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (rc == SLUICE__MODULE_NOT_INTEGER)
        return RedisModule_ReplyWithError(ctx, NOT_INTEGER);
    if (rc == SLUICE__MODULE_OVERFLOW)
        return RedisModule_ReplyWithError(ctx, OVERFLOW);
    /* The window's turn, and the unit always counted: no cap. */
    did = sluice__fixed_roll(&v.count, &v.ttl_ms, v.found, limit.window_ms, true);
    n = sluice__mod_counter_close(&call, &v, did | SLUICE__FIXED_COUNTED, 1);
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithLongLong(ctx, n);
    return RedisModule_ReplyWithLongLong(ctx, v.ttl_ms);
}

/*
 * The cap in force: 'max' when above 0, else tonumber() of the meta hash's
 * field 'max'. Answers 1 with '*cap', 0 when there is none (not limited),
 * -1 when the meta key is not a hash.
 */
static int cap_of(RedisModuleCtx *ctx, RedisModuleString *meta, uint64_t max,
                  double *cap)
{
    RedisModuleKey *key;
    RedisModuleString *field = NULL;
    int type, found = 0;

    key = RedisModule_OpenKey(ctx, meta, REDISMODULE_READ);
    type = RedisModule_KeyType(key);
    /* HMGET comes first in the script, so its error does too. */
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_HASH) {
        RedisModule_CloseKey(key);
        return -1;
    }
    if (max > 0) {
        *cap = (double)max;
        found = 1;
    } else if (type == REDISMODULE_KEYTYPE_HASH) {
        size_t len;
        const char *s;

        RedisModule_HashGet(key, REDISMODULE_HASH_CFIELDS, "max", &field,
                            NULL);
        if (field != NULL) {
            s = RedisModule_StringPtrLen(field, &len);
            found = sluice__mod_lua_tonumber(s, len, cap) ? 1 : 0;
            RedisModule_FreeString(ctx, field);
        }
    }
    RedisModule_CloseKey(key);
    return found;
}

/* limiter_state()'s wait, once the cap is known. */
static int wait_of(RedisModuleCtx *ctx, RedisModuleString *limiter,
                   double cap, long long *wait)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, limiter, REDISMODULE_READ);
    int type = RedisModule_KeyType(key);
    const char *raw;
    size_t len;
    double count;

    *wait = 0;
    if (type == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return 0;
    }
    if (type != REDISMODULE_KEYTYPE_STRING ||
        (raw = RedisModule_StringDMA(key, &len, REDISMODULE_READ)) == NULL) {
        RedisModule_CloseKey(key);
        return -1;
    }
    if (sluice__mod_lua_tonumber(raw, len, &count) && !(count < cap)) {
        long long ttl = RedisModule_GetExpire(key);

        if (ttl > 0)
            *wait = ttl;
    }
    RedisModule_CloseKey(key);
    return 0;
}

/* tonumber() of the field 'name' of the hash 'key'; false without one. */
static bool hash_number(RedisModuleCtx *ctx, RedisModuleKey *key,
                        const char *name, double *out)
{
    RedisModuleString *field = NULL;
    bool ok = false;

    RedisModule_HashGet(key, REDISMODULE_HASH_CFIELDS, name, &field, NULL);
    if (field != NULL) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(field, &len);

        ok = sluice__mod_lua_tonumber(s, len, out);
        RedisModule_FreeString(ctx, field);
    }
    return ok;
}

/* True when the meta hash 'meta' has no duration above 0, which the
   dequeue point refuses for a cap of its 'max' (queue_take.lua). */
static bool cap_unenforceable(RedisModuleCtx *ctx, RedisModuleString *meta)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, meta, REDISMODULE_READ);
    double duration;
    bool bad = !(RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_HASH &&
                 hash_number(ctx, key, "duration", &duration) &&
                 duration > 0);

    RedisModule_CloseKey(key);
    return bad;
}

int sluice__mod_emqttl(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc)
{
    uint64_t max = 0, now = 0;
    long long wait = 0;
    double cap;
    int found;

    if (argc < 3 || argc > 5)
        return sluice__mod_error(ctx, "wrong number of arguments for "
                                 "SLUICE.EMQTTL (expected limiter meta "
                                 "[max [now]])");
    if ((argc >= 4 && sluice__mod_number(ctx, argv[3], "max", 0,
                                         SLUICE_MAX_MAX, &max) < 0) ||
        now_arg(ctx, argv, argc, 4, &now) < 0)
        return REDISMODULE_OK;
    found = cap_of(ctx, argv[2], max, &cap);
    if (found > 0 && wait_of(ctx, argv[1], cap, &wait) < 0)
        found = -1;
    if (found < 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (max == 0 && found > 0 && cap_unenforceable(ctx, argv[2])) {
        size_t len;
        const char *name = RedisModule_StringPtrLen(argv[2], &len);
        RedisModuleString *msg = RedisModule_CreateStringPrintf(
            ctx, "ERR sluice: the queue's meta hash %.*s has a cap (max) "
            "but no duration, so it cannot be enforced", (int)len, name);
        const char *text = RedisModule_StringPtrLen(msg, &len);

        RedisModule_ReplyWithError(ctx, text);
        RedisModule_FreeString(ctx, msg);
        return REDISMODULE_OK;
    }
    return RedisModule_ReplyWithLongLong(ctx, wait);
}
