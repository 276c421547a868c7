#!/usr/bin/env bash
#
# cli_test.sh - checks the sluice command-line tool.
#
# Usage: bash tests/cli/cli_test.sh PATH-TO-SLUICE
#
# Every check prints PASS or FAIL (with what went wrong); the last line is
# "cli_test: N passed, M failed", and the script exits non-zero if any check
# failed. The expected replay outputs were worked out by hand from the
# semantics in src/algo/*/*.c (see the comments above each trace).

set -u

SLUICE=${1:?usage: cli_test.sh PATH-TO-SLUICE}
TMP=$(mktemp -d)
fake_pid=
trap 'stop_pid "$fake_pid"; rm -rf "$TMP"' EXIT
passed=0
failed=0

# ---- Helpers ------------------------------------------------------------------

# pass, fail, run, run_in, check, usage_error and expect_eq
. "$(dirname "$0")/lib/cli_helpers.sh"

# expect_rc NAME EXPECTED: compares $rc from the last run.
expect_rc() {
    if [ "$rc" -eq "$2" ]; then
        pass "$1 (exit $rc)"
    else
        fail "$1" "exit $rc, expected $2; stderr: $err"
    fi
}

LIMIT=(--algo fixed --max 10 --window 1s)

# ---- Usage errors -------------------------------------------------------------

usage_error "no command" "no command" 
usage_error "unknown command" "unknown command 'frobnicate'" frobnicate
usage_error "unknown option before the command" "unknown option '--frob'" \
    --frob
usage_error "unknown option" "unknown option '--frob'" hit k "${LIMIT[@]}" \
    --frob
usage_error "missing KEY" "missing KEY" hit "${LIMIT[@]}"
usage_error "missing --algo" "missing --algo" hit k --max 10 --window 1s
usage_error "missing --max" "missing --max" hit k --algo fixed --window 1s
usage_error "missing --window" "missing --window" hit k --algo fixed --max 10
usage_error "--max 0" "--max: '0' is out of range 1\.\.9007199254740991" \
    hit k --algo fixed --max 0 --window 1s
usage_error "--max -1" "--max: '-1' is negative" \
    hit k --algo fixed --max -1 --window 1s
usage_error "--max abc" "--max: 'abc' is not a whole number" \
    hit k --algo fixed --max abc --window 1s
usage_error "--max 10x (trailing junk)" "--max: '10x' is not a whole number" \
    hit k --algo fixed --max 10x --window 1s
usage_error "--max +5 (sign)" "--max: '\+5' has a sign" \
    hit k --algo fixed --max +5 --window 1s
usage_error "--max overflow" "--max: '99999999999999999999' is out of range" \
    hit k --algo fixed --max 99999999999999999999 --window 1s
usage_error "--max 2^53 (one past the bound)" \
    "--max: '9007199254740992' is out of range" \
    hit k --algo fixed --max 9007199254740992 --window 1s
usage_error "--max without a value" "--max needs a value" hit k --max
usage_error "--window 0" "--window: .*'0'.*at least 1 ms" \
    hit k --algo fixed --max 10 --window 0
usage_error "--window 1x" "--window: invalid duration '1x'" \
    hit k --algo fixed --max 10 --window 1x
usage_error "--window -1s" "--window: invalid duration '-1s'" \
    hit k --algo fixed --max 10 --window -1s
usage_error "--window overflow" "--window: duration .* too large" \
    hit k --algo fixed --max 10 --window 99999999999999999999h
usage_error "--algo bogus" "--algo: unknown algorithm 'bogus'" \
    hit k --algo bogus --max 10 --window 1s
usage_error "--cost 0" "--cost: '0' is out of range" \
    hit k "${LIMIT[@]}" --cost 0
usage_error "--cost above --max" \
    "--cost: 11 exceeds --max 10.*never be admitted" \
    hit k "${LIMIT[@]}" --cost 11
usage_error "peek --cost above --max" "never be admitted" \
    peek k "${LIMIT[@]}" --cost 11
usage_error "option given twice" "--max is given twice" \
    hit k "${LIMIT[@]}" --max 5
usage_error "two keys" "unexpected argument 'j'" hit k j "${LIMIT[@]}"
usage_error "--json with a value" "--json takes no value" \
    hit k "${LIMIT[@]}" --json=yes
usage_error "sliding-counter max x window over 2^53" \
    "sliding-counter needs max x window_ms <= 2\^53" \
    hit k --algo sliding-counter --max 9007199254740991 --window 1s
usage_error "reset takes no --cost" "unknown option '--cost'" \
    reset k --algo fixed --cost 1
usage_error "replay takes no KEY" "unexpected argument 'k'" \
    replay k "${LIMIT[@]}"
usage_error "replay missing --window" "missing --window" \
    replay --algo fixed --max 10
usage_error "demo takes no argument" "unexpected argument 'now'" demo now
# An empty KEY or QUEUE is refused by every command alike.
for cmd in hit peek reset; do
    usage_error "$cmd: an empty KEY" "^sluice: $cmd: KEY is empty" \
        "$cmd" '' "${LIMIT[@]}"
done
usage_error "ttl: an empty QUEUE" "^sluice: ttl: QUEUE is empty" \
    ttl '' --store valkey://127.0.0.1:1
usage_error "help on an unknown command" "unknown command 'nope'" help nope

# ---- hit, peek, reset ---------------------------------------------------------

run hit user:1 "${LIMIT[@]}"
expect_rc "hit is admitted" 0
expect_eq "hit prints a line of text" \
    "allowed remaining=9 limit=10 retry_after_ms=0 reset_after_ms=1000" "$out"

run hit user:1 "${LIMIT[@]}" --json
expect_rc "hit --json is admitted" 0
expect_eq "hit --json has the fields" \
    '{"key":"user:1","algo":"fixed","allowed":true,"limit":10,"remaining":9,"retry_after_ms":0,"reset_after_ms":1000,"counted":true}' \
    "$out"

run hit user:1 --json --cost 4 --window=250ms --algo=sliding-log --max=10
expect_rc "hit with --opt=value and --cost" 0
expect_eq "hit --cost 4 leaves 6 of 10" \
    '{"key":"user:1","algo":"sliding-log","allowed":true,"limit":10,"remaining":6,"retry_after_ms":0,"reset_after_ms":250,"counted":true}' \
    "$out"

run hit user:1 --algo sliding-counter --max 10 --window 1m --json
expect_rc "hit sliding-counter is admitted" 0
if printf '%s' "$out" | grep -Eq '^\{"key":"user:1","algo":"sliding-counter","allowed":true,"limit":10,"remaining":9,"retry_after_ms":0,"reset_after_ms":[0-9]+,"counted":true\}$'; then
    pass "hit sliding-counter --json has the fields"
else
    fail "hit sliding-counter --json has the fields" "$out"
fi

run peek user:1 "${LIMIT[@]}" --json --cost 10
expect_rc "peek is admitted" 0
expect_eq "peek --json has the fields" \
    '{"key":"user:1","algo":"fixed","allowed":true,"limit":10,"remaining":0,"retry_after_ms":0,"reset_after_ms":1000,"counted":false}' \
    "$out"

run reset user:1 --algo fixed
check "reset with --algo alone: the embedded store held nothing" 0 \
    '^reset user:1: nothing was there$'
run reset user:1 "${LIMIT[@]}"
check "reset on the embedded store: nothing was there" 0 \
    '^reset user:1: nothing was there$'
run reset user:1 "${LIMIT[@]}" --json
expect_eq "reset --json" '{"key":"user:1","algo":"fixed","reset":true,"existed":false}' "$out"
run reset user:1 --algo fixed --json
expect_eq "reset --json with --algo alone" '{"key":"user:1","algo":"fixed","reset":true,"existed":false}' "$out"

# A key with a quote, a backslash, control characters, valid UTF-8 (é) and a
# byte that is not UTF-8 (0xff).
key=$(printf 'a"b\\c\nd\te\303\251\001\377z')
run hit "$key" "${LIMIT[@]}" --json
expect_eq "hit --json escapes the key" \
    $'{"key":"a\\"b\\\\c\\nd\\te\xc3\xa9\\u0001\\ufffdz","algo":"fixed","allowed":true,"limit":10,"remaining":9,"retry_after_ms":0,"reset_after_ms":1000,"counted":true}' \
    "$out"
if command -v python3 >/dev/null 2>&1; then
    if printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["key"] == "a\"b\\c\nd\te\u00e9\x01\ufffdz", d' 2>"$TMP/py"; then
        pass "hit --json output parses as JSON, key intact"
    else
        fail "hit --json output parses as JSON, key intact" "$(cat "$TMP/py")"
    fi
fi

run hit "${LIMIT[@]}" --json -- -dash
expect_eq "a key after -- may start with '-'" \
    '{"key":"-dash","algo":"fixed","allowed":true,"limit":10,"remaining":9,"retry_after_ms":0,"reset_after_ms":1000,"counted":true}' \
    "$out"

run hit k "${LIMIT[@]}" --store nope://x
expect_rc "an unsupported --store is a usage error" 2
if grep -q "nope://x" "$TMP/err"; then
    pass "the --store error names the URL ($err)"
else
    fail "the --store error names the URL" "$err"
fi
run hit k "${LIMIT[@]}" --store 'valkey://:hunter2@127.0.0.1:1?bogus=1'
expect_rc "a malformed valkey:// URL is a usage error" 2
if grep -q "bogus" "$TMP/err" && ! grep -q "hunter2" "$TMP/err"; then
    pass "a store error masks the URL's password ($err)"
else
    fail "a store error masks the URL's password" "$err"
fi
# A short password no longer withholds every URL error: the library masks
# it, and the message says what is wrong.
run hit k "${LIMIT[@]}" --store 'valkey://:e@127.0.0.1:1?bogus=1'
if [ "$rc" -eq 2 ] && grep -q "bogus" "$TMP/err" && ! grep -q "withheld" "$TMP/err"; then
    pass "a URL error with a short password is shown ($err)"
else
    fail "a URL error with a short password is shown" "exit $rc; $err"
fi
# The last resort: a message that quotes the whole password (here by
# chance: the unknown option has its name) is withheld.
run hit k "${LIMIT[@]}" --store 'valkey://:bogus@127.0.0.1:1?bogus=1'
if [ "$rc" -eq 2 ] && grep -q "withheld" "$TMP/err" && ! grep -q "bogus" "$TMP/err"; then
    pass "a message that quotes the whole password is withheld ($err)"
else
    fail "a message that quotes the whole password is withheld" "exit $rc; $err"
fi
# A malformed URL ("valkey:/", the "://" at the end) masks its user name
# and password too: everything before the last '@' past the scheme.
run hit k "${LIMIT[@]}" --store 'valkey:/alice7:hunter2@127.0.0.1://'
if [ "$rc" -eq 2 ] && grep -q "valkey:/\*\*\*@127.0.0.1://" "$TMP/err" &&
    ! grep -q "hunter2\|alice7" "$TMP/err"; then
    pass "a malformed URL masks its user and password ($err)"
else
    fail "a malformed URL masks its user and password" "exit $rc; $err"
fi
# Schemes are case-insensitive: VALKEY:// is a server store (that refuses
# the connection here), MEM:// the embedded one.
run hit k "${LIMIT[@]}" --store 'VALKEY://127.0.0.1:1?timeout=100'
if [ "$rc" -eq 3 ] && grep -q "connect" "$TMP/err" &&
    ! grep -q "unsupported" "$TMP/err"; then
    pass "an upper-case VALKEY:// is a valkey:// store ($err)"
else
    fail "an upper-case VALKEY:// is a valkey:// store" "exit $rc; $err"
fi
run hit k "${LIMIT[@]}" --store 'MEM://'
expect_rc "an upper-case MEM:// is the embedded store" 0
# reset checks DEL's reply: a fake server (tests/tools/fake_server.c) that
# answers DEL with what no DEL answers gives EPROTO and exit 3, never
# "reset"; the integers 0 and 1 are what a DEL of one key answers.
for reply in '+OK\r\n' ':-1\r\n' '*0\r\n' '$3\r\nabc\r\n' ':2\r\n' \
    '$-1\r\n' ':0\r\n' ':1\r\n'; do
    if ! start_fake 25000 "$reply"; then
        fail "the fake server starts (\$SLUICE_FAKE_SERVER)" \
            "$(cat "$TMP/fake.log" 2>&1)"
        break
    fi
    run reset k --algo fixed --store \
        "valkey://127.0.0.1:$fake_port?engine=lua&timeout=1000"
    case $reply in
    :0*)
        check "reset: DEL answering :0 is a reset of nothing" 0 \
            '^reset k: nothing was there$' ;;
    :1*)
        check "reset: DEL answering :1 is a reset of a count" 0 \
            '^reset k: removed its count$' ;;
    *)
        if [ "$rc" -eq 3 ] && [ -z "$out" ] &&
            grep -q "reset: DEL answered .*(EPROTO)" "$TMP/err"; then
            pass "reset: DEL answering ${reply%%\\r*} is EPROTO ($err)"
        else
            fail "reset: DEL answering ${reply%%\\r*} is EPROTO" \
                "exit $rc; out '$out'; $err"
        fi ;;
    esac
    stop_pid "$fake_pid"
    fake_pid=
done
# A password holding '/' and '?' is masked whole.
run hit k "${LIMIT[@]}" --store 'valkey://:hu/nt?er2@127.0.0.1:1?bogus=1'
if [ "$rc" -eq 2 ] && grep -q "an '@' follows the host" "$TMP/err" &&
    ! grep -q "nt?er" "$TMP/err"; then
    pass "a password holding '/' and '?' is masked whole ($err)"
else
    fail "a password holding '/' and '?' is masked whole" "exit $rc; $err"
fi
run hit k "${LIMIT[@]}" --store mem://
expect_rc "--store mem:// works" 0

# ---- The store URL outside argv: SLUICE_STORE and --store-file -----------------------

# Port 1 of loopback refuses connections, so a command that reaches for it
# exits 3 at once, where the embedded store would have admitted (exit 0).
DEAD='valkey://:hunter2pw@127.0.0.1:1?timeout=200'

# no_password NAME: the last run's output never shows the password.
no_password() {
    if grep -q "hunter2pw" "$TMP/out" "$TMP/err"; then
        fail "$1: the password is never shown" "$out
$err"
    else
        pass "$1: the password is never shown"
    fi
}

SLUICE_STORE=$DEAD run hit k "${LIMIT[@]}"
if [ "$rc" -eq 3 ] && grep -q "connect" "$TMP/err"; then
    pass "SLUICE_STORE names the store when --store is not given ($err)"
else
    fail "SLUICE_STORE names the store when --store is not given" \
        "exit $rc; $out $err"
fi
no_password "SLUICE_STORE"
SLUICE_STORE=$DEAD run hit k "${LIMIT[@]}" --store mem://
expect_rc "--store beats SLUICE_STORE" 0
SLUICE_STORE='' run hit k "${LIMIT[@]}"
expect_rc "an empty SLUICE_STORE is as none: the embedded store" 0
SLUICE_STORE='valkey://:hunter2pw@127.0.0.1:1?bogus=1' run hit k "${LIMIT[@]}"
if [ "$rc" -eq 2 ] && grep -q "^sluice: SLUICE_STORE: .*bogus" "$TMP/err"; then
    pass "a bad SLUICE_STORE is named in the message, exit 2 ($err)"
else
    fail "a bad SLUICE_STORE is named in the message" "exit $rc; $err"
fi
no_password "a bad SLUICE_STORE"

SF=$TMP/store.url
# The URL on the first line, with trailing blanks and a CR that are
# dropped (else the timeout option's value would be bad), and a second
# line that is not read.
printf '%s  \r\nnot a URL\n' "$DEAD" >"$SF"
chmod 600 "$SF"
run hit k "${LIMIT[@]}" --store-file "$SF"
if [ "$rc" -eq 3 ] && grep -q "connect" "$TMP/err"; then
    pass "--store-file: the URL on its first line, trailing blanks dropped ($err)"
else
    fail "--store-file: the URL on its first line, trailing blanks dropped" \
        "exit $rc; $out $err"
fi
no_password "--store-file"
printf 'mem://\n' >"$TMP/mem.url"
chmod 600 "$TMP/mem.url"
SLUICE_STORE=$DEAD run hit k "${LIMIT[@]}" --store-file "$TMP/mem.url"
expect_rc "--store-file beats SLUICE_STORE" 0
usage_error "--store and --store-file at once" \
    "hit: --store and --store-file are given both" \
    hit k "${LIMIT[@]}" --store mem:// --store-file "$TMP/mem.url"
printf 'valkey://:hunter2pw@127.0.0.1:1?bogus=1\n' >"$TMP/bad.url"
chmod 600 "$TMP/bad.url"
run hit k "${LIMIT[@]}" --store-file "$TMP/bad.url"
if [ "$rc" -eq 2 ] &&
    grep -q "^sluice: --store-file $TMP/bad.url: .*bogus" "$TMP/err"; then
    pass "a bad URL in --store-file is named with the file ($err)"
else
    fail "a bad URL in --store-file is named with the file" "exit $rc; $err"
fi
no_password "a bad URL in --store-file"

# The mode is checked as ssh checks a key's: no access for group or others.
for mode in 644 640 604 620 602 660; do
    chmod "$mode" "$SF"
    usage_error "--store-file of mode $mode is refused, naming the fix" \
        "'$SF' has mode 0$mode, .*run 'chmod 600 $SF'" \
        hit k "${LIMIT[@]}" --store-file "$SF"
    no_password "--store-file of mode $mode"
done
chmod 400 "$SF"
run hit k "${LIMIT[@]}" --store-file "$SF"
expect_rc "--store-file of mode 400 is taken" 3
chmod 600 "$SF"
usage_error "--store-file of a directory" "'$TMP' is a directory" \
    hit k "${LIMIT[@]}" --store-file "$TMP"
usage_error "--store-file of a missing file" \
    "cannot open '$TMP/nope': No such file" \
    hit k "${LIMIT[@]}" --store-file "$TMP/nope"
: >"$TMP/empty.url"
chmod 600 "$TMP/empty.url"
usage_error "--store-file of an empty file" "first line of '.*' is empty" \
    hit k "${LIMIT[@]}" --store-file "$TMP/empty.url"
printf ' \t\n%s\n' "$DEAD" >"$TMP/blank.url"
chmod 600 "$TMP/blank.url"
usage_error "--store-file whose first line is blank" \
    "first line of '.*' is empty" \
    hit k "${LIMIT[@]}" --store-file "$TMP/blank.url"
printf 'valkey://\000127.0.0.1\n' >"$TMP/nul.url"
chmod 600 "$TMP/nul.url"
usage_error "--store-file whose first line holds a NUL" "holds a NUL byte" \
    hit k "${LIMIT[@]}" --store-file "$TMP/nul.url"
head -c 5000 /dev/zero | tr '\0' a >"$TMP/long.url"
chmod 600 "$TMP/long.url"
usage_error "--store-file whose first line is too long" \
    "longer than 4096 bytes" \
    hit k "${LIMIT[@]}" --store-file "$TMP/long.url"
mkfifo -m 600 "$TMP/fifo.url"
timeout 5 "$SLUICE" hit k "${LIMIT[@]}" --store-file "$TMP/fifo.url" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "'$TMP/fifo.url' is a FIFO" "$TMP/err"; then
    pass "--store-file of a FIFO: refused, not waited on ($(cat "$TMP/err"))"
else
    fail "--store-file of a FIFO: refused, not waited on" \
        "exit $rc; $(cat "$TMP/err")"
fi
usage_error "--store-file needs a value" "--store-file needs a value" \
    hit k "${LIMIT[@]}" --store-file
usage_error "plain demo takes no --store-file" \
    "demo: --store-file is for the chat scenario" demo --store-file "$SF"
usage_error "functions takes --store-file only with --load" \
    "functions: --store-file is only for --load" functions --store-file "$SF"

# Every command that takes --store takes --store-file and SLUICE_STORE:
# each reaches for the dead server (exit 3), none says 'unknown option' or
# 'missing --store' (exit 2), and none shows the password.
for cmdline in "hit k ${LIMIT[*]}" "peek k ${LIMIT[*]}" "reset k --algo fixed" \
    "hit k --limit fixed:10/1s" "ttl q" "replay ${LIMIT[*]}" "queue stats q" \
    "queue add q --data x" "work q --timeout 300ms" "demo chat" \
    "functions --load"; do
    # shellcheck disable=SC2086
    run_in '5 k\n' $cmdline --store-file "$SF"
    if [ "$rc" -eq 3 ] && ! grep -q "hunter2pw" "$TMP/out" "$TMP/err"; then
        pass "$cmdline --store-file: the file's store (exit 3)"
    else
        fail "$cmdline --store-file: the file's store" "exit $rc; $out $err"
    fi
    # shellcheck disable=SC2086
    SLUICE_STORE=$DEAD run_in '5 k\n' $cmdline
    if [ "$rc" -eq 3 ] && ! grep -q "hunter2pw" "$TMP/out" "$TMP/err"; then
        pass "$cmdline with SLUICE_STORE: its store (exit 3)"
    else
        fail "$cmdline with SLUICE_STORE: its store" "exit $rc; $out $err"
    fi
done
usage_error "queue: without any store, the message names all three ways" \
    "missing --store \(.*; or --store-file PATH, or SLUICE_STORE\)" \
    queue stats q

run --version
expect_rc "--version" 0
if printf '%s' "$out" | grep -Eq '^sluice [0-9]+\.[0-9]+\.[0-9]+$'; then
    pass "--version prints the version ($out)"
else
    fail "--version prints the version" "$out"
fi

# ---- Several limits: --limit ALGO:MAX/WINDOW --------------------------------------

run hit k --limit fixed:10/1000 --limit sliding-log:1000/3600000
check "--limit twice: admitted, the least remaining" 0 \
    '^allowed remaining=9 limit=10 retry_after_ms=0 reset_after_ms=3600000$'
check "--limit twice: a line per limit" 0 \
    '^limit sliding-log:1000/3600000ms allowed remaining=999 limit=1000 '
run peek k --limit fixed:10/1s --limit=sliding-counter:5/1m --json
check "--limit with units, in JSON" 0 \
    '^\{"key":"k","allowed":true,"limit":5,"remaining":4,.*"limits":\[\{"algo":"fixed","max":10,"window_ms":1000,'
run reset k --limit fixed:10/1s --limit sliding-log:5/1m
check "reset --limit" 0 '^reset k: nothing was there$'
check "reset --limit: a line per limit" 0 \
    '^limit sliding-log:5/60000ms: nothing was there$'
usage_error "--limit without ':'" "--limit 'fixed10/1s': expected ALGO:MAX/WINDOW" \
    hit k --limit fixed10/1s
usage_error "--limit without '/'" "--limit 'fixed:10': expected ALGO:MAX/WINDOW" \
    hit k --limit fixed:10
usage_error "--limit unknown algorithm" "--limit 'frob:1/1s': unknown algorithm 'frob'" \
    hit k --limit frob:1/1s
usage_error "--limit max 0" "--limit 'fixed:0/1s': MAX '0' is out of range" \
    peek k --limit fixed:0/1s
usage_error "--limit window 0" "--limit 'fixed:1/0': WINDOW: " \
    hit k --limit fixed:1/0
usage_error "--limit bad window" "--limit 'fixed:1/1parsec': WINDOW: " \
    reset k --limit fixed:1/1parsec
usage_error "--limit twice the same algorithm and window" \
    "a second fixed limit over the same window" \
    hit k --limit fixed:1/1s --limit fixed:5/1000
usage_error "--limit with no value" "--limit: missing its value" \
    hit k --limit
usage_error "--limit and --algo" "--algo: not with --limit" \
    hit k --limit fixed:1/1s --algo fixed
usage_error "--limit: --cost above one max" \
    "--cost: 3 exceeds the max of --limit sliding-log:2/1000ms" \
    hit k --limit fixed:5/1s --limit sliding-log:2/1s --cost 3
usage_error "--limit: missing KEY" "missing KEY" hit --limit fixed:1/1s
run hit k --limit gcra:10/1m:2 --limit fixed:5/1s --cost 2
check "--limit gcra with a burst: the burst's worth at once" 0 \
    '^allowed remaining=0 limit=10 '
check "--limit gcra with a burst: its line names the burst" 0 \
    '^limit gcra:10/60000ms:2 allowed remaining=0 '
run hit k --limit gcra:10/1m --limit fixed:5/1s --cost 4
check "--limit gcra without a burst: max at once" 0 \
    '^allowed remaining=1 limit=5 '
usage_error "--limit: --cost above a burst" \
    "--cost: 3 exceeds the burst of --limit gcra:10/60000ms:2" \
    hit k --limit gcra:10/1m:2 --cost 3
usage_error "--limit: burst out of range" "--limit 'gcra:10/1m:11': BURST" \
    hit k --limit gcra:10/1m:11
usage_error "--limit: burst on an algorithm without one" \
    "--limit 'fixed:10/1m:2': " hit k --limit fixed:10/1m:2
seventeen=()
for i in $(seq 1 17); do seventeen+=(--limit "sliding-log:5/${i}s"); done
usage_error "--limit 17 times" "--limit: at most 16 limits" \
    hit k "${seventeen[@]}"
run hit k "${seventeen[@]:0:32}"
check "--limit 16 times" 0 '^allowed remaining=4 limit=5 '

# ---- Help ---------------------------------------------------------------------

for args in "--help" "-h" "help" "help hit" "help --help" "hit --help" \
    "peek --help" "reset --help" "replay --help" "demo --help" "demo -h" \
    "hit k --max 0 --help"; do
    # shellcheck disable=SC2086
    run $args
    if [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q '^Usage: sluice'; then
        pass "sluice $args prints help (exit 0)"
    else
        fail "sluice $args prints help (exit 0)" "exit $rc; $out $err"
    fi
done
run --help
if printf '%s' "$out" | grep -q '3  store error' &&
   printf '%s' "$out" | grep -q '2  usage error' &&
   printf '%s' "$out" | grep -q 'empty store'; then
    pass "--help documents exit codes and the per-process embedded store"
else
    fail "--help documents exit codes and the per-process embedded store" "$out"
fi

# ---- replay: hand-computed traces -------------------------------------------

# max=3 per 100 ms. Blank and comment lines are skipped; keys are separate.
TRACE='# max=3, window=100 ms

0 a
10 a
20 a
30 a
99 a
100 a
110 a
150 b 2
160 b 2
   # an indented comment
250 a
300 c 3
300 c 1
'

# fixed: a's window is [0, 100): full at 20, refused until 100 (retry 70 at
# 30, 1 at 99); a fresh window at 100 (expires 200), another at 250. b's
# window [150, 250) has 1 left at 160, so cost 2 waits 90. c is full at 300
# and waits the whole window.
cat >"$TMP/fixed.expected" <<'EOF'
0 a 1 allowed 2 0
10 a 1 allowed 1 0
20 a 1 allowed 0 0
30 a 1 denied 0 70
99 a 1 denied 0 1
100 a 1 allowed 2 0
110 a 1 allowed 1 0
150 b 2 allowed 1 0
160 b 2 denied 1 90
250 a 1 allowed 2 0
300 c 3 allowed 0 0
300 c 1 denied 0 100
EOF

# sliding-counter, windows aligned at 0, 100, 200...: estimate = cur +
# prev * r / 100 with r = 100 - elapsed, and a request fits iff
# cur + ceil(prev * r / 100) + cost <= 3. a is full at 20 (cur 3). At 30 it
# must wait for the next window, where prev 3 weighs ceil(3r/100) <= 2 once
# r <= 66, at 134: retry 104; at 99, 35. At 100 (prev 3, cur 0) the same
# instant 134 is 34 away, and at 110, 24 (ceil(2.7) = 3 still fills it).
# b at 160 (cur 2): cost 2 fits once ceil(2r/100) <= 1, r <= 50, at 250:
# retry 90. At 250 a's last count (window 0) is two windows old: whole
# budget. c at 300: cur 3, fits at 434: retry 134.
cat >"$TMP/sliding-counter.expected" <<'EOF'
0 a 1 allowed 2 0
10 a 1 allowed 1 0
20 a 1 allowed 0 0
30 a 1 denied 0 104
99 a 1 denied 0 35
100 a 1 denied 0 34
110 a 1 denied 0 24
150 b 2 allowed 1 0
160 b 2 denied 1 90
250 a 1 allowed 2 0
300 c 3 allowed 0 0
300 c 1 denied 0 134
EOF

# sliding-log: an entry at t counts in [t, t + 100). At 30 the entry at 0
# must leave (at 100): retry 70. At 100 it has left, so 10 and 20 are live:
# admitted, remaining 0. At 110 the entry at 10 leaves: admitted again. b's
# two entries at 150 leave at 250: retry 90. At 250 a's entries (20, 100,
# 110) have all left: remaining 2. c, full at 300, waits the whole window.
cat >"$TMP/sliding-log.expected" <<'EOF'
0 a 1 allowed 2 0
10 a 1 allowed 1 0
20 a 1 allowed 0 0
30 a 1 denied 0 70
99 a 1 denied 0 1
100 a 1 allowed 0 0
110 a 1 allowed 0 0
150 b 2 allowed 1 0
160 b 2 denied 1 90
250 a 1 allowed 2 0
300 c 3 allowed 0 0
300 c 1 denied 0 100
EOF
# compact-log answers what sliding-log answers, line for line.
cp "$TMP/sliding-log.expected" "$TMP/compact-log.expected"

# gcra: T = 100/3 = 33 1/3 ms, burst 3; TAT - now is the debt, and a unit
# fits while debt + 33 1/3 <= 100; remaining = floor((100 - debt) / T).
# a: TAT 33 1/3, 66 2/3, 100; at 30 the debt is 70, a unit waits until it
# is 66 2/3: 3 1/3 ms, retry 4. At 99 the debt is 1: admitted (TAT 133 1/3,
# 1 left), at 100 (TAT 166 2/3, 1 left: 33 1/3 of room), at 110 (TAT 200).
# b at 150, cost 2: TAT 216 2/3; at 160 the debt 56 2/3 must fall to 33 1/3
# for 2 more: 23 1/3, retry 24 (1 left meanwhile). At 250 a is whole again.
# c at 300: cost 3 fills it, and a unit waits 33 1/3: retry 34.
cat >"$TMP/gcra.expected" <<'EOF'
0 a 1 allowed 2 0
10 a 1 allowed 1 0
20 a 1 allowed 0 0
30 a 1 denied 0 4
99 a 1 allowed 1 0
100 a 1 allowed 1 0
110 a 1 allowed 0 0
150 b 2 allowed 1 0
160 b 2 denied 1 24
250 a 1 allowed 2 0
300 c 3 allowed 0 0
300 c 1 denied 0 34
EOF

# Every algorithm replays the trace; those with hand-computed lines above
# must give them (a new algorithm's go beside them), the others a line per
# request.
for algo in $(cli_algos); do
    run_in "$TRACE" replay --algo "$algo" --max 3 --window 100
    printf '%s\n' "$out" >"$TMP/$algo.actual"
    if [ ! -f "$TMP/$algo.expected" ]; then
        if [ "$rc" -eq 0 ] && [ "$(wc -l <"$TMP/$algo.actual")" -eq 12 ]; then
            pass "replay $algo answers every line (no hand-computed lines for it)"
        else
            fail "replay $algo answers every line" "exit $rc; $err; $out"
        fi
        continue
    fi
    if [ "$rc" -eq 0 ] &&
       diff -u "$TMP/$algo.expected" "$TMP/$algo.actual" >"$TMP/diff"; then
        pass "replay $algo gives the hand-computed lines"
    else
        fail "replay $algo gives the hand-computed lines" \
             "exit $rc; $err
$(cat "$TMP/diff")"
    fi
done

# retry_after_ms is the least wait: one ms earlier is refused, at it admitted.
# (An algorithm with a burst refills as it goes, and admits this trace's
# second request: gcra's waits are hand-computed below.)
for algo in $(cli_algos); do
    cli_takes_burst "$algo" && continue
    run_in '0 k 3\n37 k 2\n' replay --algo "$algo" --max 4 --window 100
    retry=$(printf '%s\n' "$out" | awk 'NR == 2 { print $6 }')
    if [ -z "$retry" ] || [ "$retry" -eq 0 ]; then
        fail "replay $algo: a refusal gives retry_after_ms" "$out"
        continue
    fi
    run_in "0 k 3\n$((37 + retry - 1)) k 2\n$((37 + retry)) k 2\n" \
        replay --algo "$algo" --max 4 --window 100
    got=$(printf '%s\n' "$out" | awk '{ print $4 }' | tr '\n' ' ')
    expect_eq "replay $algo: refused at +$((retry - 1)) ms, admitted at +$retry ms" \
        "allowed denied allowed " "$got"
done

# gcra with a burst: 4 per 100 ms (T = 25 ms), burst 2 (50 ms of room). 2
# at 0 leave TAT 50; at 37 the debt is 13, a unit fits (38 <= 50), TAT 75;
# at 40 the debt is 35: a unit waits until it is 25, retry 10; at 49,
# retry 1; at 50 admitted. Burst 1 is pure pacing: units 25 ms apart.
run_in '0 k 2\n37 k\n40 k\n49 k\n50 k\n' \
    replay --algo gcra --max 4 --window 100 --burst 2
got=$(printf '%s\n' "$out" | awk '{ print $4 "/" $6 }' | tr '\n' ' ')
expect_eq "replay gcra --burst 2: the hand-computed waits" \
    "allowed/0 allowed/0 denied/10 denied/1 allowed/0 " "$got"
run_in '0 k\n0 k\n24 k\n25 k\n' replay --algo gcra --max 4 --window 100 \
    --burst 1
got=$(printf '%s\n' "$out" | awk '{ print $4 "/" $6 }' | tr '\n' ' ')
expect_eq "replay gcra --burst 1 paces units 25 ms apart" \
    "allowed/0 denied/25 denied/1 allowed/0 " "$got"
usage_error "--burst with an algorithm without one" \
    "--burst: fixed has no burst" \
    hit k --algo fixed --max 10 --window 1s --burst 5
usage_error "--burst above --max" "--burst: .*burst 11 is out of range" \
    hit k --algo gcra --max 10 --window 1s --burst 11
usage_error "--cost above --burst" "--cost: 5 exceeds --burst 4" \
    peek k --algo gcra --max 10 --window 1s --burst 4 --cost 5
run reset k --algo gcra --burst 3
expect_rc "reset takes --burst alone" 0
usage_error "reset --burst with an algorithm without one" \
    "--burst: fixed has no burst" reset k --algo fixed --burst 3
run_in '0 k 5\n' replay --algo gcra --max 10 --window 1s --burst 4
expect_rc "replay: a line's cost above --burst" 2
run hit k --algo gcra --max 10 --window 1s --burst 4 --cost 4 --json
expect_eq "hit --burst 4 --cost 4 (json)" \
    '{"key":"k","algo":"gcra","allowed":true,"limit":10,"remaining":0,"retry_after_ms":0,"reset_after_ms":400,"counted":true}' \
    "$out"

# The same trace twice gives the same output: virtual time, no wall clock.
run_in "$TRACE" replay --algo sliding-counter --max 3 --window 100
first=$out
run_in "$TRACE" replay --algo sliding-counter --max 3 --window 100
expect_eq "replay is deterministic" "$first" "$out"

run_in '' replay "${LIMIT[@]}"
expect_rc "replay of an empty trace" 0

# A 1 MB key on one line.
long=$(head -c 1000000 /dev/zero | tr '\0' k)
run_in "5 $long 2\n" replay "${LIMIT[@]}"
if [ "$rc" -eq 0 ] && [ "$out" = "5 $long 2 allowed 8 0" ]; then
    pass "replay handles a 1 MB line"
else
    fail "replay handles a 1 MB line" "exit $rc; $err"
fi

run_in '5 k\n' replay "${LIMIT[@]}" --store nope://
expect_rc "replay with an unsupported --store is a usage error" 2

# A key with an ESC, a byte that is not UTF-8 and valid UTF-8 (é) is
# written with \xNN escapes but for the UTF-8.
run_in '0 k\033[31m\377\303\251\n' replay "${LIMIT[@]}"
expect_eq "replay escapes control bytes and bytes not UTF-8 in a key" \
    "0 k\\x1b[31m\\xff$(printf '\303\251') 1 allowed 9 0" "$out"
terminal_safe "replay's output of that key is safe for a terminal" "$TMP/out"

# ---- replay: malformed traces -------------------------------------------------

# bad_trace NAME INPUT PATTERN: exit 2 and stderr matching PATTERN.
bad_trace() {
    run_in "$2" replay --algo sliding-log --max 3 --window 1s
    if [ "$rc" -ne 2 ]; then
        fail "replay, $1: exit 2" "exit $rc; stderr: $err"
    elif ! grep -Eq -- "$3" "$TMP/err"; then
        fail "replay, $1: stderr gives the line" "expected /$3/ in: $err"
    else
        pass "replay, $1 (exit 2: $err)"
    fi
}

bad_trace "decreasing time" '0 a\n9 a\n\n# note\n5 a\n' \
    "line 5: time 5 is before the previous line's 9"
bad_trace "bad number" '0 a\n1x a\n' "line 2: time: '1x' is not a whole number"
bad_trace "negative time" '-1 a\n' "line 1: time: '-1' is negative"
bad_trace "time overflow" '0 a\n99999999999999999999 a\n' \
    "line 2: time: '99999999999999999999' is out of range"
bad_trace "time past 2^53" '9007199254740993 a\n' "line 1: time: .*out of range"
bad_trace "cost 0" '0 a\n1 a 0\n' "line 2: cost: '0' is out of range"
bad_trace "bad cost" '0 a\n1 a two\n' "line 2: cost: 'two' is not a whole number"
bad_trace "cost above max" '0 a 4\n' "line 1: cost 4 exceeds --max 3.*never be admitted"
bad_trace "extra field" '0 a\n1 a 1 extra\n' "line 2: unexpected field 'extra'"
bad_trace "missing key" '0 a\n1\n' "line 2: missing KEY"
bad_trace "NUL byte" '0 a\0b\n' "line 1: contains a NUL byte"

# ---- demo ---------------------------------------------------------------------

# The algorithms, as the tool lists them (cli_algos).
algos=$(cli_algos)
nalgos=$(printf '%s\n' $algos | wc -l)
run demo
expect_rc "demo exits 0" 0
printf '%s\n' "$out" >"$TMP/demo"
lines=$(wc -l <"$TMP/demo")
width=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' \
        "$TMP/demo")
# One screen: a 50-line, 80-column terminal, with the five algorithms (50
# lines; demo_width_test.sh measures the columns in characters, and in color). Each algorithm beyond five adds its rows (the table's, the
# attack's, two of the timeline and its words: about 6 lines), and the demo
# outgrows one screen; the limit grows with them, so a sixth one passes.
most=50
[ "$nalgos" -gt 5 ] && most=$((50 + 6 * (nalgos - 5)))
if [ "$lines" -le "$most" ] && [ "$width" -le 80 ]; then
    pass "demo fits one screen ($lines lines of at most $most, $width columns)"
else
    fail "demo fits one screen" "$lines lines (at most $most), $width columns"
fi
if grep -q "$(printf '\033')" "$TMP/demo"; then
    fail "demo prints no colors when stdout is not a terminal"
else
    pass "demo prints no colors when stdout is not a terminal"
fi

# The table's rows: NAME ADMITTED of SENT PEAK BYTES B BYTES B ADMITTED of
# SENT PEAK, where a peak over max is printed "N > max".
table=$(sed 's/ > max/!/g' "$TMP/demo" |
        awk '$3 == "of" && $11 == "of" { print $1, $2, $4, $5 + 0, $10, $12, $13 + 0 }')
row() { printf '%s\n' "$table" | awk -v a="$1" '$1 == a'; }
if [ "$(printf '%s\n' "$table" | wc -l)" -eq "$nalgos" ] &&
   [ "$(printf '%s\n' "$table" | awk '{ print $1 }')" = \
     "$(printf '%s\n' $algos)" ]; then
    pass "demo prints a table row per algorithm"
else
    fail "demo prints a table row per algorithm" "$out"
fi
read -r _ fx_adm fx_sent fx_peak _ _ _ <<<"$(row fixed)"
read -r _ sc_adm _ sc_peak _ _ _ <<<"$(row sliding-counter)"
read -r _ sl_adm _ sl_peak _ _ sl_steady_peak <<<"$(row sliding-log)"
if [ "${fx_sent:-0}" -eq 20 ] && [ "${fx_adm:-0}" -gt 10 ]; then
    pass "demo: the fixed window admits more than max at the seam ($fx_adm of $fx_sent)"
else
    fail "demo: the fixed window admits more than max at the seam" "$table"
fi
if [ "${fx_peak:-0}" -gt 10 ]; then
    pass "demo: the fixed window's peak in a 1 s span exceeds max ($fx_peak)"
else
    fail "demo: the fixed window's peak in a 1 s span exceeds max" "$table"
fi
if [ -n "${sl_peak:-}" ] && [ "$sl_peak" -le 10 ] &&
   [ "${sl_steady_peak:-99}" -le 10 ]; then
    pass "demo: the sliding log admits at most max in any span ($sl_peak, $sl_steady_peak)"
else
    fail "demo: the sliding log admits at most max in any span" "$table"
fi
# By hand: fixed 9 at t=999 (1 used at t=0) + 10 at t=1000 (a new window);
# the counter 9 + 0 (the previous window still weighs 10); the log 9 + 1
# (the request at t=0 has left).
expect_eq "demo: attack figures match the semantics (fixed, counter, log)" \
    "19 19 9 10 10 10" \
    "$fx_adm $fx_peak $sc_adm $sc_peak $sl_adm $sl_peak"
if grep -q "t=999" "$TMP/demo" && grep -q "max=10" "$TMP/demo" &&
   grep -q "window=1s" "$TMP/demo"; then
    pass "demo prints its parameters and the seam"
else
    fail "demo prints its parameters and the seam" "$out"
fi
run demo
expect_eq "demo is deterministic" "$(cat "$TMP/demo")" "$out"

# Colors on a terminal, and not with NO_COLOR (needs util-linux script(1)).
if command -v script >/dev/null 2>&1 &&
   script -qec true /dev/null >/dev/null 2>&1; then
    script -qec "$SLUICE demo" /dev/null </dev/null >"$TMP/tty" 2>&1
    if grep -q "$(printf '\033')\[" "$TMP/tty"; then
        pass "demo uses colors on a terminal"
    else
        fail "demo uses colors on a terminal" "$(head -n 3 "$TMP/tty")"
    fi
    NO_COLOR=1 script -qec "$SLUICE demo" /dev/null </dev/null >"$TMP/tty" 2>&1
    if grep -q "$(printf '\033')\[" "$TMP/tty"; then
        fail "demo honours NO_COLOR on a terminal"
    else
        pass "demo honours NO_COLOR on a terminal"
    fi
else
    echo "SKIP: colors on a terminal (no script(1))"
fi

# ---- Summary ------------------------------------------------------------------

echo "cli_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
