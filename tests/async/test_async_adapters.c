/*
 * test_async_adapters.c - the four loop adapters (sluice/adapters/: poll,
 * libuv, libevent, libev) drive a sluice_async handle to the blocking
 * API's decisions.
 *
 * One adapter per program, named by SLUICE_TEST_LIBUV, _LIBEVENT or
 * _LIBEV (none: poll.h), as libevent's and libev's headers cannot meet in
 * one file (both define EV_READ): test_async_adapters_ADAPTER, built for
 * each library CMake finds. For the adapter:
 *   - a seeded trace of hits and peeks, started in batches (calls in
 *     flight together), gives the decisions sluice_hit()/sluice_peek()
 *     give on a second store of the same kind, key by key;
 *   - 500 calls in flight at once on one key under a limit of 250: each
 *     called back once, 250 admitted;
 *   - the handle freed with 100 calls pending: each called back once with
 *     SLUICE_ECANCELED, and the adapter frees what it kept (ASan says if
 *     not);
 * and on libuv, the store shared with a thread calling sluice_hit() while
 * the loop runs (TSan says if they race): together they admit the limit.
 *
 * With no argument the store is the embedded one (label async); with
 * --server, a private redis-server's (label server).
 */
#include "server.h"
#include "test.h"
#include "rng.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(SLUICE_TEST_LIBUV) && !defined(SLUICE_TEST_LIBEVENT) && \
    !defined(SLUICE_TEST_LIBEV)
#define SLUICE_TEST_POLL
#include "sluice/adapters/poll.h"
#endif
#ifdef SLUICE_TEST_LIBUV
#include "sluice/adapters/libuv.h"
#endif
#ifdef SLUICE_TEST_LIBEVENT
#include "sluice/adapters/libevent.h"
#endif
#ifdef SLUICE_TEST_LIBEV
#include "sluice/adapters/libev.h"
#endif

#define TRACE_STEPS 400
#define TRACE_KEYS 6
#define BATCH_MAX 8
#define FLIGHT 500
#define CANCELLED 100

static rs_server server;
static const char *store_url = "mem://";

/* ---- The adapters, behind one face ------------------------------------------- */

typedef struct driver {
    const char *name;
    int (*open)(struct driver *d, sluice_async **a, sluice_store *s);
    /* One turn of the loop, waiting for something to happen. */
    void (*turn)(struct driver *d);
    /* After sluice_async_free(): what the loop must still do, then close. */
    void (*close)(struct driver *d);
    void *loop;
#ifdef SLUICE_TEST_POLL
    sluice_poll_loop poll;
#endif
} driver;

#ifdef SLUICE_TEST_POLL
/* The handle being drained: sluice_poll_run() is given it. */
static sluice_async *current;

static int poll_open(driver *d, sluice_async **a, sluice_store *s)
{
    d->loop = NULL;
    return sluice_async_poll_new(a, s, &d->poll);
}
static void poll_turn(driver *d)
{
    /* A bound on the wait, so a handle that asks for nothing fails the
       test (its pending calls never end) rather than hanging it. */
    CHECK(sluice_poll_run(&d->poll, current, 5000) >= 0);
}
static void poll_close(driver *d) { (void)d; }
#endif

#ifdef SLUICE_TEST_LIBUV
/* The loop, and a guard timer: UV_RUN_ONCE runs due timers first and then
   waits for I/O, so a turn whose timer answered the last call would wait
   for ever on the descriptor still watched; the guard ends that wait. */
typedef struct uv_driver {
    uv_loop_t loop;
    uv_timer_t guard;
} uv_driver;

static void uv_guard_fired(uv_timer_t *t) { (void)t; }

static int uv_open(driver *d, sluice_async **a, sluice_store *s)
{
    uv_driver *u = malloc(sizeof(*u));

    uv_loop_init(&u->loop);
    uv_timer_init(&u->loop, &u->guard);
    d->loop = u;
    return sluice_async_uv_new(a, s, &u->loop);
}
static void uv_turn(driver *d)
{
    uv_driver *u = d->loop;

    uv_timer_start(&u->guard, uv_guard_fired, 50, 0);
    uv_run(&u->loop, UV_RUN_ONCE);
    uv_timer_stop(&u->guard);
}
static void uv_close_loop(driver *d)
{
    uv_driver *u = d->loop;

    /* The close callbacks free the adapter: the loop runs them. */
    uv_close((uv_handle_t *)&u->guard, NULL);
    uv_run(&u->loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&u->loop) == 0);
    free(u);
}
#endif

#ifdef SLUICE_TEST_LIBEVENT
static int event_open(driver *d, sluice_async **a, sluice_store *s)
{
    d->loop = event_base_new();
    return sluice_async_event_new(a, s, d->loop);
}
static void event_turn(driver *d) { event_base_loop(d->loop, EVLOOP_ONCE); }
static void event_close(driver *d) { event_base_free(d->loop); }
#endif

#ifdef SLUICE_TEST_LIBEV
static int ev_open(driver *d, sluice_async **a, sluice_store *s)
{
    d->loop = ev_loop_new(EVFLAG_AUTO);
    return sluice_async_ev_new(a, s, d->loop);
}
static void ev_turn(driver *d) { ev_run(d->loop, EVRUN_ONCE); }
static void ev_close(driver *d) { ev_loop_destroy(d->loop); }
#endif

static driver drivers[] = {
#if defined(SLUICE_TEST_LIBUV)
    {.name = "libuv", .open = uv_open, .turn = uv_turn, .close = uv_close_loop},
#elif defined(SLUICE_TEST_LIBEVENT)
    {.name = "libevent", .open = event_open, .turn = event_turn,
     .close = event_close},
#elif defined(SLUICE_TEST_LIBEV)
    {.name = "libev", .open = ev_open, .turn = ev_turn, .close = ev_close},
#else
    {.name = "poll", .open = poll_open, .turn = poll_turn, .close = poll_close},
#endif
};

static void drain(driver *d, sluice_async *a)
{
#ifdef SLUICE_TEST_POLL
    current = a;
#endif
    for (int turns = 0; sluice_async_pending(a) > 0; turns++) {
        if (turns > 100000) {
            CHECK(!"calls still pending after 100000 turns of the loop");
            return;
        }
        d->turn(d);
    }
}

/* ---- Callbacks that count -------------------------------------------------- */

typedef struct answer {
    int calls; /* how many times called back: must be 1 */
    int err;
    sluice_decision d;
} answer;

static void on_decision(sluice_async *a, int err, const sluice_decision *d,
                        void *user)
{
    answer *ans = user;
    (void)a;
    ans->calls++;
    ans->err = err;
    if (d != NULL)
        ans->d = *d;
}

static sluice_store *open_store(void)
{
    sluice_store *s = NULL;
    if (sluice_store_open(&s, store_url, NULL) != SLUICE_OK) {
        CHECK(!"the store opens");
        return NULL;
    }
    return s;
}

/* ---- The trace --------------------------------------------------------------- */

typedef struct step {
    int peek, key;
    uint64_t cost;
} step;

static void make_key(char *out, size_t cap, const char *who, int key)
{
    snprintf(out, cap, "ad:%s:%s:k%d", who, store_url, key);
}

/* The blocking API's answers to the trace, on a store of its own. */
static void trace_blocking(const step *t, int n, const sluice_limit *lim,
                           const char *who, answer *out)
{
    sluice_store *s = open_store();
    char key[128];
    if (s == NULL)
        return;
    for (int i = 0; i < n; i++) {
        make_key(key, sizeof(key), who, t[i].key);
        int (*call)(sluice_decision *, sluice_store *, const sluice_limit *,
                    const char *, size_t, uint64_t) =
            t[i].peek ? sluice_peek : sluice_hit;
        out[i].err = call(&out[i].d, s, lim, key, strlen(key), t[i].cost);
        out[i].calls = 1;
    }
    sluice_store_free(s);
}

/* The same trace through 'd', BATCH_MAX calls at most in flight at once. */
static void trace_async(driver *d, const step *t, int n,
                        const sluice_limit *lim, answer *out)
{
    sluice_store *s = open_store();
    sluice_async *a = NULL;
    char key[128];
    if (s == NULL || !CHECK_OK(d->open(d, &a, s)))
        goto done;
    for (int i = 0; i < n;) {
        int batch = 1 + (int)rng_below(BATCH_MAX);
        for (int j = 0; j < batch && i < n; j++, i++) {
            make_key(key, sizeof(key), d->name, t[i].key);
            CHECK_OK((t[i].peek ? sluice_async_peek : sluice_async_hit)(
                a, lim, key, strlen(key), t[i].cost, on_decision, &out[i]));
        }
        drain(d, a);
    }
    sluice_async_free(a);
    d->close(d);
done:
    sluice_store_free(s);
}

static void test_trace(driver *d, uint64_t seed)
{
    static step t[TRACE_STEPS];
    static answer want[TRACE_STEPS], got[TRACE_STEPS];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 3600 * 1000);
    char who[64];

    rng_state = seed;
    memset(want, 0, sizeof(want));
    memset(got, 0, sizeof(got));
    for (int i = 0; i < TRACE_STEPS; i++) {
        t[i].peek = rng_below(4) == 0;
        t[i].key = (int)rng_below(TRACE_KEYS);
        t[i].cost = rng_range(1, 3);
    }
    snprintf(who, sizeof(who), "block-%s", d->name);
    trace_blocking(t, TRACE_STEPS, &lim, who, want);
    trace_async(d, t, TRACE_STEPS, &lim, got);
    for (int i = 0; i < TRACE_STEPS; i++) {
        test_context("%s trace step %d (%s key %d cost %llu)", d->name, i,
                     t[i].peek ? "peek" : "hit", t[i].key,
                     (unsigned long long)t[i].cost);
        CHECK(got[i].calls == 1);
        CHECK_RC(got[i].err, want[i].err);
        CHECK(got[i].d.allowed == want[i].d.allowed);
        CHECK_EQ_U64(got[i].d.remaining, want[i].d.remaining);
        CHECK((got[i].d.retry_after_ms > 0) == (want[i].d.retry_after_ms > 0));
    }
    test_context(NULL);
}

/* ---- Many in flight, and a handle freed with calls pending --------------------- */

static void test_flight(driver *d)
{
    static answer ans[FLIGHT];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, FLIGHT / 2, 3600 * 1000);
    sluice_store *s = open_store();
    sluice_async *a = NULL;
    char key[128];
    int allowed = 0, once = 0;

    memset(ans, 0, sizeof(ans));
    make_key(key, sizeof(key), d->name, 99);
    if (s == NULL || !CHECK_OK(d->open(d, &a, s)))
        goto done;
    for (int i = 0; i < FLIGHT; i++)
        CHECK_OK(sluice_async_hit(a, &lim, key, strlen(key), 1, on_decision,
                                  &ans[i]));
    CHECK(sluice_async_pending(a) == FLIGHT);
    drain(d, a);
    for (int i = 0; i < FLIGHT; i++) {
        once += ans[i].calls == 1 && ans[i].err == SLUICE_OK;
        allowed += ans[i].d.allowed;
    }
    test_context("%s, %d calls in flight", d->name, FLIGHT);
    CHECK(once == FLIGHT);
    CHECK(allowed == FLIGHT / 2);
    test_context(NULL);
    sluice_async_free(a);
    d->close(d);
done:
    sluice_store_free(s);
}

static void test_free_pending(driver *d)
{
    static answer ans[CANCELLED];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, 10, 3600 * 1000);
    sluice_store *s = open_store();
    sluice_async *a = NULL;
    char key[128];
    int cancelled = 0;

    memset(ans, 0, sizeof(ans));
    if (s == NULL || !CHECK_OK(d->open(d, &a, s)))
        goto done;
    for (int i = 0; i < CANCELLED; i++) {
        make_key(key, sizeof(key), d->name, 100 + i % 7);
        CHECK_OK(sluice_async_hit(a, &lim, key, strlen(key), 1, on_decision,
                                  &ans[i]));
    }
    /* No turn of the loop: every call is still pending. */
    sluice_async_free(a);
    for (int i = 0; i < CANCELLED; i++)
        cancelled += ans[i].calls == 1 && ans[i].err == SLUICE_ECANCELED;
    test_context("%s, freed with %d pending", d->name, CANCELLED);
    CHECK(cancelled == CANCELLED);
    test_context(NULL);
    d->close(d);
done:
    sluice_store_free(s);
}

/* ---- libuv with the store shared by a blocking thread -------------------------- */

#ifdef SLUICE_TEST_LIBUV
#define SHARED_MAX 300

typedef struct blocking_side {
    sluice_store *s;
    const char *key;
    int allowed;
} blocking_side;

static void *hit_blocking(void *arg)
{
    blocking_side *b = arg;
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, SHARED_MAX, 3600 * 1000);
    sluice_decision dec;
    for (int i = 0; i < SHARED_MAX; i++) {
        if (sluice_hit(&dec, b->s, &lim, b->key, strlen(b->key), 1) ==
            SLUICE_OK)
            b->allowed += dec.allowed;
    }
    return NULL;
}

static void test_uv_shared(driver *d)
{
    static answer ans[SHARED_MAX];
    sluice_limit lim = SLUICE_LIMIT(SLUICE_FIXED, SHARED_MAX, 3600 * 1000);
    char key[128];
    blocking_side b = {.s = open_store(), .key = key};
    sluice_async *a = NULL;
    pthread_t th;
    int allowed = 0;

    memset(ans, 0, sizeof(ans));
    make_key(key, sizeof(key), "shared", 0);
    if (b.s == NULL || !CHECK_OK(d->open(d, &a, b.s)))
        goto done;
    CHECK(pthread_create(&th, NULL, hit_blocking, &b) == 0);
    for (int i = 0; i < SHARED_MAX; i++) {
        CHECK_OK(sluice_async_hit(a, &lim, key, strlen(key), 1, on_decision,
                                  &ans[i]));
        if (i % 16 == 15)
            drain(d, a);
    }
    drain(d, a);
    pthread_join(th, NULL);
    for (int i = 0; i < SHARED_MAX; i++)
        allowed += ans[i].d.allowed;
    test_context("libuv and a blocking thread on one store");
    CHECK(allowed + b.allowed == SHARED_MAX);
    test_context(NULL);
    sluice_async_free(a);
    d->close(d);
done:
    sluice_store_free(b.s);
}
#endif

int main(int argc, char **argv)
{
    int on_server = argc > 1 && strcmp(argv[1], "--server") == 0;
    uint64_t seed = test_seed(0, NULL, 0, 22);

    (void)argv;
    if (on_server) {
        if (rs_start(&server, NULL) < 0) {
            fprintf(stderr, "test_async_adapters: cannot start redis-server\n");
            return 1;
        }
        store_url = server.url;
    }
    printf("test_async_adapters: store %s, seed %llu\n", store_url,
           (unsigned long long)seed);
    for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++) {
        printf("  adapter %s\n", drivers[i].name);
        test_trace(&drivers[i], seed + i);
        test_flight(&drivers[i]);
        test_free_pending(&drivers[i]);
#ifdef SLUICE_TEST_LIBUV
        if (drivers[i].turn == uv_turn)
            test_uv_shared(&drivers[i]);
#endif
    }
    if (on_server)
        rs_stop(&server);
    return test_summary("test_async_adapters");
}
