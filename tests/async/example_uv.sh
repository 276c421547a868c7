#!/usr/bin/env bash
#
# example_uv.sh - examples/async_uv.c, quoted by README, does what README
# says: on the embedded store, 12 hits under 10 a second are 10 allowed,
# then 2 refused with a retry.
#
# Usage: bash tests/async/example_uv.sh PATH-TO-async_uv
set -u
out=$(env -u SLUICE_STORE "${1:?usage: example_uv.sh ASYNC_UV}")
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
echo "PASS: 10 allowed, 2 refused with a retry"
