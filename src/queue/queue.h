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

/* Reads element 'i' of an array reply (or, for 'i' 0, the reply itself
   when it is no array) as an integer in 'lo'..'hi'; else SLUICE_EPROTO,
   with 'what' naming the call in the message. */
int sluice__queue_reply_u64(const redisReply *r, size_t i, const char *what,
                            uint64_t lo, uint64_t hi, uint64_t *out);

#endif /* SLUICE_QUEUE_H */
