#!/usr/bin/env bash
#
# cli_harness_test.sh - checks that the shell harnesses run the build they
# are told to: cli_helpers.sh (the CLI tests and srvtime_test.sh) and
# bench/private_server.sh (the benchmark scripts) start
# $SLUICE_TEST_SERVER and ask $SLUICE_TEST_CLI, each pointed here at a
# wrapper script that logs its arguments and then execs the real program;
# a path that is not an executable stops them at once with a message
# naming it; and without the variables they take redis-server from PATH,
# else valkey-server.
#
# Usage: bash tests/cli/cli_harness_test.sh PATH-TO-SLUICE (not used: the
# harness is what is tested).
#
# Every check prints PASS or FAIL; the last line is
# "cli_harness_test: N passed, M failed", and the exit status is non-zero
# if any check failed.

set -u

passed=0
failed=0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/cli_helpers.sh"
use_test_binaries cli_harness_test
real_server=$SERVER
real_cli=$CLI

TMP=$(mktemp -d)
server_pid=
cleanup() {
    stop_pid "$server_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

# wrapper NAME REAL: writes $TMP/NAME, which logs its arguments to
# $TMP/NAME.log and execs REAL.
wrapper() {
    printf '#!/bin/sh\necho "$@" >>"%s/%s.log"\nexec "%s" "$@"\n' \
        "$TMP" "$1" "$2" >"$TMP/$1"
    chmod 755 "$TMP/$1"
}
wrapper server "$real_server"
wrapper cli "$real_cli"
port=$((20000 + RANDOM % 10000))

# ---- cli_helpers.sh ------------------------------------------------------------

SLUICE_TEST_SERVER=$TMP/server SLUICE_TEST_CLI=$TMP/cli use_test_binaries x
expect_eq "use_test_binaries: SERVER is \$SLUICE_TEST_SERVER" \
    "$TMP/server" "$SERVER"
expect_eq "use_test_binaries: CLI is \$SLUICE_TEST_CLI" "$TMP/cli" "$CLI"
if spawn_server "$port" "$TMP/server.out"; then
    server_pid=$spawned_pid
    pass "spawn_server starts \$SLUICE_TEST_SERVER on port $port"
else
    server_pid=$spawned_pid
    fail "spawn_server starts \$SLUICE_TEST_SERVER" "$(cat "$TMP/server.out")"
fi
if grep -q -- "--port $port" "$TMP/server.log" 2>/dev/null; then
    pass "the server wrapper ran, with the port"
else
    fail "the server wrapper ran" "$(cat "$TMP/server.log" 2>&1)"
fi
version=$(server_version "$port")
if [[ $version =~ ^(redis|valkey)\ [0-9]+\.[0-9]+\.[0-9]+\ \($TMP/server\)$ ]] &&
   grep -q "INFO server" "$TMP/cli.log"; then
    pass "server_version asks through \$SLUICE_TEST_CLI: $version"
else
    fail "server_version asks through \$SLUICE_TEST_CLI" "$version"
fi
# A port another server holds: our server cannot bind it and exits, and
# spawn_server says so, however soon the port takes connections (it is the
# other server's); spawn_free_server moves on to a port of its own.
if spawn_server "$port" "$TMP/taken.log"; then
    fail "spawn_server on a port another server holds: returns 1" \
        "returned 0; log: $(cat "$TMP/taken.log")"
    stop_pid "$spawned_pid"
elif grep -q 'Address already in use' "$TMP/taken.log"; then
    pass "spawn_server on a port another server holds: returns 1"
else
    fail "spawn_server on a port another server holds: its log says why" \
        "$(cat "$TMP/taken.log")"
fi
if spawn_free_server "$port" "$TMP/free.log"; then
    owner=$("$CLI" -p "$spawned_port" INFO server | tr -d '\r' |
        sed -n 's/^process_id://p')
    if [ "$spawned_port" -gt "$port" ] && [ "$owner" = "$spawned_pid" ]; then
        pass "spawn_free_server from a held port: $spawned_port, ours"
    else
        fail "spawn_free_server from a held port: a later one, ours" \
            "port $spawned_port (from $port), process $owner, ours $spawned_pid"
    fi
    stop_pid "$spawned_pid"
else
    fail "spawn_free_server from a held port" "$(cat "$TMP/free.log")"
fi
stop_pid "$server_pid"
server_pid=

# A bad path: the reason, and the summary line, at once.
out=$(SLUICE_TEST_SERVER=/nope bash -c \
    ". '$here/lib/cli_helpers.sh'; use_test_binaries some_test" 2>&1)
rc=$?
if [ $rc -eq 1 ] &&
   printf '%s\n' "$out" | grep -qx 'FAIL: SLUICE_TEST_SERVER=/nope: not an executable' &&
   printf '%s\n' "$out" | grep -qx 'some_test: 0 passed, 1 failed'; then
    pass "SLUICE_TEST_SERVER=/nope: exit 1, named"
else
    fail "SLUICE_TEST_SERVER=/nope: exit 1, named" "exit $rc: $out"
fi
out=$(SLUICE_TEST_CLI=$TMP bash -c \
    ". '$here/lib/cli_helpers.sh'; use_test_binaries some_test" 2>&1)
if printf '%s\n' "$out" | grep -qx "FAIL: SLUICE_TEST_CLI=$TMP: not an executable"; then
    pass "SLUICE_TEST_CLI=a directory: named"
else
    fail "SLUICE_TEST_CLI=a directory: named" "$out"
fi

# Without the variables: redis-server from PATH, else valkey-server.
mkdir "$TMP/bin"
ln -s "$real_server" "$TMP/bin/valkey-server"
ln -s "$real_cli" "$TMP/bin/valkey-cli"
got=$(env -u SLUICE_TEST_SERVER -u SLUICE_TEST_CLI PATH="$TMP/bin" "$BASH" -c \
    ". '$here/lib/cli_helpers.sh'; use_test_binaries x; echo \$SERVER \$CLI")
expect_eq "no variables, only valkey-* on PATH: those" \
    "$TMP/bin/valkey-server $TMP/bin/valkey-cli" "$got"
ln -s "$real_server" "$TMP/bin/redis-server"
got=$(env -u SLUICE_TEST_SERVER -u SLUICE_TEST_CLI PATH="$TMP/bin" "$BASH" -c \
    ". '$here/lib/cli_helpers.sh'; use_test_binaries x; echo \$SERVER")
expect_eq "no variables, both on PATH: redis-server" \
    "$TMP/bin/redis-server" "$got"

# ---- bench/private_server.sh ---------------------------------------------------

: >"$TMP/server.log"
out=$(SLUICE_TEST_SERVER=$TMP/server SLUICE_TEST_CLI=$TMP/cli bash -c \
    ". '$here/../../bench/private_server.sh'; bench_server_start;
     bench_server_version" 2>&1)
if [[ $out =~ ^(redis|valkey)\ [0-9.]+\ \($TMP/server\)$ ]] &&
   grep -q -- "--bind 127.0.0.1" "$TMP/server.log"; then
    pass "private_server.sh starts \$SLUICE_TEST_SERVER: $out"
else
    fail "private_server.sh starts \$SLUICE_TEST_SERVER" \
        "$out; log: $(cat "$TMP/server.log")"
fi
out=$(SLUICE_TEST_SERVER=/nope bash -c \
    ". '$here/../../bench/private_server.sh'; echo still running" 2>&1)
expect_eq "private_server.sh, SLUICE_TEST_SERVER=/nope: stops, named" \
    "bench: SLUICE_TEST_SERVER=/nope: not an executable" "$out"

echo "cli_harness_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
