/*
 * util.c - the small utilities every part of the library shares: its
 * version, the monotonic clock, numbers as text and from text, hashing,
 * random seeds, and option structs of any version.
 */
#define _DEFAULT_SOURCE /* getrandom() */

#include "core/core.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The library's own version: the header's when it was compiled. */
const char *sluice_version(void)
{
    return SLUICE_VERSION;
}

int sluice_version_number(void)
{
    return SLUICE_VERSION_NUMBER;
}

uint64_t sluice__monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sluice__realtime_at(struct timespec *at, uint64_t deadline_ms)
{
    uint64_t now = sluice__monotonic_ms();
    uint64_t left = deadline_ms > now ? deadline_ms - now : 0;

    if (left > (uint64_t)INT32_MAX * 1000u)
        left = (uint64_t)INT32_MAX * 1000u; /* some 68 years: never */
    clock_gettime(CLOCK_REALTIME, at);
    at->tv_sec += (time_t)(left / 1000);
    at->tv_nsec += (long)(left % 1000) * 1000000L;
    if (at->tv_nsec >= 1000000000L) {
        at->tv_sec++;
        at->tv_nsec -= 1000000000L;
    }
}

size_t sluice__u64_text(char *buf, uint64_t v)
{
    char tmp[24];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

uint64_t sluice__mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

/*
 * The 'len' (1 to 7) bytes at 'p' as a memcpy into a zeroed word gives them.
 * On a little-endian machine, in two overlapping loads and no loop: the
 * bytes both loads hold land at the same places, so or-ing them changes
 * nothing.
 */
static uint64_t tail_bytes(const char *p, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const unsigned char *b = (const unsigned char *)p;
    uint32_t lo, hi;

    if (len >= 4) {
        memcpy(&lo, b, 4);
        memcpy(&hi, b + len - 4, 4);
        return (uint64_t)lo | (uint64_t)hi << ((len - 4) * 8);
    }
    return (uint64_t)b[0] | (uint64_t)b[len / 2] << (len / 2 * 8) |
           (uint64_t)b[len - 1] << ((len - 1) * 8);
#else
    uint64_t w = 0;

    memcpy(&w, p, len);
    return w;
#endif
}

uint64_t sluice__hash(uint64_t seed, uint64_t tag, const char *key,
                      size_t len)
{
    uint64_t h = seed ^ tag ^ (len * 0x9e3779b97f4a7c15ULL);
    uint64_t w;

    while (len >= 8) {
        memcpy(&w, key, 8);
        h = sluice__mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
        key += 8;
        len -= 8;
    }
    if (len > 0) {
        w = tail_bytes(key, len);
        h = sluice__mix64(h ^ w ^ ((uint64_t)len << 59));
    }
    return sluice__mix64(h);
}

int sluice__parse_u64(const char *s, size_t n, uint64_t lo, uint64_t hi,
                      uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

uint64_t sluice__random_seed(void)
{
    uint64_t seed = 0;
    struct timespec ts;

    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return seed ^ sluice__mix64((uint64_t)ts.tv_nsec ^
                                ((uint64_t)ts.tv_sec << 30) ^
                                ((uint64_t)getpid() << 48));
}

int sluice__opts_copy(void *dst, const void *src, unsigned version,
                      const size_t *sizes, unsigned current, const char *what)
{
    if (version < 1 || version > current)
        return sluice__error(SLUICE_EINVAL,
                             "%s version %u is not one of 1..%u; initialise "
                             "them with their _INIT macro", what, version,
                             current);
    memcpy(dst, src, sizes[version]);
    return SLUICE_OK;
}
