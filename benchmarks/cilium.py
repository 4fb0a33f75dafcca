#!/usr/bin/env python3
"""Cilium beside the study's CNIs on the emulated cluster (run as root): ddsperf throughput
and round trip, pod to pod across nodes, at 64 B, 1 KiB and 16 KiB, on host, flannel-vxlan,
kube-router, cilium-vxlan and cilium-native, the repeats in interleaved rounds (one
sitting); each cell the mean with its 95 % interval over the repeats, its ratio to host and
the verdict k8sdds gives that change (k8sdds.analysis.verdict: better or worse only where
the intervals are apart).

Usage: .venv/bin/python benchmarks/cilium.py [--repeats 5] [--duration 5] [--profile rpi3b]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds, mean_interval, need_root  # benchmarks/common.py

from k8sdds.analysis.stats import summarize
from k8sdds.analysis.verdict import Side, noise, word

DATAPATHS = ("host", "flannel-vxlan", "kube-router", "cilium-vxlan", "cilium-native")
SIZES = (64, 1024, 16384)
FIGURES = (("throughput_mbps", "sub0", "throughput (Mb/s)", False),
           ("latency_us_p50", "pub", "p50 round trip (µs)", True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="repeats of each cell, in rounds")
    ap.add_argument("--duration", type=float, default=5, help="seconds per repeat")
    ap.add_argument("--profile", default=None, help="edge profile of every worker")
    args = ap.parse_args()
    need_root()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "cilium.csv"
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
                       + "".join(f"{size},false,1,false,0,{latency}\n"
                                 for latency in ("false", "true") for size in SIZES))
        out = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(DATAPATHS),
                     "--duration", f"{args.duration:g}", "--repeats", str(args.repeats),
                     "--order", "rounds", "--out", tmp, "--testbed", "kdcil", "--no-plot",
                     *(["--profile", args.profile] if args.profile else []))
        df = pd.read_csv(Path(out["run_dir"]) / "results.csv")
    s = df[df.kind == "summary"]
    print(f"## Cilium beside the study's CNIs: ddsperf pod to pod across nodes, emulated, "
          f"profile {args.profile or 'cloud'}, {args.repeats} repeats of {args.duration:g} s "
          f"in rounds ({time.monotonic() - started:.0f} s)\n")
    for metric, role, title, latency in FIGURES:
        rows = s[(s.metric == metric) & (s.role == role) & (s.latency_test == latency)]
        print(f"### {title}\n")
        print("| datapath | " + " | ".join(f"{size} B" for size in SIZES) + " |")
        print("|---|" + "---|" * len(SIZES))
        for datapath in DATAPATHS:
            cells = []
            for size in SIZES:
                values = list(rows[(rows.datapath == datapath) & (rows.data_len == size)].value)
                base = list(rows[(rows.datapath == "host") & (rows.data_len == size)].value)
                cell = mean_interval(values, 0 if metric.startswith("throughput") else 1)
                if datapath != "host" and values and base:
                    a, b = Side.of(summarize(values)), Side.of(summarize(base))
                    change = (a.mean / b.mean - 1) * 100
                    cell += f" ({a.mean / b.mean:.2f} of host, {word(metric, change, noise(a, b))})"
                cells.append(cell)
            print(f"| {datapath} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
