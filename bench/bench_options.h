/*
 * bench_options.h - the benchmarks' command-line options.
 */
#ifndef SLUICE_BENCH_OPTIONS_H
#define SLUICE_BENCH_OPTIONS_H

#include <stdbool.h>
#include <string.h>

#include "sluice.h"

/* How many algorithms the library has, counted from its one list. */
#define BENCH__ALGO_PLUS_ONE(name, val, folder) +1
enum { BENCH_ALGO_N = 0 SLUICE_ALGO_MAP(BENCH__ALGO_PLUS_ONE) };

/*
 * Returns the value of option 'name' at argv[*i], given as "--name V" or
 * "--name=V", advancing '*i' past it; NULL if argv[*i] is not that option.
 * '*missing' is set when the option is there but its value is not.
 */
static inline const char *option_value(int argc, char **argv, int *i,
                                       const char *name, bool *missing)
{
    size_t len = strlen(name);
    const char *arg = argv[*i];

    if (strncmp(arg, name, len) != 0)
        return NULL;
    if (arg[len] == '=')
        return arg + len + 1;
    if (arg[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

#endif
