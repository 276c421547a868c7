/*
 * view.h - a key's state as the algorithms' decisions see it: a few
 * primitives over the server's own values, as redis-cell runs its
 * algorithm over a store of primitives. Each algorithm decides once, in its
 * own C (src/algo/NAME/NAME.h); the embedded store gives that decision its
 * in-memory state, and the module gives it the key through a view here.
 * A glue (src/algo/NAME/module.c) is then a codec: open the key into its
 * view, decide, write back what the decision changed.
 *
 * A view writes as the algorithm's script writes (src/algo/NAME/NAME.lua),
 * with the effects, events and key signals that glue.h names; it reads the
 * value as the script reads it, so that a value the script takes as its own
 * is the module's too, and one it refuses is foreign
 * (SLUICE__MODULE_FOREIGN).
 */
#ifndef SLUICE_MODULE_VIEW_H
#define SLUICE_MODULE_VIEW_H

#include "module/module.h"
#include "algo/fixed/fixed.h"

/* ---- A counter and its expiry (view_counter.c) --------------------------- */

/*
 * The fixed window's key (fixed.lua, counter.lua): a string holding the
 * count, whose expiry is the window. Also the queue limiter's
 * (SLUICE.EMQINCR, emq_incr.lua), the same counter step.
 */
typedef struct sluice__mod_counter {
    /* What the decision sees (fixed.h): the count as read (0 for no key),
       whether there is a key, its PTTL (0 in its last ms, -1: none). */
    double count;
    bool found;
    long long ttl_ms;
    RedisModuleKey *key;
    char *raw;               /* its value; NULL when there is no key */
    size_t raw_len;
    long long value;         /* the count as INCRBY reads it (a hit) */
} sluice__mod_counter;

/*
 * Opens call->key into 'v'. A hit ('by' > 0) reads the count as INCRBY does
 * ('by' its increment: the count must be an integer, and adding 'by' must
 * not overflow); a peek ('by' 0) as Lua's tonumber() does. The PTTL is
 * counted from call->server_ms. Returns 0, or why the step cannot run
 * (SLUICE__MODULE_WRONGTYPE, _NOT_INTEGER, _OVERFLOW; a peek's count that
 * is not a number is _WRONGTYPE: another's value. The key is then closed
 * and nothing changed).
 */
int sluice__mod_counter_open(const sluice__mod_call *call, long long by,
                             sluice__mod_counter *v);

/*
 * Writes back what a decision 'did' (SLUICE__FIXED_*) to 'v' opened with
 * increment 'by' (0 for a peek): the count, the expiry armed at
 * call->server_ms + window; fires the events of the script's commands and
 * sends replicas and the AOF the effects. Closes the key. Answers the count
 * the key holds after a hit (INCRBY's reply, before a refusal's DECRBY).
 */
long long sluice__mod_counter_close(const sluice__mod_call *call,
                                    sluice__mod_counter *v, unsigned did,
                                    long long by);

/* ---- A hash's fields (view_hash.c) --------------------------------------- */

/* The fields a hash view reads and writes: the sliding counter's w, i, c
   and p. */
#define SLUICE__MOD_HASH_FIELDS 4

/*
 * A hash of SLUICE__MOD_HASH_FIELDS fields, named by one letter each, read
 * with one HashGet as the script's HMGET reads them: each field as it is
 * (NULL: missing), and Lua's tonumber() of it.
 */
typedef struct sluice__mod_hash {
    RedisModuleKey *key;
    RedisModuleString *const *names; /* made once by the view */
    RedisModuleString *field[SLUICE__MOD_HASH_FIELDS];
    double num[SLUICE__MOD_HASH_FIELDS];
    bool is_num[SLUICE__MOD_HASH_FIELDS]; /* whether num[i] was read */
} sluice__mod_hash;

/*
 * Opens call->key into 'h', its fields named by the letters 'names' (one
 * for each field, the same string on every call); no key reads as no
 * fields. Returns 0, or SLUICE__MODULE_FOREIGN (not a hash; the key is
 * closed).
 */
int sluice__mod_hash_open(const sluice__mod_call *call, const char *names,
                          sluice__mod_hash *h);

/* tonumber() of field 'i' of 'h', or NULL when it is missing or not a
   number. */
static inline const double *sluice__mod_hash_num(const sluice__mod_hash *h,
                                                 int i)
{
    return h->is_num[i] ? &h->num[i] : NULL;
}

/*
 * The script's HSET of every field, 'v' written as its str() writes them
 * (%.0f), then its PEXPIRE 'ttl_ms' (counted from call->server_ms); their
 * events ("hset", "expire") and effects (HSET of every field, PEXPIREAT).
 * A field that already holds its text is not set again (the hash ends the
 * same).
 */
void sluice__mod_hash_write(const sluice__mod_call *call,
                            const sluice__mod_hash *h,
                            const double v[SLUICE__MOD_HASH_FIELDS],
                            double ttl_ms);

/* Closes the key and lets the fields go. */
void sluice__mod_hash_close(const sluice__mod_call *call, sluice__mod_hash *h);

/* ---- A ring's bytes (view_ring.c) ---------------------------------------- */

/* The compact log's string: its header's bytes, then the ring's slots. */
#define SLUICE__MOD_RING_HEAD 16

/*
 * The compact log's key (compact_log.lua has the layout): a 16-byte
 * header, 'SLCL' then head, len and cap as little-endian uint32, then a
 * ring of cap slots of 8 bytes (little-endian uint64 times in ms), the
 * 'len' live ones from 'head' on (mod cap). Read in place (StringDMA).
 */
typedef struct sluice__mod_ring {
    RedisModuleKey *key;
    const unsigned char *bytes; /* the string, read only; NULL: none */
    uint32_t head, len, cap;    /* 0, 0, 0 for no key or an empty string */
} sluice__mod_ring;

/* The time of the i'th oldest live unit of 'r' (i < r->len). */
static inline uint64_t sluice__mod_ring_at(const sluice__mod_ring *r,
                                           uint32_t i)
{
    const unsigned char *p = r->bytes + SLUICE__MOD_RING_HEAD +
                             8 * (size_t)(((uint64_t)r->head + i) % r->cap);
    uint64_t t = 0;

    for (int b = 7; b >= 0; b--)
        t = t << 8 | p[b];
    return t;
}

/*
 * Opens call->key into 'r', as the script's read_header() reads it.
 * Returns 0, or SLUICE__MODULE_FOREIGN (another type, or a string that is
 * not such a ring, byte for byte: the key is closed).
 */
int sluice__mod_ring_open(const sluice__mod_call *call, sluice__mod_ring *r);

/*
 * Writes back a decision on 'r', as the script's commands: the oldest
 * 'gone' units dropped (all of them deletes the key), then 'cost' units
 * appended at 'now_ms' (0: none) and the key's life extended to one window
 * if it would end sooner, or else the header of a ring that moved; with
 * their events and effects. Closes the key. Returns 0, or SLUICE_ENOMEM
 * (the server refused to grow the string).
 */
int sluice__mod_ring_close(const sluice__mod_call *call, sluice__mod_ring *r,
                           uint32_t gone, uint64_t cost, uint64_t now_ms);

/* ---- A sorted set's count, trim, add, k'th oldest (view_zset.c) ---------- */

/* A running total of units, hi * 2^53 + lo, lo < 2^53. */
typedef struct sluice__mod_total {
    uint64_t hi, lo;
} sluice__mod_total;

/*
 * The sliding log's key (sliding_log.lua has the members' form): a sorted
 * set, one member a request, scored by its time, carrying the set's
 * running total of units. The live total is the newest member's running
 * total less the oldest's before it; the k'th oldest unit is in the first
 * member whose running total reaches the oldest's start plus k, found by
 * bisecting the set's ranks. These are the primitives of the sliding
 * log's decision (sliding_log.h): each answers 0, or
 * SLUICE__MODULE_FOREIGN for an end member (or one on the way) that the
 * log never writes.
 */
typedef struct sluice__mod_zset {
    const sluice__mod_call *call;
    RedisModuleKey *key;
    int type;               /* EMPTY or ZSET, as opened */
    uint64_t n;             /* members after the trim */
    sluice__mod_total end;  /* the newest member's running total */
    sluice__mod_total base; /* the oldest member's, before its units */
} sluice__mod_zset;

/* Opens call->key into 'z': SLUICE__MODULE_FOREIGN when it is not a sorted
   set (the key is closed). */
int sluice__mod_zset_open(const sluice__mod_call *call, sluice__mod_zset *z);

/* The newest member's score, if there is one (ZRANGE key -1 -1). */
int sluice__mod_zset_newest(sluice__mod_zset *z, bool *found, double *t);

/* ZREMRANGEBYSCORE key -inf (now - w), the bound as str() writes it; "del"
   when that empties the set. */
void sluice__mod_zset_trim(sluice__mod_zset *z, double now, double w);

/* The live total, from the two ends' running totals; at least one unit a
   member. */
int sluice__mod_zset_total(sluice__mod_zset *z, uint64_t *total);

/* The score of the member holding the k'th oldest live unit. */
int sluice__mod_zset_kth(sluice__mod_zset *z, uint64_t k, double *t);

/* ZADD of one member at 'now' carrying 'cost' units, then the key's life
   extended to one window if it would end sooner. */
int sluice__mod_zset_add(sluice__mod_zset *z, double now, uint64_t cost);

#endif /* SLUICE_MODULE_VIEW_H */
