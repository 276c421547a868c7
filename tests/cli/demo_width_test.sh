#!/usr/bin/env bash
#
# demo_width_test.sh - every line 'sluice demo' and 'sluice demo chat'
# print fits an 80-column terminal: counted in characters (UTF-8), after
# the colors a terminal gets are taken out. 'demo' runs as it is (no
# colors: stdout is a file), on a terminal (script(1), when there is one),
# and 'demo chat' against a private server ($SLUICE_TEST_SERVER, else
# redis-server, else valkey-server) on an unusual loopback port, in a
# mktemp -d folder, stopped by PID in a trap.
#
# Usage: bash tests/cli/demo_width_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "demo_width_test: N passed, M failed", and the exit status is non-zero
# if any check failed.

set -u

SLUICE=${1:?usage: demo_width_test.sh PATH-TO-SLUICE}
passed=0
failed=0
COLUMNS_MAX=80

# pass, fail, run, start_server, stop_pid, and the server binaries
. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries demo_width_test

TMP=$(mktemp -d)
server_pid=
cleanup() {
    stop_pid "$server_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

# widest FILE: the widest line of FILE in characters, once the terminal's
# escape sequences (colors, ESC [ ... m) and carriage returns are out. wc -L
# in a UTF-8 locale counts characters (columns), so a UTF-8 sign is one
# column, not its bytes.
widest() {
    sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\r//g' "$1" | LC_ALL=C.UTF-8 wc -L
}

# check_width NAME FILE: every line of FILE fits COLUMNS_MAX; the detail of
# a failure shows the lines that do not (awk's length: bytes, near enough).
check_width() {
    local w
    w=$(widest "$2")
    if [ -s "$2" ] && [ "$w" -le "$COLUMNS_MAX" ]; then
        pass "$1 fits $COLUMNS_MAX columns (widest: $w)"
    else
        fail "$1 fits $COLUMNS_MAX columns (widest: $w)" \
             "$(awk -v m="$COLUMNS_MAX" 'length($0) > m { print length($0) ": " $0 }' "$2")"
    fi
}

# ---- The self-test of the measure --------------------------------------------

# The check must be able to fail: an 81-character line is over, and a line of
# 80 two-byte characters (160 bytes) is not, nor is an 80-character line in
# color.
printf '%081d\n' 0 >"$TMP/wide"
printf 'é%.0s' $(seq 1 80) >"$TMP/utf8"
printf '\033[1m%080d\033[0m\n' 0 >"$TMP/color"
if [ "$(widest "$TMP/wide")" -eq 81 ] && [ "$(widest "$TMP/utf8")" -eq 80 ] &&
   [ "$(widest "$TMP/color")" -eq 80 ]; then
    pass "the measure counts characters, not bytes or colors"
else
    fail "the measure counts characters, not bytes or colors" \
         "81 -> $(widest "$TMP/wide"), 80 x é -> $(widest "$TMP/utf8"), color -> $(widest "$TMP/color")"
fi

# ---- sluice demo ---------------------------------------------------------------

run demo
if [ "$rc" -eq 0 ]; then
    pass "demo exits 0"
else
    fail "demo exits 0" "exit $rc; $err"
fi
printf '%s\n' "$out" >"$TMP/demo"
check_width "demo" "$TMP/demo"
# The table is there, a row per algorithm ("N > max" is one field).
rows=$(sed 's/ > max/!/g' "$TMP/demo" | awk '$3 == "of" && $11 == "of"' | wc -l)
nalgos=$(cli_algos | wc -l)
if [ "$rows" -eq "$nalgos" ]; then
    pass "demo: a table row per algorithm ($rows)"
else
    fail "demo: a table row per algorithm" "$rows rows for $nalgos algorithms: $out"
fi

if command -v script >/dev/null 2>&1; then
    # On a terminal the same screen comes in color: colors take no columns.
    script -qec "$SLUICE demo" /dev/null </dev/null >"$TMP/tty" 2>&1
    if grep -q "$(printf '\033')" "$TMP/tty"; then
        check_width "demo on a terminal" "$TMP/tty"
    else
        fail "demo on a terminal is in color" "$(head -n 3 "$TMP/tty")"
    fi
else
    echo "SKIP: demo on a terminal (no script(1))"
fi

# ---- sluice demo chat ------------------------------------------------------------

start_server demo_width_test 39000
# timeout=2000: as in cli_queue_test.sh, a loaded sanitizer build has been
# seen to miss the default 500 ms.
run demo chat --store "valkey://127.0.0.1:$port?timeout=2000"
if [ "$rc" -eq 0 ]; then
    pass "demo chat exits 0"
else
    fail "demo chat exits 0" "exit $rc; $err"
fi
printf '%s\n' "$out" >"$TMP/chat"
check_width "demo chat" "$TMP/chat"
printf '%s\n' "$err" >"$TMP/chat.err"
check_width "demo chat's stderr" "$TMP/chat.err"

echo "demo_width_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
