#!/usr/bin/env bash
#
# cli_queue_test.sh - checks 'sluice queue', 'sluice work' and 'sluice demo
# chat' against a real server: a private valkey-server (or redis-server) on
# an unusual port, in a mktemp -d folder, stopped by PID in a trap. Without a
# server binary it fails: the test command (scripts/test.sh) installs one.
#
# Usage: bash tests/cli/cli_queue_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "cli_queue_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: cli_queue_test.sh PATH-TO-SLUICE}
passed=0
failed=0

SERVER=$(command -v valkey-server || command -v redis-server || true)
if [ -z "$SERVER" ]; then
    echo "FAIL: no valkey-server or redis-server on PATH"
    echo "cli_queue_test: 0 passed, 1 failed"
    exit 1
fi

TMP=$(mktemp -d)
server_pid=
worker_pid=
cleanup() {
    if [ -n "$worker_pid" ]; then
        kill "$worker_pid" 2>/dev/null
        wait "$worker_pid" 2>/dev/null
    fi
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# ---- Helpers ------------------------------------------------------------------

# pass, fail, run, run_in, check, usage_error, expect_eq and start_server
. "$(dirname "$0")/lib/cli_helpers.sh"

# check_err NAME RC PATTERN: the last run exited RC and stderr matches.
check_err() {
    if [ "$rc" -eq "$2" ] && grep -Eq -- "$3" "$TMP/err"; then
        pass "$1 (exit $rc: $(head -n 1 "$TMP/err"))"
    else
        fail "$1" "exit $rc, expected $2; expected /$3/ in stderr: $err
stdout: $out"
    fi
}

now_ms() {
    date +%s%3N
}

# ---- The server -----------------------------------------------------------------

start_server cli_queue_test 27000

# A fresh queue-key prefix per run, so state from another run cannot
# interfere.
STORE="valkey://127.0.0.1:$port?emq_prefix=qtest$$"
S=(--store "$STORE")

# ---- add, take, complete ------------------------------------------------------------

run queue add q1 --data hello "${S[@]}"
check "add --data prints the job's id" 0 '^1$'
run queue add q1 --data 'say "hi"' "${S[@]}" --json
check "add --json" 0 '^\{"queue":"q1","id":2\}$'
run_in 'from\nstdin\n' queue add q1 "${S[@]}"
check "add reads the payload from stdin" 0 '^3$'

run queue take q1 "${S[@]}"
check "take prints the job, then its payload" 0 \
    '^job 1 attempt 1 lease [0-9]+$'
expect_eq "take: the payload on the next line" "hello" \
    "$(printf '%s\n' "$out" | sed -n 2p)"
lease1=$(printf '%s\n' "$out" | awk 'NR == 1 { print $6 }')
run queue take q1 "${S[@]}" --json
check "take --json: the payload as a JSON string" 0 \
    '^\{"queue":"q1","status":"job","id":2,"attempt":1,"lease":[0-9]+,"payload":"say \\"hi\\""\}$'
lease2=$(printf '%s\n' "$out" | sed 's/.*"lease":\([0-9]*\).*/\1/')
run queue take q1 "${S[@]}" --json
check "take --json: bytes from stdin kept exactly" 0 \
    '"id":3,.*"payload":"from\\nstdin\\n"\}$'
lease3=$(printf '%s\n' "$out" | sed 's/.*"lease":\([0-9]*\).*/\1/')

run queue complete q1 1 "$lease1" "${S[@]}"
check "complete" 0 '^done$'
run queue complete q1 1 "$lease1" "${S[@]}"
check "complete twice: the lease is lost" 1 '^lost$'
check_err "complete twice: a message says why" 1 'lease .* is no longer held'
run queue complete q1 2 "$lease2" "${S[@]}" --json
check "complete --json" 0 '^\{"queue":"q1","id":2,"outcome":"done"\}$'

run queue take q1 "${S[@]}"
check "take with nothing ready: empty, exit 1" 1 '^empty'
run queue take q1 "${S[@]}" --json
check "take --json with nothing ready" 1 \
    '^\{"queue":"q1","status":"empty","wait_ms":[0-9]+\}$'

# ---- fail, failed, retry ------------------------------------------------------------

run queue fail q1 3 "$lease3" --max-attempts 1 "${S[@]}"
check "fail at the last attempt: failed" 0 '^failed$'
run queue failed q1 "${S[@]}"
check "failed lists the job" 0 '^3$'
run queue failed q1 "${S[@]}" --json --limit 5
check "failed --json" 0 '^\{"queue":"q1","failed":\[3\]\}$'
run queue retry q1 3 "${S[@]}"
check "retry moves it back to wait" 0 '^retried$'
run queue retry q1 3 "${S[@]}" --json
check "retry of a job that is not failed: exit 1" 1 \
    '^\{"queue":"q1","id":3,"retried":false\}$'
run queue take q1 "${S[@]}"
check "a retried job starts its attempts afresh" 0 '^job 3 attempt 1 '
lease=$(printf '%s\n' "$out" | awk 'NR == 1 { print $6 }')
run queue fail q1 3 "$lease" --backoff 0 "${S[@]}" --json
check "fail before the last attempt: retrying" 0 \
    '^\{"queue":"q1","id":3,"outcome":"retrying"\}$'
run queue take q1 "${S[@]}"
check "the retried job comes back as attempt 2" 0 '^job 3 attempt 2 '
lease=$(printf '%s\n' "$out" | awk 'NR == 1 { print $6 }')
run queue fail q1 3 "$lease" --backoff 10s "${S[@]}"
check "fail with a back-off" 0 '^retrying$'
run queue stats q1 "${S[@]}"
check "stats" 0 \
    '^waiting=0 active=0 delayed=1 failed=0 completed=2 max=0 duration_ms=0 count=0 wait_ms=0$'
run queue stats q1 "${S[@]}" --json
check "stats --json" 0 \
    '^\{"queue":"q1","waiting":0,"active":0,"delayed":1,"failed":0,"completed":2,"max":0,"duration_ms":0,"count":0,"wait_ms":0\}$'
run queue take q1 "${S[@]}"
check "take with a delayed job: empty, and when it is due" 1 \
    '^empty [0-9]+$'
run queue add q1 --data later --delay 5s "${S[@]}"
check "add --delay" 0 '^4$'

# ---- The cap --------------------------------------------------------------------------

for i in 1 2 3; do
    "$SLUICE" queue add capq --data "c$i" "${S[@]}" >/dev/null 2>&1
done
run queue set-cap capq --max 1 --per 10s "${S[@]}"
check "set-cap" 0 '^max=1 duration_ms=10000$'
run queue take capq "${S[@]}"
check "take under the cap" 0 '^job 1 attempt 1 '
run queue take capq "${S[@]}"
check "take over the cap: deferred with the wait, exit 1" 1 \
    '^deferred ([1-9][0-9]{3}|10000)$'
run queue take capq "${S[@]}" --json
check "take --json over the cap" 1 \
    '^\{"queue":"capq","status":"deferred","wait_ms":([1-9][0-9]{3}|10000)\}$'
run queue stats capq "${S[@]}"
check "stats shows the cap, the count and the wait" 0 \
    'waiting=2 active=1 .* max=1 duration_ms=10000 count=1 wait_ms=[1-9]'
run queue set-cap capq --max 0 "${S[@]}" --json
check "set-cap --max 0 removes the cap" 0 \
    '^\{"queue":"capq","max":0,"duration_ms":0\}$'
run queue take capq "${S[@]}"
check "without a cap the next take is served" 0 '^job 2 attempt 1 '

# ---- A lost lease ------------------------------------------------------------------------

"$SLUICE" queue add leaseq --data slow "${S[@]}" >/dev/null 2>&1
run queue take leaseq --lease 100ms "${S[@]}"
check "take with a short lease" 0 '^job 1 attempt 1 '
old_lease=$(printf '%s\n' "$out" | awk 'NR == 1 { print $6 }')
sleep 0.3
run queue take leaseq "${S[@]}"
check "the lease ran out: the job goes to the next taker" 0 \
    '^job 1 attempt 2 '
new_lease=$(printf '%s\n' "$out" | awk 'NR == 1 { print $6 }')
run queue complete leaseq 1 "$old_lease" "${S[@]}"
check "the late worker's complete: lost, exit 1" 1 '^lost$'
run queue fail leaseq 1 "$old_lease" "${S[@]}" --json
check "the late worker's fail: lost, exit 1" 1 \
    '^\{"queue":"leaseq","id":1,"outcome":"lost"\}$'
run queue complete leaseq 1 "$new_lease" "${S[@]}"
check "the lease holder completes it" 0 '^done$'

# ---- Usage errors ------------------------------------------------------------------------

usage_error "queue without a subcommand" "missing SUBCOMMAND" queue
usage_error "queue: unknown subcommand" "unknown subcommand 'pop'" \
    queue pop q1 "${S[@]}"
usage_error "take: missing QUEUE" "queue take: missing QUEUE" \
    queue take "${S[@]}"
usage_error "complete: missing LEASE" "queue complete: missing LEASE" \
    queue complete q1 1 "${S[@]}"
usage_error "complete: ID 0" "ID: '0' is out of range" \
    queue complete q1 0 1 "${S[@]}"
usage_error "complete: an extra argument" "unexpected argument '9'" \
    queue complete q1 1 1 9 "${S[@]}"
usage_error "set-cap: bad --max" "--max: 'x' is not a whole number" \
    queue set-cap q1 --max x --per 1s "${S[@]}"
usage_error "set-cap: negative --max" "--max: '-1' is negative" \
    queue set-cap q1 --max -1 --per 1s "${S[@]}"
usage_error "set-cap: missing --max" "missing --max" \
    queue set-cap q1 --per 1s "${S[@]}"
usage_error "set-cap: missing --per" "missing --per" \
    queue set-cap q1 --max 5 "${S[@]}"
usage_error "take: bad --lease" "--lease: invalid duration '5x'" \
    queue take q1 --lease 5x "${S[@]}"
usage_error "add: bad --delay" "--delay: invalid duration 'soon'" \
    queue add q1 --delay soon "${S[@]}"
usage_error "take: an option of another subcommand" "unknown option '--data'" \
    queue take q1 --data x "${S[@]}"
usage_error "take: missing --store" "missing --store" queue take q1
usage_error "take: the embedded store has no queues" \
    "server store" queue take q1 --store mem://
usage_error "add: the embedded store has no queues" \
    "server store" queue add q1 --data x --store mem://
usage_error "work: no queue, no pattern" "missing QUEUE or --pattern" \
    work "${S[@]}"
usage_error "work: bad --count" "--count: '0' is out of range" \
    work q1 --count 0 "${S[@]}"
usage_error "work: bad --timeout" "--timeout: invalid duration" \
    work q1 --timeout never "${S[@]}"
usage_error "work: the embedded store has no queues" "server store" \
    work q1 --store mem://
usage_error "demo chat: no --store" "demo chat: needs a server store" \
    demo chat
usage_error "demo chat: the embedded store" "embedded store" \
    demo chat --store mem://
usage_error "demo: --store is for demo chat" "demo chat --store" \
    demo --store "$STORE"

run --help
check "sluice --help lists queue and work" 0 '^  queue SUB '
if printf '%s\n' "$out" | grep -q '^  work '; then
    pass "sluice --help lists work"
else
    fail "sluice --help lists work" "$out"
fi
run queue --help
check "queue --help" 0 '^Usage: sluice queue SUBCOMMAND'
run work --help
check "work --help" 0 '^Usage: sluice work '
run demo --help
check "demo --help describes demo chat" 0 'sluice demo chat --store URL'

# ---- work -------------------------------------------------------------------------------

for i in 1 2 3 4 5; do
    "$SLUICE" queue add wq --data "w$i" "${S[@]}" >/dev/null 2>&1
done
run work wq --count 3 "${S[@]}"
check "work --count 3 does three jobs" 0 '^wq 1 done$'
expect_eq "work --count 3: one line per job" "wq 1 done|wq 2 done|wq 3 done" \
    "$(printf '%s\n' "$out" | paste -sd '|')"
run queue stats wq "${S[@]}"
check "work --count 3 left the other two" 0 '^waiting=2 active=0 .*completed=3 '

# The command sees the payload on stdin and the job in its environment; its
# output goes to stderr, so stdout stays one line per job.
run work wq --count 2 --json "${S[@]}" \
    --exec 'printf "%s %s %s " "$SLUICE_QUEUE" "$SLUICE_JOB_ID" "$SLUICE_ATTEMPT"; cat; echo'
check "work --exec --json: one object per job" 0 \
    '^\{"queue":"wq","id":4,"attempt":1,"outcome":"done"\}$'
expect_eq "work --exec: CMD gets the payload and the environment" \
    "wq 4 1 w4|wq 5 1 w5" "$(paste -sd '|' "$TMP/err")"

"$SLUICE" queue add bad --data boom "${S[@]}" >/dev/null 2>&1
run work bad --exec 'exit 1' --max-attempts 2 --backoff 10ms --count 2 \
    "${S[@]}"
expect_eq "work --exec 'exit 1': retried, then failed" \
    "bad 1 retrying|bad 1 failed" "$(printf '%s\n' "$out" | paste -sd '|')"
run queue failed bad "${S[@]}"
check "the failed job is in the failed set" 0 '^1$'

start=$(now_ms)
run work idle --timeout 300ms "${S[@]}"
took=$(($(now_ms) - start))
if [ "$rc" -eq 0 ] && [ -z "$out" ] && [ "$took" -ge 250 ] &&
    [ "$took" -lt 2000 ]; then
    pass "work --timeout stops when there is nothing to do (${took} ms)"
else
    fail "work --timeout stops when there is nothing to do" \
        "exit $rc in $took ms; $out; $err"
fi

"$SLUICE" queue add pat:a --data A "${S[@]}" >/dev/null 2>&1
"$SLUICE" queue add pat:b --data B "${S[@]}" >/dev/null 2>&1
"$SLUICE" queue add other --data C "${S[@]}" >/dev/null 2>&1
run work --pattern 'pat:*' --count 2 --timeout 5s "${S[@]}"
expect_eq "work --pattern serves the matching queues" \
    "pat:a 1 done|pat:b 1 done" "$(printf '%s\n' "$out" | sort | paste -sd '|')"

# A worker that gets SIGTERM while a job runs finishes the job, then exits 0.
"$SLUICE" queue add sig --data s "${S[@]}" >/dev/null 2>&1
"$SLUICE" work sig --exec 'sleep 0.5' "${S[@]}" >"$TMP/sig.out" \
    2>"$TMP/sig.err" &
worker_pid=$!
sleep 0.25
kill -TERM "$worker_pid"
wait "$worker_pid"
rc=$?
worker_pid=
if [ "$rc" -eq 0 ] && [ "$(cat "$TMP/sig.out")" = "sig 1 done" ]; then
    pass "SIGTERM: the current job is finished, then exit 0"
else
    fail "SIGTERM: the current job is finished, then exit 0" \
        "exit $rc; $(cat "$TMP/sig.out" "$TMP/sig.err")"
fi

# ---- demo chat ----------------------------------------------------------------------------

start=$(now_ms)
run demo chat --store "valkey://127.0.0.1:$port"
took=$(($(now_ms) - start))
printf '%s\n' "$out" >"$TMP/chat"
if [ "$rc" -eq 0 ] && [ "$took" -le 8000 ]; then
    pass "demo chat runs (exit 0, ${took} ms)"
else
    fail "demo chat runs within 8 s" "exit $rc in $took ms; $err"
fi
# The flooding chat: 2000 sent, done at about its cap of 20 per second for
# 5 s (100; a fixed window lets a little more through at its seams).
flood=$(awk '$1 == "demo-chat:01" && $2 ~ /^[0-9]+$/ { print $2, $3, $5 }' \
    "$TMP/chat")
read -r f_sent f_done f_rate <<<"${flood:-0 0 0}"
if [ "$f_sent" -eq 2000 ] && [ "$f_done" -ge 80 ] && [ "$f_done" -le 125 ]; then
    pass "demo chat: the flooding chat is held to about its cap ($f_done done, $f_rate jobs/s)"
else
    fail "demo chat: the flooding chat is held to about its cap" \
        "$(cat "$TMP/chat")"
fi
quiet_ok=$(awk '$1 ~ /^demo-chat:/ && $1 != "demo-chat:01" &&
                $2 == 10 && $3 == 10 && $4 == 0 { n++ } END { print n + 0 }' \
    "$TMP/chat")
if [ "$quiet_ok" -eq 19 ]; then
    pass "demo chat: all 19 quiet chats fully served"
else
    fail "demo chat: all 19 quiet chats fully served" "$(cat "$TMP/chat")"
fi
quiet_p99=$(sed -n 's/^quiet chats: .* p99 \([0-9.]*\) ms.*/\1/p' "$TMP/chat")
if [ -n "$quiet_p99" ] && awk -v p="$quiet_p99" 'BEGIN { exit !(p < 250) }'; then
    pass "demo chat: the quiet chats see low waits (p99 $quiet_p99 ms)"
else
    fail "demo chat: the quiet chats see low waits" "$(cat "$TMP/chat")"
fi
lines=$(wc -l <"$TMP/chat")
width=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' \
    "$TMP/chat")
if [ "$lines" -le 40 ] && [ "$width" -le 80 ]; then
    pass "demo chat fits one screen ($lines lines, $width columns)"
else
    fail "demo chat fits one screen" "$lines lines, $width columns"
fi
run demo
check "plain 'sluice demo' is unchanged: the embedded store" 0 \
    '^sluice demo: max=10 requests per window=1s'

echo "cli_queue_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
