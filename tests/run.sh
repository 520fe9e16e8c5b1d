#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it:
# installs the test peers (tests/setup.sh, cached under ~/.cache), checks
# formatting and lints (rustfmt, clippy with warnings denied; unwrap/expect
# are denied outside tests by the workspace lints), then runs every unit and
# end-to-end test of the workspace with `cargo test`, fuzzes every fuzz
# target for a bounded time (fuzz/run.sh), and closes with the total over
# all test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

# No incremental compilation caches: the suite (and the model fetch in
# tests/setup.sh) builds each crate once, and the caches were more than
# half of target/debug (3.8 of 6.8 GB measured).
export CARGO_INCREMENTAL=0

bash tests/setup.sh
# The end-to-end tests switch to the user `nobody` with setpriv (util-linux).
if ! command -v setpriv >/dev/null 2>&1; then
  echo "tests/run.sh: setpriv is missing; install util-linux (apt-get install util-linux)" >&2
  exit 1
fi

# Every cargo command here selects the whole workspace (`--workspace`, never
# `-p`): cargo picks dependency features from the packages selected, so a
# `-p` run builds much of the tree a second time with other features, and
# on a small disk the suite runs out of space. The e2e harness and
# tests/setup.sh build the binaries with the same selection for the same
# reason (`cargo build --workspace --bins --tests`).
#
# Lints first: they fail in seconds where the tests take minutes.
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --workspace --all-targets --locked --features pincer-daemon/exact-tokens -- -D warnings

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" -- --skip bfcl_round_trip --skip hybrid_search_beats_each_leg_on_bfcl_memory 2>&1 | tee "$log" || status=$?
# The exact-tokens feature (OpenAI's vocabularies) is off by default; its
# counter is tested here.
cargo test --workspace --locked --features pincer-daemon/exact-tokens --lib "$@" -- context::tokens 2>&1 | tee -a "$log" || status=$?
# The memory retrieval evaluation prints recall@6 and MRR per leg.
cargo test --workspace --locked --test retrieval_eval "$@" -- --nocapture 2>&1 | tee -a "$log" || status=$?
# The BFCL parser round trip prints its table of counts per category.
cargo test --workspace --locked --test bfcl "$@" -- --nocapture 2>&1 | tee -a "$log" || status=$?
# The hardening suites' fuzzing (docs/src/hardening.md): every fuzz
# target 10 s from its committed corpus, two at a time; a crash or hang
# fails the suite and is saved under fuzz/regressions/.
bash fuzz/run.sh --seconds 10 2>&1 | tee -a "$log" || status=$?
# One closing line for all the test binaries cargo ran.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
