#!/usr/bin/env python3
"""The datapath table of the emulated cluster (run as root):

for each datapath this machine can emulate: iperf3 TCP throughput cross-node (pod to pod; node
to node for `host`), ddsperf 1 KiB throughput and 64 B ping-pong p50 latency cross-node, each
also as a ratio to `host`; then the time to bring 8 nodes x 8 pods up and down.

Usage: .venv/bin/python benchmarks/datapaths.py [--duration 5] [--profile rpi3b]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds, need_root  # benchmarks/common.py

from k8sdds import model
from k8sdds.testbed import netns
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed
from k8sdds.testbed.wiring.kinds import WIRING, datapath_unavailable

TESTBED = "kdbench"


def iperf3(tb: Testbed, name: str, seconds: float) -> float:
    """TCP Mbit/s from node1 to node2 (their pods, or the nodes themselves for host)."""
    dp = model.datapath(name)
    tb.use_datapath(name)
    n1, n2 = tb.node("node1"), tb.node("node2")
    if dp.host_network:
        client_ns, server_ns, server = n1.ns, n2.ns, n2.address
    else:
        a = tb.add_pod(n1, "ipc", n1.shrink(dp.mtu), dp.pod_prefix)
        b = tb.add_pod(n2, "ips", n2.shrink(dp.mtu), dp.pod_prefix)
        client_ns, server_ns, server = a.ns, b.ns, b.address
    srv = subprocess.Popen(netns.exec_argv(server_ns, ["iperf3", "-s", "-1"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(netns.exec_argv(client_ns, ["iperf3", "-c", server, "-t",
                                                         f"{seconds:g}", "-J"]),
                             capture_output=True, text=True, timeout=seconds + 30)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        srv.kill()
        srv.wait()
        tb.remove_pods()


def ddsperf(names: list[str], seconds: float) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "dp.csv"
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
                       "1024,false,1,false,0,false\n64,false,1,false,0,true\n")
        out = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(names), "--duration",
                     f"{seconds:g}", "--out", tmp, "--testbed", TESTBED, "--no-plot")
        df = pd.read_csv(Path(out["run_dir"]) / "results.csv")
    return df[df.kind == "summary"]


def scale() -> tuple[float, float]:
    tb = Testbed(default_nodes(8, name="kdscale"))
    t0 = time.monotonic()
    tb.up()
    tb.use_datapath("flannel-vxlan")
    for node in tb.nodes:
        for k in range(8):
            tb.add_pod(node, f"p{k}", 1450)
    up = time.monotonic() - t0
    t0 = time.monotonic()
    tb.down()
    return up, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5, help="seconds per measurement")
    ap.add_argument("--profile", default=None, help="edge profile of every worker")
    args = ap.parse_args()
    need_root()
    names, skipped = [], []
    for name in WIRING:
        reason = datapath_unavailable(model.datapath(name))
        (skipped.append(f"{name}: {reason}") if reason else names.append(name))
    tb = Testbed(default_nodes(4, args.profile, TESTBED))
    tb.up()
    try:
        tcp = {name: iperf3(tb, name, args.duration) for name in names}
        dds = ddsperf(names, args.duration)
    finally:
        tb.down()
    thr = dds[(dds.metric == "throughput_mbps")].set_index("datapath").value
    p50 = dds[(dds.metric == "latency_us_p50")].set_index("datapath").value
    print(f"## Datapaths, cross-node, 4-node emulated cluster, profile "
          f"{args.profile or 'cloud'}, {args.duration:g} s each\n")
    print("| datapath | iperf3 TCP (Mbit/s) | vs host | ddsperf 1 KiB (Mb/s) | vs host | "
          "ddsperf 64 B p50 RTT (us) | vs host |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        print(f"| {name} | {tcp[name]:.0f} | {tcp[name] / tcp['host']:.2f} | "
              f"{thr[name]:.0f} | {thr[name] / thr['host']:.2f} | "
              f"{p50[name]:.1f} | {p50[name] / p50['host']:.2f} |")
    for line in skipped:
        print(f"\nnot emulated here: {line}")
    up, down = scale()
    print(f"\n8 nodes x 8 pods (flannel-vxlan): up in {up:.2f} s, down in {down:.2f} s "
          "(goals: 10 s, 5 s)")


if __name__ == "__main__":
    main()
