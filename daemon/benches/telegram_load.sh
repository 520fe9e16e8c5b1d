#!/usr/bin/env bash
# The Telegram bridge under load (SPEC §14: 200 concurrent chats with a
# zero-latency model; every message answered exactly once, RSS ≤ 48 MB,
# added latency p99 ≤ 100 ms): the release pincerd against the fake Bot
# API of tests/support/bot_api.rs and the scripted model, with the same
# turns through pincerd's socket API as the baseline in the same run.
# Prints one table; exits non-zero when a message was not answered exactly
# once. How it works: tests/support/bin/telegram_load.rs
# and tests/support/load.rs.
# Usage: bash daemon/benches/telegram_load.sh [chats] [messages per chat] [rounds]
#        (default 200 5 3; ~30 s a round)
set -euo pipefail
cd "$(dirname "$0")/../.."
chats="${1:-200}"
messages="${2:-5}"
rounds="${3:-3}"
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox -p pincer-e2e --bins
bin="${CARGO_TARGET_DIR:-target}/release"
exec "$bin/pincer-telegram-load" --pincerd "$bin/pincerd" --chats "$chats" --messages "$messages" --rounds "$rounds"
