#!/usr/bin/env bash
#
# headers_test.sh - every public header stands on its own. Each of
# include/sluice.h and include/sluice/*.h is compiled alone as C11 (-Wall
# -Wextra -Werror -pedantic), included twice (its guard), and before
# sluice.h (no name declared twice); and as C++11 when a C++ compiler is
# there. Then sluice.h alone must declare what every sub-header does: a
# program that names one function of each.
#
# Usage: bash tests/headers_test.sh INCLUDE-DIR [CC]
set -u
INC=${1:?usage: headers_test.sh INCLUDE-DIR [CC]}
CC=${2:-cc}
CXX=$(command -v c++ || true)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
check() {
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS: $1"
    else
        failed=$((failed + 1)); echo "FAIL: $1"; cat "$TMP/log"
    fi
}
# compile LANG FILE: syntax only, every warning an error.
compile() {
    if [ "$1" = c ]; then
        "$CC" -std=c11 -Wall -Wextra -Werror -pedantic -I"$INC" -fsyntax-only \
            -x c "$2" >"$TMP/log" 2>&1
    else
        "$CXX" -std=c++11 -Wall -Wextra -Werror -pedantic -I"$INC" -fsyntax-only \
            -x c++ "$2" >"$TMP/log" 2>&1
    fi
}

headers=$(cd "$INC" && ls sluice.h sluice/*.h)
for h in $headers; do
    printf '#include "%s"\n' "$h" >"$TMP/alone.c"
    printf '#include "%s"\n#include "%s"\n' "$h" "$h" >"$TMP/twice.c"
    printf '#include "%s"\n#include "sluice.h"\n' "$h" >"$TMP/first.c"
    for lang in c ${CXX:+c++}; do
        compile $lang "$TMP/alone.c"
        check "$h alone ($lang)" $?
        compile $lang "$TMP/twice.c"
        check "$h twice ($lang)" $?
        compile $lang "$TMP/first.c"
        check "$h before sluice.h ($lang)" $?
    done
done
[ -n "$CXX" ] || echo "SKIP: no c++ compiler, the headers were compiled as C only"

# sluice.h gives everything: one name of each sub-header, with nothing
# else included.
cat >"$TMP/all.c" <<'PROGRAM'
#include "sluice.h"

int main(void)
{
    void (*const names[])(void) = {
        (void (*)(void))sluice_strerror,         /* sluice/common.h */
        (void (*)(void))sluice_vclock_new,       /* sluice/clock.h */
        (void (*)(void))sluice_functions_text,   /* sluice/functions.h */
        (void (*)(void))sluice_queue_add,        /* sluice/queue.h */
        (void (*)(void))sluice_worker_new,
        (void (*)(void))sluice_telemetry_attach, /* sluice/telemetry.h */
        (void (*)(void))sluice_hit,              /* sluice.h */
    };
    sluice_limit limit = SLUICE_LIMIT(SLUICE_FIXED, 1, 1000);
    sluice_job job = {0};
    sluice_event ev = {SLUICE_EVENT_HIT_REFUSED, NULL, 0, NULL, 0};
    const char *old = SLUICE_EVENT_RATE_LIMIT_HIT; /* deprecated, kept */

    (void)limit;
    (void)job;
    (void)ev;
    (void)old;
    return names[0] == NULL;
}
PROGRAM
compile c "$TMP/all.c"
check "sluice.h alone declares every sub-header's names" $?

echo "headers_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
