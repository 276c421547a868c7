/*
 * module.c - the compact sliding log's glue for sluice.so
 * (src/module/glue.h).
 *
 * The key is compact_log.lua's string, read and written through the ring
 * view (src/module/view.h, view_ring.c: the script's header checks, byte
 * for byte, and its writes, events and effects). The decision is the
 * algorithm's own (compact_log.h), reading the ring's slots in place. A
 * key holding another type, or a string that is not such a ring, is
 * foreign: nothing is changed.
 */
#include "module/view.h"
#include "algo/compact_log/compact_log.h"

SLUICE__CLOG_DEFINE(ring, sluice__mod_ring, sluice__mod_ring_at)

static int clog_module_decide(const sluice__mod_call *call,
                              sluice_decision *out)
{
    uint64_t now_ms = call->now_ms;
    sluice__mod_ring r;
    uint32_t gone;

    if (sluice__mod_ring_open(call, &r) != 0)
        return SLUICE__MODULE_FOREIGN;
    gone = ring_decide(&r, r.len, call->limit, &now_ms, call->cost, out);
    return sluice__mod_ring_close(call, &r, gone,
                                  out->allowed && call->consume ? call->cost
                                                                : 0,
                                  now_ms);
}

const sluice__module_glue sluice__module_compact_log = {
    .decide = clog_module_decide,
};
