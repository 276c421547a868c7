/*
 * bench_keys.h - the embedded store's benchmarks' pre-made keys (bench_mem.c,
 * bench_lookup.c). The server bench has its own (bench/server/util.c):
 * longer slots, and keys with the library's key names around them.
 */
#ifndef SLUICE_BENCH_KEYS_H
#define SLUICE_BENCH_KEYS_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define KEY_STRIDE 16u /* bytes per pre-made key: text, then length */

/*
 * Keys "user:<first>" .. "user:<first + n - 1>", made before any timing, one
 * per KEY_STRIDE bytes: the text, then its length in the slot's last byte,
 * so that one cache line holds both. -1 if out of memory or a key does not
 * fit (keyset_free() then still frees what was made).
 */
typedef struct keyset {
    char *bytes;
    size_t n;
} keyset;

static inline int keyset_make(keyset *ks, size_t first, size_t n)
{
    ks->bytes = malloc(n * KEY_STRIDE);
    ks->n = n;
    if (ks->bytes == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char *slot = ks->bytes + i * KEY_STRIDE;
        int len = snprintf(slot, KEY_STRIDE - 1, "user:%zu", first + i);

        if (len < 0 || len >= (int)KEY_STRIDE - 1)
            return -1;
        slot[KEY_STRIDE - 1] = (char)len;
    }
    return 0;
}

static inline const char *key_at(const keyset *ks, size_t i)
{
    return ks->bytes + i * KEY_STRIDE;
}

static inline size_t key_len(const keyset *ks, size_t i)
{
    return (unsigned char)ks->bytes[i * KEY_STRIDE + KEY_STRIDE - 1];
}

/*
 * Asks for key 'i' to be brought into the cache ahead of its use. A server
 * has just parsed the key of the request it decides, so the key is in cache;
 * without this, 100,000 random keys would add a cache miss of the
 * benchmark's own to every call.
 */
static inline void key_prefetch(const keyset *ks, size_t i)
{
#if defined(__GNUC__)
    __builtin_prefetch(ks->bytes + i * KEY_STRIDE);
#else
    (void)ks;
    (void)i;
#endif
}

static inline void keyset_free(keyset *ks)
{
    free(ks->bytes);
}

#endif
