/*
 * module.c - gcra's glue for sluice.so (src/module/glue.h).
 *
 * The key is gcra.lua's: a string holding TAT's whole ms, then ':' and its
 * remainder in 1/max ms when it has one ("1733000000123:2"), read as the
 * script reads it (digits only, at most 16 of each, else another's value)
 * and decided on with gcra's own pure code (sluice__algo_gcra), whose state
 * it is. An admitted hit writes TAT as the script does (SET key TAT PX
 * reset_after_ms), and sends replicas and the AOF SET key TAT PXAT expiry;
 * a refusal or a peek writes nothing. The events are SET ... PX's ("set",
 * then "expire"), on an admitted hit only. In C the whole ms are exact
 * uint64, so the script's two-part arithmetic near 2^53 gives the same
 * numbers here without it.
 */
#include "module/module.h"
#include "algo/gcra/gcra.h"


/* Digits only, 1 to 16 of them (Lua's '%d+' and the script's length cap). */
static bool read_digits(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 16)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* "TAT" or "TAT:REM", as the script's two patterns take it. */
static bool read_tat(const char *raw, size_t len, sluice__gcra_state *s)
{
    size_t colon = 0;

    while (colon < len && raw[colon] != ':')
        colon++;
    s->rem = 0;
    if (colon == len)
        return read_digits(raw, len, &s->tat_ms);
    return read_digits(raw, colon, &s->tat_ms) &&
           read_digits(raw + colon + 1, len - colon - 1, &s->rem);
}

/* Writes the new TAT with the script's PX, and replicates it. */
static void write_tat(const sluice__mod_call *call, RedisModuleKey *key,
                      const sluice__gcra_state *s, uint64_t px)
{
    long long at = (long long)(call->server_ms + px);
    char text[48];
    size_t len = sluice__u64_text(text, s->tat_ms);

    if (s->rem > 0) {
        text[len++] = ':';
        len += sluice__u64_text(text + len, s->rem);
    }
    sluice__mod_string_write(key, text, len);
    RedisModule_SetAbsExpire(key, at);
    /* SET ... PX fires both. */
    sluice__mod_event(call, REDISMODULE_NOTIFY_STRING, "set");
    sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
    sluice__mod_replicate_set(call->ctx, call->key, text, len, at);
}

static int gcra_module_decide(const sluice__mod_call *call,
                              sluice_decision *out)
{
    sluice__gcra_state s = {0, 0};
    RedisModuleKey *key;
    const char *raw;
    size_t len;
    int type, rc;

    key = sluice__mod_open_as(call, REDISMODULE_KEYTYPE_STRING, &type);
    if (key == NULL)
        return SLUICE__MODULE_FOREIGN;
    if (type == REDISMODULE_KEYTYPE_STRING &&
        ((raw = RedisModule_StringDMA(key, &len, REDISMODULE_READ)) == NULL ||
         !read_tat(raw, len, &s))) {
        RedisModule_CloseKey(key);
        return SLUICE__MODULE_FOREIGN;
    }
    rc = sluice__algo_gcra.decide(&s, call->limit, call->now_ms, call->cost,
                                  call->consume, out);
    if (rc == 0 && call->consume && out->allowed)
        write_tat(call, key, &s, out->reset_after_ms);
    RedisModule_CloseKey(key);
    return rc;
}

const sluice__module_glue sluice__module_gcra = {
    .decide = gcra_module_decide,
};
