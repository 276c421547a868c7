/*
 * sluice.h - the public face of libsluice, a rate-limiting library.
 *
 * A limit is a budget of 'max' units per 'window_ms' milliseconds, counted by
 * one of the algorithms of SLUICE_ALGO_MAP below. Each is one folder,
 * src/algo/FOLDER/, whose FOLDER.c opens with its arithmetic;
 * docs/algorithms.md compares them, and 'sluice demo' shows their trade-off.
 *
 * Limits are counted in a store. The embedded in-process store ("mem://",
 * the default) needs no server. Every store, embedded or on a server, is
 * reached through the same calls, opened by sluice_store_open() and freed
 * by sluice_store_free(): sluice_hit(), sluice_peek() and sluice_reset()
 * for one key and limit; sluice_hit_many() for a batch of keys under one
 * limit; sluice_hit_all(), sluice_peek_all() and sluice_reset_all() for one
 * key under several limits at once; sluice_store_stats_get().
 *
 * This header holds limits, decisions and stores, and includes the rest,
 * so that it alone gives the whole API. Each of the others also stands on
 * its own:
 *
 *   sluice/common.h     the export macro, the version (SLUICE_VERSION and
 *                       sluice_version()), the error codes, the store handle
 *   sluice/clock.h      the clocks: monotonic, wall and virtual
 *   sluice/functions.h  the Functions library (FCALL), for other languages
 *   sluice/queue.h      the queue limiter, the job queue and its workers
 *   sluice/telemetry.h  events and their handlers
 *   sluice/async.h      the non-blocking API, for event loops, and the
 *                       HTTP RateLimit header fields of a decision
 *
 * Conventions (after libgit2 and libuv):
 *   - functions return int: 0 (SLUICE_OK) on success, a negative SLUICE_E*
 *     code on failure; sluice_strerror() names the code and
 *     sluice_last_error() gives the detailed message of the calling thread's
 *     last failure;
 *   - out-parameters come first;
 *   - "over the limit" is a result (decision.allowed == 0), never an error;
 *   - keys are binary-safe (pointer and length) and copied when kept;
 *   - every *_free() accepts NULL.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/common.h"
#include "sluice/clock.h"
#include "sluice/functions.h"
#include "sluice/queue.h"
#include "sluice/telemetry.h"
#include "sluice/async.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Limits -------------------------------------------------------------- */

/*
 * The one list of algorithms: (NAME, value, folder). The enum below is
 * generated from it, and so is everything else that names an algorithm: the
 * library's table (src/algo/FOLDER/ holds the algorithm: its pure C, its Lua
 * mirror and its reference model), the build, the command line and the tests.
 * Values are part of the ABI: a new algorithm takes the next free one.
 */
#define SLUICE_ALGO_MAP(X)                 \
    X(FIXED,           0, fixed)           \
    X(SLIDING_COUNTER, 1, sliding_counter) \
    X(SLIDING_LOG,     2, sliding_log)     \
    X(GCRA,            3, gcra)            \
    X(COMPACT_LOG,     4, compact_log)

typedef enum sluice_algo {
#define SLUICE__ALGO_ENUM(name, val, folder) SLUICE_##name = (val),
    SLUICE_ALGO_MAP(SLUICE__ALGO_ENUM)
#undef SLUICE__ALGO_ENUM
} sluice_algo;

/* How many algorithms this library has: they are 0 .. count - 1. */
SLUICE_EXTERN unsigned sluice_algo_count(void);

/*
 * Documented bounds. Every count stays an exact integer in a double (so Lua
 * scripts on a server agree with the C code bit for bit), and a timestamp plus
 * a window can never overflow.
 *
 *   1 <= max       <= SLUICE_MAX_MAX          (2^53 - 1)
 *   1 <= window_ms <= SLUICE_WINDOW_MAX_MS    (2^40 ms, about 34.8 years)
 *   1 <= cost      <= max                     (else SLUICE_ECOST)
 *   sliding-counter and gcra also need max * window_ms <= 2^53;
 *   gcra takes 0 <= burst <= max (0 means max), and cost <= burst;
 *   compact-log needs max <= SLUICE_COMPACT_LOG_MAX (2^14: a request then
 *   writes at most 128 KiB, well inside a server's 10 ms).
 */
#define SLUICE_MAX_MAX ((uint64_t)9007199254740991ULL)
#define SLUICE_WINDOW_MAX_MS ((uint64_t)1 << 40)
#define SLUICE_COUNTER_PRODUCT_MAX ((uint64_t)1 << 53)
#define SLUICE_COMPACT_LOG_MAX ((uint64_t)1 << 14)
/* A clock must read at most this (2^53 ms, about 285,000 years). */
#define SLUICE_NOW_MAX_MS ((uint64_t)1 << 53)

typedef struct sluice_limit {
    sluice_algo algo;
    uint64_t max;       /* units admitted per window */
    uint64_t window_ms; /* window length in milliseconds */
    /* Room for algorithms with a burst: 0 means the algorithm's default.
       gcra takes 1..max (default max: the most units admitted at once; a
       cost above it is SLUICE_ECOST). The others have no burst and take
       only 0 (anything else is SLUICE_EINVAL). */
    uint64_t burst;
    /* Room for fields to come; must be 0 (see "How sluice_limit and
       sluice_decision grow" below). */
    uint64_t reserved[4];
} sluice_limit;

/* A limit as an expression: SLUICE_LIMIT(SLUICE_FIXED, 10, 1000). */
#define SLUICE_LIMIT(algo_, max_, window_ms_) \
    ((sluice_limit){.algo = (algo_), .max = (max_), .window_ms = (window_ms_)})

/* Checks 'limit' against the bounds above; SLUICE_ERANGE/EINVAL if off. */
SLUICE_EXTERN int sluice_limit_check(const sluice_limit *limit);

/* The algorithm's name, e.g. "sliding-log"; NULL for an unknown value. */
SLUICE_EXTERN const char *sluice_algo_name(sluice_algo algo);
/* Parses a name from sluice_algo_name(); SLUICE_EINVAL if unknown. */
SLUICE_EXTERN int sluice_algo_parse(sluice_algo *out, const char *name);

/*
 * Parses a duration: a plain number of milliseconds ("250"), or one or more
 * parts NUNIT with units in descending order, each at most once, from
 * d (day), h, m, s, ms: "250ms", "1s", "1m30s", "1h30m", "2s500ms", "1d".
 * No signs, spaces or fractions. The result must be 1 ..
 * SLUICE_WINDOW_MAX_MS: SLUICE_ERANGE if not (or on overflow), SLUICE_EINVAL
 * for any other malformed text; the message names the text.
 */
SLUICE_EXTERN int sluice_duration_parse(uint64_t *out_ms, const char *text);

/* ---- Decisions ------------------------------------------------------------ */

/* Who decided: the store, or a failure policy standing in for it. */
typedef enum sluice_fallback {
    SLUICE_ANSWERED = 0,      /* the store decided */
    SLUICE_FELL_OPEN = 1,     /* the store failed; admitted by policy */
    SLUICE_FELL_CLOSED = 2    /* the store failed; refused by policy */
} sluice_fallback;

typedef struct sluice_decision {
    int allowed;             /* 1 admitted, 0 refused */
    uint64_t limit;          /* the limit's max */
    uint64_t remaining;      /* budget left after this decision, >= 0 */
    uint64_t retry_after_ms; /* 0 if allowed; else the least wait after which
                                the same request is admitted if nothing else
                                arrives */
    uint64_t reset_after_ms; /* wait until the key's budget is whole again */
    /* SLUICE_ANSWERED normally; with a fail-open or fail-closed policy, which
       of them stood in for a store that could not answer (see on_error). */
    sluice_fallback fallback;
    /* Room for fields to come: the library writes 0 (see below). */
    uint64_t reserved[2];
} sluice_decision;

/*
 * How sluice_limit and sluice_decision grow without breaking the ABI.
 *
 * Both are small values that callers declare, copy and keep in arrays
 * (sluice_hit_all()'s limits, each sluice_request's decision, its 'each'),
 * and a decision is an out-parameter its caller never initialises. A
 * version field, sluice_store_opts's way, would make every caller set one
 * on every decision, and the library would have to step through arrays by
 * a size learnt at run time and never copy a caller's limit whole. So
 * their size is fixed for a major version instead (64 bytes each on LP64
 * ABIs), with room kept at the end, and tests/unit/test_abi.c pins the
 * size and every field's offset:
 *
 *   - A new field takes the next reserved slot (8 bytes or less), under a
 *     name of its own, and its 0 means what the library did before it, as
 *     burst's 0 means the algorithm's default. Existing code, which zeroes
 *     its limits, is unchanged in source and in behaviour.
 *   - A limit's reserved slots must be 0: SLUICE_LIMIT(), "= {0}", memset
 *     and designated initialisers all zero them. A limit with one set is
 *     SLUICE_EINVAL, so a program built against a later header, setting a
 *     field this library does not know, fails loudly instead of being half
 *     obeyed.
 *   - The library writes 0 into a decision's reserved slots, so a field
 *     added later reads 0 from an older library; a program built against
 *     an earlier header never reads them.
 *
 * When the slots run out, what grows further is a new struct with calls
 * of its own; the old ones stay. A struct that a caller fills once and
 * passes by pointer alone (sluice_store_opts, sluice_worker_opts) grows by
 * its version field instead, with its _INIT macro.
 */

/* ---- Stores --------------------------------------------------------------- */

/* The handle, sluice_store, is in sluice/common.h. */

/*
 * Options for sluice_store_open(). Initialise with SLUICE_STORE_OPTS_INIT so
 * that fields added later get their defaults. 'version' says which fields
 * the caller knows: the library takes every version from 1 to
 * SLUICE_STORE_OPTS_VERSION, reads only that version's fields, and gives
 * the later ones their defaults.
 */
#define SLUICE_STORE_OPTS_VERSION 4

/* What a server store's call answers when the server cannot. */
typedef enum sluice_on_error {
    SLUICE_ON_ERROR_FAIL = 0,   /* the error (SLUICE_ECONN, _ETIMEDOUT) */
    SLUICE_ON_ERROR_OPEN = 1,   /* admit */
    SLUICE_ON_ERROR_CLOSED = 2  /* refuse */
} sluice_on_error;

/* How a server store decides (engine): with the server's native module
   (sluice.so, docs/module.md) or with the Lua scripts. */
typedef enum sluice_engine {
    SLUICE_ENGINE_AUTO = 0,   /* the module for the algorithms a server's
                                 module decides, else Lua */
    SLUICE_ENGINE_MODULE = 1, /* the module; a server without it, or
                                 without the algorithm, answers
                                 SLUICE_ENOTSUP */
    SLUICE_ENGINE_LUA = 2     /* the scripts; never a SLUICE.* command */
} sluice_engine;

/* Which algorithms' refusals a server store remembers (refused_cache). */
typedef enum sluice_refused_cache {
    SLUICE_REFUSED_CACHE_DEFAULT = 0, /* each algorithm's own default */
    SLUICE_REFUSED_CACHE_OFF = 1,     /* none */
    SLUICE_REFUSED_CACHE_ALL = 2      /* every algorithm */
} sluice_refused_cache;

typedef struct sluice_store_opts {
    unsigned int version;
    /* The clock; NULL means the store's default (sluice/clock.h). */
    sluice_clock_ms_fn clock_ms;
    void *clock_payload;
    /*
     * Embedded store: the most keys held at once; 0 means a million (about
     * 100 to 200 bytes each), SLUICE_NO_KEY_CAP none at all. When full,
     * keys whose budget is whole again are dropped first; if none can be, a
     * hit on a new key fails with SLUICE_EFULL (live state is never evicted,
     * since that would silently over-admit).
     */
    size_t max_keys;

    /* ---- Server stores (valkey://, redis://); each may also be set in
       the URL's query, which wins: ?timeout=MS&connect_timeout=MS&... ---- */
    /* Connect and per-command timeouts; 0 means 1000 ms and 500 ms. */
    uint64_t connect_timeout_ms;
    uint64_t command_timeout_ms;
    /* Key prefix (no braces); NULL means "sluice". URL: prefix=. */
    const char *key_prefix;
    /* The queue keys' prefix; NULL means "emq". URL: emq_prefix=. */
    const char *emq_prefix;
    /* 0: scripts read the server's clock (TIME), so skewed workers agree.
       1: scripts use this side's clock_ms, the limiters' and the job
       queue's (delays, leases, back-offs). URL: clock=server|caller. */
    int caller_clock;
    /* Connections shared by all threads; 0 means 4. URL: pool=N. */
    unsigned int pool_size;
    /* What a call answers when the server cannot be reached or does not
       answer in time (SLUICE_ECONN, SLUICE_ETIMEDOUT): SLUICE_ON_ERROR_FAIL
       (that error, the default), _OPEN (admit) or _CLOSED (refuse, with
       retry_after_ms = the command timeout). The decision's 'fallback'
       says which stood in, and the stats count them. Replies that are
       wrong (SLUICE_EPROTO) and a misconfigured store (SLUICE_ECONFIG: a
       cluster node's MOVED or ASK on a valkey:// store, a redirect loop)
       are always errors. URL: on_error=error|open|closed. */
    sluice_on_error on_error;
    /* Server stores: once the server refuses a key with a wait of N ms,
       refuse the same request (same key, limit and cost) in this process
       for those N ms without asking the server, so refused traffic costs
       it nothing. Requests of another cost, and any after one of them was
       admitted here, ask the server.
       SLUICE_REFUSED_CACHE_DEFAULT (the algorithms whose refusals are
       certain to stand until their wait ends, whatever else arrives: as
       each one's table in src/algo/NAME/NAME.c says, in
       refused_cache_default), _OFF, or _ALL (every algorithm). A locally
       refused decision repeats the server's 'remaining' of that refusal,
       and does not see a reset made by another process before the wait
       ends. URL: refused_cache=default|off|all. */
    sluice_refused_cache refused_cache;

    /* ---- Since version 2 ---- */
    /* Server stores: the most one reply may hold, in bytes of strings (and
       of what is buffered before it is whole) and in array elements; 0
       means 64 MB and 1,048,576. A reply over either is refused before it
       is read whole: SLUICE_EPROTO, and the connection is closed. A job's
       payload must fit too (sluice_queue_add() checks). URL:
       max_reply_bytes=N, max_reply_elements=N. */
    uint64_t max_reply_bytes;
    uint64_t max_reply_elements;

    /* ---- Since version 3 ---- */
    /* Server stores: each server is asked at connect (every connection,
       again after a reconnect; each cluster node on its own) whether it
       has the native module of this library's version, and which
       algorithms it decides (SLUICE.VERSION). SLUICE_ENGINE_AUTO (the
       default) decides an algorithm with the module where a server's
       module decides it and with its script elsewhere, silently;
       SLUICE_ENGINE_MODULE fails with SLUICE_ENOTSUP on a server without
       it or without the algorithm; SLUICE_ENGINE_LUA never sends a
       SLUICE.* command. Decisions are
       the same either way. sluice_hit_all() is a script on every engine.
       URL: engine=auto|module|lua. */
    sluice_engine engine;

    /* ---- Since version 4 ---- */
    /* TLS (valkeys://, rediss:// and their +cluster and +sentinel forms;
       any of these on another URL is SLUICE_EINVAL, so a missing 's' never
       sends in plaintext what was meant to be encrypted). The CA that
       signs the server's certificate: a PEM file, or a directory made by
       c_rehash; NULL for both, the system's store. URL: tls_ca=FILE,
       tls_ca_dir=DIR. */
    const char *tls_ca_file;
    const char *tls_ca_dir;
    /* A client certificate (PEM, its chain after it) and its key, for a
       server that asks for one (tls-auth-clients). URL: tls_cert=FILE,
       tls_key=FILE. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /* The name the server's certificate must hold, and the SNI sent;
       NULL means each node's host (an address is checked as an address).
       URL: tls_server_name=NAME. */
    const char *tls_server_name;
    /* 1: verify nothing -- any certificate, any name, so anyone on the
       path can read and change every call. For a test bench only. URL:
       tls_insecure=1. */
    int tls_insecure;
    /* Sentinel (valkey+sentinel://): the sentinels' own user and
       password, when they have one (the URL's user:password@ is the
       master's). URL: sentinel_user=, sentinel_password= (masked in
       every message). */
    const char *sentinel_user;
    const char *sentinel_password;
} sluice_store_opts;

#define SLUICE_STORE_OPTS_INIT {.version = SLUICE_STORE_OPTS_VERSION}

/* max_keys: no cap on the embedded store's keys. */
#define SLUICE_NO_KEY_CAP ((size_t)-1)

/*
 * Opens a store. 'url' selects it: NULL, "" or "mem://" is the embedded store.
 * 'opts' may be NULL for the defaults.
 */
SLUICE_EXTERN int sluice_store_open(sluice_store **out, const char *url,
                      const sluice_store_opts *opts);
SLUICE_EXTERN void sluice_store_free(sluice_store *store);
/*
 * The names of the options a server store's URL takes in its query, as a
 * comma-separated list ("timeout, connect_timeout, ..."); each is also a
 * field of sluice_store_opts, documented there.
 */
SLUICE_EXTERN const char *sluice_store_url_options(void);
/* The store's kind, e.g. "mem". */
SLUICE_EXTERN const char *sluice_store_kind(const sluice_store *store);

/*
 * Decides one request of 'cost' units against 'limit' for 'key', and counts
 * it if admitted. A refused request changes nothing.
 *
 * State is per (algorithm, key). A key's max may change between calls (the
 * count carries over, as when a cap is raised at run time); its window should
 * not: the sliding log trims by the window of each call, the sliding counter
 * starts over when its window changes, and a fixed window keeps the expiry it
 * was armed with. Use distinct keys for limits with distinct windows.
 *
 * On a server store, a call that times out may still have been counted by
 * the server (the request reached it; the answer did not come back in time).
 */
SLUICE_EXTERN int sluice_hit(sluice_decision *out, sluice_store *store,
               const sluice_limit *limit, const char *key, size_t key_len,
               uint64_t cost);

/* Exactly what sluice_hit() would answer now, without counting anything. */
SLUICE_EXTERN int sluice_peek(sluice_decision *out, sluice_store *store,
                const sluice_limit *limit, const char *key, size_t key_len,
                uint64_t cost);

/* One request of a batch: 'key', 'key_len' and 'cost' in; 'err' and
   'decision' out. */
typedef struct sluice_request {
    const char *key;
    size_t key_len;
    uint64_t cost;
    int err;                  /* SLUICE_OK, or why this one has no decision */
    sluice_decision decision; /* its decision when 'err' is SLUICE_OK */
} sluice_request;

/*
 * Decides 'n' requests against one 'limit', as sluice_hit() would one after
 * the other in array order, and answers each in its own 'err' and
 * 'decision'. Answers SLUICE_OK when every request has a decision, else the
 * error of the first one (in array order) that has none; sluice_last_error()
 * then tells of the last one that failed. A bad request (a cost above max, a
 * NULL key, a key holding a foreign value on the server) fails alone.
 *
 * On a server store the batch costs one round trip and one script call for
 * all the requests (512 at most per call; in a cluster, one call per slot
 * among their keys, all written to their nodes before any reply is read),
 * so a thread with many decisions to make at once (a dequeue loop, a
 * fan-out, a gateway's batch of requests) makes them at the server's pace,
 * not the network's. Each request is decided atomically; the batch as a whole is
 * not a transaction. The server's clock is read once per call. The refused
 * cache and the failure policy apply to each request as to a sluice_hit();
 * telemetry fires once per refusal.
 */
SLUICE_EXTERN int sluice_hit_many(sluice_store *store, const sluice_limit *limit,
                    sluice_request *reqs, size_t n);

/*
 * Forgets 'key' for 'limit's algorithm, so its budget is whole again.
 * Returns 1 when it removed a count, 0 when nothing was there (a key never
 * hit, already reset, or whose budget was whole again: a server's key that
 * expired, an embedded entry gone idle), or a negative SLUICE_E* code. Only
 * the algorithm and the key matter: state is per (key, algorithm), so the
 * answer is the same under any max and window (each must still be valid).
 */
SLUICE_EXTERN int sluice_reset(sluice_store *store, const sluice_limit *limit,
                 const char *key, size_t key_len);

/* ---- All or nothing over several limits ------------------------------------ */

/* The most limits one sluice_hit_all() call takes. */
#define SLUICE_HIT_ALL_MAX 16

/*
 * Decides one request of 'cost' units for 'key' against every one of
 * limits[0..n) (1 <= n <= SLUICE_HIT_ALL_MAX) at once, e.g. 10 per second
 * AND 1000 per hour: it is admitted only if every limit admits it, and then
 * counted in every limit; refused, it is counted in none. The whole is
 * atomic: no other call on the same key sees it half done (the embedded
 * store holds every limit's lock at once; a server store decides it in one
 * script call, all of the key's limits in one cluster slot).
 *
 * 'out' is the combined decision:
 *   allowed         1 iff every limit admits;
 *   retry_after_ms  0 if allowed; else the largest wait among the refusing
 *                   limits (after it, each of them admits, if nothing else
 *                   arrives);
 *   remaining       the least budget left among the limits: after this
 *                   request if allowed, as it is now (nothing counted) if
 *                   refused;
 *   reset_after_ms  the largest among the limits;
 *   limit           the max of the limit that decided: if refused, the
 *                   refusing limit with the largest wait; if allowed, the
 *                   limit with the least remaining (the first, on a tie);
 *   fallback        as for sluice_hit() (a failure policy stood in).
 * 'each' (NULL, or n decisions) gets every limit's own answer: what
 * sluice_hit() on that limit alone answers when all admitted, and what
 * sluice_peek() answers (nothing counted) when the whole was refused.
 *
 * State is per (key, algorithm, window), and apart from sluice_hit()'s: a
 * limit in sluice_hit_all() never shares its count with sluice_hit() or
 * sluice_peek() on the same key and limit (on a server its key is
 * PREFIX:{key}:ALGO:WINDOWms, where sluice_hit()'s is PREFIX:{key}:ALGO), so
 * a key's limits must be checked through the same call every time. Two
 * limits of the same algorithm and window in one call would share one
 * state: SLUICE_EINVAL. So is n = 0 or n > SLUICE_HIT_ALL_MAX, and any
 * invalid limit; a cost above any limit's max is SLUICE_ECOST. An error
 * counts nothing.
 *
 * On a server store, sluice_hit_all() neither reads nor fills the refused
 * cache (refused_cache): every call asks the server. When the server cannot
 * answer, the failure policy (on_error) answers for the whole, as for
 * sluice_hit(): admitted or refused, with 'fallback' saying so. The embedded
 * store makes room in every limit (a log that must grow) before it counts in
 * any, so an SLUICE_ENOMEM counts nowhere either. It copies an id of more
 * than 248 bytes to the heap for the call, which may fail too
 * (SLUICE_ENOMEM, nothing done), even for sluice_reset_all().
 */
SLUICE_EXTERN int sluice_hit_all(sluice_decision *out, sluice_decision *each,
                                 sluice_store *store,
                                 const sluice_limit *limits, size_t n,
                                 const char *key, size_t key_len,
                                 uint64_t cost);

/* Exactly what sluice_hit_all() would answer now, without counting. */
SLUICE_EXTERN int sluice_peek_all(sluice_decision *out, sluice_decision *each,
                                  sluice_store *store,
                                  const sluice_limit *limits, size_t n,
                                  const char *key, size_t key_len,
                                  uint64_t cost);

/* Forgets what sluice_hit_all() counted for 'key' under limits[0..n). */
SLUICE_EXTERN int sluice_reset_all(sluice_store *store,
                                   const sluice_limit *limits, size_t n,
                                   const char *key, size_t key_len);

typedef struct sluice_store_stats {
    uint64_t keys;       /* keys held now */
    uint64_t bytes;      /* bytes of state held (embedded store) */
    uint64_t expired;    /* keys dropped because their budget was whole */
    uint64_t full;       /* hits refused with SLUICE_EFULL */
    uint64_t errors;     /* calls the server could not answer */
    uint64_t fell_open;  /* of those, admitted by the fail-open policy */
    uint64_t fell_closed;/* of those, refused by the fail-closed policy */
    uint64_t redirects;  /* cluster MOVED and ASK replies followed */
    uint64_t local_refusals; /* refused here, without asking the server */
    uint64_t module_calls; /* server calls the native module answered
                              (SLUICE.*); 0 while every server runs Lua */
} sluice_store_stats;

SLUICE_EXTERN int sluice_store_stats_get(sluice_store_stats *out, sluice_store *store);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
