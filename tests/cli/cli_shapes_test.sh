#!/usr/bin/env bash
#
# cli_shapes_test.sh - one JSON shape per concept across the sluice
# commands (a decision, a limit, "limits" always an array of them; a queue
# and its ids), replay --json as JSON Lines, the lines of a --limit request
# refused as a whole (nothing counted), queue stats' max=none apart from a
# cap of 0, options before or after KEY and '--', and SLUICE_STORE honoured
# by every command that takes --store. Against the embedded store and a
# private server ($SLUICE_TEST_SERVER, else redis-server) on an unusual
# loopback port. Every JSON output is parsed by /usr/bin/python3 (Debian's).
#
# Usage: bash tests/cli/cli_shapes_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "cli_shapes_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: cli_shapes_test.sh PATH-TO-SLUICE}
passed=0
failed=0

. "$(dirname "$0")/lib/cli_helpers.sh"
use_test_binaries cli_shapes_test

PY=/usr/bin/python3
if ! [ -x "$PY" ]; then
    echo "FAIL: $PY (Debian's python3) is needed to parse the JSON"
    echo "cli_shapes_test: 0 passed, 1 failed"
    exit 1
fi

TMP=$(mktemp -d)
server_pid=
cleanup() {
    stop_pid "$server_pid"
    rm -rf "$TMP"
}
trap cleanup EXIT

start_server cli_shapes_test 35000
EMQ=shq$$
STORE="valkey://127.0.0.1:$port?prefix=shape$$&emq_prefix=$EMQ&timeout=5000"

# The shapes (cli/cli.h): every JSON line of the last run's stdout must
# parse and be one of them. shape NAME SHAPE: SHAPE is one of
#   decision     {"key","algo", DECISION}
#   all          {"key", DECISION, "limits":[{LIMIT, DECISION}...]}
#   reset        {"key","algo","reset","existed"}
#   reset_all    {"key","limits":[{LIMIT,"existed"}...],"reset","existed"}
#   replay       {"t","key","cost","algo", DECISION}, one per line
# where DECISION is allowed (bool), limit, remaining, retry_after_ms,
# reset_after_ms (ints), counted (bool) and maybe fallback, and LIMIT is
# algo (str), max, window_ms, burst (ints). Extra: PYTHON checks (a
# Python expression over 'd', the object; for replay, each line).
shape() {
    local name=$1 kind=$2 extra=${3:-True}
    if printf '%s\n' "$out" | "$PY" -c '
import json, sys
kind, extra = sys.argv[1], sys.argv[2]
DEC = {"allowed": bool, "limit": int, "remaining": int,
       "retry_after_ms": int, "reset_after_ms": int, "counted": bool}
LIM = {"algo": str, "max": int, "window_ms": int, "burst": int}
def has(d, fields, optional=("fallback",)):
    for k, t in fields.items():
        assert k in d, "no %r in %r" % (k, d)
        assert type(d[k]) is t, "%r is %r, not %s" % (k, d[k], t.__name__)
    extra_keys = set(d) - set(fields) - set(optional)
    assert not extra_keys, "unexpected %r in %r" % (extra_keys, d)
def existed(v):
    assert v is None or type(v) is bool, "existed is %r" % (v,)
lines = [l for l in sys.stdin.read().split("\n") if l]
assert lines, "no output"
if kind != "replay":
    assert len(lines) == 1, "%d lines" % len(lines)
for line in lines:
    d = json.loads(line)
    if kind == "decision":
        has(d, dict(DEC, key=str, algo=str))
    elif kind == "all":
        has(d, dict(DEC, key=str, limits=list))
        assert d["limits"], "empty limits"
        for e in d["limits"]:
            has(e, dict(DEC, **LIM))
    elif kind == "reset":
        has(d, {"key": str, "algo": str, "reset": bool}, ("existed",))
        existed(d["existed"])
    elif kind == "reset_all":
        has(d, {"key": str, "limits": list, "reset": bool}, ("existed",))
        existed(d["existed"])
        for e in d["limits"]:
            has(e, LIM, ("existed",))
            existed(e["existed"])
    elif kind == "replay":
        has(d, dict(DEC, t=int, key=str, cost=int, algo=str))
    else:
        has(d, json.loads(kind), ())
    assert eval(extra), "%s is false for %r" % (extra, d)
' "$kind" "$extra" 2>"$TMP/py"; then
        pass "$name: $(printf '%s' "$out" | head -n 1)"
    else
        fail "$name" "$(cat "$TMP/py")
stdout: $out
stderr: $err"
    fi
}

L=(--algo fixed --max 2 --window 1m)

# ---- 4. One shape per concept ------------------------------------------------------

run hit k "${L[@]}" --json
shape "hit --json: a decision" decision 'd["counted"] and d["allowed"]'
run peek k "${L[@]}" --json
shape "peek --json: the same decision, never counted" decision \
    'not d["counted"] and d["allowed"]'
run hit k --limit fixed:2/1m --limit sliding-log:5/1h --json
shape "hit --limit --json: \"limits\" an array of limits with decisions" all \
    'd["counted"] and len(d["limits"]) == 2 and d["limits"][1]["algo"] == "sliding-log"'
run peek k --limit fixed:2/1m --json
shape "peek --limit --json" all 'not d["counted"]'
run reset k "${L[@]}" --json
shape "reset --json" reset 'd["existed"] is False'
run reset k --algo fixed --json
shape "reset --json, no limit given: existed, as the store says" reset \
    'd["existed"] is False'
run reset k --limit fixed:2/1m --limit gcra:5/1s:2 --json
shape "reset --limit --json: \"limits\" an array of limits too" reset_all \
    'len(d["limits"]) == 2 and d["limits"][1]["burst"] == 2'
run_in '0 a\n1 a\n2 a\n' replay "${L[@]}" --json
shape "replay --json: JSON Lines in the decision's shape" replay \
    'd["counted"] == d["allowed"]'

# On a server: the same shapes, and reset's answer from the store.
run hit s1 "${L[@]}" --json --store "$STORE"
shape "hit --json on a server" decision 'd["remaining"] == 1'
run hit s1 "${L[@]}" --json --store "$STORE"
run hit s1 "${L[@]}" --json --store "$STORE"
shape "a refused hit --json: not counted" decision \
    'not d["allowed"] and not d["counted"] and d["retry_after_ms"] > 0'
run reset s1 "${L[@]}" --json --store "$STORE"
shape "reset --json on a server: it existed" reset 'd["existed"] is True'
run reset s1 "${L[@]}" --json --store "$STORE"
shape "reset --json on a server, again: nothing there" reset \
    'd["existed"] is False'
run hit s2 --limit fixed:1/1m --limit sliding-log:5/1h --store "$STORE"
run reset s2 --limit fixed:1/1m --limit sliding-log:5/1h --json --store "$STORE"
shape "reset --limit --json on a server: per limit" reset_all \
    'd["existed"] is True and all(e["existed"] for e in d["limits"])'
run reset s2 --limit fixed:1/1m --limit sliding-log:5/1h --store "$STORE"
check "reset --limit, again: nothing there" 0 '^reset s2: nothing was there$'

# The queue commands and work: a queue is "queue", a job "id".
Q=(--store "$STORE")
run queue add jq --data one "${Q[@]}" --json
out_add=$out
if printf '%s' "$out_add" | "$PY" -c '
import json,sys; d=json.load(sys.stdin)
assert set(d) == {"queue","id"} and type(d["id"]) is int' 2>"$TMP/py"; then
    pass "queue add --json: {queue, id}"
else
    fail "queue add --json: {queue, id}" "$out_add $(cat "$TMP/py")"
fi
# pyshape NAME KEYS PYTHON: the last output is one JSON object with exactly
# the keys KEYS (space-separated) and PYTHON (over 'd') holds.
pyshape() {
    if printf '%s' "$out" | "$PY" -c '
import json,sys
d=json.loads(sys.stdin.read())
want=set(sys.argv[1].split())
assert set(d) == want, "keys %r, want %r" % (sorted(d), sorted(want))
assert eval(sys.argv[2]), sys.argv[2]' "$2" "${3:-True}" 2>"$TMP/py"; then
        pass "$1: $out"
    else
        fail "$1" "$out $err $(cat "$TMP/py")"
    fi
}
run queue take jq "${Q[@]}" --json
pyshape "queue take --json: a job" "queue status id attempt lease payload" \
    'd["status"] == "job" and d["payload"] == "one"'
id=$(printf '%s' "$out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
lease=$(printf '%s' "$out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["lease"])')
run queue complete jq "$id" "$lease" "${Q[@]}" --json
pyshape "queue complete --json" "queue id outcome" 'd["outcome"] == "done"'
run queue take jq "${Q[@]}" --json
run queue take jq "${Q[@]}" --json
pyshape "queue take --json: empty" "queue status wait_ms" \
    'd["status"] == "empty"'
run queue failed jq "${Q[@]}" --json
pyshape "queue failed --json" "queue failed" 'd["failed"] == []'
run queue retry jq 12345 "${Q[@]}" --json
pyshape "queue retry --json" "queue id retried" 'd["retried"] is False'
run queue stats jq "${Q[@]}" --json
pyshape "queue stats --json" \
    "queue waiting active delayed failed completed max duration_ms count wait_ms" \
    'd["max"] is None'
run ttl jq "${Q[@]}" --json
pyshape "ttl --json" "queue wait_ms" 'd["wait_ms"] == 0'
run queue add wq --data w "${Q[@]}"
run work wq --count 1 --timeout 5s --json "${Q[@]}"
pyshape "work --json" "queue id attempt outcome" 'd["outcome"] == "done"'

# ---- 5. replay --json: the fields of the text columns ------------------------

run_in '0 a\n1 a\n2 a 2\n5 b\n' replay "${L[@]}"
text=$out
run_in '0 a\n1 a\n2 a 2\n5 b\n' replay "${L[@]}" --json
as_text=$(printf '%s\n' "$out" | "$PY" -c '
import json,sys
for l in sys.stdin:
    d=json.loads(l)
    print(d["t"], d["key"], d["cost"], "allowed" if d["allowed"] else "denied",
          d["remaining"], d["retry_after_ms"])')
expect_eq "replay --json: the text columns, field by field" "$text" "$as_text"
expect_eq "replay --json: one object per request" 4 \
    "$(printf '%s\n' "$out" | wc -l | tr -d ' ')"

# ---- 6. A --limit request refused as a whole counts nothing ------------------

run hit r1 --limit fixed:1/1m --store "$STORE"
run hit r1 --limit fixed:1/1m --limit sliding-log:1000/1h --store "$STORE"
check "refused as a whole: the combined line" 1 '^denied remaining=0 limit=1 '
check "refused as a whole: the refusing limit says refuses" 1 \
    '^limit fixed:1/60000ms refuses remaining=0 limit=1 retry_after_ms=[1-9]'
check "refused as a whole: the other says would-admit, not counted" 1 \
    '^limit sliding-log:1000/3600000ms would-admit remaining=999 limit=1000 retry_after_ms=0 reset_after_ms=[0-9]+ \(not counted: the request was refused as a whole\)$'
if printf '%s\n' "$out" | grep -q 'allowed'; then
    fail "refused as a whole: no line says allowed" "$out"
else
    pass "refused as a whole: no line says allowed"
fi
run hit r1 --limit fixed:1/1m --limit sliding-log:1000/1h --store "$STORE" --json
shape "refused as a whole, JSON: nothing counted anywhere" all \
    'not d["allowed"] and not d["counted"] and [e["allowed"] for e in d["limits"]] == [False, True] and not any(e["counted"] for e in d["limits"])'
run peek r1 --limit sliding-log:1000/1h --limit fixed:9/1m --store "$STORE"
check "the log counted neither refused request" 0 \
    '^limit sliding-log:1000/3600000ms allowed remaining=999 '
run hit r2 --limit fixed:5/1m --limit sliding-log:1000/1h --store "$STORE"
check "admitted as a whole: each limit says allowed" 0 \
    '^limit sliding-log:1000/3600000ms allowed remaining=999 '

# ---- 7. queue stats: no cap apart from a cap of 0 ----------------------------

run queue stats cq "${Q[@]}"
check "stats: no cap is max=none" 0 ' max=none duration_ms=0 '
run queue set-cap cq --max 3 --per 1s "${Q[@]}"
check "set-cap --max 3" 0 '^max=3 duration_ms=1000$'
run queue stats cq "${Q[@]}"
check "stats: a cap of 3" 0 ' max=3 duration_ms=1000 '
run queue set-cap cq --max 0 "${Q[@]}"
check "set-cap --max 0 removes the cap" 0 '^max=none \(not limited\)$'
run queue stats cq "${Q[@]}"
check "stats after set-cap --max 0: max=none" 0 ' max=none duration_ms=0 '
# A cap of 0, as another tool (EchoMQ, BullMQ) may write it.
"$CLI" -p "$port" HSET "$EMQ:{cq}:meta" max 0 duration 1000 >/dev/null
run queue stats cq "${Q[@]}"
check "stats: a cap of 0 is max=0, apart from none" 0 ' max=0 duration_ms=1000 '
run queue stats cq "${Q[@]}" --json
pyshape "stats --json: a cap of 0 is 0, not null" \
    "queue waiting active delayed failed completed max duration_ms count wait_ms" \
    'd["max"] == 0 and d["duration_ms"] == 1000'

# ---- 8. Options before or after KEY; '--' ends them ---------------------------

run hit --algo fixed --max 2 --window 1m k
check "options before KEY" 0 '^allowed remaining=1 '
run hit --algo fixed k --max 2 --window 1m
check "options around KEY" 0 '^allowed remaining=1 '
run hit k --limit fixed:2/1m
check "--limit after KEY" 0 '^allowed remaining=1 '
run queue stats --store "$STORE" cq
check "queue: options before QUEUE" 0 '^waiting='
run hit --algo fixed --max 2 --window 1m --json -- -odd
check "a KEY starting with '-' after '--'" 0 '"key":"-odd"'
run hit --limit fixed:2/1m -- --limit
check "a KEY that looks like an option, after '--'" 0 '^allowed remaining=1 '
usage_error "after '--' an option is an operand: named so" \
    "unexpected argument '--algo' after '--' \\(everything after '--' is an operand" \
    hit -- -odd --algo fixed --max 2 --window 1m
usage_error "a KEY starting with '-' without '--' is an unknown option" \
    "unknown option '-odd'" hit -odd --algo fixed --max 2 --window 1m

# ---- 9. SLUICE_STORE is the default --store of every command ------------------

export SLUICE_STORE=$STORE
run hit env1 "${L[@]}"
run hit env1 "${L[@]}"
run peek env1 "${L[@]}"
check "SLUICE_STORE: hit and peek share a server's count" 1 '^denied '
run reset env1 "${L[@]}"
check "SLUICE_STORE: reset" 0 '^reset env1: removed its count$'
run hit env2 --limit fixed:1/1m
run hit env2 --limit fixed:1/1m
check "SLUICE_STORE: hit --limit" 1 '^denied '
run_in '0 env3\n0 env3\n0 env3\n' replay "${L[@]}"
check "SLUICE_STORE: replay runs on the server (paced)" 0 '^0 env3 1 denied '
run queue add envq --data e
check "SLUICE_STORE: queue add" 0 '^[0-9]+$'
run ttl envq
check "SLUICE_STORE: ttl" 0 '^0$'
run queue stats envq
check "SLUICE_STORE: queue stats" 0 '^waiting=1 '
run work envq --count 1 --timeout 5s
check "SLUICE_STORE: work" 0 "^envq [0-9]+ done$"
run functions --load
check "SLUICE_STORE: functions --load" 0 '.'
timeout 120 "$SLUICE" demo chat </dev/null >"$TMP/chat" 2>&1
chat_rc=$?
if [ "$chat_rc" -eq 0 ]; then
    pass "SLUICE_STORE: demo chat ($(head -n 1 "$TMP/chat"))"
else
    fail "SLUICE_STORE: demo chat" "exit $chat_rc: $(tail -n 5 "$TMP/chat")"
fi
for cmdline in "hit k ${L[*]}" "peek k ${L[*]}" "reset k --algo fixed" \
    "ttl q" "queue stats q" "work q --count 1" "demo chat" "functions --load"; do
    # shellcheck disable=SC2086
    SLUICE_STORE='valkey://127.0.0.1:1?no_such_option=1' run $cmdline
    if [ "$rc" -eq 2 ] && grep -q '^sluice: SLUICE_STORE: ' "$TMP/err"; then
        pass "a bad SLUICE_STORE: $cmdline exits 2 naming it"
    else
        fail "a bad SLUICE_STORE: $cmdline exits 2 naming it" "exit $rc; $err"
    fi
done
SLUICE_STORE='valkey://127.0.0.1:1?no_such_option=1' run_in '0 a\n' replay "${L[@]}"
if [ "$rc" -eq 2 ] && grep -q '^sluice: SLUICE_STORE: ' "$TMP/err"; then
    pass "a bad SLUICE_STORE: replay exits 2 naming it"
else
    fail "a bad SLUICE_STORE: replay exits 2 naming it" "exit $rc; $err"
fi
unset SLUICE_STORE

echo "cli_shapes_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
