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

/* ---- A counter and its expiry (view_counter.c) ---------------------------- */

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
 * (SLUICE__MODULE_WRONGTYPE, _NOT_INTEGER, _OVERFLOW: the key is closed
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

#endif /* SLUICE_MODULE_VIEW_H */
