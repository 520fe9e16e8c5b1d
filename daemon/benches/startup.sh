#!/usr/bin/env bash
# Prints start-to-ready time, idle RSS and the `pincer send` round trip of
# pincerd (release build) against the zero-latency scripted model, as a
# table. Budgets (SPEC §14): ready ≤ 20 ms, idle RSS ≤ 20 MB, send ≤ 10 ms.
# Usage: bash daemon/benches/startup.sh [runs]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-10}"
cargo build --release --quiet -p pincer-daemon -p pincer-cli -p pincer-sandbox -p pincer-e2e --bins
bin="${CARGO_TARGET_DIR:-target}/release"
work=$(mktemp -d)
llm_out="$work/llm.url"
"$bin/pincer-scripted-llm" "pong" > "$llm_out" &
llm_pid=$!
trap 'kill $llm_pid 2>/dev/null || true; pkill -f "pincerd --home $work" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$llm_out" ] && break; sleep 0.05; done
base=$(cat "$llm_out")

ms() { date +%s%N; }
ready=(); rss=(); send=()
for i in $(seq "$runs"); do
  home="$work/home-$i"
  mkdir -p "$home"
  printf '[providers.s]\nkind = "openai"\nbase_url = "%s/v1"\n[models.default]\nprovider = "s"\nmodel = "m"\n[agents.main]\nmodel = "default"\n' "$base" > "$home/config.toml"
  t0=$(ms)
  "$bin/pincerd" --home "$home" > /dev/null 2>&1 &
  pid=$!
  until "$bin/pincer" --home "$home" status > /dev/null 2>&1; do sleep 0.001; done
  t1=$(ms)
  ready+=($(( (t1 - t0) / 1000 )))
  sleep 1
  rss+=($(awk '/VmRSS/ {print $2}' "/proc/$pid/status"))
  "$bin/pincer" --home "$home" send "warm up" > /dev/null
  t0=$(ms)
  "$bin/pincer" --home "$home" send --session "s$i" "ping" > /dev/null
  t1=$(ms)
  send+=($(( (t1 - t0) / 1000 )))
  kill "$pid"; wait "$pid" 2>/dev/null || true
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '\n%-40s %12s %12s\n' "measure ($runs runs, median)" "value" "budget"
printf '%-40s %9.1f ms %9s ms\n' "pincerd start → status answers" "$(awk "BEGIN {print $(median "${ready[@]}") / 1000}")" 20
printf '%-40s %9.1f MB %9s MB\n' "idle RSS (no bridges, empty memory index)" "$(awk "BEGIN {print $(median "${rss[@]}") / 1024}")" 20
printf '%-40s %9.1f ms %9s ms\n' "pincer send round trip (whole process)" "$(awk "BEGIN {print $(median "${send[@]}") / 1000}")" 10
