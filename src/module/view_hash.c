/*
 * view_hash.c - a hash's fields (view.h): the sliding counter's key.
 *
 * Fields are read with one HashGet, as the script's HMGET reads them, and
 * as Lua's tonumber() takes them, so that a hash some other writer left (a
 * field "1e3", a fractional index) is read as the script reads it; they
 * are written as its str() writes numbers (%.0f). Replicas and the AOF
 * receive the effects, HSET of the fields and PEXPIREAT with the absolute
 * expiry, never SLUICE.HIT itself.
 */
#include "module/view.h"

#include <string.h>

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

/* The names of one view's fields, made once: they live as long as the
   module. */
static RedisModuleString *const *names_of(const char *letters)
{
    static const char *made_for;
    static RedisModuleString *names[SLUICE__MOD_HASH_FIELDS];

    if (made_for != letters) {
        for (int i = 0; i < SLUICE__MOD_HASH_FIELDS; i++) {
            if (names[i] != NULL)
                RedisModule_FreeString(NULL, names[i]);
            names[i] = RedisModule_CreateString(NULL, &letters[i], 1);
        }
        made_for = letters;
    }
    return names;
}

int sluice__mod_hash_open(const sluice__mod_call *call, const char *names,
                          sluice__mod_hash *h)
{
    RedisModuleString *const *n = names_of(names);
    int type;

    memset(h, 0, sizeof(*h));
    h->names = n;
    h->key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_HASH, &type);
    if (h->key == NULL)
        return SLUICE__MODULE_FOREIGN;
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return 0;
    RedisModule_HashGet(h->key, REDISMODULE_HASH_NONE, n[0], &h->field[0],
                        n[1], &h->field[1], n[2], &h->field[2], n[3],
                        &h->field[3], NULL);
    for (int i = 0; i < SLUICE__MOD_HASH_FIELDS; i++)
        h->is_num[i] = lua_tonumber(h->field[i], &h->num[i]);
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

void sluice__mod_hash_write(const sluice__mod_call *call,
                            const sluice__mod_hash *h,
                            const double v[SLUICE__MOD_HASH_FIELDS],
                            double ttl_ms)
{
    RedisModuleString *s[SLUICE__MOD_HASH_FIELDS], *const *n = h->names;
    bool made[SLUICE__MOD_HASH_FIELDS];
    char buf[64];
    /* PEXPIRE's ttl counts from the server's clock of this call. */
    long long at = (long long)call->server_ms + (long long)ttl_ms;

    for (int i = 0; i < SLUICE__MOD_HASH_FIELDS; i++) {
        size_t len = sluice__mod_lua_str(buf, sizeof(buf), v[i]);

        made[i] = !same_text(h->field[i], buf, len);
        s[i] = made[i] ? RedisModule_CreateString(call->ctx, buf, len)
                       : h->field[i];
        if (made[i]) /* in the order of the fields: as HSET adds them */
            RedisModule_HashSet(h->key, REDISMODULE_HASH_NONE, n[i], s[i],
                                NULL);
    }
    sluice__mod_event(call, REDISMODULE_NOTIFY_HASH, "hset");
    RedisModule_SetAbsExpire(h->key, at);
    sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
    RedisModule_Replicate(call->ctx, "HSET", "sssssssss", call->key, n[0],
                          s[0], n[1], s[1], n[2], s[2], n[3], s[3]);
    RedisModule_Replicate(call->ctx, "PEXPIREAT", "sl", call->key, at);
    for (int i = 0; i < SLUICE__MOD_HASH_FIELDS; i++)
        if (made[i])
            RedisModule_FreeString(call->ctx, s[i]);
}

void sluice__mod_hash_close(const sluice__mod_call *call, sluice__mod_hash *h)
{
    RedisModule_CloseKey(h->key);
    for (int i = 0; i < SLUICE__MOD_HASH_FIELDS; i++)
        if (h->field[i] != NULL)
            RedisModule_FreeString(call->ctx, h->field[i]);
}
