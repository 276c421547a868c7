/*
 * sluice/adapters/poll.h - a sluice_async handle for a program with no
 * event loop: a small loop over poll(2), header-only.
 *
 *     sluice_poll_loop loop;
 *     sluice_async *a;
 *     if (sluice_async_poll_new(&a, store, &loop) != SLUICE_OK) ...
 *     sluice_async_hit(a, &limit, "k", 1, 1, on_decision, NULL);
 *     sluice_poll_drain(&loop, a);     // until every callback has run
 *     sluice_async_free(a);            // also frees what the loop keeps
 *
 * The loop object is the caller's (on the stack, or inside its own
 * struct) and serves one handle; it must outlive the handle. It keeps the
 * descriptors the handle watches and the one timer it asked for, and
 * sluice_poll_run() waits for either, then tells the handle. A program
 * that runs a poll() loop of its own can instead fill the hooks itself
 * (sluice/async.h): this file is the example of how.
 *
 * poll() and clock_gettime() are POSIX: the program compiles with them
 * declared (e.g. _POSIX_C_SOURCE 200809L before its first #include).
 */
#ifndef SLUICE_INCLUDE_ADAPTERS_POLL_H
#define SLUICE_INCLUDE_ADAPTERS_POLL_H

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../async.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_poll_loop {
    struct pollfd *fds; /* the watched descriptors, in poll()'s terms */
    size_t nfds;
    size_t cap;
    long long timer_due_ms; /* on the monotonic clock; -1: no timer */
} sluice_poll_loop;

/* The monotonic clock in milliseconds: the timer's due time is on it, so
   a wall clock set back or forward moves no deadline. */
static inline long long sluice__poll_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline short sluice__poll_events(int events) {
    short ev = 0;
    if (events & SLUICE_ASYNC_READ) ev |= POLLIN;
    if (events & SLUICE_ASYNC_WRITE) ev |= POLLOUT;
    return ev;
}

/*
 * The watch hook: 'fd' watched for 'events' in place of what it was, or
 * (0) dropped. Dropping swaps the last entry into its place, so the array
 * stays dense for poll(). A failed realloc leaves the fd unwatched: the
 * handle's deadline (its timer) still ends the calls on it.
 */
static inline void sluice__poll_watch(void *data, int fd, int events) {
    sluice_poll_loop *loop = (sluice_poll_loop *)data;
    size_t i;
    for (i = 0; i < loop->nfds && loop->fds[i].fd != fd; i++) {}
    if (events == 0) {
        if (i < loop->nfds) loop->fds[i] = loop->fds[--loop->nfds];
        return;
    }
    if (i == loop->nfds) {
        if (loop->nfds == loop->cap) {
            size_t cap = loop->cap ? loop->cap * 2 : 8;
            struct pollfd *fds = (struct pollfd *)realloc(
                loop->fds, cap * sizeof(*fds));
            if (fds == NULL) return;
            loop->fds = fds;
            loop->cap = cap;
        }
        loop->nfds++;
        loop->fds[i].fd = fd;
    }
    loop->fds[i].events = sluice__poll_events(events);
    loop->fds[i].revents = 0;
}

/* The timer hook: one timer, due 'ms' from now, or (-1) none. */
static inline void sluice__poll_timer(void *data, long long ms) {
    sluice_poll_loop *loop = (sluice_poll_loop *)data;
    loop->timer_due_ms = ms < 0 ? -1 : sluice__poll_now_ms() + ms;
}

/* The cleanup hook: the handle is gone, so is what the loop kept. The
   loop object itself is the caller's; it is left empty, ready for reuse. */
static inline void sluice__poll_cleanup(void *data) {
    sluice_poll_loop *loop = (sluice_poll_loop *)data;
    free(loop->fds);
    memset(loop, 0, sizeof(*loop));
    loop->timer_due_ms = -1;
}

/*
 * Opens a handle over 'store' whose hooks are 'loop' (initialized here;
 * what it held before is not freed). What sluice_async_new() answers.
 */
static inline int sluice_async_poll_new(sluice_async **out,
                                        sluice_store *store,
                                        sluice_poll_loop *loop) {
    sluice_async_hooks hooks;
    memset(loop, 0, sizeof(*loop));
    loop->timer_due_ms = -1;
    memset(&hooks, 0, sizeof(hooks));
    hooks.watch = sluice__poll_watch;
    hooks.timer = sluice__poll_timer;
    hooks.cleanup = sluice__poll_cleanup;
    hooks.loop_data = loop;
    int rc = sluice_async_new(out, store, &hooks);
    /* A handle that failed to open ran no cleanup; what it may have
       watched on its way is freed here. */
    if (rc != SLUICE_OK) sluice__poll_cleanup(loop);
    return rc;
}

/* poll()'s wait: the timer's, or 'max_wait_ms' if sooner (-1: no bound). */
static inline int sluice__poll_wait_ms(const sluice_poll_loop *loop,
                                       int max_wait_ms) {
    if (loop->timer_due_ms < 0) return max_wait_ms;
    long long left = loop->timer_due_ms - sluice__poll_now_ms();
    if (left < 0) left = 0;
    if (max_wait_ms >= 0 && left > max_wait_ms) left = max_wait_ms;
    return left > 1000000000 ? 1000000000 : (int)left;
}

/* The handle's terms for what poll() saw. An error or a hang-up is told as
   readiness for what was watched, so the handle's read or write meets it
   and reports it. */
static inline int sluice__poll_ready(const struct pollfd *p) {
    int events = 0;
    if (p->revents & POLLIN) events |= SLUICE_ASYNC_READ;
    if (p->revents & POLLOUT) events |= SLUICE_ASYNC_WRITE;
    if (p->revents & (POLLERR | POLLHUP | POLLNVAL)) {
        if (p->events & POLLIN) events |= SLUICE_ASYNC_READ;
        if (p->events & POLLOUT) events |= SLUICE_ASYNC_WRITE;
    }
    return events;
}

/*
 * Tells the handle of every descriptor poll() found ready. The ready ones
 * are copied out first: the handle's on_fd() calls the watch hook, which
 * moves entries and may reallocate the array. A copied fd the handle has
 * stopped watching since is one it ignores (sluice/async.h).
 */
static inline int sluice__poll_dispatch(sluice_poll_loop *loop,
                                        sluice_async *a, int ready) {
    struct pollfd stack[16];
    struct pollfd *copy = stack;
    int n = 0;
    if ((size_t)ready > sizeof(stack) / sizeof(stack[0])) {
        copy = (struct pollfd *)malloc((size_t)ready * sizeof(*copy));
        if (copy == NULL) return SLUICE_ENOMEM;
    }
    for (size_t i = 0; i < loop->nfds && n < ready; i++) {
        if (loop->fds[i].revents != 0) copy[n++] = loop->fds[i];
    }
    for (int i = 0; i < n; i++) {
        int events = sluice__poll_ready(&copy[i]);
        if (events != 0) sluice_async_on_fd(a, copy[i].fd, events);
    }
    if (copy != stack) free(copy);
    return n;
}

/*
 * One iteration: waits until a watched descriptor is ready, the handle's
 * timer is due, or 'max_wait_ms' has passed (-1: no bound; 0: no wait),
 * then tells the handle. Answers how many descriptors and timers it told
 * of (0: the wait ended with nothing), SLUICE_ENOMEM, or SLUICE_EINVAL
 * when poll() itself failed (errno says why). A signal ending the wait
 * early is not a failure: it answers 0.
 */
static inline int sluice_poll_run(sluice_poll_loop *loop, sluice_async *a,
                                  int max_wait_ms) {
    int wait_ms = sluice__poll_wait_ms(loop, max_wait_ms);
    int ready = poll(loop->fds, (nfds_t)loop->nfds, wait_ms);
    if (ready < 0) return errno == EINTR ? 0 : SLUICE_EINVAL;
    int told = ready > 0 ? sluice__poll_dispatch(loop, a, ready) : 0;
    if (told < 0) return told;
    /* The timer is cleared before it is told: on_timer() usually asks for
       the next one, which must not be wiped out after it. */
    if (loop->timer_due_ms >= 0 &&
        sluice__poll_now_ms() >= loop->timer_due_ms) {
        loop->timer_due_ms = -1;
        sluice_async_on_timer(a);
        told++;
    }
    return told;
}

/*
 * Runs iterations until every call started on 'a' has been called back
 * (sluice_async_pending() is 0), calls the callbacks start included.
 * SLUICE_OK, what sluice_poll_run() failed with, or SLUICE_EINVAL if calls
 * are pending while the handle waits on no descriptor and no timer (they
 * could never end: a bug in the handle, not a reason to hang).
 */
static inline int sluice_poll_drain(sluice_poll_loop *loop,
                                    sluice_async *a) {
    while (sluice_async_pending(a) > 0) {
        if (loop->nfds == 0 && loop->timer_due_ms < 0) return SLUICE_EINVAL;
        int rc = sluice_poll_run(loop, a, -1);
        if (rc < 0) return rc;
    }
    return SLUICE_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_ADAPTERS_POLL_H */
