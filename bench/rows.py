"""What the bench command measures: every row of SPEC §14 and the rows
issue 28 adds, grouped by the program that measures them.

A *group* is one measuring program run once against one build; it
answers a value for each of its rows (`{row key: value}`). The runner
runs each group N times per build, alternating the two builds, and a
row's figure is the median of its N values (with the lowest and
highest). A row's value may be derived from others of the same run (the
sandbox's added cost is `sandboxed − bare` of one criterion run), so the
pair meets the same noise.

The programs:
- `pincer-startup`, `pincer-idle-rss`, `pincer-telegram-load`,
  `pincer-discord-load` (`tests/support/bin`, built once from this tree
  and pointed at each build's `pincerd`);
- each build's own criterion benches (`daemon/benches`,
  `daemon/memory/benches`), read from their `estimates.json` (the median
  point estimate);
- `daemon/benches/schedules.py`, imported;
- file sizes.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Skip(Exception):
    """A group that cannot run against a build (a bench the baseline
    lacks, a peer missing); the message says why."""


@dataclass(frozen=True)
class Row:
    key: str
    what: str
    unit: str  # "ms", "MB", "/min", "" (a count), "msg"
    budget: float | None = None  # the upper bound; None: reported only
    shown: str = ""  # the budget as the table shows it, when not "≤ budget unit"
    decimals: int = 1
    # "all": the value is a share of messages answered exactly once, 1.0 = all.
    kind: str = "upper"

    def budget_text(self):
        if self.shown:
            return self.shown
        if self.kind == "all":
            return "all, once"
        if self.budget is None:
            return ""
        return f"≤ {self.budget:g} {self.unit}".strip()

    def met(self, value):
        if value is None:
            return None
        if self.kind == "all":
            return value >= 1.0
        if self.budget is None:
            return None
        return value <= self.budget


def env_of(ctx):
    env = dict(os.environ)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PINCER_HOME", "PINCER_MODEL"):
        env.pop(var, None)
    return env


def run_json(cmd, ctx, name, timeout):
    """Runs a measuring program that writes JSON to the path it is given
    after `--json`; its output goes to the run's log."""
    out = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".json", dir=ctx.raw)[1])
    with open(ctx.raw / f"{name}.log", "a") as log:
        log.write(f"\n$ {' '.join(map(str, cmd))} --json {out}\n")
        log.flush()
        done = subprocess.run(
            [*map(str, cmd), "--json", str(out)],
            stdout=log, stderr=subprocess.STDOUT, env=env_of(ctx), timeout=timeout,
        )
    text = out.read_text() if out.exists() else ""
    if not text:
        raise Skip(f"{Path(str(cmd[0])).name} wrote no figures (exit {done.returncode}); see {ctx.raw / (name + '.log')}")
    figures = json.loads(text)
    figures["_exit"] = done.returncode
    return figures


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# --- start, idle memory, the CLI --------------------------------------------

START_ROWS = [
    Row("ready_10k", "`pincerd` start → socket answers `status` (10k-chunk index present)", "ms", 20),
    Row("accept_10k", "  of which: start → socket accepts", "ms"),
    Row("send", "`pincer send` round trip, zero-latency model (whole process)", "ms", 10),
]


def startup(build, ctx):
    figures = run_json(
        [ctx.harness / "pincer-startup", "--pincerd", build.exe("pincerd"), "--pincer", build.exe("pincer"),
         "--runs", "5", "--chunks", "10000", "--prepared", ctx.prepared(build, "startup")],
        ctx, f"startup-{build.rev}", 1800,
    )
    return {
        "ready_10k": med(figures.get("ready_ms", [])),
        "accept_10k": med(figures.get("accept_ms", [])),
        "send": med(figures.get("send_ms", [])),
    }


# The idle group's index as its rows name it; table.py puts in the size
# the run used (`--idle-chunks`).
IDLE_INDEX = "<idle index>"

IDLE_ROWS = [
    Row("idle_both", f"idle RSS, both bridges connected (fakes), {IDLE_INDEX}", "MB", 20),
    Row("idle_both_model", "  the same with the local embedding model installed: after start", "MB", 20),
    Row("idle_model_after", "  … a minute after the model's idle unload", "MB", 20),
    Row("idle_model_loaded", "  … while a search has the model loaded", "MB"),
    Row("model_load", "  loading the model (all-MiniLM-L6-v2), pincerd's log", "ms", decimals=0),
]


def idle_rss(build, ctx):
    cmd = [ctx.harness / "pincer-idle-rss", "--pincerd", build.exe("pincerd"), "--rounds", "1",
           "--setups", "both", "--chunks", str(ctx.idle_chunks), "--prepared", ctx.prepared(build, "idle")]
    if ctx.model:
        cmd += ["--model", ctx.model]
    figures = run_json(cmd, ctx, f"idle-{build.rev}", 3600)
    first = lambda key, field="rss_mb": med(figures.get(key, {}).get(field, []))  # noqa: E731
    return {
        "idle_both": first("both"),
        "idle_both_model": first("both_model"),
        "idle_model_after": first("model_after_unload"),
        "idle_model_loaded": first("model_loaded"),
        "model_load": med(figures.get("model_load_ms", [])),
    }


# --- chats ----------------------------------------------------------------------


def chat_rows(platform, chats):
    p = platform.lower()
    return [
        Row(f"{p}_once", f"200 concurrent {chats} through {platform}: answered exactly once", "", kind="all", decimals=3),
        Row(f"{p}_p50", f"  added latency p50 (against the same turns through the socket API)", "ms"),
        Row(f"{p}_p99", f"  added latency p99", "ms", 100),
        Row(f"{p}_rss", f"  peak RSS during the load", "MB", 48),
    ]


def chat_load(program, platform):
    def measure(build, ctx):
        f = run_json([ctx.harness / program, "--pincerd", build.exe("pincerd"), "--rounds", "1"],
                     ctx, f"{platform}-{build.rev}", 1800)
        sent = f["sent"] + f["burst_sent"]
        good = f["once"] + f["burst_settled"] if f["unmatched"] == 0 and f["problems"] == 0 else 0
        return {
            f"{platform}_once": good / sent if sent else None,
            f"{platform}_p50": f["added_paced_p50_ms"],
            f"{platform}_p99": f["added_paced_p99_ms"],
            f"{platform}_rss": f["bridge"]["peak_mb"],
        }
    return measure


# --- criterion benches ------------------------------------------------------------


def criterion(build, ctx, bench, filt=None, extra=(), env_extra=None):
    """{benchmark id: median ms} of one run of a build's criterion bench."""
    exe = build.benches.get(bench)
    if not exe:
        raise Skip(f"{build.label} has no `{bench}` bench")
    with tempfile.TemporaryDirectory(prefix="criterion-", dir=ctx.raw) as home:
        cmd = [exe, "--bench", "--warm-up-time", "1", "--measurement-time", str(ctx.measurement_time), *extra]
        if filt:
            cmd.append(filt)
        env = dict(env_of(ctx), CRITERION_HOME=home, **(env_extra or {}))
        with open(ctx.raw / f"criterion-{bench}-{build.rev}.log", "a") as log:
            log.write(f"\n$ {' '.join(map(str, cmd))}\n")
            log.flush()
            done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=build.src / bench_dir(bench), timeout=3600)
        if done.returncode != 0:
            raise Skip(f"the `{bench}` bench of {build.label} failed; see {log.name}")
        out = {}
        for est in Path(home).rglob("new/estimates.json"):
            meta = json.loads((est.parent / "benchmark.json").read_text())
            out[meta["full_id"]] = json.loads(est.read_text())["median"]["point_estimate"] / 1e6
        return out


def bench_dir(bench):
    return "daemon/memory" if bench == "hybrid_search" else "daemon"


AGENT_ROWS = [
    Row("agent_1", "agent overhead, a one-call turn (new session; end-of-turn fsync included)", "ms", decimals=2),
    Row("agent_call", "agent overhead per further model call, fsync apart (two-call turn − one-call turn, sessions on tmpfs; on disk where a build lacks those cases)", "ms", 0.5, decimals=2),
    Row("agent_call_disk", "  the same on disk (each turn's fsync included: noisy)", "ms", decimals=2),
    Row("agent_skills", "  a one-call turn of an agent with 6 bootstrap files and 3 skills", "ms", decimals=2),
]


def agent_derived(ids):
    """The agent rows from the `agent_overhead` bench's ids (ms); also used
    by bench/merge.py on stored results."""
    diff = lambda a, b: ids[a] - ids[b] if a in ids and b in ids else None  # noqa: E731
    disk = diff("agent_turn/2_model_calls_with_ls_tool", "agent_turn/1_model_call_text")
    tmpfs = diff("agent_turn/2_model_calls_with_ls_tool_tmpfs", "agent_turn/1_model_call_text_tmpfs")
    return {
        "agent_1": ids.get("agent_turn/1_model_call_text"),
        "agent_call": tmpfs if tmpfs is not None else disk,
        "agent_call_disk": disk,
        "agent_skills": ids.get("agent_turn/1_model_call_text_bootstrap_and_skills"),
    }


def agent(build, ctx):
    ids = criterion(build, ctx, "agent_overhead")
    out = agent_derived(ids)
    # Parts and new cases appear as rows of their own (`agent_turn/…`).
    for full_id, ms in ids.items():
        out.setdefault("criterion:" + full_id, ms)
    return out


SEARCH_ROWS = [
    Row("search_10k", "hybrid search, 10k chunks × 384-d (index only)", "ms", 3, decimals=2),
    Row("search_10k_vec", "  vector leg", "ms", decimals=2),
    Row("search_10k_text", "  full-text leg", "ms", decimals=2),
    Row("search_100k", "hybrid search, 100k chunks × 384-d (index only)", "ms", 12, decimals=2),
    Row("search_100k_vec", "  vector leg", "ms", decimals=2),
    Row("search_100k_text", "  full-text leg", "ms", decimals=2),
    Row("query_embedding", "embedding the query (all-MiniLM-L6-v2)", "ms", decimals=1),
    Row("save_to_search", "`MEMORY.md` saved → new text found by search", "ms", 500, decimals=0),
]


def search(build, ctx):
    ids = criterion(build, ctx, "hybrid_search")
    out = {}
    for size, label in [(10000, "10k"), (100000, "100k")]:
        out[f"search_{label}"] = ids.get(f"memory_search/hybrid/{size}")
        out[f"search_{label}_vec"] = ids.get(f"memory_search/vector_only/{size}")
        out[f"search_{label}_text"] = ids.get(f"memory_search/text_only/{size}")
    out["query_embedding"] = ids.get("query_embedding/all-MiniLM-L6-v2")
    out["save_to_search"] = ids.get("save_to_searchable/MEMORY.md")
    for full_id, ms in ids.items():
        if full_id.startswith("memory_search/") and not any(
            full_id.startswith(f"memory_search/{leg}/") for leg in ("hybrid", "vector_only", "text_only")
        ):
            out["criterion:" + full_id] = ms
    return out


WORKFLOW_ROWS = [
    Row("workflow_step", "workflow `tool` step overhead, no model ((100 steps − 1 step) / 99)", "ms", 1, decimals=2),
]


def workflow(build, ctx):
    ids = criterion(build, ctx, "workflow_overhead", "workflow_run")
    one, hundred = ids.get("workflow_run/1_tool_step"), ids.get("workflow_run/100_tool_steps")
    return {"workflow_step": (hundred - one) / 99 if one is not None and hundred is not None else None}


SANDBOX_ROWS = [
    Row("exec_bare", "`sh -c true` as `exec` starts it, bare", "ms", decimals=2),
    Row("exec_sandboxed", "  the same through the sandbox", "ms", decimals=2),
    Row("exec_added", "  the sandbox's added cost per command (bare and sandboxed in turn, the release launcher as shipped; sandboxed − bare where a build lacks that row)", "ms", 0.5, decimals=2),
]


def sandbox(build, ctx):
    # The launcher as shipped (the release build's), not the bench's own
    # quick-release build; a build whose bench predates the variable
    # ignores it.
    launcher = build.exe("pincer-sandbox")
    extra_env = {"PINCER_BENCH_LAUNCHER": str(launcher)} if Path(launcher).is_file() else {}
    ids = criterion(build, ctx, "exec_sandbox", env_extra=extra_env)
    bare, boxed = ids.get("exec_sandbox/bare"), ids.get("exec_sandbox/sandboxed")
    # Bare and sandboxed runs taken in turn measure the difference better
    # than two rows timed one after the other; builds without that row
    # (before the launcher of its own) get the difference of the two.
    added = ids.get("exec_sandbox/added (interleaved)")
    if added is None and bare is not None and boxed is not None:
        added = boxed - bare
    return {"exec_bare": bare, "exec_sandboxed": boxed, "exec_added": added}


# --- schedules ---------------------------------------------------------------------

SCHEDULE_ROWS = [
    Row("sched_wakeups", "1,000 idle schedules + 100 file triggers: wake-ups added per minute (memory off)", "/min", 60, shown="≈ 0", decimals=0),
    Row("watcher_wakeups", "an idle daemon with the memory watcher on (100 folders): wake-ups per minute", "/min", 60, shown="≈ 0", decimals=0),
    Row("sched_rss", "  RSS added by the 1,000 + 100 (memory on, 2 alternating starts)", "MB", 1, decimals=2),
    Row("sched_anon", "  of which anonymous memory", "MB", decimals=2),
    Row("fire_p99", "  fire delay p99 (5 schedules every 2 s)", "ms", 50, decimals=0),
]


def schedules(build, ctx):
    sys.path.insert(0, str(ROOT / "daemon" / "benches"))
    import schedules as s  # noqa: PLC0415 (a bench script, imported to reuse its steps)

    s.PINCERD, s.PINCER, s.WINDOW = str(build.exe("pincerd")), str(build.exe("pincer")), ctx.window
    quiet = s.idle(0, 0, False, ctx.window)[0]
    loaded = s.idle(s.SCHEDULES, s.TRIGGERS, False, ctx.window)[0]
    watcher = s.idle(0, 0, True, ctx.window)[0]
    paired = s.paired((0, 0, True), (s.SCHEDULES, s.TRIGGERS, True), 2)
    delays = s.precision()
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))] if delays else None
    return {
        "sched_wakeups": max(0.0, loaded - quiet),
        "watcher_wakeups": watcher,
        "sched_rss": paired["VmRSS"][0],
        "sched_anon": paired["RssAnon"][0],
        "fire_p99": p99,
    }


# --- sizes -----------------------------------------------------------------------------

SIZE_ROWS = [
    Row("size_pincerd", "`pincerd`, release, stripped, default features", "MB", 30, decimals=2),
    Row("size_pincer", "`pincer`", "MB", decimals=2),
    Row("size_launcher", "`pincer-sandbox` (the exec sandbox's launcher)", "MB", decimals=2),
]


def sizes(build, ctx):
    size = lambda name: build.exe(name).stat().st_size / 1e6 if build.exe(name).exists() else None  # noqa: E731
    return {"size_pincerd": size("pincerd"), "size_pincer": size("pincer"), "size_launcher": size("pincer-sandbox")}


@dataclass(frozen=True)
class Group:
    name: str
    title: str
    rows: list
    measure: object
    # At most this many runs per build (the slow groups), whatever --runs says.
    max_runs: int = 99


GROUPS = [
    Group("startup", "Start and the CLI", START_ROWS, startup),
    Group("idle", "Idle memory", IDLE_ROWS, idle_rss, max_runs=2),
    Group("agent", "The agent loop", AGENT_ROWS, agent),
    Group("search", "Memory search", SEARCH_ROWS, search, max_runs=2),
    Group("telegram", "Chats", chat_rows("Telegram", "chats"), chat_load("pincer-telegram-load", "telegram"), max_runs=2),
    Group("discord", "Chats", chat_rows("Discord", "channels"), chat_load("pincer-discord-load", "discord"), max_runs=2),
    Group("workflow", "Workflows and schedules", WORKFLOW_ROWS, workflow),
    Group("schedules", "Workflows and schedules", SCHEDULE_ROWS, schedules, max_runs=1),
    Group("sandbox", "The exec sandbox", SANDBOX_ROWS, sandbox),
    Group("sizes", "Binaries", SIZE_ROWS, sizes, max_runs=1),
]
