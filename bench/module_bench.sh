#!/usr/bin/env bash
exec "$(dirname "$0")/run_server_bench.sh" --no-peers --no-diag --only srvtime "$@" # the "Server time per decision" section (BENCHMARKS.md)
