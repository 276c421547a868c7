#!/usr/bin/env bash
# sixth_algo.sh - keeps CONTRIBUTING.md's "Adding an algorithm" true: in a
# throwaway copy of the tree, it runs CONTRIBUTING.md's own recipe blocks (each
# ```sh block under a line "<!-- scripts/sixth_algo.sh runs the block below
# -->"), and tests what each made. The first makes a sixth algorithm as a
# copy of the fixed window, then the copy is built and its unit, server and
# cli suites run; the second takes away its optional module glue, then the
# copy is built again and its server suite runs (what an algorithm without
# glue does). It edits nothing the blocks do not: if an algorithm ever needs
# a step CONTRIBUTING.md does not give, this fails, and it (or the tree)
# is what to fix.
#
# Usage: scripts/sixth_algo.sh [WORK-DIR] (default: a mktemp -d folder,
# removed afterwards; a WORK-DIR given is kept, for reading). Run by
# scripts/test.sh after its three builds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

if [ $# -gt 0 ]; then
    work=$1
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
tree=$work/tree
rm -rf "$tree"
mkdir -p "$tree"

# ---- A copy of the tree, without build folders --------------------------------

if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # The files git knows of and the new ones it does not ignore, as they
    # are in the working tree (edits included).
    git -C "$root" ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            [ -e "$f" ] && printf '%s\0' "$f"
        done |
        tar --null -T - -cf - | tar -xf - -C "$tree"
else
    tar --exclude='./build*' -cf - . | tar -xf - -C "$tree"
fi
# In the copy, git shows afterwards what the recipe changed.
git -C "$tree" init -q
git -C "$tree" add -A
git -C "$tree" -c user.name=sixth_algo -c user.email=sixth_algo@localhost \
    commit -q -m "the tree before the recipe"

# ---- CONTRIBUTING.md's recipe, as written ---------------------------------

# recipe_block N: the Nth block CONTRIBUTING.md marks for this script, into
# $work/recipe-N.sh; fails if there is none.
recipe_block() {
    awk -v want="$1" '
        /^<!-- scripts\/sixth_algo.sh runs the block below -->$/ { n++; armed = n == want; next }
        armed && /^```sh$/ { on = 1; next }
        on && /^```$/ { exit }
        on { print }' "$root/CONTRIBUTING.md" >"$work/recipe-$1.sh"
    [ -s "$work/recipe-$1.sh" ] ||
        { echo "sixth_algo: CONTRIBUTING.md has no recipe block $1 to run" >&2; exit 1; }
}

# run_block N: runs block N in the copy, as it is written, and shows what
# it changed.
run_block() {
    recipe_block "$1"
    echo "== CONTRIBUTING.md's recipe, block $1, run in $tree:"
    sed 's/^/    /' "$work/recipe-$1.sh"
    (cd "$tree" && bash -euo pipefail "$work/recipe-$1.sh")
    echo "== what it changed:"
    git -C "$tree" add -A
    git -C "$tree" status --short | sed 's/^/    /'
    git -C "$tree" -c user.name=sixth_algo -c user.email=sixth_algo@localhost \
        commit -q -m "block $1"
}

# build: builds the copy (RelWithDebInfo), showing the end of the log if
# it fails.
build() {
    echo "== build (RelWithDebInfo)"
    cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$tree/build" -j"$jobs" >"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
}

# suite LABELS: ctest -L LABELS in the copy.
suite() {
    echo "== ctest -L '$1'"
    (cd "$tree/build" && ctest -j"$jobs" -L "$1" -LE known-failing \
        --output-on-failure)
}

# ---- 1. A sixth algorithm -----------------------------------------------------

run_block 1
build
# The new algorithm is there: the sixth value, under its public name.
cli=$tree/build/cli/sluice
"$cli" hit --help | grep -q 'fixed-two' ||
    { echo "sixth_algo: 'sluice hit --help' does not list fixed-two" >&2; exit 1; }
"$cli" hit k --algo fixed-two --max 1 --window 1s >/dev/null ||
    { echo "sixth_algo: 'sluice hit --algo fixed-two' fails" >&2; exit 1; }
"$cli" demo | grep -q '^fixed-two ' ||
    { echo "sixth_algo: 'sluice demo' has no row for fixed-two" >&2; exit 1; }
suite 'unit|server|cli'

# ---- 2. The same without its module glue --------------------------------------

run_block 2
build
suite server
echo "sixth_algo: CONTRIBUTING.md's recipe made a sixth algorithm that passes, with and without its glue"
