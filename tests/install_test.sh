#!/usr/bin/env bash
#
# install_test.sh - `cmake --install` into a temporary prefix, then the
# README's C example built against it with pkg-config, shared and static,
# and run, and each installed header built alone. Proves the install
# target, sluice.pc and the example together.
#
# Usage: bash tests/install_test.sh PATH-TO-SLUICE (in BUILD/cli/sluice)
set -u
SLUICE=${1:?usage: install_test.sh PATH-TO-SLUICE}
BUILD=$(cd "$(dirname "$SLUICE")/.." && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
check() {
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS: $1"
    else
        failed=$((failed + 1)); echo "FAIL: $1"; cat "$TMP/log" 2>/dev/null
    fi
}

cmake --install "$BUILD" --prefix "$TMP/prefix" >"$TMP/log" 2>&1
check "cmake --install into a temporary prefix" $?
# Every public header of the source tree: sluice.h and include/sluice/*.h.
for f in $(cd "$SRC" && ls include/sluice.h include/sluice/*.h) bin/sluice; do
    [ -e "$TMP/prefix/$f" ]
    check "installed $f" $?
done
pc=$(find "$TMP/prefix" -name sluice.pc | head -1)
[ -n "$pc" ]
check "installed sluice.pc" $?
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir sluice)

# A sanitizer build's library needs the same sanitizer in the program.
san=$(sed -n 's/^SLUICE_SANITIZE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
CFLAGS_SAN=${san:+-fsanitize=$san}

# Each installed header, included alone, compiles with pkg-config's flags.
for h in $(cd "$TMP/prefix/include" && ls sluice.h sluice/*.h); do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$TMP/alone.c"
    cc -std=c11 -Wall -Werror "$TMP/alone.c" $(pkg-config --cflags sluice) \
        -o "$TMP/alone" >"$TMP/log" 2>&1
    check "<$h> alone builds against the installed tree" $?
done

# The first C block (the blocking example; the async one needs libuv).
awk '/^```c$/ && !done {on = 1; next} on && /^```$/ {on = 0; done = 1} on' \
    "$SRC/README.md" >"$TMP/example.c"
[ -s "$TMP/example.c" ]
check "the README has a C example" $?

cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags --libs sluice) \
    -o "$TMP/shared" >"$TMP/log" 2>&1
check "the example builds against the shared library (pkg-config)" $?
LD_LIBRARY_PATH=$libdir "$TMP/shared" >"$TMP/out" 2>&1
check "the example runs (shared): $(cat "$TMP/out")" $?
grep -q '^admitted, 99 left$' "$TMP/out"
check "the example admits, with 99 left" $?

cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags sluice) \
    "$libdir/libsluice.a" $(pkg-config --libs-only-l --libs-only-other hiredis openssl) \
    -pthread -o "$TMP/static" >"$TMP/log" 2>&1
check "the example builds against the static library" $?
"$TMP/static" >"$TMP/out" 2>&1
check "the example runs (static): $(cat "$TMP/out")" $?

echo "install_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
