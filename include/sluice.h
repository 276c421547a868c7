/*
 * sluice.h - the public face of libsluice, a rate-limiting library.
 *
 * A limit is a budget of 'max' units per 'window_ms' milliseconds, counted by
 * one of the algorithms of SLUICE_ALGO_MAP below (see README.md, and the
 * arithmetic at the top of each src/algo/NAME/NAME.c):
 *
 *   fixed            one counter per key, armed on the first admitted request
 *                    and expiring 'window_ms' later; bursts up to 2 x max
 *                    across the seam between two windows.
 *   sliding-counter  the current and previous aligned window's counts, the
 *                    previous weighted by how much of it is still in view.
 *   sliding-log      the exact list of admitted requests in the last window.
 *   gcra             a token bucket kept as one theoretical arrival time:
 *                    units spaced window_ms / max apart, with bursts of up
 *                    to 'burst' (default max).
 *   compact-log      the same exact decisions as sliding-log, kept as 8 bytes
 *                    per admitted unit (max <= 2^20).
 *
 * Limits are counted in a store. The embedded in-process store ("mem://",
 * the default) needs no server. Every store is reached through the same four
 * calls: sluice_hit(), sluice_peek(), sluice_reset() and sluice_store_free(),
 * and sluice_hit_many() for a batch.
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

#ifdef __cplusplus
extern "C" {
#endif

/* Public functions are exported from the shared library; nothing else is. */
#if defined(__GNUC__)
#define SLUICE_EXTERN __attribute__((visibility("default")))
#else
#define SLUICE_EXTERN
#endif

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0
#define SLUICE_VERSION "0.1.0"

/* ---- Errors -------------------------------------------------------------- */

/*
 * The one list of error codes. Each entry is (NAME, value, message); the enum,
 * sluice_strerror() and sluice_err_name() are all generated from it.
 */
#define SLUICE_ERRNO_MAP(X)                                                   \
    X(EINVAL,   -1, "invalid argument")                                       \
    X(ECOST,    -2, "cost exceeds the limit's max (or burst): never admitted") \
    X(ERANGE,   -3, "number out of range")                                    \
    X(ENOMEM,   -4, "out of memory")                                          \
    X(EFULL,    -5, "store is full: key cap reached")                         \
    X(EURL,     -6, "invalid or unsupported store URL")                       \
    X(ECONN,    -7, "cannot reach the store's server")                        \
    X(ETIMEDOUT,-8, "the store's server did not answer in time")              \
    X(EPROTO,   -9, "unexpected reply from the store's server")               \
    X(ENOTSUP, -10, "operation not supported by this store")                 \
    X(ELEASE,  -11, "the job's lease is no longer this worker's")            \
    X(ECONFIG, -12, "store misconfigured: its URL or its servers, no outage") \
    X(EAUTH,   -13, "the server refused us: credentials or TLS verification")

typedef enum sluice_errno {
    SLUICE_OK = 0,
#define SLUICE__ERRNO_ENUM(name, val, msg) SLUICE_##name = (val),
    SLUICE_ERRNO_MAP(SLUICE__ERRNO_ENUM)
#undef SLUICE__ERRNO_ENUM
    SLUICE__ERRNO_LAST = -14
} sluice_errno;

/* A static sentence for 'err' ("unknown error" for a code not in the list). */
SLUICE_EXTERN const char *sluice_strerror(int err);
/* The code's name without the prefix, e.g. "ECOST"; "UNKNOWN" if not listed. */
SLUICE_EXTERN const char *sluice_err_name(int err);
/*
 * The detailed message of the calling thread's most recent failed call, e.g.
 * "cost 12 exceeds max 10". Valid until the thread's next sluice call; never
 * NULL (empty when no call has failed in this thread).
 */
SLUICE_EXTERN const char *sluice_last_error(void);

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
 * Parses a duration: "250ms", "1s", "1m", "1h", or a plain number of
 * milliseconds. The result must be 1 .. SLUICE_WINDOW_MAX_MS.
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
} sluice_decision;

/* ---- Clocks --------------------------------------------------------------- */

/*
 * A clock answers milliseconds since its zero. Sliding-counter windows are
 * aligned to multiples of window_ms from that zero.
 *
 * The embedded store's default is the monotonic clock (CLOCK_MONOTONIC): it
 * never steps, so setting the wall clock changes no decision. On x86-64
 * Linux, sluice_clock_monotonic_ms() answers from a per-thread cache read
 * with the TSC while the clock cannot have reached its next millisecond:
 * the same answer as clock_gettime(), for less (environment variable
 * SLUICE_CLOCK_NO_TSC=1 turns the cache off). The wall clock
 * (CLOCK_REALTIME, Unix epoch) is there to pass when windows must line up
 * with it; should it step back, each key keeps its own latest time, and a
 * decision made then adds the step to its waits, so retry_after_ms and
 * reset_after_ms hold on the clock the caller reads. A server store's
 * scripts read the server's clock, or with clock=caller the wall clock by
 * default, which every process shares.
 */
typedef uint64_t (*sluice_clock_ms_fn)(void *payload);

SLUICE_EXTERN uint64_t sluice_clock_monotonic_ms(void *payload);
SLUICE_EXTERN uint64_t sluice_clock_realtime_ms(void *payload);

/*
 * A virtual clock for tests and replays: time moves only when told to. Safe
 * to read and move from many threads.
 */
typedef struct sluice_vclock sluice_vclock;

SLUICE_EXTERN int sluice_vclock_new(sluice_vclock **out, uint64_t start_ms);
SLUICE_EXTERN void sluice_vclock_free(sluice_vclock *clock);
SLUICE_EXTERN void sluice_vclock_set(sluice_vclock *clock, uint64_t now_ms);
SLUICE_EXTERN void sluice_vclock_advance(sluice_vclock *clock, uint64_t delta_ms);
/* Suitable as a store's clock, with the vclock as payload. */
SLUICE_EXTERN uint64_t sluice_vclock_now_ms(void *vclock);

/* ---- Stores --------------------------------------------------------------- */

/*
 * A store holds the budgets. One store may be shared by any number of
 * threads: every call on it is thread-safe (the embedded store locks per
 * shard of keys; a server store shares its connections). Free it once, after
 * the last call on it has returned.
 */
typedef struct sluice_store sluice_store;

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
   (sluice.so, README "Native module") or with the Lua scripts. */
typedef enum sluice_engine {
    SLUICE_ENGINE_AUTO = 0,   /* the module where a server has it, else Lua */
    SLUICE_ENGINE_MODULE = 1, /* the module; a server without it answers
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
    /* The clock; NULL means the store's default (see Clocks). */
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
       certain to stand: fixed and sliding-log), _OFF, or _ALL (the
       sliding counter too). A locally refused decision repeats the
       server's 'remaining' of that refusal, and does not see a reset made
       by another process before the wait ends. URL:
       refused_cache=default|off|all. */
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
       has the native module of this library's version (SLUICE.VERSION).
       SLUICE_ENGINE_AUTO (the default) decides with the module where a
       server has it and with the scripts elsewhere, silently;
       SLUICE_ENGINE_MODULE fails with SLUICE_ENOTSUP on a server without
       it; SLUICE_ENGINE_LUA never sends a SLUICE.* command. Decisions are
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
 * The Functions library (Redis 7+ / Valkey; README "Functions"): the same
 * algorithms as FCALL sluice_hit / sluice_peek / sluice_reset /
 * sluice_version, for clients of any language. _text() is the library (NUL
 * after '*len' bytes), _version() what FCALL sluice_version answers, and
 * _load() loads it with FUNCTION LOAD REPLACE into a server store's
 * server, or into every master of a cluster store, and says into how many
 * in '*servers' (may be NULL): SLUICE_ENOTSUP for a server older than
 * Redis 7 (or the embedded store); on a failure, the servers counted before
 * it have it.
 */
SLUICE_EXTERN const char *sluice_functions_text(size_t *len);
SLUICE_EXTERN const char *sluice_functions_version(void);
SLUICE_EXTERN int sluice_functions_load(sluice_store *store, size_t *servers);

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

/* Forgets 'key' for 'limit's algorithm, so its budget is whole again. */
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

/* ---- The queue limiter (server stores) --------------------------------------
 *
 * EchoMQ's layout: queue 'q' keeps its fixed-window counter at
 * "emq:{q}:limiter" and its settings in the hash "emq:{q}:meta" (field "max"
 * is the cap). The "{q}" hashtag pins both to one cluster slot. Queue names
 * are binary-safe. Only '{', '}' and '%' are escaped in key names (as %7B,
 * %7D and %25), so that no name can break out of its hashtag; every other
 * byte is written as it is, so the keys of any name without those bytes are
 * EchoMQ's own. The empty name is written "%".
 * The embedded store answers SLUICE_ENOTSUP.
 */

/*
 * The queue limiter's read: the wait in ms before queue 'queue' may take
 * another job, 0 to admit. With 'max' 0 the cap is read from the meta hash;
 * with no cap known, 0. Non-zero only when the counter has reached the cap
 * and its window still has time left. A cap read from the meta hash without
 * a duration there is SLUICE_EPROTO, as for sluice_queue_take(): it cannot
 * be enforced. A 'max' passed here needs none.
 */
SLUICE_EXTERN int sluice_emq_rate_limit_ttl(uint64_t *wait_ms, sluice_store *store,
                                            const char *queue, size_t queue_len,
                                            uint64_t max);

/*
 * The admit step: counts one job against the queue's counter, arming its
 * 'window_ms' expiry only when this increment created it. Answers the count
 * after the increment and the window's remaining ms ('count' or 'ttl_ms' may
 * be NULL).
 */
SLUICE_EXTERN int sluice_emq_limiter_incr(uint64_t *count, uint64_t *ttl_ms,
                                          sluice_store *store, const char *queue,
                                          size_t queue_len, uint64_t window_ms);

/* ---- The job queue (server stores) -------------------------------------------
 *
 * A job queue on Valkey whose dequeue point enforces the queue's budget, so
 * that one flooding queue (a chat, a user) cannot starve the others. Every
 * key of queue 'q' shares the hashtag {q}: emq:{q}:wait (a list), :active
 * (leases), :delayed, :failed, :data, :attempts, :meta (a hash: 'max' and
 * 'duration' are the cap) and :limiter (the fixed-window counter). Each
 * operation is one atomic script (src/queue/lua/queue_*.lua).
 *
 * A job is taken under a lease. A worker that finishes it calls
 * sluice_queue_complete() or sluice_queue_fail() with the lease token, and
 * one that takes long renews the lease meanwhile (sluice_queue_extend()). A
 * job whose lease ran out (its worker died, or stalled) goes back to wait at
 * the queue's next take, and from then on the late worker's complete
 * answers SLUICE_ELEASE (before that, the job is still the late worker's,
 * and its complete counts): a job is never lost and never done twice by
 * live workers. A job whose lease runs out more often than the stalled
 * limit (1, or a worker's 'stalled_limit') fails for good instead, so a job
 * that kills its workers is not run without end.
 */

typedef struct sluice_job {
    uint64_t id;          /* >= 1, unique in its queue */
    uint64_t attempt;     /* 1 the first time it is taken */
    uint64_t lease;       /* the lease's token, for complete and fail */
    char *payload;        /* the bytes given to add (NUL after them) */
    size_t payload_len;
} sluice_job;

/* Frees a job's payload and zeroes it; accepts NULL. */
SLUICE_EXTERN void sluice_job_clear(sluice_job *job);

typedef enum sluice_take_status {
    SLUICE_TAKE_JOB = 1,      /* 'job' holds a job, active under a lease */
    SLUICE_TAKE_DEFERRED = 2, /* over budget: nothing taken; 'wait_ms' is
                                 the counter's PTTL, the limiter read's */
    SLUICE_TAKE_EMPTY = 3     /* nothing to take; 'wait_ms' is when a
                                 delayed job or a lease falls due, 0 if none */
} sluice_take_status;

/*
 * Adds a job ('delay_ms' 0: ready now); answers its id. A payload must fit
 * a take's reply: at most the store's max_reply_bytes less 1 KB, and less
 * than the server's 512 MB (SLUICE_ERANGE beyond).
 */
SLUICE_EXTERN int sluice_queue_add(uint64_t *id, sluice_store *store,
                                   const char *queue, size_t queue_len,
                                   const void *payload, size_t payload_len,
                                   uint64_t delay_ms);

/* One job of a bulk add: 'payload', 'payload_len' and 'delay_ms' in, 'id'
   out (0 until it is added). */
typedef struct sluice_new_job {
    const void *payload;
    size_t payload_len;
    uint64_t delay_ms;
    uint64_t id;
} sluice_new_job;

/*
 * Adds 'n' jobs to one queue, in order, in one round trip per batch of up to
 * 512 jobs or 32 MB of payloads. Each batch is added whole or not at all;
 * should one fail, the batches before it stay added (their jobs have their
 * ids) and the rest are not (id 0), and the error is answered. A bad job (a
 * payload too large, a delay out of range) fails the call before anything
 * is sent.
 */
SLUICE_EXTERN int sluice_queue_add_many(sluice_store *store, const char *queue,
                                        size_t queue_len, sluice_new_job *jobs,
                                        size_t n);

/*
 * The dequeue point. Reads the cap from emq:{q}:meta; if the counter has
 * reached it and its window has time left, takes nothing, answers
 * SLUICE_TAKE_DEFERRED with the wait and emits "emq.rate_limit.hit" with
 * that delay; otherwise takes the next job under a lease of 'lease_ms' and
 * counts it, arming the window only when that increment created the counter.
 * 'job' must be zeroed or cleared; with a job it owns a payload to clear.
 */
SLUICE_EXTERN int sluice_queue_take(sluice_take_status *status, uint64_t *wait_ms,
                                    sluice_job *job, sluice_store *store,
                                    const char *queue, size_t queue_len,
                                    uint64_t lease_ms);

/*
 * Renews a job's lease: it now runs out 'lease_ms' from now (a heartbeat,
 * for a job that may take longer than its lease). SLUICE_ELEASE if the
 * lease is no longer this worker's.
 */
SLUICE_EXTERN int sluice_queue_extend(sluice_store *store, const char *queue,
                                      size_t queue_len, uint64_t id,
                                      uint64_t lease, uint64_t lease_ms);

/* Completes a job; SLUICE_ELEASE if its lease is no longer this worker's. */
SLUICE_EXTERN int sluice_queue_complete(sluice_store *store, const char *queue,
                                        size_t queue_len, uint64_t id,
                                        uint64_t lease);

/*
 * Fails a job: taken 'max_attempts' times, it goes to the failed set;
 * before that, back to wait after 'backoff_ms' x 2^(attempt - 1) ms.
 * '*dead' says which (1: failed for good). SLUICE_ELEASE as for complete.
 */
SLUICE_EXTERN int sluice_queue_fail(int *dead, sluice_store *store,
                                    const char *queue, size_t queue_len,
                                    uint64_t id, uint64_t lease,
                                    uint64_t max_attempts, uint64_t backoff_ms);

/* Where a job is, as seen by the holder of one of its leases. */
typedef enum sluice_job_state {
    SLUICE_JOB_HELD = 1,    /* active under that lease: its complete or fail
                               still counts */
    SLUICE_JOB_TAKEN = 2,   /* active under another lease, another take's */
    SLUICE_JOB_WAITING = 3, /* waiting or delayed: it will be taken again */
    SLUICE_JOB_FAILED = 4,  /* in the failed set */
    SLUICE_JOB_GONE = 5     /* not in the queue: completed (or never added) */
} sluice_job_state;

/*
 * Where job 'id' of the queue is, for the holder of lease 'lease': one
 * atomic read that changes nothing. It settles a complete or fail whose
 * answer was lost (SLUICE_ETIMEDOUT, SLUICE_ECONN once the call may have
 * been sent): asked again once the store answers, SLUICE_JOB_HELD means the
 * call was not applied (the lease still holds: call it again), and after a
 * complete SLUICE_JOB_GONE means it was (or, had the lease run out before
 * it, another worker's complete was: the job is done either way); any
 * other state means the job was not completed and is, or will be, taken
 * again (SLUICE_JOB_FAILED: failed for good). Since a job is completed only
 * once, "gone" never comes back.
 */
SLUICE_EXTERN int sluice_queue_job_state(sluice_job_state *state,
                                         sluice_store *store,
                                         const char *queue, size_t queue_len,
                                         uint64_t id, uint64_t lease);

/*
 * Moves a failed job back to wait, its attempts counted afresh. '*retried'
 * (may be NULL) is 1 when it did, 0 when 'id' is not a failed job of the
 * queue (nothing changes): a result, not an error.
 */
SLUICE_EXTERN int sluice_queue_retry(int *retried, sluice_store *store,
                                     const char *queue, size_t queue_len,
                                     uint64_t id);

/* Lists up to '*n' failed jobs' ids, oldest first; '*n' becomes the count. */
SLUICE_EXTERN int sluice_queue_failed(uint64_t *ids, size_t *n,
                                      sluice_store *store, const char *queue,
                                      size_t queue_len);

/*
 * Sets the cap: at most 'max' jobs taken per 'duration_ms' window ('max' 0:
 * not limited). Every worker sees it at its next take.
 */
SLUICE_EXTERN int sluice_queue_set_cap(sluice_store *store, const char *queue,
                                       size_t queue_len, uint64_t max,
                                       uint64_t duration_ms);

typedef struct sluice_queue_stats {
    uint64_t waiting, active, delayed, failed, completed;
    uint64_t max, duration_ms; /* the cap; max 0: not limited */
    uint64_t count;            /* jobs taken in the current window */
    uint64_t wait_ms;          /* the queue-limiter read: 0 = may take */
} sluice_queue_stats;

SLUICE_EXTERN int sluice_queue_stats_get(sluice_queue_stats *out,
                                         sluice_store *store, const char *queue,
                                         size_t queue_len);

/*
 * A worker takes jobs from many queues fairly: in turn, one job per queue
 * per round. A queue that answers a wait is skipped until the wait ends, so
 * the others keep flowing. With nothing to take it sleeps, and wakes when a
 * job is added to one of its queues (Pub/Sub), when a deferred queue's wait
 * ends, or when a delayed job or a lease falls due.
 */
typedef struct sluice_worker sluice_worker;

/* A worker is not thread-safe: one thread at a time calls it (its store may
   be shared with other threads and workers). A pattern names queues by
   their text: queues whose names hold a NUL byte are served only by name. */

/* A worker's lease when its options name none: 30 s. */
#define SLUICE_LEASE_DEFAULT_MS 30000u

/* Versions as for sluice_store_opts: 1 .. SLUICE_WORKER_OPTS_VERSION. */
#define SLUICE_WORKER_OPTS_VERSION 2

typedef struct sluice_worker_opts {
    unsigned int version;
    uint64_t lease_ms;   /* 0 means SLUICE_LEASE_DEFAULT_MS */
    /* Also serve every queue whose name matches this glob (e.g. "chat:*"),
       as queues are added; NULL for only the listed ones. A glob that is
       not one (fnmatch() cannot match it, like "[") is SLUICE_EINVAL. */
    const char *pattern;
    /* ---- Since version 2 ---- */
    /* How often a job's lease may run out (found by this worker's takes)
       before the job fails for good; 0 means 1. */
    uint64_t stalled_limit;
} sluice_worker_opts;

#define SLUICE_WORKER_OPTS_INIT {.version = SLUICE_WORKER_OPTS_VERSION}

/*
 * A worker for the 'nqueues' queues 'queues', each 'queue_lens[i]' bytes
 * long (binary-safe), or NUL-terminated when 'queue_lens' is NULL. The
 * worker copies the names.
 */
SLUICE_EXTERN int sluice_worker_new(sluice_worker **out, sluice_store *store,
                                    const char *const *queues,
                                    const size_t *queue_lens, size_t nqueues,
                                    const sluice_worker_opts *opts);
SLUICE_EXTERN void sluice_worker_free(sluice_worker *worker);

/*
 * The next job from any of the worker's queues, waiting at most
 * 'timeout_ms'. On a job, '*queue' points at its queue's name and
 * '*queue_len' (may be NULL) is its length; the name stays valid while the
 * worker lives. On a time-out, job->id is 0. 'job' as for take.
 */
SLUICE_EXTERN int sluice_worker_next(sluice_job *job, const char **queue,
                                     size_t *queue_len, sluice_worker *worker,
                                     uint64_t timeout_ms);

/* ---- Telemetry ---------------------------------------------------------------
 *
 * Named events with numeric measurements and string metadata, after Erlang's
 * :telemetry. sluice emits:
 *
 *   "emq.rate_limit.hit"  a limit was hit. A refused sluice_hit():
 *                         measurement delay_ms (its retry_after_ms);
 *                         metadata key, algorithm, limit, window_ms, store.
 *                         A refused sluice_hit_all(): once, the same, of
 *                         the limit that decided (its 'limit' field) and
 *                         with the combined retry_after_ms.
 *                         A deferred sluice_queue_take(): measurement
 *                         delay_ms (the wait); metadata queue, algorithm
 *                         ("fixed"), limit.
 *
 * With no handler attached an emit costs one relaxed atomic load; building
 * with SLUICE_NO_TELEMETRY removes even that. Handlers run on the calling
 * thread, must not block, and must not attach or detach handlers.
 */
#define SLUICE_EVENT_RATE_LIMIT_HIT "emq.rate_limit.hit"

typedef struct sluice_measurement {
    const char *name;
    double value;
} sluice_measurement;

typedef struct sluice_metadata {
    const char *name;
    const char *value; /* not NUL-terminated: binary keys */
    size_t value_len;
} sluice_metadata;

typedef struct sluice_event {
    const char *name;
    const sluice_measurement *measurements;
    size_t n_measurements;
    const sluice_metadata *metadata;
    size_t n_metadata;
} sluice_event;

typedef void (*sluice_handler_fn)(const sluice_event *event, void *payload);

/*
 * Attaches 'fn' under the unique 'handler_id' to the event 'event_name'.
 * SLUICE_EINVAL if the id is taken. 'payload' is passed back on each call.
 */
SLUICE_EXTERN int sluice_telemetry_attach(const char *handler_id,
                                          const char *event_name,
                                          sluice_handler_fn fn, void *payload);
/* Detaches the handler; SLUICE_EINVAL if no handler has that id. */
SLUICE_EXTERN int sluice_telemetry_detach(const char *handler_id);
/* Calls every handler attached to 'event->name'. */
SLUICE_EXTERN void sluice_telemetry_emit(const sluice_event *event);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
