/*
 * sluice/adapters/libuv.h - a sluice_async handle on a libuv loop,
 * header-only: one uv_poll_t per watched descriptor, one uv_timer_t.
 *
 *     sluice_async *a;
 *     if (sluice_async_uv_new(&a, store, uv_default_loop()) != SLUICE_OK)
 *         ...
 *     sluice_async_hit(a, &limit, "k", 1, 1, on_decision, NULL);
 *     uv_run(uv_default_loop(), UV_RUN_DEFAULT);
 *
 * libuv closes handles asynchronously: after sluice_async_free() the
 * adapter's memory is freed by the close callbacks, at the loop's next
 * turn, so run the loop once more (uv_run) before uv_loop_close().
 *
 * A uv_poll_t must be stopped before its descriptor is closed (libuv's
 * rule): the handle calls watch(fd, 0) right before it closes one, and the
 * poll is closed there.
 */
#ifndef SLUICE_INCLUDE_ADAPTERS_LIBUV_H
#define SLUICE_INCLUDE_ADAPTERS_LIBUV_H

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../async.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sluice__uv;

/* One watched descriptor: its poll handle, on the adapter's list. */
typedef struct sluice__uv_watch {
    uv_poll_t poll;
    int fd;
    struct sluice__uv *uv;
    struct sluice__uv_watch *next;
} sluice__uv_watch;

/* What the adapter keeps. 'handles' counts the libuv handles not yet
   closed (the timer and each poll): the last close callback frees it. */
typedef struct sluice__uv {
    uv_loop_t *loop;
    sluice_async *a;
    uv_timer_t timer;
    sluice__uv_watch *watches;
    int handles;
} sluice__uv;

static inline void sluice__uv_release(sluice__uv *uv) {
    if (--uv->handles == 0) free(uv);
}

static inline void sluice__uv_on_close(uv_handle_t *h) {
    if (h->type == UV_POLL) {
        sluice__uv_watch *w = (sluice__uv_watch *)h->data;
        sluice__uv *uv = w->uv;
        free(w);
        sluice__uv_release(uv);
    } else {
        sluice__uv_release((sluice__uv *)h->data);
    }
}

/* libuv's readiness in the handle's terms. An error ('status' < 0) or a
   hang-up is told as readiness for both, so the handle's read or write
   meets it and reports it. */
static inline void sluice__uv_on_poll(uv_poll_t *p, int status, int ev) {
    sluice__uv_watch *w = (sluice__uv_watch *)p->data;
    int events = 0;
    if (status < 0 || (ev & UV_DISCONNECT)) {
        events = SLUICE_ASYNC_READ | SLUICE_ASYNC_WRITE;
    } else {
        if (ev & UV_READABLE) events |= SLUICE_ASYNC_READ;
        if (ev & UV_WRITABLE) events |= SLUICE_ASYNC_WRITE;
    }
    if (w->uv->a != NULL) sluice_async_on_fd(w->uv->a, w->fd, events);
}

static inline void sluice__uv_on_timer(uv_timer_t *t) {
    sluice__uv *uv = (sluice__uv *)t->data;
    if (uv->a != NULL) sluice_async_on_timer(uv->a);
}

/* Closes and unlinks the poll at '*link'; its memory goes at its close
   callback. */
static inline void sluice__uv_unwatch(sluice__uv_watch **link) {
    sluice__uv_watch *w = *link;
    *link = w->next;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, sluice__uv_on_close);
}

/* A new poll for 'fd', or NULL (out of memory, or libuv refused it: the
   handle's deadline still ends the calls on it). */
static inline sluice__uv_watch *sluice__uv_add(sluice__uv *uv, int fd) {
    sluice__uv_watch *w = (sluice__uv_watch *)calloc(1, sizeof(*w));
    if (w == NULL) return NULL;
    if (uv_poll_init(uv->loop, &w->poll, fd) != 0) {
        free(w);
        return NULL;
    }
    w->poll.data = w;
    w->fd = fd;
    w->uv = uv;
    w->next = uv->watches;
    uv->watches = w;
    uv->handles++;
    return w;
}

/* The watch hook: 'fd' watched for 'events' in place of what it was, or
   (0) its poll closed, before the handle closes the descriptor. */
static inline void sluice__uv_watch_fd(void *data, int fd, int events) {
    sluice__uv *uv = (sluice__uv *)data;
    sluice__uv_watch **link = &uv->watches;
    while (*link != NULL && (*link)->fd != fd) link = &(*link)->next;
    if (events == 0) {
        if (*link != NULL) sluice__uv_unwatch(link);
        return;
    }
    sluice__uv_watch *w = *link != NULL ? *link : sluice__uv_add(uv, fd);
    if (w == NULL) return;
    int ev = 0;
    if (events & SLUICE_ASYNC_READ) ev |= UV_READABLE;
    if (events & SLUICE_ASYNC_WRITE) ev |= UV_WRITABLE;
    uv_poll_start(&w->poll, ev, sluice__uv_on_poll);
}

/* The timer hook: one timer, due 'ms' from now, or (-1) stopped. */
static inline void sluice__uv_timer(void *data, long long ms) {
    sluice__uv *uv = (sluice__uv *)data;
    if (ms < 0) {
        uv_timer_stop(&uv->timer);
    } else {
        uv_timer_start(&uv->timer, sluice__uv_on_timer, (uint64_t)ms, 0);
    }
}

/* The cleanup hook (and a failed open's): every handle left is closed;
   the last close callback frees the adapter. */
static inline void sluice__uv_cleanup(void *data) {
    sluice__uv *uv = (sluice__uv *)data;
    uv->a = NULL;
    while (uv->watches != NULL) sluice__uv_unwatch(&uv->watches);
    uv_timer_stop(&uv->timer);
    uv_close((uv_handle_t *)&uv->timer, sluice__uv_on_close);
}

/*
 * Opens a handle over 'store' on 'loop'. What sluice_async_new() answers,
 * or SLUICE_ENOMEM.
 */
static inline int sluice_async_uv_new(sluice_async **out, sluice_store *store,
                                      uv_loop_t *loop) {
    sluice__uv *uv = (sluice__uv *)calloc(1, sizeof(*uv));
    if (uv == NULL) return SLUICE_ENOMEM;
    uv->loop = loop;
    uv_timer_init(loop, &uv->timer);
    uv->timer.data = uv;
    uv->handles = 1;
    sluice_async_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.watch = sluice__uv_watch_fd;
    hooks.timer = sluice__uv_timer;
    hooks.cleanup = sluice__uv_cleanup;
    hooks.loop_data = uv;
    int rc = sluice_async_new(out, store, &hooks);
    if (rc != SLUICE_OK) {
        sluice__uv_cleanup(uv);
        return rc;
    }
    uv->a = *out;
    return SLUICE_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_ADAPTERS_LIBUV_H */
