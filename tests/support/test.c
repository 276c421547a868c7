/*
 * test.c - the harness of test.h: the counters every check adds to, the
 * calling thread's context line, and the summary.
 */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

atomic_long test_checks;
atomic_long test_failures;
static _Thread_local char context_line[512];

void test_context(const char *fmt, ...)
{
    va_list ap;

    if (fmt == NULL) {
        context_line[0] = '\0';
        return;
    }
    va_start(ap, fmt);
    vsnprintf(context_line, sizeof(context_line), fmt, ap);
    va_end(ap);
}

/* ---- Checks -------------------------------------------------------------- */

int test_check_at(int ok, const char *file, int line, const char *what)
{
    long n;

    atomic_fetch_add(&test_checks, 1);
    if (ok)
        return 1;
    n = atomic_fetch_add(&test_failures, 1);
    if (n < TEST_MAX_PRINTED) {
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
        if (context_line[0] != '\0')
            fprintf(stderr, "    context: %s\n", context_line);
    } else if (n == TEST_MAX_PRINTED) {
        fprintf(stderr, "(further failures are counted, not printed)\n");
    }
    return 0;
}

int test_check_u64_at(uint64_t a, uint64_t b, const char *file, int line,
                      const char *ea, const char *eb)
{
    char what[512];

    if (a == b)
        return test_check_at(1, file, line, NULL);
    snprintf(what, sizeof(what), "%s == %s (%" PRIu64 " != %" PRIu64 ")", ea,
             eb, a, b);
    return test_check_at(0, file, line, what);
}

int test_check_rc_at(int rc, int want, const char *file, int line,
                     const char *expr)
{
    char what[768];

    if (rc == want)
        return test_check_at(1, file, line, NULL);
    snprintf(what, sizeof(what), "%s returned %d (%s), expected %d (%s); "
             "last error: \"%s\"", expr, rc, sluice_err_name(rc), want,
             sluice_err_name(want), sluice_last_error());
    return test_check_at(0, file, line, what);
}

/* ---- Seeds and summary --------------------------------------------------- */

uint64_t test_seed(int argc, char **argv, int base, uint64_t fallback)
{
    const char *env = getenv("SLUICE_TEST_SEED");

    if (argc > 1)
        return strtoull(argv[1], NULL, base);
    if (env != NULL && env[0] != '\0')
        return strtoull(env, NULL, base);
    return fallback;
}

uint64_t test_random_seed(void)
{
    return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
}

void test_append_escaped(char *out, size_t cap, const char *s, size_t len)
{
    size_t at = strlen(out);

    for (size_t i = 0; i < len && at + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c >= 0x20 && c < 0x7f && c != '\\')
            out[at++] = (char)c;
        else
            at += (size_t)snprintf(out + at, cap - at, "\\x%02x", c);
    }
    out[at] = '\0';
}

int test_summary(const char *name)
{
    long checks = atomic_load(&test_checks);
    long failed = atomic_load(&test_failures);

    printf("%s: %ld checks, %ld failed\n", name, checks, failed);
    if (checks == 0)
        fprintf(stderr, "%s: no check was made, so nothing was shown: "
                        "that fails too\n", name);
    fflush(stdout);
    return failed == 0 && checks > 0 ? 0 : 1;
}
