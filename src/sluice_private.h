/*
 * sluice_private.h - what the library's files share and callers never see.
 *
 * Names here are 'sluice__' (internal, not static); static names in .c files
 * carry no prefix.
 */
#ifndef SLUICE_PRIVATE_H
#define SLUICE_PRIVATE_H

#include "sluice.h"

#include <stdatomic.h>
#include <stdbool.h>

/* ---- Errors ---------------------------------------------------------------- */

/*
 * Records a printf-style detail for sluice_last_error() in this thread and
 * returns 'err', so a failure reads: return sluice__error(SLUICE_ECOST, ...).
 */
int sluice__error(int err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * Copies caller options of any version from 1 to 'current' into 'dst', which
 * holds the defaults: 'sizes[v]' is how many leading bytes version v has, so
 * an older caller's struct is never read past its end and the fields it does
 * not know keep their defaults. 'what' names the options in the message.
 */
int sluice__opts_copy(void *dst, const void *src, unsigned version,
                      const size_t *sizes, unsigned current, const char *what);

/* ---- Overflow-checked arithmetic (checked before adding, as Valkey does) --- */

static inline bool sluice__add_overflows(uint64_t a, uint64_t b, uint64_t *sum)
{
    if (a > UINT64_MAX - b)
        return true;
    *sum = a + b;
    return false;
}

static inline bool sluice__mul_overflows(uint64_t a, uint64_t b, uint64_t *prod)
{
    if (a != 0 && b > UINT64_MAX / a)
        return true;
    *prod = a * b;
    return false;
}

/* ---- Telemetry ------------------------------------------------------------- */

extern _Atomic size_t sluice__telemetry_attached;

/* True when some handler is attached: one relaxed load, or a constant 0. */
#ifdef SLUICE_NO_TELEMETRY
#define sluice__telemetry_active() 0
#else
#define sluice__telemetry_active() \
    (atomic_load_explicit(&sluice__telemetry_attached, memory_order_relaxed) != 0)
#endif

/* ---- Algorithms ------------------------------------------------------------ */

/* How many algorithms there are (SLUICE_ALGO_MAP), as a constant. */
#define SLUICE__ALGO_PLUS_ONE(name, val, folder) +1
enum { SLUICE__ALGO_N = 0 SLUICE_ALGO_MAP(SLUICE__ALGO_PLUS_ONE) };

/*
 * One algorithm, as a table of pure functions: no I/O, no clock, no locks.
 * 'now_ms' is a parameter and must not decrease from one call to the next on
 * the same state (stores clamp it). The state is 'state_size' bytes that the
 * store owns; 'init' makes it fresh and 'release' frees what it points to.
 *
 * decide()   answers the request of 'cost' at 'now_ms' into 'out' and, when
 *            'consume' is true and it is admitted, counts it. 'limit' and
 *            'cost' have been checked (1 <= cost <= max). Returns 0 or a
 *            negative SLUICE_E* (only SLUICE_ENOMEM for the log).
 * idle_at()  the time from which the state is equivalent to a fresh one, so a
 *            store may drop it; 0 when it is fresh already. Asked right
 *            after decide() with the same limit.
 * bytes()    memory the state holds beyond 'state_size', for stats.
 *
 * To add an algorithm: a new src/algo_NAME.c with its table, its mirror
 * src/lua/NAME.lua, an entry in sluice_algo, and a line in sluice__algos
 * (src/algo.c).
 */
typedef struct sluice__algo {
    const char *name;
    /* The same algorithm as a Lua script for server stores, with the ARGV
       and reply every algorithm script shares (see src/lua/). */
    const char *lua;
    size_t state_size;
    void (*init)(void *state);
    int (*decide)(void *state, const sluice_limit *limit, uint64_t now_ms,
                  uint64_t cost, bool consume, sluice_decision *out);
    uint64_t (*idle_at)(const void *state, const sluice_limit *limit);
    size_t (*bytes)(const void *state);
    void (*release)(void *state);
} sluice__algo;

extern const sluice__algo sluice__algo_fixed;
extern const sluice__algo sluice__algo_counter;
extern const sluice__algo sluice__algo_log;

/* The table, indexed by sluice_algo. */
extern const sluice__algo *const sluice__algos[SLUICE__ALGO_N];

/*
 * Checks a request before any store sees it: a valid limit, 1 <= cost <= max.
 * Sets sluice_last_error() on failure.
 */
int sluice__request_check(const sluice_limit *limit, uint64_t cost);

/* ---- Parking (src/park.c) ------------------------------------------------- */

/*
 * Sleeps while '*word' reads 'seen' (or until a spurious wake-up: callers
 * loop). sluice__unpark() wakes a thread parked on 'word' using its address
 * alone, so the word's owner may have seen the change and be gone by then:
 * set the word first, then unpark.
 */
void sluice__park(_Atomic uint32_t *word, uint32_t seen);
void sluice__unpark(_Atomic uint32_t *word);

/* ---- Stores ---------------------------------------------------------------- */

/*
 * A store, as a small table of functions (after hiredis' transports). The
 * generic sluice_hit()/peek()/reset() check their arguments, then call here.
 * 'impl' is the store's own data.
 */
typedef struct sluice__store_ops {
    const char *kind;
    int (*decide)(void *impl, const sluice_limit *limit, const char *key,
                  size_t key_len, uint64_t cost, bool consume,
                  sluice_decision *out);
    int (*reset)(void *impl, const sluice_limit *limit, const char *key,
                 size_t key_len);
    /* Decides reqs[i] for each i in 'todo' (ascending), whose arguments are
       checked; sets each one's 'err' and 'decision'. NULL: one decide()
       each. */
    int (*decide_many)(void *impl, const sluice_limit *limit,
                       sluice_request *reqs, const size_t *todo, size_t n);

    int (*stats)(void *impl, sluice_store_stats *out);
    void (*free)(void *impl);
    /* The queue limiter (src/lua/emq_*.lua); NULL where not supported. */
    int (*emq_ttl)(void *impl, const char *queue, size_t queue_len,
                   uint64_t max, uint64_t *wait_ms);
    int (*emq_incr)(void *impl, const char *queue, size_t queue_len,
                    uint64_t window_ms, uint64_t *count, uint64_t *ttl_ms);
} sluice__store_ops;

struct sluice_store {
    const sluice__store_ops *ops;
    void *impl;
};

/*
 * Opens the embedded store. 'opts' has been filled with defaults already.
 */
int sluice__store_mem_open(void **impl, const sluice__store_ops **ops,
                           const sluice_store_opts *opts);

/*
 * Opens a Valkey/Redis store from 'url' ("valkey://" or "redis://"); the
 * URL's query overrides 'opts'.
 */
int sluice__store_valkey_open(void **impl, const sluice__store_ops **ops,
                              const sluice_store_opts *opts, const char *url);

/*
 * Writes PREFIX ":{" enc(id) "}:" SUFFIX into 'buf' (of 'cap' bytes), or into
 * a fresh allocation when it does not fit; answers the buffer used (free it
 * when it is not 'buf') and its length in 'len', or NULL when out of memory.
 * See src/store_valkey.c for enc().
 */
char *sluice__key_build(char *buf, size_t cap, size_t *len, const char *prefix,
                        const char *id, size_t id_len, const char *suffix);

/*
 * Writes 'url' into 'out' (of 'cap' bytes) as it may be shown in a message:
 * the password replaced by "***", bytes outside printable ASCII by '?', cut
 * to fit.
 */
void sluice__url_shown(char *out, size_t cap, const char *url);

/* A cluster's slot count, and the slot of a key (src/slot.c). */
#define SLUICE__SLOTS 16384u
unsigned sluice__key_slot(const char *key, size_t len);

/* ---- Server stores, for the queue (src/store_valkey.c) ---------------------- */

/* The scripts beyond the algorithms', by id (algorithms come first). */
enum {
    SLUICE__SCRIPT_EMQ_TTL = SLUICE__ALGO_N,
    SLUICE__SCRIPT_EMQ_INCR,
    SLUICE__SCRIPT_QUEUE_ADD,
    SLUICE__SCRIPT_QUEUE_TAKE,
    SLUICE__SCRIPT_QUEUE_DONE,
    SLUICE__SCRIPT_QUEUE_ADMIN,
    SLUICE__SCRIPT_COUNT
};

struct redisReply;
struct redisContext;

/*
 * Runs script 'script' on a server store: 'nkeys' keys (one slot), then the
 * other arguments. Error replies are errors; the reply is the caller's
 * (freeReplyObject). SLUICE_ENOTSUP on the embedded store.
 */
int sluice__server_eval(sluice_store *store, int script, int nkeys, int argc,
                        const char **args, const size_t *lens,
                        struct redisReply **out);
/* Runs one command whose first key is 'key' on the node that serves it. */
int sluice__server_command(sluice_store *store, const char *key,
                           size_t key_len, int argc, const char **argv,
                           const size_t *lens, struct redisReply **out);
/*
 * A server store's memory of refused keys (src/refusals.c): a key refused
 * with a wait is refused locally, for that cost and above, until the wait
 * ends. 'now_ms' is whatever clock the store decides with.
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

/* The longest key prefix a server store takes. */
#define SLUICE__PREFIX_MAX 256
/* The queue keys' prefix ("emq"), or NULL for the embedded store. */
const char *sluice__server_emq_prefix(sluice_store *store);
/* A new connection of its own (for SUBSCRIBE), ready and authenticated. */
int sluice__server_connect(sluice_store *store, struct redisContext **out);

/* The Lua scripts, embedded at build time from src/lua/ (NUL-terminated). */
extern const char sluice__lua_fixed[];
extern const char sluice__lua_sliding_counter[];
extern const char sluice__lua_sliding_log[];
extern const char sluice__lua_emq_ttl[];
extern const char sluice__lua_emq_incr[];
extern const char sluice__lua_queue_add[];
extern const char sluice__lua_queue_take[];
extern const char sluice__lua_queue_done[];
extern const char sluice__lua_queue_admin[];

#endif /* SLUICE_PRIVATE_H */
