#!/usr/bin/env bash
#
# man_page_test.sh - docs/sluice.1, the manual page sluice(1), and its
# reference docs/cli.md: the page renders without a warning (groff -man -ww,
# and man --warnings when man-db is there); it has the sections a manual
# page has, SLUICE_STORE under ENVIRONMENT and the exit codes 0 to 3; its
# version is the program's; and every command, algorithm and option that
# the program's help texts name is in the page and in docs/cli.md, so that
# neither drifts from the CLI. Then 'cmake --install' of the build into a
# temporary prefix installs the page to share/man/man1 and the bash
# completion to share/bash-completion/completions. Needs groff (Debian's
# groff-base); no server.
#
# Usage: bash tests/cli/man_page_test.sh PATH-TO-SLUICE (in BUILD/cli/sluice)
#
# Every check prints PASS or FAIL; the last line is
# "man_page_test: N passed, M failed", and the exit status is non-zero if
# any check failed.

set -u

SLUICE=${1:?usage: man_page_test.sh PATH-TO-SLUICE}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$SLUICE")/.." && pwd)
PAGE=$SRC/docs/sluice.1
REF=$SRC/docs/cli.md
passed=0
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset SLUICE_STORE

# pass and fail, shared with the other script tests.
. "$SRC/tests/cli/lib/cli_helpers.sh"

# ---- It renders ------------------------------------------------------------------

if ! command -v groff >/dev/null 2>&1; then
    fail "groff is installed (apt-get install -y groff-base)"
    echo "man_page_test: $passed passed, $failed failed"
    exit 1
fi
groff -man -ww -z "$PAGE" 2>"$TMP/warn"
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$TMP/warn" ]; then
    pass "groff -man -ww renders it without a warning"
else
    fail "groff -man -ww renders it without a warning" "exit $rc: $(cat "$TMP/warn")"
fi
if command -v man >/dev/null 2>&1; then
    man --warnings -l "$PAGE" >/dev/null 2>"$TMP/warn"
    if [ ! -s "$TMP/warn" ]; then
        pass "man --warnings -l renders it without a warning"
    else
        fail "man --warnings -l renders it without a warning" "$(cat "$TMP/warn")"
    fi
else
    echo "SKIP: man --warnings (no man-db)"
fi
# The text a reader sees, plain (-P-cbou: no overstriking, so no col(1)),
# on wide lines.
groff -man -Tascii -P-cbou -rLL=300n "$PAGE" 2>/dev/null >"$TMP/page"
if [ "$(wc -l <"$TMP/page")" -gt 100 ]; then
    pass "it renders to $(wc -l <"$TMP/page") lines of text"
else
    fail "it renders to text" "$(head -n 20 "$TMP/page")"
fi

# ---- Its sections ---------------------------------------------------------------

for section in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS ENVIRONMENT \
               "EXIT STATUS" EXAMPLES FILES "SEE ALSO"; do
    if grep -qx "$section" "$TMP/page"; then
        pass "section $section"
    else
        fail "section $section" "$(grep -E '^[A-Z][A-Z ]+$' "$TMP/page")"
    fi
done
# section NAME: the lines of section NAME, up to the next heading.
section() {
    awk -v s="$1" '$0 == s { on = 1; next } /^[A-Z][A-Z ]+$/ { on = 0 } on' "$TMP/page"
}
if section ENVIRONMENT | grep -q '^ *SLUICE_STORE$'; then
    pass "ENVIRONMENT names SLUICE_STORE"
else
    fail "ENVIRONMENT names SLUICE_STORE" "$(section ENVIRONMENT)"
fi
codes=$(section "EXIT STATUS" | grep -E '^ +[0-9]+ ' | awk '{ print $1 }' | tr '\n' ' ')
if [ "$codes" = "0 1 2 3 " ]; then
    pass "EXIT STATUS gives 0, 1, 2 and 3"
else
    fail "EXIT STATUS gives 0, 1, 2 and 3" "found: $codes"
fi
if grep -q '^\.TH SLUICE 1 ' "$PAGE"; then
    pass ".TH names SLUICE in section 1"
else
    fail ".TH names SLUICE in section 1" "$(grep '^\.TH' "$PAGE")"
fi
version=$("$SLUICE" --version)
if grep -q "^\.TH SLUICE 1 .*\"$version\"" "$PAGE"; then
    pass "its version is the program's ($version)"
else
    fail "its version is the program's ($version)" "$(grep '^\.TH' "$PAGE")"
fi

# ---- What the program's help names --------------------------------------------

# The commands, from 'sluice --help' ("  NAME ..." under "Commands:").
commands=$("$SLUICE" --help | awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 }
                                  on && /^  [a-z]/ { print $1 }')
missing=
for c in $commands; do
    section COMMANDS | grep -Eq "^ +$c( |$)" || missing="$missing $c"
    grep -q "^## .*\\b$c\\b" "$REF" || missing="$missing $c(cli.md)"
done
if [ -n "$commands" ] && [ -z "$missing" ]; then
    pass "every command of sluice --help is under COMMANDS and in cli.md ($(echo $commands))"
else
    fail "every command of sluice --help is under COMMANDS and in cli.md" "missing:$missing"
fi

# The algorithms, as 'sluice hit --help' lists them. The docs name the
# five of sluice and send the reader to 'sluice --help' for those of the
# build, so the check is that every algorithm the page's --algo names is
# one the program has (no stale or misspelt name), and that the five it
# names are all there; an algorithm added since (scripts/sixth_algo.sh
# makes one) is reported, not failed.
algos=$("$SLUICE" hit --help |
        awk '/^  --algo ALGO/ { sub(/^  --algo ALGO */, ""); on = 1; print; next }
             on && /^     / { print; next } { on = 0 }' |
        tr -s ', ' '\n\n' | grep -vx -e or -e '')
named=$(section OPTIONS | awk '/^ +--algo ALGO$/ { on = 1; next } on { print; exit }' |
        tr -s ', .' '\n\n\n' | grep -vx -e or -e '')
stale=
for a in $named; do
    printf '%s\n' "$algos" | grep -qx -- "$a" || stale="$stale $a"
done
if [ "$(printf '%s\n' "$named" | grep -c .)" -ge 5 ] && [ -z "$stale" ]; then
    pass "the page's --algo names algorithms the program has ($(echo $named))"
else
    fail "the page's --algo names algorithms the program has" \
         "named: $(echo $named); not in the program:$stale"
fi
missing=
for a in $named; do
    grep -qw -- "$a" "$REF" || missing="$missing $a"
done
if [ -z "$missing" ]; then
    pass "cli.md names them too"
else
    fail "cli.md names them too" "missing:$missing"
fi
for a in $algos; do
    printf '%s\n' "$named" | grep -qx -- "$a" ||
        echo "NOTE: algorithm $a is not named in docs/sluice.1 or docs/cli.md"
done

# The options every command's help names, and the queue's subcommands.
for c in $commands; do
    [ "$c" = help ] && continue
    "$SLUICE" "$c" --help
done >"$TMP/helps" 2>&1
options=$(grep -o -- '--[a-z][a-z-]*' "$TMP/helps" | sort -u)
missing=
for o in $options; do
    grep -q -- "$o\\b" "$TMP/page" || missing="$missing $o"
    grep -q -- "$o\\b" "$REF" || missing="$missing $o(cli.md)"
done
if [ "$(printf '%s\n' "$options" | grep -c .)" -ge 20 ] && [ -z "$missing" ]; then
    pass "every option of the commands' help is in the page and cli.md ($(printf '%s\n' "$options" | grep -c .))"
else
    fail "every option of the commands' help is in the page and cli.md" "missing:$missing"
fi
missing=
for s in add take complete fail retry failed stats set-cap; do
    section COMMANDS | grep -Eq "^ +queue $s( |$)" || missing="$missing $s"
    grep -q "\`$s" "$REF" || missing="$missing $s(cli.md)"
done
if [ -z "$missing" ]; then
    pass "every queue subcommand is under COMMANDS and in cli.md"
else
    fail "every queue subcommand is under COMMANDS and in cli.md" "missing:$missing"
fi

# ---- The install ----------------------------------------------------------------

if cmake --install "$BUILD" --prefix "$TMP/prefix" >"$TMP/install.log" 2>&1; then
    pass "cmake --install into a temporary prefix"
else
    fail "cmake --install into a temporary prefix" "$(tail -n 5 "$TMP/install.log")"
fi
man1=$(find "$TMP/prefix" -path '*/man/man1/sluice.1' | head -n 1)
if [ -n "$man1" ] && cmp -s "$man1" "$PAGE"; then
    pass "the page is installed to ${man1#"$TMP/prefix/"}"
else
    fail "the page is installed to share/man/man1" "$(find "$TMP/prefix" -name 'sluice.1*')"
fi
comp=$TMP/prefix/share/bash-completion/completions/sluice
if [ -f "$comp" ] && cmp -s "$comp" "$SRC/cli/sluice.bash-completion"; then
    pass "the completion is installed to share/bash-completion/completions/sluice"
else
    fail "the completion is installed to share/bash-completion/completions/sluice" \
         "$(find "$TMP/prefix" -path '*completion*')"
fi
if [ -n "$man1" ] && command -v man >/dev/null 2>&1 &&
   MANPATH="$TMP/prefix/share/man" man -w sluice 2>/dev/null | grep -q "$TMP/prefix"; then
    pass "man finds it under the prefix (MANPATH=PREFIX/share/man man sluice)"
elif [ -n "$man1" ] && command -v man >/dev/null 2>&1; then
    fail "man finds it under the prefix" "$(MANPATH="$TMP/prefix/share/man" man -w sluice 2>&1)"
fi

echo "man_page_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
