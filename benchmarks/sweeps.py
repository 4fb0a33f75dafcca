#!/usr/bin/env python3
"""The two sweeps of a busy path on the emulated cluster (run as root), each one `k8sdds
run` with its repeats in interleaved rounds (one sitting):
- latency under load: schedules/latency-under-load.csv (a 64 B round trip idle and beside a
  1 KiB stream at 25 % to 100 % of the path's capacity, measured in the run, and at max);
- 1 to N subscribers: schedules/subscribers.csv (1, 2, 4, 8 subscribers of 1 KiB samples,
  unicast and multicast, where the datapath carries it).
Each prints k8sdds' own table (analysis.under_load, analysis.subscribers: every figure the
mean over the repeats with its 95 % interval) and the answer's lines for it.

Usage: .venv/bin/python benchmarks/sweeps.py [--datapaths host,flannel-vxlan,weave]
       [--repeats 3] [--duration 5] [--profile rpi3b] [--only load|subscribers]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from common import k8sdds, need_root  # benchmarks/common.py

from k8sdds.analysis import subscribers, under_load
from k8sdds.analysis.load import load
from k8sdds.analysis.numbers import three

ROOT = Path(__file__).parent.parent
SWEEPS = {"load": ROOT / "schedules/latency-under-load.csv",
          "subscribers": ROOT / "schedules/subscribers.csv"}


def cell(mean: float, low: float, high: float) -> str:
    """`69.5 (60.1 to 78.9)`, or the mean alone without an interval."""
    if math.isnan(low) or math.isnan(high):
        return three(mean)
    return f"{three(mean)} ({three(low)} to {three(high)})"


def print_load(runs) -> None:
    tab = under_load.table(runs)
    print("| datapath | load | p50 (µs) | p99 (µs) | the stream (Mb/s) | repeats |")
    print("|---|---|---|---|---|---|")
    for _, r in tab.iterrows():
        stream = "" if math.isnan(r["stream_mbps"]) else three(r["stream_mbps"])
        print(f"| {r['datapath']} | {r['load'] or 'idle'} | "
              f"{cell(r['p50'], r['p50_low'], r['p50_high'])} | "
              f"{cell(r['p99'], r['p99_low'], r['p99_high'])} | {stream} | {r['repeats']} |")
    print()
    for line in under_load.sentences(tab):
        print("-", line)


def print_subscribers(runs, not_applicable: list[dict]) -> None:
    tab = subscribers.table(runs)
    print("| datapath | delivery | subscribers | each (Mb/s) | all (Mb/s) | loss (%) | "
          "publisher CPU a message (µs) | repeats |")
    print("|---|---|---|---|---|---|---|---|")
    for _, r in tab.iterrows():
        print(f"| {r['datapath']} | {r['delivery']} | {r['num_subscribers']} | "
              + " | ".join(cell(r[f], r[f"{f}_low"], r[f"{f}_high"])
                           for f in subscribers.FIGURES) + f" | {r['repeats']} |")
    print()
    for line in subscribers.sentences(tab, not_applicable):
        print("-", line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datapaths", default="host,flannel-vxlan,weave")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each test, in rounds")
    ap.add_argument("--duration", type=float, default=5, help="seconds per repeat")
    ap.add_argument("--profile", default=None, help="edge profile of every worker")
    ap.add_argument("--only", choices=sorted(SWEEPS), default=None)
    args = ap.parse_args()
    need_root()
    profile = ["--profile", args.profile] if args.profile else []
    for name, schedule in SWEEPS.items():
        if args.only and name != args.only:
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            out = k8sdds("run", "--sch", str(schedule), "--datapath", args.datapaths,
                         "--duration", f"{args.duration:g}", "--repeats", str(args.repeats),
                         "--order", "rounds", "--out", tmp, "--testbed", "kdswp",
                         "--no-plot", *profile)
            runs = load([Path(out["run_dir"])])
            print(f"## {name}: {schedule.relative_to(ROOT)} on {args.datapaths}, profile "
                  f"{args.profile or 'cloud'}, {args.repeats} repeats of {args.duration:g} s "
                  f"in rounds ({time.monotonic() - started:.0f} s, {time.strftime('%Y-%m-%d')})"
                  "\n")
            if name == "load":
                print_load(runs)
            else:
                print_subscribers(runs, [na for m in runs.manifests.values()
                                         for na in m.get("not_applicable", [])])
            print()


if __name__ == "__main__":
    main()
