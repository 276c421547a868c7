/*
 * test.h - the smallest harness that serves sluice's C tests.
 *
 * A check that fails prints its file, line and expression and is counted;
 * the program goes on, so one run shows every failure. test_summary() prints
 * one line ("test_algo: 123 checks, 0 failed") and gives the exit status.
 *
 *   CHECK(cond)              a condition that must hold.
 *   CHECK_EQ_U64(a, b)       two numbers that must be equal (both printed).
 *   CHECK_RC(expr, want)     a call's return code, printed by name together
 *                            with sluice_last_error() when it differs.
 *   CHECK_OK(expr)           CHECK_RC(expr, SLUICE_OK).
 *
 * test_context() sets a line of context for the calling thread (a seed, a
 * step of a scenario), printed under every failure until it is changed.
 * Checks may run on several threads at once: the counters are atomic.
 * Only the first TEST_MAX_PRINTED failures are printed; all are counted.
 */
#ifndef SLUICE_TEST_H
#define SLUICE_TEST_H

#include "sluice.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define TEST_MAX_PRINTED 50

/* How many algorithms the library has, counted from its one list. */
#define TEST__ALGO_PLUS_ONE(name, val, folder) +1
enum { TEST_ALGO_N = 0 SLUICE_ALGO_MAP(TEST__ALGO_PLUS_ONE) };

static atomic_long test_checks;
static atomic_long test_failures;
static _Thread_local char test_context_line[512];

/* Sets the context printed under each failure of the calling thread. */
static inline void test_context(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static inline void test_context(const char *fmt, ...)
{
    va_list ap;

    if (fmt == NULL) {
        test_context_line[0] = '\0';
        return;
    }
    va_start(ap, fmt);
    vsnprintf(test_context_line, sizeof(test_context_line), fmt, ap);
    va_end(ap);
}

/* ---- Checks -------------------------------------------------------------- */

/*
 * Counts one check and, when 'ok' is false, one failure, printing 'what' at
 * 'file':'line'. Returns 'ok', so a caller may stop a scenario that has gone
 * wrong.
 */
static inline int test_check_at(int ok, const char *file, int line,
                                const char *what)
{
    long n;

    atomic_fetch_add(&test_checks, 1);
    if (ok)
        return 1;
    n = atomic_fetch_add(&test_failures, 1);
    if (n < TEST_MAX_PRINTED) {
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
        if (test_context_line[0] != '\0')
            fprintf(stderr, "    context: %s\n", test_context_line);
    } else if (n == TEST_MAX_PRINTED) {
        fprintf(stderr, "(further failures are counted, not printed)\n");
    }
    return 0;
}

static inline int test_check_u64_at(uint64_t a, uint64_t b, const char *file,
                                    int line, const char *ea, const char *eb)
{
    char what[512];

    if (a == b)
        return test_check_at(1, file, line, NULL);
    snprintf(what, sizeof(what), "%s == %s (%" PRIu64 " != %" PRIu64 ")", ea,
             eb, a, b);
    return test_check_at(0, file, line, what);
}

static inline int test_check_rc_at(int rc, int want, const char *file,
                                   int line, const char *expr)
{
    char what[768];

    if (rc == want)
        return test_check_at(1, file, line, NULL);
    snprintf(what, sizeof(what), "%s returned %d (%s), expected %d (%s); "
             "last error: \"%s\"", expr, rc, sluice_err_name(rc), want,
             sluice_err_name(want), sluice_last_error());
    return test_check_at(0, file, line, what);
}

#define CHECK(cond) test_check_at(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ_U64(a, b)                                                  \
    test_check_u64_at((uint64_t)(a), (uint64_t)(b), __FILE__, __LINE__, #a, \
                      #b)
#define CHECK_RC(expr, want) \
    test_check_rc_at((expr), (want), __FILE__, __LINE__, #expr)
#define CHECK_OK(expr) CHECK_RC(expr, SLUICE_OK)

/* ---- Summary ------------------------------------------------------------- */

/* Prints the summary line for 'name'; returns the exit status. */
static inline int test_summary(const char *name)
{
    long checks = atomic_load(&test_checks);
    long failed = atomic_load(&test_failures);

    printf("%s: %ld checks, %ld failed\n", name, checks, failed);
    fflush(stdout);
    return failed == 0 ? 0 : 1;
}

#endif /* SLUICE_TEST_H */
