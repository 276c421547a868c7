/*
 * events.h - a telemetry handler for the tests: it records the events it
 * is given, and the figures and metadata of the last one.
 *
 *   test_events_seen s = {.want = SLUICE_EVENT_HIT_REFUSED};
 *   sluice_telemetry_attach("test", s.want, test_events_record, &s);
 *
 * Metadata texts are cut to their buffers and NUL-terminated; the key's
 * whole length is 'key_len' (it may hold a NUL, or be longer than 'key').
 */
#ifndef SLUICE_TEST_EVENTS_H
#define SLUICE_TEST_EVENTS_H

#include "sluice.h"

#include <stddef.h>

typedef struct test_events_seen {
    const char *want; /* the name attached to */
    int calls;        /* events received */
    int bad_name;     /* of them, under a name other than 'want' */
    double delay_ms;  /* the last one's "delay_ms" */
    char key[64];     /* ... and its metadata */
    size_t key_len;
    char algorithm[32], limit[32], window[32], store[16];
} test_events_seen;

/* A sluice_event_handler: 'payload' is a test_events_seen. */
void test_events_record(const sluice_event *ev, void *payload);

#endif /* SLUICE_TEST_EVENTS_H */
