/*
 * store.h - a store as a small table of functions (after hiredis'
 * transports), the server interface that only stores on a server fill in,
 * and what every store shares: key names, and the guard that wraps a remote
 * store.
 *
 *   sluice_hit() ...  store.c: checks the arguments once, then calls
 *        |
 *        v
 *   store->ops        the guard (guard.c), for a store on a server: the
 *        |            refused-key cache and the failure policy
 *        v
 *   backend ops       mem/ (the embedded store), valkey/ (a server or a
 *                     cluster); and beside them, for the queue (queue/),
 *   store->server     the server interface: run a script, run a command,
 *                     a connection of its own
 *
 * A new store is one file (or folder) with a backend open function and a
 * line in the table of backends (store.c).
 */
#ifndef SLUICE_STORE_H
#define SLUICE_STORE_H

#include "algo/algo.h"

struct redisReply;
struct redisContext;

/* A subscription to a channel of a server (the server interface's). */
typedef struct sluice__sub sluice__sub;

/* ---- A store's table ---------------------------------------------------------- */

/* What sluice_hit_all(), _peek_all() and _reset_all() ask of a store. */
typedef enum sluice__all {
    SLUICE__ALL_PEEK,
    SLUICE__ALL_HIT,
    SLUICE__ALL_RESET
} sluice__all;

/*
 * The halves of sluice_hit_all() around the store's decide_all
 * (store/hit_all.c), for a caller that gets the decisions some other way
 * (the async API): the checks that do not depend on the store (1 <= n <=
 * SLUICE_HIT_ALL_MAX, each limit and the cost, no two limits sharing a
 * state; 'reset' checks the limits alone), and, once each[0..n) is
 * decided, every limit's 'limit' set, 'out' combined from them, and the
 * refusal's receipt emitted as sluice_hit_all() does.
 */
int sluice__all_check(const sluice_store *store, const sluice_limit *limits,
                      size_t n, const char *key, size_t key_len,
                      uint64_t cost, bool reset);
void sluice__all_finish(sluice_decision *out, sluice_decision *each,
                        sluice_store *store, const sluice_limit *limits,
                        size_t n, const char *key, size_t key_len,
                        uint64_t cost, sluice__all how);

/*
 * What every store answers. The generic calls (store.c) have checked the
 * arguments: a valid limit, 1 <= cost <= max, a key present. 'impl' is the
 * store's own data.
 */
typedef struct sluice__store_ops {
    int (*decide)(void *impl, const sluice_limit *limit, const char *key,
                  size_t key_len, uint64_t cost, bool consume,
                  sluice_decision *out);
    /* Decides reqs[todo[0..n)] (ascending places, arguments checked) and
       sets each one's 'err' and 'decision'. NULL: decide() each. */
    int (*decide_many)(void *impl, const sluice_limit *limit,
                       sluice_request *reqs, const size_t *todo, size_t n);
    /* 1 it removed a count, 0 nothing was there (sluice_reset()). */
    int (*reset)(void *impl, const sluice_limit *limit, const char *key,
                 size_t key_len);
    /* sluice_hit_all() (hit_all.c): decides limits[0..n) on one id, all or
       nothing, into each[0..n) ('how'), or forgets them (RESET). */
    int (*decide_all)(void *impl, const sluice_limit *limits, size_t n,
                      const char *key, size_t key_len, uint64_t cost,
                      sluice__all how, sluice_decision *each);
    /* Fills what it counts of 'out' (zeroed by the caller). */
    int (*stats)(void *impl, sluice_store_stats *out);
    void (*free)(void *impl);
} sluice__store_ops;

/*
 * The server interface: what the queue (queue/) needs of a store on a
 * server, and nothing of the queue is known on the other side. Keys are
 * routed by their first key (a cluster's slot); error replies are errors
 * (SLUICE_EPROTO, or SLUICE_ECONN for a server that cannot answer now); a
 * reply is the caller's (freeReplyObject).
 */
typedef struct sluice__server_ops {
    /* Runs 'script' with 'nkeys' keys (one slot) and then the other
       arguments, 'argc' in all. */
    int (*eval)(void *impl, const sluice__script *script, int nkeys, int argc,
                const char *const *args, const size_t *lens,
                struct redisReply **out);
    /* Runs 'command', a command of the server's native module that takes
       the script's keys and arguments and answers its reply, where the
       store sends its key's calls to the module (its engine); else runs
       'script', as eval does. */
    int (*eval_module)(void *impl, const char *command,
                       const sluice__script *script, int nkeys, int argc,
                       const char *const *args, const size_t *lens,
                       struct redisReply **out);
    /* Runs one command whose first key is 'key'. */
    int (*command)(void *impl, const char *key, size_t key_len, int argc,
                   const char **argv, const size_t *lens,
                   struct redisReply **out);
    /* Runs one command that names no key on every primary (the server, or
       each master of the cluster's map, read afresh), into '*done' of
       them; stops at the first that fails, naming it. */
    int (*command_primaries)(void *impl, int argc, const char **argv,
                             const size_t *lens, size_t *done);
    /* A connection of its own to the server (a cluster's first node),
       subscribed to 'channel' (its confirmation read). */
    int (*subscribe)(void *impl, const char *channel, sluice__sub **out);
    /* The next message on the subscription, waiting at most 'wait_ms':
       0 with '*payload' (malloc'd, NUL after its '*len' bytes), or with
       '*payload' NULL when none came in time. An error leaves 's' broken:
       free it (and subscribe again later). */
    int (*sub_next)(sluice__sub *s, uint64_t wait_ms, char **payload,
                    size_t *len);
    void (*sub_free)(sluice__sub *s);
} sluice__server_ops;

/*
 * What a backend's open function fills in: its table, its data, and for a
 * store on a server its server interface and whether the guard wraps it.
 */
typedef struct sluice__opened {
    const sluice__store_ops *ops;
    void *impl;
    const char *kind;                 /* "mem", "valkey", ... */
    const sluice__server_ops *server; /* NULL: not on a server */
    const char *emq_prefix;           /* the queue keys' prefix, the impl's */
    uint64_t max_payload;             /* the largest job payload it takes */
    /* The caller's clock the queue's scripts are given (clock=caller, as
       the limiter's scripts are), or NULL: they read the server's. */
    sluice_clock_ms_fn caller_clock_ms;
    void *caller_clock_payload;
    bool remote;                      /* wrap it in the guard */
} sluice__opened;

/*
 * A backend's open: 'o' holds the caller's options with defaults filled in;
 * the backend applies its URL's query to it, so that on return it holds the
 * options in force (the guard reads on_error, refused_cache, the command
 * timeout and the clock from it).
 */
typedef int (*sluice__open_fn)(sluice__opened *out, sluice_store_opts *o,
                               const char *url);

/* The backends' opens, in store.c's table: the embedded store (mem/) and a
   server, a cluster or a sentinel's master (valkey/). */
int sluice__mem_open(sluice__opened *out, sluice_store_opts *o,
                     const char *url);
int sluice__valkey_open(sluice__opened *out, sluice_store_opts *o,
                        const char *url);

/* A store and key fit for a call: else SLUICE_EINVAL (NULL store, NULL key
   with a length) or SLUICE_ERANGE (a key over 2^32 - 1 bytes). */
int sluice__key_check(const sluice_store *store, const char *key,
                      size_t key_len);

struct sluice_store {
    const sluice__store_ops *ops; /* the guard, or the backend itself */
    void *impl;
    sluice__opened backend;
};

/*
 * The server interface of 'store' and its data, or SLUICE_ENOTSUP (with a
 * message naming 'call') for a store that is not on a server.
 */
int sluice__store_server(const sluice__server_ops **ops, void **impl,
                         const sluice_store *store, const char *call);

/*
 * The clock argument of a server store's scripts (NOW), in 'buf' (24
 * bytes) and '*len': with clock=caller, the store's clock in ms as text;
 * else "" (the scripts read the server's). SLUICE_ERANGE when the clock
 * reads beyond 2^53.
 */
int sluice__store_now(char *buf, size_t *len, const sluice_store *store);

/* The "sluice.hit.refused" receipt of refusal 'd' by 'limit' (store.c). */
void sluice__emit_hit(const sluice_store *store, const sluice_limit *limit,
                      const char *key, size_t key_len,
                      const sluice_decision *d);

/* ---- The guard (guard.c) -------------------------------------------------- */

/*
 * Wraps a store on a server: once it refuses a key with a wait, the same
 * request is refused here until the wait ends (refusals.c); a call it
 * cannot answer (SLUICE_ECONN, SLUICE_ETIMEDOUT) is answered by the failure
 * policy (on_error). Replaces 'out->ops' and 'out->impl' by the guard's,
 * around them.
 */
int sluice__guard_wrap(sluice_store *store, const sluice_store_opts *o);

/*
 * The guard one request at a time, for the async API (src/async/), which
 * sends the request itself: the guard of 'store' (NULL: none); whether the
 * cache answers the request ('*asked_ms' then is when it was asked, for
 * settle); settling the server's answer (or error) as the blocking path
 * does; forgetting a reset key.
 */
void *sluice__guard_of(const sluice_store *store);
bool sluice__guard_check(void *g, const sluice_limit *limit, const char *key,
                         size_t key_len, uint64_t cost, uint64_t *asked_ms,
                         sluice_decision *out);
int sluice__guard_settle(void *g, const sluice_limit *limit, const char *key,
                         size_t key_len, uint64_t cost, bool consume,
                         uint64_t asked_ms, int err, sluice_decision *d);
void sluice__guard_forget(void *g, const sluice_limit *limit, const char *key,
                          size_t key_len);

/* ---- The refused-key cache (refusals.c) --------------------------------- */

/*
 * A key refused with a wait is refused locally, for that cost, until the
 * wait ends. 'now_ms' is whatever clock the guard decides with.
 */
typedef struct sluice__refusals sluice__refusals;

int sluice__refusals_new(sluice__refusals **out, size_t cap, uint64_t seed);
void sluice__refusals_free(sluice__refusals *r);
bool sluice__refusals_check(sluice__refusals *r, const sluice_limit *limit,
                            const char *key, size_t len, uint64_t cost,
                            uint64_t now_ms, sluice_decision *out);
void sluice__refusals_note(sluice__refusals *r, const sluice_limit *limit,
                           const char *key, size_t len, uint64_t cost,
                           uint64_t now_ms, const sluice_decision *d);
void sluice__refusals_forget(sluice__refusals *r, sluice_algo algo,
                             const char *key, size_t len);
uint64_t sluice__refusals_hits(sluice__refusals *r);

/* ---- Key names (keys.c) ------------------------------------------------------ */

/* The longest key prefix a server store takes. */
#define SLUICE__PREFIX_MAX 256

/*
 * Writes PREFIX ":{" enc(id) "}:" SUFFIX into 'buf' (of 'cap' bytes), or into
 * a fresh allocation when it does not fit; answers the buffer used (free it
 * when it is not 'buf') and its length in 'len', or NULL when out of memory.
 * See keys.c for enc().
 */
char *sluice__key_build(char *buf, size_t cap, size_t *len, const char *prefix,
                        const char *id, size_t id_len, const char *suffix);

/*
 * Writes 'url' into 'out' (of 'cap' bytes) as it may be shown in a message:
 * the userinfo (user and password: all from the scheme to the last '@')
 * replaced by "***", bytes outside printable ASCII by '?', cut to fit.
 */
void sluice__url_shown(char *out, size_t cap, const char *url);
/* Room for a URL as shown: what is longer is cut, so that the message
   that quotes it still has room for what is wrong. */
#define SLUICE__SHOWN_MAX 100

#endif /* SLUICE_STORE_H */
