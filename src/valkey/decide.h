/*
 * decide.h - what the three files of a decision on a server share, and
 * nothing else needs:
 *
 *   decide_args.c   a call's arguments: EVALSHA of the algorithm's script
 *                   or SLUICE.HITMANY of the module, for n requests
 *   decide_calls.c  call sets: requests grouped by slot into calls, the
 *                   calls written to their nodes together, and each one
 *                   sent again while a redirection or a lack says so
 *   decide_reply.c  a call's reply: four integers per request, checked,
 *                   into its sluice_decision, or an error for each
 *
 * Every decision goes the same way, from the public call to the wire: a
 * call set (sluice__vk_calls_add(), sluice__vk_calls_finish()), whatever
 * the store (one server, a cluster, a sentinel's master) and however many
 * requests (sluice_hit(), sluice_hit_many(), a combining round).
 */
#ifndef SLUICE_VALKEY_DECIDE_H
#define SLUICE_VALKEY_DECIDE_H

#include "valkey/valkey.h"

/*
 * The most requests one call decides: a larger batch is sent as several
 * calls. The arguments of one call stay under a few MB.
 */
#define SLUICE__VK_GROUP_MAX 512

/*
 * The arguments of one call for 'n' requests. To a script: EVALSHA, the
 * SHA1, NUMKEYS, the n keys, then max, window, consume, now and token, then
 * the n costs, then the burst (src/algo/prelude.lua). To the module:
 * SLUICE.HITMANY algo max window [BURST b] [PEEK] [NOW ms] KEYS, then each
 * key and its cost. One block holds them (the caller's 'stack' when they
 * fit), unless a key is too long for its SLUICE__VK_KEY_BUF slot.
 */
typedef struct sluice__vk_args {
    int argc;
    size_t key0, kstep; /* key i is argv[key0 + kstep * i] */
    const char **argv;
    size_t *lens;
    char (*keys)[SLUICE__VK_KEY_BUF];
    char (*nums)[24]; /* numkeys, max, window, now, burst, then the costs */
    char token[40];   /* the store's seed and a count, in hex */
    void *block;
    bool on_heap;
} sluice__vk_args;

/* Builds 'g' for requests reqs[todo[0..n)] under 'limit': to the module
   when 'module', else to the algorithm's script. 'stack' ('stack_cap'
   bytes; NULL, 0 for none) holds them when they fit. */
int sluice__vk_args_build(sluice__vk_args *g, void *stack, size_t stack_cap,
                          sluice__vk_store *v, const sluice_limit *limit,
                          bool consume, const sluice_request *reqs,
                          const size_t *todo, size_t n, bool module);
/* Frees what sluice__vk_args_build() took for 'n' requests (nothing for a
   zeroed 'g'); 'g' is zeroed again. */
void sluice__vk_args_free(sluice__vk_args *g, size_t n);

/*
 * Hands out a call's answer to its requests reqs[todo[0..n)]: the reply
 * 'r' (freed here), or the error 'err' for each ('r' NULL). 'g' names the
 * keys in a message; it may be NULL with an error. A failed request's
 * message goes to msgs[todo[i]] when 'msgs' is not NULL.
 */
void sluice__vk_answer(const sluice_limit *limit, sluice_request *reqs,
                       const size_t *todo, size_t n, sluice__vk_msg *msgs,
                       const sluice__vk_args *g, int err, redisReply *r);

#endif /* SLUICE_VALKEY_DECIDE_H */
