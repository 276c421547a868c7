#!/usr/bin/env bash
# setup.sh - installs what is missing, builds sluice, and runs `sluice demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
sluice_need build-essential cmake pkg-config libhiredis-dev libssl-dev
# The README's quick start, next on its first screen, starts a redis-server
# and asks it with redis-cli.
sluice_need redis-server redis-tools
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
./build/cli/sluice demo
