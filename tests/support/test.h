/*
 * test.h - the smallest harness that serves sluice's C tests.
 *
 * A check that fails prints its file, line and expression and is counted;
 * the program goes on, so one run shows every failure. test_summary() prints
 * one line ("test_algo: 123 checks, 0 failed") and gives the exit status,
 * a failure when no check was made at all.
 *
 *   CHECK(cond)              a condition that must hold.
 *   CHECK_EQ_U64(a, b)       two numbers that must be equal (both printed).
 *   CHECK_RC(expr, want)     a call's return code, printed by name together
 *                            with sluice_last_error() when it differs.
 *   CHECK_OK(expr)           CHECK_RC(expr, SLUICE_OK).
 *
 * test_context() sets a line of context for the calling thread (a seed, a
 * step of a scenario), printed under every failure until it is changed.
 * Checks may run on several threads at once: the counters are atomic. They
 * live in test.c, so checks made by the support library (compare.c, ...)
 * count in the same summary as the test's own.
 * Only the first TEST_MAX_PRINTED failures are printed; all are counted.
 */
#ifndef SLUICE_TEST_H
#define SLUICE_TEST_H

#include "sluice.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TEST_MAX_PRINTED 50

/* The exit status of a test that had nothing it could run (CTest's
   SKIP_RETURN_CODE for every test program, tests/CMakeLists.txt). */
#define TEST_SKIP 77

/* How many algorithms the library has, counted from its one list. */
#define TEST__ALGO_PLUS_ONE(name, val, folder) +1
enum { TEST_ALGO_N = 0 SLUICE_ALGO_MAP(TEST__ALGO_PLUS_ONE) };

/* Checks made and failed so far, by every thread. */
extern atomic_long test_checks;
extern atomic_long test_failures;

/* Sets the context printed under each failure of the calling thread; NULL
   clears it. */
void test_context(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- Checks -------------------------------------------------------------- */

/*
 * Counts one check and, when 'ok' is false, one failure, printing 'what' at
 * 'file':'line'. Returns 'ok', so a caller may stop a scenario that has gone
 * wrong.
 */
int test_check_at(int ok, const char *file, int line, const char *what);
int test_check_u64_at(uint64_t a, uint64_t b, const char *file, int line,
                      const char *ea, const char *eb);
int test_check_rc_at(int rc, int want, const char *file, int line,
                     const char *expr);

#define CHECK(cond) test_check_at(!!(cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ_U64(a, b)                                                  \
    test_check_u64_at((uint64_t)(a), (uint64_t)(b), __FILE__, __LINE__, #a, \
                      #b)
#define CHECK_RC(expr, want) \
    test_check_rc_at((expr), (want), __FILE__, __LINE__, #expr)
#define CHECK_OK(expr) CHECK_RC(expr, SLUICE_OK)

/*
 * A reset's answer as any other call's: SLUICE_OK for 1 (it removed a
 * count) and 0 (nothing was there), the error else. For tests and
 * differentials to which which one it was is not the point;
 * CHECK_RESET(expr) checks that a reset succeeded either way.
 */
static inline int test_reset_rc(int rc)
{
    return rc == 1 ? SLUICE_OK : rc;
}
#define CHECK_RESET(expr) CHECK_RC(test_reset_rc(expr), SLUICE_OK)

/* ---- Seeds and summary --------------------------------------------------- */

/*
 * The seed of a test that takes one: argv[1] if given, else
 * $SLUICE_TEST_SEED, else 'fallback'. Numbers are read as strtoull() with
 * base 'base' (0: 0x... and 0... too).
 */
uint64_t test_seed(int argc, char **argv, int base, uint64_t fallback);

/* A seed that differs from run to run: the time and the process id. */
uint64_t test_random_seed(void);

/* Appends s[0..len) to the string 'out' (of 'cap' bytes), every byte that
   is not printable (a NUL and a backslash too) as \xHH, so that a binary
   value shows, and compares, whole. */
void test_append_escaped(char *out, size_t cap, const char *s, size_t len);

/* Prints the summary line for 'name'; returns the exit status: 0 when at
   least one check was made and none failed, else 1 (a program that made no
   check has shown nothing, so it fails too). A test with nothing to run
   where it is (a binary missing, say) exits TEST_SKIP instead, which CTest
   reports as skipped (SKIP_RETURN_CODE, set for every test). */
int test_summary(const char *name);

#endif /* SLUICE_TEST_H */
