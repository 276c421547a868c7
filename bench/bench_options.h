/*
 * bench_options.h - the benchmarks' command-line options, and the one rule
 * for --help and a bad command line that every bench program follows:
 * --help (or -h) anywhere before a "--" prints the usage on standard output
 * and exits 0 before anything is measured or started (bench_wants_help());
 * an unknown option, a missing value or a bad one prints what is wrong and
 * the usage on standard error and exits 2 (bench_usage_error()).
 */
#ifndef SLUICE_BENCH_OPTIONS_H
#define SLUICE_BENCH_OPTIONS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
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

/*
 * True when an argument before any "--" is --help or -h. A program checks
 * this first, before it reads its other options, so that asking for its
 * usage never runs a benchmark or starts a server, whatever else is given.
 */
static inline bool bench_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

/*
 * Reports a command line that program 'prog' cannot take: "PROG: " and the
 * message ('fmt', printf-style) on standard error, then its 'usage' there
 * too. Returns 2, the exit status of a usage error.
 */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int bench_usage_error(const char *prog, const char *usage,
                                    const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

#endif
