#!/usr/bin/env python3
"""Figures about the harness itself (run as root, on the emulated backend):

1. transparency: ddsperf throughput, 1 KiB cross-node on flannel-hostgw, through k8sdds vs the
   same ddsperf commands (same argv, same CYCLONEDDS_URI files) run by hand in the same
   namespaces, interleaved in one session; ratio (goal >= 0.95).
2. orchestration overhead: wall time of `k8sdds run` on a 6-test schedule of 5 s tests,
   minus 30 s, divided by 6 (goal <= 1.0 s per test).
3. the datapath table of schedules/quick.csv: throughput and p50 latency per datapath.

Usage: .venv/bin/python benchmarks/harness.py [--pairs 3] [--duration 5] [--skip-table]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds, need_root  # benchmarks/common.py

from k8sdds.parsers.ddsperf import parse
from k8sdds.testbed import netns
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed

ROOT = Path(__file__).resolve().parent.parent
TESTBED = "kdbench"


def cli(*args: str) -> dict:
    return k8sdds("run", *args, "--no-plot", "--testbed", TESTBED)


def summary(run_dir: str, metric: str) -> pd.DataFrame:
    df = pd.read_csv(Path(run_dir) / "results.csv")
    return df[(df.kind == "summary") & (df.metric == metric)]


def by_hand(tb: Testbed, run_dir: Path) -> float:
    """Run the recorded argv of test-1/rep-1 again, directly, in fresh pods; sub Mb/s."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    argv = manifest["repeats"]["test-1/rep-1"]["argv"]
    rep = run_dir / "test-1" / "rep-1"
    pub_pod = tb.add_pod(tb.node("node1"), "pub", 1500)  # where k8sdds places them
    sub_pod = tb.add_pod(tb.node("node2"), "sub0", 1500)
    try:
        def start(pod, role):
            env = {**os.environ, "CYCLONEDDS_URI": (rep / f"{role}.cyclonedds.xml").as_uri()}
            return subprocess.Popen(netns.exec_argv(pod.ns, argv[role]), env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sub = start(sub_pod, "sub0")
        pub = start(pub_pod, "pub")
        pub.communicate(timeout=120)
        time.sleep(0.5)
        sub.terminate()
        out, _ = sub.communicate(timeout=10)
    finally:
        tb.remove_pods()
    return parse(out, "sub0", False).summary("throughput_mbps")


def transparency(pairs: int, duration: float) -> None:
    tb = Testbed(default_nodes(4, name=TESTBED))
    tb.up()
    tb.use_datapath("flannel-hostgw")
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "one.csv"
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                       "1024,false,1,false,0\n")
        harness, hand = [], []
        for _ in range(pairs):
            out = cli("--sch", str(sch), "--datapath", "flannel-hostgw", "--duration",
                      str(duration), "--out", tmp, "--quiet")
            harness.append(summary(out["run_dir"], "throughput_mbps").value.iloc[0])
            hand.append(by_hand(tb, Path(out["run_dir"])))
    tb.down()
    ratio = statistics.mean(harness) / statistics.mean(hand)
    print("## Harness transparency (1 KiB, cross-node, flannel-hostgw)\n")
    print("| | Mb/s per repeat | mean |\n|---|---|---|")
    print(f"| k8sdds | {', '.join(f'{v:.0f}' for v in harness)} | {statistics.mean(harness):.0f} |")
    print(f"| by hand | {', '.join(f'{v:.0f}' for v in hand)} | {statistics.mean(hand):.0f} |")
    print(f"\nratio k8sdds / by hand: **{ratio:.3f}** (goal >= 0.95)\n")


def overhead() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "six.csv"
        rows = [f"{s},false,1,false,0" for s in (64, 256, 1024, 4096, 16384, 63000)]
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                       + "\n".join(rows) + "\n")
        t0 = time.monotonic()
        out = cli("--sch", str(sch), "--datapath", "flannel-vxlan", "--duration", "5",
                  "--out", tmp, "--quiet")
        wall = time.monotonic() - t0
        repeats = json.loads((Path(out["run_dir"]) / "manifest.json").read_text())["repeats"]
        per_repeat = [e["wall_s"] for e in repeats.values()]
    print("## Orchestration overhead (6 tests x 5 s, flannel-vxlan, testbed built and removed)\n")
    print(f"wall time of `k8sdds run`: {wall:.1f} s; (wall - 30) / 6 = "
          f"**{(wall - 30) / 6:.2f} s per test** (goal <= 1.0 s)")
    print(f"per-repeat wall times (deploy -> teardown): "
          f"{', '.join(f'{w:.2f}' for w in per_repeat)} s\n")


def table(duration: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = cli("--sch", str(ROOT / "schedules" / "quick.csv"), "--datapath",
                  "host,flannel-hostgw,flannel-vxlan", "--duration", str(duration),
                  "--out", tmp, "--quiet")
        df = pd.read_csv(Path(out["run_dir"]) / "results.csv")
    s = df[df.kind == "summary"]
    thr = s[(s.metric == "throughput_mbps")].pivot_table(index="datapath", columns="data_len",
                                                          values="value")
    p50 = s[s.metric == "latency_us_p50"].pivot_table(index="datapath", columns="data_len",
                                                      values="value")
    print("## Datapath table, schedules/quick.csv\n")
    cols = [f"throughput {c} B (Mb/s)" for c in thr.columns] + \
           [f"p50 latency {c} B (us, round trip)" for c in p50.columns]
    print("| datapath | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for dp in ("host", "flannel-hostgw", "flannel-vxlan"):
        cells = [f"{thr.loc[dp, c]:.0f}" for c in thr.columns] + \
                [f"{p50.loc[dp, c]:.1f}" for c in p50.columns]
        print(f"| {dp} | " + " | ".join(cells) + " |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="k8sdds/by-hand pairs for the ratio")
    ap.add_argument("--duration", type=float, default=5, help="seconds per test")
    ap.add_argument("--skip-table", action="store_true")
    args = ap.parse_args()
    need_root()
    transparency(args.pairs, args.duration)
    overhead()
    if not args.skip_table:
        table(args.duration)


if __name__ == "__main__":
    main()
