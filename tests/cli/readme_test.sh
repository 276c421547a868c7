#!/usr/bin/env bash
#
# readme_test.sh - the README's first screens do what they show. Each
# ```console block is run as written, one "$ " line at a time, and what it
# prints is compared with the lines the README shows under it; and the
# README's async example is examples/async_uv.c, quoted byte for byte.
#
# Run as written, but on this test's own terms: the README's ports (6390,
# 6391) become free ones of this run; its redis-server lines start the
# server under test ($SLUICE_TEST_SERVER, else redis-server) on loopback in
# a temporary folder, killed by PID; build/cli/sluice and build/sluice.so
# are this build's. A figure that counts down with the clock (a non-zero
# retry_after_ms or reset_after_ms of the CLI's text) and the Functions
# library's hash are compared as "some non-zero figure" and "some hash".
#
# Usage: bash tests/cli/readme_test.sh PATH-TO-SLUICE (in BUILD/cli/sluice)
set -u
SLUICE=$(cd "$(dirname "${1:?usage: readme_test.sh PATH-TO-SLUICE}")" && pwd)/$(basename "$1")
BUILD=$(cd "$(dirname "$SLUICE")/.." && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
passed=0 failed=0
. "$SRC/tests/cli/lib/cli_helpers.sh"
use_test_binaries readme_test
pids=()
trap 'stop_pid "${pids[@]}"; rm -rf "$TMP"' EXIT

# The README's port P is this run's $((P - 6390 + base)).
# (A range no other test uses; a server line that finds its port taken
# moves the block's ports on, see run_line.)
base=$((45000 + $$ % 1000 * 2))
map_ports() { sed -E "s/\b639([0-9])\b/\$((base + \1))/g" <<<"$1"; }

# A figure that counts down, and the library's hash, masked.
mask() {
    sed -E 's/(retry_after_ms|reset_after_ms)=[1-9][0-9]*/\1=N/g;
            s/\+[0-9a-f]{12}/+HASH/g'
}

# run_line LINE: runs one "$ " line of a block; prints what it printed.
run_line() {
    local line=$1 port args
    line=${line//build\/cli\/sluice/$SLUICE}
    line=${line//\$PWD\/build\/sluice.so/$BUILD/sluice.so}
    line=$(map_ports "$line")
    if [[ $line == redis-server* ]]; then
        # The server under test, in the foreground of a background job (so
        # its PID is ours to kill), with the README's other arguments.
        eval "set -- ${line#redis-server}"
        port=$(eval echo "$2")
        shift 2
        args=()
        while [ $# -gt 0 ]; do
            case $1 in
            --daemonize | --save) shift 2 ;;
            *) args+=("$1"); shift ;;
            esac
        done
        # Its port taken by another test: this block's ports move on with it.
        spawn_free_server "$port" "$TMP/server-$port.log" "${args[@]}" ||
            cat "$TMP/server-$port.log"
        base=$((base + spawned_port - port))
        pids+=("$spawned_pid")
        return
    fi
    line=${line//redis-cli/$CLI}
    eval "$line" 2>&1
}

# run_block FILE: the block in FILE, each line run and its output checked.
run_block() {
    local want="" cmd="" got
    while IFS= read -r l || [ -n "$l" ]; do
        if [[ $l == '$ '* ]]; then
            [ -n "$cmd" ] && check_line "$cmd" "$want"
            cmd=${l#\$ } want=""
        else
            want+="$l"$'\n'
        fi
    done <"$1"
    [ -n "$cmd" ] && check_line "$cmd" "$want"
}

check_line() {
    local got
    # In this shell, not a $(...): an export or a server it starts stays.
    run_line "$1" >"$TMP/got" 2>&1
    got=$(mask <"$TMP/got")
    if [ "$got" = "$(printf '%s' "$2" | mask)" ]; then
        pass "README: \$ $1"
    else
        fail "README: \$ $1" "$(diff <(printf '%s' "$2" | mask) <(printf '%s\n' "$got"))"
    fi
}

ok() { if [ "$2" -eq 0 ]; then pass "$1"; else fail "$1"; fi; }

awk -v dir="$TMP" '/^```console$/ {n++; on = 1; next}
    on && /^```$/ {on = 0; next}
    on {print > (dir "/block-" n)}' "$SRC/README.md"
blocks=$(ls "$TMP"/block-* 2>/dev/null | wc -l)
[ "$blocks" -ge 2 ]
ok "the README has its console blocks ($blocks)" $?
for b in $(ls "$TMP"/block-* | sort -V); do
    if grep -q 'sluice\.so' "$b" && [ ! -e "$BUILD/sluice.so" ]; then
        echo "SKIP: $(basename "$b"): this build has no module (SLUICE_MODULE=OFF)"
        continue
    fi
    run_block "$b"
done

# The async example, as the README quotes it.
awk '/^```c$/ {n++; if (n == 2) {on = 1; next}} on && /^```$/ {on = 0} on' \
    "$SRC/README.md" >"$TMP/async.c"
cmp -s "$TMP/async.c" "$SRC/examples/async_uv.c"
ok "the README's second C block is examples/async_uv.c, byte for byte" $?

echo "readme_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
