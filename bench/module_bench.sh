#!/usr/bin/env bash
#
# module_bench.sh - what one decision costs the server through the native
# module (SLUICE.HIT, sluice.so) beside the same algorithm's script
# (EVALSHA, as the server store sends it), the Functions library (FCALL
# sluice_hit) and a bare INCR, all in one run on one private redis-server
# loaded with the module and the library, every case sent the same way:
# redis-benchmark -c 50 -r 1000, N calls, on the same 1000 keys (flushed
# between cases), a limit of 100 per second. For each case it prints
#
#   us/call    INFO commandstats usec_per_call: the server's own time
#   cpu us     INFO cpu used_cpu_user + used_cpu_sys, before and after,
#              divided by the calls (the whole server: I/O included)
#   bytes/key  MEMORY USAGE, averaged over up to 200 of the keys left
#   rps        redis-benchmark's own requests per second (the client side)
#
# and the targets side by side: module fixed <= 2x INCR (us/call); each
# algorithm through the module >= 3x faster than its script (us/call). One
# run; it never fails on a figure.
#
# Usage: bench/module_bench.sh [BUILD-DIR] (default build-rel: its
# sluice.so and cli/sluice); N=100000.

set -eu

BUILD=${1:-build-rel}
MODULE=$BUILD/sluice.so
SLUICE=$BUILD/cli/sluice
N=${N:-100000}
. "$(dirname "$0")/private_server.sh"
bench_server_start --loadmodule "$(realpath "$MODULE")"
rcli() { bench_timeout redis-cli -p "$port" "$@"; }
stat() {
    rcli INFO commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*usec_per_call=\([0-9.]*\).*/\1 \2/p"
}
cpu() {
    rcli INFO cpu | tr -d '\r' | awk -F: '
        /^used_cpu_(user|sys):/ { t += $2 } END { printf "%.6f", t }'
}
# memory: the mean MEMORY USAGE of up to 200 keys (those that are there).
memory() {
    rcli --scan --pattern "sluice:*" | head -200 | while read -r k; do
        rcli MEMORY USAGE "$k" </dev/null
    done | awk '$1 > 0 { s += $1; n++ }
                END { if (n) printf "%.0f", s / n; else print "-" }'
}
# with WINDOW ARGS...: ARGS with every @W@ replaced by WINDOW.
with() {
    local w=$1 a out=()
    shift
    for a in "$@"; do out+=("${a//@W@/$w}"); done
    printf '%s\0' "${out[@]}"
}
# run CMDSTAT ARGS...: one case (@W@ in ARGS: the window): N calls with a
# 1 s window, timed; then, on a flushed server, 2000 calls with a 1 h
# window, whose keys stay for MEMORY USAGE. Prints "us/call cpu-us/call
# bytes/key rps".
run() {
    local name=$1 c0 c1 rps mem args
    shift
    rcli FLUSHALL >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    mapfile -d '' -t args < <(with 1000 "$@")
    c0=$(cpu)
    rps=$(bench_timeout redis-benchmark -p "$port" -c 50 -r 1000 -n "$N" "${args[@]}" 2>&1 |
          tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' |
          tail -1)
    c1=$(cpu)
    read -r calls usec <<<"$(stat "$name")"
    rcli FLUSHALL >/dev/null
    mapfile -d '' -t args < <(with 3600000 "$@")
    bench_timeout redis-benchmark -p "$port" -c 50 -r 1000 -n 2000 "${args[@]}" >/dev/null 2>&1
    mem=$(memory)
    awk -v u="$usec" -v c0="$c0" -v c1="$c1" -v n="${calls:-0}" \
        -v m="$mem" -v r="$rps" 'BEGIN {
            printf "%8.2f %8.2f %9s %10s", u, n ? (c1 - c0) * 1e6 / n : 0, m, r }'
}

"$SLUICE" functions --load --store "valkey://127.0.0.1:$port" >/dev/null
# The server store loads every script on its first connection.
"$SLUICE" peek probe --algo fixed --max 1 --window 1s \
    --store "valkey://127.0.0.1:$port" >/dev/null
echo "$(redis-server --version | cut -d' ' -f1-3), $(rcli SLUICE.VERSION)," \
     "N=$N per case, redis-benchmark -c 50 -r 1000, 100 per 1s"
printf '%-16s %-8s %8s %8s %9s %10s\n' algorithm case "us/call" "cpu us" \
    "bytes/key" rps
i=$(run incr INCR "sluice:{k__rand_int__}:incr")
incr_us=$(echo "$i" | awk '{ print $1 }')
printf '%-16s %-8s %s\n' "INCR (bare)" "" "$i"
summary=""
for algo in fixed sliding-counter sliding-log gcra compact-log; do
    key="sluice:{k__rand_int__}:$algo"
    folder=${algo//-/_}
    sha=$(sed -n "/^const sluice__script sluice__script_$folder = {/{n;s/.*\"\([0-9a-f]\{40\}\)\".*/\1/p}" \
          "$BUILD/lua_scripts.c")
    if rcli SLUICE.HIT probe "$algo" 100 1000 PEEK | grep -q "no module glue"; then
        m="no glue"
        printf '%-16s %-8s %s\n' "$algo" module "(no glue in this build)"
    else
        m=$(run sluice.hit SLUICE.HIT "$key" "$algo" 100 @W@)
        printf '%-16s %-8s %s\n' "$algo" module "$m"
    fi
    l=$(run evalsha EVALSHA "$sha" 1 "$key" 100 @W@ 1 "" "t__rand_int__" 1)
    printf '%-16s %-8s %s\n' "" EVALSHA "$l"
    printf '%-16s %-8s %s\n' "" FCALL \
        "$(run fcall FCALL sluice_hit 1 "$key" "$algo" 100 @W@)"
    summary+="$algo|$(echo "$m" | awk '{ print $1 }')|$(echo "$l" | awk '{ print $1 }')"$'\n'
done
echo
echo "targets (server us/call):"
printf '%s' "$summary" | while IFS='|' read -r algo m l; do
    [ -n "$algo" ] || continue
    if [ "$m" = "no" ]; then
        printf '  %-16s no module glue in this build\n' "$algo"
        continue
    fi
    awk -v a="$algo" -v m="$m" -v l="$l" -v i="$incr_us" 'BEGIN {
        r = m > 0 ? l / m : 0
        v = (r >= 3) ? "met" : "MISSED"
        printf "  %-16s module %.2f us, script %.2f us: %.1fx faster (target >= 3x: %s)\n", a, m, l, r, v
        if (a == "fixed") {
            v = (m <= 2 * i) ? "met" : "MISSED"
            printf "  %-16s module %.2f us = %.2fx a bare INCR (%.2f us) (target <= 2x: %s)\n", "", m, m / i, i, v
        } }'
done
