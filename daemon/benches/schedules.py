#!/usr/bin/env python3
"""What schedules and triggers cost an idle pincerd (SPEC §13a, issue 26):
1,000 schedules and 100 file triggers, none due in the window, against
the same daemon with nothing scheduled, in the same run.

- wake-ups: context switches of all of pincerd's threads per minute
  (voluntary + involuntary, from /proc/PID/task/*/status) while idle. The
  memory watcher's own ticks are named apart by running each variant also
  with `[memory] enabled = false`: what the schedules and triggers add is
  the difference between the two memory-off rows.
- RSS added: VmRSS with the 1,000 + 100 minus VmRSS without (budget 1 MB),
  each row the median of 3 starts; the headline figures from 6 starts of
  each, alternating with the baseline (a start's code pages vary by some
  0.5 MB),
  split into anonymous memory (what the daemon holds) and file pages (the
  code of the scheduler, the cron and time-zone crates, notify, touched
  once and shared with the page cache). A row with 2 schedules and 1
  trigger tells what the first ones cost (mostly code) from what the
  thousand add.
- fire precision: 5 schedules firing every 2 s (6-field cron) on an
  otherwise idle daemon; the delay of each fire is its ledger's claim
  time minus its due instant (milliseconds); p50, p99 and max (budget:
  p99 <= 50 ms).

Usage: python3 daemon/benches/schedules.py PINCERD PINCER [window_s]
(daemon/benches/schedules.sh builds the release binaries and calls it).
"""

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

# Set from the command line, or by bench/run.py, which imports this file.
PINCERD = PINCER = None
WINDOW = 60.0

SCHEDULES = 1000
TRIGGERS = 100
STARTS = 3
PAIRS = 6


def switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def rss_kb(pid):
    """VmRSS and its parts, in kB: RssAnon (memory the daemon holds) and
    RssFile (pages of the binary and libraries it has touched, shared
    with the page cache)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1])
    return out


def cli(home, *args):
    return subprocess.run([PINCER, "--home", home, *args], capture_output=True, text=True)


def start(home):
    p = subprocess.Popen([PINCERD, "--home", home], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while cli(home, "status").returncode != 0:
        if time.time() > deadline:
            raise SystemExit(f"pincerd did not start in {home}")
        time.sleep(0.05)
    return p


def config(schedules, triggers, memory):
    text = "" if memory else "[memory]\nenabled = false\n"
    if schedules:
        for i in range(schedules):
            # None falls due in the window: on 1 January, or in 2099.
            if i % 2:
                text += f'[schedules.s{i}]\ncron = "{i % 60} 3 1 1 *"\ntz = "UTC"\ncommand = "true"\n'
            else:
                text += f'[schedules.s{i}]\nat = "2099-01-01 00:00"\ntz = "UTC"\ncommand = "true"\n'
    for i in range(triggers):
        text += f'[triggers.t{i}]\nfiles = "in{i}/**"\ncommand = "true"\n'
    return text


def idle(schedules, triggers, memory, window):
    """One start: wake-ups per minute over `window` seconds (None for no
    window) and the RSS once settled."""
    with tempfile.TemporaryDirectory(prefix="pincer-sched-bench-") as home:
        os.makedirs(f"{home}/workspace", exist_ok=True)
        for i in range(TRIGGERS):
            os.makedirs(f"{home}/workspace/in{i}", exist_ok=True)
        with open(f"{home}/config.toml", "w") as f:
            f.write(config(schedules, triggers, memory))
        p = start(home)
        try:
            if schedules:
                # Read the store itself: a listing over gRPC would make
                # pincerd allocate (and keep) memory the schedules do not.
                deadline = time.time() + 120
                while True:
                    try:
                        db = sqlite3.connect(f"file:{home}/state/schedules.db?mode=ro", uri=True)
                        n = db.execute("SELECT COUNT(*) FROM schedules").fetchone()[0]
                        db.close()
                    except sqlite3.Error:
                        n = 0
                    if n >= schedules:
                        break
                    if time.time() > deadline:
                        raise SystemExit("the schedules never all came in")
                    time.sleep(0.5)
            time.sleep(5)  # settle: start-up work, first index pass
            wake = None
            if window:
                s0 = switches(p.pid)
                time.sleep(window)
                wake = (switches(p.pid) - s0) * 60.0 / window
            return wake, rss_kb(p.pid)
        finally:
            p.terminate()
            p.wait()


def measured(schedules, triggers, memory, window):
    """Wake-ups from one start's window; each RSS figure the median of
    STARTS starts (a start's RSS varies by some 100 kB)."""
    wake, first = idle(schedules, triggers, memory, window)
    rss = [first] + [idle(schedules, triggers, memory, None)[1] for _ in range(STARTS - 1)]
    return wake, {k: statistics.median(r[k] for r in rss) for k in first}


def precision():
    with tempfile.TemporaryDirectory(prefix="pincer-sched-bench-") as home:
        text = "[memory]\nenabled = false\n"
        for i in range(5):
            text += f'[schedules.p{i}]\ncron = "*/2 * * * * *"\ntz = "UTC"\ncommand = "true"\n'
        with open(f"{home}/config.toml", "w") as f:
            f.write(text)
        p = start(home)
        try:
            time.sleep(WINDOW)
        finally:
            p.terminate()
            p.wait()
        db = sqlite3.connect(f"{home}/state/schedules.db")
        delays = [
            c - d
            for (c, d) in db.execute(
                "SELECT claimed_at, due_at FROM fires WHERE state != 'skipped' AND attempt = 1"
            )
        ]
        return sorted(delays)


def paired(base, load, n):
    """RSS added by `load` over `base` (each a (schedules, triggers,
    memory) tuple) over `n` starts of each, alternating so that both see
    the same machine: the median and range of the differences, per
    figure, in MB."""
    diffs = {}
    for _ in range(n):
        a = idle(*base, None)[1]
        b = idle(*load, None)[1]
        for k in a:
            diffs.setdefault(k, []).append((b[k] - a[k]) / 1024)
    return {k: (statistics.median(v), min(v), max(v)) for k, v in diffs.items()}


def main():
    rows = []
    for schedules, triggers, memory, window, name in [
        (0, 0, False, WINDOW, "nothing scheduled, memory off"),
        (2, 1, False, None, "2 schedules (a cron, an at) + 1 file trigger, memory off"),
        (SCHEDULES, 0, False, None, f"{SCHEDULES:,} schedules, memory off"),
        (0, TRIGGERS, False, None, f"{TRIGGERS} file triggers, memory off"),
        (SCHEDULES, TRIGGERS, False, WINDOW, f"{SCHEDULES:,} schedules + {TRIGGERS} file triggers, memory off"),
        (0, 0, True, WINDOW, "nothing scheduled, memory watcher on (default)"),
        (SCHEDULES, TRIGGERS, True, WINDOW, f"{SCHEDULES:,} schedules + {TRIGGERS} file triggers, memory watcher on"),
    ]:
        wake, rss = measured(schedules, triggers, memory, window)
        rows.append((name, wake, rss))
    delays = precision()
    print(f"idle window {WINDOW:.0f} s; RSS the median of {STARTS} starts per row")
    print()
    print("| pincerd (release) | wake-ups/min (all threads) | RSS | anonymous | file (code) |")
    print("|---|---|---|---|---|")
    for name, wake, rss in rows:
        shown = "-" if wake is None else f"{wake:.0f}"
        print(
            f"| {name} | {shown} | {rss['VmRSS'] / 1024:.1f} MB"
            f" | {rss['RssAnon'] / 1024:.1f} MB | {rss['RssFile'] / 1024:.1f} MB |"
        )
    print()
    ours = rows[4][1] - rows[0][1]
    watcher = rows[5][1] - rows[0][1]
    print(f"schedules + triggers add {ours:+.0f} wake-ups/min (memory off); the memory watcher's own: {watcher:+.0f}/min")
    for (label, a, b) in [
        (f"{SCHEDULES:,} schedules + {TRIGGERS} triggers over nothing (memory on, the default)", 5, 6),
        (f"{SCHEDULES:,} schedules + {TRIGGERS} triggers over nothing (memory off)", 0, 4),
        (f"{SCHEDULES:,} schedules alone (memory off)", 0, 2),
        (f"{TRIGGERS} triggers alone (memory off)", 0, 3),
        ("the first 2 schedules + 1 trigger over nothing (memory off)", 0, 1),
        (f"the other {SCHEDULES - 2:,} schedules + {TRIGGERS - 1} triggers (memory off)", 1, 4),
    ]:
        d = {k: (rows[b][2][k] - rows[a][2][k]) / 1024 for k in rows[a][2]}
        print(
            f"RSS added by {label}: {d['VmRSS']:+.2f} MB"
            f" = anonymous {d['RssAnon']:+.2f} MB + code pages touched {d['RssFile']:+.2f} MB"
        )
    for memory, label in [(True, "memory on, the default"), (False, "memory off")]:
        d = paired((0, 0, memory), (SCHEDULES, TRIGGERS, memory), PAIRS)
        shown = " + ".join(
            f"{what} {d[k][0]:+.2f} MB ({d[k][1]:+.2f} to {d[k][2]:+.2f})"
            for k, what in [("RssAnon", "anonymous"), ("RssFile", "code pages touched")]
        )
        print(
            f"RSS added, {PAIRS} alternating starts ({label}): median {d['VmRSS'][0]:+.2f} MB"
            f" ({d['VmRSS'][1]:+.2f} to {d['VmRSS'][2]:+.2f}) = {shown}"
        )
    print("budget: 1 MB added")
    if delays:
        p50 = statistics.median(delays)
        p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
        print(f"fire delay over {len(delays)} fires: p50 {p50:.0f} ms, p99 {p99} ms, max {delays[-1]} ms (budget p99 <= 50 ms)")
    else:
        print("fire delay: no fires recorded")



if __name__ == "__main__":
    PINCERD, PINCER = sys.argv[1], sys.argv[2]
    WINDOW = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    main()
