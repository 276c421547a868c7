#!/usr/bin/env bash
#
# srvtime_test.sh - checks the "Server time per decision" section of
# sluice_bench_server (bench/server/srvtime.c), not its figures: that each
# row it is asked for (--only) runs and is reported, in the table and in
# --json; that the others say why they did not run; that on a server given
# by --store without the module, or whose user may not FUNCTION LOAD, or
# without redis-benchmark, those rows say "not available: why" and the
# rest still run; and that it removes its keys from a server it did not
# start, leaving the others. Quick runs (--quick) of a few rows.
#
# Usage: bash tests/bench/srvtime_test.sh PATH-TO-SLUICE_BENCH_SERVER
# (built with the module, sluice.so: its server loads it).
#
# Every check prints PASS or FAIL; the last line is
# "srvtime_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

BENCH=${1:?usage: srvtime_test.sh PATH-TO-SLUICE_BENCH_SERVER}
passed=0
failed=0
TMP=$(mktemp -d)
server_pid=
trap 'stop_pid "$server_pid"; rm -rf "$TMP"' EXIT

# pass, fail, stop_pid, spawn_server, and the build under test: SERVER and
# CLI (the benchmark's own server is the launcher's: the same build)
. "$(dirname "$0")/../cli/lib/cli_helpers.sh"
use_test_binaries srvtime_test

# check_that WHAT COMMAND...: passes when COMMAND succeeds.
check_that() {
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
# row FILE ID: the JSON line of row ID in FILE (one row a line).
row() { grep "{\"id\": \"$2\"," "$1"; }
# available FILE ID: the row ran, with a usec per call and bytes per key.
available() {
    row "$1" "$2" | grep -q '"available": true, "calls": [1-9][0-9]*, "usec_per_call": [0-9.e-]*, "cpu_us_per_call": [0-9.e-]*, "bytes_per_key": [1-9]'
}
# unavailable FILE ID TEXT: the row did not run, and its why has TEXT.
unavailable() {
    row "$1" "$2" | grep -q "\"available\": false, \"why\": \"[^\"]*$3"
}

# ---- Its own server, with the module ------------------------------------------

out=$TMP/own.json
"$BENCH" --quick --no-peers --no-diag --only srvtime_fixed,srvtime_incr \
    --json >"$out" 2>"$TMP/own.err"
check_that "own server: exit status 0" [ $? -eq 0 ]
for id in srvtime_incr srvtime_fixed_module srvtime_fixed_script \
          srvtime_fixed_fcall; do
    check_that "own server: $id ran" available "$out" "$id"
done
check_that "own server: a row --only does not name is skipped" \
    unavailable "$out" srvtime_gcra_module "skipped (--only)"
n_module=$(grep -c '"id": "srvtime_[a-z-]*_module"' "$out")
n_ways="$(grep -c '"id": "srvtime_[a-z-]*_script"' "$out") $(grep -c '"id": "srvtime_[a-z-]*_fcall"' "$out")"
check_that "own server: a row per algorithm and way ($n_module algorithms)" \
    [ "$n_module" -ge 5 -a "$n_ways" = "$n_module $n_module" ]
check_that "own server: module fixed / INCR, with its target" \
    grep -q '"name": "srvtime_fixed_module_over_incr", "value": [0-9.e-]*, "target_max": 2.0, "met": [a-z]*}' "$out"
check_that "own server: script / module, with its target" \
    grep -q '"name": "srvtime_fixed_script_over_module", "value": [0-9.e-]*, "target_min": 3.0, "met": [a-z]*}' "$out"
check_that "own server: FCALL / module, no target" \
    grep -q '"name": "srvtime_fixed_fcall_over_module", "value": [0-9.e-]*}' "$out"
check_that "own server: --only leaves out the server CPU section" \
    grep -q '"server_cpu": \[$' "$out"

out=$TMP/own.txt
"$BENCH" --quick --no-peers --no-diag --only srvtime_incr,srvtime_gcra_module \
    >"$out" 2>/dev/null
check_that "table: the header names the build measured ($SERVER)" \
    grep -Eq "^sluice [^ ]+ server store benchmark: (redis|valkey) [0-9.]+ on 127\.0\.0\.1:[0-9]+ \(started here: $SERVER, " "$out"
check_that "table: the section and its rows" \
    grep -q '^Server time per decision' "$out"
check_that "table: INCR's figures" \
    grep -Eq '^  INCR \(bare\) +INCR +[0-9]+\.[0-9]{2} ' "$out"
check_that "table: gcra's module row" \
    grep -Eq '^  gcra +SLUICE\.HIT +[0-9]+\.[0-9]{2} ' "$out"
check_that "table: a row left out says why" \
    grep -Eq '^ +EVALSHA +not available: skipped \(--only\)' "$out"
check_that "table: the ratio and its target" \
    grep -q 'gcra .* script / module  not measured: skipped (--only)' "$out"
check_that "table: no main table when --only names none of its cases" \
    bash -c "! grep -q '^  implementation' '$out'"

# ---- A server given by --store: no module, no FUNCTION LOAD -------------------

spawn_free_server $((20000 + RANDOM % 10000)) "$TMP/server.log" \
    --user default on nopass '~*' '&*' '+@all' \
    --user bench on '>pw' '~*' '&*' '+@all' '-function'
port=$spawned_port
server_pid=$spawned_pid
echo "srvtime_test: --store server $(server_version "$port")"
"$CLI" -p "$port" SET other 1 >/dev/null
url=redis://bench:pw@127.0.0.1:$port
out=$TMP/store.json
"$BENCH" --quick --no-peers --no-diag --only srvtime_fixed,srvtime_incr \
    --store "$url" --json >"$out" 2>/dev/null
check_that "--store: exit status 0" [ $? -eq 0 ]
check_that "--store: the JSON names the server" \
    grep -Eq '"server": \{"name": "(redis|valkey)", "version": "[0-9.]+", "binary": ""' "$out"
check_that "--store without the module: its row says so" \
    unavailable "$out" srvtime_fixed_module "the server has no sluice module"
check_that "--store, FUNCTION LOAD refused: the FCALL row says so" \
    unavailable "$out" srvtime_fixed_fcall "refused the Functions library"
check_that "--store: the script row ran" available "$out" srvtime_fixed_script
check_that "--store: the INCR row ran" available "$out" srvtime_incr
check_that "--store: the ratio over a row not run is null" \
    grep -q '"name": "srvtime_fixed_script_over_module", "value": null' "$out"
check_that "--store: its keys removed, the others left" \
    [ "$("$CLI" -p "$port" DBSIZE) $("$CLI" -p "$port" GET other)" = "1 1" ]

# ---- No redis-benchmark -------------------------------------------------------

mkdir "$TMP/bin"
out=$TMP/norb.json
PATH=$TMP/bin "$BENCH" --quick --no-peers --no-diag --only srvtime_incr \
    --store "$url" --json >"$out" 2>/dev/null
check_that "no redis-benchmark: exit status 0" [ $? -eq 0 ]
check_that "no redis-benchmark: the row says so" \
    unavailable "$out" srvtime_incr "redis-benchmark cannot run"

echo "srvtime_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
