/*
 * sluice/queue.h - the queue limiter, the job queue and its workers
 * (server stores).
 */
#ifndef SLUICE_INCLUDE_QUEUE_H
#define SLUICE_INCLUDE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* The cap: at most max jobs per duration_ms. No cap (not limited):
       max 0 and duration_ms 0. A cap of 0 or less written into the meta
       hash by another tool (sluice_queue_set_cap() with max 0 removes
       the cap), which any counter has reached: max 0 and its duration. */
    uint64_t max, duration_ms;
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

/* Versions as for sluice_store_opts (sluice.h): 1 ..
   SLUICE_WORKER_OPTS_VERSION. */
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

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_QUEUE_H */
