# shellcheck shell=bash
# compare.sh - sourced by tests/examples/examples_test.sh (not a test
# itself): runs an example and the C library (`sluice hit --json`, the CLI
# over the library) on the same requests and compares their decisions. The
# caller sets SLUICE, STORE, TMP, and uses cli_helpers.sh's pass and fail.

# The limit and the requests every example is run with: 3 per minute, hit 5
# times, so 3 admitted and 2 refused, in a window that cannot roll during
# the test.
EX_MAX=3
EX_WINDOW_MS=60000
EX_N=5

now_ms() { date +%s%3N; }

# ref_run ID ALGO: the library's decisions for EX_N hits on the fresh key of
# ID, one line each as the examples print them (less their "VIA " prefix),
# in $TMP/ref; sets ref_ms to the time they took.
ref_run() {
    local i t0 j
    t0=$(now_ms)
    : >"$TMP/ref"
    for i in $(seq 1 "$EX_N"); do
        j=$("$SLUICE" hit "$1" --algo "$2" --max "$EX_MAX" --window "$EX_WINDOW_MS" \
            --json --store "$STORE" </dev/null)
        sed -E 's/.*"allowed":(true|false).*"remaining":([0-9]+),"retry_after_ms":([0-9]+),"reset_after_ms":([0-9]+).*/\1 \2 \3 \4/' <<<"$j" |
            awk -v i="$i" '{ printf "hit %d: %s remaining=%s retry_after_ms=%s reset_after_ms=%s\n",
                             i, $1 == "true" ? "allowed" : "refused", $2, $3, $4 }' >>"$TMP/ref"
    done
    ref_ms=$(($(now_ms) - t0))
}

# same_decisions REF GOT TOL: prints nothing if the lines of GOT (a pass of
# an example, "VIA " stripped) decide as those of REF: the same verdict and
# remaining, retry_after_ms and reset_after_ms within TOL ms, and as many
# lines; else what differs.
same_decisions() {
    awk -v tol="$3" '
        function num(s) { sub(/^[a-z_]*=/, "", s); return s + 0 }
        function far(a, b) { return a - b > tol || b - a > tol }
        NR == FNR { ref[FNR] = $0; n = FNR; next }
        { got[FNR] = $0; m = FNR }
        END {
            if (m != n) print "want " n " lines, got " m
            for (i = 1; i <= n && i <= m; i++) {
                split(ref[i], r, " "); split(got[i], g, " ")
                if (r[3] != g[3] || r[4] != g[4] || far(num(r[5]), num(g[5])) ||
                    far(num(r[6]), num(g[6])) || g[1] != "hit" || g[2] != i ":")
                    print "want: " ref[i] "\n got: " got[i]
            }
        }' "$1" "$2"
}

# peek_line ID ALGO: what the library's peek answers for the key of ID.
peek_line() {
    "$SLUICE" peek "$1" --algo "$2" --max "$EX_MAX" --window "$EX_WINDOW_MS" \
        --json --store "$STORE" </dev/null |
        sed -E 's/.*"allowed":(true|false).*"remaining":([0-9]+),.*/allowed=\1 remaining=\2/'
}

# compare_example NAME VIAS ALGO CMD...: runs CMD 127.0.0.1 PORT ID ALGO MAX
# WINDOW_MS N VIAS on a fresh ID (with '{', '}' and '%', which the library
# escapes in its keys) and checks each of its passes (fcall, module, or
# both) against the library's decisions on a fresh key of its own, then
# that the library's peek finds the example's key spent as its own.
compare_example() {
    local name=$1 vias=$2 algo=$3 id ref_id t0 ex_ms tol via diff
    shift 3
    id="ex:$name:{$algo}%"
    ref_id="ref:$name:$algo"
    ref_run "$ref_id" "$algo"
    t0=$(now_ms)
    # fcall.sh makes the one pass, fcall, and takes no VIAS.
    local passes=("$vias")
    [ "$name" = fcall.sh ] && passes=()
    "$@" 127.0.0.1 "$port" "$id" "$algo" "$EX_MAX" "$EX_WINDOW_MS" "$EX_N" "${passes[@]}" \
        >"$TMP/got" 2>"$TMP/got.err"
    local rc=$?
    ex_ms=$(($(now_ms) - t0))
    # Two runs that each took at most T ms see waits at most T ms apart.
    tol=$((ref_ms + ex_ms + 2))
    if [ "$rc" -ne 0 ]; then
        fail "$name $algo runs" "exit $rc: $(cat "$TMP/got.err")"
        return
    fi
    for via in $( [ "$vias" = both ] && echo fcall module || echo "$vias"); do
        sed -n "s/^$via //p" "$TMP/got" >"$TMP/pass"
        diff=$(same_decisions "$TMP/ref" "$TMP/pass" "$tol")
        if [ -z "$diff" ]; then
            pass "$name $algo, $via: the library's $EX_N decisions ($(grep -c allowed "$TMP/pass") allowed, within $tol ms)"
        else
            fail "$name $algo, $via: the library's decisions" "$diff"
        fi
    done
    # The example's key is the library's key for the id: spent as its own.
    diff=$(peek_line "$id" "$algo")
    if [ "$diff" = "$(peek_line "$ref_id" "$algo")" ] && [ -n "$diff" ]; then
        pass "$name $algo: the library's peek on the example's id finds it spent ($diff)"
    else
        fail "$name $algo: the library's peek on the example's id" \
             "got $diff, the library's own key: $(peek_line "$ref_id" "$algo")"
    fi
}
