#!/usr/bin/env bash
#
# http_example_test.sh - asks the example HTTP server (examples/http_server.c)
# with curl, over the embedded store and then over a private server
# ($SLUICE_TEST_SERVER, else redis-server, else valkey-server) on an unusual
# loopback port, in a mktemp -d folder, stopped by a trap.
#
# Usage: bash tests/cli/http_example_test.sh PATH-TO-HTTP_SERVER
#
# With --limit 5/1m, seven requests from one address are five 200s, then
# two 429s, each with its header fields checked exactly:
#
#   RateLimit-Policy: "default";q=5;w=60           every answer
#   RateLimit: "default";r=R;t=T                   R = 4, 3, 2, 1, 0, 0, 0
#   Retry-After: T                                 the 429s only, T as above
#
# T is the window's time left in whole seconds rounded up: 60 while the
# requests take under a second, and never outside [ceil(60 - elapsed), 60]
# where elapsed is what this script measured since it sent the first one
# (so a slow machine cannot fail it, and a wrong T still does). Then a
# request from another loopback address (127.0.0.2) is admitted with its
# own budget: the limit is per client address.
#
# Every check prints PASS or FAIL; the last line is
# "http_example_test: N passed, M failed", and the exit status is non-zero
# if any check failed.

set -u

EXAMPLE=${1:?usage: http_example_test.sh PATH-TO-HTTP_SERVER}
passed=0
failed=0

# pass, fail, expect_eq, wait_for, stop_pid, start_server and the build
# under test: SERVER and CLI
. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries http_example_test
if ! command -v curl >/dev/null; then
    fail "curl is installed (scripts/test.sh installs it)"
    echo "http_example_test: $passed passed, $failed failed"
    exit 1
fi

TMP=$(mktemp -d)
server_pid=
example_pid=
cleanup() {
    stop_pid "$example_pid" "$server_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

now_ms() {
    date +%s%3N
}

# start_example NAME ARGS...: starts the example on $eport with ARGS, and
# waits until it says it listens; sets $example_pid. A port another test
# holds (the example cannot listen on it and exits) moves it to the next.
start_example() {
    local name=$1 try
    shift
    eport=$((35000 + $$ % 2000))
    for try in $(seq 1 20); do
        "$EXAMPLE" --port "$eport" "$@" >"$TMP/example.log" 2>&1 &
        example_pid=$!
        for _ in $(seq 1 600); do
            grep -q '^listening on 127\.0\.0\.1:' "$TMP/example.log" && break
            kill -0 "$example_pid" 2>/dev/null || break
            sleep 0.05
        done
        if grep -q '^listening on 127\.0\.0\.1:' "$TMP/example.log" &&
           wait_port "$eport"; then
            pass "$name: the example listens on 127.0.0.1:$eport"
            return 0
        fi
        stop_pid "$example_pid"
        example_pid=
        grep -q 'cannot listen on' "$TMP/example.log" || break
        eport=$((eport + 1))
    done
    fail "$name: the example listens on 127.0.0.1:$eport" "$(cat "$TMP/example.log")"
    return 1
}

# ask [CURL-ARGS...]: one GET; sets $code, and $rl, $pol, $ra (the fields'
# values, "" when absent; $nra counts Retry-After fields).
ask() {
    code=$(curl -s -o /dev/null -D "$TMP/h" -w '%{http_code}' --max-time 10 \
        "$@" "http://127.0.0.1:$eport/")
    tr -d '\r' <"$TMP/h" >"$TMP/h2"
    rl=$(sed -n 's/^[Rr]ate[Ll]imit: //p' "$TMP/h2")
    pol=$(sed -n 's/^[Rr]ate[Ll]imit-[Pp]olicy: //p' "$TMP/h2")
    ra=$(sed -n 's/^[Rr]etry-[Aa]fter: //p' "$TMP/h2")
    nra=$(grep -ci '^retry-after:' "$TMP/h2")
}

# check_t NAME T START_MS: T is the window's seconds left, rounded up, for
# a window of 60 s that opened no earlier than START_MS.
check_t() {
    local elapsed=$(($(now_ms) - $3))
    local low=$(((60000 - elapsed + 999) / 1000))
    if [ "$2" -le 60 ] && [ "$2" -ge "$low" ]; then
        pass "$1: t=$2 (within [$low, 60] after $elapsed ms)"
    else
        fail "$1: t=$2 not within [$low, 60] after $elapsed ms"
    fi
}

# seven NAME: the seven requests and their fields.
seven() {
    local name=$1 i want_code want_r t start
    start=$(now_ms)
    for i in 1 2 3 4 5 6 7; do
        if [ "$i" -le 5 ]; then want_code=200 want_r=$((5 - i)); else want_code=429 want_r=0; fi
        ask
        expect_eq "$name: request $i status" "$want_code" "$code"
        expect_eq "$name: request $i RateLimit-Policy" '"default";q=5;w=60' "$pol"
        if [[ "$rl" =~ ^\"default\"\;r=$want_r\;t=([0-9]+)$ ]]; then
            t=${BASH_REMATCH[1]}
            pass "$name: request $i RateLimit: $rl"
            check_t "$name: request $i" "$t" "$start"
        else
            fail "$name: request $i RateLimit" "expected \"default\";r=$want_r;t=N, got: '$rl'"
            t=none
        fi
        if [ "$want_code" = 429 ]; then
            expect_eq "$name: request $i Retry-After is t" "$t" "$ra"
        else
            expect_eq "$name: request $i has no Retry-After" 0 "$nra"
        fi
    done
    # Another client address: a budget of its own.
    ask --interface 127.0.0.2
    expect_eq "$name: another address is admitted" 200 "$code"
    expect_eq "$name: another address has its own budget" \
        '"default";r=4;t=60' "$rl"
}

# stop_example NAME: SIGTERM, and a clean exit.
stop_example() {
    local rc
    kill -TERM "$example_pid" 2>/dev/null
    wait "$example_pid" 2>/dev/null
    rc=$?
    example_pid=
    expect_eq "$1: the example exits 0 on SIGTERM" 0 "$rc"
}

# ---- The embedded store ----------------------------------------------------------

if start_example mem --limit 5/1m --store mem://; then
    seven mem
    stop_example mem
fi

# ---- A server store --------------------------------------------------------------

start_server http_example_test 33000
if start_example valkey --max 5 --window 1m \
       --store "valkey://127.0.0.1:$port?prefix=httpex$$"; then
    seven valkey
    stop_example valkey
fi
# The counts live on the server: keys under the run's prefix.
keys=$("$CLI" -p "$port" --scan --pattern "httpex$$*" | wc -l)
if [ "$keys" -ge 1 ]; then
    pass "valkey: the counts are the server's ($keys keys under httpex$$)"
else
    fail "valkey: the counts are the server's" "no key under httpex$$"
fi

echo "http_example_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
