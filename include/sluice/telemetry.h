/*
 * sluice/telemetry.h - named events with measurements and metadata, and the
 * handlers attached to them.
 */
#ifndef SLUICE_INCLUDE_TELEMETRY_H
#define SLUICE_INCLUDE_TELEMETRY_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Telemetry ---------------------------------------------------------------
 *
 * Named events with numeric measurements and string metadata, after Erlang's
 * :telemetry. sluice emits two:
 *
 *   "sluice.hit.refused"  a limit refused a request (SLUICE_EVENT_HIT_REFUSED).
 *                         A refused sluice_hit(), and each refused request
 *                         of a sluice_hit_many(): measurement delay_ms (its
 *                         retry_after_ms); metadata key, algorithm, limit,
 *                         window_ms, store. A refused sluice_hit_all():
 *                         once, the same, of the limit that decided (its
 *                         'limit' field) and with the combined
 *                         retry_after_ms. A refusal by the fail-closed
 *                         policy (on_error) is no limit refusing: silent.
 *   "emq.rate_limit.hit"  a queue's cap deferred a take
 *                         (SLUICE_EVENT_EMQ_RATE_LIMIT_HIT, EchoMQ's name):
 *                         a deferred sluice_queue_take(), or a worker's.
 *                         Measurement delay_ms (the wait); metadata queue,
 *                         algorithm ("fixed"), limit.
 *
 * Deprecated: before 0.2, every refusal was "emq.rate_limit.hit" as well.
 * Until 0.2 a handler attached to "emq.rate_limit.hit" still receives each
 * "sluice.hit.refused" too, named "emq.rate_limit.hit" and with the same
 * measurements and metadata (told apart from a take by its "key"); from
 * 0.2 it receives the queue's alone. Attach to "sluice.hit.refused" for
 * refusals. A handler attached to both gets a refusal once under each.
 *
 * With no handler attached an emit costs one relaxed atomic load; building
 * with SLUICE_NO_TELEMETRY removes even that. Handlers run on the calling
 * thread, must not block, and must not attach or detach handlers.
 */
#define SLUICE_EVENT_HIT_REFUSED "sluice.hit.refused"
#define SLUICE_EVENT_EMQ_RATE_LIMIT_HIT "emq.rate_limit.hit"
/* Deprecated: the old name of both events, now the queue's (see above). */
#define SLUICE_EVENT_RATE_LIMIT_HIT SLUICE_EVENT_EMQ_RATE_LIMIT_HIT

typedef struct sluice_measurement {
    const char *name;
    double value;
} sluice_measurement;

typedef struct sluice_metadata {
    const char *name;
    const char *value; /* not NUL-terminated: binary keys */
    size_t value_len;
} sluice_metadata;

typedef struct sluice_event {
    const char *name;
    const sluice_measurement *measurements;
    size_t n_measurements;
    const sluice_metadata *metadata;
    size_t n_metadata;
} sluice_event;

typedef void (*sluice_handler_fn)(const sluice_event *event, void *payload);

/*
 * Attaches 'fn' under the unique 'handler_id' to the event 'event_name'.
 * SLUICE_EINVAL if the id is taken. 'payload' is passed back on each call.
 */
SLUICE_EXTERN int sluice_telemetry_attach(const char *handler_id,
                                          const char *event_name,
                                          sluice_handler_fn fn, void *payload);
/* Detaches the handler; SLUICE_EINVAL if no handler has that id. */
SLUICE_EXTERN int sluice_telemetry_detach(const char *handler_id);
/* Calls every handler attached to 'event->name'. */
SLUICE_EXTERN void sluice_telemetry_emit(const sluice_event *event);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_TELEMETRY_H */
