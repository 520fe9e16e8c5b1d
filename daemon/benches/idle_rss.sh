#!/usr/bin/env bash
# pincerd's idle RSS (release build) with both chat bridges connected to
# their fakes and a 10,000-chunk memory index (SPEC §14: ≤ 20 MB), beside
# the same binary with no bridges, with Telegram only (what Discord adds)
# and with an empty index (what the index adds), in the same run. Prints
# one table. How it works: tests/support/bin/idle_rss.rs.
# Usage: bash daemon/benches/idle_rss.sh [rounds] [chunks]   (default 3 10000; ~2 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
chunks="${2:-10000}"
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox -p pincer-e2e --bins
bin="${CARGO_TARGET_DIR:-target}/release"
exec "$bin/pincer-idle-rss" --pincerd "$bin/pincerd" --rounds "$rounds" --chunks "$chunks"
