#!/usr/bin/env python3
"""RTI Perftest parse throughput on a large synthetic file (goal >= 50 MB/s).

The file is a real K8sDDS subscriber log with its interval lines repeated to --mb megabytes
(legacy format, one `Packets: ...` line per second, as `perftest_cpp -sub` prints without
-noPrint), and the CSV and JSON variants of the same size.

Usage: .venv/bin/python benchmarks/parse.py [--mb 20]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from k8sdds.parsers.rtiperftest import parse

FIX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "rtiperftest"


def synthetic(kind: str, mb: float) -> str:
    if kind == "legacy":
        head = (FIX / "legacy-throughput-sub.log").read_text()
        line = ("Packets:  2336445  Packets/s: 2209783  Packets/s(ave): 2209783  Mbps:  1767.8  "
                "Mbps(ave):  1767.8  Lost:     0 (0.00%)\n")
        cut = head.index("Length:")
        body = line * int(mb * 1e6 / len(line))
        return head[:cut] + body + head[cut:]
    if kind == "csv":
        text = (FIX / "doc-csv-intervals-cpu-sub.log").read_text()
        row = ("           100,       3591398,    1908340,       1908340,   1526.7,    1526.7,"
               "            0,             0.00, 12.12\n")
        at = text.index(row) + len(row)
        return text[:at] + row * int(mb * 1e6 / len(row)) + text[at:]
    text = (FIX / "doc-json-sub.log").read_text()
    item = text[text.index("{\n\t\t\t\t\t\"length\""):text.index("},") + 2]
    at = text.index(item)
    return text[:at] + item * int(mb * 1e6 / len(item)) + text[at:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20)
    args = ap.parse_args()
    print("| format | size (MB) | seconds | MB/s | interval samples |\n|---|---|---|---|---|")
    for kind in ("legacy", "csv", "json"):
        text = synthetic(kind, args.mb)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            result = parse(text, "sub0", latency_test=False)
            best = min(best, time.perf_counter() - t0)
        assert result.failure is None, result.failure
        n = sum(v.kind == "sample" for v in result.values) + sum(
            len(c.values) for c in result.columns)
        size = len(text.encode()) / 1e6
        print(f"| {kind} | {size:.1f} | {best:.2f} | {size / best:.0f} | {n} |")


if __name__ == "__main__":
    main()
