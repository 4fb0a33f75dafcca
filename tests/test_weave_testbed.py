"""The real Weave Net on the testbed cluster: its upstream DaemonSet (router and weave-npc) in
images built here from its Go module, in its sleeve mode (this kernel has no Open vSwitch),
plain and encrypted; ddsperf pods measure across it, the kubernetes backend detects which,
and the machine is left as it was."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest

from .builds import ENGINES, needs
from .testbed_cluster_support import cluster_env, probed_multicast, run, up_cluster, why_not

pytestmark = [pytest.mark.kubelet,
              needs("k8s-amd64", "cni-amd64", *ENGINES, why=lambda: why_not("weaver", "Weave Net"))]
SAYS = "weave 2.6.5 (DaemonSet kube-system/weave-net, real)"
HEAD = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,duration\n"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cluster_env(tmp_path_factory)


@pytest.fixture(scope="module")
def cluster(env):
    with up_cluster("wv" + str(os.getpid() % 1000), "weave", env, SAYS) as made:
        yield made


def _status(ns: str) -> str:
    """The router's own status page, read inside the node (it listens on its loopback)."""
    return subprocess.run(
        ["ip", "netns", "exec", ns, "python3", "-c", "import urllib.request; print(urllib."
         "request.urlopen('http://127.0.0.1:6784/status', timeout=10).read().decode())"],
        capture_output=True, text=True, check=True).stdout


def _established(ns: str, timeout: float = 90) -> str:
    """The router's status once its connection to the other node is established (DaemonSet
    ready means the router answers, not that its peer has joined)."""
    import time

    deadline = time.monotonic() + timeout
    while "1 established" not in (status := _status(ns)) and time.monotonic() < deadline:
        time.sleep(1)  # a peer joining: the router reports nothing to wait on
    return status


def test_weave_is_the_real_one(cluster):
    """Its pods (router and weave-npc) on every worker in the images built here; the router
    in sleeve mode (its pcap veth pair, no Open vSwitch datapath), connected to the other
    node's under a peer name of its own, allocating from the testbed's pod network."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))
    pods = api.list_namespaced_pod("kube-system", label_selector="name=weave-net").items
    assert sorted(p.spec.node_name for p in pods) == ["node1", "node2"]
    assert all(p.status.phase == "Running" for p in pods)
    assert {c.image for p in pods for c in p.spec.containers} == {
        "localhost/k8sdds/weave-kube:2.6.5", "localhost/k8sdds/weave-npc:2.6.5"}
    names = set()
    for node in ("node1", "node2"):
        ns = f"{cluster['name']}-{node}"
        status = _established(ns)
        assert "Encryption: disabled" in status and "1 established" in status, status
        assert "Range: 10.244.0.0/16" in status
        names.add(status.split("Name: ")[1].split()[0])
        links = subprocess.run(["ip", "-n", ns, "-br", "link"], capture_output=True,
                               text=True, check=True).stdout
        assert "weave " in links and "vethwe-pcap" in links and "datapath" not in links
    assert len(names) == 2  # each node its own machine id, so its own peer name


def test_ddsperf_pods_measure_across_weave(cluster, tmp_path):
    outcome, rundir = run(cluster, tmp_path, HEAD + "1024,false,1,false,0,false,2\n"
                          "64,false,1,false,0,true,2\n")
    assert outcome["repeats"] == 2 and outcome["failed"] == []
    found = json.loads((rundir / "manifest.json").read_text())["cluster"]
    assert found["datapath"] == "weave" and found["cni"] == "weave"
    df = pd.read_csv(rundir / "results.csv")
    summary = df[df.kind == "summary"]
    thr = summary[(summary.metric == "throughput_mbps") & (summary.role == "sub0")]
    assert thr.value.iloc[0] > 1  # real pods, real bytes, through the router's user space
    lat = summary[(summary.metric == "latency_us_p50") & (summary.role == "pub")]
    assert 0 < lat.value.iloc[0] < 100_000
    # multicast, probed: Weave's router carries it to node2 (and its bridge beside the sender)
    assert probed_multicast(rundir, "weave") == ({"node2": True}, True)


def test_weave_encrypted_takes_its_password_from_a_secret(cluster, env, tmp_path):
    """The encrypted datapath: the same DaemonSet with WEAVE_PASSWORD from a Secret; the
    routers say their connection is encrypted, and a run detects weave-encrypted."""
    from kubernetes import client, config

    with up_cluster(cluster["name"] + "e", "weave-encrypted", env, SAYS) as encrypted:
        api = client.CoreV1Api(config.new_client_from_config(encrypted["kubeconfig"]))
        secret = api.read_namespaced_secret("weave-passwd", "kube-system")
        assert len(secret.data["weave-passwd"]) > 20
        status = _established(f"{encrypted['name']}-node1")
        assert "Encryption: enabled" in status and "1 established" in status, status
        outcome, rundir = run(encrypted, tmp_path, HEAD + "1024,false,1,false,0,false,2\n")
        assert outcome["failed"] == []
        found = json.loads((rundir / "manifest.json").read_text())["cluster"]
        assert found["datapath"] == "weave-encrypted" and found["cni"] == "weave (encrypted)"
    assert "Encryption: disabled" in _status(f"{cluster['name']}-node1")  # the first, as it was
