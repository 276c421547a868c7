/*
 * sluice/common.h - what every sluice header shares: the export macro, the
 * version, the error codes and the store handle.
 */
#ifndef SLUICE_INCLUDE_COMMON_H
#define SLUICE_INCLUDE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Public functions are exported from the shared library; nothing else is. */
#if defined(__GNUC__)
#define SLUICE_EXTERN __attribute__((visibility("default")))
#else
#define SLUICE_EXTERN
#endif

/* ---- Version ------------------------------------------------------------- */

/*
 * The version of the header a program was compiled with. The build checks
 * that it is the project's (CMakeLists.txt), and sluice_version() answers
 * the library's, which can differ when a program runs with a shared
 * library other than the one it was built against. SLUICE_VERSION_NUMBER
 * is MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is 100), as a server module
 * states its version, so versions compare as numbers.
 */
#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0
#define SLUICE_VERSION "0.1.0"
#define SLUICE_VERSION_NUMBER                                   \
    (SLUICE_VERSION_MAJOR * 10000 + SLUICE_VERSION_MINOR * 100 + \
     SLUICE_VERSION_PATCH)

/* The library's version at run time, e.g. "0.1.0": a static string. */
SLUICE_EXTERN const char *sluice_version(void);
/* The same as a number, in SLUICE_VERSION_NUMBER's form. */
SLUICE_EXTERN int sluice_version_number(void);

/* ---- Errors -------------------------------------------------------------- */

/*
 * The one list of error codes. Each entry is (NAME, value, message); the enum,
 * sluice_strerror() and sluice_err_name() are all generated from it.
 */
#define SLUICE_ERRNO_MAP(X)                                                   \
    X(EINVAL,   -1, "invalid argument")                                       \
    X(ECOST,    -2, "cost exceeds the limit's max (or burst): never admitted") \
    X(ERANGE,   -3, "number out of range")                                    \
    X(ENOMEM,   -4, "out of memory")                                          \
    X(EFULL,    -5, "store is full: key cap reached")                         \
    X(EURL,     -6, "invalid or unsupported store URL")                       \
    X(ECONN,    -7, "cannot reach the store's server")                        \
    X(ETIMEDOUT,-8, "the store's server did not answer in time")              \
    X(EPROTO,   -9, "unexpected reply from the store's server")               \
    X(ENOTSUP, -10, "operation not supported by this store")                 \
    X(ELEASE,  -11, "the job's lease is no longer this worker's")            \
    X(ECONFIG, -12, "store misconfigured: its URL or its servers, no outage") \
    X(EAUTH,   -13, "the server refused us: credentials or TLS verification") \
    X(ECANCELED, -14, "the call was cancelled: its async handle was freed")

typedef enum sluice_errno {
    SLUICE_OK = 0,
#define SLUICE__ERRNO_ENUM(name, val, msg) SLUICE_##name = (val),
    SLUICE_ERRNO_MAP(SLUICE__ERRNO_ENUM)
#undef SLUICE__ERRNO_ENUM
    SLUICE__ERRNO_LAST = -15
} sluice_errno;

/* A static sentence for 'err' ("unknown error" for a code not in the list). */
SLUICE_EXTERN const char *sluice_strerror(int err);
/* The code's name without the prefix, e.g. "ECOST"; "UNKNOWN" if not listed. */
SLUICE_EXTERN const char *sluice_err_name(int err);
/*
 * The detailed message of the calling thread's most recent failed call, e.g.
 * "cost 12 exceeds max 10". Valid until the thread's next sluice call; never
 * NULL (empty when no call has failed in this thread).
 */
SLUICE_EXTERN const char *sluice_last_error(void);

/* ---- The store handle ------------------------------------------------------ */

/*
 * A store holds the budgets. One store may be shared by any number of
 * threads: every call on it is thread-safe (the embedded store locks per
 * shard of keys; a server store shares its connections). Free it once, after
 * the last call on it has returned.
 */
typedef struct sluice_store sluice_store;

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_INCLUDE_COMMON_H */
