#!/usr/bin/env bash
# Coverage-guided fuzzing of pincer's parsers (docs/src/hardening.md):
# builds fuzz/ (one binary, every target of pincer_daemon::fuzz::TARGETS)
# with cargo-afl, runs each target under AFL++ for a bounded time from its
# committed corpus (fuzz/corpus/<target>), prints a table of executions,
# corpus growth, coverage, crashes and hangs, and fails when a target
# crashed or hung. Each crash is copied to fuzz/regressions/<target>/,
# which the unit test `fuzz::tests` replays in every `cargo test`: commit
# it with the fix.
#
#   fuzz/run.sh                       every target, 10 s each (tests/run.sh)
#   fuzz/run.sh --seconds 600 sse     one target, ten minutes
#   fuzz/run.sh --jobs 1              one target at a time (default: 2)
#
# cargo-afl and AFL++ come from tests/setup.sh (cached under
# ~/.cache/pincer-test). Why AFL++ and not cargo-fuzz: cargo-fuzz needs a
# nightly toolchain, and this project builds on stable; cargo-afl builds
# AFL++ from the source in its crate with the C compiler alone, where
# honggfuzz-rs also needs libunwind and binutils' development packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=10
jobs=2
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "fuzz/run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

peers="${PINCER_TEST_PEERS:-$HOME/.cache/pincer-test}"
export PATH="$peers/cargo-afl/bin:$PATH"
# AFL++ as `cargo afl config --build` built it (tests/setup.sh).
export XDG_DATA_HOME="$peers/afl-data"
if ! command -v cargo-afl >/dev/null 2>&1 || ! cargo afl --version >/dev/null 2>&1; then
  echo "fuzz/run.sh: cargo-afl is missing; run tests/setup.sh (it installs cargo-afl and builds AFL++ into $peers)" >&2
  exit 1
fi

# The build's own folder, kept under ~/.cache with the peers: every crate
# is built with AFL++'s coverage instrumentation, so nothing of target/
# can be shared, and a warm cache leaves only pincer's own crates to build.
# Optimised at level 1 in 16 units (cargo-afl's default, 3 in one unit,
# took over 20 minutes cold on 2 cores).
build="${PINCER_FUZZ_TARGET:-$peers/fuzz-target}"
export AFL_OPT_LEVEL=1 RUSTFLAGS="-C codegen-units=16"
build_start=$(date +%s)
(cd fuzz && CARGO_TARGET_DIR="$build" cargo afl build --locked --quiet)
build_s=$(( $(date +%s) - build_start ))
unset RUSTFLAGS
bin="$build/debug/pincer-fuzz"
out="$root/target/fuzz"
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <("$bin" --list)

# No UI, no CPU binding (shared machines, containers), crashes found even
# where the kernel hands cores to a helper program.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_FAST_CAL=1
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_QUIET=1
fuzz_one() {
  local t=$1 dir="$out/out/$1"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ ! -d "fuzz/corpus/$t" ]; then
    echo "fuzz/run.sh: no corpus for $t (fuzz/corpus/$t)" > "$dir/error"
    return
  fi
  cargo afl fuzz -i "fuzz/corpus/$t" -o "$dir" -V "$seconds" -t 2000 -- "$bin" "$t" \
    > "$dir/log" 2>&1 || echo "afl-fuzz exited with $?; see $dir/log" > "$dir/error"
}

fuzz_start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
fuzz_s=$(( $(date +%s) - fuzz_start ))

stat() { awk -F: -v k="$1" '{ gsub(/ /, "", $1) } $1 == k { gsub(/^ +/, "", $2); print $2 }' "$2"; }
failed=0
total=0
printf '%-16s %12s %10s %8s %9s %8s %6s\n' target executions "exec/s" corpus "edges" crashes hangs
for t in "${targets[@]}"; do
  dir="$out/out/$t"
  stats="$dir/default/fuzzer_stats"
  if [ -f "$dir/error" ] || [ ! -f "$stats" ]; then
    echo "$t: did not run: $(cat "$dir/error" 2>/dev/null || echo 'no fuzzer_stats')"
    tail -5 "$dir/log" 2>/dev/null || true
    failed=1
    continue
  fi
  execs=$(stat execs_done "$stats")
  total=$((total + execs))
  crashes=$(stat saved_crashes "$stats")
  hangs=$(stat saved_hangs "$stats")
  seeds=$(find "fuzz/corpus/$t" -type f | wc -l)
  printf '%-16s %12s %10s %8s %9s %8s %6s\n' "$t" "$execs" "$(stat execs_per_sec "$stats")" \
    "$seeds->$(stat corpus_count "$stats")" "$(stat bitmap_cvg "$stats")" "$crashes" "$hangs"
  if [ "$crashes" != 0 ] || [ "$hangs" != 0 ]; then
    failed=1
    mkdir -p "fuzz/regressions/$t"
    for f in "$dir"/default/crashes/id:* "$dir"/default/hangs/id:*; do
      [ -f "$f" ] || continue
      name="$(basename "$(dirname "$f")")-$(sha1sum "$f" | cut -c1-12)"
      cp "$f" "fuzz/regressions/$t/$name"
      echo "  $t: fuzz/regressions/$t/$name"
    done
  fi
done
echo "fuzzing: ${#targets[@]} targets, $total executions in ${fuzz_s} s (${seconds} s each, ${jobs} at a time); build ${build_s} s"
if [ "$failed" != 0 ]; then
  echo "fuzz/run.sh: a target crashed, hung or did not run. Each input is in fuzz/regressions/<target>/; reproduce with" >&2
  echo "  $bin <target> < fuzz/regressions/<target>/<file>" >&2
  echo "fix the code, and commit the input: cargo test replays it (pincer_daemon::fuzz::tests)." >&2
  exit 1
fi
