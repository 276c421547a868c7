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
 * :telemetry. sluice emits:
 *
 *   "emq.rate_limit.hit"  a limit was hit. A refused sluice_hit():
 *                         measurement delay_ms (its retry_after_ms);
 *                         metadata key, algorithm, limit, window_ms, store.
 *                         A refused sluice_hit_all(): once, the same, of
 *                         the limit that decided (its 'limit' field) and
 *                         with the combined retry_after_ms.
 *                         A deferred sluice_queue_take(): measurement
 *                         delay_ms (the wait); metadata queue, algorithm
 *                         ("fixed"), limit.
 *
 * With no handler attached an emit costs one relaxed atomic load; building
 * with SLUICE_NO_TELEMETRY removes even that. Handlers run on the calling
 * thread, must not block, and must not attach or detach handlers.
 */
#define SLUICE_EVENT_RATE_LIMIT_HIT "emq.rate_limit.hit"

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
