# cli_helpers.sh - sourced by the tests/cli/*.sh scripts and
# tests/bench/srvtime_test.sh (not a test itself: CTest runs only those).
# The caller sets SLUICE (the binary, for run), TMP (a scratch directory)
# and passed=0 failed=0 before using these.

# ---- The build under test -------------------------------------------------------

. "${BASH_SOURCE[0]%/*}/../../../scripts/test_binaries.sh"

# use_test_binaries NAME: sets SERVER and CLI to the build under test
# ($SLUICE_TEST_SERVER and $SLUICE_TEST_CLI, else redis-server and
# redis-cli, else valkey-server and valkey-cli), as the C tests' launcher
# does (tests/support/server.h). If one is missing, prints why and NAME's
# summary line, and exits 1.
use_test_binaries() {
    local why
    if ! SERVER=$(test_binary SLUICE_TEST_SERVER redis-server valkey-server 2>&1) ||
       ! CLI=$(test_binary SLUICE_TEST_CLI redis-cli valkey-cli 2>&1); then
        why=$SERVER
        [ -x "$SERVER" ] && why=$CLI
        echo "FAIL: $why"
        echo "$1: ${passed:-0} passed, $((${failed:-0} + 1)) failed"
        exit 1
    fi
}

# server_version PORT: what the server on 127.0.0.1:PORT runs, asked with
# $CLI: "redis 7.0.15 ($SERVER)", or "valkey 8.0.1 (...)" when INFO server
# has a valkey_version.
server_version() {
    local info v
    info=$("$CLI" -p "$1" INFO server 2>/dev/null | tr -d '\r')
    v=$(printf '%s\n' "$info" | sed -n 's/^valkey_version://p')
    if [ -n "$v" ]; then
        echo "valkey $v ($SERVER)"
    else
        v=$(printf '%s\n' "$info" | sed -n 's/^redis_version://p')
        echo "redis ${v:-unknown} ($SERVER)"
    fi
}

# A store URL in the caller's environment would send every command without
# --store to it (cli/store.c): the tests set it only where they mean to.
unset SLUICE_STORE

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

# ---- The algorithms --------------------------------------------------------------

# cli_algos: the algorithms' public names, one a line, in the library's
# order, as 'sluice hit --help' lists them ("a, b or c" after --algo ALGO;
# the list may wrap, its next lines indented deeper than an option). No
# test names the list by hand: a new algorithm is in every loop over it.
cli_algos() {
    "$SLUICE" hit --help |
        awk '/^  --algo ALGO/ { sub(/^  --algo ALGO */, ""); on = 1; print; next }
             on && /^     / { print; next } { on = 0 }' |
        tr -s ', ' '\n\n' | grep -vx -e or -e ''
}

# cli_takes_burst ALGO: whether ALGO takes a burst (the tool refuses
# --burst for an algorithm without one).
cli_takes_burst() {
    "$SLUICE" peek cli-burst-probe --algo "$1" --max 2 --window 1s \
        --burst 1 --store mem:// >/dev/null 2>&1 </dev/null
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

# ---- Processes -------------------------------------------------------------------

# stop_pid PID...: stops each background process PID given (none for an
# empty one) and reaps it.
stop_pid() {
    local pid
    for pid in "$@"; do
        if [ -n "$pid" ]; then
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
        fi
    done
}

# wait_port PORT: waits up to 5 s until 127.0.0.1:PORT takes connections;
# returns 1 if it does not.
wait_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# ---- Servers ---------------------------------------------------------------------

# spawn_server PORT LOG [ARGS...]: starts $SERVER on PORT in $TMP, with
# ARGS besides, its output in LOG, and waits up to 5 s until it is up: its
# log says it is ready and PORT takes connections. A port that takes
# connections is not proof enough: another test's server may hold it while
# ours fails to bind it and exits. Sets $spawned_pid; returns 1 if it does
# not come up (it exited, or was stopped after 5 s).
spawn_server() {
    "$SERVER" --port "$1" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$TMP" --daemonize no "${@:3}" >"$2" 2>&1 &
    spawned_pid=$!
    for _ in $(seq 1 100); do
        kill -0 "$spawned_pid" 2>/dev/null || break
        if grep -q 'Ready to accept connections' "$2" &&
           (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    stop_pid "$spawned_pid"
    return 1
}

# spawn_free_server PORT LOG [ARGS...]: spawn_server on PORT, or on the
# next port up when another test holds it (it takes connections already,
# or the server cannot bind it): tests run in parallel, and PID-derived
# ports meet, as do the C tests' servers on the kernel's free ports. Sets
# $spawned_port and $spawned_pid.
spawn_free_server() {
    local tries
    spawned_port=$1
    for tries in $(seq 1 20); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$spawned_port") 2>/dev/null; then
            spawn_server "$spawned_port" "${@:2}" && return 0
            grep -q 'Address already in use' "$2" || return 1
        fi
        spawned_port=$((spawned_port + 1))
    done
    return 1
}

# start_server NAME BASE: starts $SERVER on a port BASE + (PID mod 2000),
# so that two runs at once do not meet, in $TMP, and waits until it takes
# connections. Sets $port and $server_pid (the caller's trap kills it). On
# failure prints NAME's summary line and exits 1.
start_server() {
    local name=$1
    if ! spawn_free_server $(($2 + $$ % 2000)) "$TMP/server.log"; then
        port=$spawned_port
        server_pid=$spawned_pid
        fail "the server starts on port $port" "$(cat "$TMP/server.log")"
        echo "$name: $passed passed, $failed failed"
        exit 1
    fi
    port=$spawned_port
    server_pid=$spawned_pid
    pass "the server starts on port $port: $(server_version "$port")"
}

# wait_for FILE PATTERN SECONDS: waits until FILE has a line matching the
# extended regular expression PATTERN; returns 1 if it has none in time.
wait_for() {
    local i
    for i in $(seq 1 $(($3 * 20))); do
        grep -Eq -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# terminal_safe NAME FILE: FILE holds no control byte but newlines and is
# valid UTF-8, as all that the CLI writes for a terminal must be.
terminal_safe() {
    if tr -d '\n' <"$2" | LC_ALL=C grep -aq '[[:cntrl:]]'; then
        fail "$1" "a raw control byte in: $(od -c "$2" | head -n 5)"
    elif ! iconv -f UTF-8 -t UTF-8 "$2" >/dev/null 2>&1; then
        fail "$1" "bytes that are not UTF-8 in: $(od -c "$2" | head -n 5)"
    else
        pass "$1"
    fi
}

# start_fake BASE REPLY: starts a fake server ($SLUICE_FAKE_SERVER,
# tests/tools/fake_server.c) on port BASE + (PID mod 2000) that answers
# SCRIPT LOAD with the script's SHA1 (as a server would), AUTH, SELECT and
# SUBSCRIBE as a server would, and every other command (EVALSHA...) with
# REPLY, raw RESP such as '*1\r\n:5\r\n': a wrong reply that no server
# sends. Sets $fake_port and $fake_pid (the caller's trap kills it).
# Returns 1 when it does not start.
start_fake() {
    [ -x "${SLUICE_FAKE_SERVER:-}" ] || return 1
    fake_port=$(($1 + $$ % 2000))
    "$SLUICE_FAKE_SERVER" "$fake_port" "$2" >"$TMP/fake.log" 2>&1 &
    fake_pid=$!
    wait_port "$fake_port"
}
