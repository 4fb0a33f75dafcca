#!/usr/bin/env python3
"""Cilium beside the study's CNIs on the emulated cluster (run as root): ddsperf throughput
and round trip, pod to pod across nodes, at 64 B, 1 KiB and 16 KiB, on host, flannel-vxlan,
kube-router, cilium-vxlan and cilium-native, the repeats in interleaved rounds (one
sitting); each cell the mean with its 95 % interval over the repeats, its ratio to host and
the verdict k8sdds gives that change (k8sdds.analysis.verdict: better or worse only where
the intervals are apart).

With --kubelets, the same on real kubelets: a testbed cluster per CNI datapath, each carried
by its real CNI (flannel, kube-router, Cilium itself), brought up side by side; each round
runs the schedule once on each cluster and once in hostNetwork pods (host: on the last
cluster's kubelets), one after the other.

Usage: .venv/bin/python benchmarks/cilium.py [--repeats 5] [--duration 5] [--profile rpi3b]
       [--kubelets]
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
    ap.add_argument("--kubelets", action="store_true",
                    help="on real kubelets, each CNI real (host: hostNetwork pods)")
    args = ap.parse_args()
    need_root()
    started = time.monotonic()
    profile = ["--profile", args.profile] if args.profile else []
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "cilium.csv"
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
                       + "".join(f"{size},false,1,false,0,{latency}\n"
                                 for latency in ("false", "true") for size in SIZES))
        if args.kubelets:
            df = on_kubelets(sch, Path(tmp), args.repeats, args.duration, profile)
        else:
            out = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(DATAPATHS),
                         "--duration", f"{args.duration:g}", "--repeats", str(args.repeats),
                         "--order", "rounds", "--out", tmp, "--testbed", "kdcil",
                         "--no-plot", *profile)
            df = pd.read_csv(Path(out["run_dir"]) / "results.csv")
    s = df[df.kind == "summary"]
    where = "real kubelets, each CNI real" if args.kubelets else "emulated"
    print(f"## Cilium beside the study's CNIs: ddsperf pod to pod across nodes, {where}, "
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


def on_kubelets(sch: Path, tmp: Path, repeats: int, duration: float,
                profile: list[str]) -> pd.DataFrame:
    """A testbed cluster per CNI datapath (its real CNI), up side by side; `repeats` rounds,
    each running the schedule once on every cluster and in hostNetwork pods; all results."""
    import contextlib
    import subprocess
    import sys

    clusters: dict[str, str] = {}
    frames = []
    with contextlib.ExitStack() as stack:
        for i, datapath in enumerate(DATAPATHS[1:]):
            name = f"kdk{i}"
            stack.callback(subprocess.run, [sys.executable, "-m", "k8sdds", "testbed", "down",
                                            "--testbed", name], capture_output=True)
            up = subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "up", "--testbed",
                                 name, "--nodes", "3", "--kubernetes", "--datapath", datapath,
                                 "--pod-network", "real", *profile],
                                capture_output=True, text=True)
            if up.returncode != 0:
                sys.exit(f"testbed up {datapath} failed: {up.stderr[-2000:]}")
            clusters[datapath] = up.stdout.strip().splitlines()[-1].removeprefix(
                "kubeconfig: ")
        for r in range(repeats):
            for datapath in DATAPATHS:
                out = tmp / f"{datapath}-{r}"
                host = ["--datapath", "host"] if datapath == "host" else []
                kubeconfig = clusters[DATAPATHS[-1] if host else datapath]
                done = k8sdds("run", "--sch", str(sch), "--duration", f"{duration:g}",
                              "--out", str(out), "--no-plot", "--backend", "kubernetes",
                              "--kubeconfig", kubeconfig, *host)
                frame = pd.read_csv(Path(done["run_dir"]) / "results.csv")
                frames.append(frame.assign(datapath=datapath))
    return pd.concat(frames)


if __name__ == "__main__":
    main()
