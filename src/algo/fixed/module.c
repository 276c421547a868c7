/*
 * module.c - the fixed window's glue for sluice.so (src/module/glue.h).
 *
 * The key is fixed.lua's: a string holding the count, whose expiry is the
 * window. The decision mirrors the script step for step (fixed.lua and
 * counter.lua), on the server's expiry clock as the script's PTTL -- NOW
 * does not move it, as ARGV[4] does not move the script -- and with the
 * script's own readings of odd values: a hit reads the count as INCRBY does
 * (a key at "0" arms a new window; a negative count counts up from there),
 * a peek as Lua's tonumber(); figures are computed in doubles as the script
 * computes them.
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
#include "module/module.h"

#include <limits.h>
#include <string.h>

/* The counter as one decision sees it. */
typedef struct counter {
    RedisModuleKey *key;
    char *raw; /* its value; NULL when there is no key */
    size_t raw_len;
} counter;

/*
 * Opens the key for writing, its value reached for 'mode' (READ, or WRITE
 * for a value written in place next); SLUICE__MODULE_FOREIGN if it is not
 * a string.
 */
static int counter_open(const sluice__mod_call *call, int mode, counter *c)
{
    int type;

    c->raw = NULL;
    c->raw_len = 0;
    c->key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_STRING, &type);
    if (c->key == NULL)
        return SLUICE__MODULE_FOREIGN;
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return 0;
    if ((c->raw = RedisModule_StringDMA(c->key, &c->raw_len, mode)) == NULL) {
        RedisModule_CloseKey(c->key);
        return SLUICE__MODULE_FOREIGN;
    }
    return 0;
}

/*
 * The key's PTTL as the server's PTTL answers it (0 from its last ms on, -1
 * without a TTL), from one read of its absolute expiry, kept in '*at' for
 * what is replicated. 'now' is the server's time, read once.
 */
static long long counter_pttl(counter *c, long long now, long long *at)
{
    *at = RedisModule_GetAbsExpire(c->key);
    if (*at == REDISMODULE_NO_EXPIRE)
        return -1;
    return *at > now ? *at - now : 0;
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

/* The script's figures, from its doubles. */
static void answer(sluice_decision *out, bool allowed, double remaining,
                   double ttl)
{
    out->allowed = allowed ? 1 : 0;
    out->remaining = (uint64_t)sluice__mod_lua_int(remaining);
    out->retry_after_ms = allowed ? 0 : (uint64_t)sluice__mod_lua_int(ttl);
    out->reset_after_ms = (uint64_t)sluice__mod_lua_int(ttl);
}

/*
 * The events of the script's commands for a counter step, fired once the
 * key holds what they left (so the server's "new", for a key the write
 * created, comes first, as INCRBY fires it): INCRBY's "incrby"; at the
 * window's end (PTTL 0) DEL's "del", then the second INCRBY's "new" (it
 * makes the key anew, where the glue writes it in place) and "incrby";
 * PEXPIRE's "expire" where a window is armed; DECRBY's ("incrby" too) for
 * a refusal.
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

/*
 * counter.lua's counter_incr(), and fixed.lua's taking back of a refused
 * increment: see module.h.
 */
int sluice__mod_counter_incr(const sluice__mod_call *call, long long by,
                             long long cap, long long *n, long long *ttl)
{
    long long w = (long long)call->limit->window_ms, v = 0, now, at = 0;
    bool arm = false, restarted = false, admit;
    char text[24];
    size_t len;
    counter c;

    if (counter_open(call, REDISMODULE_WRITE, &c) != 0)
        return SLUICE__MODULE_WRONGTYPE;
    if (c.raw != NULL && (!sluice__mod_strict_ll(c.raw, c.raw_len, &v) ||
                          v > LLONG_MAX - by)) {
        RedisModule_CloseKey(c.key); /* INCRBY's errors: nothing changed */
        return v > LLONG_MAX - by ? SLUICE__MODULE_OVERFLOW
                                  : SLUICE__MODULE_NOT_INTEGER;
    }
    now = (long long)call->server_ms;
    *n = v + by;
    *ttl = w;
    if (*n == by) { /* created (or was "0"): arm the window */
        arm = true;
    } else if ((*ttl = counter_pttl(&c, now, &at)) == 0) {
        *n = by; /* the old window is over: this one starts anew */
        *ttl = w;
        arm = restarted = true;
    } else if (*ttl < 0) { /* no TTL: give it one, so it never blocks */
        *ttl = w;
        arm = true;
    }
    /* As the script compares: its count is a double. */
    admit = !((double)*n > (double)cap);
    len = sluice__mod_ll_text(text, *n);
    if (admit && c.raw != NULL && c.raw_len == len)
        memcpy(c.raw, text, len); /* in place: the same length */
    else if (admit)
        sluice__mod_string_write(c.key, text, len);
    if (arm)
        RedisModule_SetAbsExpire(c.key, at = now + w);
    counter_events(call, restarted, arm, admit);
    counter_replicate(call, !arm ? (admit ? CHANGED_COUNT : CHANGED_NOTHING)
                            : (admit ? CHANGED_WINDOW : CHANGED_EXPIRY),
                      text, len, by, at);
    RedisModule_CloseKey(c.key);
    return 0;
}

/* hit(): INCRBY, arm or read the window, take a refusal back. */
static int fixed_hit(const sluice__mod_call *call, sluice_decision *out)
{
    long long by = (long long)call->cost, n, ttl;
    double max = (double)call->limit->max, count;
    int rc = sluice__mod_counter_incr(call, by, (long long)call->limit->max,
                                      &n, &ttl);

    if (rc != 0)
        return SLUICE__MODULE_FOREIGN;
    if (!((double)n > max)) {
        answer(out, true, max - (double)n, (double)ttl);
        return 0;
    }
    count = (double)n - (double)by;
    answer(out, false, count < max ? max - count : 0, (double)ttl);
    return 0;
}

/* peek(): GET and PTTL, giving a TTL to a count found without one. */
static int fixed_peek(const sluice__mod_call *call, sluice_decision *out)
{
    double max = (double)call->limit->max, cost = (double)call->cost;
    double count = 0, ttl = (double)call->limit->window_ms;
    counter cs, *c = &cs;

    if (counter_open(call, REDISMODULE_READ, c) != 0)
        return SLUICE__MODULE_FOREIGN;

    if (c->raw != NULL) {
        long long pttl;

        if (!sluice__mod_lua_tonumber(c->raw, c->raw_len, &count)) {
            RedisModule_CloseKey(c->key);
            return SLUICE__MODULE_FOREIGN;
        }
        long long now = (long long)call->server_ms, at;

        pttl = counter_pttl(c, now, &at);
        if (pttl == 0) {
            count = 0;
        } else if (pttl < 0) {
            at = now + (long long)call->limit->window_ms;
            RedisModule_SetAbsExpire(c->key, at);
            sluice__mod_event(call, REDISMODULE_NOTIFY_GENERIC, "expire");
            counter_replicate(call, CHANGED_EXPIRY, NULL, 0, 0, at);
        } else {
            ttl = (double)pttl;
        }
    }
    RedisModule_CloseKey(c->key);
    if (count + cost > max)
        answer(out, false, count < max ? max - count : 0, ttl);
    else
        answer(out, true, max - count - cost, ttl);
    return 0;
}

static int fixed_module_decide(const sluice__mod_call *call,
                               sluice_decision *out)
{
    out->limit = call->limit->max;
    return call->consume ? fixed_hit(call, out) : fixed_peek(call, out);
}

const sluice__module_glue sluice__module_fixed = {
    .decide = fixed_module_decide,
};
