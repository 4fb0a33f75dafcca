"""The testbed cluster (real kubelets on the emulated testbed): bring-up time, idle memory and
CPU, and the same DDS tests as emulated processes and as real pods on the same datapath.

Usage (root, after `make test` built the binaries and the image):
    .venv/bin/python benchmarks/kube_testbed.py [--workers 3] [--duration 5] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SCHEDULE = ("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
            "1024,false,1,false,0,false\n16384,false,1,false,0,false\n64,false,1,false,0,true\n")


def k8sdds(*args: str, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"k8sdds {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return proc


def cluster_usage(run_dir: Path) -> tuple[float, float]:
    """RSS (MiB) and CPU seconds so far of every process the cluster recorded."""
    state = json.loads((run_dir.parent / f"{run_dir.name}.json").read_text())
    rss = cpu = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in state["pids"]:
        for p in [pid, *_children(pid)]:
            try:
                stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                rss += int(stat[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
                cpu += (int(stat[11]) + int(stat[12])) / tick
            except (OSError, IndexError):
                continue
    return rss, cpu


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    kids = [int(x) for x in out.split()]
    return kids + [g for k in kids for g in _children(k)]


def summary(run_dir: Path) -> pd.DataFrame:
    df = pd.read_csv(run_dir / "results.csv")
    s = df[df.kind == "summary"]
    thr = s[(s.metric == "throughput_mbps") & s.role.str.startswith("sub")]
    lat = s[(s.metric == "latency_us_p50") & (s.role == "pub")]
    out = pd.concat([thr.groupby("data_len").value.mean().rename("Mb/s"),
                     lat.groupby("data_len").value.mean().rename("p50 us")], axis=1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    state = tempfile.mkdtemp(prefix="k8sdds-bench-")
    env = {**os.environ, "K8SDDS_STATE_DIR": state, "COLUMNS": "200"}
    name = "kb" + str(os.getpid() % 1000)
    sch = Path(state) / "s.csv"
    sch.write_text(SCHEDULE)
    common = ["--sch", str(sch), "--duration", f"{args.duration:g}", "--repeats",
              str(args.repeats), "--out", str(Path(state) / "logs"), "--json", "--no-plot"]
    # as emulated processes first, on a plain testbed of the same shape and datapath
    procs = json.loads(k8sdds("run", *common, "--datapath", "flannel-hostgw", "--nodes",
                              str(args.workers + 1), "--testbed", name + "p", env=env).stdout)
    try:
        t0 = time.monotonic()
        up = k8sdds("testbed", "up", "--name", name, "--nodes", str(args.workers + 1),
                    "--kubernetes", env=env)
        ready_s = time.monotonic() - t0
        kubeconfig = up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: ")
        run_dir = Path(state) / f"{name}-kube"
        time.sleep(10)  # idle: what the cluster costs doing nothing
        rss, cpu0 = cluster_usage(run_dir)
        time.sleep(10)
        cpu = (cluster_usage(run_dir)[1] - cpu0) / 10 * 100
        pods = json.loads(k8sdds("run", "--backend", "kubernetes", "--kubeconfig", kubeconfig,
                                 *common, env=env).stdout)
    finally:
        k8sdds("testbed", "down", "--name", name, env=env)
    print(f"testbed up --kubernetes, {args.workers} workers: {ready_s:.1f} s to every node "
          f"Ready (binaries and image cached)")
    print(f"idle cluster: {rss:.0f} MiB RSS, {cpu:.1f} % of one core")
    a, b = summary(Path(procs["run_dir"])), summary(Path(pods["run_dir"]))
    table = a.add_suffix(" processes").join(b.add_suffix(" pods"))
    table["Mb/s pods/processes"] = table["Mb/s pods"] / table["Mb/s processes"]
    table["p50 pods/processes"] = table["p50 us pods"] / table["p50 us processes"]
    print(f"\nflannel-hostgw wiring, {args.repeats} x {args.duration:g} s, ddsperf:")
    print(table.round(3).to_string())
    print(f"\nfailed: processes {procs['failed']}, pods {pods['failed']}")


if __name__ == "__main__":
    main()
