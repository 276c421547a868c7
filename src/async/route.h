/*
 * route.h - cluster and sentinel routing for the async API (route.c), and
 * hit_all/peek_all on a server (all.c): what they give the engine, and
 * what they need of it.
 *
 * The engine (handle.c, aconn.c, decide.c) asks sluice__async_route() which
 * node serves a call's slot before it queues the call there, and hands
 * every error reply of a call to sluice__async_redirected() before it
 * answers with it. route.c keeps its own state in the handle
 * (sluice__async_routing) and talks to nodes only through the engine's
 * connections (sluice__async_command()), never the blocking pool, and
 * waits only on the engine's timer: nothing here blocks or sleeps.
 */
#ifndef SLUICE_ASYNC_ROUTE_H
#define SLUICE_ASYNC_ROUTE_H

#include "sluice/async.h"
#include "valkey/control.h"

#include <stdbool.h>
#include <stdint.h>

struct sluice_async;
struct sluice__async_req;

/* ---- route.c's state, one per handle -------------------------------------------- */

typedef struct sluice__async_routing {
    /* A cluster's map reread: one CLUSTER SLOTS at a time, node after
       node (those that failed lately last), at most one per
       REFRESH_GAP_MS. */
    bool map_asking;
    size_t map_k;          /* the next of the 2 x nnodes places to try */
    uint64_t map_done_ms;  /* when the last reread ended; 0: never */
    bool map_done_ok;      /* ... and whether it read a map */
    /* A sentinel store's master: one sentinel asked at a time, then ROLE
       of the node it names; rounds again after a back-off while calls
       wait for it. */
    bool master_asking;
    size_t sentinel_i;     /* sentinels asked in this round */
    unsigned sentinel_at;  /* the one whose answer is being confirmed */
    uint64_t backoff_ms;
    /* The last failure of a reread or a round, for the calls it fails. */
    int err;
    char msg[256];
} sluice__async_routing;

/* ---- What route.c gives the engine -------------------------------------------------- */

/* A handle's routing state, before first use. */
void sluice__async_routing_init(sluice__async_routing *rs);

/*
 * The node that serves 'slot' now: 0 with '*out' set; 1 when it is not
 * known yet (a cluster map being reread, a sentinel store's master being
 * asked for): the engine parks the call and routes it again when
 * sluice__async_unpark() says so; or an error (SLUICE_ECONN: no node
 * serves the slot, even after a reread). Never blocks.
 */
int sluice__async_route(struct sluice_async *a, unsigned slot,
                        struct sluice__vk_node **out);

/*
 * The error reply 'r' of request 'q' (its route: sluice__async_req_route()):
 * 1 when it was a redirection and the request is sent again
 * (sluice__async_resend(): MOVED mends the map, the same function the
 * blocking path uses, and routes it again; ASK sends it to the named node
 * after ASKING; TRYAGAIN after a pause on the timer; a sentinel store's
 * READONLY asks the sentinels again); 0 when 'r' is the request's answer
 * (no redirection); an error as the blocking path's sluice__vk_follow():
 * SLUICE_ECONFIG after MAX_SENDS sends (a redirect loop), SLUICE_ECONN
 * mid-move (TRYAGAIN) past the deadline, SLUICE_EPROTO for a redirection
 * that names no node. The route's 'sends' is route.c's to count.
 */
int sluice__async_redirected(struct sluice_async *a,
                             struct sluice__async_req *q,
                             const redisReply *r);

/*
 * sluice_async_hit_all() and _peek_all() on a server store (all.c): the
 * same checks as the blocking calls (sluice__all_check()), then the one
 * script call of valkey/hit_all.c (sluice__vk_all_build()) through
 * sluice__async_eval(), read by sluice__vk_all_read() and combined by
 * sluice__all_finish(). 'cb' runs exactly once if this answers 0.
 */
int sluice__async_all(struct sluice_async *a, const sluice_limit *limits,
                      size_t n, const char *key, size_t key_len,
                      uint64_t cost, bool consume, sluice_async_all_cb cb,
                      void *user);

/* ---- What route.c needs of the engine ------------------------------------------------ */

/* The handle's store, its server side (under the guard, if any), and
   routing state. */
sluice_store *sluice__async_store(struct sluice_async *a);
sluice__vk_store *sluice__async_vk(struct sluice_async *a);
sluice__async_routing *sluice__async_routing_of(struct sluice_async *a);

/* The route of request 'q' (set up by sluice__vk_route_init() when the
   request was started, with its slot and deadline). */
sluice__vk_route *sluice__async_req_route(struct sluice__async_req *q);

/*
 * Sends one command to node 'n' on the handle's own connection to it
 * (connecting first if need be), with the store's command timeout. 'fn'
 * runs exactly once, from the loop: with the reply (not an error reply:
 * those become 'err', as sluice__vk_reply_error() maps them) or an error.
 * An error answered here means 'fn' will not run.
 */
typedef void (*sluice__async_cmd_fn)(struct sluice_async *a, int err,
                                     redisReply *r, const char *msg,
                                     void *arg);
int sluice__async_command(struct sluice_async *a, sluice__vk_node *n,
                          int argc, const char *const *argv,
                          const size_t *lens, sluice__async_cmd_fn fn,
                          void *arg);

/*
 * Sends request 'q' again: to node 'n' (after ASKING if 'asking'), or,
 * with 'n' NULL, to the node sluice__async_route() names (parked if none
 * is known yet), after 'delay_ms' on the timer (0: at once). By its
 * deadline, as every request. Never answers 'q' from inside.
 */
int sluice__async_resend(struct sluice_async *a, struct sluice__async_req *q,
                         sluice__vk_node *n, bool asking, uint64_t delay_ms);

/* The parked requests: routed again (err 0), or answered with 'err' and
   the message 'msg'. Only ever called from a callback of the loop. */
void sluice__async_unpark(struct sluice_async *a, int err, const char *msg);
/* How many requests are parked. */
size_t sluice__async_parked(const struct sluice_async *a);

/* Runs 'fn(a, arg)' once, 'ms' from now, from the handle's timer (not run
   if the handle is freed first). */
int sluice__async_after(struct sluice_async *a, uint64_t ms,
                        void (*fn)(struct sluice_async *a, void *arg),
                        void *arg);

#endif /* SLUICE_ASYNC_ROUTE_H */
