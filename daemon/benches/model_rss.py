#!/usr/bin/env python3
"""Idle RSS of pincerd with and without the local embedding model (issue 28).

README's first command fetches all-MiniLM-L6-v2; a daemon with the model
loads it to index the workspace's notes at start and releases it after
`[memory] release_model_after_s` without use. This starts a zero-config
pincerd (a MEMORY.md in its workspace, no provider reachable) in a fresh
home, without the model and then with it, alternating, and samples VmRSS
and RssAnon at fixed times: after start (the start-up indexing loads the
model and lets it go), after a search at SEARCH_AT seconds (`pincer memory
search`, which loads it again and keeps it), and after its idle release
(RELEASE seconds here, so the run stays short; the watcher checks every
30 s).

    python3 daemon/benches/model_rss.py target/release/pincerd [ROUNDS]

(`pincer` is taken from beside `pincerd`.)

The model is taken from tests/setup.sh's cache
(~/.cache/pincer-test/models/all-MiniLM-L6-v2, or $PINCER_TEST_PEERS).
Prints a Markdown table: the median of ROUNDS starts (default 3) and the
range, per sample time.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RELEASE = 30
SEARCH_AT = 6.0
SAMPLES = (1.5, 5.0, 10.0, 20.0, SEARCH_AT + RELEASE + 45.0, SEARCH_AT + RELEASE + 60.0)


def status_mb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


def model_dir():
    peers = os.environ.get("PINCER_TEST_PEERS") or os.path.expanduser("~/.cache/pincer-test")
    path = os.path.join(peers, "models", "all-MiniLM-L6-v2")
    if not os.path.isfile(os.path.join(path, "model.safetensors")):
        sys.exit(f"model_rss.py: no model at {path}; run `bash tests/setup.sh` first")
    return path


def search(pincer, home):
    subprocess.run(
        [pincer, "--home", home, "memory", "search", "tea"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def one_start(pincerd, with_model):
    home = tempfile.mkdtemp(prefix="pincer-model-rss-")
    try:
        os.makedirs(os.path.join(home, "workspace"))
        with open(os.path.join(home, "workspace", "MEMORY.md"), "w") as f:
            f.write("# Notes\n\nAda likes tea. The meeting moved to Friday.\n")
        if with_model:
            shutil.copytree(model_dir(), os.path.join(home, "models", "all-MiniLM-L6-v2"))
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(f"[memory]\nrelease_model_after_s = {RELEASE}\n")
        env = dict(
            os.environ,
            PINCER_HOME=home,
            OPENAI_API_KEY="sk-bench",
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        )
        daemon = subprocess.Popen(
            [pincerd, "--home", home],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = time.monotonic()
        samples = []
        try:
            searched = False
            for at in SAMPLES:
                if not searched and at > SEARCH_AT:
                    time.sleep(max(0.0, SEARCH_AT - (time.monotonic() - started)))
                    search(os.path.join(os.path.dirname(pincerd), "pincer"), home)
                    searched = True
                time.sleep(max(0.0, at - (time.monotonic() - started)))
                samples.append(
                    (status_mb(daemon.pid, "VmRSS"), status_mb(daemon.pid, "RssAnon"))
                )
        finally:
            daemon.terminate()
            daemon.wait()
        return samples
    finally:
        shutil.rmtree(home, ignore_errors=True)


def cell(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pincerd = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runs = {False: [], True: []}
    for _ in range(rounds):
        for with_model in (False, True):
            runs[with_model].append(one_start(pincerd, with_model))
    print(f"pincerd idle, zero-config with a MEMORY.md; median (range) of {rounds} starts, MB")
    print(f"(release_model_after_s = {RELEASE})\n")
    print("| after start | RSS, no model | RSS, model installed | anonymous, no model | anonymous, model installed |")
    print("|---|---|---|---|---|")
    for i, at in enumerate(SAMPLES):
        without = [run[i] for run in runs[False]]
        with_ = [run[i] for run in runs[True]]
        label = f"{at:g} s" + (" (searched at %g s)" % SEARCH_AT if at > SEARCH_AT else "")
        print(
            f"| {label} | {cell([s[0] for s in without])} | {cell([s[0] for s in with_])} "
            f"| {cell([s[1] for s in without])} | {cell([s[1] for s in with_])} |"
        )


if __name__ == "__main__":
    main()
