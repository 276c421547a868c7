/*
 * sluice/adapters/libev.h - a sluice_async handle on a libev loop,
 * header-only: one ev_io per watched descriptor, one ev_timer.
 *
 *     sluice_async *a;
 *     if (sluice_async_ev_new(&a, store, EV_DEFAULT) != SLUICE_OK) ...
 *     sluice_async_hit(a, &limit, "k", 1, 1, on_decision, NULL);
 *     ev_run(EV_DEFAULT, 0);
 *
 * libev's watchers are stopped at once: sluice_async_free() leaves nothing
 * behind on the loop.
 */
#ifndef SLUICE_INCLUDE_ADAPTERS_LIBEV_H
#define SLUICE_INCLUDE_ADAPTERS_LIBEV_H

#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "../async.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice__ev;

/* One watched descriptor: its ev_io, on the adapter's list. The io is the
   first member, so libev's watcher pointer is the watch's. */
typedef struct sluice__ev_watch {
    ev_io io;
    struct sluice__ev *ad;
    struct sluice__ev_watch *next;
} sluice__ev_watch;

typedef struct sluice__ev {
    struct ev_loop *loop;
    sluice_async *a;
    ev_timer timer; /* data: the adapter */
    sluice__ev_watch *watches;
} sluice__ev;

static inline void sluice__ev_on_io(struct ev_loop *loop, ev_io *io,
                                    int revents) {
    sluice__ev_watch *w = (sluice__ev_watch *)io;
    int events = 0;
    (void)loop;
    if (revents & EV_READ) events |= SLUICE_ASYNC_READ;
    if (revents & EV_WRITE) events |= SLUICE_ASYNC_WRITE;
    /* EV_ERROR: libev stopped the watcher; the handle's read or write
       meets the descriptor's fault. */
    if (revents & EV_ERROR) events = SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE;
    if (w->ad->a != NULL) sluice_async_on_fd(w->ad->a, io->fd, events);
}

static inline void sluice__ev_on_timer(struct ev_loop *loop, ev_timer *t,
                                       int revents) {
    sluice__ev *ad = (sluice__ev *)t->data;
    (void)loop;
    (void)revents;
    if (ad->a != NULL) sluice_async_on_timer(ad->a);
}

static inline void sluice__ev_unwatch(sluice__ev *ad,
                                      sluice__ev_watch **link) {
    sluice__ev_watch *w = *link;
    *link = w->next;
    ev_io_stop(ad->loop, &w->io);
    free(w);
}

/* The watch hook: 'fd' watched for 'events' in place of what it was (an
   ev_io is stopped, set and started again), or (0) stopped and freed. */
static inline void sluice__ev_watch_fd(void *data, int fd, int events) {
    sluice__ev *ad = (sluice__ev *)data;
    sluice__ev_watch **link = &ad->watches;
    while (*link != NULL && (*link)->io.fd != fd) link = &(*link)->next;
    if (events == 0) {
        if (*link != NULL) sluice__ev_unwatch(ad, link);
        return;
    }
    int what = 0;
    if (events & SLUICE_ASYNC_READ) what |= EV_READ;
    if (events & SLUICE_ASYNC_WRITE) what |= EV_WRITE;
    sluice__ev_watch *w = *link;
    if (w == NULL) {
        /* Out of memory leaves it unwatched: the handle's deadline still
           ends the calls on it. */
        w = (sluice__ev_watch *)calloc(1, sizeof(*w));
        if (w == NULL) return;
        ev_io_init(&w->io, sluice__ev_on_io, fd, what);
        w->ad = ad;
        w->next = ad->watches;
        ad->watches = w;
    } else {
        if (w->io.events == what && ev_is_active(&w->io)) return;
        ev_io_stop(ad->loop, &w->io);
        ev_io_set(&w->io, fd, what);
    }
    ev_io_start(ad->loop, &w->io);
}

/* The timer hook: one timer, due 'ms' from now, or (-1) stopped. */
static inline void sluice__ev_timer(void *data, long long ms) {
    sluice__ev *ad = (sluice__ev *)data;
    ev_timer_stop(ad->loop, &ad->timer);
    if (ms < 0) return;
    /* ev_now() is the loop's cached time, possibly stale by a callback's
       run: the timer counts from now. */
    ev_now_update(ad->loop);
    ev_timer_set(&ad->timer, (ev_tstamp)ms / 1000.0, 0.0);
    ev_timer_start(ad->loop, &ad->timer);
}

static inline void sluice__ev_cleanup(void *data) {
    sluice__ev *ad = (sluice__ev *)data;
    while (ad->watches != NULL) sluice__ev_unwatch(ad, &ad->watches);
    ev_timer_stop(ad->loop, &ad->timer);
    free(ad);
}

/*
 * Opens a handle over 'store' on 'loop'. What sluice_async_new() answers,
 * or SLUICE_ENOMEM.
 */
static inline int sluice_async_ev_new(sluice_async **out, sluice_store *store,
                                      struct ev_loop *loop) {
    sluice__ev *ad = (sluice__ev *)calloc(1, sizeof(*ad));
    if (ad == NULL) return SLUICE_ENOMEM;
    ad->loop = loop;
    ev_timer_init(&ad->timer, sluice__ev_on_timer, 0.0, 0.0);
    ad->timer.data = ad;
    sluice_async_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.watch = sluice__ev_watch_fd;
    hooks.timer = sluice__ev_timer;
    hooks.cleanup = sluice__ev_cleanup;
    hooks.loop_data = ad;
    int rc = sluice_async_new(out, store, &hooks);
    if (rc != SLUICE_OK) {
        sluice__ev_cleanup(ad);
        return rc;
    }
    ad->a = *out;
    return SLUICE_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_ADAPTERS_LIBEV_H */
