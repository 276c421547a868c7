/*
 * error.c - error codes, their names and messages, and the per-thread detail.
 */
#include "core/core.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

const char *sluice_strerror(int err)
{
    switch (err) {
    case SLUICE_OK:
        return "success";
#define SLUICE__ERRNO_MSG(name, val, msg) \
    case SLUICE_##name:                   \
        return msg;
        SLUICE_ERRNO_MAP(SLUICE__ERRNO_MSG)
#undef SLUICE__ERRNO_MSG
    default:
        return "unknown error";
    }
}

const char *sluice_err_name(int err)
{
    switch (err) {
    case SLUICE_OK:
        return "OK";
#define SLUICE__ERRNO_NAME(name, val, msg) \
    case SLUICE_##name:                    \
        return #name;
        SLUICE_ERRNO_MAP(SLUICE__ERRNO_NAME)
#undef SLUICE__ERRNO_NAME
    default:
        return "UNKNOWN";
    }
}

const char *sluice_last_error(void)
{
    return last_error;
}

int sluice__error(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return err;
}
