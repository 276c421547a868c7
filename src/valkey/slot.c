/*
 * slot.c - which of a cluster's 16384 slots a key belongs to.
 *
 * The cluster hashes a key with CRC16 (the XMODEM variant: polynomial 0x1021,
 * initial value 0, no reflection) and keeps the low 14 bits. The hashtag
 * rule lets keys choose to share a slot: if the key holds a '{', and a '}'
 * follows it with at least one byte between them, only those bytes between
 * the first '{' and the first '}' after it are hashed. "{user42}:a" and
 * "{user42}:b" share a slot; "{}x" and "x{}" are hashed whole, since their
 * tag is empty; "{a}{b}" hashes "a".
 */
#include "valkey/valkey.h"

#include <string.h>

/* The CRC16-XMODEM of 'len' bytes, a bit at a time (keys are short). */
static uint16_t crc16(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;

    while (len-- > 0) {
        crc ^= (uint16_t)(*p++ << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned sluice__key_slot(const char *key, size_t len)
{
    const char *open = len > 0 ? memchr(key, '{', len) : NULL;

    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = rest > 0 ? memchr(open + 1, '}', rest) : NULL;

        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - open - 1);
        }
    }
    return crc16((const unsigned char *)key, len) & (SLUICE__SLOTS - 1);
}
