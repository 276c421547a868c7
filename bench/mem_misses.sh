#!/usr/bin/env bash
#
# mem_misses.sh - the embedded store's cache misses and instructions per
# decision on 100,000 keys, counted by valgrind's callgrind with its cache
# simulator, inside sluice_hit() only. Seconds on a shared machine swing
# with where the host puts the memory traffic (BENCHMARKS.md); these counts
# do not: the same binary and keys give the same figures.
#
# For each last-level cache size in MIBS (by default 2, 8 and 32 MiB: a
# small, a middling and a large share of a server's), bench_lookup runs
# twice: making KEYS keys alone, then making them and hitting them HITS
# times at random; the difference over HITS is a hit's cost on a key that
# exists (the lock-free path for fixed and gcra). Columns, per hit:
# instructions, first-level data misses, and last-level data read misses,
# the lines that come from memory (prefetched ones too). These count
# traffic, not waiting: lines asked for at once cost one wait, lines asked
# for one after another one each; `sluice_bench_lookup --time` measures
# the wait (BENCHMARKS.md, "Cells").
#
# Usage: bench/mem_misses.sh [BUILD-DIR] [ALGO...] (default build-rel;
# fixed gcra sliding-counter). KEYS=100000 HITS=200000 MIBS="2 8 32". It
# never fails on a figure; it exits 1 if valgrind, the build or a run of
# bench_lookup fails.

set -eu

usage="usage: bench/mem_misses.sh [BUILD-DIR] [ALGO...]

The embedded store's instructions, first-level data misses and last-level
read misses per decision on KEYS keys, counted by valgrind's callgrind with
its cache simulator inside sluice_hit() only, for each last-level cache
size in MIBS: figures that do not move with the load of the machine.

  BUILD-DIR    the build with bench/sluice_bench_lookup (default build-rel)
  ALGO...      the algorithms (default fixed gcra sliding-counter)
  KEYS=100000 HITS=200000 MIBS=\"2 8 32\"   (environment)
  --help       show this text

Needs valgrind (apt-get install -y valgrind) and a build of
sluice_bench_lookup (a Release build: cmake -DCMAKE_BUILD_TYPE=Release).
No server. It never fails on a figure; it exits 1 if valgrind, the build
or a run fails."
. "$(dirname "$0")/bench_args.sh"
bench_args "$usage" "" "" "$@"

BUILD=${1:-build-rel}
shift || true
ALGOS=${*:-fixed gcra sliding-counter}
KEYS=${KEYS:-100000}
MIBS=${MIBS:-2 8 32}
HITS=${HITS:-200000}
PROG=$BUILD/bench/sluice_bench_lookup
command -v valgrind >/dev/null ||
    { echo "mem_misses: valgrind is missing (apt-get install -y valgrind)" >&2; exit 1; }
[ -x "$PROG" ] ||
    { echo "mem_misses: build $BUILD first (bench/sluice_bench_lookup)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The events callgrind counted inside sluice_hit(), as "Ir D1m DLmr", into
# $TMP/counts; exits if the program fails.
counts() { # LL-BYTES ALGO HITS
    valgrind --tool=callgrind --cache-sim=yes --LL="$1",16,64 \
        --toggle-collect=sluice_hit --callgrind-out-file="$TMP/out" \
        "$PROG" --keys "$KEYS" --hits "$3" --algo "$2" >"$TMP/log" 2>&1 ||
        { echo "mem_misses: $PROG --algo $2 --hits $3 failed:" >&2
          grep -v '^==' "$TMP/log" >&2; exit 1; }
    awk '/^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
         /^(summary|totals):/ { print $(col["Ir"] + 1), $(col["D1mr"] + 1) + $(col["D1mw"] + 1), $(col["DLmr"] + 1); exit }' "$TMP/out" >"$TMP/counts"
}

echo "sluice embedded store: per hit on $KEYS keys that exist ($HITS hits, callgrind --cache-sim, inside sluice_hit)"
printf '%-16s %8s %14s %14s %16s\n' algorithm "LL MiB" instructions "D1 misses" "LL read misses"
for algo in $ALGOS; do
    for mib in $MIBS; do
        counts $((mib << 20)) "$algo" 0
        read -r i0 d0 l0 <"$TMP/counts"
        counts $((mib << 20)) "$algo" "$HITS"
        read -r i1 d1 l1 <"$TMP/counts"
        awk -v a="$algo" -v m="$mib" -v h="$HITS" -v i0="$i0" -v i1="$i1" \
            -v d0="$d0" -v d1="$d1" -v l0="$l0" -v l1="$l1" 'BEGIN {
            printf "%-16s %8d %14.1f %14.2f %16.2f\n", a, m, (i1 - i0) / h,
                   (d1 - d0) / h, (l1 - l0) / h }'
    done
done
