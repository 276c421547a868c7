/*
 * view_ring.c - a ring's bytes (view.h): the compact log's key.
 *
 * The script reads and writes its string a few bytes at a time with
 * GETRANGE and SETRANGE; here the string is read and written in place
 * (StringDMA), and grown as SETRANGE would grow it (StringTruncate, which
 * keeps the expiry as SETRANGE does). A decision written back is, as the
 * script's:
 *
 *   - the units that left the span dropped by moving head; a key whose
 *     units have all left is deleted;
 *   - when admitted and counted, 'cost' slots written at the tail, or the
 *     value laid out again (oldest first, under a larger max than the
 *     ring's cap, or on a fresh key), and the expiry extended to one window
 *     if it would end sooner; else the header, when head moved.
 *
 * Replicas and the AOF receive the bytes written: SETRANGE key offset bytes
 * for the slots and the header, or SET key value PXAT expiry when the whole
 * value was laid out; PEXPIREAT with the absolute expiry; DEL. Subscribers
 * get the events of the script's commands, in its order: "del", "set"
 * (a value laid out), "setrange" for each SETRANGE (slots, wrapped slots,
 * header; the header alone after a trim), "expire" for its PEXPIRE.
 */
#include "module/view.h"

#include <string.h>

#define HEAD SLUICE__MOD_RING_HEAD

/* ---- Bytes --------------------------------------------------------------- */

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static void put_header(unsigned char *p, const sluice__mod_ring *r)
{
    memcpy(p, "SLCL", 4);
    put32(p + 4, r->head);
    put32(p + 8, r->len);
    put32(p + 12, r->cap);
}

/* ---- Reading ------------------------------------------------------------- */

/*
 * The ring in 'key' (of 'type'), as the script's read_header(): 0, 0, 0
 * for no key or an empty string. Returns false when the key holds
 * something else.
 */
static bool read_ring(RedisModuleKey *key, int type, sluice__mod_ring *r)
{
    size_t slen;
    uint64_t used;

    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return true;
    if (type != REDISMODULE_KEYTYPE_STRING)
        return false;
    slen = RedisModule_ValueLength(key);
    if (slen == 0)
        return true;
    if (slen < HEAD)
        return false;
    r->bytes = (const unsigned char *)RedisModule_StringDMA(key, &slen,
                                                            REDISMODULE_READ);
    if (r->bytes == NULL || slen < HEAD || memcmp(r->bytes, "SLCL", 4) != 0)
        return false;
    r->head = get32(r->bytes + 4);
    r->len = get32(r->bytes + 8);
    r->cap = get32(r->bytes + 12);
    used = (uint64_t)r->head + r->len;
    if (used > r->cap)
        used = r->cap;
    return !(r->cap < 1 || r->head >= r->cap || r->len > r->cap ||
             r->len < 1 || slen < HEAD + 8 * used);
}

int sluice__mod_ring_open(const sluice__mod_call *call, sluice__mod_ring *r)
{
    memset(r, 0, sizeof(*r));
    r->key = RedisModule_OpenKey(call->ctx, call->key,
                                 REDISMODULE_READ | REDISMODULE_WRITE);
    if (!read_ring(r->key, RedisModule_KeyType(r->key), r)) {
        RedisModule_CloseKey(r->key);
        return SLUICE__MODULE_FOREIGN;
    }
    return 0;
}

/* ---- Writing ------------------------------------------------------------- */

/* The string opened for writing, at least 'size' bytes long (grown with
   zeros, as SETRANGE grows it). */
static unsigned char *writable(RedisModuleKey *key, size_t size)
{
    size_t slen = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY
                      ? 0 : RedisModule_ValueLength(key);

    if (size > slen && RedisModule_StringTruncate(key, size) != REDISMODULE_OK)
        return NULL;
    return (unsigned char *)RedisModule_StringDMA(key, &slen,
                                                  REDISMODULE_WRITE);
}

static void fill(unsigned char *p, uint64_t n, uint64_t now)
{
    for (uint64_t i = 0; i < n; i++)
        put64(p + 8 * i, now);
}

/*
 * Lays the value out again, oldest first: header (0, len + cost, max),
 * the live units, then 'cost' units at 'now'. Returns its length, or 0
 * when the server refused the memory.
 */
static size_t rebuild(const sluice__mod_call *call, sluice__mod_ring *r,
                      uint64_t cost, uint64_t now)
{
    size_t size = HEAD + 8 * ((size_t)r->len + cost);
    unsigned char *live = NULL, *p;
    sluice__mod_ring fresh = {.len = r->len + (uint32_t)cost,
                              .cap = (uint32_t)call->limit->max};

    if (r->len > 0) {
        uint32_t first = r->cap - r->head < r->len ? r->cap - r->head : r->len;

        live = RedisModule_Alloc(8 * (size_t)r->len);
        memcpy(live, r->bytes + HEAD + 8 * (size_t)r->head, 8 * (size_t)first);
        memcpy(live + 8 * (size_t)first, r->bytes + HEAD,
               8 * (size_t)(r->len - first));
    } else if (RedisModule_KeyType(r->key) != REDISMODULE_KEYTYPE_EMPTY) {
        /* An empty string: SET, not SETRANGE, so no expiry stays. */
        RedisModule_DeleteKey(r->key);
    }
    if (RedisModule_StringTruncate(r->key, size) != REDISMODULE_OK ||
        (p = (unsigned char *)RedisModule_StringDMA(r->key, &size,
                                                    REDISMODULE_WRITE)) ==
            NULL) {
        RedisModule_Free(live);
        return 0;
    }
    put_header(p, &fresh);
    if (live != NULL)
        memcpy(p + HEAD, live, 8 * (size_t)r->len);
    fill(p + HEAD + 8 * (size_t)r->len, cost, now);
    RedisModule_Free(live);
    sluice__mod_event(call, REDISMODULE_NOTIFY_STRING, "set");
    return size;
}

/*
 * Writes 'cost' units at 'now' after the live units, as the script's
 * append(): in place, the slots at the tail (two runs when the ring wraps)
 * and the header, each replicated as the SETRANGE of the bytes written.
 * Returns false when the server refused the memory.
 */
static bool append_in_place(const sluice__mod_call *call, sluice__mod_ring *r,
                            uint32_t cost, uint64_t now)
{
    uint32_t tail = (uint32_t)(((uint64_t)r->head + r->len) % r->cap);
    uint32_t first = r->cap - tail < cost ? r->cap - tail : cost;
    size_t at = HEAD + 8 * (size_t)tail;
    unsigned char *p = writable(r->key, at + 8 * (size_t)first);

    if (p == NULL)
        return false;
    fill(p + at, first, now);
    fill(p + HEAD, cost - first, now);
    r->len += cost;
    put_header(p, r);
    /* The script's SETRANGEs: the tail's slots, the wrapped ones, the
       header. */
    sluice__mod_event(call, REDISMODULE_NOTIFY_STRING, "setrange");
    if (first < cost)
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_STRING, "setrange");
    sluice__mod_event_more(call, REDISMODULE_NOTIFY_STRING, "setrange");
    /* The header and what follows it, up to the wrapped units' end or, when
       the tail is slot 0, the new units' end: one run of bytes. */
    if (tail == 0) {
        RedisModule_Replicate(call->ctx, "SETRANGE", "slb", call->key, 0LL,
                              (const char *)p, at + 8 * (size_t)first);
        return true;
    }
    RedisModule_Replicate(call->ctx, "SETRANGE", "slb", call->key,
                          (long long)at, (const char *)p + at,
                          8 * (size_t)first);
    RedisModule_Replicate(call->ctx, "SETRANGE", "slb", call->key, 0LL,
                          (const char *)p,
                          (size_t)HEAD + 8 * (size_t)(cost - first));
    return true;
}

/*
 * The script's append(): 'cost' units at 'now' after the live units, then
 * the key's life extended to one window if it would end sooner. Returns 0
 * or SLUICE_ENOMEM (the server refused to grow the string).
 */
static int append(const sluice__mod_call *call, sluice__mod_ring *r,
                  uint64_t cost, uint64_t now)
{
    long long w = (long long)call->limit->window_ms, at;
    size_t whole = 0;
    bool extend;

    if (r->len == 0 || r->len + cost > r->cap) {
        whole = rebuild(call, r, cost, now);
        if (whole == 0)
            return SLUICE_ENOMEM;
    } else if (!append_in_place(call, r, (uint32_t)cost, now)) {
        return SLUICE_ENOMEM;
    }
    /* Only ever extend the key's life: a call with a shorter window must not
       cut short units that a longer one still counts. */
    at = RedisModule_GetAbsExpire(r->key);
    extend = at == REDISMODULE_NO_EXPIRE ||
             at - (long long)call->server_ms < w;
    if (extend) {
        at = (long long)call->server_ms + w;
        RedisModule_SetAbsExpire(r->key, at);
        sluice__mod_event_more(call, REDISMODULE_NOTIFY_GENERIC, "expire");
    }
    if (whole > 0) {
        size_t len;
        const char *v = RedisModule_StringDMA(r->key, &len, REDISMODULE_READ);

        RedisModule_Replicate(call->ctx, "SET", "sbcl", call->key, v, len,
                              "PXAT", at);
    } else if (extend) {
        RedisModule_Replicate(call->ctx, "PEXPIREAT", "sl", call->key, at);
    }
    return 0;
}

/* The header after a trim, written back and replicated. */
static int write_header(const sluice__mod_call *call, sluice__mod_ring *r)
{
    unsigned char *p = writable(r->key, HEAD);

    if (p == NULL)
        return SLUICE_ENOMEM;
    put_header(p, r);
    sluice__mod_event(call, REDISMODULE_NOTIFY_STRING, "setrange");
    RedisModule_Replicate(call->ctx, "SETRANGE", "slb", call->key, 0LL,
                          (const char *)p, (size_t)HEAD);
    return 0;
}

int sluice__mod_ring_close(const sluice__mod_call *call, sluice__mod_ring *r,
                           uint32_t gone, uint64_t cost, uint64_t now_ms)
{
    int rc = 0;

    if (gone > 0 && gone == r->len) {
        RedisModule_DeleteKey(r->key);
        sluice__mod_event(call, REDISMODULE_NOTIFY_GENERIC, "del");
        RedisModule_Replicate(call->ctx, "DEL", "s", call->key);
        r->head = r->len = r->cap = 0;
        r->bytes = NULL;
    } else if (gone > 0) {
        r->head = (uint32_t)(((uint64_t)r->head + gone) % r->cap);
        r->len -= gone;
    }
    if (cost > 0)
        rc = append(call, r, cost, now_ms);
    else if (gone > 0 && r->len > 0)
        rc = write_header(call, r);
    RedisModule_CloseKey(r->key);
    return rc;
}
