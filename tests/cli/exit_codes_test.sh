#!/usr/bin/env bash
#
# exit_codes_test.sh - the one exit-code rule of every sluice command
# (cli/main.c's header, 'sluice --help'): 0 did what was asked, 1 the answer
# is no, 2 usage error (found before the store is asked, a bad store URL
# included), 3 store error. Each command family (hit, peek, reset, replay,
# ttl, queue, work, demo) is run to each code it has, against the embedded
# store, a private server ($SLUICE_TEST_SERVER, else redis-server) on an
# unusual loopback port, a second one started with --requirepass (a wrong
# password is 3), and a loopback port nothing listens on (3).
#
# Usage: bash tests/cli/exit_codes_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "exit_codes_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: exit_codes_test.sh PATH-TO-SLUICE}
passed=0
failed=0

. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries exit_codes_test

TMP=$(mktemp -d)
server_pid=
auth_pid=
cleanup() {
    stop_pid "$server_pid" "$auth_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

start_server exit_codes_test 29000
STORE="valkey://127.0.0.1:$port?prefix=exit$$&emq_prefix=exitq$$&timeout=5000"
if spawn_free_server $((31000 + $$ % 2000)) "$TMP/auth.log" \
        --requirepass right-pw-$$; then
    auth_port=$spawned_port
    auth_pid=$spawned_pid
    pass "the password server starts on port $auth_port"
else
    auth_port=$spawned_port
    auth_pid=$spawned_pid
    fail "the password server starts on port $auth_port" "$(cat "$TMP/auth.log")"
fi
# Port 1 on loopback: nothing listens there (binding it needs root, and no
# test runs a server on it), so a connect is refused at once.
DEAD="valkey://127.0.0.1:1?timeout=500&connect_timeout=500"
WRONG="valkey://:wrong-pw@127.0.0.1:$auth_port"
BADURL="valkey://127.0.0.1:$port?no_such_option=1"
L=(--algo fixed --max 1 --window 1m)

# code NAME RC ARGS...: runs sluice ARGS (stdin /dev/null) and expects
# exit RC; a 2 or a 3 must say why on stderr.
code() {
    local name=$1 want=$2
    shift 2
    run "$@"
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit $want" "exit $rc; stdout: $out; stderr: $err"
    elif [ "$want" -ge 2 ] && [ -z "$err" ]; then
        fail "$name: exit $want says why on stderr" "stderr is empty"
    else
        pass "$name: exit $want${err:+ ($(printf '%s' "$err" | head -n 1))}"
    fi
}

# code_in NAME RC INPUT ARGS...: the same with INPUT (printf format) on stdin.
code_in() {
    local name=$1 want=$2 input=$3
    shift 3
    run_in "$input" "$@"
    if [ "$rc" -eq "$want" ]; then
        pass "$name: exit $want"
    else
        fail "$name: exit $want" "exit $rc; stdout: $out; stderr: $err"
    fi
}

# ---- hit, peek, reset --------------------------------------------------------

for cmd in hit peek; do
    code "$cmd on the embedded store" 0 $cmd k "${L[@]}"
    code "$cmd --limit on the embedded store" 0 $cmd k --limit fixed:1/1m
    code "$cmd: a bad --max" 2 $cmd k --algo fixed --max 0 --window 1m
    code "$cmd: a bad --window" 2 $cmd k --algo fixed --max 1 --window 1s1m
    code "$cmd: an unknown store URL option" 2 $cmd k "${L[@]}" --store "$BADURL"
    code "$cmd: an unknown scheme" 2 $cmd k "${L[@]}" --store 'nope://x'
    code "$cmd: a TLS option on a plaintext URL" 2 $cmd k "${L[@]}" \
        --store "valkey://127.0.0.1:$port?tls_ca=/nonexistent"
    code "$cmd: an unreadable --store-file" 2 $cmd k "${L[@]}" \
        --store-file "$TMP/no-such-file"
    code "$cmd: an unreachable port" 3 $cmd k "${L[@]}" --store "$DEAD"
    code "$cmd --limit: an unreachable port" 3 $cmd k --limit fixed:1/1m \
        --store "$DEAD"
    code "$cmd: a wrong password" 3 $cmd k "${L[@]}" --store "$WRONG"
done
SLUICE_STORE=$BADURL code "hit: a bad SLUICE_STORE" 2 hit k "${L[@]}"
if grep -q "^sluice: SLUICE_STORE: " "$TMP/err"; then
    pass "a bad SLUICE_STORE is named in the message"
else
    fail "a bad SLUICE_STORE is named in the message" "$err"
fi
code "hit on a server: admitted" 0 hit k1 "${L[@]}" --store "$STORE"
code "hit on a server: refused" 1 hit k1 "${L[@]}" --store "$STORE"
code "peek on a server: would refuse" 1 peek k1 "${L[@]}" --store "$STORE"
code "hit --limit on a server: admitted" 0 hit k2 --limit fixed:1/1m \
    --store "$STORE"
code "hit --limit on a server: refused" 1 hit k2 --limit fixed:1/1m \
    --store "$STORE"
code "peek --limit on a server: would refuse" 1 peek k2 --limit fixed:1/1m \
    --store "$STORE"
code "reset on a server (something there)" 0 reset k1 "${L[@]}" --store "$STORE"
code "reset on a server (nothing there)" 0 reset k1 "${L[@]}" --store "$STORE"
code "peek after reset: would admit" 0 peek k1 "${L[@]}" --store "$STORE"
code "reset on the embedded store" 0 reset k --algo fixed
code "reset --limit on a server" 0 reset k2 --limit fixed:1/1m --store "$STORE"
code "reset: a bad --algo" 2 reset k --algo nope
code "reset: a bad store URL" 2 reset k --algo fixed --store "$BADURL"
code "reset: an unreachable port" 3 reset k --algo fixed --store "$DEAD"
code "reset: a wrong password" 3 reset k "${L[@]}" --store "$WRONG"
# A URL that parses but does not fit the server is the store's answer, 3:
# a cluster URL on a server without cluster mode, a database it lacks.
code "hit: a cluster URL on a plain server" 3 hit k "${L[@]}" \
    --store "valkey+cluster://127.0.0.1:$port"
code "hit: a database the server lacks" 3 hit k "${L[@]}" \
    --store "valkey://127.0.0.1:$port/99999"

# ---- replay --------------------------------------------------------------------

code_in "replay on the embedded store (refusals included)" 0 '0 a\n1 a\n' \
    replay "${L[@]}"
code_in "replay: a malformed line" 2 '0 a\nx a\n' replay "${L[@]}"
code_in "replay: a bad store URL" 2 '0 a\n' replay "${L[@]}" --store "$BADURL"
code_in "replay: an unreachable port" 3 '0 a\n' replay "${L[@]}" --store "$DEAD"
code_in "replay: a wrong password" 3 '0 a\n' replay "${L[@]}" --store "$WRONG"

# ---- ttl -----------------------------------------------------------------------

code "ttl on a server" 0 ttl tq --store "$STORE"
code "ttl: no QUEUE" 2 ttl --store "$STORE"
code "ttl: no store" 2 ttl tq
code "ttl: a bad store URL" 2 ttl tq --store "$BADURL"
code "ttl: an unreachable port" 3 ttl tq --store "$DEAD"
code "ttl: a wrong password" 3 ttl tq --store "$WRONG"

# ---- queue ---------------------------------------------------------------------

code "queue add" 0 queue add q1 --data one --store "$STORE"
code "queue take: a job" 0 queue take q1 --store "$STORE"
code "queue take: nothing to take" 1 queue take q1 --store "$STORE"
code "queue complete: a lost lease" 1 queue complete q1 1 999999 --store "$STORE"
code "queue retry: not a failed job" 1 queue retry q1 99 --store "$STORE"
code "queue stats" 0 queue stats q1 --store "$STORE"
code "queue set-cap" 0 queue set-cap q1 --max 5 --per 1s --store "$STORE"
code "queue: an unknown subcommand" 2 queue nope q1 --store "$STORE"
code "queue add: a bad --delay" 2 queue add q1 --delay 1m1m --store "$STORE"
code "queue: the embedded store has no queues" 2 queue stats q1 --store mem://
code "queue: a bad store URL" 2 queue stats q1 --store "$BADURL"
SLUICE_STORE=$BADURL code "queue: a bad SLUICE_STORE" 2 queue stats q1
code "queue: an unreachable port" 3 queue stats q1 --store "$DEAD"
code "queue: a wrong password" 3 queue add q1 --data x --store "$WRONG"

# ---- work ----------------------------------------------------------------------

run queue add wq --data job --store "$STORE"
code "work: one job done" 0 work wq --count 1 --timeout 5s --store "$STORE"
code "work: a bad --timeout" 2 work wq --timeout 1x --store "$STORE"
code "work: no store" 2 work wq --count 1
code "work: a bad store URL" 2 work wq --count 1 --store "$BADURL"
code "work: an unreachable port, past --give-up-after" 3 work wq --count 1 \
    --give-up-after 200ms --store "$DEAD"
code "work: a wrong password" 3 work wq --count 1 --give-up-after 200ms \
    --store "$WRONG"

# ---- demo ----------------------------------------------------------------------

code "demo" 0 demo
code "demo: an unexpected argument" 2 demo nope
code "demo chat: the embedded store" 2 demo chat --store mem://
code "demo chat: a bad store URL" 2 demo chat --store "$BADURL"
SLUICE_STORE=$BADURL code "demo chat: a bad SLUICE_STORE" 2 demo chat
code "demo chat: an unreachable port" 3 demo chat --store "$DEAD"
code "demo chat: a wrong password" 3 demo chat --store "$WRONG"

# ---- The rule is written down ----------------------------------------------------

run --help
if printf '%s\n' "$out" | grep -q '^  0  did what was asked' &&
    printf '%s\n' "$out" | grep -q '^  1  the answer is no' &&
    printf '%s\n' "$out" | grep -q '^  2  usage error, found before the store is asked' &&
    printf '%s\n' "$out" | grep -q '^  3  store error'; then
    pass "sluice --help states the exit-code rule"
else
    fail "sluice --help states the exit-code rule" "$out"
fi

echo "exit_codes_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
