"""The two builds a bench run compares: the work tree as it is, and a
baseline commit named on the command line.

Each build is two cargo invocations:

- the product, exactly as users get it: the workspace's binaries
  (`pincerd`, `pincer` and whatever else a package ships) in the `release`
  profile (fat LTO, stripped), the sandbox's launcher as
  `packaging/launcher.sh` builds it for the packages; the run measures
  copies of them, so a build during the run cannot change what is measured;
- the in-process criterion benches (`daemon/benches`, `daemon/memory/benches`)
  in the `quick-release` profile (the release opt-levels without the fat-LTO link: four
  LTO links per build would add half an hour; `--release-benches` builds them
  in `release` instead).

The baseline is checked out with `git worktree` under the cache and built
in a target folder of its own (a bench binary names the binaries it was
built beside, so the two builds must not share one), then copied aside:
a second run with the same baseline commit builds nothing. Only the last
baseline's target folder is kept.
"""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PINCER_BENCH_CACHE", Path.home() / ".cache" / "pincer-bench"))

# The profile of the benches, given on the command line so that a baseline
# commit older than the profile builds with it too.
QUICK_RELEASE = [
    "--config", 'profile.quick-release.inherits="release"',
    "--config", 'profile.quick-release.lto="off"',
    "--config", "profile.quick-release.codegen-units=16",
    "--config", "profile.quick-release.incremental=true",
    "--config", 'profile.quick-release.strip="none"',
]
# The crates whose benches the run measures.
BENCH_PACKAGES = ("pincer-daemon", "pincer-memory")
# The workspace's test crate: its binaries are the harness, not the product.
HARNESS_PACKAGE = "pincer-e2e"


class BuildError(Exception):
    """A build failed; the message says which command and where its log is."""


@dataclass
class Build:
    """What one side of the comparison runs."""

    label: str
    rev: str
    bin: Path
    # The source tree it was built from (the benches run in its crates).
    src: Path = ROOT
    benches: dict = field(default_factory=dict)

    def exe(self, name):
        return self.bin / name


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, cwd, env=None, logfile=None):
    """Runs a build command, its output to `logfile`; raises BuildError."""
    with open(logfile, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(cmd[:4])} …` failed in {cwd}; see {logfile}")


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def products(src):
    """The workspace packages with binaries (the test crate's apart) and
    the names of those binaries."""
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            cwd=src, check=True, capture_output=True, text=True,
        ).stdout
    )
    pkgs, bins = [], []
    for pkg in meta["packages"]:
        if pkg["name"] == HARNESS_PACKAGE:
            continue
        names = [t["name"] for t in pkg["targets"] if "bin" in t["kind"]]
        if names:
            pkgs.append(pkg["name"])
            bins.extend(names)
    return sorted(pkgs), sorted(bins)


def bench_executables(cargo_json):
    """{bench name: executable} from `cargo bench --no-run --message-format json`."""
    found = {}
    for line in cargo_json.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and "bench" in msg["target"]["kind"]:
            if msg.get("executable"):
                found[msg["target"]["name"]] = msg["executable"]
    return found


def build_tree(src, target, out, logfile, release_benches):
    """Builds the product and the benches of the tree at `src` into
    `target`, and copies them into `out` (bin/, benches/)."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    pkgs, bins = products(src)
    flags = [a for p in pkgs for a in ("-p", p)]
    log(f"  release build of {', '.join(pkgs)} in {src} (fat LTO: minutes)…")
    run(["cargo", "build", "--release", "--bins", *flags], src, env, logfile)
    (out / "bin").mkdir(parents=True, exist_ok=True)
    for name in bins:
        shutil.copy2(target / "release" / name, out / "bin" / name)
    # The sandbox's launcher as it ships (statically linked), where the
    # tree has the script that builds it so (older commits shipped cargo's).
    script = src / "packaging" / "launcher.sh"
    if script.is_file():
        log("  the launcher as shipped (packaging/launcher.sh)…")
        with open(logfile, "a") as lf:
            done = subprocess.run(["bash", str(script)], cwd=src, env=env, stdout=subprocess.PIPE, stderr=lf, text=True)
        if done.returncode != 0:
            raise BuildError(f"packaging/launcher.sh failed in {src}; see {logfile}")
        shutil.copy2(done.stdout.strip().splitlines()[-1], out / "bin" / "pincer-sandbox")
    profile = ["--release"] if release_benches else ["--profile", "quick-release", *QUICK_RELEASE]
    log(f"  benches of {', '.join(BENCH_PACKAGES)} ({'release' if release_benches else 'quick-release'})…")
    bflags = [a for p in BENCH_PACKAGES for a in ("-p", p)]
    with open(logfile, "a") as lf:
        done = subprocess.run(
            ["cargo", "bench", "--no-run", "--message-format", "json-render-diagnostics", *profile, *bflags],
            cwd=src, env=env, stdout=subprocess.PIPE, stderr=lf, text=True,
        )
    if done.returncode != 0:
        raise BuildError(f"the benches of {src} did not build; see {logfile}")
    (out / "benches").mkdir(parents=True, exist_ok=True)
    benches = {}
    for name, exe in bench_executables(done.stdout).items():
        shutil.copy2(exe, out / "benches" / name)
        benches[name] = str(out / "benches" / name)
    (out / "benches.json").write_text(json.dumps(benches))


def load(out, label, rev, src):
    benches = json.loads((out / "benches.json").read_text()) if (out / "benches.json").exists() else {}
    return Build(label=label, rev=rev, bin=out / "bin", src=src, benches=benches)


def head(run_dir, release_benches):
    """The work tree as it is (uncommitted changes included)."""
    rev = git("rev-parse", "--short=10", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        rev += "+changes"
    out = run_dir / "build-head"
    shutil.rmtree(out, ignore_errors=True)
    log(f"building the work tree ({rev})…")
    build_tree(ROOT, Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")), out, run_dir / "build.log", release_benches)
    return load(out, f"this tree ({rev})", rev, ROOT)


def baseline(rev, run_dir, release_benches):
    """The commit `rev`, built once and kept in the cache."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    short = sha[:10]
    kind = "release-benches" if release_benches else "quick-benches"
    out = CACHE / "builds" / f"{short}-{kind}"
    if (out / ".done").exists():
        log(f"baseline {short}: cached in {out}")
        return load(out, f"baseline ({short})", short, CACHE / "src")
    src = CACHE / "src"
    if src.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT, capture_output=True)
        shutil.rmtree(src, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)
    git("worktree", "add", "--detach", str(src), sha)
    log(f"building the baseline {short} in {src} (first time: a whole release build, 15–40 min on 2 cores)…")
    shutil.rmtree(out, ignore_errors=True)
    build_tree(src, CACHE / "target", out, run_dir / "build.log", release_benches)
    for other in (CACHE / "builds").iterdir():
        if other != out and other.name.endswith(kind):
            shutil.rmtree(other, ignore_errors=True)
    (out / ".done").write_text(sha + "\n")
    return load(out, f"baseline ({short})", short, src)


def harness(run_dir):
    """The measuring programs of `tests/support/bin`, built once from this
    tree and used against both builds."""
    log("building the harness (pincer-e2e, quick-release)…")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    run(["cargo", "build", "--profile", "quick-release", *QUICK_RELEASE, "-p", HARNESS_PACKAGE, "--bins"],
        ROOT, None, run_dir / "build.log")
    return target / "quick-release"
