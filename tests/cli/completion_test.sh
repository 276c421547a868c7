#!/usr/bin/env bash
#
# completion_test.sh - cli/sluice.bash-completion, sourced in bash (its
# 'complete' builtin is there without the bash-completion package): the
# function it registers for "sluice" is called with COMP_WORDS and
# COMP_CWORD set as bash sets them, and COMPREPLY is checked: commands, the
# queue's subcommands, each command's options, --algo's values (asked of the
# sluice under test, so every algorithm it has), --store's schemes and file
# names after --store-file. Needs no server.
#
# Usage: bash tests/cli/completion_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL; the last line is
# "completion_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: completion_test.sh PATH-TO-SLUICE}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# pass and fail, shared with the other script tests.
. "$SRC/tests/cli/lib/cli_helpers.sh"

# shellcheck source=../../cli/sluice.bash-completion
. "$SRC/cli/sluice.bash-completion"

spec=$(complete -p sluice 2>/dev/null)
if [ "$spec" = "complete -F _sluice sluice" ]; then
    pass "sourcing it registers _sluice for sluice"
else
    fail "sourcing it registers _sluice for sluice" "complete -p sluice: $spec"
fi

# complete_words WORD...: completes the last WORD (the one under the
# cursor, "" for a new one) of the command line WORD..., the first being
# the program; prints COMPREPLY sorted, one a line.
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _sluice sluice "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort
}

# expect NAME EXPECTED WORD...: the completion of WORD... is EXPECTED
# (space separated, in any order).
expect() {
    local name=$1 want got
    want=$(printf '%s\n' $2 | sort)
    shift 2
    got=$(complete_words "$@")
    if [ "$got" = "$want" ]; then
        pass "$name: $(echo $got)"
    else
        fail "$name" "for: $*
expected: $(echo $want)
got:      $(echo $got)"
    fi
}

# has NAME WANTED WORD...: the completion holds every word of WANTED.
has() {
    local name=$1 w got missing=
    got=$(complete_words "${@:3}")
    for w in $2; do
        printf '%s\n' "$got" | grep -qx -- "$w" || missing="$missing $w"
    done
    if [ -z "$missing" ]; then
        pass "$name"
    else
        fail "$name" "missing:$missing; got: $(echo $got)"
    fi
}

# ---- Commands ------------------------------------------------------------------

expect "the commands" \
    "hit peek reset ttl replay queue work demo functions help" "$SLUICE" ""
expect "a command from its first letters" "peek" "$SLUICE" pe
expect "the top-level options" "--help --version" "$SLUICE" --
expect "help names the commands" "hit help" "$SLUICE" help h
expect "the queue's subcommands" \
    "add take complete fail retry failed stats set-cap" "$SLUICE" queue ""
expect "a queue subcommand from its first letters" "fail failed" \
    "$SLUICE" queue fa
expect "demo's subcommand" "chat" "$SLUICE" demo ""

# ---- Options per command -------------------------------------------------------

expect "hit's options" \
    "--algo --max --window --cost --burst --limit --json --store --store-file --help" \
    "$SLUICE" hit mykey --
expect "options after an option's value" "--max" \
    "$SLUICE" hit mykey --algo fixed --ma
expect "reset has no --cost" "" "$SLUICE" reset k --co
expect "ttl's options" "--max --json --store --store-file --help" \
    "$SLUICE" ttl q --
expect "replay's options" \
    "--algo --max --window --burst --json --store --store-file --help" \
    "$SLUICE" replay --
expect "queue take's options" "--lease --json --store --store-file --help" \
    "$SLUICE" queue take q --
expect "queue add's options" \
    "--data --lines --delay --json --store --store-file --help" \
    "$SLUICE" queue add q --
expect "queue set-cap's options, past other options' values" "--per" \
    "$SLUICE" queue set-cap q --store valkey://127.0.0.1:1 --max 1 --pe
expect "a --store value is not the subcommand" \
    "--max --per --json --store --store-file --help" \
    "$SLUICE" queue --store valkey://x set-cap q --
has "work's options" \
    "--pattern --exec --concurrency --lease --stalled-limit --count --timeout --give-up-after --max-attempts --backoff --verbose --json --store --store-file" \
    "$SLUICE" work q --
expect "demo chat's options" "--store --store-file --help" \
    "$SLUICE" demo chat --
expect "demo --chat's options" "--store --store-file --help" \
    "$SLUICE" demo --chat --
expect "functions' options" "--load --store --store-file --help" \
    "$SLUICE" functions --
expect "a key is not completed" "" "$SLUICE" hit ""

# ---- Values ---------------------------------------------------------------------

# The algorithms, as the sluice under test lists them (cli_algos in
# tests/cli/lib/cli_helpers.sh reads the same help).
algos=$("$SLUICE" hit --help |
        awk '/^  --algo ALGO/ { sub(/^  --algo ALGO */, ""); on = 1; print; next }
             on && /^     / { print; next } { on = 0 }' |
        tr -s ', ' '\n\n' | grep -vx -e or -e '')
if [ "$(printf '%s\n' "$algos" | grep -c .)" -ge 5 ]; then
    pass "sluice hit --help lists the algorithms ($(echo $algos))"
else
    fail "sluice hit --help lists the algorithms" "$algos"
fi
expect "--algo's values" "$algos" "$SLUICE" hit k --algo ""
expect "--algo's values from their first letters" "sliding-counter sliding-log" \
    "$SLUICE" peek k --algo sl
expect "--algo=VALUE split at '=' (bash's COMP_WORDBREAKS)" "gcra" \
    "$SLUICE" replay --algo = g
expect "--algo=VALUE as one word" "--algo=gcra" "$SLUICE" replay --algo=g
expect "--store's schemes" "valkey:// valkey+cluster:// valkey+sentinel:// valkeys:// valkeys+cluster:// valkeys+sentinel://" \
    "$SLUICE" hit k --store valk
expect "a number has nothing to offer" "" "$SLUICE" hit k --max ""
# An algorithm list without the program (a sluice not on PATH): the five.
expect "--algo's values without a program to ask" \
    "fixed sliding-counter sliding-log gcra compact-log" \
    "$TMP/no-such-sluice" hit k --algo ""

# File names after --store-file, in a folder of our own.
mkdir -p "$TMP/files/sub"
: >"$TMP/files/store.url"
: >"$TMP/files/other"
cd "$TMP/files" || exit 1
expect "--store-file completes file names" "store.url" \
    "$SLUICE" work q --store-file st
expect "--store-file lists a folder's entries" "other store.url sub" \
    "$SLUICE" queue stats q --store-file ""
cd - >/dev/null || exit 1

echo "completion_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
