"""`--peers`: pincer beside OpenClaw and ZeroClaw, each measured the same
way (bench/peers.py) in alternating runs against the same zero-latency
scripted model, and the ratios peer / pincer.
"""

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import builds
import peers

METRICS = [
    ("first_ready_ms", "first start → ready (creates its state)", "ms"),
    ("ready_ms", "start → ready (state present)", "ms"),
    ("idle_rss_mb", "idle RSS, whole process tree", "MB"),
    ("rss_after_10_turns_mb", "RSS after 10 turns, whole process tree", "MB"),
    ("cli_turn_ms", "one CLI turn, end to end", "ms"),
    ("install_mb", "install size", "MB"),
]


def scripted_model(harness, raw):
    """Starts the scripted model; answers (process, base URL)."""
    out = open(raw / "peers-llm.url", "w+")
    proc = subprocess.Popen([str(harness / "pincer-scripted-llm"), "pong"], stdout=out, stderr=subprocess.DEVNULL)
    for _ in range(200):
        out.seek(0)
        url = out.read().strip()
        if url:
            return proc, url
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the scripted model did not print its URL")


def run(head, ctx, n):
    sides = {"pincer": peers.pincer(head.bin)}
    why = {}
    for name in peers.PEERS:
        builds.log(f"[peers] installing {name} (once; cached)…")
        try:
            sides[name] = peers.install(name, builds.CACHE / "peers")
        except peers.NotMeasured as e:
            why[name] = str(e)
            builds.log(f"[peers] {name}: not measured: {e}")
    proc, url = scripted_model(ctx.harness, ctx.raw)
    got = {name: [] for name in sides}
    try:
        names = list(sides)
        for i in range(n):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                if name in why:
                    continue
                builds.log(f"[peers] run {i + 1}/{n}: {name}")
                with tempfile.TemporaryDirectory(prefix=f"peer-{name}-", dir=ctx.raw) as work:
                    try:
                        got[name].append(sides[name].run(url, Path(work)))
                    except peers.NotMeasured as e:
                        why[name] = str(e)
                        builds.log(f"[peers] {name}: not measured: {e}")
    finally:
        proc.kill()
    figures = {}
    for name, runs in got.items():
        if name in why:
            continue
        figures[name] = {key: med([r.get(key) for r in runs]) for key, _, _ in METRICS}
        figures[name]["install_mb"] = sides[name].install_mb()
    return {"markdown": markdown(sides, figures, why, n), "json": {"figures": figures, "not_measured": why,
            "versions": {k: getattr(v, "version", "") for k, v in sides.items()}}}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def markdown(sides, figures, why, n):
    names = list(sides)
    head = ["what"] + [f"{k} {getattr(sides[k], 'version', '')}".strip() for k in names] + \
        [f"{k} / pincer" for k in names if k != "pincer"]
    lines = [f"Peers, median of {n} runs each, alternating, against the same scripted model:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = [f"{k}: {sides[k].note}" for k in names if getattr(sides[k], "note", "")]
    for key, what, unit in METRICS:
        cells = [what]
        for k in names:
            v = figures.get(k, {}).get(key)
            cells.append(f"{v:.1f} {unit}" if v is not None else f"not measured: {why.get(k, 'no figure')}")
        base = figures.get("pincer", {}).get(key)
        for k in names:
            if k == "pincer":
                continue
            v = figures.get(k, {}).get(key)
            cells.append(f"{v / base:.1f}×" if v is not None and base else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + notes) + "\n"
