#!/usr/bin/env bash
#
# async_bench_test.sh - checks sluice_bench_async's rows and JSON, not its
# figures: --help answers, a bad option exits 2, and a quick run of a few
# rows (--only) reports them in the table and in --json, the rows left out
# saying why, and every target line. Never a timed assertion.
#
# Usage: bash tests/bench/async_bench_test.sh PATH-TO-SLUICE_BENCH_ASYNC
# (built with the module, sluice.so: its server loads it).
set -u
BENCH=${1:?usage: async_bench_test.sh PATH-TO-SLUICE_BENCH_ASYNC}
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
check() {
    local what=$1
    shift
    if "$@"; then echo "PASS $what"; passed=$((passed + 1));
    else echo "FAIL $what"; failed=$((failed + 1)); fi
}
row() { grep "{\"id\": \"$2\"," "$1"; }
ran() { row "$1" "$2" | grep -q '"available": true, "decisions_per_s": [0-9.e+]*, "client_cpu_us_per_decision": [0-9.e+-]*, "client_context_switches_per_decision"'; }

"$BENCH" --help >"$TMP/help" 2>&1
check "--help: exit 0" [ $? -eq 0 ]
check "--help: names --rounds and --only" grep -q -- '--rounds N.*--only\|--only' "$TMP/help"
"$BENCH" --nope >/dev/null 2>&1
check "a bad option: exit 2" [ $? -eq 2 ]

only=async_fixed_lua_50,async_fixed_module_500,redis_benchmark_incr_c50
"$BENCH" --quick --only $only --json >"$TMP/out.json" 2>"$TMP/err"
check "--json: exit 0" [ $? -eq 0 ]
for id in async_fixed_lua_50 async_fixed_module_500 redis_benchmark_incr_c50 \
          redis_benchmark_incr_c50_p16; do
    check "--json: $id ran" ran "$TMP/out.json" "$id"
done
check "--json: a row --only leaves out says why" \
    bash -c "grep '{\"id\": \"rlf_fixed\",' '$TMP/out.json' | grep -q '\"available\": false, \"why\": \"skipped (--only)\"'"
check "--json: a target with its verdict" \
    grep -q '"name": "async_fixed_lua_50_over_incr_c50", "value": [0-9.e+]*, "target_min": 2.000, "met": [a-z]*}' "$TMP/out.json"
check "--json: a target over a row not run is null" \
    grep -q '"name": "async_fixed_lua_50_over_rlf", "value": null' "$TMP/out.json"
check "--json: the module / INCR -P 16 ratio" \
    grep -q '"name": "async_fixed_module_500_over_incr_p16", "value": [0-9.e+]*}' "$TMP/out.json"

"$BENCH" --quick --only async_fixed_lua_500 >"$TMP/out.txt" 2>/dev/null
check "table: exit 0" [ $? -eq 0 ]
check "table: the async row" grep -Eq '^  sluice async, engine=lua +500 +[0-9,]+ ' "$TMP/out.txt"
check "table: a row left out says why" grep -q 'not available: skipped (--only)' "$TMP/out.txt"
check "table: the targets" grep -q '^targets (issue 22)' "$TMP/out.txt"

echo "async_bench_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
