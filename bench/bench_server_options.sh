# bench_server_options.sh - sourced by run_server_bench.sh and
# module_bench.sh: the options of sluice_bench_server (bench/server/main.c,
# its usage), which those scripts pass on, so that they can refuse a wrong
# one before they install or build anything. tests/bench/bench_help_test.sh
# checks that this list and the program's usage name the same options.
BENCH_SERVER_FLAGS="--quick --json --no-peers --no-diag"
BENCH_SERVER_VALUED="--seconds --repeats --store --callers --pool --only --peers --python --node"

# Run rather than sourced, it says what it is for.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    . "$(dirname "$0")/bench_args.sh"
    bench_args "usage: . bench/bench_server_options.sh   (sourced, not run)

The options of sluice_bench_server, for the scripts that pass them on
(run_server_bench.sh, module_bench.sh): \$BENCH_SERVER_FLAGS, without a
value, and \$BENCH_SERVER_VALUED, with one. Needs bash.

  --help    show this text" "" "" "$@"
    printf '%s: it is sourced by the bench scripts, not run\n' "$(basename "$0")" >&2
    exit 2
fi
