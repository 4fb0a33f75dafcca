"""The real kube-router on the testbed cluster: its upstream kubeadm DaemonSet in an image built
here from its Go module, routing each node's pod CIDR learnt over BGP, its network policy
chains on the forward path; ddsperf pods measure across it, the kubernetes backend detects
it, and the machine is left as it was."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest

from .builds import ENGINES, needs
from .testbed_cluster_support import cluster_env, probed_multicast, run, up_cluster, why_not

pytestmark = [pytest.mark.kubelet,
              needs("k8s-amd64", "cni-amd64", *ENGINES,
                    why=lambda: why_not("kube-router", "kube-router"))]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with up_cluster("kr" + str(os.getpid() % 1000), "kube-router",
                    cluster_env(tmp_path_factory),
                    "kube-router v2.1.0 (DaemonSet kube-system/kube-router, real)") as made:
        yield made


def _ip(ns: str, *argv: str) -> str:
    return subprocess.run(["ip", "-n", ns, *argv], capture_output=True, text=True,
                          check=True).stdout


def test_kube_router_is_the_real_one(cluster):
    """Its pods on every worker; each node's route to the other's pod CIDR learnt over BGP
    (kube-router's protocol number, where the emulated wiring's are static); the pods' bridge
    is kube-bridge; its network policy chain first on the forward path."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))
    pods = api.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-router").items
    assert sorted(p.spec.node_name for p in pods) == ["node1", "node2"]
    assert all(p.status.phase == "Running" for p in pods)
    assert {p.spec.containers[0].image for p in pods} == {"localhost/k8sdds/kube-router:v2.1.0"}
    ns = f"{cluster['name']}-node1"
    assert "10.244.2.0/24 via 10.99.0.12 dev eth0 proto 17" in _ip(ns, "route")
    assert "kube-bridge" in _ip(ns, "-br", "link")
    assert "inet " not in _ip(ns, "addr", "show", "cni0")  # the testbed's bridge stands aside
    forward = subprocess.run(["ip", "netns", "exec", ns, "iptables", "-S", "FORWARD"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    assert "KUBE-ROUTER-FORWARD" in forward[1]  # right after the policy line


def test_ddsperf_pods_measure_across_kube_router(cluster, tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,duration\n"
    outcome, rundir = run(cluster, tmp_path, head + "1024,false,1,false,0,false,2\n"
                          "64,false,1,false,0,true,2\n")
    assert outcome["repeats"] == 2 and outcome["failed"] == []
    manifest = json.loads((rundir / "manifest.json").read_text())
    found = manifest["cluster"]
    assert found["datapath"] == "kube-router" and found["cni"] == "kube-router"
    assert found["cni_daemonset"] == "kube-system/kube-router"
    assert {n["arch"] for n in found["nodes"]} == {"amd64"}
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {"pub": "node1",
                                                                "sub0": "node2"}
    df = pd.read_csv(rundir / "results.csv")
    summary = df[df.kind == "summary"]
    assert set(summary.datapath) == {"kube-router"}
    thr = summary[(summary.metric == "throughput_mbps") & (summary.role == "sub0")]
    assert thr.value.iloc[0] > 10  # real pods, real bytes
    lat = summary[(summary.metric == "latency_us_p50") & (summary.role == "pub")]
    assert 0 < lat.value.iloc[0] < 100_000
    # multicast, probed: kube-router's routes do not carry it to node2; its bridge carries it
    # to a pod beside the sender
    assert probed_multicast(rundir, "kube-router") == ({"node2": False}, True)


def test_a_service_path_through_kube_router_goes_through_kube_proxy(cluster, tmp_path):
    """kube-router's own service proxy is IPVS, which this kernel lacks; its kubeadm manifest
    leaves Services to kube-proxy, as here."""
    sch = ("engine,path,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
           "duration\niperf3,pod-service,tcp,131072,false,1,false,0,2\n")
    outcome, rundir = run(cluster, tmp_path, sch)
    assert outcome["failed"] == []
    df = pd.read_csv(rundir / "results.csv")
    assert df[(df.kind == "summary") & (df.metric == "throughput_mbps")].value.max() > 10
    manifest = json.loads((rundir / "manifest.json").read_text())
    argv = manifest["repeats"]["test-1/rep-1"]["argv"]["client"]
    assert any(a.startswith("10.96.") for a in argv)  # dialled the ClusterIP
