#!/usr/bin/env bash
# The size of the release `pincerd` (stripped: the release profile strips
# symbols) with the default features (SPEC §14: ≤ 30 MB), with all features
# beside it, and without the Discord bridge to show what it adds. Every
# variant is built from the same source with the same command, one after
# the other (a fat-LTO link each: minutes on 2 cores); the binaries are
# copied aside, and the default build is left in the target folder.
# Prints one table; MB = 10^6 bytes.
# Usage: bash daemon/benches/binary_size.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${CARGO_TARGET_DIR:-target}/release"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

variants=(
  "all features|--all-features"
  "default features minus discord|--no-default-features --features local-embedder,telegram"
  "default features (local-embedder, telegram, discord)|"
)
for i in "${!variants[@]}"; do
  flags="${variants[$i]#*|}"
  # shellcheck disable=SC2086
  cargo build --release --quiet -p pincer-daemon --bin pincerd $flags
  cp "$bin/pincerd" "$work/pincerd-$i"
done

size() { stat -c %s "$1"; }
mb() { awk "BEGIN {printf \"%.2f MB\", $1 / 1e6}"; }
default=$(size "$work/pincerd-$(( ${#variants[@]} - 1 ))")
printf '\n%-56s %12s %14s %10s\n' "pincerd, release, stripped" "size" "vs default" "budget"
for i in "${!variants[@]}"; do
  name="${variants[$i]%%|*}"
  s=$(size "$work/pincerd-$i")
  budget=""; [ "$i" = $(( ${#variants[@]} - 1 )) ] && budget="≤ 30 MB"
  delta=$(awk "BEGIN {printf \"%+.2f MB\", ($s - $default) / 1e6}")
  printf '%-56s %12s %14s %10s\n' "$name" "$(mb "$s")" "$delta" "$budget"
done
if file "$work/pincerd-$(( ${#variants[@]} - 1 ))" | grep -q 'not stripped'; then
  echo "warning: the default build is not stripped (check [profile.release] strip)" >&2
fi
