#!/usr/bin/env bash
# What 1,000 schedules and 100 file triggers cost an idle pincerd (release
# build): wake-ups per minute and RSS against the same daemon with nothing
# scheduled (the memory watcher's ticks named apart), and the p99 delay
# of fires from their due instant. Prints a table; budgets: RSS added
# <= 1 MB, p99 delay <= 50 ms, wake-ups ~0 between deadlines and events.
# Usage: bash daemon/benches/schedules.sh [window_s]   (default 60; ~6 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox
bin="${CARGO_TARGET_DIR:-target}/release"
exec python3 daemon/benches/schedules.py "$bin/pincerd" "$bin/pincer" "${1:-60}"
