/*
 * keys.c - the names of the keys a store on a server writes.
 *
 * A limit of algorithm A on id I is one key, and a queue Q's keys are
 * EMQ ":{" enc(Q) "}:" and a suffix (limiter, meta, wait, ...):
 *
 *     PREFIX ":{" enc(I) "}:" A          e.g.  sluice:{user42}:fixed
 *
 * enc() escapes only what must be: the braces, which would move the
 * hashtag, and '%', the escape byte itself, as %7B, %7D and %25; and the
 * empty id is a lone "%". Every other byte is written as it is (spaces,
 * UTF-8, control bytes, NUL: keys are binary-safe), so a queue's keys are
 * EchoMQ's own, byte for byte, for every name without '%', '{' or '}'.
 * enc() is one-to-one, and its output holds no brace, so the text between
 * the braces is always the whole hashtag: one id's keys share one cluster
 * slot, and no id can reach another id's keys.
 */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

/* Bytes written as they are; the three others are %XX. */
static int plain_byte(unsigned char c)
{
    return c != '%' && c != '{' && c != '}';
}

/* The key of 'id' (see the top of this file and store.h). */
char *sluice__key_build(char *buf, size_t cap, size_t *len, const char *prefix,
                        const char *id, size_t id_len, const char *suffix)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t plen = strlen(prefix), slen = strlen(suffix);
    size_t need = plen + 2 + (id_len == 0 ? 1 : 3 * id_len) + 2 + slen;
    char *out = buf, *p;

    if (need > cap && (out = malloc(need)) == NULL)
        return NULL;
    p = out;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    *p++ = '{';
    if (id_len == 0)
        *p++ = '%';
    for (size_t i = 0; i < id_len; i++) {
        unsigned char c = (unsigned char)id[i];

        if (plain_byte(c)) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p++ = '}';
    *p++ = ':';
    memcpy(p, suffix, slen);
    p += slen;
    *len = (size_t)(p - out);
    return out;
}
