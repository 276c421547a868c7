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
 * PEXPIREAT with the absolute expiry, never SLUICE.HIT itself. An admitted
 * hit fires the events of the script's HSET and PEXPIRE ("hset",
 * "expire"); anything else writes and fires nothing.
 *
 * Where the script would stop with an error (a hash whose w and i match but
 * whose c or p is not a number, so Lua's arithmetic fails on nil), the glue
 * answers SLUICE_EPROTO and writes nothing.
 */
#include "module/module.h"

#include <string.h>

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
 * Lua's tonumber() of a field (sluice__mod_lua_tonumber()), plain digits
 * read here at once: false when the field is missing (NULL) or is not a
 * number.
 */
static bool lua_tonumber(RedisModuleString *value, double *out)
{
    size_t len;
    const char *s;

    if (value == NULL)
        return false;
    s = RedisModule_StringPtrLen(value, &len);
    if (len > 0 && len <= 15) {
        double d = 0;
        size_t i = 0;

        while (i < len && s[i] >= '0' && s[i] <= '9')
            d = d * 10 + (s[i++] - '0');
        if (i == len) {
            *out = d;
            return true;
        }
    }
    return sluice__mod_lua_tonumber(s, len, out);
}

/* A Lua number as the server replies it: truncated to an integer. */
static uint64_t lua_reply(double d)
{
    return (uint64_t)sluice__mod_lua_int(d);
}

/* ---- The decision -------------------------------------------------------- */

/* The hash's state, as the script reads it with HMGET. */
typedef struct hash_state {
    RedisModuleString *f[4]; /* the fields w, i, c, p as read; NULL: none */
    double cur, prev;
    double idx, now;
} hash_state;

/* The field names, made once: they live as long as the module. */
static RedisModuleString *field_names[4];

static void field_names_init(void)
{
    static const char names[4] = {'w', 'i', 'c', 'p'};

    if (field_names[0] == NULL)
        for (int i = 0; i < 4; i++)
            field_names[i] = RedisModule_CreateString(NULL, &names[i], 1);
}

/*
 * Reads the four fields into 'st->f' and sets the current and previous
 * counts as the script does, moving 'idx' and 'now' to the key's window
 * when the clock reads earlier. Returns 0, or SLUICE_EPROTO where the
 * script's arithmetic would fail on a missing count.
 */
static int read_state(RedisModuleKey *key, double w, hash_state *st)
{
    RedisModuleString **f = st->f;
    double sw, si;

    RedisModule_HashGet(key, REDISMODULE_HASH_NONE, field_names[0], &f[0],
                        field_names[1], &f[1], field_names[2], &f[2],
                        field_names[3], &f[3], NULL);
    if (lua_tonumber(f[0], &sw) && sw == w && lua_tonumber(f[1], &si)) {
        if (st->idx < si) {
            st->idx = si;
            st->now = si * w;
        }
        if (si == st->idx) {
            if (!lua_tonumber(f[2], &st->cur) || !lua_tonumber(f[3], &st->prev))
                return SLUICE_EPROTO;
        } else if (si + 1 == st->idx) {
            if (!lua_tonumber(f[2], &st->prev))
                return SLUICE_EPROTO;
        }
    }
    return 0;
}

/* Whether 'old' (or NULL) is the text buf[0..len). */
static bool same_text(RedisModuleString *old, const char *buf, size_t len)
{
    size_t n;
    const char *p;

    if (old == NULL)
        return false;
    p = RedisModule_StringPtrLen(old, &n);
    return n == len && memcmp(p, buf, len) == 0;
}

/*
 * HSET of the four fields 'v' and PEXPIRE 'ttl_ms', and their effects (the
 * expiry as PEXPIREAT). A field that already holds its text is not set
 * again (the hash ends the same); replicas get all four.
 */
static void write_state(const sluice__mod_call *call, RedisModuleKey *key,
                        RedisModuleString *const old[4], const double v[4],
                        double ttl_ms)
{
    RedisModuleString *s[4], *const *n = field_names;
    bool made[4];
    char buf[64];
    /* PEXPIRE's ttl counts from the server's clock of this call. */
    long long at = (long long)call->server_ms + (long long)ttl_ms;

    for (int i = 0; i < 4; i++) {
        size_t len = sluice__mod_lua_str(buf, sizeof(buf), v[i]);

        made[i] = !same_text(old[i], buf, len);
        s[i] = made[i] ? RedisModule_CreateString(call->ctx, buf, len)
                       : old[i];
        if (made[i]) /* in the order w, i, c, p: as HSET adds them */
            RedisModule_HashSet(key, REDISMODULE_HASH_NONE, n[i], s[i], NULL);
    }
    sluice__mod_event(call, REDISMODULE_NOTIFY_HASH, "hset");
    RedisModule_SetAbsExpire(key, at);
    sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
    RedisModule_Replicate(call->ctx, "HSET", "sssssssss", call->key, n[0],
                          s[0], n[1], s[1], n[2], s[2], n[3], s[3]);
    RedisModule_Replicate(call->ctx, "PEXPIREAT", "sl", call->key, at);
    for (int i = 0; i < 4; i++)
        if (made[i])
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

/* The script's decision on the state read: its figures into 'out', and
   the hash written when an admitted hit counts. */
static int decide_state(const sluice__mod_call *call, RedisModuleKey *key,
                        hash_state *st, sluice_decision *out)
{
    double w = (double)call->limit->window_ms, max = (double)call->limit->max;
    double cost = (double)call->cost;
    double elapsed = st->now - st->idx * w;
    double wceil = cdiv(st->prev * (w - elapsed), w), used;

    out->limit = call->limit->max;
    out->retry_after_ms = 0;
    if (st->cur + wceil + cost <= max) {
        out->allowed = 1;
        st->cur += cost;
        if (call->consume) {
            double v[4] = {w, st->idx, st->cur, st->prev};

            /* Only a foreign index ("inf") gives no whole TTL: the
               script's PEXPIRE fails there too. */
            if (!(2 * w - elapsed >= 1 && 2 * w - elapsed <= 2 * w))
                return SLUICE_EPROTO;
            write_state(call, key, st->f, v, 2 * w - elapsed);
        }
    } else {
        out->allowed = 0;
        out->retry_after_ms =
            lua_reply(retry_for(max, w, st->cur, st->prev, elapsed, cost));
    }
    used = st->cur + wceil;
    out->remaining = used < max ? lua_reply(max - used) : 0;
    out->reset_after_ms = st->cur > 0    ? lua_reply(2 * w - elapsed)
                          : st->prev > 0 ? lua_reply(w - elapsed)
                                         : 0;
    return 0;
}

static int counter_decide(const sluice__mod_call *call, sluice_decision *out)
{
    hash_state st = {{NULL, NULL, NULL, NULL}, 0, 0, 0, (double)call->now_ms};
    RedisModuleKey *key;
    int type, rc;

    field_names_init();
    key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_HASH, &type);
    if (key == NULL)
        return SLUICE__MODULE_FOREIGN;
    st.idx = fdiv(st.now, (double)call->limit->window_ms);
    rc = type == REDISMODULE_KEYTYPE_HASH
             ? read_state(key, (double)call->limit->window_ms, &st)
             : 0;
    if (rc == 0)
        rc = decide_state(call, key, &st, out);
    RedisModule_CloseKey(key);
    for (int i = 0; i < 4; i++)
        if (st.f[i] != NULL)
            RedisModule_FreeString(call->ctx, st.f[i]);
    return rc;
}

const sluice__module_glue sluice__module_sliding_counter = {
    .decide = counter_decide,
};
