# test_binaries.sh - sourced by the test and benchmark scripts: which server
# build they run (CONTRIBUTING.md: "Running the suite against another server build").
#
# test_binary VAR NAME FALLBACK: prints the path of the program to run: the
# one the environment variable VAR names (a path, or a name looked up in
# PATH), else NAME from PATH, else FALLBACK from PATH. Returns 1, with the
# reason on stderr, when VAR names no executable or neither is on PATH.
test_binary() {
    local var=$1 value=${!1-} path
    if [ -n "$value" ]; then
        path=$value
        [[ $value == */* ]] || path=$(type -P -- "$value")
        if [ -n "$path" ] && [ -f "$path" ] && [ -x "$path" ]; then
            printf '%s\n' "$path"
            return 0
        fi
        echo "$var=$value: not an executable" >&2
        return 1
    fi
    type -P -- "$2" || type -P -- "$3" || {
        echo "no $2 or $3 on PATH ($var names another)" >&2
        return 1
    }
}
