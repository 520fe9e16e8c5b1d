#!/usr/bin/env python3
"""Prints one table from the results of several runs of the bench command
(`target/bench/<date>/raw/results.json`), for a run whose groups were run
in more than one invocation (say, the slow groups with fewer runs):

    python3 bench/merge.py target/bench/A target/bench/B > table.md

A group measured in more than one of them is taken from the last one
named. The header says which runs the figures come from.
"""

import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rows  # noqa: E402
import run  # noqa: E402
import table  # noqa: E402


def main():
    dirs = [Path(d) for d in sys.argv[1:]]
    if not dirs:
        sys.exit(__doc__)
    results, metas = {}, []
    for d in dirs:
        results.update(json.loads((d / "raw" / "results.json").read_text()))
        meta = d / "table.json"
        if meta.exists():
            metas.append(json.loads(meta.read_text())["meta"])
    # Derived rows again from the stored criterion figures: a run made
    # before a derivation changed shows what the code says now.
    for side in results.get("agent", {}).values():
        for r in side.get("runs", []):
            ids = {k.removeprefix("criterion:"): v for k, v in r.items() if k.startswith("criterion:")}
            r.update(rows.agent_derived(ids))
    groups = [g for g in rows.GROUPS if g.name in results]
    first = metas[0] if metas else {}
    meta = {
        "head": first.get("head", "this tree"),
        "baseline": first.get("baseline", "the baseline"),
        "runs": " / ".join(str(m.get("runs")) for m in metas) or "see n",
        "when": first.get("when", datetime.datetime.now().strftime("%Y-%m-%d %H:%M")),
        "machine": first.get("machine") or run.machine(),
        "minutes": sum(m.get("minutes", 0) for m in metas),
        "build_minutes": sum(m.get("build_minutes", 0) for m in metas),
        # Runs written before the label named their index measured 10k.
        "idle_index": next((m["idle_index"] for m in metas if "idle_index" in m), "10k-chunk index"),
    }
    print(table.markdown(groups, results, meta), end="")
    print(f"\nMerged from {', '.join(str(d) for d in dirs)}.")


if __name__ == "__main__":
    main()
