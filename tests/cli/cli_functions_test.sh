#!/usr/bin/env bash
#
# cli_functions_test.sh - checks 'sluice functions': it prints the Functions
# library, which redis-cli loads; --load loads it through the library's own
# connection code; and its mistakes get usage errors. Against a private
# server (7 or later: $SLUICE_TEST_SERVER, else redis-server, else
# valkey-server) on an unusual port, in a mktemp -d folder, stopped by a
# trap.
#
# Usage: bash tests/cli/cli_functions_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "cli_functions_test: N passed, M failed", and the exit status is non-zero
# if any check failed.

set -u

SLUICE=${1:?usage: cli_functions_test.sh PATH-TO-SLUICE}
passed=0
failed=0

# The helpers, and the build under test: SERVER and CLI
. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries cli_functions_test

TMP=$(mktemp -d)
server_pid=
fake_pid=
cleanup() {
    for pid in $server_pid $fake_pid; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

start_server cli_functions_test 25000
STORE="valkey://127.0.0.1:$port?timeout=5000"
rcli() { "$CLI" -p "$port" "$@" 2>&1; }

# ---- Printing ------------------------------------------------------------------

run functions
check "functions prints the library" 0 '^#!lua name=sluice$'
printf '%s\n' "$out" >"$TMP/lib.lua"
if grep -q "register_function('sluice_hit'" "$TMP/lib.lua"; then
    pass "the library registers sluice_hit"
else
    fail "the library registers sluice_hit"
fi

got=$("$SLUICE" functions | "$CLI" -p "$port" -x FUNCTION LOAD REPLACE 2>&1)
expect_eq "sluice functions | redis-cli -x FUNCTION LOAD REPLACE" sluice "$got"
got=$(rcli FCALL sluice_hit 1 'sluice:{u1}:fixed' fixed 2 60000 | tr '\n' ' ')
case $got in
"1 1 0 "*) pass "FCALL sluice_hit after the pipe: admitted ($got)" ;;
*) fail "FCALL sluice_hit after the pipe" "$got" ;;
esac

# The budget is the CLI's too: one more hit spends it, the third is refused.
run hit u1 --algo fixed --max 2 --window 1m --store "$STORE"
check "sluice hit on the key FCALL counted: the last unit" 0 \
    '^allowed remaining=0 limit=2 '
got=$(rcli FCALL sluice_hit 1 'sluice:{u1}:fixed' fixed 2 60000 | head -n 1)
expect_eq "FCALL after sluice hit: refused" 0 "$got"

# ---- --load ---------------------------------------------------------------------

rcli FUNCTION DELETE sluice >/dev/null
run functions --load --store "$STORE"
check "functions --load" 0 \
    '^loaded library sluice [0-9]+\.[0-9]+\.[0-9]+\+[0-9a-f]{12} into 1 server$'
version=${out#loaded library sluice }
version=${version% into 1 server}
got=$(rcli FCALL sluice_version 0)
expect_eq "FCALL sluice_version answers what --load printed" "$version" "$got"
run functions --load --store "$STORE"
check "functions --load again replaces it" 0 '^loaded library sluice '

rcli ACL SETUSER nofn on '>pw' '~*' '&*' +@all -function >/dev/null
run functions --load --store "valkey://nofn:pw@127.0.0.1:$port"
if [ "$rc" -eq 3 ] && grep -q "ACL" "$TMP/err" && grep -q NOPERM "$TMP/err"; then
    pass "an ACL without FUNCTION: exit 3, naming it ($(head -n 1 "$TMP/err"))"
else
    fail "an ACL without FUNCTION" "exit $rc; $err"
fi
run functions --load --store "valkey://127.0.0.1:1"
if [ "$rc" -eq 3 ]; then
    pass "an unreachable server: exit 3 ($(head -n 1 "$TMP/err"))"
else
    fail "an unreachable server: exit 3" "exit $rc; $err"
fi

# A server older than Redis 7 (a fake one, answering FUNCTION as Redis 6.2
# does): a usage error naming what is missing.
if start_fake 27000 '-ERR unknown command `FUNCTION`, with args beginning with: `LOAD`, `REPLACE`, \r\n'; then
    run functions --load --store "valkey://127.0.0.1:$fake_port"
    if [ "$rc" -eq 2 ] && grep -q "FUNCTION not supported by the server (Redis 7+ or Valkey needed)" "$TMP/err"; then
        pass "a server without FUNCTION: exit 2, naming it ($(head -n 1 "$TMP/err"))"
    else
        fail "a server without FUNCTION: exit 2, naming it" "exit $rc; $err"
    fi
    stop_pid "$fake_pid"
    fake_pid=
else
    fail "the fake server starts (\$SLUICE_FAKE_SERVER)" "$(cat "$TMP/fake.log" 2>&1)"
fi

# ---- Usage errors ---------------------------------------------------------------

usage_error "--load without --store" "--load needs --store" functions --load
usage_error "--load on the embedded store" "embedded store has no server" \
    functions --load --store mem://
usage_error "--store without --load" "--store is only for --load" \
    functions --store "$STORE"
usage_error "--store without a URL" "--store needs a URL" functions --load --store
usage_error "an unknown argument" "unexpected argument 'x'" functions x

run functions --help
check "functions --help" 0 '^Usage: sluice functions'
run --help
check "sluice --help lists functions" 0 '^  functions '

echo "cli_functions_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
