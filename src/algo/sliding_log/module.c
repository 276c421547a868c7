/*
 * module.c - the sliding log's glue for sluice.so (src/module/glue.h).
 *
 * The key is sliding_log.lua's sorted set, worked through the sorted-set
 * view (src/module/view.h, view_zset.c: the members 'A'/'B..' with the
 * set's running totals, the k'th unit found by bisecting its ranks, one
 * ZADD a request, with the script's events and effects). The decision is
 * the algorithm's own (sliding_log.h), on the scores as the script reads
 * them (doubles). A set whose end members are not of the log's form is
 * foreign: -1, and (for its newest) nothing is changed.
 */
#include "module/view.h"
#include "algo/sliding_log/sliding_log.h"

SLUICE__LOG_DEFINE(zset, sluice__mod_zset, double, SLUICE__LUA_FIGURE,
                   sluice__mod_zset_newest, sluice__mod_zset_trim,
                   sluice__mod_zset_total, sluice__mod_zset_kth,
                   sluice__mod_zset_add)

static int log_module_decide(const sluice__mod_call *call,
                             sluice_decision *out)
{
    sluice__mod_zset z;
    int rc;

    if (sluice__mod_zset_open(call, &z) != 0)
        return SLUICE__MODULE_FOREIGN;
    rc = zset_decide(&z, call->limit, (double)call->now_ms, call->cost,
                     call->consume, out);
    RedisModule_CloseKey(z.key);
    return rc;
}

const sluice__module_glue sluice__module_sliding_log = {
    .decide = log_module_decide,
};
