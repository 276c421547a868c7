/*
 * control.h - the control plane's halves that work on a reply obtained by
 * anyone: the blocking path gets its replies from a node's pool
 * (cluster.c, sentinel.c, hit_all.c), the async path from its own
 * connections (src/async/route.c), and both read them with these, so a
 * map, a redirection, a sentinel's answer or a hit_all reply is
 * understood one way only.
 */
#ifndef SLUICE_VALKEY_CONTROL_H
#define SLUICE_VALKEY_CONTROL_H

#include "valkey/valkey.h"

/* ---- The cluster's map and redirections (cluster.c) ------------------------------ */

/*
 * Makes the CLUSTER SLOTS reply 'r', however it was obtained (the blocking
 * pool or an async connection), the map: 'from' is the node that answered
 * (a master named with an empty host is 'from''s host). An error reply is
 * that node's error (sluice__vk_reply_error()); no slots, SLUICE_ECONN; a
 * malformed range, SLUICE_EPROTO, and the map is then left as it was.
 * Takes the map's write lock; does not touch map_stale.
 */
int sluice__vk_map_apply(sluice__vk_store *v, sluice__vk_node *from,
                         const redisReply *r);
/* After MOVED: 'slot' is served by host:port from now on (the node added
   if new), and the map is marked stale, to be reread in full. */
void sluice__vk_map_moved(sluice__vk_store *v, unsigned slot,
                          const char *host, size_t host_len, int port);
/*
 * Parses the error reply "MOVED 3999 127.0.0.1:6381" or "ASK ..." into
 * 'ask', the slot and the endpoint ('host' points into 'r', 'host_len'
 * bytes). -1 if 'r' is neither or does not parse.
 */
int sluice__vk_redirect_parse(const redisReply *r, bool *ask, unsigned *slot,
                              const char **host, size_t *host_len, int *port);
/* ---- Sentinel (sentinel.c) ----------------------------------------------------- */

/*
 * The master's address in sentinel 's''s reply 'r' to SENTINEL
 * GET-MASTER-ADDR-BY-NAME, however it was obtained: its host into 'host'
 * (of 'cap' bytes, NUL-ended) and its port. An error reply is the
 * sentinel's error; nil (no such master), SLUICE_ECONFIG; anything but an
 * address, SLUICE_EPROTO.
 */
int sluice__vk_sentinel_addr_parse(const sluice__vk_store *v,
                                   sluice__vk_node *s, const redisReply *r,
                                   char *host, size_t cap, int *port);
/* Whether node 'n''s reply 'r' to ROLE says it is a master: 0; SLUICE_ECONN
   when it is a replica (a failover in progress), SLUICE_EPROTO when 'r'
   names no role, or the node's error for an error reply. */
int sluice__vk_role_parse(const sluice__vk_store *v, sluice__vk_node *n,
                          const redisReply *r);

/* ---- hit_all (hit_all.c) -------------------------------------------------------- */

/*
 * The one call of sluice_hit_all()/sluice_peek_all()/reset_all on a server
 * (hit_all.c), built apart from its sending so that the async path sends
 * the same call: argv[first..first + argc) and their lens, for the node of
 * its first key (argv[3], whose slot every key shares); 'script' is the
 * hit_all script (argv[first + 1] its SHA1) or NULL for a reset's DEL.
 */
typedef struct sluice__vk_all_args {
    size_t n;                    /* limits */
    int first, argc;
    const sluice__script *script;
    const char *argv[3 + 5 * SLUICE_HIT_ALL_MAX + 6];
    size_t lens[3 + 5 * SLUICE_HIT_ALL_MAX + 6];
    char keys[SLUICE_HIT_ALL_MAX][SLUICE__VK_KEY_BUF];
    char nums[4 * SLUICE_HIT_ALL_MAX + 3][24]; /* numkeys, now, cost, ... */
    char token[40];
} sluice__vk_all_args;

/* Fills 'a' (the caller's; released with sluice__vk_all_free() whatever
   this answers) for limits[0..n) of 'key'. */
int sluice__vk_all_build(sluice__vk_all_args *a, sluice__vk_store *v,
                         const sluice_limit *limits, size_t n,
                         const char *key, size_t key_len, uint64_t cost,
                         sluice__all how);
/* Reads every limit's decision into each[0..a->n) from the reply 'r' (not
   an error reply) to the call 'a'; a reset's reply is not read. */
int sluice__vk_all_read(const sluice__vk_all_args *a, const redisReply *r,
                        const sluice_limit *limits, uint64_t cost,
                        sluice_decision *each);
void sluice__vk_all_free(sluice__vk_all_args *a);

#endif
