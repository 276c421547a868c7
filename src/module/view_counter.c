/*
 * view_counter.c - a counter and its expiry (view.h): the fixed window's
 * key, and the queue limiter's.
 *
 * It reads the key as the script does: a hit as INCRBY (a key at "0" arms
 * a new window, a negative count counts up from there), a peek as Lua's
 * tonumber(); the PTTL on the server's expiry clock -- NOW does not move
 * it, as ARGV[4] does not move the script.
 *
 * What it leaves on the key is what the script leaves: an admitted hit the
 * count plus cost, a refusal the count unchanged (the script's INCRBY and
 * DECRBY cancel), a key met at PTTL 0 a fresh window, a count without a TTL
 * the window as its TTL (even on a refusal or a peek). Replicas and the AOF
 * get the effects: INCRBY for a count added on a window already armed (the
 * common admit, as the script's own INCRBY is replicated), SET key count
 * PXAT expiry where a window is armed, PEXPIREAT for a new TTL alone,
 * nothing for a decision that changes nothing. Keyspace events are the
 * script's commands': "incrby" for every hit (a refusal a second one: the
 * server fires "incrby" for DECRBY too), "del" and "incrby" for a window
 * restarted at PTTL 0, "expire" wherever the script's PEXPIRE runs.
 */
#include "module/view.h"

#include <limits.h>
#include <string.h>

int sluice__mod_counter_open(const sluice__mod_call *call, long long by,
                             sluice__mod_counter *v)
{
    int type, mode = by > 0 ? REDISMODULE_WRITE : REDISMODULE_READ;
    long long at;

    memset(v, 0, sizeof(*v));
    v->ttl_ms = -1;
    v->key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_STRING, &type);
    if (v->key == NULL)
        return SLUICE__MODULE_WRONGTYPE;
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return 0;
    v->raw = RedisModule_StringDMA(v->key, &v->raw_len, mode);
    if (v->raw == NULL) {
        RedisModule_CloseKey(v->key);
        return SLUICE__MODULE_WRONGTYPE;
    }
    if (by > 0 && (!sluice__mod_strict_ll(v->raw, v->raw_len, &v->value) ||
                   v->value > LLONG_MAX - by)) {
        RedisModule_CloseKey(v->key); /* INCRBY's errors: nothing changed */
        return v->value > LLONG_MAX - by ? SLUICE__MODULE_OVERFLOW
                                         : SLUICE__MODULE_NOT_INTEGER;
    }
    if (by > 0)
        v->count = (double)v->value;
    else if (!sluice__mod_lua_tonumber(v->raw, v->raw_len, &v->count)) {
        RedisModule_CloseKey(v->key);
        return SLUICE__MODULE_WRONGTYPE;
    }
    v->found = true;
    /* The PTTL as the server's PTTL answers it: 0 from its last ms on. */
    at = RedisModule_GetAbsExpire(v->key);
    if (at != REDISMODULE_NO_EXPIRE)
        v->ttl_ms = at > (long long)call->server_ms
                          ? at - (long long)call->server_ms : 0;
    return 0;
}

/* What a decision changed, and so what replicas and the AOF get. */
typedef enum change {
    CHANGED_NOTHING,
    CHANGED_COUNT,  /* the count, on a window already armed: INCRBY */
    CHANGED_WINDOW, /* a new count and its expiry: SET ... PXAT */
    CHANGED_EXPIRY, /* the expiry alone: PEXPIREAT */
} change;

/*
 * Sends replicas and the AOF what changed, as effects that give their
 * identical key the same value and absolute expiry: a count added on a
 * window already armed as the script's own INCRBY does (the key keeps its
 * expiry, and a replica or an AOF load never expires a key itself); a
 * window armed as the new count with its absolute expiry 'at'; an expiry
 * alone as PEXPIREAT 'at'. 'text' is the count, 'by' what was added.
 */
static void counter_replicate(const sluice__mod_call *call, change what,
                              const char *text, size_t len, long long by,
                              long long at)
{
    char num[24];
    size_t n;

    switch (what) {
    case CHANGED_COUNT:
        if (by == 1) {
            RedisModule_Replicate(call->ctx, "INCR", "s", call->key);
            return;
        }
        n = sluice__mod_ll_text(num, by);
        RedisModule_Replicate(call->ctx, "INCRBY", "sb", call->key, num, n);
        return;
    case CHANGED_WINDOW:
        sluice__mod_replicate_set(call->ctx, call->key, text, len, at);
        return;
    case CHANGED_EXPIRY:
        n = sluice__mod_ll_text(num, at);
        RedisModule_Replicate(call->ctx, "PEXPIREAT", "sb", call->key, num, n);
        return;
    case CHANGED_NOTHING:
        return;
    }
}

/*
 * The events of the script's commands for a hit, fired once the key holds
 * what they left (so the server's "new", for a key the write created,
 * comes first, as INCRBY fires it): INCRBY's "incrby"; at the window's end
 * (PTTL 0) DEL's "del", then the second INCRBY's "new" (it makes the key
 * anew, where the glue writes it in place) and "incrby"; PEXPIRE's
 * "expire" where a window is armed; DECRBY's ("incrby" too) for a refusal.
 */
static void counter_events(const sluice__mod_call *call, bool restarted,
                           bool arm, bool admit)
{
    sluice__mod_event(call, REDISMODULE_NOTIFY_STRING, "incrby");
    if (restarted) {
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "del");
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_NEW, "new");
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_STRING, "incrby");
    }
    if (arm)
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
    if (!admit)
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_STRING, "incrby");
}

/* A peek writes only the expiry of a count found without one. */
static void peek_close(const sluice__mod_call *call, sluice__mod_counter *v,
                       unsigned did)
{
    long long at = (long long)(call->server_ms + call->limit->window_ms);

    if (v->found && did == SLUICE__FIXED_ARMED) {
        RedisModule_SetAbsExpire(v->key, at);
        sluice__mod_event(call, REDISMODULE_NOTIFY_GENERIC, "expire");
        counter_replicate(call, CHANGED_EXPIRY, NULL, 0, 0, at);
    }
    RedisModule_CloseKey(v->key);
}

long long sluice__mod_counter_close(const sluice__mod_call *call,
                                    sluice__mod_counter *v, unsigned did,
                                    long long by)
{
    bool arm = (did & SLUICE__FIXED_ARMED) != 0;
    bool admit = (did & SLUICE__FIXED_COUNTED) != 0;
    long long at = 0, n;
    char text[24];
    size_t len;

    if (by == 0) {
        peek_close(call, v, did);
        return 0;
    }
    /* In long long, as INCRBY adds: exact where the decision's double
       need not be. */
    n = (did & SLUICE__FIXED_RESTARTED) ? by : v->value + by;
    len = sluice__mod_ll_text(text, n);
    if (admit && v->raw != NULL && v->raw_len == len)
        memcpy(v->raw, text, len); /* in place: the same length */
    else if (admit)
        sluice__mod_string_write(v->key, text, len);
    if (arm) {
        at = (long long)(call->server_ms + call->limit->window_ms);
        RedisModule_SetAbsExpire(v->key, at);
    }
    counter_events(call, (did & SLUICE__FIXED_RESTARTED) != 0, arm, admit);
    counter_replicate(call, !arm ? (admit ? CHANGED_COUNT : CHANGED_NOTHING)
                            : (admit ? CHANGED_WINDOW : CHANGED_EXPIRY),
                      text, len, by, at);
    RedisModule_CloseKey(v->key);
    return n;
}
