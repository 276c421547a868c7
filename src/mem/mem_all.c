/*
 * mem_all.c - sluice_hit_all() on the embedded store.
 *
 * Each limit of the call has an entry of its own: the limit's algorithm,
 * and as key the limit's window (8 bytes) followed by the id. Its hash has
 * a bit that sluice_hit()'s entries never have (mem.c), so the two calls
 * never share a state, whatever the id's bytes.
 *
 * Every entry of the call is held at once: the shards holding them are
 * locked in ascending order (mem.c's sluice__mem_hold(), so two calls never
 * wait on each other in a circle), and then, with all held:
 *   1. a hit makes the entries that do not exist yet (fresh states, under
 *      the key cap: a store too full fails here, before anything counts);
 *   2. every limit is decided without counting (a peek);
 *   3. only if every one admits, room is made in every one (a log that
 *      must grow allocates here, so an ENOMEM counts nowhere), and then a
 *      hit counts on every one, which admits as its peek did (nothing
 *      changed in between) and cannot fail.
 * A refusal thus counts nowhere, and no other call sees the request half
 * counted. An entry made in step 1 for a request then refused stays fresh,
 * and is swept as any idle entry is.
 */
#include "mem/mem.h"

#include <stdlib.h>
#include <string.h>

/* The entries of one call: their key (one buffer: the window, which
   changes from limit to limit, then the id), hashes, and shard order. */
typedef struct all_keys {
    char stack[8 + 248];
    char *buf;
    size_t len;                            /* every key's length */
    uint64_t hash[SLUICE_HIT_ALL_MAX];     /* by limit */
    uint64_t by_shard[SLUICE_HIT_ALL_MAX]; /* the hashes, sorted */
} all_keys;

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* The key of 'limit' (its window into the buffer). */
static const char *key_of(const all_keys *k, const sluice_limit *limit)
{
    memcpy(k->buf, &limit->window_ms, 8);
    return k->buf;
}

/* The key and hashes of limits[0..n) for 'id' (free with keys_free): an
   id over 248 bytes is copied to the heap. */
static int keys_build(all_keys *k, void *impl, const sluice_limit *limits,
                      size_t n, const char *id, size_t id_len)
{
    k->len = 8 + id_len;
    k->buf = k->len <= sizeof(k->stack) ? k->stack : malloc(k->len);
    if (k->buf == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate a key of %zu "
                             "bytes", k->len);
    if (id_len > 0)
        memcpy(k->buf + 8, id, id_len);
    for (size_t i = 0; i < n; i++) {
        k->hash[i] = sluice__mem_all_hash(impl, limits[i].algo,
                                          key_of(k, &limits[i]), k->len);
        k->by_shard[i] = k->hash[i];
    }
    /* Sorted hashes are sorted by shard (their top byte). */
    qsort(k->by_shard, n, sizeof(k->by_shard[0]), u64_cmp);
    return SLUICE_OK;
}

static void keys_free(all_keys *k)
{
    if (k->buf != k->stack)
        free(k->buf);
}

/* Limit 'i's entry, in 'mode' (sluice__mem_held()). */
static int held(void *impl, const all_keys *k, const sluice_limit *limits,
                size_t i, uint64_t now_ms, uint64_t cost, sluice__held mode,
                sluice_decision *out)
{
    return sluice__mem_held(impl, k->hash[i], &limits[i],
                            key_of(k, &limits[i]), k->len, now_ms, cost, mode,
                            out);
}

/* Steps 1 to 3 of the top of this file, with every entry held. */
static int decide_held_all(void *impl, const all_keys *k,
                           const sluice_limit *limits, size_t n,
                           uint64_t now_ms, uint64_t cost, sluice__all how,
                           sluice_decision *each)
{
    sluice__held first = how == SLUICE__ALL_HIT ? SLUICE__HELD_MAKE
                                                : SLUICE__HELD_DROP;
    bool pass = true;
    int err = SLUICE_OK;

    for (size_t i = 0; i < n && err == 0 && how != SLUICE__ALL_PEEK; i++)
        err = held(impl, k, limits, i, now_ms, cost, first, NULL);
    if (how == SLUICE__ALL_RESET)
        return err;
    for (size_t i = 0; i < n && err == 0; i++) {
        err = held(impl, k, limits, i, now_ms, cost, SLUICE__HELD_PEEK,
                   &each[i]);
        pass = pass && each[i].allowed;
    }
    /* Room first, in every limit, so that counting cannot fail half way
       (a sliding log growing): an ENOMEM here counts nowhere. */
    for (size_t i = 0; i < n && err == 0 && pass && how == SLUICE__ALL_HIT;
         i++)
        err = held(impl, k, limits, i, now_ms, cost, SLUICE__HELD_RESERVE,
                   NULL);
    for (size_t i = 0; i < n && err == 0 && pass && how == SLUICE__ALL_HIT;
         i++)
        err = held(impl, k, limits, i, now_ms, cost, SLUICE__HELD_HIT,
                   &each[i]);
    return err;
}

int sluice__mem_decide_all(void *impl, const sluice_limit *limits, size_t n,
                           const char *key, size_t key_len, uint64_t cost,
                           sluice__all how, sluice_decision *each)
{
    all_keys k;
    uint64_t now_ms;
    bool swept = false;
    int err = keys_build(&k, impl, limits, n, key, key_len);

    while (err == 0) {
        now_ms = sluice__mem_hold(impl, k.by_shard, n, SLUICE__HOLD, 0);
        if (now_ms > SLUICE_NOW_MAX_MS)
            err = sluice__error(SLUICE_ERANGE,
                                "the clock reads %llu ms, beyond 2^53",
                                (unsigned long long)now_ms);
        else
            err = decide_held_all(impl, &k, limits, n, now_ms, cost, how,
                                  each);
        /* At the key cap: drop what is idle (a bounded sweep), then try again
           once; a second time, it is a refusal (counted in the stats). */
        sluice__mem_hold(impl, k.by_shard, n,
                         err != SLUICE_EFULL ? SLUICE__HOLD_GIVE
                         : swept             ? SLUICE__HOLD_FULL
                                             : SLUICE__HOLD_SWEEP,
                         now_ms);
        if (err != SLUICE_EFULL || swept)
            break;
        swept = true;
        err = SLUICE_OK;
    }
    if (err == SLUICE_EFULL)
        err = sluice__error(SLUICE_EFULL, "the store holds its cap of keys "
                            "and none is idle");
    keys_free(&k);
    return err;
}
