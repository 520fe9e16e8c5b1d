#!/usr/bin/env bash
# The Discord bridge under load (SPEC §14: 200 concurrent channels with a
# zero-latency model; every message answered exactly once, added latency
# p99 ≤ 100 ms, RSS ≤ 48 MB): the release pincerd against our Discord fake
# (tests/support/discord_fake.rs: REST v10 + gateway v10) and the scripted
# model, with the same turns through pincerd's socket API as the baseline
# in the same run. Prints one table; exits non-zero when a message was not
# answered exactly once. How it works: tests/support/bin/discord_load.rs
# and tests/support/load.rs.
# Usage: bash daemon/benches/discord_load.sh [channels] [messages per channel] [rounds]
#        (default 200 5 3; ~30 s a round)
set -euo pipefail
cd "$(dirname "$0")/../.."
chats="${1:-200}"
messages="${2:-5}"
rounds="${3:-3}"
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox -p pincer-e2e --bins
bin="${CARGO_TARGET_DIR:-target}/release"
exec "$bin/pincer-discord-load" --pincerd "$bin/pincerd" --chats "$chats" --messages "$messages" --rounds "$rounds"
