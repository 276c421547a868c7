/*
 * sluice/functions.h - the Functions library (FCALL), for clients of any
 * language.
 */
#ifndef SLUICE_INCLUDE_FUNCTIONS_H
#define SLUICE_INCLUDE_FUNCTIONS_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The Functions library (Redis 7+ / Valkey; docs/functions.md): the same
 * algorithms as FCALL sluice_hit / sluice_peek / sluice_reset /
 * sluice_version, for clients of any language. _text() is the library (NUL
 * after '*len' bytes), _version() what FCALL sluice_version answers, and
 * _load() loads it with FUNCTION LOAD REPLACE into a server store's
 * server, or into every master of a cluster store, and says into how many
 * in '*servers' (may be NULL): SLUICE_ENOTSUP for a server older than
 * Redis 7 (or the embedded store); on a failure, the servers counted before
 * it have it.
 */
SLUICE_EXTERN const char *sluice_functions_text(size_t *len);
SLUICE_EXTERN const char *sluice_functions_version(void);
SLUICE_EXTERN int sluice_functions_load(sluice_store *store, size_t *servers);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_FUNCTIONS_H */
