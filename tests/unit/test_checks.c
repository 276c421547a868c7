/*
 * test_checks.c - the harness itself (support/test.h): test_summary()'s exit
 * status, in forked children that each start from no checks at all.
 *
 *   - a program that made no check fails (exit 1): it has shown nothing;
 *   - one that made a check, and it held, passes (exit 0);
 *   - one whose check failed fails (exit 1), and so does one that made no
 *     check once its failures were counted.
 *
 * The third child's failed check is printed on purpose, under a note.
 */
#include "test.h"

#include <sys/wait.h>
#include <unistd.h>

enum { NO_CHECK, ONE_HELD, ONE_FAILED };

/* The exit status of a child that makes 'what' checks, from none. */
static int child_status(int what)
{
    int status = 0;
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) == 0) {
        atomic_store(&test_checks, 0);
        atomic_store(&test_failures, 0);
        if (what == ONE_HELD)
            CHECK(1 + 1 == 2);
        else if (what == ONE_FAILED)
            CHECK(1 + 1 == 3);
        _exit(test_summary("  test_checks (a child)"));
    }
    if (!CHECK(pid > 0) || !CHECK(waitpid(pid, &status, 0) == pid) ||
        !CHECK(WIFEXITED(status)))
        return -1;
    return WEXITSTATUS(status);
}

int main(void)
{
    CHECK_EQ_U64(child_status(NO_CHECK), 1);
    CHECK_EQ_U64(child_status(ONE_HELD), 0);
    printf("  (the next child's failed check, 1 + 1 == 3, is on purpose)\n");
    CHECK_EQ_U64(child_status(ONE_FAILED), 1);
    return test_summary("test_checks");
}
