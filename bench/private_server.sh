# private_server.sh - sourced by the benchmark scripts: one private
# redis-server of their own, on a loopback port nothing else listens on, in
# a temporary directory, stopped by its PID when the script exits.
#
#   . bench/private_server.sh
#   bench_server_start [redis-server arguments...]   sets $port, $pid, $tmp
#
# BENCH_SERVER_UNDER, when set, is put before redis-server (a tool that runs
# it in the same process, as valgrind does: its PID is still the server's).
#
# Every command a script sends to it goes through 'bench_timeout' (a
# bound of BENCH_TIMEOUT seconds, default 600), so a server that died or a
# port taken by another never leaves a client spinning.

BENCH_TIMEOUT=${BENCH_TIMEOUT:-600}
bench_timeout() { timeout "$BENCH_TIMEOUT" "$@"; }

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
    ${BENCH_SERVER_UNDER:-} redis-server --port "$port" --bind 127.0.0.1 \
        --save '' --appendonly no --dir "$tmp" --daemonize no "$@" \
        >"$tmp/log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
    for _ in $(seq 1 400); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.05
    done
    # The server answering must be the one started here, not another that
    # took the port first.
    if [ "$(redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' |
            sed -n 's/^process_id://p')" != "$pid" ]; then
        echo "bench: redis-server on port $port did not start (see below)" >&2
        cat "$tmp/log" >&2
        exit 1
    fi
}
