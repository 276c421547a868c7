/*
 * util.c - the small tools of sluice_bench_server: clocks, getrusage(),
 * medians, grouped numbers, the load average, and the key
 * sets made before any timing.
 */
#include "bench_server.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* ---- Clocks and getrusage() ---------------------------------------------- */

double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CPU time (user + system) of 'who' so far, in seconds. */
double rusage_s(int who)
{
    struct rusage ru;

    if (getrusage(who, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Context switches so far, voluntary and not, of 'who'. */
double rusage_cs(int who)
{
    struct rusage ru;

    if (getrusage(who, &ru) != 0)
        return 0;
    return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

/* The load averages over 1, 5 and 15 minutes; -1 each if unknown. */
void load_average(double out[3])
{
    FILE *f = fopen("/proc/loadavg", "r");

    out[0] = out[1] = out[2] = -1;
    if (f == NULL)
        return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
        out[0] = out[1] = out[2] = -1;
    fclose(f);
}

/* ---- Figures ------------------------------------------------------------- */

/* The median of 'v' (sorted here); 0 when empty. */
double median_of(double *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "12,345" for a number >= 0, rounded to a whole. */
const char *grouped(char *buf, size_t cap, double v)
{
    char digits[32], *p = buf;
    int n = snprintf(digits, sizeof(digits), "%.0f", v < 0 ? 0 : v);

    for (int i = 0; i < n && (size_t)(p - buf) + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

/* ---- Keys ---------------------------------------------------------------- */

/*
 * Keys for ids "user:0" .. "user:<n - 1>": the ids themselves when 'suffix'
 * is NULL (what sluice_hit() is given), else the server key the library
 * makes of each id for that suffix, e.g. "sluice:{user:7}:fixed".
 */
static int keyset_make(keyset *ks, size_t n, const char *suffix)
{
    ks->bytes = malloc(n * KEY_STRIDE);
    ks->n = n;
    if (ks->bytes == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char *slot = ks->bytes + i * KEY_STRIDE, id[24];
        int idlen = snprintf(id, sizeof(id), "user:%zu", i);
        size_t len;

        if (suffix == NULL) {
            memcpy(slot, id, (size_t)idlen + 1);
            len = (size_t)idlen;
        } else if (raw_key_build(slot, KEY_STRIDE - 1, &len, id,
                                 (size_t)idlen, suffix) < 0) {
            return -1; /* did not fit */
        }
        slot[KEY_STRIDE - 1] = (char)len;
    }
    return 0;
}

/* Makes the keys of every case: -1 when out of memory. */
int keys_make(bench_keys *k)
{
    memset(k->refused, 0, sizeof(k->refused));
    memcpy(k->refused, REFUSED_ID, strlen(REFUSED_ID));
    k->refused[KEY_STRIDE - 1] = (char)strlen(REFUSED_ID);
    if (keyset_make(&k->ids, MANY_KEYS, NULL) < 0 ||
        keyset_make(&k->fixed, MANY_KEYS, "fixed") < 0 ||
        keyset_make(&k->incr, MANY_KEYS, "incr") < 0)
        return -1;
    return 0;
}

void keys_free(bench_keys *k)
{
    free(k->ids.bytes);
    free(k->fixed.bytes);
    free(k->incr.bytes);
}

const char *key_at(const keyset *ks, size_t i)
{
    return ks->bytes + i * KEY_STRIDE;
}

size_t key_len(const keyset *ks, size_t i)
{
    return (unsigned char)ks->bytes[i * KEY_STRIDE + KEY_STRIDE - 1];
}
