/*
 * module.c - the sliding-window counter inside the server (sluice.so).
 *
 * The decision of sliding_counter.lua, line for line, on the very hash it
 * keeps: the fields w (window_ms), i (current window's index), c (its count)
 * and p (the previous window's count), read with HashGet, written with
 * HashSet, and the key's expiry set to 2 x window - elapsed, as the script's
 * PEXPIRE does. The arithmetic is the script's, in the script's doubles
 * (fdiv/cdiv on exact remainders, every product <= 2^53), so that even a
 * hash some other writer left (a field "1e3", a fractional index) gets the
 * script's figures; numbers are written as its str() writes them (%.0f).
 *
 * Replicas and the AOF receive the effects: HSET of the four fields and
 * PEXPIREAT with the absolute expiry, never SLUICE.HIT itself.
 *
 * Where the script would stop with an error (a hash whose w and i match but
 * whose c or p is not a number, so Lua's arithmetic fails on nil), the glue
 * answers SLUICE_EPROTO and writes nothing.
 */
#include "module/glue.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- The script's numbers ------------------------------------------------ */

/*
 * Lua's math.fmod, exact for the whole numbers below 2^63 that a counter
 * hash holds (sluice writes them below 2^53); other values, which only
 * another writer leaves, get a - b * trunc(a / b). The module links no libm.
 */
static double lua_fmod(double a, double b)
{
    const double big = 9.2e18;
    double q;

    if (a > -big && a < big && b > -big && b < big && b != 0 &&
        (double)(long long)a == a && (double)(long long)b == b)
        return (double)((long long)a % (long long)b);
    q = a / b;
    if (!(q > -big && q < big))
        return 0;
    return a - b * (double)(long long)q;
}

/* The script's fdiv and cdiv (src/algo/prelude.lua). */
static double fdiv(double a, double b)
{
    return (a - lua_fmod(a, b)) / b;
}

static double cdiv(double a, double b)
{
    double r = lua_fmod(a, b);

    return r == 0 ? a / b : (a - r) / b + 1;
}

/*
 * Lua 5.1's tonumber() of a field: false when the field is missing or is not
 * a number (strtod, then only spaces). 'value' may be NULL (no such field).
 */
static bool lua_tonumber(RedisModuleString *value, double *out)
{
    size_t len;
    const char *s, *end;
    char *stop;

    if (value == NULL)
        return false;
    s = RedisModule_StringPtrLen(value, &len);
    end = s + len;
    if (len > 0 && len <= 15) { /* the common case: plain digits */
        double d = 0;
        const char *p = s;

        while (p < end && *p >= '0' && *p <= '9')
            d = d * 10 + (*p++ - '0');
        if (p == end) {
            *out = d;
            return true;
        }
    }
    /* A module string is NUL-terminated; Lua, too, stops at a NUL. */
    *out = strtod(s, &stop);
    if (stop == s)
        return false;
    if (*stop == 'x' || *stop == 'X')
        *out = (double)strtoul(s, &stop, 16);
    while (*stop == ' ' || (*stop >= '\t' && *stop <= '\r'))
        stop++;
    return *stop == '\0';
}

/* The script's str(): '%.0f'. Returns the length written into 'buf'. */
static size_t lua_str(char *buf, size_t size, double d)
{
    if (d >= 0 && d < 9007199254740992.0 && (double)(uint64_t)d == d) {
        char tmp[24];
        uint64_t v = (uint64_t)d;
        size_t n = 0, i;

        do {
            tmp[n++] = (char)('0' + v % 10);
            v /= 10;
        } while (v > 0);
        for (i = 0; i < n; i++)
            buf[i] = tmp[n - 1 - i];
        buf[n] = '\0';
        return n;
    }
    return (size_t)snprintf(buf, size, "%.0f", d);
}

/* A Lua number as the server replies it: truncated to an integer. */
static uint64_t lua_reply(double d)
{
    return (uint64_t)(long long)d;
}

/* ---- The decision -------------------------------------------------------- */

/* The hash's state, as the script reads it with HMGET. */
typedef struct hash_state {
    double cur, prev;
    double idx, now;
} hash_state;

/*
 * Reads the four fields and sets the current and previous counts as the
 * script does, moving 'idx' and 'now' to the key's window when the clock
 * reads earlier. Returns 0, or SLUICE_EPROTO where the script's arithmetic
 * would fail on a missing count.
 */
static int read_state(RedisModuleCtx *ctx, RedisModuleKey *key, double w,
                      hash_state *st)
{
    RedisModuleString *f[4] = {NULL, NULL, NULL, NULL};
    double sw, si;
    int rc = 0;

    RedisModule_HashGet(key, REDISMODULE_HASH_CFIELDS, "w", &f[0], "i", &f[1],
                        "c", &f[2], "p", &f[3], NULL);
    if (lua_tonumber(f[0], &sw) && sw == w && lua_tonumber(f[1], &si)) {
        if (st->idx < si) {
            st->idx = si;
            st->now = si * w;
        }
        if (si == st->idx) {
            if (!lua_tonumber(f[2], &st->cur) || !lua_tonumber(f[3], &st->prev))
                rc = SLUICE_EPROTO;
        } else if (si + 1 == st->idx) {
            if (!lua_tonumber(f[2], &st->prev))
                rc = SLUICE_EPROTO;
        }
    }
    for (int i = 0; i < 4; i++)
        if (f[i] != NULL)
            RedisModule_FreeString(ctx, f[i]);
    return rc;
}

/* HSET of the four fields and PEXPIRE 'ttl_ms', and their effects. */
static void write_state(const sluice__mod_call *call, RedisModuleKey *key,
                        const double v[4], double ttl_ms)
{
    static const char *const names[4] = {"w", "i", "c", "p"};
    RedisModuleString *s[4];
    char buf[64];

    for (int i = 0; i < 4; i++) {
        size_t n = lua_str(buf, sizeof(buf), v[i]);

        s[i] = RedisModule_CreateString(call->ctx, buf, n);
    }
    RedisModule_HashSet(key, REDISMODULE_HASH_CFIELDS, names[0], s[0],
                        names[1], s[1], names[2], s[2], names[3], s[3], NULL);
    RedisModule_SetExpire(key, (long long)ttl_ms);
    RedisModule_Replicate(call->ctx, "HSET", "scscscscs", call->key, names[0],
                          s[0], names[1], s[1], names[2], s[2], names[3], s[3]);
    RedisModule_Replicate(call->ctx, "PEXPIREAT", "sl", call->key,
                          (long long)RedisModule_GetAbsExpire(key));
    for (int i = 0; i < 4; i++)
        RedisModule_FreeString(call->ctx, s[i]);
}

/* The wait before a refused 'cost' fits: the script's else branch. */
static double retry_for(double max, double w, double cur, double prev,
                        double elapsed, double cost)
{
    double retry = 0;

    if (cur + cost <= max && prev > 0) {
        double rr = fdiv((max - cur - cost) * w, prev);

        if (rr >= 1)
            retry = (w - rr) - elapsed;
    }
    if (retry == 0) {
        if (cur == 0) {
            retry = w - elapsed;
        } else {
            double rr = fdiv((max - cost) * w, cur);

            retry = (w - elapsed) + (rr < w ? w - rr : 0);
        }
    }
    return retry;
}

static int counter_decide(const sluice__mod_call *call, sluice_decision *out)
{
    double w = (double)call->limit->window_ms, max = (double)call->limit->max;
    double cost = (double)call->cost, elapsed, wceil, used;
    hash_state st = {0, 0, 0, (double)call->now_ms};
    RedisModuleKey *key;
    int type, rc;

    key = RedisModule_OpenKey(call->ctx, call->key,
                              REDISMODULE_READ | REDISMODULE_WRITE);
    type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_HASH) {
        RedisModule_CloseKey(key);
        return SLUICE__MODULE_FOREIGN;
    }
    st.idx = fdiv(st.now, w);
    rc = type == REDISMODULE_KEYTYPE_HASH ? read_state(call->ctx, key, w, &st) : 0;
    if (rc != 0) {
        RedisModule_CloseKey(key);
        return rc;
    }
    elapsed = st.now - st.idx * w;
    wceil = cdiv(st.prev * (w - elapsed), w);
    out->limit = call->limit->max;
    out->retry_after_ms = 0;
    if (st.cur + wceil + cost <= max) {
        out->allowed = 1;
        st.cur += cost;
        if (call->consume) {
            double v[4] = {w, st.idx, st.cur, st.prev};

            write_state(call, key, v, 2 * w - elapsed);
        }
    } else {
        out->allowed = 0;
        out->retry_after_ms =
            lua_reply(retry_for(max, w, st.cur, st.prev, elapsed, cost));
    }
    RedisModule_CloseKey(key);
    used = st.cur + wceil;
    out->remaining = used < max ? lua_reply(max - used) : 0;
    out->reset_after_ms = st.cur > 0    ? lua_reply(2 * w - elapsed)
                          : st.prev > 0 ? lua_reply(w - elapsed)
                                        : 0;
    return 0;
}

const sluice__module_glue sluice__module_sliding_counter = {
    .decide = counter_decide,
};
