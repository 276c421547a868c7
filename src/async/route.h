/*
 * route.h - cluster and sentinel routing for the async API (route.c), and
 * hit_all/peek_all on a server (all.c). Included by async.h, whose handle
 * holds a sluice__async_routing.
 *
 * The engine hands route.c every call to send (sluice__async_dispatch():
 * queued on the connection of the node that serves its slot, or parked
 * until that is known), and every error reply before it answers with it
 * (sluice__async_redirected()). route.c talks to nodes only through the
 * handle's own connections (control calls of kind CMD), never the
 * blocking pool, and waits only on the handle's timer
 * (sluice__async_route_wake()/_tick()): nothing here blocks or sleeps.
 */
#ifndef SLUICE_ASYNC_ROUTE_H
#define SLUICE_ASYNC_ROUTE_H

#include "sluice/async.h"
#include "valkey/control.h"

#include <stdbool.h>
#include <stdint.h>

struct sluice__acall;
struct sluice__aconn;
struct sluice__abatch;

/* route.c's state, one per handle. */
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
    uint64_t round_at_ms;  /* the next round's time; UINT64_MAX: none */
    /* The last failure of a reread or a round, for the calls it fails. */
    int err;
    char msg[256];
} sluice__async_routing;

/* A handle's routing state, before first use. */
void sluice__async_routing_init(sluice__async_routing *rs);

/*
 * Sends call 'c' (of slot c->slot) where it is served: queued on that
 * node's connection (sluice__aconn_queue()); parked (c->parked) while a
 * cluster's map is reread or a sentinel store's master asked for, and
 * dispatched again when that ends; or answered with the error
 * (sluice__acall_fail()) when no node serves it. Never a callback from
 * inside.
 */
void sluice__async_dispatch(sluice_async *a, struct sluice__acall *c);

/*
 * The node that serves 'slot' now: 0 with '*out' set; 1 when it is not
 * known yet (a map being reread, a master being asked for); or an error
 * (SLUICE_ECONN: no node serves the slot, even after a reread).
 */
int sluice__async_route(sluice_async *a, unsigned slot,
                        sluice__vk_node **out);

/*
 * The error reply 'r' to batch 'b' on 'conn': 1 when it was a redirection
 * and b's calls were sent again ('b' is then freed here: MOVED mends the
 * map, with the blocking path's own function, and dispatches them again;
 * ASK queues them on the named node, after ASKING; TRYAGAIN parks them for
 * a pause on the timer; a sentinel store's READONLY asks the sentinels
 * again); 0 when 'r' is no redirection; an error as sluice__vk_follow()
 * answers it (SLUICE_ECONFIG after MAX_SENDS sends, SLUICE_ECONN mid-move
 * past the deadline, SLUICE_EPROTO for a redirection naming no node).
 */
int sluice__async_redirected(struct sluice__aconn *conn,
                             struct sluice__abatch *b, const redisReply *r);

/* When route.c next needs the timer (a TRYAGAIN pause, a sentinel
   round's back-off); UINT64_MAX: never. And what it does then. */
uint64_t sluice__async_route_wake(const sluice_async *a);
void sluice__async_route_tick(sluice_async *a, uint64_t now_ms);

/*
 * sluice_async_hit_all() and _peek_all() on a server store (all.c): the
 * blocking calls' checks (sluice__all_check()), then the one script call
 * of valkey/hit_all.c (sluice__vk_all_build()) through
 * sluice__async_eval(), read by sluice__vk_all_read() and combined by
 * sluice__all_finish(); the failure policy as the guard applies it to
 * sluice_hit_all(). 'cb' runs exactly once if this answers 0.
 */
int sluice__async_all(sluice_async *a, const sluice_limit *limits, size_t n,
                      const char *key, size_t key_len, uint64_t cost,
                      bool consume, sluice_async_all_cb cb, void *user);

#endif /* SLUICE_ASYNC_ROUTE_H */
