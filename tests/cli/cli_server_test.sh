#!/usr/bin/env bash
#
# cli_server_test.sh - checks the sluice command line against a real server
# store: a private server ($SLUICE_TEST_SERVER, else redis-server, else
# valkey-server) on an unusual port, in a mktemp -d folder, stopped by a
# trap. Without a server binary it fails: the test command (scripts/test.sh)
# installs one.
#
# Usage: bash tests/cli/cli_server_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "cli_server_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: cli_server_test.sh PATH-TO-SLUICE}
passed=0
failed=0

# pass, fail, run, run_in, check, usage_error, expect_eq, start_server,
# terminal_safe, start_fake, and the build under test: SERVER and CLI
. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries cli_server_test

TMP=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# ---- The server -----------------------------------------------------------------

start_server cli_server_test 23000

# A fresh key prefix per run, so state from another run cannot interfere.
STORE="valkey://127.0.0.1:$port?prefix=clitest$$&timeout=5000"

# ---- hit, peek, reset share the budget between processes -----------------------

for algo in $(cli_algos); do
    L=(--algo "$algo" --max 2 --window 1m --store "$STORE")
    run hit "k-$algo" "${L[@]}"
    check "$algo: first hit admitted" 0 '^allowed remaining=1 limit=2 '
    run peek "k-$algo" "${L[@]}"
    check "$algo: peek sees the count and counts nothing" 0 \
        '^allowed remaining=0 limit=2 '
    run hit "k-$algo" "${L[@]}" --json
    check "$algo: second hit admitted, in JSON" 0 \
        "^\\{\"key\":\"k-$algo\",\"algo\":\"$algo\",\"allowed\":true,\"limit\":2,\"remaining\":0,"
    run hit "k-$algo" "${L[@]}"
    check "$algo: third hit refused, with a wait" 1 \
        '^denied remaining=0 limit=2 retry_after_ms=[1-9][0-9]* '
    run reset "k-$algo" --algo "$algo" --max 2 --window 1m --store "$STORE"
    check "$algo: reset says it removed a count" 0 \
        "^reset k-$algo: removed its count\$"
    run reset "k-$algo" --algo "$algo" --max 2 --window 1m --store "$STORE" \
        --json
    check "$algo: a second reset finds nothing, in JSON" 0 \
        "^\\{\"key\":\"k-$algo\",\"algo\":\"$algo\",\"reset\":true,\"existed\":false\\}\$"
    run reset "k-$algo" --algo "$algo" --store "$STORE"
    check "$algo: reset with --algo alone, nothing there" 0 \
        "^reset k-$algo: nothing was there\$"
    run hit "k-$algo" "${L[@]}"
    run reset "k-$algo" --algo "$algo" --store "$STORE" --json
    check "$algo: reset with --algo alone tells a count was there" 0 \
        "^\\{\"key\":\"k-$algo\",\"algo\":\"$algo\",\"reset\":true,\"existed\":true\\}\$"
    run hit "k-$algo" "${L[@]}" --cost 2
    check "$algo: after reset the whole budget is there" 0 \
        '^allowed remaining=0 limit=2 '
done

# gcra's --burst on the server: 10 per minute (6 s apart), 2 at once.
L=(--algo gcra --max 10 --window 1m --burst 2 --store "$STORE")
run hit k-burst "${L[@]}"
check "gcra --burst 2: first hit admitted" 0 '^allowed remaining=1 limit=10 '
run hit k-burst "${L[@]}"
check "gcra --burst 2: second hit admitted" 0 '^allowed remaining=0 limit=10 '
run hit k-burst "${L[@]}"
check "gcra --burst 2: third hit refused, with a wait" 1 \
    '^denied remaining=0 limit=10 retry_after_ms=[1-9][0-9]* '

# ---- --limit: several limits, all or nothing, between processes ------------------

L=(--limit fixed:2/1m --limit sliding-log:3/1h --store "$STORE")
run hit multi "${L[@]}"
check "--limit: first admitted" 0 '^allowed remaining=1 limit=2 '
run hit multi "${L[@]}"
check "--limit: second admitted" 0 '^allowed remaining=0 limit=2 '
run hit multi "${L[@]}"
check "--limit: third refused by the fixed window" 1 \
    '^denied remaining=0 limit=2 retry_after_ms=[1-9][0-9]* '
run peek multi --limit sliding-log:3/1h --limit fixed:9/1m --store "$STORE"
check "--limit: the refused one counted in no limit" 0 \
    '^limit sliding-log:3/3600000ms allowed remaining=0 limit=3 '
run hit multi --limit sliding-log:3/1h --limit fixed:9/1m --store "$STORE" \
    --json
check "--limit: JSON" 0 '^\{"key":"multi","allowed":true,"limit":3,"remaining":0,'
run hit multi --limit sliding-log:3/1h --limit fixed:9/1m --store "$STORE"
check "--limit: now the log refuses, with the larger wait" 1 \
    '^denied remaining=0 limit=3 retry_after_ms=3[0-9]{6} '
run hit multi --algo fixed --max 2 --window 1m --store "$STORE"
check "--limit: a single-limit hit on the key counts apart" 0 \
    '^allowed remaining=1 limit=2 '
run reset multi "${L[@]}"
check "--limit: reset says it removed a count" 0 '^reset multi: removed its count$'
check "--limit: reset, per limit" 0 \
    '^limit sliding-log:3/3600000ms: removed its count$'
run reset multi "${L[@]}" --json
check "--limit: a second reset finds nothing, in JSON" 0 \
    '^\{"key":"multi","limits":\[\{"algo":"fixed","max":2,"window_ms":60000,"burst":0,"existed":false\},\{"algo":"sliding-log","max":3,"window_ms":3600000,"burst":0,"existed":false\}\],"reset":true,"existed":false\}$'
run hit multi "${L[@]}"
check "--limit: after reset the budgets are whole" 0 \
    '^allowed remaining=1 limit=2 '

# ---- replay is paced in real time ------------------------------------------------

# max 2 per 500 ms: two at 0 fill it, the third at 0 is refused, and at 1100
# one fits again. (Not sooner: the sliding counter's windows are aligned to
# the wall clock, so 700 ms later its previous window may still weigh 2.)
for algo in $(cli_algos); do
    run_in '0 r\n0 r\n0 r\n1100 r\n' replay --algo "$algo" --max 2 \
        --window 500 --store "$STORE&prefix=replay$$$algo"
    got=$(printf '%s\n' "$out" | awk '{ print $4 }' | tr '\n' ' ')
    if [ "$rc" -eq 0 ] && [ "$got" = "allowed allowed denied allowed " ]; then
        pass "$algo: replay on the server, paced ($got)"
    else
        fail "$algo: replay on the server, paced" "exit $rc; $out; $err"
    fi
done

# A paced replay writes each line as it is decided: to a pipe, the lines
# of the requests the server has counted are not lost to a SIGINT. (A
# background job ignores SIGINT unless told: env --default-signal.)
mkfifo "$TMP/pipe"
cat "$TMP/pipe" >"$TMP/paced" &
cat_pid=$!
printf '0 p\n0 p\n20000 p\n' |
    env --default-signal=INT "$SLUICE" replay --algo fixed --max 5 \
        --window 1m --store "$STORE&prefix=paced$$" >"$TMP/pipe" 2>"$TMP/err" &
replay_pid=$!
sleep 1
kill -INT "$replay_pid"
wait "$replay_pid"
rc=$?
wait "$cat_pid"
if [ "$rc" -eq 130 ] && [ "$(awk '{ print $1, $2, $4 }' "$TMP/paced" | paste -sd '|')" = \
    "0 p allowed|0 p allowed" ]; then
    pass "replay to a pipe, then SIGINT: the lines decided are there"
else
    fail "replay to a pipe, then SIGINT: the lines decided are there" \
        "exit $rc; $(cat "$TMP/paced" "$TMP/err")"
fi
# One pacing sleep is bounded: a line more than 1h after the one before is
# an error of that line, not a wait of hours.
printf '0 g\n3600001 g\n' >"$TMP/gap"
timeout 10 "$SLUICE" replay --algo fixed --max 5 --window 1m \
    --store "$STORE" <"$TMP/gap" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "line 2: .*1h" "$TMP/err"; then
    pass "replay: a gap over 1h on a server store is an error ($(cat "$TMP/err"))"
else
    fail "replay: a gap over 1h on a server store is an error" \
        "exit $rc; $(cat "$TMP/out" "$TMP/err")"
fi
run_in '0 g\n3600001 g\n' replay --algo fixed --max 5 --window 1m
check "replay: the embedded store takes any gap (virtual time)" 0 '^3600001 g '

# ---- ttl: the queue limiter's read ------------------------------------------------

RAW=("$CLI" -p "$port")
Q="chat:42"
run ttl "$Q" --store "$STORE"
check "ttl: no counter, no cap: admit" 0 '^0$'
# A cap without a duration cannot be enforced: ttl fails as 'queue take'
# does (it answered 0), naming the problem; with --max it needs none.
"${RAW[@]}" HSET "emq:{$Q}:meta" max 3 >/dev/null
run ttl "$Q" --store "$STORE"
if [ "$rc" -eq 3 ] && [ -z "$out" ] && grep -q "no duration" "$TMP/err"; then
    pass "ttl: a cap without a duration is an error, as for take ($err)"
else
    fail "ttl: a cap without a duration is an error, as for take" \
        "exit $rc; out '$out'; $err"
fi
run queue take "$Q" --store "$STORE"
if [ "$rc" -eq 3 ] && grep -q "no duration" "$TMP/err"; then
    pass "queue take: the same error ($err)"
else
    fail "queue take: the same error" "exit $rc; $err"
fi
run ttl "$Q" --max 3 --store "$STORE"
check "ttl: a cap passed explicitly needs no duration" 0 '^0$'
"${RAW[@]}" HSET "emq:{$Q}:meta" duration 60000 >/dev/null
"${RAW[@]}" SET "emq:{$Q}:limiter" 2 PX 60000 >/dev/null
run ttl "$Q" --store "$STORE"
check "ttl: under the cap from meta: admit" 0 '^0$'
"${RAW[@]}" SET "emq:{$Q}:limiter" 3 PX 60000 >/dev/null
run ttl "$Q" --store "$STORE" --json
check "ttl: at the cap: the counter's PTTL" 0 \
    '^\{"queue":"chat:42","wait_ms":(59[0-9]{3}|60000)\}$'
run ttl "$Q" --max 4 --store "$STORE"
check "ttl: a cap passed explicitly wins over meta" 0 '^0$'
run ttl "$Q" --store "valkey://127.0.0.1:$port?emq_prefix=other"
check "ttl: emq_prefix= moves the keys" 0 '^0$'
run ttl "$Q"
check "ttl: without --store is a usage error" 2 '^$'

# ---- The store URL outside argv: SLUICE_STORE and --store-file -----------------------

# A user with a password of its own, so that the URL carries a secret.
"${RAW[@]}" ACL SETUSER sfuser on '>hunter2pw' '~*' '&*' '+@all' >/dev/null
SECRET="valkey://sfuser:hunter2pw@127.0.0.1:$port?prefix=clisf$$"
SF=$TMP/store.url
printf '%s\n' "$SECRET" >"$SF"
chmod 600 "$SF"
L=(--algo fixed --max 1 --window 1m)
SLUICE_STORE=$SECRET run hit sf "${L[@]}"
check "SLUICE_STORE: a hit counted on the server" 0 '^allowed remaining=0 '
run hit sf "${L[@]}" --store-file "$SF"
check "--store-file: the same server and budget, so refused" 1 '^denied '
SLUICE_STORE="valkey://sfuser:wrongpw@127.0.0.1:$port" run hit sf "${L[@]}" \
    --store-file "$SF"
check "--store-file beats SLUICE_STORE (its password is the right one)" 1 \
    '^denied '
SLUICE_STORE="valkey://sfuser:wrongpw@127.0.0.1:$port" run hit sf "${L[@]}"
if [ "$rc" -eq 3 ] && ! grep -q "wrongpw" "$TMP/out" "$TMP/err"; then
    pass "SLUICE_STORE with a wrong password: exit 3, the password not shown ($err)"
else
    fail "SLUICE_STORE with a wrong password: exit 3, the password not shown" \
        "exit $rc; $out $err"
fi
SLUICE_STORE=$SECRET run queue add sfq --data one
check "SLUICE_STORE: queue add with no --store" 0 '^[0-9]+$'
# While a worker runs, its command line (what 'ps' shows) holds no password.
"$SLUICE" work sfq --store-file "$SF" --count 2 --exec 'sleep 0.3' \
    >"$TMP/sfw.out" 2>"$TMP/sfw.err" &
sfw_pid=$!
wait_for "$TMP/sfw.out" '^sfq [0-9]+ done$' 5
if tr '\0' ' ' <"/proc/$sfw_pid/cmdline" | grep -q -- '--store-file' &&
    ! grep -q "hunter2pw" "/proc/$sfw_pid/cmdline"; then
    pass "work --store-file: its command line holds no password"
else
    fail "work --store-file: its command line holds no password" \
        "$(tr '\0' ' ' <"/proc/$sfw_pid/cmdline" 2>&1)"
fi
run queue add sfq --data two --store-file "$SF"
wait "$sfw_pid"
rc=$?
expect_eq "work --store-file: the jobs of SLUICE_STORE and --store-file done" \
    "0|sfq 1 done|sfq 2 done" "$rc|$(paste -sd '|' "$TMP/sfw.out")"
run functions --load --store-file "$SF"
check "functions --load --store-file" 0 '^loaded library sluice '
"${RAW[@]}" ACL DELUSER sfuser >/dev/null

# ---- A server that cannot be reached -------------------------------------------

# The server is stopped, so its port refuses connections.
kill "$server_pid" 2>/dev/null
wait "$server_pid" 2>/dev/null
server_pid=
DEAD="valkey://127.0.0.1:$port"
run hit k --algo fixed --max 2 --window 1s --store "$DEAD"
if [ "$rc" -eq 3 ] && grep -q "ECONN" "$TMP/err"; then
    pass "an unreachable server is a store error (exit 3: $err)"
else
    fail "an unreachable server is a store error" "exit $rc; $err"
fi
run hit k --algo fixed --max 2 --window 1s --store "$DEAD?on_error=open" --json
check "on_error=open admits, and says so" 0 '"allowed":true.*"fallback":"open"'
run hit k --algo fixed --max 2 --window 1s --store "$DEAD?on_error=closed"
check "on_error=closed refuses, and says so" 1 '^denied .* fallback=closed$'
run hit k --limit fixed:2/1s --limit sliding-log:5/1m --store "$DEAD"
if [ "$rc" -eq 3 ] && grep -q "ECONN" "$TMP/err"; then
    pass "--limit: an unreachable server is a store error (exit 3: $err)"
else
    fail "--limit: an unreachable server is a store error" "exit $rc; $err"
fi
run hit k --limit fixed:2/1s --limit sliding-log:5/1m \
    --store "$DEAD?on_error=open"
check "--limit: on_error=open admits, and says so, for every limit" 0 \
    '^limit sliding-log:5/60000ms allowed .* fallback=open$'
run hit k --limit fixed:2/1s --limit sliding-log:5/1m \
    --store "$DEAD?on_error=closed" --json
check "--limit: on_error=closed refuses, and says so" 1 \
    '^\{"key":"k","allowed":false,.*"fallback":"closed","limits"'
run_in '0 k\n' replay --algo fixed --max 2 --window 1s --store "$DEAD"
if [ "$rc" -eq 3 ] && grep -q "line 1" "$TMP/err"; then
    pass "replay against an unreachable server (exit 3: $err)"
else
    fail "replay against an unreachable server" "exit $rc; $err"
fi

echo "cli_server_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
