/*
 * async.h - what the files of src/async/ share: the non-blocking API
 * (include/sluice/async.h) over any store.
 *
 *   handle.c   the handle: its calls, the ready list (answers that need no
 *              I/O), the one timer (the nearest deadline), and the loop's
 *              way in (on_fd, on_timer); callbacks run from here only
 *   aconn.c    one node's connection of the handle's own: a connect that
 *              never waits (the wire layer's start/resume), the handshake
 *              (AUTH, SELECT, SLUICE.VERSION, SCRIPT LOAD, written
 *              together), calls queued until the socket is writable and
 *              then written together (automatic pipelining), replies
 *              handed out in order, reconnects with back-off
 *   calls.c    what is sent: decisions grouped by limit into one script
 *              or SLUICE.HITMANY call per group (decide.h's arguments and
 *              answers, the blocking path's own), NOSCRIPT and a module
 *              that lacks an algorithm, plain commands and scripts
 *              (sluice__async_eval(), for the queue)
 *   route.c    which node serves a slot, and redirections
 *   decide.c   the public decision calls: checks, the embedded store, the
 *              guard (refused-key cache, failure policy)
 *   queue.c    the queue's calls, over sluice__async_eval()
 *
 * Everything here runs on the loop's thread: no locks, but those the
 * store's shared nodes and map take (the store may be shared with threads
 * using the blocking API).
 */
#ifndef SLUICE_ASYNC_H
#define SLUICE_ASYNC_H

#include "async/route.h"
#include "valkey/decide.h"

#include "sluice.h"

/* The reset's script (reset.lua): a DEL that keeps its place in a
   pipeline that NOSCRIPT sends again. */
extern const sluice__script sluice__script_async_reset;

/* ---- Calls -------------------------------------------------------------------- */

typedef enum sluice__acall_kind {
    SLUICE__ACALL_DECIDE, /* hit, peek */
    SLUICE__ACALL_MANY,   /* hit_many */
    SLUICE__ACALL_ALL,    /* hit_all, peek_all */
    SLUICE__ACALL_CMD     /* reset, sluice__async_eval() */
} sluice__acall_kind;

/* The reply of one server call started by sluice__async_eval(): 'r' (never an
   error reply: those become 'err', mapped as the blocking path maps them) is
   the callee's to free with freeReplyObject(); NULL with an error. */
typedef void (*sluice__async_reply_fn)(sluice_async *a, int err, redisReply *r,
                                       const char *msg, void *arg);

struct sluice__aconn;

/* One call started and not yet called back. */
typedef struct sluice__acall {
    struct sluice__acall *prev, *next; /* every pending call of the handle */
    struct sluice__acall *qnext;       /* a connection's queue, or ready */
    struct sluice__aconn *conn;        /* queued on; NULL: none */
    sluice__acall_kind kind;
    bool ready;                        /* answered: waits to be called back */
    /* A request of a hit_many, decided as a DECIDE call of its own: its
       answer goes to parent->reqs[idx], and it is no pending call. */
    struct sluice__acall *parent;
    size_t idx;
    uint64_t deadline_ms;              /* monotonic */
    int err;
    char msg[256];
    void *user;
    union {
        sluice_async_decision_cb decision;
        sluice_async_many_cb many;
        sluice_async_all_cb all;
        sluice_async_done_cb done;
        sluice__async_reply_fn reply;
    } cb;
    sluice_limit limit;
    bool consume;
    uint64_t asked_ms;                 /* for the guard's settle */
    unsigned slot;
    /* Routing (route.c): parked until its node is known, or until its
       pause is over ('wake_ms', 0: none); to be sent after ASKING; the
       redirections it followed, and its next TRYAGAIN pause. */
    bool parked, asking;
    uint64_t wake_ms;
    int redirects;
    long tryagain_ms;
    /* DECIDE: one request, its key copied into 'key' */
    sluice_request one;
    char *key;
    /* MANY: the caller's requests, and how many are unanswered */
    sluice_request *reqs;
    size_t n, left;
    /* ALL */
    sluice_decision all_out, all_each[SLUICE_HIT_ALL_MAX];
    size_t all_n;
    /* CMD: the formatted command (EVALSHA, or the plain command), its
       script (NULL: none), its module twin formatted (NULL: none), and
       the reply */
    char *cmd;
    size_t cmd_len;
    const sluice__script *script;
    char *module_cmd;
    size_t module_len;
    redisReply *reply;
} sluice__acall;

/* ---- Batches: what a connection sent, in order ------------------------------- */

typedef enum sluice__abatch_kind {
    SLUICE__ABATCH_HELLO,  /* a handshake command */
    SLUICE__ABATCH_DECIDE, /* one decision call of up to GROUP_MAX */
    SLUICE__ABATCH_CMD     /* one CMD call */
} sluice__abatch_kind;

/* Where a batch's request i came from. */
typedef struct sluice__aowner {
    sluice__acall *call;
    size_t idx; /* MANY: its place in call->reqs */
} sluice__aowner;

typedef struct sluice__abatch {
    struct sluice__abatch *next;
    sluice__abatch_kind kind;
    int skip;             /* replies before its answer (SCRIPT LOAD) */
    uint64_t deadline_ms; /* the earliest of its calls' */
    int hello;            /* HELLO: which (aconn.c) */
    /* DECIDE */
    sluice_limit limit;
    bool consume, module, lua_only, script_given;
    size_t n;
    sluice_request *reqs;
    sluice__aowner *owners;
    sluice__vk_args g;
    /* CMD */
    sluice__acall *call;
    bool asking;
} sluice__abatch;

/* ---- Connections (aconn.c) ----------------------------------------------------- */

typedef enum sluice__aconn_state {
    SLUICE__ACONN_CLOSED,
    SLUICE__ACONN_CONNECTING,
    SLUICE__ACONN_HELLO,
    SLUICE__ACONN_READY,
    SLUICE__ACONN_BACKOFF /* a connect failed: calls fail fast until then */
} sluice__aconn_state;

typedef struct sluice__aconn {
    sluice_async *a;
    sluice__vk_node *node;
    sluice__aconn_state state;
    sluice__vk_wire *w;
    sluice__vk_caps caps;
    int fd;         /* the descriptor watched; -1: none */
    int events;     /* what it is watched for */
    short want;     /* while connecting: what the transport waits for */
    sluice__acall *queue, **queue_tail; /* waiting to be sent */
    sluice__abatch *sent, **sent_tail;  /* in flight, oldest first */
    uint64_t connect_deadline_ms;
    uint64_t backoff_ms, retry_at_ms;
    int last_err;
    char last_msg[256];
} sluice__aconn;

/* Queues 'c' on the connection to 'node' and has it sent: at once into
   the ready list with an error if the node is backing off. */
void sluice__aconn_queue(sluice_async *a, sluice__vk_node *node,
                         sluice__acall *c);
/* Takes 'c' off its connection's queue (it timed out unsent). */
void sluice__aconn_unqueue(sluice__acall *c);
/* The loop says 'conn's descriptor is ready for 'events'. */
void sluice__aconn_on_fd(sluice__aconn *conn, int events);
/* Fails what is overdue at 'now_ms' on 'conn'; answers its nearest
   deadline (UINT64_MAX: none). */
uint64_t sluice__aconn_tick(sluice__aconn *conn, uint64_t now_ms);
/* Closes 'conn', answering all on it with 'err'; frees it. */
void sluice__aconn_free(sluice__aconn *conn, int err);
/* Sends again the batch 'b' (its replies not yet used) at the queue's
   head of 'conn': after NOSCRIPT, or to the script. */
void sluice__aconn_resend(sluice__aconn *conn, sluice__abatch *b);

/* ---- What is sent (calls.c) ----------------------------------------------------- */

/* Appends to 'conn's wire every queued call, decisions grouped; the
   batches go on its sent list. */
void sluice__acalls_write(sluice__aconn *conn);
/* Hands out reply 'r' (owned here) to batch 'b' (freed here unless sent
   again); an error 'err' (r NULL) the same. */
void sluice__acalls_answer(sluice__aconn *conn, sluice__abatch *b, int err,
                           const char *msg, redisReply *r);
void sluice__abatch_free(sluice__abatch *b);

/* ---- Routing (route.c) ------------------------------------------------------------ */

/* sluice__async_dispatch(), _route(), _redirected(), _route_wake(),
   _route_tick() and sluice__async_all(): see route.h. */

/* ---- The handle (handle.c) --------------------------------------------------------- */

struct sluice_async {
    sluice_store *store;
    sluice_async_hooks hooks;
    sluice__async_routing route; /* route.c's */
    sluice__vk_store *v;   /* NULL: not on a server (the embedded store) */
    void *guard;           /* the store's guard, or NULL */
    sluice__acall *calls;  /* every pending call */
    size_t pending;
    sluice__acall *ready, **ready_tail;
    sluice__aconn **conns;
    size_t nconns;
    uint64_t timer_at;     /* what the timer was set for; UINT64_MAX none */
    int depth;             /* inside a callback or an entry point */
    bool freeing, free_asked;
    /* Counters, for tests and the bench */
    uint64_t writes, calls_sent;
};

/* A new call of 'kind' for 'user', on the handle's list; NULL out of
   memory (the message set). */
sluice__acall *sluice__acall_new(sluice_async *a, sluice__acall_kind kind,
                                 void *user);
/* Answers 'c' (its results set by the caller) with 'err': it is called
   back at the handle's next turn. */
void sluice__acall_ready(sluice_async *a, sluice__acall *c, int err);
/* Frees 'c', never called back (a call that did not start). */
void sluice__acall_drop(sluice_async *a, sluice__acall *c);
/* Answers 'c' with 'err' where no reply came (a decision through the
   failure policy first). */
void sluice__acall_fail(sluice_async *a, sluice__acall *c, int err);
/* The connection of 'a' to 'node', made if new; NULL out of memory. */
sluice__aconn *sluice__async_conn(sluice_async *a, sluice__vk_node *node);
/* Watches 'fd' for 'events' (0: not), through the hooks. */
void sluice__async_watch(sluice_async *a, sluice__aconn *conn, int fd,
                         int events);
/* Every call's start (SLUICE_EINVAL, SLUICE_ECANCELED when it may not)
   and its end: what it answered is called back at the next turn. */
int sluice__async_enter(sluice_async *a);
void sluice__async_leave(sluice_async *a);
/* Settles a decision's request through the guard (policy, cache). */
int sluice__async_settle(sluice_async *a, const sluice__acall *c,
                         sluice_request *q, int err);

/*
 * Runs 'script' (EVALSHA, NOSCRIPT answered by loading it) on the node of
 * its first key, or 'module' (a SLUICE.* command taking the script's keys
 * and arguments; NULL: none) where that node's engine sends calls to the
 * module; arguments copied; a deadline as for decisions; 'fn' runs exactly
 * once. On a store not on a server: SLUICE_ENOTSUP at once, no callback.
 */
int sluice__async_eval(sluice_async *a, const sluice__script *script,
                       const char *module, int nkeys, int argc,
                       const char *const *args, const size_t *lens,
                       sluice__async_reply_fn fn, void *arg);
/* One plain command whose first key is argv[1]; the same contract. */
int sluice__async_command(sluice_async *a, int argc, const char **argv,
                          const size_t *lens, sluice__async_reply_fn fn,
                          void *arg);

#endif /* SLUICE_ASYNC_H */
