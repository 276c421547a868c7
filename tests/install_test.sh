#!/usr/bin/env bash
#
# install_test.sh - `cmake --install` into a temporary prefix, moved once
# installed (an install must not remember where it was made), then, with no
# LD_LIBRARY_PATH:
#   - each installed header built alone, and every installed program and
#     library finding every library it needs;
#   - sluice.pc naming every algorithm the installed library knows;
#   - the README's C example built against it with pkg-config (shared,
#     with -Wl,-rpath as the docs show; static) and with a CMake project's
#     find_package(sluice CONFIG) (sluice::sluice, sluice::sluice_static),
#     and run;
#   - the installed CLI run, against a redis-server this test starts;
#   - the installed sluice.so (mode 0755) loaded into that server with
#     --loadmodule, and into another with MODULE LOAD.
# The server and redis-cli are the build under test: $SLUICE_TEST_SERVER
# and $SLUICE_TEST_CLI (scripts/test_binaries.sh).
#
# Usage: bash tests/install_test.sh PATH-TO-SLUICE (in BUILD/cli/sluice)
set -u
SLUICE=${1:?usage: install_test.sh PATH-TO-SLUICE}
BUILD=$(cd "$(dirname "$SLUICE")/.." && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
passed=0
failed=0
server_pid=
. "$SRC/tests/cli/lib/cli_helpers.sh"
trap 'stop_pid "$server_pid"; rm -rf "$TMP"' EXIT
unset LD_LIBRARY_PATH
use_test_binaries install_test

# ok NAME STATUS: passes if STATUS is 0, else fails showing $TMP/log. (A
# NAME with a $(...) in it sets $?: such a caller saves its status first.)
ok() {
    if [ "$2" -eq 0 ]; then
        pass "$1"
    else
        fail "$1" "$(cat "$TMP/log" 2>/dev/null)"
    fi
}

# cache VAR: the build's CMakeCache.txt value of VAR.
cache() {
    sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"
}

# ---- The install ------------------------------------------------------------------

cmake --install "$BUILD" --prefix "$TMP/staged" >"$TMP/log" 2>&1
ok "cmake --install into a temporary prefix" $?
mv "$TMP/staged" "$TMP/prefix"
prefix=$TMP/prefix
# Every public header of the source tree: sluice.h and include/sluice/*.h.
for f in $(cd "$SRC" && ls include/sluice.h include/sluice/*.h) bin/sluice; do
    [ -e "$prefix/$f" ]
    ok "installed $f" $?
done
pc=$(find "$prefix" -name sluice.pc | head -1)
[ -n "$pc" ]
ok "installed sluice.pc" $?
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir sluice)
[ "$(cd "$libdir" && pwd -P)" = "$(cd "$prefix/$(cache CMAKE_INSTALL_LIBDIR)" && pwd -P)" ]
ok "sluice.pc's libdir is where the prefix was moved to: $libdir" $?
# (-I: the binaries name their sources, in their debug information.)
grep -rlI -e "$BUILD" -e "$TMP/staged" "$prefix" >"$TMP/log" 2>&1
[ $? -eq 1 ]
ok "no installed text file (.pc, CMake package) names the build or the first prefix" $?

# Every installed ELF file finds every library it needs (ldd, no
# LD_LIBRARY_PATH): the CLI, the shared library, the module.
while IFS= read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    ldd "$f" >"$TMP/log" 2>&1
    ! grep -q 'not found' "$TMP/log"
    ok "${f#"$prefix"/} finds every library it needs" $?
done < <(find "$prefix" -type f)

# A sanitizer build's library needs the same sanitizer in the program.
san=$(cache SLUICE_SANITIZE)
CFLAGS_SAN=${san:+-fsanitize=$san}

# Each installed header, included alone, compiles with pkg-config's flags.
for h in $(cd "$prefix/include" && ls sluice.h sluice/*.h); do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$TMP/alone.c"
    cc -std=c11 -Wall -Werror "$TMP/alone.c" $(pkg-config --cflags sluice) \
        -o "$TMP/alone" >"$TMP/log" 2>&1
    ok "<$h> alone builds against the installed tree" $?
done

# ---- sluice.pc names every algorithm ----------------------------------------------------

cat >"$TMP/algos.c" <<'EOF'
#include <sluice.h>
#include <stdio.h>

int main(void)
{
    for (unsigned i = 0; i < sluice_algo_count(); i++)
        printf("%s\n", sluice_algo_name((sluice_algo)i));
    return 0;
}
EOF
cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/algos.c" $(pkg-config --cflags --libs sluice) \
    -Wl,-rpath,"$libdir" -o "$TMP/algos" >"$TMP/log" 2>&1 &&
    "$TMP/algos" >"$TMP/algo_names" 2>"$TMP/log" && [ -s "$TMP/algo_names" ]
st=$?; ok "the installed library names its algorithms: $(paste -sd' ' "$TMP/algo_names")" $st
description=$(sed -n 's/^Description: //p' "$pc")
while IFS= read -r algo; do
    [[ " $description " =~ [\ \(]$algo[,\)] ]]
    ok "sluice.pc's Description names $algo" $?
done <"$TMP/algo_names"

# ---- The README's C example, with pkg-config -------------------------------------------

# The first C block (the blocking example; the async one needs libuv).
awk '/^```c$/ && !done {on = 1; next} on && /^```$/ {on = 0; done = 1} on' \
    "$SRC/README.md" >"$TMP/example.c"
[ -s "$TMP/example.c" ]
ok "the README has a C example" $?

# run_example NAME PROGRAM: PROGRAM runs, with no LD_LIBRARY_PATH, and says
# "admitted, 99 left".
run_example() {
    "$2" >"$TMP/log" 2>&1 && grep -qx 'admitted, 99 left' "$TMP/log"
    st=$?; ok "the example runs ($1): $(head -n 1 "$TMP/log")" $st
}

# Without an rpath, a prefix install's libsluice.so is not found (unless
# ldconfig knows another one): that is why the docs show -Wl,-rpath.
cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags --libs sluice) \
    -o "$TMP/norpath" >"$TMP/log" 2>&1
ok "the example builds against the shared library (pkg-config)" $?
"$TMP/norpath" >"$TMP/log" 2>&1
if ldd "$TMP/norpath" | grep -q 'libsluice.so.0 => /'; then
    echo "SKIP: a libsluice.so.0 outside the prefix is known to the loader" \
         "($(ldd "$TMP/norpath" | grep libsluice)): the check that an" \
         "rpath is needed is skipped"
else
    grep -q 'libsluice.so.0: cannot open' "$TMP/log"
    st=$?; ok "without -Wl,-rpath it does not find libsluice.so.0: $(head -n 1 "$TMP/log")" $st
fi
LD_LIBRARY_PATH=$libdir "$TMP/norpath" >"$TMP/log" 2>&1 &&
    grep -qx 'admitted, 99 left' "$TMP/log"
ok "the example runs with LD_LIBRARY_PATH=\$libdir" $?

cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags --libs sluice) \
    -Wl,-rpath,"$(pkg-config --variable=libdir sluice)" -o "$TMP/shared" >"$TMP/log" 2>&1
ok "the example builds with -Wl,-rpath,\$(pkg-config --variable=libdir sluice)" $?
run_example "shared, rpath" "$TMP/shared"

cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags sluice) \
    "$libdir/libsluice.a" $(pkg-config --libs-only-l --libs-only-other hiredis openssl) \
    -pthread -o "$TMP/static" >"$TMP/log" 2>&1
ok "the example builds against the static library" $?
run_example "static" "$TMP/static"
cc -std=c11 -Wall -Werror $CFLAGS_SAN "$TMP/example.c" $(pkg-config --cflags sluice) \
    -Wl,-Bstatic $(pkg-config --libs-only-L sluice) -lsluice -Wl,-Bdynamic \
    $(pkg-config --static --libs-only-l --libs-only-other sluice | sed 's/-lsluice//') \
    -o "$TMP/static_pc" >"$TMP/log" 2>&1
ok "the example builds static from pkg-config --static's Requires.private and Libs.private" $?
run_example "static, pkg-config --static" "$TMP/static_pc"

# ---- The README's C example, with find_package(sluice CONFIG) ------------------------------

mkdir -p "$TMP/proj"
cp "$TMP/example.c" "$TMP/proj/example.c"
cat >"$TMP/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(sluice_consumer LANGUAGES C)
find_package(sluice 0.1 CONFIG REQUIRED COMPONENTS shared static)
add_executable(example_shared example.c)
target_link_libraries(example_shared PRIVATE sluice::sluice)
add_executable(example_static example.c)
target_link_libraries(example_static PRIVATE sluice::sluice_static)
EOF
cmake -S "$TMP/proj" -B "$TMP/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$CFLAGS_SAN" -DCMAKE_EXE_LINKER_FLAGS="$CFLAGS_SAN" \
    >"$TMP/log" 2>&1 &&
    cmake --build "$TMP/proj/build" >>"$TMP/log" 2>&1
ok "the example builds with find_package(sluice CONFIG): sluice::sluice, sluice::sluice_static" $?
readelf -d "$TMP/proj/build/example_shared" >"$TMP/log" 2>&1
grep -E 'R(UN)?PATH' "$TMP/log" | grep -qF "[$prefix/$(cache CMAKE_INSTALL_LIBDIR)]"
st=$?; ok "CMake's build RPATH names the prefix's $(basename "$libdir")" $st
run_example "find_package, sluice::sluice" "$TMP/proj/build/example_shared"
run_example "find_package, sluice::sluice_static" "$TMP/proj/build/example_static"

# ---- The installed CLI and module, against a server -------------------------------------

port=$((41000 + $$ % 2000))
module=$prefix/$(cache CMAKE_INSTALL_LIBDIR)/sluice/sluice.so
load_module=
if [ "$(cache SLUICE_MODULE)" = OFF ]; then
    echo "SKIP: the module: this build has none (-DSLUICE_MODULE=OFF)"
elif [ "$(stat -c %a "$module" 2>&1)" != 755 ]; then
    fail "the installed module is mode 0755" "$(ls -l "$module" 2>&1)"
elif nm -D --undefined-only "$module" | grep -q '__[a-z]*san_'; then
    # The build filters sanitizers out of the module (CMakeLists.txt,
    # sluice_add_module): a sanitizer's runtime must be loaded first.
    echo "SKIP: loading the module: it was built with a sanitizer, whose" \
         "runtime a server not built with it cannot load"
else
    pass "the installed module is mode 0755: ${module#"$prefix"/}"
    load_module=$module
fi
if [ -n "$load_module" ] &&
   ! "$SERVER" --version | grep -Eq 'v=([7-9]|[1-9][0-9])\.'; then
    echo "SKIP: loading the module: it needs Redis 7.0+ or Valkey" \
         "($("$SERVER" --version))"
    load_module=
fi

# start NAME ARGS...: starts $SERVER on $port with ARGS; on failure ends
# the test.
start() {
    local name=$1
    shift
    if ! spawn_free_server "$port" "$TMP/server.log" "$@"; then
        server_pid=$spawned_pid
        fail "$name" "$(cat "$TMP/server.log")"
        echo "install_test: $passed passed, $failed failed"
        exit 1
    fi
    port=$spawned_port
    server_pid=$spawned_pid
    pass "$name: $(server_version "$port")"
}

# expect_reply NAME EXPECTED ARGS...: redis-cli ARGS answers EXPECTED (its
# lines joined by spaces).
expect_reply() {
    local name=$1 expected=$2 reply
    shift 2
    reply=$("$CLI" -p "$port" "$@" 2>&1 | tr -d '\r' | paste -sd' ')
    expect_eq "$name: $expected" "$expected" "$reply"
}

if [ -n "$load_module" ]; then
    start "a server starts with --loadmodule ${module#"$prefix"/}" \
        --loadmodule "$module"
    expect_reply "SLUICE.HIT, admitted" "1 0 0 60000" \
        SLUICE.HIT install:fixed fixed 1 60000
    reply=$("$CLI" -p "$port" SLUICE.HIT install:fixed fixed 1 60000 | head -n 1)
    expect_eq "SLUICE.HIT again, refused" 0 "$reply"
    # Why the docs name enable-module-command: it is "no" by default.
    "$CLI" -p "$port" MODULE LOAD "$module" >"$TMP/log" 2>&1
    grep -q 'enable-module-command' "$TMP/log"
    st=$?; ok "MODULE LOAD is refused by default: $(head -n 1 "$TMP/log" | cut -c 1-60)..." $st
else
    start "a server starts (without the module)"
fi

# The installed CLI, with no LD_LIBRARY_PATH: one unit a minute (a window
# that no second hit can outlast), so the second hit is refused (exit 1).
"$prefix/bin/sluice" --help >"$TMP/log" 2>&1
ok "bin/sluice --help" $?
store=valkey://127.0.0.1:$port
run_cli_hit() {
    "$prefix/bin/sluice" hit install-cli --algo fixed --max 1 --window 1m \
        --store "$store" >"$TMP/log" 2>&1
    st=$?
    [ "$st" -eq "$1" ]
    st=$?; ok "bin/sluice hit: exit $1 ($(head -n 1 "$TMP/log"))" $st
}
run_cli_hit 0
run_cli_hit 1
stop_pid "$server_pid"
server_pid=

if [ -n "$load_module" ]; then
    start "a server starts with --enable-module-command yes" \
        --enable-module-command yes
    expect_reply "MODULE LOAD ${module#"$prefix"/}" OK MODULE LOAD "$module"
    expect_reply "SLUICE.HIT after MODULE LOAD" "1 1 0 500" \
        SLUICE.HIT install:gcra gcra 2 1000
    stop_pid "$server_pid"
    server_pid=
fi

echo "install_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
