/*
 * module.c - the sliding-window counter's glue for sluice.so
 * (src/module/glue.h).
 *
 * The key is sliding_counter.lua's hash, read and written through the hash
 * view (src/module/view.h, view_hash.c): the fields w (window_ms), i (the
 * current window's index), c (its count) and p (the previous window's
 * count), and the key's expiry set to 2 x window - elapsed, as the
 * script's PEXPIRE does. The decision is the algorithm's own
 * (sliding_counter.h), made in the script's doubles, so that even a hash
 * some other writer left gets the script's figures. An admitted hit fires
 * the events of the script's HSET and PEXPIRE ("hset", "expire");
 * anything else writes and fires nothing.
 *
 * Where the script would stop with an error (a hash whose w and i match but
 * whose c or p is not a number, so Lua's arithmetic fails on nil; an index
 * that leaves no whole TTL, where its PEXPIRE fails), the glue answers
 * SLUICE_EPROTO and writes nothing.
 */
#include "module/view.h"
#include "algo/sliding_counter/sliding_counter.h"

static int counter_module_decide(const sluice__mod_call *call,
                                 sluice_decision *out)
{
    double w = (double)call->limit->window_ms, next[4], ttl_ms;
    const double *si = NULL;
    sluice__mod_hash h;
    int rc;

    if (sluice__mod_hash_open(call, "wicp", &h) != 0)
        return SLUICE__MODULE_FOREIGN;
    /* As the script: a state of this window has a numeric index. */
    if (h.is_num[0] && h.num[0] == w)
        si = sluice__mod_hash_num(&h, 1);
    rc = sluice__counter_decide((double)call->now_ms, si,
                                sluice__mod_hash_num(&h, 2),
                                sluice__mod_hash_num(&h, 3), call->limit,
                                call->cost, next, &ttl_ms, out);
    if (rc == 1 && call->consume) {
        /* Only a foreign index ("inf") gives no whole TTL. */
        if (ttl_ms >= 1 && ttl_ms <= 2 * w)
            sluice__mod_hash_write(call, &h, next, ttl_ms);
        else
            rc = SLUICE_EPROTO;
    }
    rc = rc < 0 ? rc : 0;
    sluice__mod_hash_close(call, &h);
    return rc;
}

const sluice__module_glue sluice__module_sliding_counter = {
    .decide = counter_module_decide,
};
