#!/usr/bin/env bash
#
# example_uv.sh - examples/async_uv.c, quoted by README, does what README
# says: on the embedded store, 12 hits under 10 a second are 10 allowed,
# then 2 refused with a retry.
#
# Usage: bash tests/async/example_uv.sh PATH-TO-async_uv
set -u
check() { # check URL-or-empty: runs the example and checks its 12 lines
out=$(env -u SLUICE_STORE "$EXAMPLE" $1)
rc=$?
echo "$out"
allowed=$(grep -c '^hit .*: allowed' <<<"$out")
refused=$(grep -cE '^hit .*: refused, retry in [1-9][0-9]* ms$' <<<"$out")
if [ "$rc" -ne 0 ] || [ "$allowed" -ne 10 ] || [ "$refused" -ne 2 ] ||
   [ "$(wc -l <<<"$out")" -ne 12 ]; then
    echo "FAIL: exit $rc, $allowed allowed, $refused refused with a retry (want 0, 10, 2)"
    exit 1
fi
grep -q '^hit 11: refused' <<<"$out" && grep -q '^hit 12: refused' <<<"$out" ||
    { echo "FAIL: hits 11 and 12 are not the refused ones"; exit 1; }
echo "PASS: 10 allowed, 2 refused with a retry (${1:-embedded store})"
}
EXAMPLE=${1:?usage: example_uv.sh ASYNC_UV [REDIS-SERVER]}
check "" || exit 1
# And on a private redis-server on loopback, when one is at hand.
server=${2:-${SLUICE_TEST_SERVER:-$(command -v redis-server)}}
[ -n "$server" ] || { echo "no redis-server: the server run is skipped"; exit 0; }
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
"$server" --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/log" >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
done
check "redis://127.0.0.1:$port" || exit 1
