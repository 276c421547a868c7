# bench_args.sh - sourced by the bench scripts, first of all: the rule that
# bench/bench_options.h gives the bench programs. --help (or -h) anywhere
# before a "--" prints the script's usage on standard output and exits 0,
# before anything is installed, built, started or measured; an option the
# script does not take prints what is wrong and the usage on standard error
# and exits 2.
#
#   . "$(dirname "$0")/bench_args.sh"
#   bench_args "$usage" "FLAGS" "VALUED" "$@"
#
# FLAGS are the options without a value, VALUED those with one ("--name V"
# or "--name=V"), each a space-separated list ("" for none). Operands (an
# argument that does not start with '-') are left to the script.

# bench_args USAGE FLAGS VALUED ARGS...
bench_args() {
    local usage=$1 flags=" $2 " valued=" $3 " prog arg
    prog=$(basename "$0")
    shift 3
    for arg in "$@"; do
        [ "$arg" = "--" ] && break
        if [ "$arg" = "--help" ] || [ "$arg" = "-h" ]; then
            printf '%s\n' "$usage"
            exit 0
        fi
    done
    while [ $# -gt 0 ]; do
        arg=$1
        shift
        case $arg in
            --) break ;;
            -?*) ;;
            *) continue ;;
        esac
        if [[ $flags == *" $arg "* ]] || [[ $valued == *" ${arg%%=*} "* && $arg == *=* ]]; then
            continue
        fi
        if [[ $valued == *" $arg "* ]]; then
            if [ $# -eq 0 ]; then
                printf '%s: %s needs a value\n%s\n' "$prog" "$arg" "$usage" >&2
                exit 2
            fi
            shift
            continue
        fi
        printf "%s: unknown option '%s'\n%s\n" "$prog" "$arg" "$usage" >&2
        exit 2
    done
}

# Run rather than sourced, it says what it is for.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    bench_args "usage: . bench/bench_args.sh   (sourced, not run)

Sourced by the bench scripts: bench_args USAGE FLAGS VALUED ARGS... answers
--help with USAGE (exit 0) and refuses an option not in FLAGS or VALUED
(exit 2). Needs bash.

  --help    show this text" "" "" "$@"
    printf '%s: it is sourced by the bench scripts, not run\n' "$(basename "$0")" >&2
    exit 2
fi
