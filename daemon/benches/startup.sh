#!/usr/bin/env bash
# Prints pincerd's start to ready with a 10,000-chunk memory index, when its
# socket first accepts, its idle RSS 1.5 s after ready and the `pincer send`
# round trip, as a table (median, lowest–highest), measured by the
# `pincer-startup` harness (tests/support/bin/startup.rs) against the
# zero-latency scripted model. Budgets (SPEC §14): ready ≤ 20 ms, send ≤ 10 ms.
# Usage: bash daemon/benches/startup.sh [runs] [chunks]   (default 10, 10000)
# `python3 bench/run.py --only startup` runs the same against a baseline.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-10}"
chunks="${2:-10000}"
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox -p pincer-e2e --bins
bin="${CARGO_TARGET_DIR:-target}/release"
"$bin/pincer-startup" --pincerd "$bin/pincerd" --pincer "$bin/pincer" --runs "$runs" --chunks "$chunks"
