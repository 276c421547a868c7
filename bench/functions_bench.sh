#!/usr/bin/env bash
#
# functions_bench.sh - what one decision costs the server: FCALL sluice_hit
# (the Functions library) beside EVALSHA (the server store's script, sent
# by 'sluice replay') and a bare INCR, each as INFO commandstats'
# usec_per_call (the server's own time per call, Lua and the commands it
# runs included), on a private redis-server. One run; it never fails on a
# figure.
#
# Usage: bench/functions_bench.sh [PATH-TO-SLUICE] (default
# build-rel/cli/sluice); N=100000 calls per case, on 1000 keys, a limit of
# 100 per second.

set -eu

usage="usage: bench/functions_bench.sh [PATH-TO-SLUICE]

What one decision costs the server: FCALL sluice_hit (the Functions
library) beside EVALSHA (the server store's script, sent by 'sluice
replay') and a bare INCR, per algorithm, as INFO commandstats'
usec_per_call, on a private redis-server it starts on loopback.

  PATH-TO-SLUICE   the CLI to use (default build-rel/cli/sluice)
  N=100000         calls per case (environment)
  --help           show this text

Needs redis-server, redis-cli and redis-benchmark (Debian's redis-server
and redis-tools; or \$SLUICE_TEST_SERVER, \$SLUICE_TEST_CLI) and a Redis 7+
server for FCALL. It never fails on a figure."
. "$(dirname "$0")/bench_args.sh"
bench_args "$usage" "" "" "$@"

SLUICE=${1:-build-rel/cli/sluice}
N=${N:-100000}
. "$(dirname "$0")/private_server.sh"
bench_server_start
store="valkey://127.0.0.1:$port"
rcli() { bench_timeout "$BENCH_CLI" -p "$port" "$@"; }
# usec NAME: usec_per_call of the command NAME since the last RESETSTAT.
usec() {
    rcli INFO commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:.*usec_per_call=\([0-9.]*\).*/\1/p"
}
calls() {
    rcli INFO commandstats | tr -d '\r' |
        sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*/\1/p"
}

"$SLUICE" functions --load --store "$store" >/dev/null
echo "$(bench_server_version), N=$N per case, 1000 keys, 100 per 1s"
printf '%-16s %14s %14s\n' algorithm "FCALL us/call" "EVALSHA us/call"
for algo in $("$SLUICE" functions | sed -n "s/^algos\[#algos + 1\] = {name = '\([a-z-]*\)'.*/\1/p"); do
    rcli FLUSHALL >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    bench_timeout redis-benchmark -p "$port" -n "$N" -c 50 -r 1000 FCALL sluice_hit 1 \
        "sluice:{k__rand_int__}:$algo" "$algo" 100 1000 >/dev/null
    f=$(usec fcall)
    fc=$(calls fcall)
    rcli FLUSHALL >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    awk -v n="$N" 'BEGIN { srand(1); for (i = 0; i < n; i++)
                           printf "0 k%d\n", int(rand() * 1000) }' |
        "$SLUICE" replay --algo "$algo" --max 100 --window 1s \
            --store "$store" >/dev/null || true
    e=$(usec evalsha)
    printf '%-16s %14s %14s   (%s FCALL, %s EVALSHA calls)\n' "$algo" "$f" "$e" \
        "$fc" "$(calls evalsha)"
done
rcli CONFIG RESETSTAT >/dev/null
bench_timeout redis-benchmark -p "$port" -n "$N" -c 50 -r 1000 -t incr >/dev/null
printf '%-16s %14s\n' "INCR (bare)" "$(usec incr)"
