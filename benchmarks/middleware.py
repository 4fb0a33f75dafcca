#!/usr/bin/env python3
"""Middleware beside DDS (run as root, on the emulated backend):

1. the figures are the middleware's: for each engine beyond DDS (zenoh peer to peer and
   routed, mqtt at QoS 1), throughput at 1 KiB on the host datapath through `k8sdds run`,
   against the same commands (the recorded argv and files) started by hand in the same node
   namespaces, in pairs (k8sdds first, then by hand first, in turn); ratio of the means (goal:
   within 3 %).
   By hand means as a person runs them: each from its own shell, so each in a session of
   its own, as k8sdds starts them. The kernel's autogroup scheduling gives every session its
   own group; started from one session the three processes share one group, and the benchmark
   prints that figure too (here it reads higher on 2 cores).
2. the table: on `cloud` and `rpi3b` (`--profiles`), host and flannel-vxlan, 64 B, 1 KiB
   and 16 KiB, throughput (Mb/s, per subscriber) and p50 round trip (us, every engine's
   whole round trip) for ddsperf, zenoh (peer and routed) and mqtt at QoS 0 and QoS 1, one
   run per profile whose `--repeats` go in rounds: each cell the mean over the repeats and
   its 95 % interval's half width (Student's t) when there are two or more. `--metrics
   latency` runs the latency rows only.

Usage: .venv/bin/python benchmarks/middleware.py [--pairs 5] [--duration 5] [--skip-table]
       [--skip-pairs] [--engines zenoh-peer,zenoh-routed,mqtt] [--repeats 1]
       [--profiles cloud,rpi3b] [--metrics throughput,latency]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import Hand, k8sdds, mean_interval, ratio_interval  # benchmarks/common.py

from k8sdds.engines import registry
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed

TESTBED = "kdmw"
HEADER = ("engine,transport,topology,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
          "latencyTest\n")
PAYLOADS = (64, 1024, 16384)
# (label, engine, transport, topology, bestEffort)
ENGINES = (("ddsperf", "ddsperf", "udp", "", "false"),
           ("zenoh (peer)", "zenoh", "tcp", "peer", "false"),
           ("zenoh (routed)", "zenoh", "tcp", "routed", "false"),
           ("mqtt QoS 0", "mqtt", "tcp", "", "true"), ("mqtt QoS 1", "mqtt", "tcp", "", "false"))
# the engines beyond DDS whose figures are checked against the same commands by hand
TRANSPARENCY = {"zenoh-peer": "zenoh,tcp,peer", "zenoh-routed": "zenoh,tcp,routed",
                "mqtt": "mqtt,tcp,"}


def by_hand(tb: Testbed, run_dir: Path, engine: str, sessions: bool = True) -> float:
    """test-1/rep-1's recorded commands again, started directly in the nodes it ran on (the
    broker or router first, then the subscriber, then the publisher), each in a session of its
    own (`sessions`, as from its own shell) or all in this one; the subscriber's Mb/s."""
    port = registry()[engine].listen_port
    hand = Hand(tb, run_dir, sessions)
    argv = hand.entry["argv"]
    procs = {}
    try:
        for i, role in enumerate(r for r in argv if r != "pub"):
            procs[role] = hand.start(role, argv[role])
            if i == 0 and port:  # the first follower listens before the driver, as k8sdds waits
                hand.wait_listening(procs[role], port)
        hand.start("pub", argv["pub"]).communicate(timeout=120)
        time.sleep(1.0)  # the subscriber's last per-second line
    finally:
        hand.stop()
    out = procs["sub0"].stdout.read()
    return registry()[engine].parser.parse(out, "sub0", False).summary("throughput_mbps")


def transparency(pairs: int, duration: float, names: list[str]) -> None:
    print("## The figures are the middleware's (1 KiB, host datapath, reliable)\n")
    print("| engine | k8sdds Mb/s | by hand, a session each | ratio (95 % interval; Welch p) | "
          "by hand, one session | ratio |\n|---|---|---|---|---|---|")
    tb = Testbed(default_nodes(4, name=TESTBED))
    tb.up()
    tb.use_datapath("host")
    try:
        for name in names:
            engine = TRANSPARENCY[name].split(",")[0]
            with tempfile.TemporaryDirectory() as tmp:
                sch = Path(tmp) / "one.csv"
                sch.write_text(HEADER + TRANSPARENCY[name] + ",1024,false,1,false,0,false\n")
                harness, hand, shared = [], [], []
                run_dir = None
                for i in range(pairs):
                    # in turn k8sdds first and by hand first (the previous run's commands),
                    # so a drift of the machine over the pairs falls on both alike
                    if i % 2 and run_dir is not None:
                        hand.append(by_hand(tb, run_dir, engine))
                        shared.append(by_hand(tb, run_dir, engine, sessions=False))
                    out = k8sdds("run", "--sch", str(sch), "--datapath", "host", "--duration",
                                 f"{duration:g}", "--out", tmp, "--quiet", "--no-plot",
                                 "--testbed", TESTBED)
                    run_dir = Path(out["run_dir"])
                    df = pd.read_csv(run_dir / "results.csv")
                    harness.append(df[(df.kind == "summary") & (df.metric == "throughput_mbps")
                                      & (df.role == "sub0")].value.iloc[0])
                    if not i % 2:
                        hand.append(by_hand(tb, run_dir, engine))
                        shared.append(by_hand(tb, run_dir, engine, sessions=False))
            ratio, half, p = ratio_interval(harness, hand)
            one = statistics.mean(harness) / statistics.mean(shared)
            print(f"| {name} | {', '.join(f'{v:.0f}' for v in harness)} | "
                  f"{', '.join(f'{v:.0f}' for v in hand)} | **{ratio:.3f}** (±{half:.1%}; "
                  f"p={p:.2f}) | "
                  f"{', '.join(f'{v:.0f}' for v in shared)} | {one:.3f} |", flush=True)
    finally:
        tb.down()
    print()


METRICS = {"throughput": "false", "latency": "true"}  # --metrics: the latencyTest column


def table(duration: float, repeats: int, profiles: list[str], metrics: list[str]) -> None:
    rows = [f"{engine},{transport},{topology},{size},false,1,{effort},0,{METRICS[m]}\n"
            for _, engine, transport, topology, effort in ENGINES for size in PAYLOADS
            for m in metrics]
    for profile in profiles:
        with tempfile.TemporaryDirectory() as tmp:
            sch = Path(tmp) / "table.csv"
            sch.write_text(HEADER + "".join(rows))
            out = k8sdds("run", "--sch", str(sch), "--datapath", "host,flannel-vxlan",
                         "--profile", profile, "--duration", f"{duration:g}", "--repeats",
                         str(repeats), "--order", "rounds", "--out", tmp, "--quiet",
                         "--no-plot", "--testbed", TESTBED)
            df = pd.read_csv(Path(out["run_dir"]) / "results.csv")
        s = df[df.kind == "summary"]
        print(f"## {profile}: Mb/s (sub0) / p50 round trip us ({repeats} repeat"
              f"{'s in rounds' if repeats > 1 else ''}, {duration:g} s tests)\n")
        print("| engine | datapath | " + " | ".join(f"{p} B" for p in PAYLOADS) + " |")
        print("|---|---|" + "---|" * len(PAYLOADS))
        for label, engine, _, topology, effort in ENGINES:
            for dp in ("host", "flannel-vxlan"):
                cells = []
                for size in PAYLOADS:
                    mine = s[(s.engine == engine) & (s.best_effort == (effort == "true"))
                             & (s.topology.fillna("") == topology)
                             & (s.datapath == dp) & (s.data_len == size)]
                    thr = mine[(mine.metric == "throughput_mbps") & (mine.role == "sub0")]
                    p50 = mine[(mine.metric == "latency_us_p50") & (mine.role == "pub")]
                    cells.append(" / ".join(
                        mean_interval(list(v.sort_values("repeat").value), d)
                        for v, d, m in ((thr, 1, "throughput"), (p50, 0, "latency"))
                        if m in metrics))
                print(f"| {label} | {dp} | " + " | ".join(cells) + " |")
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="k8sdds/by-hand pairs")
    ap.add_argument("--engines", default=",".join(TRANSPARENCY),
                    help="the engines of the by-hand check: " + ", ".join(TRANSPARENCY))
    ap.add_argument("--duration", type=float, default=5, help="seconds per test")
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--skip-pairs", action="store_true", help="the table only")
    ap.add_argument("--repeats", type=int, default=1, help="the table's repeats (rounds)")
    ap.add_argument("--profiles", default="cloud,rpi3b", help="the table's edge profiles")
    ap.add_argument("--metrics", default="throughput,latency",
                    help="the table's: throughput, latency or both")
    args = ap.parse_args()
    metrics = [m for m in args.metrics.split(",") if m]
    if not metrics or set(metrics) - set(METRICS):
        sys.exit(f"--metrics: {args.metrics!r}; allowed: {', '.join(METRICS)}")
    if os.geteuid() != 0:
        sys.exit("run as root: the emulated backend needs network namespaces")
    started = time.monotonic()
    names = [n for n in args.engines.split(",") if n]
    unknown = [n for n in names if n not in TRANSPARENCY]
    if unknown:
        sys.exit(f"--engines: {', '.join(unknown)} unknown; allowed: {', '.join(TRANSPARENCY)}")
    if not args.skip_pairs:
        transparency(args.pairs, args.duration, names)
    if not args.skip_table:
        table(args.duration, args.repeats, [p for p in args.profiles.split(",") if p],
              metrics)
    print(f"wall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
