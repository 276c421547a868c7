#!/usr/bin/env bash
#
# bench_help_test.sh - every bench program (each sluice_bench_* that
# bench/CMakeLists.txt builds) and every bench script (bench/*.sh) answers
# --help with a usage on stdout and exit 0, at once (it must not measure,
# build, install or start a server: each run is bounded by timeout 10 and
# must be over in under 5 s), and refuses an unknown option with exit 2 and
# a message that names it. Also: the options that run_server_bench.sh and
# module_bench.sh pass on to sluice_bench_server
# (bench/bench_server_options.sh) are the ones its usage lists.
#
# Usage: bash tests/bench/bench_help_test.sh BENCH-BUILD-DIR SOURCE-DIR
#
# Every check prints PASS or FAIL; the last line is
# "bench_help_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

BIN=${1:?usage: bench_help_test.sh BENCH-BUILD-DIR SOURCE-DIR}
SRC=${2:?usage: bench_help_test.sh BENCH-BUILD-DIR SOURCE-DIR}
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# A store URL or server in the caller's environment must not matter here.
unset SLUICE_STORE

# pass and fail, shared with the other script tests.
. "$SRC/tests/cli/lib/cli_helpers.sh"

now_ms() {
    date +%s%3N
}

# timed NAME COMMAND...: runs COMMAND with stdin from /dev/null under
# timeout 10; sets $rc, $took (ms), and leaves its output in $TMP/out and
# $TMP/err. A temporary HOME and working directory keep what it might write
# out of the tree.
timed() {
    local start
    start=$(now_ms)
    (cd "$TMP/cwd" && timeout 10 "$@" </dev/null >"$TMP/out" 2>"$TMP/err")
    rc=$?
    took=$(($(now_ms) - start))
}
mkdir -p "$TMP/cwd"

# check_help NAME COMMAND...: COMMAND --help exits 0 within 5 s, printing
# a line that starts with "usage" (any case) on stdout, and nothing on
# stderr.
check_help() {
    local name=$1
    shift
    timed "$@" --help
    if [ "$rc" -ne 0 ]; then
        fail "$name --help exits 0" "exit $rc in $took ms; stdout: $(head -n 3 "$TMP/out"); stderr: $(head -n 3 "$TMP/err")"
    elif [ "$took" -ge 5000 ]; then
        fail "$name --help returns at once" "$took ms: did it run the bench?"
    elif ! grep -iq '^usage' "$TMP/out"; then
        fail "$name --help prints a usage line on stdout" "$(head -n 5 "$TMP/out")"
    elif [ "$(wc -l <"$TMP/out")" -lt 5 ]; then
        fail "$name --help says what it measures and needs, not only a synopsis" "$(cat "$TMP/out")"
    elif [ -s "$TMP/err" ]; then
        fail "$name --help writes nothing on stderr" "$(head -n 3 "$TMP/err")"
    else
        pass "$name --help ($took ms: $(head -n 1 "$TMP/out"))"
    fi
}

# check_unknown NAME COMMAND...: COMMAND --no-such-option exits 2 at once,
# naming the option on stderr.
check_unknown() {
    local name=$1
    shift
    timed "$@" --no-such-option
    if [ "$rc" -ne 2 ]; then
        fail "$name --no-such-option exits 2" "exit $rc in $took ms; stderr: $(head -n 3 "$TMP/err")"
    elif ! grep -q -- "--no-such-option" "$TMP/err"; then
        fail "$name: the message names the unknown option" "$(head -n 3 "$TMP/err")"
    elif [ "$took" -ge 5000 ]; then
        fail "$name --no-such-option returns at once" "$took ms"
    else
        pass "$name --no-such-option (exit 2: $(head -n 1 "$TMP/err"))"
    fi
}

# ---- The programs ------------------------------------------------------------

# Every program bench/CMakeLists.txt builds, so that one missing from the
# build (or renamed) fails here rather than going untested.
programs=$(sed -n 's/^add_executable(\(sluice_bench_[a-z0-9_]*\).*/\1/p' \
           "$SRC/bench/CMakeLists.txt" | sort -u)
if [ "$(printf '%s\n' "$programs" | grep -c .)" -ge 5 ]; then
    pass "bench/CMakeLists.txt builds $(printf '%s\n' "$programs" | grep -c .) programs"
else
    fail "bench/CMakeLists.txt lists the bench programs" "$programs"
fi
for prog in $programs; do
    if [ ! -x "$BIN/$prog" ]; then
        fail "$prog is built in $BIN"
        continue
    fi
    check_help "$prog" "$BIN/$prog"
    check_unknown "$prog" "$BIN/$prog"
done

# ---- The scripts -------------------------------------------------------------

# PATH without a server binary: --help must not need one (private_server.sh
# stops a script that has none), nor reach for apt-get or npm.
nobin=$TMP/nobin
mkdir -p "$nobin"
for tool in bash sh env dirname basename cat sed grep awk date timeout mktemp rm; do
    p=$(command -v "$tool") && ln -s "$p" "$nobin/$tool"
done
for script in "$SRC"/bench/*.sh; do
    name=bench/$(basename "$script")
    check_help "$name" env -u SLUICE_TEST_SERVER PATH="$nobin" bash "$script"
    check_unknown "$name" env -u SLUICE_TEST_SERVER PATH="$nobin" bash "$script"
done

# ---- The options passed on to sluice_bench_server --------------------------

# Its usage's synopsis (up to the first blank line) names its options; the
# scripts' list must name the same ones.
if [ -x "$BIN/sluice_bench_server" ]; then
    listed=$("$BIN/sluice_bench_server" --help | sed '/^$/q' |
             grep -o -- '--[a-z-]*' | grep -vx -- '--help' | sort -u)
    # shellcheck source=/dev/null
    . "$SRC/bench/bench_server_options.sh"
    passed_on=$(printf '%s\n' $BENCH_SERVER_FLAGS $BENCH_SERVER_VALUED | sort -u)
    if [ -n "$listed" ] && [ "$listed" = "$passed_on" ]; then
        pass "bench_server_options.sh names sluice_bench_server's options ($(echo $listed))"
    else
        fail "bench_server_options.sh names sluice_bench_server's options" \
             "the program: $(echo $listed)
the scripts: $(echo $passed_on)"
    fi
fi

echo "bench_help_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
