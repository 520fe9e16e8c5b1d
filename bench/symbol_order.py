#!/usr/bin/env python3
"""Writes `daemon/link/pincerd.order`: the functions pincerd runs while it
starts, connects its bridges, reads its memory index and idles, so that
the linker puts them side by side at the front of the binary
(daemon/build.rs hands the file to lld as `--symbol-ordering-file` in
release builds on x86-64 Linux).

Why: the kernel maps a binary's code in 64 KB around each page a process
touches, so start-up code spread over 25 MB of `.text` made most of the
binary resident (docs/src/measurements.md has the figures).

How: the release build of this tree, linked with a map of its symbols
(`PINCER_LINK_MAP`: the binary itself stays stripped), runs under
valgrind's callgrind in the idle-RSS bench (`pincer-idle-rss`: both
bridges on their fakes, a small index; no bridges and an empty index);
every instruction address callgrind saw run in pincerd is mapped to its
function through the map, and the functions are listed in the order met.
The names carry the crates' metadata hashes, which change with the
release profile, a dependency's version or the features: regenerate the
list after such a change (a stale list costs memory, never correctness:
functions not on it come after those that are).

    python3 bench/symbol_order.py        # needs valgrind; 10–20 minutes
"""

import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import builds  # noqa: E402

ROOT = builds.ROOT
OUT = ROOT / "daemon" / "link" / "pincerd.order"
MAP_LINE = re.compile(r"^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)\s(.*)$")


def symbols(map_file):
    """(sorted start addresses, mangled names) of the functions in lld's
    map. lld prints symbols demangled, so the names are read from the
    input sections instead: rustc puts each function in its own
    `.text.<mangled name>` section, the name the ordering file wants."""
    out = []
    for line in open(map_file, errors="replace"):
        m = MAP_LINE.match(line)
        if not m or ":(.text." not in m.group(5):
            continue
        section = m.group(5).rsplit(":(", 1)[1].rstrip(")")
        for prefix in (".text.unlikely.", ".text.hot.", ".text.startup.", ".text."):
            if section.startswith(prefix):
                out.append((int(m.group(1), 16), section[len(prefix):]))
                break
    out.sort()
    return [a for a, _ in out], [n for _, n in out]


def executed(callgrind_out, binary):
    """The instruction addresses of `binary` in a callgrind profile
    (`--dump-instr=yes`), in file order."""
    objects, current, addr, seen = {}, None, 0, []
    for line in open(callgrind_out, errors="replace"):
        m = re.match(r"(c?)ob=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                objects[m.group(2)] = m.group(3)
            if not m.group(1):
                current = objects.get(m.group(2))
            continue
        if current != binary:
            continue
        tok = line.split()[0] if line.strip() else ""
        if tok.startswith("0x"):
            addr = int(tok, 16)
        elif tok[:1] in "+-" and tok[1:].isdigit():
            addr += int(tok)
        elif tok != "*":
            continue
        seen.append(addr)
    return seen


def main():
    if not shutil.which("valgrind"):
        sys.exit("symbol_order.py needs valgrind (apt-get install valgrind)")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    with tempfile.TemporaryDirectory(prefix="pincer-order-") as work:
        work = Path(work)
        link_map = work / "pincerd.map"
        pkgs, _ = builds.products(ROOT)
        flags = [a for p in pkgs for a in ("-p", p)]
        subprocess.run(["cargo", "build", "--release", "--bins", *flags], cwd=ROOT, check=True,
                       env=dict(os.environ, PINCER_LINK_MAP=str(link_map)))
        subprocess.run(["cargo", "build", "--profile", "quick-release", *builds.QUICK_RELEASE, "-p",
                        builds.HARNESS_PACKAGE, "--bins"], cwd=ROOT, check=True)
        real = work / "bin" / "pincerd"
        real.parent.mkdir()
        shutil.copy2(target / "release" / "pincerd", real)
        shutil.copy2(target / "release" / "pincer", work / "pincer")
        # pincerd opens its exec sandbox's launcher beside itself at start.
        shutil.copy2(target / "release" / "pincer-sandbox", real.parent / "pincer-sandbox")
        # pincer-idle-rss starts "pincerd" by path: this one runs the real
        # binary under callgrind, a profile per process.
        wrapper = work / "pincerd"
        wrapper.write_text(
            "#!/bin/sh\nexec valgrind --tool=callgrind --dump-instr=yes "
            f"--callgrind-out-file={work}/cg.%p {real} \"$@\"\n"
        )
        wrapper.chmod(0o755)
        subprocess.run([str(target / "quick-release" / "pincer-idle-rss"), "--pincerd", str(wrapper), "--rounds", "1",
                        "--chunks", "200", "--setups", "both,no_bridges_empty_index"], check=True)
        starts, names = symbols(link_map)
        if not starts:
            sys.exit(f"no symbols in the link map {link_map}")
        order, known = [], set()
        for profile in sorted(work.glob("cg.*")):
            for addr in executed(profile, str(real)):
                i = bisect.bisect_right(starts, addr) - 1
                if i >= 0 and names[i] not in known:
                    known.add(names[i])
                    order.append(names[i])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(order) + "\n")
    print(f"{OUT}: {len(order)} functions", file=sys.stderr)


if __name__ == "__main__":
    main()
