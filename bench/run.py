#!/usr/bin/env python3
"""pincer's bench command: every budget of SPEC §14 and the rows of
issue 28, for this tree and a baseline commit, in one run.

    python3 bench/run.py --baseline <commit> [--runs 3] [--only startup,agent] [--peers]

It builds the release binaries of this tree and of the baseline (the
baseline's build is cached under ~/.cache/pincer-bench, so the second run
with the same commit builds only this tree), then runs each measuring
program N times per build, the two builds alternating so that both meet
the same noise, and prints one table: each row's median and range, the
ratio to the baseline, the budget and whether it is met. The table is
written as Markdown and JSON to `target/bench/<date>/` (or `--out`).

`--peers` adds OpenClaw (npm) and ZeroClaw (crates.io), installed once
under ~/.cache/pincer-bench/peers, measured the same way as pincer in
alternating runs (bench/peers.py).

The local embedding model's rows need the model of `tests/setup.sh`
(~/.cache/pincer-test/models/all-MiniLM-L6-v2); without it they say
"not measured". See docs/src/measurements.md for the last table.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import builds  # noqa: E402
import rows  # noqa: E402
import table  # noqa: E402


@dataclass
class Context:
    """What every measuring program of a run shares."""

    harness: Path
    raw: Path
    run_dir: Path
    model: Path | None
    window: float
    measurement_time: int
    # Chunks of the idle group's index (the local model's index too).
    idle_chunks: int = 10_000

    def prepared(self, build, name):
        """A folder for homes a program prepares once per build (a 10k
        index): kept in the cache for the baseline, in the run for this tree."""
        if build.src == builds.ROOT:
            path = self.run_dir / "prepared" / name
        else:
            path = builds.CACHE / "prepared" / build.rev / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Linux {platform.release()}"


def model_dir():
    peers = Path(os.environ.get("PINCER_TEST_PEERS") or Path.home() / ".cache" / "pincer-test")
    path = peers / "models" / "all-MiniLM-L6-v2"
    return path if (path / "model.safetensors").is_file() else None


def measure(group, head, base, n, ctx):
    """Runs `group` n times per build, alternating which goes first."""
    got = {"head": {"runs": []}}
    if base:
        got["base"] = {"runs": []}
    for i in range(n):
        order = [("head", head), ("base", base)] if i % 2 == 0 else [("base", base), ("head", head)]
        for side, build in order:
            if build is None or got[side].get("skipped"):
                continue
            builds.log(f"[{group.name}] run {i + 1}/{n}: {build.label}")
            try:
                got[side]["runs"].append(group.measure(build, ctx))
            except rows.Skip as e:
                got[side]["skipped"] = str(e)
                builds.log(f"[{group.name}] {build.label}: not measured: {e}")
            except Exception as e:  # a measuring program broke: the row says so, the run goes on
                got[side]["skipped"] = f"{type(e).__name__}: {e}"
                with open(ctx.raw / "errors.log", "a") as f:
                    f.write(f"[{group.name}] {build.label}\n{traceback.format_exc()}\n")
                builds.log(f"[{group.name}] {build.label}: failed: {e} (see {ctx.raw / 'errors.log'})")
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="the commit to compare with (built once, cached)")
    ap.add_argument("--runs", type=int, default=3, help="runs per build of each group (default 3; the slow groups cap it)")
    ap.add_argument("--only", default="", help="comma-separated groups: " + ",".join(g.name for g in rows.GROUPS))
    ap.add_argument("--peers", action="store_true", help="add OpenClaw and ZeroClaw side by side (installs them once)")
    ap.add_argument("--out", type=Path, help="where to write table.md and table.json (default target/bench/<date>)")
    ap.add_argument("--release-benches", action="store_true", help="build the criterion benches in `release` (fat LTO) instead of `quick-release`")
    ap.add_argument("--window", type=float, default=20.0, help="seconds of each idle window of the schedules group (default 20)")
    ap.add_argument("--idle-chunks", type=int, default=10_000,
                    help="chunks of the idle group's index, and of the one the local model indexes (default 10000)")
    ap.add_argument("--no-model", action="store_true",
                    help="leave out the local model's rows (each waits a minute for the model's idle unload)")
    ap.add_argument("--measurement-time", type=int, default=3, help="criterion's measurement time per benchmark, s (default 3)")
    args = ap.parse_args()

    started = time.monotonic()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    run_dir = (args.out or builds.ROOT / "target" / "bench" / stamp).resolve()
    raw = run_dir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    wanted = [g for g in rows.GROUPS if not args.only or g.name in args.only.split(",")]
    if not wanted:
        sys.exit(f"--only names no group; the groups: {', '.join(g.name for g in rows.GROUPS)}")

    try:
        base = builds.baseline(args.baseline, run_dir, args.release_benches)
        head = builds.head(run_dir, args.release_benches)
        harness = builds.harness(run_dir)
    except (builds.BuildError, subprocess.CalledProcessError) as e:
        sys.exit(f"bench: {e}")
    built = time.monotonic()

    ctx = Context(harness=harness, raw=raw, run_dir=run_dir, model=None if args.no_model else model_dir(),
                  window=args.window, measurement_time=args.measurement_time,
                  idle_chunks=args.idle_chunks)
    if ctx.model is None:
        builds.log("no local embedding model (--no-model, or run `bash tests/setup.sh`): its rows will say \"not measured\"")
    results = {}
    for group in wanted:
        n = min(args.runs, group.max_runs)
        results[group.name] = measure(group, head, base, n, ctx)
        (raw / "results.json").write_text(json.dumps(results, indent=1, default=str))

    peer_table = None
    if args.peers:
        import peers_lane  # noqa: PLC0415 (only with --peers)

        peer_table = peers_lane.run(head, ctx, args.runs)

    meta = {
        "head": head.label, "baseline": base.label, "runs": args.runs,
        "when": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "minutes": (time.monotonic() - started) / 60,
        "build_minutes": (built - started) / 60,
        "profile": "release binaries; criterion benches in " + ("release" if args.release_benches else "quick-release"),
        "idle_index": "10k-chunk index" if args.idle_chunks == 10_000
        else f"{args.idle_chunks:,}-chunk index (`--idle-chunks {args.idle_chunks}`)",
    }
    md = table.markdown(wanted, results, meta)
    if peer_table:
        md += "\n" + peer_table["markdown"]
    (run_dir / "table.md").write_text(md)
    doc = json.loads(table.as_json(wanted, results, meta))
    if peer_table:
        doc["peers"] = peer_table["json"]
    (run_dir / "table.json").write_text(json.dumps(doc, indent=1, default=str))
    print(md)
    print(f"written: {run_dir / 'table.md'} and table.json", file=sys.stderr)


if __name__ == "__main__":
    main()
