"""The testbed cluster (real kubelets on the emulated testbed): bring-up time (cold and
warm), idle memory and CPU, and the same DDS tests as emulated processes, as real pods on the
emulated wiring, and as real pods on the real CNI (flanneld, kube-router, Weave Net), per
datapath. Weave's one L2 segment has no emulated wiring for pods (it routes no /24 per node):
its real pods are compared with the emulated processes only.

Usage (root, after `make test` built the binaries and the image):
    .venv/bin/python benchmarks/kube_testbed.py [--workers 3] [--duration 5] [--repeats 2]
        [--cold] [--datapaths flannel-hostgw,flannel-vxlan,kube-router,weave,weave-encrypted]
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


def summary(run_dir: Path, name: str = "results.csv") -> pd.DataFrame:
    df = pd.read_csv(run_dir / name)
    s = df[df.kind == "summary"]
    thr = s[(s.metric == "throughput_mbps") & s.role.str.startswith("sub")]
    lat = s[(s.metric == "latency_us_p50") & (s.role == "pub")]
    out = pd.concat([thr.groupby("data_len").value.mean().rename("Mb/s"),
                     lat.groupby("data_len").value.mean().rename("p50 us")], axis=1)
    return out


def bring_up(name: str, workers: int, datapath: str, cni: str, env: dict
             ) -> tuple[str, float]:
    t0 = time.monotonic()
    up = k8sdds("testbed", "up", "--testbed", name, "--nodes", str(workers + 1), "--kubernetes",
                "--datapath", datapath, "--cni", cni, env=env)
    return up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: "), \
        time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="processes then pods, this many "
                    "times per cluster (interleaved: both under the same background)")
    ap.add_argument("--cold", action="store_true", help="also a first bring-up with an empty "
                    "image cache (the Go binaries stay cached)")
    ap.add_argument("--datapaths", default="flannel-hostgw,flannel-vxlan,kube-router,weave,"
                    "weave-encrypted", help="comma-separated, each with a real CNI here")
    args = ap.parse_args()
    state = tempfile.mkdtemp(prefix="k8sdds-bench-")
    env = {**os.environ, "K8SDDS_STATE_DIR": state, "COLUMNS": "200"}
    name = "kb" + str(os.getpid() % 1000)
    sch = Path(state) / "s.csv"
    sch.write_text(SCHEDULE)
    common = ["--sch", str(sch), "--duration", f"{args.duration:g}", "--repeats",
              str(args.repeats), "--out", str(Path(state) / "logs"), "--json", "--no-plot"]
    from k8sdds import model

    datapaths = tuple(args.datapaths.split(","))
    ups = []
    if args.cold:
        cold_env = {**env, "K8SDDS_CACHE": tempfile.mkdtemp(prefix="k8sdds-cold-")}
        try:
            _, seconds = bring_up(name, args.workers, "flannel-hostgw", "real", cold_env)
            ups.append(("cold: images built, Go binaries cached", "real flannel", seconds))
        finally:
            k8sdds("testbed", "down", "--testbed", name, env=env)
    results, failed, idle = {}, {}, None
    for dp in datapaths:
        # pods on the emulated wiring need a routed /24 per node
        for cni in ("real", "emulated") if model.datapath(dp).pod_prefix == 24 else ("real",):
            procs, pods = [], []
            try:
                kubeconfig, seconds = bring_up(name, args.workers, dp, cni, env)
                ups.append(("warm", f"{dp}, {cni}", seconds))
                if idle is None:
                    time.sleep(10)  # idle: what the cluster costs doing nothing
                    run_dir = Path(state) / f"{name}-kube"
                    rss, cpu0 = cluster_usage(run_dir)
                    time.sleep(10)
                    idle = (rss, (cluster_usage(run_dir)[1] - cpu0) / 10 * 100)
                for _ in range(args.rounds):  # the same datapath as processes, then as pods
                    procs.append(json.loads(k8sdds(
                        "run", *common, "--datapath", dp, "--nodes", str(args.workers + 1),
                        "--testbed", name + "p", env=env).stdout))
                    pods.append(json.loads(k8sdds("run", "--backend", "kubernetes",
                                                  "--kubeconfig", kubeconfig, *common,
                                                  env=env).stdout))
            finally:
                k8sdds("testbed", "down", "--testbed", name, env=env)
            results[(dp, cni)] = (_mean([summary(Path(o["run_dir"])) for o in procs]),
                                  _mean([summary(Path(o["run_dir"])) for o in pods]))
            failed[f"{dp} {cni}"] = [f for o in procs + pods for f in o["failed"]]
    k8sdds("testbed", "down", "--testbed", name + "p", env=env)
    print(f"testbed up --kubernetes, {args.workers} workers: seconds to every node Ready, "
          "the CNI ready and metrics-server Available")
    for kind, what, seconds in ups:
        print(f"  {kind:40s} {what:28s} {seconds:6.1f} s")
    print(f"idle cluster: {idle[0]:.0f} MiB RSS, {idle[1]:.1f} % of one core")
    for dp in datapaths:
        p_real, real = results[(dp, "real")]
        p_emul, emulated = results.get((dp, "emulated"), (p_real, real * float("nan")))
        table = pd.DataFrame({
            "Mb/s processes": (p_real["Mb/s"] + p_emul["Mb/s"]) / 2,
            "Mb/s pods emulated": emulated["Mb/s"], "Mb/s pods real": real["Mb/s"],
            "pods/processes emulated": emulated["Mb/s"] / p_emul["Mb/s"],
            "pods/processes real": real["Mb/s"] / p_real["Mb/s"],
            "real/emulated": real["Mb/s"] / emulated["Mb/s"],
            "p50 us processes": (p_real["p50 us"] + p_emul["p50 us"]) / 2,
            "p50 us emulated": emulated["p50 us"], "p50 us real": real["p50 us"]})
        print(f"\n{dp}, {args.rounds} rounds x {args.repeats} x {args.duration:g} s, ddsperf, "
              "1 sub (processes and pods interleaved, each under the same cluster):")
        print(table.round(3).to_string())
    print(f"\nfailed: {failed}")


def _mean(tables: list[pd.DataFrame]) -> pd.DataFrame:
    return sum(tables) / len(tables)


if __name__ == "__main__":
    main()
