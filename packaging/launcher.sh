#!/usr/bin/env bash
# Builds pincer-sandbox, the exec sandbox's launcher, as it ships: on Linux
# statically linked (glibc's libc.a), because it starts once per sandboxed
# command and a dynamic launcher spends 0.12 ms of that loading libc and
# libgcc_s (measured with the exec_sandbox bench: 0.54 -> 0.42 ms added per
# command). Cargo sets that flag per target, not per binary, so this is
# its own `cargo rustc` into a target folder of its own
# ($CARGO_TARGET_DIR or target, then launcher/): building it never
# replaces the launcher a running test or daemon uses. Seconds.
#
#   bash packaging/launcher.sh [--profile PROFILE]
#
# Prints the built launcher's path. packaging/build.sh (the .deb and the
# tarball) and the bench command (bench/run.py) ship and measure this one;
# a plain `cargo build` builds it dynamically linked, which works the same.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="${2:?--profile needs a profile name}"; shift 2 ;;
    --profile=*) profile="${1#--profile=}"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "packaging/launcher.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$profile" in
  dev) profile_dir=debug ;;
  *) profile_dir="$profile" ;;
esac
target="${CARGO_TARGET_DIR:-$root/target}/launcher"

static=()
if [ "$(uname -s)" = Linux ]; then
  static=(-- -C target-feature=+crt-static)
fi
if ! CARGO_TARGET_DIR="$target" cargo rustc --quiet --locked --profile "$profile" \
  -p pincer-sandbox --bin pincer-sandbox "${static[@]}" >&2; then
  echo "packaging/launcher.sh: could not build pincer-sandbox (above); linking it statically needs glibc's static library, libc.a: apt-get install libc6-dev (Debian, Ubuntu) or dnf install glibc-static (Fedora)" >&2
  exit 1
fi
echo "$target/$profile_dir/pincer-sandbox"
