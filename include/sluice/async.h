/*
 * sluice/async.h - the non-blocking API: sluice inside an event loop
 * (libuv, libevent, libev, or a plain poll() loop).
 *
 * A handle (sluice_async) is opened over any open store. It owns no loop
 * and no thread: it says which file descriptors it wants watched, and when
 * it next needs a timer, through the two hooks the program gives it, and
 * the program tells it when a descriptor is ready or the timer fired. The
 * adapters in sluice/adapters/ (libuv.h, libevent.h, libev.h, poll.h) are
 * those hooks for each loop, each a small header over this interface, as
 * hiredis' are.
 *
 * Every call takes a callback and its 'user' pointer. A call that answers
 * SLUICE_OK has its callback run exactly once, later, from
 * sluice_async_on_fd(), sluice_async_on_timer() or sluice_async_free(),
 * never from inside the call itself (so a callback may start calls, and a
 * caller never sees its callback before the call returns). A call that
 * answers an error (bad arguments, out of memory, a handle being freed)
 * has no callback, and sluice_last_error() says why.
 *
 * What the blocking calls do, the async ones do: the same checks and
 * decisions, the store's deadline (its 'timeout') per call, the failure
 * policy (on_error) and its 'fallback', the refused-key cache (answered
 * with no I/O), the module or the Lua scripts (engine), a script reloaded
 * after NOSCRIPT, cluster routing (MOVED, ASK, a map reread), reconnects
 * with back-off, TLS, Unix sockets and Sentinel. Calls started in one loop
 * iteration leave in one write per node, and the decisions among them
 * under one limit in one script or SLUICE.HITMANY call per batch.
 *
 * The embedded store answers without waiting: its callbacks run at the
 * handle's next timer, which it asks for at once (0 ms).
 *
 * Threading: one handle per loop thread. A handle, and every call on it,
 * belongs to the thread that runs its loop; the store under it may be
 * shared with other threads and handles.
 */
#ifndef SLUICE_INCLUDE_ASYNC_H
#define SLUICE_INCLUDE_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "queue.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice_limit;
struct sluice_decision;
struct sluice_request;

typedef struct sluice_async sluice_async;

/* What a descriptor is watched for: bits of the hooks' 'events'. */
#define SLUICE_ASYNC_READ 1
#define SLUICE_ASYNC_WRITE 2

/*
 * The loop's side. The handle calls these from its own calls (new, on_fd,
 * on_timer, the calls that start work, free), never from another thread.
 */
typedef struct sluice_async_hooks {
    /* Watch 'fd' for 'events' (SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE),
       in place of what it was watched for; 0: stop watching it (it is
       closed right after). */
    void (*watch)(void *loop_data, int fd, int events);
    /* Call sluice_async_on_timer() once, 'ms' from now, in place of the
       timer set before; -1: no timer is needed. */
    void (*timer)(void *loop_data, long long ms);
    /* Called once by sluice_async_free(), after the last callback: the
       adapter frees what it keeps. May be NULL. */
    void (*cleanup)(void *loop_data);
    void *loop_data;
    void *reserved[2]; /* NULL: room to grow without breaking the ABI */
} sluice_async_hooks;

/*
 * Opens a handle over 'store', which must outlive it. The hooks are
 * copied. SLUICE_EINVAL for a NULL store or hooks, or a hook missing.
 */
SLUICE_EXTERN int sluice_async_new(sluice_async **out, sluice_store *store,
                                   const sluice_async_hooks *hooks);
/*
 * Frees the handle (NULL: nothing): every call still pending is called
 * back once, with SLUICE_ECANCELED, and every descriptor it watched is
 * unwatched and closed. A callback run from here may not start calls
 * (they answer SLUICE_ECANCELED at once, with no callback).
 */
SLUICE_EXTERN void sluice_async_free(sluice_async *a);

/* The loop says 'fd' is ready for 'events' (SLUICE_ASYNC_*); a descriptor
   the handle no longer watches is ignored. */
SLUICE_EXTERN void sluice_async_on_fd(sluice_async *a, int fd, int events);
/* The loop says the timer the handle asked for has fired. */
SLUICE_EXTERN void sluice_async_on_timer(sluice_async *a);

/* How many calls are started and not yet called back. */
SLUICE_EXTERN size_t sluice_async_pending(const sluice_async *a);

/* ---- Decisions -------------------------------------------------------------- */

/*
 * A decision, or the error 'err' (then 'd' is NULL, and sluice_last_error()
 * in the callback says why). With the failure policy standing in for a
 * server that did not answer, 'err' is 0 and d->fallback is set, as
 * sluice_hit() answers.
 */
typedef void (*sluice_async_decision_cb)(sluice_async *a, int err,
                                         const struct sluice_decision *d,
                                         void *user);
/* A batch's requests, each with its own 'err' and 'decision'; 'err' as
   sluice_hit_many() answers. */
typedef void (*sluice_async_many_cb)(sluice_async *a, int err,
                                     struct sluice_request *reqs, size_t n,
                                     void *user);
/* sluice_hit_all()'s 'out' and 'each' ('n' of them); NULL with an error. */
typedef void (*sluice_async_all_cb)(sluice_async *a, int err,
                                    const struct sluice_decision *out,
                                    const struct sluice_decision *each,
                                    size_t n, void *user);
/* A call that answers nothing but whether it worked. */
typedef void (*sluice_async_done_cb)(sluice_async *a, int err, void *user);

/* sluice_hit() and sluice_peek(). The limit and key are copied. */
SLUICE_EXTERN int sluice_async_hit(sluice_async *a,
                                   const struct sluice_limit *limit,
                                   const char *key, size_t key_len,
                                   uint64_t cost, sluice_async_decision_cb cb,
                                   void *user);
SLUICE_EXTERN int sluice_async_peek(sluice_async *a,
                                    const struct sluice_limit *limit,
                                    const char *key, size_t key_len,
                                    uint64_t cost, sluice_async_decision_cb cb,
                                    void *user);
/* sluice_hit_many(). The limit is copied; 'reqs' (and the keys they point
   to) stay the caller's and must live until the callback, which gets them
   back answered. */
SLUICE_EXTERN int sluice_async_hit_many(sluice_async *a,
                                        const struct sluice_limit *limit,
                                        struct sluice_request *reqs, size_t n,
                                        sluice_async_many_cb cb, void *user);
/* sluice_hit_all() and sluice_peek_all(): 1 <= n <= SLUICE_HIT_ALL_MAX
   limits, copied, as the key is. */
SLUICE_EXTERN int sluice_async_hit_all(sluice_async *a,
                                       const struct sluice_limit *limits,
                                       size_t n, const char *key,
                                       size_t key_len, uint64_t cost,
                                       sluice_async_all_cb cb, void *user);
SLUICE_EXTERN int sluice_async_peek_all(sluice_async *a,
                                        const struct sluice_limit *limits,
                                        size_t n, const char *key,
                                        size_t key_len, uint64_t cost,
                                        sluice_async_all_cb cb, void *user);
/* sluice_reset(): the callback's 'err' is its answer, 1 it removed a count,
   0 nothing was there, or a negative SLUICE_E* code. */
SLUICE_EXTERN int sluice_async_reset(sluice_async *a,
                                     const struct sluice_limit *limit,
                                     const char *key, size_t key_len,
                                     sluice_async_done_cb cb, void *user);

/* ---- The queue (sluice/queue.h) ----------------------------------------------- */

/*
 * sluice_queue_take(): 'job' is the handle's, valid during the callback;
 * a callback that keeps the payload takes it (sets job->payload to NULL),
 * else it is freed after. NULL with an error.
 */
typedef void (*sluice_async_take_cb)(sluice_async *a, int err,
                                     sluice_take_status status,
                                     uint64_t wait_ms, sluice_job *job,
                                     void *user);
/* sluice_queue_fail()'s '*dead'. */
typedef void (*sluice_async_fail_cb)(sluice_async *a, int err, int dead,
                                     void *user);

SLUICE_EXTERN int sluice_async_queue_take(sluice_async *a, const char *queue,
                                          size_t queue_len, uint64_t lease_ms,
                                          sluice_async_take_cb cb, void *user);
SLUICE_EXTERN int sluice_async_queue_complete(sluice_async *a,
                                              const char *queue,
                                              size_t queue_len, uint64_t id,
                                              uint64_t lease,
                                              sluice_async_done_cb cb,
                                              void *user);
SLUICE_EXTERN int sluice_async_queue_fail(sluice_async *a, const char *queue,
                                          size_t queue_len, uint64_t id,
                                          uint64_t lease,
                                          uint64_t max_attempts,
                                          uint64_t backoff_ms,
                                          sluice_async_fail_cb cb, void *user);
/* sluice_queue_extend(): the lease renewed. */
SLUICE_EXTERN int sluice_async_queue_extend(sluice_async *a, const char *queue,
                                            size_t queue_len, uint64_t id,
                                            uint64_t lease, uint64_t lease_ms,
                                            sluice_async_done_cb cb,
                                            void *user);

/* ---- HTTP header fields --------------------------------------------------------- */

/*
 * The IETF RateLimit and RateLimit-Policy header fields
 * (draft-ietf-httpapi-ratelimit-headers-11) of decision 'd' under 'limit',
 * with policy name 'name' (an SF Token, e.g. "default", written as the
 * Item's String), and Retry-After (whole seconds, rounded up) for a
 * refusal; for an admission 'retry_after' is "" (send no Retry-After).
 * E.g. "default";r=0;t=1 and "default";q=5;w=1 and 1 (src/core/http.c
 * says how each number is chosen). Each value is written without its
 * field name into its buffer, NUL-terminated; a NULL buffer is skipped.
 * SLUICE_ERANGE when a buffer is too small (64 bytes always suffice for
 * 'retry_after', 128 plus the name for the others), SLUICE_EINVAL for a
 * NULL argument or a name that is not a token, and sluice_limit_check()'s
 * code for a bad limit; on an error no buffer is written.
 */
SLUICE_EXTERN int sluice_http_headers(const struct sluice_decision *d,
                                      const struct sluice_limit *limit,
                                      const char *name, char *ratelimit,
                                      size_t ratelimit_cap, char *policy,
                                      size_t policy_cap, char *retry_after,
                                      size_t retry_after_cap);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_ASYNC_H */
