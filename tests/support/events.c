/*
 * events.c - the tests' recording telemetry handler (events.h).
 */
#include "events.h"

#include <string.h>

/* Metadata 'm''s value into 'dst' (of 'cap'), cut and NUL-terminated. */
static void copy_text(char *dst, size_t cap, const sluice_metadata *m)
{
    size_t n = m->value_len < cap - 1 ? m->value_len : cap - 1;

    memcpy(dst, m->value, n);
    dst[n] = '\0';
}

void test_events_record(const sluice_event *ev, void *payload)
{
    test_events_seen *s = payload;

    s->calls++;
    if (s->want == NULL || strcmp(ev->name, s->want) != 0)
        s->bad_name++;
    for (size_t i = 0; i < ev->n_measurements; i++)
        if (strcmp(ev->measurements[i].name, "delay_ms") == 0)
            s->delay_ms = ev->measurements[i].value;
    for (size_t i = 0; i < ev->n_metadata; i++) {
        const sluice_metadata *m = &ev->metadata[i];

        if (strcmp(m->name, "key") == 0) {
            s->key_len = m->value_len; /* its whole length, kept or not */
            copy_text(s->key, sizeof(s->key), m);
        } else if (strcmp(m->name, "algorithm") == 0) {
            copy_text(s->algorithm, sizeof(s->algorithm), m);
        } else if (strcmp(m->name, "limit") == 0) {
            copy_text(s->limit, sizeof(s->limit), m);
        } else if (strcmp(m->name, "window_ms") == 0) {
            copy_text(s->window, sizeof(s->window), m);
        } else if (strcmp(m->name, "store") == 0) {
            copy_text(s->store, sizeof(s->store), m);
        }
    }
}
