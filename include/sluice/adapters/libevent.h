/*
 * sluice/adapters/libevent.h - a sluice_async handle on a libevent
 * event_base, header-only: one persistent event per watched descriptor,
 * one timer event.
 *
 *     sluice_async *a;
 *     if (sluice_async_event_new(&a, store, base) != SLUICE_OK) ...
 *     sluice_async_hit(a, &limit, "k", 1, 1, on_decision, NULL);
 *     event_base_dispatch(base);
 *
 * libevent frees events at once: sluice_async_free() leaves nothing
 * behind on the base.
 */
#ifndef SLUICE_INCLUDE_ADAPTERS_LIBEVENT_H
#define SLUICE_INCLUDE_ADAPTERS_LIBEVENT_H

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "../async.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice__ev2;

/* One watched descriptor: its event, on the adapter's list. */
typedef struct sluice__ev2_watch {
    struct event *ev;
    int fd;
    int events; /* SLUICE_ASYNC_* it is watched for */
    struct sluice__ev2 *ad;
    struct sluice__ev2_watch *next;
} sluice__ev2_watch;

typedef struct sluice__ev2 {
    struct event_base *base;
    sluice_async *a;
    struct event *timer;
    sluice__ev2_watch *watches;
} sluice__ev2;

static inline void sluice__ev2_on_fd(evutil_socket_t fd, short what,
                                     void *arg) {
    sluice__ev2_watch *w = (sluice__ev2_watch *)arg;
    int events = 0;
    (void)fd;
    if (what & EV_READ) events |= SLUICE_ASYNC_READ;
    if (what & EV_WRITE) events |= SLUICE_ASYNC_WRITE;
    if (w->ad->a != NULL) sluice_async_on_fd(w->ad->a, w->fd, events);
}

static inline void sluice__ev2_on_timer(evutil_socket_t fd, short what,
                                        void *arg) {
    sluice__ev2 *ad = (sluice__ev2 *)arg;
    (void)fd;
    (void)what;
    if (ad->a != NULL) sluice_async_on_timer(ad->a);
}

/* An event's interest cannot change while it is added: a watch whose
   events change gets a new event in place of its old one. */
static inline int sluice__ev2_arm(sluice__ev2_watch *w, int events) {
    short what = EV_PERSIST;
    if (events & SLUICE_ASYNC_READ) what |= EV_READ;
    if (events & SLUICE_ASYNC_WRITE) what |= EV_WRITE;
    if (w->ev != NULL) event_free(w->ev);
    w->ev = event_new(w->ad->base, w->fd, what, sluice__ev2_on_fd, w);
    w->events = events;
    return w->ev != NULL && event_add(w->ev, NULL) == 0;
}

static inline void sluice__ev2_unwatch(sluice__ev2_watch **link) {
    sluice__ev2_watch *w = *link;
    *link = w->next;
    if (w->ev != NULL) event_free(w->ev); /* event_free deletes it first */
    free(w);
}

/* The watch hook: 'fd' watched for 'events' in place of what it was, or
   (0) its event freed. A failure leaves it unwatched: the handle's
   deadline still ends the calls on it. */
static inline void sluice__ev2_watch_fd(void *data, int fd, int events) {
    sluice__ev2 *ad = (sluice__ev2 *)data;
    sluice__ev2_watch **link = &ad->watches;
    while (*link != NULL && (*link)->fd != fd) link = &(*link)->next;
    if (events == 0) {
        if (*link != NULL) sluice__ev2_unwatch(link);
        return;
    }
    if (*link != NULL && (*link)->events == events) return;
    if (*link == NULL) {
        sluice__ev2_watch *w = (sluice__ev2_watch *)calloc(1, sizeof(*w));
        if (w == NULL) return;
        w->fd = fd;
        w->ad = ad;
        w->next = ad->watches;
        ad->watches = w;
        link = &ad->watches;
    }
    if (!sluice__ev2_arm(*link, events)) sluice__ev2_unwatch(link);
}

/* The timer hook: one timer, due 'ms' from now, or (-1) deleted. */
static inline void sluice__ev2_timer(void *data, long long ms) {
    sluice__ev2 *ad = (sluice__ev2 *)data;
    if (ms < 0) {
        event_del(ad->timer);
        return;
    }
    struct timeval tv;
    tv.tv_sec = (long)(ms / 1000);
    tv.tv_usec = (long)(ms % 1000) * 1000;
    event_add(ad->timer, &tv);
}

static inline void sluice__ev2_cleanup(void *data) {
    sluice__ev2 *ad = (sluice__ev2 *)data;
    while (ad->watches != NULL) sluice__ev2_unwatch(&ad->watches);
    event_free(ad->timer);
    free(ad);
}

/*
 * Opens a handle over 'store' on 'base'. What sluice_async_new() answers,
 * or SLUICE_ENOMEM.
 */
static inline int sluice_async_event_new(sluice_async **out,
                                         sluice_store *store,
                                         struct event_base *base) {
    sluice__ev2 *ad = (sluice__ev2 *)calloc(1, sizeof(*ad));
    if (ad == NULL) return SLUICE_ENOMEM;
    ad->base = base;
    ad->timer = evtimer_new(base, sluice__ev2_on_timer, ad);
    if (ad->timer == NULL) {
        free(ad);
        return SLUICE_ENOMEM;
    }
    sluice_async_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.watch = sluice__ev2_watch_fd;
    hooks.timer = sluice__ev2_timer;
    hooks.cleanup = sluice__ev2_cleanup;
    hooks.loop_data = ad;
    int rc = sluice_async_new(out, store, &hooks);
    if (rc != SLUICE_OK) {
        sluice__ev2_cleanup(ad);
        return rc;
    }
    ad->a = *out;
    return SLUICE_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_ADAPTERS_LIBEVENT_H */
