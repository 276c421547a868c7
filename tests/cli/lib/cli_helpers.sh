# cli_helpers.sh - sourced by the tests/cli/*.sh scripts (not a test itself:
# CTest runs only tests/cli/*.sh). The caller sets SLUICE (the binary), TMP (a
# scratch directory) and passed=0 failed=0 before using these.

pass() {
    passed=$((passed + 1))
    echo "PASS: $1"
}

# fail NAME [DETAIL]: records a failure and shows DETAIL indented.
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    if [ -n "${2-}" ]; then
        printf '%s\n' "$2" | sed 's/^/    /'
    fi
}

# run ARGS...: runs sluice with stdin from /dev/null; sets $rc, $out, $err.
run() {
    "$SLUICE" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}

# run_in INPUT ARGS...: the same, with INPUT (printf format) on stdin.
run_in() {
    local input=$1
    shift
    # shellcheck disable=SC2059
    printf -- "$input" | "$SLUICE" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}

# check NAME RC PATTERN: the last run exited RC and stdout matches PATTERN.
check() {
    if [ "$rc" -eq "$2" ] && printf '%s\n' "$out" | grep -Eq -- "$3"; then
        pass "$1 (exit $rc: $(printf '%s' "$out" | head -n 1))"
    else
        fail "$1" "exit $rc, expected $2; expected /$3/ in: $out
stderr: $err"
    fi
}

# usage_error NAME PATTERN ARGS...: exit 2, nothing on stdout, and stderr
# matching the extended regular expression PATTERN.
usage_error() {
    local name=$1 pattern=$2
    shift 2
    run "$@"
    if [ "$rc" -ne 2 ]; then
        fail "$name: exit 2" "exit $rc; stdout: $out; stderr: $err"
    elif ! grep -Eq -- "$pattern" "$TMP/err"; then
        fail "$name: stderr names the problem" \
             "expected /$pattern/ in: $err"
    elif [ -n "$out" ]; then
        fail "$name: nothing on stdout" "stdout: $out"
    else
        pass "$name (exit 2: $(head -n 1 "$TMP/err"))"
    fi
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
    if [ "$2" = "$3" ]; then
        pass "$1"
    else
        fail "$1" "expected: $2
actual:   $3"
    fi
}

# start_server NAME BASE: starts $SERVER on a port BASE + (PID mod 2000),
# so that two runs at once do not meet, in $TMP, and waits until it takes
# connections. Sets $port and $server_pid (the caller's trap kills it). On
# failure prints NAME's summary line and exits 1.
start_server() {
    local name=$1 up=0
    port=$(($2 + $$ % 2000))
    "$SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$TMP" --daemonize no >"$TMP/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            up=1
            break
        fi
        sleep 0.05
    done
    if [ "$up" -ne 1 ]; then
        fail "the server starts on port $port" "$(cat "$TMP/server.log")"
        echo "$name: $passed passed, $failed failed"
        exit 1
    fi
    pass "the server starts on port $port ($(basename "$SERVER"))"
}
