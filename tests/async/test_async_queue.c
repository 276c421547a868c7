/*
 * test_async_queue.c - the job queue through the async API on a real
 * redis-server: take, complete, fail and extend answer what the blocking
 * calls answer on the same state.
 *
 * Two twin queues get the same jobs and the same cap (emq:{q}:meta). Each
 * step runs through the async API on one and through the blocking API on
 * the other, and the answers must agree: the status, the job (id, attempt,
 * payload and lease token, all counted per queue), the error and its
 * message (SLUICE_ELEASE names the job and the lease). A deferred take's
 * wait is the limiter's PTTL, read right after it (the cap's window is the
 * server's clock), and it emits "emq.rate_limit.hit" with that delay, as
 * the blocking take does. Every callback must run exactly once, never
 * from inside the call that started it, and freeing the handle with calls
 * pending (not yet sent, and sent to a stalled server) calls each back
 * once with SLUICE_ECANCELED.
 *
 * The loop is a small poll() loop of the test's own over the handle's two
 * hooks.
 */
#include "queue_fixture.h"
#include "sluice/async.h"
#include "store/store.h" /* sluice__key_build */
#include "test.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* ---- A small poll() loop over the hooks ------------------------------------------- */

#define LOOP_FDS 16

typedef struct loop {
    struct pollfd fds[LOOP_FDS];
    int nfds;
    long long timer_at_us; /* -1: none */
    int bad_hook;          /* a hook called with nonsense */
} loop;

static void loop_watch(void *data, int fd, int events)
{
    loop *l = data;
    int i = 0;

    while (i < l->nfds && l->fds[i].fd != fd)
        i++;
    if (events == 0) {
        if (i < l->nfds)
            l->fds[i] = l->fds[--l->nfds];
        return;
    }
    if (i == l->nfds) {
        if (l->nfds == LOOP_FDS) {
            l->bad_hook++;
            return;
        }
        l->nfds++;
    }
    l->fds[i].fd = fd;
    l->fds[i].events = (short)((events & SLUICE_ASYNC_READ ? POLLIN : 0) |
                               (events & SLUICE_ASYNC_WRITE ? POLLOUT : 0));
}

static void loop_timer(void *data, long long ms)
{
    loop *l = data;

    if (ms < -1)
        l->bad_hook++;
    l->timer_at_us = ms < 0 ? -1 : (long long)rs_mono_us() + ms * 1000;
}

/* One turn of the loop: waits at most 'max_ms' for a descriptor or the
   timer, and tells the handle. */
static void loop_turn(loop *l, sluice_async *a, int max_ms)
{
    struct pollfd fds[LOOP_FDS];
    int n = l->nfds, wait = max_ms;

    if (l->timer_at_us >= 0) {
        long long left = (l->timer_at_us - (long long)rs_mono_us()) / 1000;

        if (left < wait)
            wait = left < 0 ? 0 : (int)left;
    }
    memcpy(fds, l->fds, sizeof(fds[0]) * (size_t)n);
    if (poll(fds, (nfds_t)n, wait) > 0)
        for (int i = 0; i < n; i++) {
            int ev = (fds[i].revents & (POLLIN | POLLHUP | POLLERR)
                          ? SLUICE_ASYNC_READ
                          : 0) |
                     (fds[i].revents & (POLLOUT | POLLERR)
                          ? SLUICE_ASYNC_WRITE
                          : 0);

            if (ev != 0)
                sluice_async_on_fd(a, fds[i].fd, ev);
        }
    if (l->timer_at_us >= 0 && (long long)rs_mono_us() >= l->timer_at_us) {
        l->timer_at_us = -1;
        sluice_async_on_timer(a);
    }
}

/* Runs the loop until no call is pending, at most 'bound_ms'. */
static int loop_settle(loop *l, sluice_async *a, uint64_t bound_ms)
{
    uint64_t end = rs_mono_us() + bound_ms * 1000;

    while (sluice_async_pending(a) > 0 && rs_mono_us() < end)
        loop_turn(l, a, 50);
    return CHECK(sluice_async_pending(a) == 0);
}

/* Runs the loop for 'ms', whatever is pending. */
static void loop_for(loop *l, sluice_async *a, uint64_t ms)
{
    uint64_t end = rs_mono_us() + ms * 1000;

    while (rs_mono_us() < end)
        loop_turn(l, a, 10);
}

static sluice_async *open_async(loop *l, sluice_store *store)
{
    sluice_async_hooks h = {loop_watch, loop_timer, NULL, l, {NULL, NULL}};
    sluice_async *a = NULL;

    memset(l, 0, sizeof(*l));
    l->timer_at_us = -1;
    if (!CHECK_OK(sluice_async_new(&a, store, &h)))
        exit(2);
    return a;
}

/* ---- What a call answered ------------------------------------------------------------ */

typedef struct answer {
    int calls;  /* callbacks run: exactly 1 */
    int inside; /* of them, run from inside the call that started it */
    int err;
    char msg[256];
    sluice_take_status status;
    uint64_t wait_ms;
    sluice_job job; /* a copy, the payload kept */
    int dead;
} answer;

/* Set while a call is being started, to catch a callback run from inside. */
static int starting;

static void note(answer *w, int err)
{
    w->calls++;
    w->inside += starting;
    w->err = err;
    snprintf(w->msg, sizeof(w->msg), "%s", err < 0 ? sluice_last_error() : "");
}

static void on_take(sluice_async *a, int err, sluice_take_status status,
                    uint64_t wait_ms, sluice_job *job, void *user)
{
    answer *w = user;

    (void)a;
    note(w, err);
    CHECK((err < 0) == (job == NULL));
    w->status = status;
    w->wait_ms = wait_ms;
    if (job != NULL) {
        w->job = *job;
        job->payload = NULL; /* taken: ours to clear (ASan sees a leak) */
    }
}

static void on_done(sluice_async *a, int err, void *user)
{
    (void)a;
    note(user, err);
}

static void on_fail(sluice_async *a, int err, int dead, void *user)
{
    answer *w = user;

    (void)a;
    note(w, err);
    w->dead = dead;
}

/* The blocking call's answer, in the same shape. */
static void blocking(answer *w, int err)
{
    w->calls = 1;
    w->err = err;
    snprintf(w->msg, sizeof(w->msg), "%s", err < 0 ? sluice_last_error() : "");
}

/* The async answer 'x' is the blocking answer 'y' (waits apart). */
static void same(const answer *x, const answer *y, const char *step)
{
    test_context("%s", step);
    CHECK_EQ_U64(x->calls, 1);
    CHECK_EQ_U64(x->inside, 0);
    CHECK_RC(x->err, y->err);
    if (!CHECK(strcmp(x->msg, y->msg) == 0))
        fprintf(stderr, "    async '%s'\n    blocking '%s'\n", x->msg, y->msg);
    CHECK_EQ_U64(x->status, y->status);
    CHECK_EQ_U64(x->job.id, y->job.id);
    CHECK_EQ_U64(x->job.attempt, y->job.attempt);
    CHECK_EQ_U64(x->job.lease, y->job.lease);
    CHECK_EQ_U64(x->job.payload_len, y->job.payload_len);
    CHECK((x->job.payload == NULL) == (y->job.payload == NULL));
    if (x->job.payload != NULL && y->job.payload != NULL)
        CHECK(memcmp(x->job.payload, y->job.payload, x->job.payload_len) == 0);
    CHECK_EQ_U64(x->dead, y->dead);
}

static void answer_clear(answer *w)
{
    sluice_job_clear(&w->job);
    memset(w, 0, sizeof(*w));
}

/* ---- The event of a deferred take ----------------------------------------------------- */

typedef struct deferred_seen {
    int calls;
    double delay_ms;
    char queue[32], limit[32];
} deferred_seen;

static void on_event(const sluice_event *ev, void *payload)
{
    deferred_seen *s = payload;

    s->calls++;
    for (size_t i = 0; i < ev->n_measurements; i++)
        if (strcmp(ev->measurements[i].name, "delay_ms") == 0)
            s->delay_ms = ev->measurements[i].value;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        const sluice_metadata *m = &ev->metadata[i];
        char *dst = strcmp(m->name, "queue") == 0   ? s->queue
                    : strcmp(m->name, "limit") == 0 ? s->limit
                                                    : NULL;

        if (dst != NULL)
            snprintf(dst, 32, "%.*s", (int)m->value_len, m->value);
    }
}

static deferred_seen seen;

/* ---- The cases -------------------------------------------------------------------------- */

#define QA "async-q"
#define QB "blocking-q"
#define CAP_MS 60000

static void twin_setup(void)
{
    const char *const payloads[] = {"first", "second\0bin", "third"};
    const size_t lens[] = {5, 10, 5};

    queue_fresh("twin queues");
    for (int q = 0; q < 2; q++) {
        const char *name = q == 0 ? QA : QB;

        for (int i = 0; i < 3; i++) {
            uint64_t id = 0;

            CHECK_OK(sluice_queue_add(&id, queue_store, name, strlen(name),
                                      payloads[i], lens[i], 0));
            CHECK_EQ_U64(id, (uint64_t)i + 1);
        }
        CHECK_OK(sluice_queue_set_cap(queue_store, name, strlen(name), 2,
                                      CAP_MS));
    }
}

static int start_take(sluice_async *a, const char *q, uint64_t lease_ms,
                      answer *w)
{
    int rc;

    starting = 1;
    rc = sluice_async_queue_take(a, q, strlen(q), lease_ms, on_take, w);
    starting = 0;
    return rc;
}

static void take_blocking(answer *w, const char *q, uint64_t lease_ms)
{
    blocking(w, sluice_queue_take(&w->status, &w->wait_ms, &w->job,
                                  queue_store, q, strlen(q), lease_ms));
}

/* Three takes under a cap of 2, started together (one write): two jobs,
   then DEFERRED with the PTTL and the event. */
static void case_takes(loop *l, sluice_async *a, answer x[3], answer y[3])
{
    char limiter[64];
    size_t len = 0;
    uint64_t t0;

    for (int i = 0; i < 3; i++)
        CHECK_OK(start_take(a, QA, 30000, &x[i]));
    CHECK_EQ_U64(sluice_async_pending(a), 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_U64(x[i].calls, 0); /* never from inside the call */
    seen.calls = 0;
    t0 = rs_mono_us();
    loop_settle(l, a, 5000);
    CHECK(sluice__key_build(limiter, sizeof(limiter), &len, "emq", QA,
                            strlen(QA), "limiter") == limiter);
    limiter[len] = '\0';
    test_context("async deferred take");
    CHECK_EQ_U64(x[2].status, SLUICE_TAKE_DEFERRED);
    CHECK(queue_wait_is_pttl(queue_server, x[2].wait_ms, limiter, t0));
    CHECK(x[2].wait_ms <= CAP_MS);
    CHECK_EQ_U64(seen.calls, 1);
    CHECK(seen.delay_ms == (double)x[2].wait_ms);
    CHECK(strcmp(seen.queue, QA) == 0);
    CHECK(strcmp(seen.limit, "2") == 0);

    t0 = rs_mono_us();
    for (int i = 0; i < 3; i++)
        take_blocking(&y[i], QB, 30000);
    CHECK_EQ_U64(seen.calls, 2); /* the blocking take's own */
    CHECK(strcmp(seen.queue, QB) == 0);
    /* QB's limiter is its own, armed later than QA's: its wait is its own
       PTTL, not comparable with QA's (a ms of rounding either way). */
    CHECK(sluice__key_build(limiter, sizeof(limiter), &len, "emq", QB,
                            strlen(QB), "limiter") == limiter);
    limiter[len] = '\0';
    test_context("blocking deferred take");
    CHECK(queue_wait_is_pttl(queue_server, y[2].wait_ms, limiter, t0));
    test_context(NULL);
    y[2].wait_ms = x[2].wait_ms;
    same(&x[0], &y[0], "take 1");
    same(&x[1], &y[1], "take 2");
    same(&x[2], &y[2], "take 3: deferred");
    CHECK_EQ_U64(x[0].status, SLUICE_TAKE_JOB);
    CHECK(x[1].job.payload_len == 10 &&
          memcmp(x[1].job.payload, "second\0bin", 10) == 0);
}

/* Runs one finish through each API and compares them. */
typedef enum fop { F_COMPLETE, F_FAIL, F_EXTEND } fop;

/* Runs one finish through each API, compares them, and answers the async
   one's error, or 1 for a fail that answered dead. */
static int finish_both(loop *l, sluice_async *a, fop op, const sluice_job *ja,
                       const sluice_job *jb, uint64_t n1, uint64_t n2,
                       const char *step)
{
    answer x = {0}, y = {0};
    int rc;

    starting = 1;
    rc = op == F_COMPLETE
             ? sluice_async_queue_complete(a, QA, strlen(QA), ja->id,
                                           ja->lease, on_done, &x)
         : op == F_FAIL
             ? sluice_async_queue_fail(a, QA, strlen(QA), ja->id, ja->lease,
                                       n1, n2, on_fail, &x)
             : sluice_async_queue_extend(a, QA, strlen(QA), ja->id, ja->lease,
                                         n1, on_done, &x);
    starting = 0;
    test_context("%s", step);
    if (!CHECK_OK(rc))
        return rc;
    loop_settle(l, a, 5000);
    if (op == F_COMPLETE)
        blocking(&y, sluice_queue_complete(queue_store, QB, strlen(QB), jb->id,
                                           jb->lease));
    else if (op == F_FAIL)
        blocking(&y, sluice_queue_fail(&y.dead, queue_store, QB, strlen(QB),
                                       jb->id, jb->lease, n1, n2));
    else
        blocking(&y, sluice_queue_extend(queue_store, QB, strlen(QB), jb->id,
                                         jb->lease, n1));
    same(&x, &y, step);
    return x.err < 0 ? x.err : x.dead;
}

static void case_finish(loop *l, sluice_async *a, answer x[3], answer y[3])
{
    answer tx = {0}, ty = {0};

    CHECK_RC(finish_both(l, a, F_COMPLETE, &x[0].job, &y[0].job, 0, 0,
                         "complete"), 0);
    CHECK_RC(finish_both(l, a, F_COMPLETE, &x[0].job, &y[0].job, 0, 0,
                         "complete again: SLUICE_ELEASE"), SLUICE_ELEASE);
    CHECK_RC(finish_both(l, a, F_EXTEND, &x[1].job, &y[1].job, 45000, 0,
                         "extend"), 0);
    CHECK_RC(finish_both(l, a, F_FAIL, &x[1].job, &y[1].job, 5, 0,
                         "fail: retried"), 0);
    CHECK_RC(finish_both(l, a, F_FAIL, &x[1].job, &y[1].job, 5, 0,
                         "fail again: SLUICE_ELEASE"), SLUICE_ELEASE);
    CHECK_RC(finish_both(l, a, F_EXTEND, &x[1].job, &y[1].job, 1000, 0,
                         "extend a lost lease: SLUICE_ELEASE"), SLUICE_ELEASE);

    /* No cap: the third job, then the retried one (it went to the back of
       the line) as attempt 2, which fails for good; then nothing (EMPTY). */
    CHECK_OK(sluice_queue_set_cap(queue_store, QA, strlen(QA), 0, 0));
    CHECK_OK(sluice_queue_set_cap(queue_store, QB, strlen(QB), 0, 0));
    for (int i = 0; i < 3; i++) {
        static const char *const steps[] = {
            "take the third job", "take the retried job", "take from empty"};

        CHECK_OK(start_take(a, QA, 30000, &tx));
        loop_settle(l, a, 5000);
        take_blocking(&ty, QB, 30000);
        same(&tx, &ty, steps[i]);
        if (i == 0) {
            CHECK_EQ_U64(tx.job.id, 3);
            CHECK_RC(finish_both(l, a, F_COMPLETE, &tx.job, &ty.job, 0, 0,
                                 "complete the third job"), 0);
        } else if (i == 1) {
            CHECK_EQ_U64(tx.job.id, 2);
            CHECK_EQ_U64(tx.job.attempt, 2);
            CHECK_EQ_U64(finish_both(l, a, F_FAIL, &tx.job, &ty.job, 2, 10,
                                     "fail: dead"), 1);
        } else {
            CHECK_EQ_U64(tx.status, SLUICE_TAKE_EMPTY);
            CHECK_EQ_U64(tx.wait_ms, 0);
        }
        answer_clear(&tx);
        answer_clear(&ty);
    }
}

/* Arguments refused before anything starts: no callback, the blocking
   call's code and message. */
static void case_refused(loop *l, sluice_async *a)
{
    answer x = {0}, y = {0};
    char msg[256];
    int rc;

    test_context("refused arguments");
    rc = start_take(a, QA, 0, &x);
    snprintf(msg, sizeof(msg), "%s", sluice_last_error());
    blocking(&y, sluice_queue_take(&y.status, &y.wait_ms, &y.job, queue_store,
                                   QA, strlen(QA), 0));
    CHECK_RC(rc, SLUICE_ERANGE);
    CHECK_RC(y.err, SLUICE_ERANGE);
    CHECK(strcmp(msg, y.msg) == 0);
    CHECK_RC(sluice_async_queue_fail(a, QA, 2, 1, 1, 0, 0, on_fail, &x),
             SLUICE_ERANGE);
    CHECK_RC(sluice_async_queue_extend(a, QA, 2, 1, 1, 0, on_done, &x),
             SLUICE_ERANGE);
    CHECK_RC(sluice_async_queue_take(a, NULL, 3, 1000, on_take, &x),
             SLUICE_EINVAL);
    CHECK_RC(sluice_async_queue_take(a, QA, 2, 1000, NULL, &x), SLUICE_EINVAL);
    CHECK_RC(sluice_async_queue_complete(NULL, QA, 2, 1, 1, on_done, &x),
             SLUICE_EINVAL);
    loop_for(l, a, 20);
    CHECK_EQ_U64(x.calls, 0);
    CHECK_EQ_U64(sluice_async_pending(a), 0);
}

/* On the embedded store: SLUICE_ENOTSUP at once, naming the call. */
static void case_embedded(void)
{
    sluice_store *mem = NULL;
    sluice_async *a;
    answer x = {0};
    loop l;

    test_context("embedded store");
    CHECK_OK(sluice_store_open(&mem, "mem://", NULL));
    if (mem == NULL)
        return;
    a = open_async(&l, mem);
    CHECK_RC(start_take(a, QA, 1000, &x), SLUICE_ENOTSUP);
    CHECK(strstr(sluice_last_error(), "sluice_async_queue_take") != NULL);
    CHECK_RC(sluice_async_queue_complete(a, QA, 2, 1, 1, on_done, &x),
             SLUICE_ENOTSUP);
    loop_for(&l, a, 20);
    CHECK_EQ_U64(x.calls, 0);
    sluice_async_free(a);
    sluice_store_free(mem);
}

/*
 * Freeing the handle with calls pending: some never sent, then some sent
 * to a stalled server (SIGSTOP) and not answered. Each is called back once
 * with SLUICE_ECANCELED.
 */
static void case_free_pending(void)
{
    answer w[6] = {{0}};
    sluice_async *a;
    loop l;

    queue_fresh("free with calls pending");
    for (int i = 0; i < 2; i++) {
        a = open_async(&l, queue_store);
        if (i == 1) {
            /* Connected first, so that the calls below are written. */
            answer c = {0};

            CHECK_OK(start_take(a, QA, 1000, &c));
            loop_settle(&l, a, 5000);
            CHECK_EQ_U64(c.calls, 1);
            answer_clear(&c);
            rs_pause(queue_server);
        }
        CHECK_OK(start_take(a, QA, 1000, &w[3 * i]));
        CHECK_OK(sluice_async_queue_complete(a, QA, 2, 1, 1, on_done,
                                             &w[3 * i + 1]));
        CHECK_OK(sluice_async_queue_fail(a, QA, 2, 1, 1, 3, 0, on_fail,
                                         &w[3 * i + 2]));
        if (i == 1)
            loop_for(&l, a, 200); /* written, never answered */
        CHECK_EQ_U64(sluice_async_pending(a), 3);
        sluice_async_free(a);
        if (i == 1)
            rs_resume(queue_server);
    }
    for (int i = 0; i < 6; i++) {
        test_context("free with calls pending: call %d", i);
        CHECK_EQ_U64(w[i].calls, 1);
        CHECK_RC(w[i].err, SLUICE_ECANCELED);
        CHECK(w[i].job.payload == NULL);
    }
}

int main(int argc, char **argv)
{
    answer x[3] = {{0}}, y[3] = {{0}};
    sluice_async *a;
    loop l;

    if (queue_start("test_async_queue", argc, argv) < 0)
        return 2;
    CHECK_OK(sluice_telemetry_attach("test_async_queue", "emq.rate_limit.hit",
                                     on_event, &seen));
    case_embedded();
    twin_setup();
    a = open_async(&l, queue_store);
    case_refused(&l, a);
    case_takes(&l, a, x, y);
    case_finish(&l, a, x, y);
    CHECK_EQ_U64(l.bad_hook, 0);
    sluice_async_free(a);
    for (int i = 0; i < 3; i++) {
        answer_clear(&x[i]);
        answer_clear(&y[i]);
    }
    case_free_pending();
    queue_stop();
    return test_summary("test_async_queue");
}
