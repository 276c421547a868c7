/*
 * queue.h - what the files of src/queue/ share: the job queue (queue.c),
 * its worker (worker.c) and the queue limiter (limiter.c).
 *
 * Every key of queue 'q' shares the hashtag {q} (src/store/keys.c): EMQ
 * ":{" q "}:" and wait, active, delayed, data, meta, limiter, attempts or
 * failed. Each operation is one script of src/queue/lua/, run through the
 * store's server interface (src/store/store.h): the queue knows the server
 * only as "run this script on these keys".
 */
#ifndef SLUICE_QUEUE_H
#define SLUICE_QUEUE_H

#include "store/store.h"

#include <hiredis/hiredis.h>

/* The queue's scripts (src/queue/lua/NAME.lua), embedded at build time. */
extern const sluice__script sluice__script_emq_ttl;
extern const sluice__script sluice__script_emq_incr;
extern const sluice__script sluice__script_queue_add;
extern const sluice__script sluice__script_queue_take;
extern const sluice__script sluice__script_queue_done;
extern const sluice__script sluice__script_queue_admin;

/* A store's server, as the queue uses it. */
typedef struct sluice__qserver {
    const sluice__server_ops *ops;
    void *impl;
    const char *prefix; /* the queue keys' prefix, "emq" by default */
    uint64_t max_payload; /* the largest payload a take can read back */
    /* The clock argument of the scripts that read one (src/queue/lua/
       now.lua): the store's clock in ms, read when the server was asked
       for, with clock=caller; else "" (now_len 0): the server's. */
    char now[24];
    size_t now_len;
} sluice__qserver;

/*
 * The server of 'store', for the queue call 'call' (named in the message
 * when the store has none: SLUICE_ENOTSUP), and the clock of the call
 * (SLUICE_ERANGE when a caller's clock reads beyond 2^53).
 */
int sluice__qserver_of(sluice__qserver *out, const sluice_store *store,
                       const char *call);


/*
 * The name of the registry of queue names, EMQ ":queues", in 'buf' or, when
 * the prefix is too long for it, in memory the caller frees; NULL if out of
 * memory. Queues are registered as they are added or capped, so that a
 * worker serving a pattern finds them.
 */
char *sluice__queue_registry(char *buf, size_t cap, size_t *len,
                             const sluice__qserver *s);

/* The channel every add publishes its queue's name on, EMQ ":added", so
   that idle workers wake. */
#define SLUICE__CHANNEL_MAX (SLUICE__PREFIX_MAX + 8)
void sluice__queue_channel(char *buf, const sluice__qserver *s);

/* The stalled limit of a take that names none (a worker's default). */
#define SLUICE__STALLED_LIMIT 1

/* sluice_queue_take() with a stalled limit: a job whose lease ran out more
   than 'stalled_limit' times fails for good instead of going back. */
int sluice__queue_take(sluice_take_status *status, uint64_t *wait_ms,
                       sluice_job *job, sluice_store *store, const char *queue,
                       size_t queue_len, uint64_t lease_ms,
                       uint64_t stalled_limit);

/* ---- A queue call, built and then sent (call.c) ------------------------------------
 *
 * Every queue operation is "build the call" (its keys, its arguments and
 * the clock argument, everything checked), then "run it" (the blocking
 * path: sluice__qsend_run(); the async path: sluice__async_eval() with the
 * same script, keys and arguments), then "read the reply". The builders and
 * the readers are shared, so both paths check and answer alike.
 */

/* The keys of a queue call (all of one queue's) and the arguments a call
   builds in place beside them. */
#define SLUICE__QKEYS 8
#define SLUICE__QARGS 8
#define SLUICE__QKEY_BUF 192

typedef struct sluice__qsend {
    sluice__qserver s;
    const sluice__script *script;
    int nkeys;
    int argc;          /* the keys, then the arguments */
    const char **args; /* args_in, or malloc'd for a long call */
    size_t *lens;
    /* Where the built call lives: do not copy or move a built call. */
    const char *args_in[SLUICE__QKEYS + SLUICE__QARGS];
    size_t lens_in[SLUICE__QKEYS + SLUICE__QARGS];
    char key_buf[SLUICE__QKEYS][SLUICE__QKEY_BUF];
    char *key[SLUICE__QKEYS];
    size_t key_len[SLUICE__QKEYS];
    char num[4][24]; /* the numbers a builder writes as text */
} sluice__qsend;

/*
 * Builds into 'q' the call of 'script' on the keys 'which[0..nkeys)' of
 * queue 'queue' (each a K_* place of SLUICE__QKEYS) then the arguments
 * 'args[0..nargs)' ('lens'), server 's' copied into q->s; an argument NULL
 * is the call's clock (q->s.now). The arguments' bytes are the caller's
 * until the call is sent. Free it with sluice__qsend_free(), also after an
 * error.
 */
int sluice__qsend_build(sluice__qsend *q, const sluice__qserver *s,
                        const char *queue, size_t queue_len,
                        const sluice__script *script, const int *which,
                        int nkeys, int nargs, const char *const *args,
                        const size_t *lens);
/* Runs a built call on its server, blocking: the reply is the caller's. */
int sluice__qsend_run(const sluice__qsend *q, redisReply **out);
void sluice__qsend_free(sluice__qsend *q);

/* The keys' places, for 'which'. */
enum { SLUICE__QK_WAIT, SLUICE__QK_ACTIVE, SLUICE__QK_DELAYED, SLUICE__QK_DATA,
       SLUICE__QK_META, SLUICE__QK_LIMITER, SLUICE__QK_ATTEMPTS,
       SLUICE__QK_FAILED };

/* A reply that must be an array of exactly 'n' elements ('what' names the
   call in the message). */
int sluice__queue_reply_array(const redisReply *r, size_t n, const char *what);

/* ---- Take and finish, in halves (take.c) ------------------------------------------- */

/*
 * Builds a take of queue 'queue' under a lease of 'lease_ms' (SLUICE_ERANGE
 * outside 1..2^40) with 'stalled_limit', for call 'call' (named when the
 * store is not on a server: SLUICE_ENOTSUP).
 */
int sluice__queue_take_build(sluice__qsend *q, const sluice_store *store,
                             const char *call, const char *queue,
                             size_t queue_len, uint64_t lease_ms,
                             uint64_t stalled_limit);
/*
 * Reads a take's reply into '*status', '*wait_ms' and 'job' (zeroed
 * first; a job's payload is then the caller's), and emits
 * "emq.rate_limit.hit" for a deferred take of 'queue'.
 */
int sluice__queue_take_read(const redisReply *r, const char *queue,
                            size_t queue_len, sluice_take_status *status,
                            uint64_t *wait_ms, sluice_job *job);

/* What queue_done.lua is asked to do, and what it answers. */
typedef enum sluice__qfinish {
    SLUICE__QF_COMPLETE,
    SLUICE__QF_FAIL,
    SLUICE__QF_EXTEND
} sluice__qfinish;

enum {
    SLUICE__QDONE_LOST = 0, /* the lease is no longer held: SLUICE_ELEASE */
    SLUICE__QDONE_COMPLETED = 1,
    SLUICE__QDONE_RETRY = 2, /* failed, back to wait after its back-off */
    SLUICE__QDONE_DEAD = 3,  /* failed for good */
    SLUICE__QDONE_EXTENDED = 4
};

/*
 * Builds op 'op' on job 'id' under lease 'lease', with 'a' and 'b' as the
 * op takes them (fail: max_attempts >= 1, backoff_ms <= 2^40; extend: the
 * lease's new length, 1..2^40 ms, and 'b' unused; complete: both unused),
 * for call 'call' (as for take).
 */
int sluice__queue_finish_build(sluice__qsend *q, const sluice_store *store,
                               const char *call, sluice__qfinish op,
                               const char *queue, size_t queue_len,
                               uint64_t id, uint64_t lease, uint64_t a,
                               uint64_t b);
/* Reads op 'op''s reply on job 'id' and lease 'lease' into '*outcome' (a
   SLUICE__QDONE_*): SLUICE__QDONE_LOST is SLUICE_ELEASE. */
int sluice__queue_finish_read(const redisReply *r, sluice__qfinish op,
                              uint64_t id, uint64_t lease, uint64_t *outcome);

/* Reads element 'i' of an array reply (or, for 'i' 0, the reply itself
   when it is no array) as an integer in 'lo'..'hi'; else SLUICE_EPROTO,
   with 'what' naming the call in the message. */
int sluice__queue_reply_u64(const redisReply *r, size_t i, const char *what,
                            uint64_t lo, uint64_t hi, uint64_t *out);

#endif /* SLUICE_QUEUE_H */
