/*
 * refusals.c - a server store's local memory of refused keys (used by the
 * guard, guard.c).
 *
 * When the server refuses a key with a wait of N ms, the same request (the
 * same cost) cannot be admitted before those N ms are over, whatever else
 * happens: a refusal changes nothing, other callers only add to the count,
 * and retry_after_ms is the least wait if nothing else arrives. So for N ms
 * this process can refuse it without asking, and an attacker's refused
 * requests cost the server nothing. What a local refusal cannot see:
 *
 *   - a reset of the key by another process (this process's resets forget
 *     the entry), so such a key stays refused here until the wait ends;
 *   - a request of another cost: it goes to the server (a costlier one
 *     would be refused too, but its wait is longer, and only the server
 *     knows it exactly); a cheaper one, when admitted, has the entry
 *     forgotten, since that admission pushes the refused request's wait
 *     further out;
 *   - other processes' admissions, which may push the wait out too: at its
 *     end the server is asked again (and may refuse again);
 *   - 'remaining' and 'reset_after_ms' moving: they are the server's figures
 *     at the refusal (the waits counted down since).
 *
 * Entries live in SHARDS shards, each a small chained hash table behind a
 * mutex, at most 'cap' entries in all. Expired entries are dropped when a
 * shard is full; when nothing has expired, a new refusal is simply not
 * remembered (the server answers it next time, as it would without this).
 */
#include "store/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 64u
#define BUCKETS 256u /* per shard */

typedef struct refusal {
    struct refusal *next;
    uint64_t hash;
    uint64_t until_ms;     /* refused until then (the caller's clock) */
    uint64_t reset_ms;     /* when the budget is whole again */
    uint64_t cost;         /* refused for this cost and above */
    uint64_t max, window_ms, burst, remaining;
    uint32_t key_len;
    uint8_t algo;
    char key[];
} refusal;

typedef struct rshard {
    pthread_mutex_t lock;
    refusal *buckets[BUCKETS];
    size_t count;
} rshard;

struct sluice__refusals {
    size_t cap_per_shard;
    uint64_t seed;
    _Atomic uint64_t hits;
    _Atomic size_t entries;  /* over all shards: 0 skips every lock */
    rshard shards[SHARDS];
};

static uint64_t hash_key(uint64_t seed, sluice_algo algo, const char *key,
                         size_t len)
{
    return sluice__hash(seed, (uint64_t)algo << 56, key, len);
}

int sluice__refusals_new(sluice__refusals **out, size_t cap, uint64_t seed)
{
    sluice__refusals *r = calloc(1, sizeof(*r));

    *out = NULL;
    if (r == NULL)
        return sluice__error(SLUICE_ENOMEM, "cannot allocate refusals");
    r->cap_per_shard = cap / SHARDS > 0 ? cap / SHARDS : 1;
    r->seed = seed;
    for (unsigned i = 0; i < SHARDS; i++)
        pthread_mutex_init(&r->shards[i].lock, NULL);
    *out = r;
    return SLUICE_OK;
}

void sluice__refusals_free(sluice__refusals *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < SHARDS; i++) {
        for (unsigned b = 0; b < BUCKETS; b++) {
            refusal *e = r->shards[i].buckets[b];

            while (e != NULL) {
                refusal *next = e->next;

                free(e);
                e = next;
            }
        }
        pthread_mutex_destroy(&r->shards[i].lock);
    }
    free(r);
}

uint64_t sluice__refusals_hits(sluice__refusals *r)
{
    return r == NULL ? 0 : atomic_load(&r->hits);
}

static refusal **find(rshard *sh, uint64_t h, sluice_algo algo,
                      const char *key, size_t len)
{
    refusal **link = &sh->buckets[(h >> 8) & (BUCKETS - 1)];

    for (; *link != NULL; link = &(*link)->next)
        if ((*link)->hash == h && (*link)->algo == (uint8_t)algo &&
            (*link)->key_len == len &&
            (len == 0 || memcmp((*link)->key, key, len) == 0))
            return link;
    return link;
}

bool sluice__refusals_check(sluice__refusals *r, const sluice_limit *limit,
                            const char *key, size_t len, uint64_t cost,
                            uint64_t now_ms, sluice_decision *out)
{
    uint64_t h = hash_key(r->seed, limit->algo, key, len);
    rshard *sh = &r->shards[h % SHARDS];
    refusal *e;
    bool hit = false;

    /* Nothing refused anywhere, the usual case: no lock taken at all. A
       refusal noted by another thread this instant is seen by the next
       call; until then this one asks the server, as it would anyway. */
    if (atomic_load_explicit(&r->entries, memory_order_relaxed) == 0)
        return false;
    pthread_mutex_lock(&sh->lock);
    e = *find(sh, h, limit->algo, key, len);
    if (e != NULL && now_ms < e->until_ms && cost == e->cost &&
        e->max == limit->max && e->window_ms == limit->window_ms &&
        e->burst == limit->burst) {
        memset(out, 0, sizeof(*out));
        out->limit = limit->max;
        out->remaining = e->remaining;
        out->retry_after_ms = e->until_ms - now_ms;
        out->reset_after_ms = e->reset_ms > now_ms ? e->reset_ms - now_ms
                                                   : out->retry_after_ms;
        if (out->reset_after_ms < out->retry_after_ms)
            out->reset_after_ms = out->retry_after_ms;
        hit = true;
    }
    pthread_mutex_unlock(&sh->lock);
    if (hit)
        atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
    return hit;
}

/* Drops the shard's expired entries. */
static void sweep(sluice__refusals *r, rshard *sh, uint64_t now_ms)
{
    for (unsigned b = 0; b < BUCKETS; b++) {
        refusal **link = &sh->buckets[b];

        while (*link != NULL) {
            refusal *e = *link;

            if (e->until_ms <= now_ms) {
                *link = e->next;
                free(e);
                sh->count--;
                atomic_fetch_sub(&r->entries, 1);
            } else {
                link = &e->next;
            }
        }
    }
}

void sluice__refusals_note(sluice__refusals *r, const sluice_limit *limit,
                           const char *key, size_t len, uint64_t cost,
                           uint64_t now_ms, const sluice_decision *d)
{
    uint64_t h = hash_key(r->seed, limit->algo, key, len);
    rshard *sh = &r->shards[h % SHARDS];
    refusal **link, *e;

    if (d->allowed || d->fallback != SLUICE_ANSWERED || d->retry_after_ms == 0 ||
        len > UINT32_MAX)
        return;
    pthread_mutex_lock(&sh->lock);
    link = find(sh, h, limit->algo, key, len);
    if ((e = *link) == NULL) {
        if (sh->count >= r->cap_per_shard)
            sweep(r, sh, now_ms);
        if (sh->count >= r->cap_per_shard ||
            (e = malloc(sizeof(*e) + len)) == NULL) {
            pthread_mutex_unlock(&sh->lock);
            return;
        }
        e->next = NULL;
        e->hash = h;
        e->key_len = (uint32_t)len;
        e->algo = (uint8_t)limit->algo;
        if (len > 0)
            memcpy(e->key, key, len);
        link = find(sh, h, limit->algo, key, len); /* the sweep may move it */
        *link = e;
        sh->count++;
        atomic_fetch_add(&r->entries, 1);
    }
    e->until_ms = now_ms + d->retry_after_ms;
    e->reset_ms = now_ms + d->reset_after_ms;
    e->cost = cost;
    e->max = limit->max;
    e->window_ms = limit->window_ms;
    e->burst = limit->burst;
    e->remaining = d->remaining;
    pthread_mutex_unlock(&sh->lock);
}

void sluice__refusals_forget(sluice__refusals *r, sluice_algo algo,
                             const char *key, size_t len)
{
    uint64_t h;
    rshard *sh;
    refusal **link, *e;

    /* Nothing remembered: nothing to forget, and no lock to take (a note
       racing with this one is as if it came after). */
    if (atomic_load(&r->entries) == 0)
        return;
    h = hash_key(r->seed, algo, key, len);
    sh = &r->shards[h % SHARDS];
    pthread_mutex_lock(&sh->lock);
    link = find(sh, h, algo, key, len);
    if ((e = *link) != NULL) {
        *link = e->next;
        free(e);
        sh->count--;
        atomic_fetch_sub(&r->entries, 1);
    }
    pthread_mutex_unlock(&sh->lock);
}
