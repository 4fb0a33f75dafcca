#!/usr/bin/env python3
"""The kubernetes backend at scale, on a real kube-apiserver + etcd with kwok nodes.

1. Start-up: from `k8sdds run` (a new process) to the first pod of the first test created, on
   a 3-worker simulated edge cluster (amd64 control plane, arm workers).
2. Scale: 1,000 pods over 100 simulated workers through the backend itself (deploy, start
   each role with its ConfigMap, one watch until all are Running), then teardown; wall time
   and API requests per pod: k8sdds's own (counted in its client) and the API server's total
   (its apiserver_request_total, kwok's status updates as a kubelet included).

Needs the binaries of `.ci/k8s-test-binaries` and Debian's etcd (as `make test` installs).
Usage: .venv/bin/python benchmarks/kube_scale.py [--pods 1000] [--nodes 100]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from k8sdds import model, schedule  # noqa: E402
from k8sdds.deployment.kubernetes import KubernetesBackend  # noqa: E402
from k8sdds.deployment.kubernetes import objects as m  # noqa: E402
from k8sdds.deployment.options import KubernetesOptions  # noqa: E402
from k8sdds.engines.base import Command  # noqa: E402
from tests import kube_support as ks  # noqa: E402


def apiserver_requests(cp) -> int:
    """Requests the API server has served, all clients and verbs (watches counted once)."""
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(cp.ca))
    req = urllib.request.Request(cp.server + "/metrics",
                                 headers={"Authorization": f"Bearer {cp.token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
        text = r.read().decode()
    return int(sum(float(v) for v in re.findall(
        r'^apiserver_request_total\{[^}]*\} ([0-9.e+]+)$', text, re.M)))


class Counted:
    """Counts the HTTP requests a kubernetes client makes (k8sdds's own share)."""

    def __init__(self) -> None:
        from kubernetes.client import rest

        self.count = 0
        original = rest.RESTClientObject.request

        def request(client_self, *args, **kwargs):
            self.count += 1
            return original(client_self, *args, **kwargs)

        rest.RESTClientObject.request = request


def startup(cp, work: Path) -> float:
    """Seconds from launching `k8sdds run` to the first pod's creation seen by a watch."""
    from kubernetes import client, watch

    sch = work / "one.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
                   "1024,false,1,false,0,2\n")
    core = client.CoreV1Api(cp.api())
    rv = core.list_pod_for_all_namespaces(limit=1).metadata.resource_version
    w = watch.Watch()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "run", "--sch", str(sch),
                             "--backend", "kubernetes", "--kubeconfig", str(cp.kubeconfig),
                             "--image", ks.IMAGE_OK, "--out", str(work / "out"), "--quiet",
                             "--no-plot"], cwd=ROOT)
    first = None
    for event in w.stream(core.list_pod_for_all_namespaces, resource_version=rv,
                          label_selector=m.MANAGED_SELECTOR, timeout_seconds=60):
        if event["type"] == "ADDED":
            first = time.monotonic() - t0
            w.stop()
    if proc.wait(timeout=120) != 0 or first is None:
        sys.exit("the start-up run failed")
    return first


def scale(cp, pods: int) -> dict:
    counted = Counted()
    sch_dir = Path(tempfile.mkdtemp())
    sch = sch_dir / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
                   f"1024,false,{pods - 1},false,0,10\n")
    [test] = schedule.expand(schedule.load(sch, limits=model.Limits(max_subscribers=pods)),
                             ["flannel-hostgw"], sch)
    backend = KubernetesBackend(KubernetesOptions(kubeconfig=cp.kubeconfig,
                                                  image=ks.IMAGE_HANG, pod_timeout=600))
    backend.up()
    try:
        backend.use_datapath("flannel-hostgw")
        roles = ["pub"] + [f"sub{i}" for i in range(pods - 1)]
        before_ours, before_all = counted.count, apiserver_requests(cp)
        t0 = time.monotonic()
        placed = backend.deploy(test, roles, 1)
        handles = [backend.start(placed[r], Command(("ddsperf", "sub"), {},
                                                    {f"{r}.xml": "<CycloneDDS/>"}),
                                 sch_dir / f"{r}.log") for r in roles]
        created = time.monotonic() - t0
        backend.ready(handles)
        running = time.monotonic() - t0
        ours, total = counted.count - before_ours, apiserver_requests(cp) - before_all
        t1 = time.monotonic()
        backend._handles = []  # no logs to collect: this measures deployment only
        backend.teardown()
        gone = time.monotonic() - t1
        nodes = len({p.node for p in placed.values()})
    finally:
        backend.down()
    return {"pods": pods, "nodes": nodes, "created_s": created, "running_s": running,
            "teardown_s": gone, "ours_per_pod": ours / pods, "all_per_pod": total / pods}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=100)
    args = ap.parse_args()
    reason = ks.missing()
    if reason:
        sys.exit(reason)
    with tempfile.TemporaryDirectory(prefix="k8sdds-bench-") as tmp:
        cp = ks.ControlPlane(Path(tmp) / "cp").start()
        try:
            cp.add_nodes(ks.EDGE)
            starts = [startup(cp, Path(tmp)) for _ in range(3)]
            print("start-up, `k8sdds run` to the first pod created (3 workers), 3 runs: "
                  + ", ".join(f"{s:.2f} s" for s in starts))
            cp.add_nodes([ks.node(f"edge-{i:03d}", "arm64")
                          for i in range(args.nodes - 3)])
            r = scale(cp, args.pods)
            print(f"{r['pods']} pods on {r['nodes']} workers: all created in "
                  f"{r['created_s']:.1f} s, all Running in {r['running_s']:.1f} s "
                  f"(goal < 60 s); teardown {r['teardown_s']:.1f} s")
            print(f"API requests per pod: k8sdds {r['ours_per_pod']:.2f}, API server total "
                  f"{r['all_per_pod']:.2f} (kwok's kubelet status updates included)")
        finally:
            cp.stop()


if __name__ == "__main__":
    main()
