#!/usr/bin/env python3
"""Wall time and peak memory of `k8sdds import k8sdds-data` with one huge subscriber log
(goal: a 1 GiB log, the guard's limit, in a few minutes under about 500 MB).

The tree is made in a temporary folder: one configuration (`flannel-udp`) of the throughput
kind, with the study's schedule; test-0 holds a real K8sDDS subscriber log whose interval
lines are repeated to --mb megabytes (legacy format, as `perftest_cpp -sub` prints one line
a second), and its publisher's log. The import runs as a child process; its peak resident
memory is the kernel's (getrusage of the children).

Usage: .venv/bin/python benchmarks/import_memory.py [--mb 1024] [--format legacy|csv|json]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "rtiperftest"
LINES = {"legacy": ("legacy-throughput-sub.log", "Length:",
                    "Packets:  2336445  Packets/s: 2209783  Packets/s(ave): 2209783  Mbps:  "
                    "1767.8  Mbps(ave):  1767.8  Lost:     0 (0.00%)\n"),
         "csv": ("doc-csv-intervals-cpu-sub.log", None,
                 "           100,       3591398,    1908340,       1908340,   1526.7,    "
                 "1526.7,            0,             0.00, 12.12\n"),
         "json": ("doc-json-sub.log", None, None)}


def write_log(path: Path, kind: str, mb: float) -> None:
    """The fixture with its interval lines repeated to `mb` megabytes, written a block at a
    time (the benchmark holds no more of it than the importer should)."""
    name, before, line = LINES[kind]
    text = (FIX / name).read_text()
    if line is None:  # JSON: the first interval's object, repeated before it
        line = text[text.index('{\n\t\t\t\t\t"length"'):text.index("},") + 2]
    at = text.index(before) if before else text.index(line) + len(line)
    block = line * 10_000
    with open(path, "w") as out:
        out.write(text[:at])
        for _ in range(int(mb * 1e6 / len(block))):
            out.write(block)
        out.write(text[at:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1024)
    ap.add_argument("--format", choices=sorted(LINES), default="legacy")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="k8sdds-import-bench-") as work:
        tree = Path(work) / "tree"
        test = tree / "throughput-test" / "flannel-udp" / "test-0"
        test.mkdir(parents=True)
        shutil.copy(ROOT / "schedules" / "k8sdds.csv", tree / "throughput-test" / "schedule.csv")
        shutil.copy(FIX / "legacy-throughput-pub-loaded-latency.log", test / "rtiperftest-pub.log")
        write_log(test / "rtiperftest-sub.log", args.format, args.mb)
        size = (test / "rtiperftest-sub.log").stat().st_size
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "k8sdds", "import", "k8sdds-data",
                               str(tree), "--out", str(Path(work) / "out")],
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
        if done.returncode != 0:
            sys.exit(f"import failed: {done.stderr[-2000:]}")
    print("| log | size (MiB) | wall (s) | peak RSS (MiB) |\n|---|---|---|---|")
    print(f"| {args.format} | {size / 2**20:.0f} | {wall:.1f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
