/*
 * telemetry.c - named events and the handlers attached to them.
 *
 * The registry is a list behind a read-write lock. Emitting takes the read
 * side, so handlers of many threads run at once; attaching and detaching take
 * the write side. 'sluice__telemetry_attached' counts the handlers so that the
 * hot path can skip everything with one relaxed load when there are none.
 */
#include "core/core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct handler {
    struct handler *next;
    char *id;
    char *event;
    sluice_handler_fn fn;
    void *payload;
} handler;

_Atomic size_t sluice__telemetry_attached;
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static handler *handlers;

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

int sluice_telemetry_attach(const char *handler_id, const char *event_name,
                            sluice_handler_fn fn, void *payload)
{
    handler *h;

    if (handler_id == NULL || event_name == NULL || fn == NULL)
        return sluice__error(SLUICE_EINVAL,
                             "telemetry: handler id, event name and function "
                             "are required");
    pthread_rwlock_wrlock(&lock);
    for (h = handlers; h != NULL; h = h->next) {
        if (strcmp(h->id, handler_id) == 0) {
            pthread_rwlock_unlock(&lock);
            return sluice__error(SLUICE_EINVAL,
                                 "telemetry: a handler '%s' is attached already",
                                 handler_id);
        }
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL || (h->id = dup_str(handler_id)) == NULL ||
        (h->event = dup_str(event_name)) == NULL) {
        pthread_rwlock_unlock(&lock);
        if (h != NULL)
            free(h->id);
        free(h);
        return sluice__error(SLUICE_ENOMEM, "telemetry: out of memory");
    }
    h->fn = fn;
    h->payload = payload;
    h->next = handlers;
    handlers = h;
    atomic_fetch_add(&sluice__telemetry_attached, 1);
    pthread_rwlock_unlock(&lock);
    return SLUICE_OK;
}

int sluice_telemetry_detach(const char *handler_id)
{
    handler **link;

    if (handler_id == NULL)
        return sluice__error(SLUICE_EINVAL, "telemetry: handler id is NULL");
    pthread_rwlock_wrlock(&lock);
    for (link = &handlers; *link != NULL; link = &(*link)->next) {
        handler *h = *link;

        if (strcmp(h->id, handler_id) == 0) {
            *link = h->next;
            atomic_fetch_sub(&sluice__telemetry_attached, 1);
            pthread_rwlock_unlock(&lock);
            free(h->id);
            free(h->event);
            free(h);
            return SLUICE_OK;
        }
    }
    pthread_rwlock_unlock(&lock);
    return sluice__error(SLUICE_EINVAL, "telemetry: no handler '%s'",
                         handler_id);
}

void sluice_telemetry_emit(const sluice_event *event)
{
    sluice__telemetry_emit_alias(event, NULL);
}

void sluice__telemetry_emit_alias(const sluice_event *event, const char *alias)
{
    sluice_event renamed;

    if (event == NULL || !sluice__telemetry_active())
        return;
    renamed = *event;
    renamed.name = alias;
    pthread_rwlock_rdlock(&lock);
    for (handler *h = handlers; h != NULL; h = h->next) {
        if (strcmp(h->event, event->name) == 0)
            h->fn(event, h->payload);
        else if (alias != NULL && strcmp(h->event, alias) == 0)
            h->fn(&renamed, h->payload);
    }
    pthread_rwlock_unlock(&lock);
}
