# private_server.sh - sourced by the benchmark scripts: one private
# redis-server of their own, on a loopback port nothing else listens on, in
# a temporary directory, stopped by its PID when the script exits.
#
#   . bench/private_server.sh
#   bench_server_start [redis-server arguments...]   sets $port, $pid, $tmp
#   bench_server_version                 "redis 7.0.15 (/usr/bin/redis-server)"
#
# The build is the test suite's: $SLUICE_TEST_SERVER and $SLUICE_TEST_CLI
# when set, else redis-server and redis-cli, else valkey-server and
# valkey-cli ($BENCH_SERVER and $BENCH_CLI, set when this is sourced; a
# bad path stops the script at once with the reason).
#
# BENCH_SERVER_UNDER, when set, is put before redis-server (a tool that runs
# it in the same process, as valgrind does: its PID is still the server's).
#
# Every command a script sends to it goes through 'bench_timeout' (a
# bound of BENCH_TIMEOUT seconds, default 600), so a server that died or a
# port taken by another never leaves a client spinning.

# Run rather than sourced, it says what it is for: --help is answered
# (exit 0), anything else is a usage error (exit 2).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    usage="usage: . bench/private_server.sh   (sourced, not run)

Sourced by the benchmark scripts: bench_server_start [ARGS...] starts one
private redis-server (\$SLUICE_TEST_SERVER, else redis-server, else
valkey-server) on a free loopback port, in a temporary directory, and sets
\$port, \$pid and \$tmp; bench_server_version names it. The script stops
it by its PID when it exits. Needs redis-server and redis-cli (Debian's
redis-server and redis-tools).

  --help    show this text"
    . "$(dirname "$0")/bench_args.sh"
    bench_args "$usage" "" "" "$@"
    printf '%s: it is sourced by the bench scripts, not run\n%s\n' \
        "$(basename "$0")" "$usage" >&2
    exit 2
fi

BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}
bench_timeout() { timeout "$BENCH_TIMEOUT" "$@"; }

. "${BASH_SOURCE[0]%/*}/../scripts/test_binaries.sh"
# bench_binary VAR NAME FALLBACK: test_binary(), or the script stops with why.
bench_binary() {
    local why
    why=$(test_binary "$@" 2>&1 >/dev/null) || { echo "bench: $why" >&2; exit 1; }
    test_binary "$@"
}
BENCH_SERVER=$(bench_binary SLUICE_TEST_SERVER redis-server valkey-server) || exit 1
BENCH_CLI=$(bench_binary SLUICE_TEST_CLI redis-cli valkey-cli) || exit 1

# A port in 20000..29999 that nothing answers on: bash's /dev/tcp connects
# or fails at once on loopback.
bench_free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 10000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo "bench: no free loopback port found" >&2
    return 1
}

bench_server_start() {
    port=$(bench_free_port)
    tmp=$(mktemp -d)
    ${BENCH_SERVER_UNDER:-} "$BENCH_SERVER" --port "$port" --bind 127.0.0.1 \
        --save '' --appendonly no --dir "$tmp" --daemonize no "$@" \
        >"$tmp/log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
    for _ in $(seq 1 400); do
        "$BENCH_CLI" -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.05
    done
    # The server answering must be the one started here, not another that
    # took the port first.
    if [ "$("$BENCH_CLI" -p "$port" INFO server 2>/dev/null | tr -d '\r' |
            sed -n 's/^process_id://p')" != "$pid" ]; then
        echo "bench: $BENCH_SERVER on port $port did not start (see below)" >&2
        cat "$tmp/log" >&2
        exit 1
    fi
}

# What the server started runs: "redis 7.0.15 (PATH)", or "valkey 8.0.1
# (PATH)" when INFO server has a valkey_version.
bench_server_version() {
    local info v
    info=$("$BENCH_CLI" -p "$port" INFO server 2>/dev/null | tr -d '\r')
    v=$(printf '%s\n' "$info" | sed -n 's/^valkey_version://p')
    if [ -n "$v" ]; then
        echo "valkey $v ($BENCH_SERVER)"
    else
        echo "redis $(printf '%s\n' "$info" | sed -n 's/^redis_version://p') ($BENCH_SERVER)"
    fi
}
