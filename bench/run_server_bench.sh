#!/usr/bin/env bash
# run_server_bench.sh - installs what sluice_bench_server compares with,
# builds it (Release, in build-bench/), and runs it with the arguments given:
#
#   bench/run_server_bench.sh                 the full run (see BENCHMARKS.md)
#   bench/run_server_bench.sh --quick         a smoke run
#   bench/run_server_bench.sh --json > out.json
#   bench/run_server_bench.sh --no-peers --no-diag --only srvtime
#                                             the server's time per decision
#                                             alone (bench/module_bench.sh)
#
# What it installs, when missing: redis-server (unless $SLUICE_TEST_SERVER
# names the server to measure) and redis-benchmark (Debian's redis-server
# and redis-tools), Python limits with redis-py (Debian's
# python3-limits and python3-redis, for /usr/bin/python3), and the Node peer's
# packages (npm ci in bench/peers, versions pinned by its package-lock.json;
# node_modules is not committed). An install that fails is a warning, not an
# error: the benchmark then prints "not available: why" for that reference.
# BUILD_DIR overrides the build directory.
set -u

. "$(dirname "$0")/bench_server_options.sh"
usage="usage: bench/run_server_bench.sh [sluice_bench_server OPTIONS...]

Installs what sluice_bench_server compares with, when missing (redis-server
and redis-tools, python3-limits and python3-redis, and the Node peer's
packages by npm ci in bench/peers; as root, or with sudo), builds the
benchmark (Release, in \${BUILD_DIR:-build-bench}) and runs it with the
options given: sluice's server store beside redis-benchmark INCR,
rate-limiter-flexible and Python limits on one private redis-server, then
the server's time per decision (BENCHMARKS.md). An install that fails is a
warning: that reference is then shown \"not available\".

Options, sluice_bench_server's (its --help tells what each does):
  without a value:  $BENCH_SERVER_FLAGS
  with a value:     ${BENCH_SERVER_VALUED% --only*}
                    --only${BENCH_SERVER_VALUED#* --only}
  --help    show this text"
. "$(dirname "$0")/bench_args.sh"
bench_args "$usage" "$BENCH_SERVER_FLAGS" "$BENCH_SERVER_VALUED" "$@"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
peers=$root/bench/peers
apt_updated=0

say() { printf 'run_server_bench: %s\n' "$*" >&2; }

# Installs Debian packages as root (or with sudo that asks nothing).
apt_install() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            say "cannot install $* (not root): install them by hand"
            return 1
        fi
    fi
    if [ $apt_updated -eq 0 ]; then
        $sudo apt-get update -qq >/dev/null 2>&1 || true
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" \
        >/dev/null 2>&1 || { say "apt-get install $* failed"; return 1; }
}

# The server measured is $SLUICE_TEST_SERVER when set (the launcher's
# rule, tests/support/server.h); Debian's is installed only when it is not.
if { [ -z "${SLUICE_TEST_SERVER:-}" ] && ! command -v redis-server >/dev/null; } ||
   ! command -v redis-benchmark >/dev/null; then
    say "installing redis-server and redis-tools"
    apt_install redis-server redis-tools
fi

if ! /usr/bin/python3 -c 'import limits, redis' 2>/dev/null; then
    say "installing python3-limits and python3-redis"
    apt_install python3-limits python3-redis python3-hiredis ||
        apt_install python3-limits python3-redis
fi

if command -v npm >/dev/null; then
    if [ ! -d "$peers/node_modules/rate-limiter-flexible" ] ||
       [ ! -d "$peers/node_modules/ioredis" ]; then
        say "installing the Node peer's packages (npm ci in bench/peers)"
        (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >&2) ||
            say "npm ci failed: rate-limiter-flexible will be reported as not available"
    fi
else
    say "npm is missing: rate-limiter-flexible will be reported as not available"
fi

say "building in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$build" -j2 --target sluice_bench_server >/dev/null || {
    say "the build failed"
    exit 1
}
exec "$build/bench/sluice_bench_server" "$@"
