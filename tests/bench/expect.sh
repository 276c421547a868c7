#!/usr/bin/env bash
#
# expect.sh - runs a program that is checked by what it prints, and fails
# it unless it both printed what it should and exited as it should.
#
# CTest's PASS_REGULAR_EXPRESSION alone ignores the exit status, so a
# program that printed the right line and then crashed (in its clean-up,
# say) passed. Here a crash, a signal or any other status than STATUS
# fails, and so does output (stdout and stderr) with no line matching the
# extended regular expression REGEX.
#
# Usage: bash tests/bench/expect.sh STATUS REGEX PROGRAM [ARGS...]

set -u

want=${1:?usage: expect.sh STATUS REGEX PROGRAM [ARGS...]}
regex=${2:?usage: expect.sh STATUS REGEX PROGRAM [ARGS...]}
shift 2
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
if [ "$status" -ne "$want" ]; then
    if [ "$status" -gt 128 ]; then
        echo "expect.sh: $1 was killed by signal $((status - 128))" \
             "(exit $status), not exit $want" >&2
    else
        echo "expect.sh: $1 exited $status, not $want" >&2
    fi
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
    echo "expect.sh: $1 printed no line matching: $regex" >&2
    exit 1
fi
exit 0
