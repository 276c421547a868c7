# cli_helpers.sh - sourced by the tests/cli_*.sh scripts (not a test itself:
# CTest runs only tests/*.sh). The caller sets SLUICE (the binary), TMP (a
# scratch directory) and passed=0 failed=0 before using these.

pass() {
    passed=$((passed + 1))
    echo "PASS: $1"
}

# fail NAME [DETAIL]: records a failure and shows DETAIL indented.
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1"
    if [ -n "${2-}" ]; then
        printf '%s\n' "$2" | sed 's/^/    /'
    fi
}

# run ARGS...: runs sluice with stdin from /dev/null; sets $rc, $out, $err.
run() {
    "$SLUICE" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}

# run_in INPUT ARGS...: the same, with INPUT (printf format) on stdin.
run_in() {
    local input=$1
    shift
    # shellcheck disable=SC2059
    printf -- "$input" | "$SLUICE" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}
