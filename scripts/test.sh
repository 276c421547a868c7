#!/usr/bin/env bash
# test.sh - the whole test suite: installs what is missing, then builds and
# runs every test three times: a plain build, AddressSanitizer with
# UndefinedBehaviorSanitizer, and ThreadSanitizer; then CONTRIBUTING.md's recipe for
# a new algorithm on a copy of the tree (scripts/sixth_algo.sh). Tests that
# need a server start their own on loopback and stop it by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
# openssl makes the TLS tests' certificates (tests/support/tls_certs.h).
sluice_need build-essential cmake pkg-config libhiredis-dev libssl-dev openssl libuv1-dev libevent-dev libev-dev
# The example HTTP server (examples/http_server.c) is built on libevent's
# evhttp, and tests/cli/http_example_test.sh asks it with curl.
sluice_need curl
# The examples' clients (tests/examples/examples_test.sh): Debian's Python
# client and the npm client redis as Debian packages it, and node for it
# (nodesource's, when one is installed, else Debian's).
sluice_need python3-redis node-redis
command -v node >/dev/null || sluice_need nodejs
# tests/cli/man_page_test.sh renders docs/sluice.1 with groff (-ww: no
# warning may pass).
sluice_need groff-base
# The server build under test: Debian's redis-server, redis-tools
# (redis-cli) and redis-sentinel, unless SLUICE_TEST_SERVER, SLUICE_TEST_CLI
# and SLUICE_TEST_SENTINEL name another build (CONTRIBUTING.md: "Running the suite
# against another server build").
[ -n "${SLUICE_TEST_SERVER:-}" ] || sluice_need redis-server
[ -n "${SLUICE_TEST_CLI:-}" ] || sluice_need redis-tools
[ -n "${SLUICE_TEST_SENTINEL:-}" ] || sluice_need redis-sentinel

jobs=$(nproc)
run() {
    local dir=$1
    shift
    echo "== $dir: cmake $*"
    cmake -S . -B "$dir" "$@" >/dev/null
    cmake --build "$dir" -j"$jobs" >/dev/null
    (cd "$dir" && ctest --output-on-failure -j"$jobs")
}

run build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run build-asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address,undefined
TSAN_OPTIONS=halt_on_error=1 \
    run build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=thread
# CONTRIBUTING.md's "Adding an algorithm", followed to the letter in a copy of the
# tree: a sixth algorithm, then a plain build and its unit, server and cli
# tests; then the same without its module glue, and its server tests.
bash scripts/sixth_algo.sh
echo "sluice: all test builds passed"
