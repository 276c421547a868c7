/*
 * module.c - the sliding log inside the server (sluice.so).
 *
 * The decision of sliding_log.lua, step for step, on the very sorted set it
 * keeps, with the key API instead of commands:
 *
 *   script                                  here
 *   ZRANGE key -1 -1 WITHSCORES (newest)    ZsetFirstInScoreRange(now, +inf)
 *                                           (held clock), ZsetLastInScoreRange
 *   ZREMRANGEBYSCORE key -inf now-w         ZsetFirstInScoreRange + ZsetRem
 *   ZCARD key                               ValueLength
 *   ZADD key at member ...                  ZsetAdd, member at:token:place:i
 *   PTTL < w ? PEXPIRE key w                GetAbsExpire, SetAbsExpire (from
 *                                           the call's server clock)
 *   ZRANGE key must-1 must-1 WITHSCORES     a walk from the nearer end (a
 *                                           ZRANGE through RM_Call when both
 *                                           ends are far: refusals only)
 *
 * The arithmetic is the script's, in doubles (scores are doubles), and
 * what it writes is what the script writes: members and scores formatted
 * with its str() (%.0f). A clock earlier than the newest member is held at
 * it, as the script holds it.
 *
 * Replicas and the AOF receive the effects, with exact numbers: the
 * ZREMRANGEBYSCORE with the bound used (never a clock-relative one), the
 * ZADD of the exact members, and PEXPIREAT with the absolute expiry. The
 * keyspace events are the script's commands': "zremrangebyscore" for a
 * trim that removed something (then "del" when it emptied the set), "zadd"
 * for each batch, "expire" for an expiry extended.
 */
#include "module/module.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Members per ZADD replicated, as the script's batches. */
#define ZADD_BATCH 512
/* Steps a refusal walks along the set to its rank before asking ZRANGE. */
#define WALK_MAX 64

/* A number once written with str() and read back, as a script's argument
   is: the score ZADD and ZREMRANGEBYSCORE receive. */
static double as_written(double d)
{
    char buf[512];

    if (d > -9e18 && d < 9e18 && (double)(long long)d == d)
        return d;
    sluice__mod_lua_str(buf, sizeof(buf), d);
    return strtod(buf, NULL);
}

/* A Lua number as the server replies it: truncated to an integer. */
static uint64_t lua_reply(double d)
{
    return (uint64_t)sluice__mod_lua_int(d);
}

/* ---- Reading the set ----------------------------------------------------- */

/* The score of the set's newest (highest) member; the set is not empty. */
static double newest_score(RedisModuleCtx *ctx, RedisModuleKey *key)
{
    double score = 0;
    RedisModuleString *m;

    RedisModule_ZsetLastInScoreRange(key, -INFINITY, INFINITY, 0, 0);
    m = RedisModule_ZsetRangeCurrentElement(key, &score);
    if (m != NULL)
        RedisModule_FreeString(ctx, m);
    RedisModule_ZsetRangeStop(key);
    return score;
}

/* Whether the set holds a member scored above 'now' (the clock is then
   held at the newest): no member is read, so nothing is allocated. */
static bool any_after(RedisModuleKey *key, double now)
{
    bool yes = RedisModule_ZsetFirstInScoreRange(key, now, INFINITY, 1, 0) ==
                   REDISMODULE_OK &&
               !RedisModule_ZsetRangeEndReached(key);

    RedisModule_ZsetRangeStop(key);
    return yes;
}

/* The score of the member of 'rank' (0: the lowest) in a set of 'total'. */
static double rank_score(const sluice__mod_call *call, RedisModuleKey *key,
                         long long rank, long long total)
{
    double score = 0;
    long long steps = rank < total - 1 - rank ? rank : total - 1 - rank;

    if (steps > WALK_MAX) {
        RedisModuleCallReply *r, *e;

        r = RedisModule_Call(call->ctx, "ZRANGE", "sllc", call->key, rank,
                             rank, "WITHSCORES");
        if (r != NULL && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY
            && RedisModule_CallReplyLength(r) == 2) {
            size_t len;
            const char *p;

            e = RedisModule_CallReplyArrayElement(r, 1);
            p = RedisModule_CallReplyStringPtr(e, &len);
            if (p != NULL && !sluice__mod_lua_tonumber(p, len, &score))
                score = 0;
        }
        if (r != NULL)
            RedisModule_FreeCallReply(r);
        return score;
    }
    if (steps == rank) {
        RedisModule_ZsetFirstInScoreRange(key, -INFINITY, INFINITY, 0, 0);
        while (steps-- > 0)
            RedisModule_ZsetRangeNext(key);
    } else {
        RedisModule_ZsetLastInScoreRange(key, -INFINITY, INFINITY, 0, 0);
        while (steps-- > 0)
            RedisModule_ZsetRangePrev(key);
    }
    RedisModuleString *m = RedisModule_ZsetRangeCurrentElement(key, &score);
    if (m != NULL)
        RedisModule_FreeString(call->ctx, m);
    RedisModule_ZsetRangeStop(key);
    return score;
}

/* ---- Writing it ---------------------------------------------------------- */

/*
 * ZREMRANGEBYSCORE key -inf 'bound': removes the members scored <= 'bound'
 * (collected first: the range iterator does not outlive a removal), and
 * replicates that command with the bound as a number, and fires its event,
 * when any left. Answers how many left.
 */
static size_t trim(const sluice__mod_call *call, RedisModuleKey *key,
                 double bound)
{
    RedisModuleString *few[16], **gone = few;
    size_t n = 0, cap = 16;
    double score;

    if (RedisModule_ZsetFirstInScoreRange(key, -INFINITY, bound, 0, 0) !=
        REDISMODULE_OK)
        return 0;
    while (!RedisModule_ZsetRangeEndReached(key)) {
        if (n == cap) {
            RedisModuleString **more =
                RedisModule_Alloc(2 * cap * sizeof(*more));

            memcpy(more, gone, n * sizeof(*more));
            if (gone != few)
                RedisModule_Free(gone);
            gone = more;
            cap *= 2;
        }
        gone[n++] = RedisModule_ZsetRangeCurrentElement(key, &score);
        if (!RedisModule_ZsetRangeNext(key))
            break;
    }
    RedisModule_ZsetRangeStop(key);
    for (size_t i = 0; i < n; i++) {
        RedisModule_ZsetRem(key, gone[i], NULL);
        RedisModule_FreeString(call->ctx, gone[i]);
    }
    if (gone != few)
        RedisModule_Free(gone);
    if (n > 0) {
        char buf[512];
        size_t len = sluice__mod_lua_str(buf, sizeof(buf), bound);

        RedisModule_Replicate(call->ctx, "ZREMRANGEBYSCORE", "scb", call->key,
                              "-inf", buf, len);
        sluice__mod_event(call, REDISMODULE_NOTIFY_ZSET, "zremrangebyscore");
    }
    return n;
}

/*
 * ZADD of 'cost' members at 'now' (at:token:place:i, i = 1..cost), in the
 * script's batches, then the expiry extended to one window if it would end
 * sooner; both replicated.
 */
static void add(const sluice__mod_call *call, RedisModuleKey *key, double now)
{
    RedisModuleString *argv[2 * ZADD_BATCH], *at;
    char buf[600];
    size_t at_len, prefix_len;
    double score = as_written(now);
    uint64_t i = 0;
    long long expire_at, w = (long long)call->limit->window_ms;

    at_len = sluice__mod_lua_str(buf, sizeof(buf), now);
    at = RedisModule_CreateString(call->ctx, buf, at_len);
    prefix_len = at_len + (size_t)snprintf(buf + at_len, sizeof(buf) - at_len,
                                           ":%.*s:%u:", (int)call->token_len,
                                           call->token, call->place);
    while (i < call->cost) {
        uint64_t n = call->cost - i < ZADD_BATCH ? call->cost - i : ZADD_BATCH;

        for (uint64_t j = 0; j < n; j++) {
            size_t len = prefix_len +
                sluice__mod_lua_str(buf + prefix_len, sizeof(buf) - prefix_len,
                        (double)(i + j + 1));

            argv[2 * j] = at;
            argv[2 * j + 1] = RedisModule_CreateString(call->ctx, buf, len);
            RedisModule_ZsetAdd(key, score, argv[2 * j + 1], NULL);
        }
        RedisModule_Replicate(call->ctx, "ZADD", "sv", call->key, argv,
                              (size_t)(2 * n));
        if (i == 0)
            sluice__mod_event(call, REDISMODULE_NOTIFY_ZSET, "zadd");
        else
            sluice__mod_event_more(call, REDISMODULE_NOTIFY_ZSET, "zadd");
        for (uint64_t j = 0; j < n; j++)
            RedisModule_FreeString(call->ctx, argv[2 * j + 1]);
        i += n;
    }
    RedisModule_FreeString(call->ctx, at);
    /* Only ever extend the key's life: a call with a shorter window must not
       cut short entries that a longer one still counts. */
    expire_at = RedisModule_GetAbsExpire(key);
    if (expire_at == REDISMODULE_NO_EXPIRE ||
        expire_at - (long long)call->server_ms < w) {
        expire_at = (long long)call->server_ms + w;
        RedisModule_SetAbsExpire(key, expire_at);
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
        RedisModule_Replicate(call->ctx, "PEXPIREAT", "sl", call->key,
                              expire_at);
    }
}

/* ---- The decision -------------------------------------------------------- */

static int log_decide(const sluice__mod_call *call, sluice_decision *out)
{
    double w = (double)call->limit->window_ms, max = (double)call->limit->max;
    double cost = (double)call->cost, now = (double)call->now_ms;
    double newest = 0, total = 0, must, leaving;
    RedisModuleKey *key;
    int type;

    key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_ZSET, &type);
    if (key == NULL)
        return SLUICE__MODULE_FOREIGN;
    if (type == REDISMODULE_KEYTYPE_ZSET) {
        if (any_after(key, now))
            now = newest_score(call->ctx, key);
        /* As ZREMRANGEBYSCORE, leave no empty set behind, and say so. */
        if (trim(call, key, as_written(now - w)) > 0 &&
            RedisModule_ValueLength(key) == 0) {
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY)
                RedisModule_DeleteKey(key);
            sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "del");
        }
        total = (double)RedisModule_ValueLength(key);
    }
    out->limit = call->limit->max;
    if (total + cost <= max) {
        if (call->consume)
            add(call, key, now);
        RedisModule_CloseKey(key);
        out->allowed = 1;
        out->remaining = lua_reply(max - total - cost);
        out->retry_after_ms = 0;
        out->reset_after_ms = call->limit->window_ms;
        return 0;
    }
    /* Refused: the set is not empty, and its newest member stayed. */
    newest = newest_score(call->ctx, key);
    must = total - (max - cost);
    leaving = rank_score(call, key, (long long)must - 1, (long long)total);
    RedisModule_CloseKey(key);
    out->allowed = 0;
    out->remaining = total < max ? lua_reply(max - total) : 0;
    out->retry_after_ms = lua_reply(leaving - now + w);
    out->reset_after_ms = lua_reply(newest - now + w);
    return 0;
}

const sluice__module_glue sluice__module_sliding_log = {
    .decide = log_decide,
};
