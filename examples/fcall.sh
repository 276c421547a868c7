#!/usr/bin/env bash
#
# fcall.sh - sluice's Functions library from redis-cli: FCALL sluice_hit on
# the key of ID, N times, printing each decision. The key is the one the C
# library and `sluice hit ID --store valkey://HOST:PORT` use,
# sluice:{ID}:ALGO, so all of them spend one budget.
#
# Usage: examples/fcall.sh [HOST [PORT [ID [ALGO [MAX [WINDOW_MS [N]]]]]]]
#        (defaults: 127.0.0.1 6379 user42 fixed 3 10000 5), e.g.
#        examples/fcall.sh 127.0.0.1 6379 user42 gcra 3 10000 5
#
# Needs redis-cli and a Redis 7+ (or Valkey) server with the library loaded:
#   sluice functions --load --store valkey://HOST:PORT
#   sluice functions | redis-cli -h HOST -p PORT -x FUNCTION LOAD REPLACE
# Prints "fcall hit I: allowed|refused remaining=R retry_after_ms=W
# reset_after_ms=T" a request; exits 1 if the server cannot be reached, the
# library is not loaded or the server refuses an argument.
set -u
host=${1:-127.0.0.1} port=${2:-6379} id=${3:-user42} algo=${4:-fixed}
max=${5:-3} window_ms=${6:-10000} n=${7:-5}
cli() { redis-cli -h "$host" -p "$port" "$@" 2>&1; }
if [ $# -gt 7 ] || ! [[ $port$max$window_ms$n =~ ^[0-9]+$ ]]; then
    echo "usage: fcall.sh [HOST [PORT [ID [ALGO [MAX [WINDOW_MS [N]]]]]]]" >&2
    exit 1
fi

pong=$(cli PING)
if [ "$pong" != PONG ]; then
    echo "fcall.sh: no server answers at $host:$port: $pong" >&2
    exit 1
fi
# The key as the library names it: an id's '%', '{' and '}' escaped.
esc=${id//%/%25}
esc=${esc//\{/%7B}
esc=${esc//\}/%7D}
key="sluice:{$esc}:$algo"

for i in $(seq 1 "$n"); do
    # Four integers: allowed (1 or 0), remaining, retry_after_ms, reset_after_ms.
    mapfile -t r < <(cli FCALL sluice_hit 1 "$key" "$algo" "$max" "$window_ms")
    case ${r[0]-} in
    1 | 0) ;;
    *"Function not found"*)
        echo "fcall.sh: the sluice Functions library is not loaded on" \
             "$host:$port; load it with:" \
             "sluice functions --load --store valkey://$host:$port" >&2
        exit 1 ;;
    *) echo "fcall.sh: FCALL sluice_hit $key: ${r[*]-no reply}" >&2; exit 1 ;;
    esac
    verdict=refused
    [ "${r[0]}" = 1 ] && verdict=allowed
    echo "fcall hit $i: $verdict remaining=${r[1]} retry_after_ms=${r[2]}" \
         "reset_after_ms=${r[3]}"
done
