/*
 * view_zset.c - the sorted set's count, trim, add and k'th oldest (view.h):
 * the sliding log's key.
 *
 * The set is sliding_log.lua's (its head comment gives the members' form:
 * one a request, carrying the set's running total of units), worked with
 * the key API instead of commands:
 *
 *   script                                  here
 *   ZRANGE key -1 -1 WITHSCORES (newest)    ZsetLastInScoreRange
 *   ZREMRANGEBYSCORE key -inf now-w         ZsetFirstInScoreRange + ZsetRem
 *   ZCARD key                               ValueLength
 *   ZRANGE key 0 0 (oldest)                 ZsetFirstInScoreRange
 *   ZADD key now member                     ZsetAdd
 *   PTTL < w ? PEXPIRE key w                GetAbsExpire, SetAbsExpire (from
 *                                           the call's server clock)
 *   ZRANGE key r r WITHSCORES (bisecting    the same, through RM_Call
 *   a refusal's rank)                       (refusals only)
 *
 * Times are the script's, in doubles (scores are doubles), and what it
 * writes is what the script writes: the score formatted with its str()
 * (%.0f), the member as its member(). The running totals are exact
 * integers below 2^53 in both, so here they are uint64_t.
 *
 * Replicas and the AOF receive the effects, with exact numbers: the
 * ZREMRANGEBYSCORE with the bound used (never a clock-relative one), the
 * ZADD of the exact member, and PEXPIREAT with the absolute expiry. The
 * keyspace events are the script's commands': "zremrangebyscore" for a
 * trim that removed something (then "del" when it emptied the set), "zadd"
 * for the member added, "expire" for an expiry extended.
 */
#include "module/view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO53 ((uint64_t)1 << 53) /* where a running total's low part wraps */

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

/* ---- Members: a running total and the request's units -------------------- */

/* The decimal digits p[0..len) as a number below 2^53; false when they are
   not all digits, or not below 2^53. */
static bool digits_below_2_53(const char *p, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 16)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return v < TWO53;
}

/*
 * The script's parse(): the running total and units of member m[0..len), or
 * false when it is not a member the sliding log writes.
 */
static bool member_parse(const char *m, size_t len, sluice__mod_total *end,
                         uint64_t *units)
{
    size_t n;

    if (len < 1 || m[0] < 'A' || m[0] > 'Q')
        return false;
    n = (size_t)(m[0] - 'A');
    if (len < 1 + n + 16)
        return false;
    end->hi = 0;
    *units = 1;
    if (n > 0 && (m[1] == '0' || !digits_below_2_53(m + 1, n, &end->hi)))
        return false;
    for (size_t i = 0; i < 16; i++) /* leading zeros are the form here */
        if (m[1 + n + i] < '0' || m[1 + n + i] > '9')
            return false;
    if (!digits_below_2_53(m + 1 + n, 16, &end->lo))
        return false;
    if (len > 1 + n + 16) {
        const char *u = m + 1 + n + 16;
        size_t ulen = len - (1 + n + 16);

        if (u[0] != ':' || ulen < 2 || u[1] == '0' ||
            !digits_below_2_53(u + 1, ulen - 1, units))
            return false;
    }
    return !(end->hi == 0 && end->lo < *units);
}

/* The script's member(): writes the member into 'buf' (at least 64
   bytes); answers its length. */
static size_t member_text(char *buf, sluice__mod_total end, uint64_t units)
{
    char hi[24] = "";
    int len;

    if (end.hi > 0)
        snprintf(hi, sizeof(hi), "%llu", (unsigned long long)end.hi);
    len = snprintf(buf, 64, "%c%s%016llu", 'A' + (int)strlen(hi), hi,
                   (unsigned long long)end.lo);
    if (units > 1)
        len += snprintf(buf + len, 64 - (size_t)len, ":%llu",
                        (unsigned long long)units);
    return (size_t)len;
}

/* The script's minus() and plus(). */
static sluice__mod_total total_minus(sluice__mod_total t, uint64_t units)
{
    if (t.lo >= units)
        return (sluice__mod_total){t.hi, t.lo - units};
    return (sluice__mod_total){t.hi - 1, t.lo + (TWO53 - units)};
}

static sluice__mod_total total_plus(sluice__mod_total t, uint64_t units)
{
    if (t.lo >= TWO53 - units)
        return (sluice__mod_total){t.hi + 1, t.lo - (TWO53 - units)};
    return (sluice__mod_total){t.hi, t.lo + units};
}

/* The script's since(): 't - base' into '*out' when that is below 2^53. */
static bool total_since(sluice__mod_total t, sluice__mod_total base,
                        uint64_t *out)
{
    if (t.hi == base.hi && t.lo >= base.lo) {
        *out = t.lo - base.lo;
        return true;
    }
    if (t.hi == base.hi + 1 && t.lo < base.lo) {
        *out = (TWO53 - base.lo) + t.lo;
        return true;
    }
    return false;
}

/* ---- Reading the set ----------------------------------------------------- */

/*
 * The member at one end of the set (the newest: 'last'), parsed, and its
 * score; false when the set is empty or the member is not the log's
 * ('*ours' tells which).
 */
static bool end_member(RedisModuleCtx *ctx, RedisModuleKey *key, bool last,
                       sluice__mod_total *end, uint64_t *units, double *score,
                       bool *ours)
{
    RedisModuleString *m;
    bool found = false;

    *ours = true;
    if (last)
        RedisModule_ZsetLastInScoreRange(key, -INFINITY, INFINITY, 0, 0);
    else
        RedisModule_ZsetFirstInScoreRange(key, -INFINITY, INFINITY, 0, 0);
    m = RedisModule_ZsetRangeCurrentElement(key, score);
    if (m != NULL) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(m, &len);

        found = true;
        *ours = member_parse(p, len, end, units);
        RedisModule_FreeString(ctx, m);
    }
    RedisModule_ZsetRangeStop(key);
    return found && *ours;
}

/*
 * The member of 'rank' (-1: the newest) through ZRANGE, as the script reads
 * it: parsed into 'end' (false when it is not the log's) and its score.
 */
static bool rank_member(const sluice__mod_call *call, long long rank,
                        sluice__mod_total *end, double *score)
{
    RedisModuleCallReply *r;
    bool ok = false;

    r = RedisModule_Call(call->ctx, "ZRANGE", "sllc", call->key, rank, rank,
                         "WITHSCORES");
    if (r != NULL && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY &&
        RedisModule_CallReplyLength(r) == 2) {
        size_t mlen, slen;
        const char *m = RedisModule_CallReplyStringPtr(
            RedisModule_CallReplyArrayElement(r, 0), &mlen);
        const char *s = RedisModule_CallReplyStringPtr(
            RedisModule_CallReplyArrayElement(r, 1), &slen);
        uint64_t units;

        *score = 0;
        if (s != NULL && !sluice__mod_lua_tonumber(s, slen, score))
            *score = 0;
        ok = m != NULL && member_parse(m, mlen, end, &units);
    }
    if (r != NULL)
        RedisModule_FreeCallReply(r);
    return ok;
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
 * ZADD of the request's one member at 'now', taking the running total to
 * 'end', then the expiry extended to one window if it would end sooner;
 * both replicated.
 */
static void add(const sluice__mod_call *call, RedisModuleKey *key, double now,
                sluice__mod_total end, uint64_t cost)
{
    RedisModuleString *at, *m;
    char buf[600];
    size_t len;
    long long expire_at, w = (long long)call->limit->window_ms;

    len = sluice__mod_lua_str(buf, sizeof(buf), now);
    at = RedisModule_CreateString(call->ctx, buf, len);
    len = member_text(buf, end, cost);
    m = RedisModule_CreateString(call->ctx, buf, len);
    RedisModule_ZsetAdd(key, as_written(now), m, NULL);
    RedisModule_Replicate(call->ctx, "ZADD", "sss", call->key, at, m);
    sluice__mod_event(call, REDISMODULE_NOTIFY_ZSET, "zadd");
    RedisModule_FreeString(call->ctx, m);
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

/*
 * The script's bisection: the rank of the first member whose running total
 * reaches 'must' units past 'base' (the oldest member's start), among
 * 'n'; -1 when a member on the way is not the log's.
 */
static long long leaving_rank(const sluice__mod_call *call,
                              sluice__mod_total base, uint64_t must,
                              long long n)
{
    long long first = 0, last = n - 1;

    while (first < last) {
        long long mid = (first + last) / 2;
        sluice__mod_total end;
        uint64_t reach;
        double score;

        if (!rank_member(call, mid, &end, &score) ||
            !total_since(end, base, &reach))
            return -1;
        if (reach >= must)
            last = mid;
        else
            first = mid + 1;
    }
    return first;
}

/* ---- The primitives ------------------------------------------------------ */

int sluice__mod_zset_open(const sluice__mod_call *call, sluice__mod_zset *z)
{
    memset(z, 0, sizeof(*z));
    z->call = call;
    z->key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_ZSET, &z->type);
    return z->key == NULL ? SLUICE__MODULE_FOREIGN : 0;
}

int sluice__mod_zset_newest(sluice__mod_zset *z, bool *found, double *t)
{
    uint64_t units;
    bool ours;

    *found = false;
    *t = 0;
    if (z->type != REDISMODULE_KEYTYPE_ZSET)
        return 0;
    /* A set is never empty: its newest is the log's, or it is foreign. */
    if (!end_member(z->call->ctx, z->key, true, &z->end, &units, t, &ours))
        return SLUICE__MODULE_FOREIGN;
    *found = true;
    return 0;
}

void sluice__mod_zset_trim(sluice__mod_zset *z, double now, double w)
{
    if (z->type != REDISMODULE_KEYTYPE_ZSET)
        return;
    /* As ZREMRANGEBYSCORE, leave no empty set behind, and say so. */
    if (trim(z->call, z->key, as_written(now - w)) > 0 &&
        RedisModule_ValueLength(z->key) == 0) {
        if (RedisModule_KeyType(z->key) != REDISMODULE_KEYTYPE_EMPTY)
            RedisModule_DeleteKey(z->key);
        sluice__mod_event_more(z->call, REDISMODULE_NOTIFY_GENERIC, "del");
    }
    z->n = RedisModule_ValueLength(z->key);
}

int sluice__mod_zset_total(sluice__mod_zset *z, uint64_t *total)
{
    sluice__mod_total oldest;
    uint64_t units;
    double score;
    bool ours;

    *total = 0;
    if (z->n == 0) {
        z->end = (sluice__mod_total){0, 0}; /* an empty set starts anew */
        return 0;
    }
    if (!end_member(z->call->ctx, z->key, false, &oldest, &units, &score,
                    &ours) ||
        !total_since(z->end, (z->base = total_minus(oldest, units)), total) ||
        *total < z->n)
        return SLUICE__MODULE_FOREIGN;
    return 0;
}

int sluice__mod_zset_kth(sluice__mod_zset *z, uint64_t k, double *t)
{
    long long rank = leaving_rank(z->call, z->base, k, (long long)z->n);
    sluice__mod_total end;

    if (rank < 0 || !rank_member(z->call, rank, &end, t))
        return SLUICE__MODULE_FOREIGN;
    return 0;
}

int sluice__mod_zset_add(sluice__mod_zset *z, double now, uint64_t cost)
{
    add(z->call, z->key, now, total_plus(z->end, cost), cost);
    return 0;
}
