#!/usr/bin/env bash
# module_bench.sh - the "Server time per decision" section of
# sluice_bench_server alone (BENCHMARKS.md): run_server_bench.sh with
# --no-peers --no-diag --only srvtime, and the arguments given.
usage="usage: bench/module_bench.sh [sluice_bench_server OPTIONS...]

The server's time per decision of each algorithm through the native module
(SLUICE.HIT), its script (EVALSHA) and FCALL, beside a bare INCR, each sent
by redis-benchmark -c 50 -r 1000 to a private redis-server: the
\"Server time per decision\" section of sluice_bench_server alone, run by
bench/run_server_bench.sh --no-peers --no-diag --only srvtime, which first
installs what is missing (redis-server, redis-tools) and builds the
benchmark (Release, in build-bench/). Further options are
sluice_bench_server's (bench/run_server_bench.sh --help lists them), e.g.
--quick or --json.

  --help    show this text"
. "$(dirname "$0")/bench_args.sh"
# The options run_server_bench.sh passes on (its list), checked here too so
# that a wrong one is refused before anything is installed or built.
. "$(dirname "$0")/bench_server_options.sh"
bench_args "$usage" "$BENCH_SERVER_FLAGS" "$BENCH_SERVER_VALUED" "$@"
exec "$(dirname "$0")/run_server_bench.sh" --no-peers --no-diag --only srvtime "$@"
