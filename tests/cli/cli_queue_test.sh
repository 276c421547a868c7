#!/usr/bin/env bash
#
# cli_queue_test.sh - checks 'sluice queue', 'sluice work' and 'sluice demo
# chat' against a real server: a private server ($SLUICE_TEST_SERVER, else
# redis-server, else valkey-server) on an unusual port, in a mktemp -d
# folder, stopped by PID in a trap. Without a server binary it fails: the
# test command (scripts/test.sh) installs one.
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

# pass, fail, run, run_in, check, usage_error, expect_eq, start_server,
# terminal_safe, start_fake, and the build under test: SERVER and CLI
. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries cli_queue_test

TMP=$(mktemp -d)
server_pid=
worker_pid=
fake_pid=
outage_pid=
proxy_pid=
cleanup() {
    stop_pid "$proxy_pid" "$outage_pid" "$fake_pid" "$worker_pid" "$server_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

# ---- Helpers ------------------------------------------------------------------

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

# work_signalled AFTER SIGNALS ARGS...: runs 'sluice work ARGS...' in the
# background, sends it SIGTERM AFTER seconds later (SIGNALS times, 0.1 s
# apart) and waits for it: sets $rc; its output is in $TMP/sig.out and
# $TMP/sig.err.
work_signalled() {
    local after=$1 signals=$2
    shift 2
    "$SLUICE" work "$@" >"$TMP/sig.out" 2>"$TMP/sig.err" &
    worker_pid=$!
    sleep "$after"
    for _ in $(seq 1 "$signals"); do
        kill -TERM "$worker_pid"
        sleep 0.1
    done
    wait "$worker_pid"
    rc=$?
    worker_pid=
}

# ---- The server -----------------------------------------------------------------

start_server cli_queue_test 27000

# A fresh queue-key prefix per run, so state from another run cannot
# interfere.
STORE="valkey://127.0.0.1:$port?emq_prefix=qtest$$&timeout=5000"
S=(--store "$STORE")

# ---- add, take, complete ------------------------------------------------------------

run queue add q1 --data hello "${S[@]}"
check "add --data prints the job's id" 0 '^1$'
run queue add q1 --data 'say "hi"' "${S[@]}" --json
check "add --json" 0 '^\{"queue":"q1","id":2\}$'
run_in 'from\nstdin\n' queue add q1 "${S[@]}"
check "add reads the payload from stdin" 0 '^3$'

# Standard input is read up to 512 MB and one byte, not without end (600
# MB here, so that a CLI that would read it all still ends).
start=$(now_ms)
head -c $((600 * 1024 * 1024)) /dev/zero |
    timeout 60 "$SLUICE" queue add big "${S[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
took=$(($(now_ms) - start))
if [ "$rc" -eq 2 ] && grep -q 'over 512 MB' "$TMP/err" && [ ! -s "$TMP/out" ]; then
    pass "add from a long stdin stops at 512 MB (exit 2 in $took ms: $(head -n 1 "$TMP/err"))"
else
    fail "add from a long stdin stops at 512 MB" \
        "exit $rc in $took ms; $(cat "$TMP/out" "$TMP/err")"
fi
# A payload that a take could not read back is refused alike, before it
# is sent (max_reply_bytes: 64 MB, less 1 KB for the rest of the reply).
head -c $((64 * 1024 * 1024)) /dev/zero >"$TMP/64m"
"$SLUICE" queue add big "${S[@]}" <"$TMP/64m" >"$TMP/out" 2>"$TMP/err"
rc=$?
rm -f "$TMP/64m"
if [ "$rc" -eq 2 ] && grep -q 'that a take can read back' "$TMP/err"; then
    pass "add of a payload a take could not read back: exit 2 ($(head -n 1 "$TMP/err"))"
else
    fail "add of a payload a take could not read back: exit 2" \
        "exit $rc; $(cat "$TMP/out" "$TMP/err")"
fi

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

# Bytes that are not UTF-8 (0xff) and a NUL: the exact bytes in base64.
printf 'a\377\000b\n' >"$TMP/bin"
"$SLUICE" queue add binq "${S[@]}" <"$TMP/bin" >/dev/null 2>&1
run queue take binq "${S[@]}" --json
check "take --json: a payload that is not UTF-8 as payload_base64" 0 \
    '^\{"queue":"binq","status":"job","id":1,"attempt":1,"lease":[0-9]+,"payload_base64":"[A-Za-z0-9+/=]+"\}$'
printf '%s\n' "$out" | sed 's/.*"payload_base64":"\([^"]*\)".*/\1/' |
    base64 -d >"$TMP/bin.back" 2>/dev/null
if cmp -s "$TMP/bin" "$TMP/bin.back"; then
    pass "take --json: base64 -d gives back the exact bytes"
else
    fail "take --json: base64 -d gives back the exact bytes" \
        "$out; $(od -c "$TMP/bin.back")"
fi
# Valid UTF-8 with a NUL stays a JSON string, exact.
printf 'n\000\303\251' | "$SLUICE" queue add binq "${S[@]}" >/dev/null 2>&1
run queue take binq "${S[@]}" --json
check "take --json: valid UTF-8 with a NUL is a JSON string" 0 \
    '"payload":"n\\u0000'"$(printf '\303\251')"'"\}$'

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

# ---- add --lines -------------------------------------------------------------------

# One job per line, in one call: the ids one per line, in order.
seq 1 5000 >"$TMP/lines"
start=$(now_ms)
"$SLUICE" queue add bulk --lines "${S[@]}" <"$TMP/lines" >"$TMP/out" 2>"$TMP/err"
rc=$?
took=$(($(now_ms) - start))
if [ "$rc" -eq 0 ] && [ "$(wc -l <"$TMP/out")" -eq 5000 ] &&
    [ "$(head -n 1 "$TMP/out")" = 1 ] && [ "$(tail -n 1 "$TMP/out")" = 5000 ] &&
    [ "$took" -lt 10000 ]; then
    pass "add --lines: 5,000 jobs in one call, 5,000 ids ($took ms)"
else
    fail "add --lines: 5,000 jobs in one call, 5,000 ids" \
        "exit $rc in $took ms; $(head -n 3 "$TMP/out") $(cat "$TMP/err")"
fi
run queue stats bulk "${S[@]}"
check "add --lines: 5,000 jobs waiting" 0 '^waiting=5000 '
run queue take bulk "${S[@]}"
check "add --lines: the payload is the line" 0 '^job 1 attempt 1 '
expect_eq "add --lines: job 1's payload, without its newline" "1" \
    "$(printf '%s\n' "$out" | sed -n 2p)"
# An empty line is a job with an empty payload; a last line without a
# newline counts.
run_in 'a\n\nb' queue add lines2 --lines "${S[@]}" --json
check "add --lines --json: the ids in an array" 0 \
    '^\{"queue":"lines2","ids":\[1,2,3\]\}$'
got=
for _ in 1 2 3; do
    run queue take lines2 "${S[@]}" --json
    got="$got$(printf '%s\n' "$out" | sed 's/.*"payload":\("[^"]*"\).*/\1/')"
done
expect_eq "add --lines: 'a', an empty line, and 'b' without a newline" \
    '"a""""b"' "$got"
run_in '' queue add lines3 --lines "${S[@]}" --json
check "add --lines of nothing adds nothing" 0 '^\{"queue":"lines3","ids":\[\]\}$'
# A line too long for the store: the batches before it are added (their
# ids printed), the rest not, and the message names the line.
{ seq 1 599; head -c 2000 /dev/zero | tr '\0' x; echo; seq 1 10; } >"$TMP/lines"
"$SLUICE" queue add lines4 --lines --store "$STORE&max_reply_bytes=2048" \
    <"$TMP/lines" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/out")" -eq 512 ] &&
    grep -q 'not added from line 513 on (job 0 below is line 513): job 87: a payload of 2000 bytes' "$TMP/err"; then
    pass "add --lines: a line too long stops the add at its batch ($(head -n 1 "$TMP/err"))"
else
    fail "add --lines: a line too long stops the add at its batch" \
        "exit $rc; $(wc -l <"$TMP/out") ids; $(cat "$TMP/err")"
fi
usage_error "add --lines with --data" "--lines .*--data" \
    queue add lines3 --lines --data x "${S[@]}"

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
    '^waiting=0 active=0 delayed=1 failed=0 completed=2 max=none duration_ms=0 count=0 wait_ms=0$'
run queue stats q1 "${S[@]}" --json
check "stats --json" 0 \
    '^\{"queue":"q1","waiting":0,"active":0,"delayed":1,"failed":0,"completed":2,"max":null,"duration_ms":0,"count":0,"wait_ms":0\}$'
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
    '^\{"queue":"capq","max":null,"duration_ms":0\}$'
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

# ---- Control bytes in names and in the server's errors ---------------------------------------

RAW=("$CLI" -p "$port")
esc=$(printf 'e\033[31m')
"$SLUICE" queue add "$esc" --data x "${S[@]}" >/dev/null 2>&1
run work "$esc" --count 1 "${S[@]}"
expect_eq "work writes a queue name's ESC as \\x1b" 'e\x1b[31m 1 done' "$out"
terminal_safe "work's line for that queue is safe for a terminal" "$TMP/out"
# A cap without a duration: the server's error quotes the meta hash's key.
"${RAW[@]}" HSET "qtest$$:{$esc}:meta" max 1 >/dev/null
run queue take "$esc" "${S[@]}"
check_err "a server error quoting a queue name: the ESC as \\x1b" 3 \
    'meta hash .*\\x1b\[31m'
terminal_safe "that server error is safe for a terminal" "$TMP/err"

# ---- A wrong reply is named once ---------------------------------------------------------

# A fake server whose scripts answer a list of one integer: each command
# names itself once, not again in the library's words.
if start_fake 29000 '*1\r\n:5\r\n'; then
    FAKE=(--store "valkey://127.0.0.1:$fake_port")
    for sub in take stats failed; do
        run queue "$sub" q1 "${FAKE[@]}"
        if [ "$rc" -eq 3 ] && grep -q "^sluice: queue $sub: " "$TMP/err" &&
            ! grep -q "queue $sub: .*queue $sub:" "$TMP/err"; then
            pass "queue $sub: a wrong reply, the command named once ($err)"
        else
            fail "queue $sub: a wrong reply, the command named once" \
                "exit $rc; $err"
        fi
    done
    # A wrong reply is not an outage: work stops at once, exit 3.
    start=$(now_ms)
    run work q1 --timeout 5s "${FAKE[@]}"
    took=$(($(now_ms) - start))
    if [ "$rc" -eq 3 ] && [ "$took" -lt 2000 ] &&
        grep -q 'malformed reply (EPROTO)' "$TMP/err" &&
        ! grep -q 'unreachable' "$TMP/err"; then
        pass "work: a wrong reply is no outage: exit 3 at once ($took ms: $err)"
    else
        fail "work: a wrong reply is no outage: exit 3 at once" \
            "exit $rc in $took ms; $err"
    fi
    stop_pid "$fake_pid"
    fake_pid=
else
    fail "the fake server starts (\$SLUICE_FAKE_SERVER)" \
        "$(cat "$TMP/fake.log" 2>&1)"
fi

# ---- Usage errors ------------------------------------------------------------------------

usage_error "queue without a subcommand" "missing SUBCOMMAND" queue
usage_error "queue: unknown subcommand" "unknown subcommand 'pop'" \
    queue pop q1 "${S[@]}"
usage_error "take: missing QUEUE" "queue take: missing QUEUE" \
    queue take "${S[@]}"
for sub in add take stats; do
    usage_error "queue $sub: an empty QUEUE" "^sluice: queue $sub: QUEUE is empty" \
        queue "$sub" '' "${S[@]}"
done
usage_error "work: an empty QUEUE" "^sluice: work: QUEUE 2 is empty" \
    work q1 '' "${S[@]}"
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
usage_error "work --pattern '[': the library's message, a usage error" \
    "^sluice: work: --pattern: pattern '\[': the '\[' at byte 0 is never closed" \
    work --pattern '[' "${S[@]}"
usage_error "work --pattern with an ESC and an unclosed '['" "\\x1b\[" \
    work --pattern "$(printf '\033[')" "${S[@]}"
terminal_safe "that message is safe for a terminal" "$TMP/err"
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
work_signalled 0.25 1 sig --exec 'sleep 0.5' "${S[@]}"
if [ "$rc" -eq 0 ] && [ "$(cat "$TMP/sig.out")" = "sig 1 done" ]; then
    pass "SIGTERM: the current job is finished, then exit 0"
else
    fail "SIGTERM: the current job is finished, then exit 0" \
        "exit $rc; $(cat "$TMP/sig.out" "$TMP/sig.err")"
fi

# A second SIGTERM passes SIGTERM to CMD: the job fails, the worker exits.
"$SLUICE" queue add sig2 --data s "${S[@]}" >/dev/null 2>&1
start=$(now_ms)
work_signalled 0.3 2 sig2 --exec 'sleep 5' --backoff 0 "${S[@]}"
took=$(($(now_ms) - start))
if [ "$rc" -eq 0 ] && [ "$(cat "$TMP/sig.out")" = "sig2 1 retrying" ] &&
    [ "$took" -lt 2500 ]; then
    pass "a second SIGTERM stops CMD: the job is retried, exit 0 (${took} ms)"
else
    fail "a second SIGTERM stops CMD: the job is retried, exit 0" \
        "exit $rc in $took ms; $(cat "$TMP/sig.out" "$TMP/sig.err")"
fi

# ---- work: the lease's heartbeat and the stalled limit --------------------------------

# A job longer than its lease, with a second worker waiting for its lease
# to run out: renewed while CMD runs, it runs once and is done.
"$SLUICE" queue add hb --data h "${S[@]}" >/dev/null 2>&1
: >"$TMP/hb.runs"
HB=(hb --lease 1s --max-attempts 3 --timeout 3s "${S[@]}"
    --exec "echo run >>'$TMP/hb.runs'; sleep 1.5")
"$SLUICE" work "${HB[@]}" >"$TMP/hb1.out" 2>"$TMP/hb1.err" &
worker_pid=$!
"$SLUICE" work "${HB[@]}" >"$TMP/hb2.out" 2>"$TMP/hb2.err"
wait "$worker_pid"
worker_pid=
got="$(cat "$TMP/hb1.out" "$TMP/hb2.out") runs=$(wc -l <"$TMP/hb.runs")"
expect_eq "work renews the lease: a 1.5 s job under a 1 s lease runs once, done" \
    "hb 1 done runs=1" "$got"

# The stalled limit: a job whose lease ran out twice (two takers that
# vanished) fails for good at the worker's take by default (1), and is
# taken again with --stalled-limit 3.
for q in st1 st2; do
    "$SLUICE" queue add "$q" --data s "${S[@]}" >/dev/null 2>&1
    for _ in 1 2; do
        "$SLUICE" queue take "$q" --lease 100ms "${S[@]}" >/dev/null 2>&1
        sleep 0.2
    done
done
run work st1 --stalled-limit 3 --count 1 --timeout 2s "${S[@]}"
check "work --stalled-limit 3: a job whose lease ran out twice is done" 0 \
    '^st1 1 done$'
run work st2 --timeout 1s "${S[@]}"
run queue failed st2 "${S[@]}"
check "work, by default: a job whose lease ran out twice failed for good" 0 '^1$'
usage_error "work --stalled-limit 0" "--stalled-limit: '0' is out of range" \
    work st1 --stalled-limit 0 "${S[@]}"

# ---- work: deferrals, concurrency ---------------------------------------------------------

"$SLUICE" queue set-cap 'v q' --max 1 --per 2s "${S[@]}" >/dev/null 2>&1
for i in 1 2; do
    "$SLUICE" queue add 'v q' --data "v$i" "${S[@]}" >/dev/null 2>&1
done
run work 'v q' --verbose --count 2 --timeout 5s "${S[@]}"
expect_eq "work --verbose: both jobs done" 'v\x20q 1 done|v\x20q 2 done' \
    "$(printf '%s\n' "$out" | paste -sd '|')"
if [ "$(grep -Ec '^sluice: work: v\\x20q deferred: wait [0-9]+ ms \(cap 1\)$' "$TMP/err")" -ge 1 ]; then
    pass "work --verbose: a line per deferral ($(head -n 1 "$TMP/err"))"
else
    fail "work --verbose: a line per deferral" "$err"
fi

for i in 1 2 3 4 5 6 7 8; do
    "$SLUICE" queue add conc --data "c$i" "${S[@]}" >/dev/null 2>&1
done
start=$(now_ms)
run work conc --concurrency 4 --count 8 --exec 'sleep 0.5' "${S[@]}"
took=$(($(now_ms) - start))
if [ "$rc" -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c ' done$')" -eq 8 ] &&
    [ "$took" -lt 2500 ]; then
    pass "work --concurrency 4: 8 jobs of 0.5 s in $took ms (one at a time: 4000)"
else
    fail "work --concurrency 4: 8 jobs of 0.5 s in well under 4 s" \
        "exit $rc in $took ms; $out; $err"
fi
usage_error "work --concurrency 0" "--concurrency: '0' is out of range" \
    work conc --concurrency 0 "${S[@]}"

# SIGTERM with two jobs running: both are finished, then exit 0.
for i in 1 2; do
    "$SLUICE" queue add sigc --data "s$i" "${S[@]}" >/dev/null 2>&1
done
work_signalled 0.25 1 sigc --concurrency 2 --exec 'sleep 0.5' "${S[@]}"
expect_eq "SIGTERM with two jobs running: both finished, exit 0" \
    "0 sigc 1 done|sigc 2 done" "$rc $(sort "$TMP/sig.out" | paste -sd '|')"

# ---- work rides out an outage -------------------------------------------------------------

# A server of its own, stopped and started again on the same port.
if spawn_free_server $((31000 + $$ % 2000)) "$TMP/outage.log"; then
    oport=$spawned_port
    OUT=(--store "valkey://127.0.0.1:$oport")
    outage_pid=$spawned_pid
    "$SLUICE" work oq --exec 'cat >/dev/null' "${OUT[@]}" >"$TMP/o.out" \
        2>"$TMP/o.err" &
    worker_pid=$!
    "$SLUICE" queue add oq --data before "${OUT[@]}" >/dev/null 2>&1
    wait_for "$TMP/o.out" '^oq 1 done$' 5 || fail "outage: a job before" \
        "$(cat "$TMP/o.out" "$TMP/o.err")"
    stop_pid "$outage_pid"
    outage_pid=
    wait_for "$TMP/o.err" 'unreachable' 5
    sleep 1
    spawn_server "$oport" "$TMP/outage.log"
    outage_pid=$spawned_pid
    wait_for "$TMP/o.err" 'answers again' 10
    "$SLUICE" queue add oq --data after1 "${OUT[@]}" >/dev/null 2>&1
    "$SLUICE" queue add oq --data after2 "${OUT[@]}" >/dev/null 2>&1
    wait_for "$TMP/o.out" '^oq 2 done$' 10
    if kill -0 "$worker_pid" 2>/dev/null; then
        pass "outage: the worker is still running after the server came back"
    else
        fail "outage: the worker is still running after the server came back" \
            "$(cat "$TMP/o.out" "$TMP/o.err")"
    fi
    kill -TERM "$worker_pid"
    wait "$worker_pid"
    rc=$?
    worker_pid=
    expect_eq "outage: the jobs added after the restart are done, exit 0" \
        "0 oq 1 done|oq 1 done|oq 2 done" "$rc $(paste -sd '|' "$TMP/o.out")"
    expect_eq "outage: one line when it starts, one when it ends" \
        "1 1 2" "$(grep -c 'unreachable' "$TMP/o.err") $(grep -c 'answers again' "$TMP/o.err") $(wc -l <"$TMP/o.err")"
    if grep -Eq '^sluice: work: the store is unreachable \(.*\); retrying' "$TMP/o.err" &&
        grep -Eq '^sluice: work: the store answers again after [0-9]+ ms' "$TMP/o.err"; then
        pass "outage: the lines say what happened ($(paste -sd '|' "$TMP/o.err"))"
    else
        fail "outage: the lines say what happened" "$(cat "$TMP/o.err")"
    fi
    stop_pid "$outage_pid"
    outage_pid=
else
    fail "outage: the server starts on port $spawned_port" "$(cat "$TMP/outage.log")"
fi

# ---- work: a finish whose reply was lost ----------------------------------------------

# start_proxy PATTERN: starts tests/tools/lossy_proxy.c in front of the
# server: the first call whose bytes hold PATTERN is applied, but its reply
# never comes back. Sets $proxy_port and $proxy_pid; returns 1 if it does
# not start.
start_proxy() {
    [ -x "${SLUICE_LOSSY_PROXY:-}" ] || return 1
    # Port 0: the kernel picks a free one, which the proxy prints first (a
    # fixed one may be another test's, run beside this one).
    "$SLUICE_LOSSY_PROXY" 0 "$port" "$1" >"$TMP/proxy.log" 2>&1 &
    proxy_pid=$!
    proxy_port=
    for _ in $(seq 1 100); do
        proxy_port=$(sed -n '1s/^port \([0-9][0-9]*\)$/\1/p' "$TMP/proxy.log")
        [ -n "$proxy_port" ] && break
        sleep 0.05
    done
    [ -n "$proxy_port" ] && wait_port "$proxy_port"
}

# The complete reaches the server and is applied; its reply is lost, so
# the worker times out. Asked again when the store answers, the job is
# gone: 'done' (with a line on stderr that says the reply was lost), never
# 'lost', and it does not come back.
if start_proxy $'\r\n$8\r\ncomplete\r\n'; then
    LP=(--store "valkey://127.0.0.1:$proxy_port?emq_prefix=qtest$$&timeout=1000")
    "$SLUICE" queue add lostreply --data x "${S[@]}" >/dev/null
    run work lostreply --count 1 --timeout 10s "${LP[@]}"
    if [ "$rc" -eq 0 ] && [ "$out" = "lostreply 1 done" ] &&
        grep -q "lost the replies" "$TMP/proxy.log" &&
        grep -q "^sluice: work: lostreply 1: the reply to its complete was lost, but the store has it completed: done$" "$TMP/err"; then
        pass "work: a complete applied whose reply was lost is 'done' ($(paste -sd '|' "$TMP/err"))"
    else
        fail "work: a complete applied whose reply was lost is 'done'" \
            "exit $rc; out '$out'; $err; proxy: $(cat "$TMP/proxy.log")"
    fi
    run queue stats lostreply "${S[@]}" --json
    check "work: ... and the job is completed once, not back to wait" 0 \
        '"waiting":0,"active":0,"delayed":0,"failed":0,"completed":1,'
    stop_pid "$proxy_pid"
    proxy_pid=
else
    fail "the lossy proxy starts (\$SLUICE_LOSSY_PROXY)" \
        "port $proxy_port: $(cat "$TMP/proxy.log" 2>&1)"
fi

# The same for a fail: applied, so the job waits for its next attempt:
# 'retrying', not 'lost'.
if start_proxy $'\r\n$4\r\nfail\r\n'; then
    LP=(--store "valkey://127.0.0.1:$proxy_port?emq_prefix=qtest$$&timeout=1000")
    "$SLUICE" queue add lostfail --data x "${S[@]}" >/dev/null
    run work lostfail --count 1 --timeout 10s --exec 'exit 1' --backoff 0 \
        "${LP[@]}"
    run_out=$out run_err=$err
    run queue stats lostfail "${S[@]}" --json
    if [ "$rc" -eq 0 ] && [ "$run_out" = "lostfail 1 retrying" ] &&
        printf '%s' "$out" | grep -q '"waiting":1,"active":0,'; then
        pass "work: a fail applied whose reply was lost is 'retrying', and the job waits"
    else
        fail "work: a fail applied whose reply was lost is 'retrying'" \
            "work: '$run_out'; its stderr: $run_err; stats: $out; proxy: $(cat "$TMP/proxy.log")"
    fi
    stop_pid "$proxy_pid"
    proxy_pid=
fi

# The reply is lost and the store never answers again (the proxy is
# gone): at --give-up-after the job's line says 'unknown', exit 3.
if start_proxy $'\r\n$8\r\ncomplete\r\n'; then
    LP=(--store "valkey://127.0.0.1:$proxy_port?emq_prefix=qtest$$&timeout=1000")
    "$SLUICE" queue add lostall --data x "${S[@]}" >/dev/null
    "$SLUICE" work lostall --count 1 --give-up-after 1s "${LP[@]}" \
        >"$TMP/u.out" 2>"$TMP/u.err" &
    worker_pid=$!
    wait_for "$TMP/proxy.log" 'lost the replies' 5
    stop_pid "$proxy_pid"
    proxy_pid=
    wait "$worker_pid"
    rc=$?
    worker_pid=
    if [ "$rc" -eq 3 ] && [ "$(cat "$TMP/u.out")" = "lostall 1 unknown" ] &&
        grep -q "1 job 'unknown'" "$TMP/u.err"; then
        pass "work: a finish never settled is 'unknown' at the end, exit 3 ($(tail -n 1 "$TMP/u.err"))"
    else
        fail "work: a finish never settled is 'unknown' at the end, exit 3" \
            "exit $rc; $(cat "$TMP/u.out" "$TMP/u.err")"
    fi
fi

# Against a dead server: --give-up-after, and --timeout, exit 3 in time.
start=$(now_ms)
run work oq --give-up-after 1s "${OUT[@]}"
took=$(($(now_ms) - start))
if [ "$rc" -eq 3 ] && [ "$took" -ge 1000 ] && [ "$took" -lt 5000 ] &&
    grep -q 'unreachable' "$TMP/err" && grep -q 'give-up-after' "$TMP/err"; then
    pass "work --give-up-after 1s against a dead server: exit 3 in $took ms"
else
    fail "work --give-up-after 1s against a dead server: exit 3 in time" \
        "exit $rc in $took ms; $err"
fi
start=$(now_ms)
run work oq --timeout 1s "${OUT[@]}"
took=$(($(now_ms) - start))
if [ "$rc" -eq 3 ] && [ "$took" -ge 1000 ] && [ "$took" -lt 5000 ] &&
    grep -q 'unreachable' "$TMP/err"; then
    pass "work --timeout against a dead server: exit 3, not 0, in $took ms ($(tail -n 1 "$TMP/err"))"
else
    fail "work --timeout against a dead server: exit 3, not 0" \
        "exit $rc in $took ms; $err"
fi
# A pattern worker that has found no queue takes nothing, so no take
# fails: the store is asked at --timeout all the same.
run work --pattern 'nothing:*' --timeout 500ms "${OUT[@]}"
if [ "$rc" -eq 3 ] && grep -q 'unreachable' "$TMP/err"; then
    pass "work --pattern --timeout against a dead server: exit 3 ($(tail -n 1 "$TMP/err"))"
else
    fail "work --pattern --timeout against a dead server: exit 3" \
        "exit $rc; $err"
fi
usage_error "work --give-up-after 0" "--give-up-after: " \
    work oq --give-up-after 0 "${OUT[@]}"

# ---- demo chat ----------------------------------------------------------------------------

# timeout=2000: the demo's workers stop at the first store error, and a
# loaded sanitizer build has been seen to miss the default 500 ms.
start=$(now_ms)
run demo chat --store "valkey://127.0.0.1:$port?timeout=2000"
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
