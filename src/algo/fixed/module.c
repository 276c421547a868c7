/*
 * module.c - the fixed window's glue for sluice.so (src/module/glue.h).
 *
 * The key is fixed.lua's: a string holding the count, whose expiry is the
 * window, read and written through the counter view (src/module/view.h,
 * view_counter.c: the script's readings of odd values, its writes, events
 * and effects). The decision is the fixed window's own,
 * sluice__fixed_decide() (fixed.h), which the embedded store makes too.
 */
#include "module/view.h"

static int fixed_module_decide(const sluice__mod_call *call,
                               sluice_decision *out)
{
    long long by = call->consume ? (long long)call->cost : 0;
    sluice__mod_counter v;
    unsigned did;

    if (sluice__mod_counter_open(call, by, &v) != 0)
        return SLUICE__MODULE_FOREIGN;
    did = sluice__fixed_decide(&v.count, &v.ttl_ms, v.found, call->limit,
                               call->cost, call->consume, out);
    sluice__mod_counter_close(call, &v, did, by);
    return 0;
}

const sluice__module_glue sluice__module_fixed = {
    .decide = fixed_module_decide,
};
