/*
 * value.c - a key's value read as the scripts read it: the server's strict
 * integers (INCRBY, HINCRBY) and Lua's tonumber().
 */
#include "module/module.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sluice__mod_strict_ll(const char *s, size_t len, long long *out)
{
    unsigned long long v = 0, limit;
    bool negative = false;
    size_t i = 0;

    if (len == 0 || len > 20)
        return false;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    if (s[0] == '-') {
        negative = true;
        i = 1;
    }
    if (i >= len || s[i] < '1' || s[i] > '9')
        return false;
    limit = negative ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    for (; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');

        if (s[i] < '0' || s[i] > '9' || v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (negative)
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN
                                                       : -(long long)v;
    else
        *out = (long long)v;
    return true;
}

/* Lua 5.1's luaO_str2d() on a NUL-terminated string. */
static bool str2d(const char *s, double *out)
{
    char *end;

    *out = strtod(s, &end);
    if (end == s)
        return false;
    if (*end == 'x' || *end == 'X')
        *out = (double)strtoul(s, &end, 16);
    while (isspace((unsigned char)*end))
        end++;
    return *end == '\0';
}

bool sluice__mod_lua_tonumber(const char *s, size_t len, double *out)
{
    char small[64];
    char *copy = small;
    bool ok;

    if (len >= sizeof(small)) {
        copy = RedisModule_Alloc(len + 1);
        if (copy == NULL)
            return false;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    ok = str2d(copy, out);
    if (copy != small)
        RedisModule_Free(copy);
    return ok;
}

long long sluice__mod_lua_int(double d)
{
    /* -2^63 <= d < 2^63: the cast is defined (and truncates). */
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return (long long)d;
    return LLONG_MIN;
}

void sluice__mod_string_write(RedisModuleKey *key, const char *text,
                              size_t len)
{
    size_t have;
    char *p = RedisModule_StringDMA(key, &have, REDISMODULE_WRITE);

    if (p == NULL || have != len) {
        RedisModule_StringTruncate(key, len);
        p = RedisModule_StringDMA(key, &have, REDISMODULE_WRITE);
    }
    if (p != NULL && have == len)
        memcpy(p, text, len);
}

size_t sluice__mod_ll_text(char *buf, long long v)
{
    if (v >= 0)
        return sluice__u64_text(buf, (uint64_t)v);
    buf[0] = '-';
    return 1 + sluice__u64_text(buf + 1, (uint64_t)0 - (uint64_t)v);
}

size_t sluice__mod_lua_str(char *buf, size_t size, double d)
{
    if (d >= 0 && d < 9007199254740992.0 && (double)(uint64_t)d == d) {
        size_t n = sluice__u64_text(buf, (uint64_t)d);

        buf[n] = '\0';
        return n;
    }
    return (size_t)snprintf(buf, size, "%.0f", d);
}

void sluice__mod_replicate_set(RedisModuleCtx *ctx, RedisModuleString *key,
                               const char *text, size_t len, long long at)
{
    /* Made once, never freed (it lives as long as the module); 's' only
       takes a reference, where 'c' would build a new object a call. */
    static RedisModuleString *pxat;
    char at_text[24];
    size_t at_len = sluice__mod_ll_text(at_text, at);

    if (pxat == NULL)
        pxat = RedisModule_CreateString(NULL, "PXAT", 4);
    RedisModule_Replicate(ctx, "SET", "sbsb", key, text, len, pxat, at_text,
                          at_len);
}
