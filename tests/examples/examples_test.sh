#!/usr/bin/env bash
#
# examples_test.sh - runs every example of examples/ and checks that it
# decides as the C library does, on the same keys:
#   - examples/hit.c is the README's first C block, byte for byte, and its
#     one decision on the embedded store is `sluice hit`'s;
#   - examples/fcall.sh (redis-cli, FCALL), examples/python/hit.py (Debian's
#     python3-redis, FCALL and the module) and examples/node/hit.js (the npm
#     client redis as Debian packages it, FCALL and the module) hit a fresh
#     key 5 times under 3 per minute (fixed, sliding-log, gcra) on a private
#     redis-server; each pass must print what `sluice hit --json` (the C
#     library) answered for the same 5 requests on a fresh key: allowed or
#     refused and the remaining budget exactly, retry_after_ms and
#     reset_after_ms within the time the two runs took. Then `sluice peek`
#     reads the example's key as the library names it and must find it
#     spent as the library's own;
#   - without the library loaded, or without a server, each exits non-zero
#     and says so.
# The server (loopback, an unusual port, a mktemp -d folder, killed by PID)
# loads the built sluice.so and the Functions library. Without a module
# (-DSLUICE_MODULE=OFF: MODULE is "-") the module passes are skipped, and
# said so. The module is built without sanitizers (CMakeLists.txt), so it
# loads into Debian's redis-server in the ASan and TSan builds too.
#
# Usage: bash tests/examples/examples_test.sh SLUICE MODULE|- HIT
set -u
SLUICE=${1:?usage: examples_test.sh SLUICE MODULE|- HIT}
MODULE=${2:?usage: examples_test.sh SLUICE MODULE|- HIT}
HIT=${3:?usage: examples_test.sh SLUICE MODULE|- HIT}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EX=$SRC/examples
passed=0
failed=0
. "$SRC/tests/cli/lib/cli_helpers.sh"
use_test_binaries examples_test
# Debian's node-redis lands in /usr/share/nodejs, where nodesource's node
# does not look (examples/node/hit.js says so too).
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

TMP=$(mktemp -d)
server_pid=
trap 'stop_pid "$server_pid"; rm -rf "$TMP"' EXIT
. "$SRC/tests/examples/lib/compare.sh"

# ---- examples/hit.c: the README's blocking example -------------------------------

awk '/^```c$/ && !done {on = 1; next} on && /^```$/ {on = 0; done = 1} on' \
    "$SRC/README.md" >"$TMP/readme.c"
if [ -s "$TMP/readme.c" ] && cmp -s "$TMP/readme.c" "$EX/hit.c"; then
    pass "examples/hit.c is the README's first C block, byte for byte"
else
    fail "examples/hit.c is the README's first C block" \
         "$(diff "$TMP/readme.c" "$EX/hit.c" | head -n 20)"
fi
# It takes no store URL (NULL: the embedded store), so it runs there alone.
got=$("$HIT" 2>&1)
rc=$?
run hit user:42 --algo sliding-log --max 100 --window 1m --store mem://
want=$(sed -n 's/^allowed remaining=\([0-9]*\) .*/admitted, \1 left/p' <<<"$out")
if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass "examples/hit.c decides as sluice hit on the embedded store: $got"
else
    fail "examples/hit.c decides as sluice hit" "exit $rc: $got; sluice hit: $out"
fi

# ---- A server with the module and the Functions library -----------------------

modargs=()
[ "$MODULE" != - ] && modargs=(--loadmodule "$MODULE")
if spawn_free_server $((29000 + $$ % 2000)) "$TMP/server.log" "${modargs[@]}"; then
    port=$spawned_port
    server_pid=$spawned_pid
else
    fail "a server starts (${modargs[*]:-no module})" "$(cat "$TMP/server.log")"
    echo "examples_test: $passed passed, $failed failed"
    exit 1
fi
STORE="valkey://127.0.0.1:$port?timeout=5000"
pass "the server starts on port $port: $(server_version "$port") ${modargs[*]}"
run functions --load --store "$STORE"
check "the Functions library loads" 0 '^loaded library sluice '
vias=both
if [ "$MODULE" = - ]; then
    vias=fcall
    echo "SKIP: the module passes of hit.py and hit.js: no sluice.so in this build"
fi

# ---- The examples against the C library, per algorithm --------------------------

for algo in fixed sliding-log gcra; do
    compare_example fcall.sh fcall "$algo" bash "$EX/fcall.sh"
    compare_example python/hit.py "$vias" "$algo" /usr/bin/python3 "$EX/python/hit.py"
    compare_example node/hit.js "$vias" "$algo" node "$EX/node/hit.js"
done

# ---- Clear errors -----------------------------------------------------------------

"$CLI" -p "$port" FUNCTION DELETE sluice >/dev/null
examples=("bash $EX/fcall.sh" "/usr/bin/python3 $EX/python/hit.py" "node $EX/node/hit.js")
for ex in "${examples[@]}"; do
    $ex 127.0.0.1 "$port" e-noload fixed 3 60000 1 >"$TMP/o" 2>"$TMP/e"
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'sluice functions --load' "$TMP/e"; then
        pass "${ex##*/examples/} without the library: exit $rc, $(head -n 1 "$TMP/e")"
    else
        fail "${ex##*/examples/} without the library says how to load it" \
             "exit $rc: $(cat "$TMP/o" "$TMP/e")"
    fi
done
# And a server without the module, for the module passes.
stop_pid "$server_pid"
server_pid=
if [ "$MODULE" = - ]; then
    echo "SKIP: hit.py and hit.js on a server without the module: no sluice.so in this build"
elif spawn_free_server "$port" "$TMP/server.log"; then
    port=$spawned_port
    server_pid=$spawned_pid
    for ex in "${examples[@]:1}"; do
        $ex 127.0.0.1 "$port" e-nomod fixed 3 60000 1 module >"$TMP/o" 2>"$TMP/e"
        rc=$?
        if [ "$rc" -ne 0 ] && grep -q 'load it with: redis-server --loadmodule' "$TMP/e"; then
            pass "${ex##*/examples/} without the module: exit $rc, $(head -n 1 "$TMP/e")"
        else
            fail "${ex##*/examples/} without the module says how to load it" \
                 "exit $rc: $(cat "$TMP/o" "$TMP/e")"
        fi
    done
else
    fail "a server without the module starts on port $port" "$(cat "$TMP/server.log")"
fi
stop_pid "$server_pid"
server_pid=
# Port 1 on loopback, where nothing listens (as in exit_codes_test): the
# port just freed may be another test's by now.
for ex in "${examples[@]}"; do
    $ex 127.0.0.1 1 e-down >"$TMP/o" 2>"$TMP/e"
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "no server answers at 127.0.0.1:1\b" "$TMP/e"; then
        pass "${ex##*/examples/} without a server: exit $rc, $(head -n 1 "$TMP/e")"
    else
        fail "${ex##*/examples/} without a server says so" "exit $rc: $(cat "$TMP/o" "$TMP/e")"
    fi
done

echo "examples_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
