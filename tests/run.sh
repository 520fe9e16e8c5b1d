#!/usr/bin/env bash
# The whole test suite, as README.md documents it and .ci/run calls it:
# installs the test peers (tests/setup.sh, cached under ~/.cache), then runs
# every unit and end-to-end test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tests/setup.sh
# The end-to-end tests switch to the user `nobody` with setpriv (util-linux).
if ! command -v setpriv >/dev/null 2>&1; then
  echo "tests/run.sh: setpriv is missing; install util-linux (apt-get install util-linux)" >&2
  exit 1
fi
cargo test --workspace --locked "$@"
