"""The bench command's table: a row's median over its runs, the spread,
the ratio to the baseline, the budget and met/missed, as Markdown and as
JSON.

Noise: runs of one build on this 2-core machine differ by up to ~20 %
(README, docs/src/measurements.md). A row is called **slower** (or
**faster**) than the baseline only when the two builds' ranges do not
overlap and the medians differ by more than 5 %; otherwise "same".
"""

import json
import statistics

import rows


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def verdict(head, base):
    """"slower", "faster" or "same" (lower is better for every row but
    the exactly-once share, whose baseline comparison is its own)."""
    if not head or not base:
        return ""
    a, b = head["median"], base["median"]
    if b == 0:
        return "same" if a == 0 else ("slower" if a > 0 else "faster")
    if head["min"] > base["max"] and a > b * 1.05:
        return "slower"
    if head["max"] < base["min"] and a < b * 0.95:
        return "faster"
    return "same"


def fmt(value, row):
    if value is None:
        return "—"
    if row.kind == "all":
        return "all" if value >= 1.0 else f"{value * 100:.1f} %"
    return f"{value:.{row.decimals}f}"


def cell(s, row):
    if not s:
        return "not measured"
    unit = f" {row.unit}" if row.unit and row.kind != "all" else ""
    if s["n"] > 1 and row.kind != "all":
        return f"{fmt(s['median'], row)}{unit} ({fmt(s['min'], row)}–{fmt(s['max'], row)})"
    return f"{fmt(s['median'], row)}{unit}"


def build_rows(groups, results):
    """[(group title, row, head summary, base summary, ratio, verdict, met)]."""
    out = []
    for group in groups:
        got = results.get(group.name)
        if got is None:
            continue
        rows = list(group.rows)
        known = {r.key for r in rows}
        # Benchmarks a build's bench has that the catalogue does not name
        # (new cases: a breakdown's parts) come after the group's rows.
        extra = sorted({k for side in got.values() for run in side["runs"] for k in run if k not in known})
        for key in extra:
            from rows import Row  # noqa: PLC0415
            rows.append(Row(key, "  " + key.removeprefix("criterion:"), "ms", decimals=3))
        for row in rows:
            head = summary([run.get(row.key) for run in got["head"]["runs"]])
            base = summary([run.get(row.key) for run in got["base"]["runs"]]) if "base" in got else None
            ratio = head["median"] / base["median"] if head and base and base["median"] else None
            out.append((group.title, row, head, base, ratio, verdict(head, base) if row.kind != "all" else "", row.met(head["median"]) if head else None,
                        got["head"].get("skipped"), got.get("base", {}).get("skipped")))
    return out


def markdown(groups, results, meta):
    lines = [
        f"Bench run of {meta['head']} against {meta['baseline']}, {meta['when']}, on {meta['machine']}.",
        f"Each figure: the median of the runs (lowest–highest); N = {meta['runs']} runs per build, "
        "fewer for the slow groups (the n column), the two builds alternating.",
        f"The command took {meta['minutes']:.0f} minutes ({meta['build_minutes']:.0f} of them building).",
        "",
        "| what | this tree | baseline | ratio | n | budget | |",
        "|---|---|---|---|---|---|---|",
    ]
    title = None
    for (group_title, row, head, base, ratio, change, met, hskip, bskip) in build_rows(groups, results):
        if group_title != title:
            lines.append(f"| **{group_title}** | | | | | | |")
            title = group_title
        status = {True: "met", False: "**missed**", None: ""}[met]
        if change in ("slower", "faster"):
            status = f"{status}, {change}".strip(", ")
        h = cell(head, row) if head else (f"not measured: {hskip}" if hskip else "—")
        b = cell(base, row) if base else (f"not measured: {bskip}" if bskip else "—")
        r = f"{ratio:.2f}×" if ratio is not None and row.kind != "all" else ""
        n = str(head["n"]) if head else ""
        what = row.what.replace(rows.IDLE_INDEX, meta["idle_index"])
        lines.append(f"| {what} | {h} | {b} | {r} | {n} | {row.budget_text()} | {status} |")
    return "\n".join(lines) + "\n"


def as_json(groups, results, meta):
    out = []
    for (group_title, row, head, base, ratio, change, met, hskip, bskip) in build_rows(groups, results):
        out.append({
            "group": group_title, "key": row.key,
            "what": row.what.replace(rows.IDLE_INDEX, meta["idle_index"]).strip(), "unit": row.unit,
            "head": head, "baseline": base, "ratio": ratio, "change": change,
            "budget": row.budget_text(), "met": met,
            "head_not_measured": hskip, "baseline_not_measured": bskip,
        })
    return json.dumps({"meta": meta, "rows": out, "raw": results}, indent=1, default=str)
