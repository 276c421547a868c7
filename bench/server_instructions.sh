#!/usr/bin/env bash
#
# server_instructions.sh - the server's instructions per decision, counted
# by valgrind's callgrind, for a bare INCR and for each algorithm through
# the native module (SLUICE.HIT), its script (EVALSHA) and the Functions
# library (FCALL sluice_hit). Instructions are not seconds, but they do not
# move with the load of a shared machine: the same binary, requests and
# server give the same count, so this is the figure to compare a change of
# the module with, where the timed benchmark (bench/module_bench.sh) needs a
# quiet machine.
#
# One redis-server, loaded with the module and the library, runs under
# callgrind, counting only inside the server's call() (the command itself,
# its reply, its replication and its commandstats: what INFO commandstats
# times). For each case, one redis-benchmark client first sends 3000
# requests over 1000 keys to make them (not counted), then N more on those
# keys (counted), all admitted (a limit of 100,000 per hour): the common
# path, the one INCR always takes. For the module's fixed window it also
# prints where the instructions go, by module API function (inclusive).
#
# Usage: bench/server_instructions.sh [BUILD-DIR] (default build-rel: its
# sluice.so, cli/sluice and lua_scripts.c); N=5000. It never fails on a
# figure; it exits 1 if valgrind, the server or the build is missing.

set -eu

usage="usage: bench/server_instructions.sh [BUILD-DIR]

The server's instructions per decision, counted by valgrind's callgrind
inside the server's call(): a bare INCR, and each algorithm through the
native module (SLUICE.HIT), its script (EVALSHA) and the Functions library
(FCALL sluice_hit), on one private redis-server it starts on loopback.

  BUILD-DIR   the build with sluice.so, cli/sluice and lua_scripts.c
              (default build-rel)
  N=5000      counted requests per case (environment)
  --help      show this text

Needs valgrind and callgrind_annotate (Debian's valgrind), redis-server,
redis-cli and redis-benchmark (redis-server, redis-tools), and a Redis 7+
server. It never fails on a figure; it exits 1 if a tool, the server or the
build is missing."
. "$(dirname "$0")/bench_args.sh"
bench_args "$usage" "" "" "$@"

BUILD=${1:-build-rel}
MODULE=$(realpath "$BUILD/sluice.so")
SLUICE=$BUILD/cli/sluice
N=${N:-5000}
# Every request admitted: the common path, as INCR always is.
MAX=100000
for tool in valgrind callgrind_annotate redis-benchmark; do
    command -v "$tool" >/dev/null ||
        { echo "server_instructions: $tool is missing" >&2; exit 1; }
done
[ -f "$MODULE" ] && [ -x "$SLUICE" ] ||
    { echo "server_instructions: build $BUILD first (sluice.so, cli/sluice)" >&2; exit 1; }
. "$(dirname "$0")/private_server.sh"
# One server under callgrind for every case, counting only inside call()
# (the command, its reply, its replication, its commandstats: what INFO
# commandstats times).
work=$(mktemp -d)
BENCH_SERVER_UNDER="valgrind --tool=callgrind --toggle-collect=call"
BENCH_SERVER_UNDER+=" --callgrind-out-file=$work/cg.out"
bench_server_start --loadmodule "$MODULE"
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp" "$work"' EXIT
rcli() { bench_timeout "$BENCH_CLI" -p "$port" "$@"; }
"$SLUICE" functions --load --store "valkey://127.0.0.1:$port" >/dev/null
"$SLUICE" peek probe --algo fixed --max 1 --window 1s \
    --store "valkey://127.0.0.1:$port" >/dev/null
# count ARGS...: instructions per request of ARGS, on keys that are there
# already: a first pass of 3000 requests over the 1000 keys makes them
# (not counted), then N requests are counted.
count() {
    local total
    rcli FLUSHALL >/dev/null
    bench_timeout redis-benchmark -p "$port" -c 1 -r 1000 -n 3000 "$@" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
    bench_timeout redis-benchmark -p "$port" -c 1 -r 1000 -n "$N" "$@" >/dev/null 2>&1
    callgrind_control --dump "$pid" >/dev/null 2>&1
    # count runs in a subshell: the dump's name is kept in a file.
    ls -t "$work"/cg.out.* | head -1 >"$work/last"
    total=$(callgrind_annotate "$(cat "$work/last")" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    awk -v t="${total:-0}" -v n="$N" 'BEGIN { printf "%.0f", t / n }'
}

echo "$(bench_server_version), callgrind, N=$N per case" \
     "after 3000 to make the keys, redis-benchmark -c 1 -r 1000," \
     "$MAX per 1 h; instructions per request"
printf '%-16s %10s %10s %10s %12s\n' algorithm module EVALSHA FCALL "module/INCR"
incr=$(count INCR "sluice:{k__rand_int__}:incr")
printf '%-16s %10s\n' "INCR (bare)" "$incr"
# Every algorithm of SLUICE_ALGO_MAP: its folder (for its script's SHA1 in
# lua_scripts.c) and its public name, read from src/algo/FOLDER/FOLDER.c.
src=$(dirname "$0")/..
for folder in $(sed -n 's/^ *X([A-Z0-9_]*, *[0-9]*, *\([a-z0-9_]*\)).*/\1/p' \
                "$src/include/sluice.h"); do
    algo=$(sed -n 's/^ *\.name = "\([^"]*\)",.*/\1/p' \
           "$src/src/algo/$folder/$folder.c")
    key="sluice:{k__rand_int__}:$algo"
    sha=$(sed -n "/^const sluice__script sluice__script_$folder = {/{n;s/.*\"\([0-9a-f]\{40\}\)\".*/\1/p}" \
          "$BUILD/lua_scripts.c")
    # A module without this algorithm's glue answers an error: not counted.
    if rcli SLUICE.HIT probe "$algo" 1 1000 PEEK | grep -q 'no module glue'; then
        m="no glue"
    else
        m=$(count SLUICE.HIT "$key" "$algo" "$MAX" 3600000)
    fi
    [ "$algo" = fixed ] && cp "$(cat "$work/last")" "$work/fixed.out"
    l=$(count EVALSHA "$sha" 1 "$key" "$MAX" 3600000 1 "" "t__rand_int__" 1)
    f=$(count FCALL sluice_hit 1 "$key" "$algo" "$MAX" 3600000)
    printf '%-16s %10s %10s %10s %12s\n' "$algo" "$m" "$l" "$f" \
        "$(awk -v m="$m" -v i="$incr" 'BEGIN { if (m + 0 > 0) printf "%.2fx", m / i; else print "-" }')"
done
echo
echo "SLUICE.HIT fixed: instructions per request inside each module API call"
echo "(inclusive: what the server does for it), and in sluice.so's own code:"
callgrind_annotate --threshold=100 --inclusive=yes "$work/fixed.out" 2>/dev/null |
    awk -v n="$N" '
        / \?\?\?:RM_[A-Za-z]+ / {
            c = $1; gsub(",", "", c); f = $0; sub(/.*\?\?\?:/, "", f); sub(/ .*/, "", f)
            if (c / n >= 20) printf "  %-28s %8.0f\n", f, c / n
        }'
callgrind_annotate --threshold=100 "$work/fixed.out" 2>/dev/null |
    awk -v n="$N" '/sluice\.so\]/ { c = $1; gsub(",", "", c); s += c }
        END { printf "  %-28s %8.0f\n", "sluice.so (self)", s / n }'
