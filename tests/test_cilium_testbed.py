"""The real Cilium on the testbed cluster: its Helm chart of v1.19.0 as k8sdds renders it, in
images built here from its Go module, its agent compiling its BPF programs at start with
Debian's clang; eBPF host routing in both modes (VXLAN and native routing). DDS, Zenoh and MQTT
pods measure across it, the kubernetes backend detects which mode, and the machine is left as
it was: its sysctls, its cgroup2 root (Cilium's socket programs attach to each node's own) and
its BPF filesystem."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.testbed import cgroups
from k8sdds.testbed.kube import kubelets as kube

from .builds import ENGINES, needs
from .testbed_cluster_support import cluster_env, probed_multicast, run, up_cluster, why_not

pytestmark = [pytest.mark.kubelet,
              needs("k8s-amd64", "cni-amd64", *ENGINES,
                    why=lambda: why_not("cilium-agent", "Cilium"))]
SAYS = "cilium 1.19.0 (DaemonSet kube-system/cilium, real)"
# DDS (throughput, then round trips), Zenoh and MQTT, pod to pod across the two workers
SCHEDULE = ("engine,transport,topology,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
            "latencyTest,duration\n"
            "ddsperf,,,1024,false,1,false,0,false,2\n"
            "ddsperf,,,64,false,1,false,0,true,2\n"
            "zenoh,tcp,peer,1024,false,1,false,0,false,2\n"
            "mqtt,tcp,,1024,false,1,false,0,false,2\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with up_cluster("ci" + str(os.getpid() % 1000), "cilium-vxlan",
                    cluster_env(tmp_path_factory), SAYS) as made:
        yield made


def _api(cluster):
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))


def _agent(cluster, node: str, *argv: str) -> str:
    """`argv` in the Cilium agent's container on `node` (kubectl exec)."""
    pod = _api(cluster).list_namespaced_pod(
        "kube-system", label_selector="k8s-app=cilium",
        field_selector=f"spec.nodeName={node}").items[0].metadata.name
    return subprocess.run(
        [str(kube.binaries() / "kubectl"), "--kubeconfig", cluster["kubeconfig"], "-n",
         "kube-system", "exec", pod, "-c", "cilium-agent", "--", *argv],
        capture_output=True, text=True, check=True, timeout=60).stdout


def _root_programs() -> str:
    """What is attached to this machine's cgroup2 root (none before or after a run)."""
    unified = cgroups.hybrid_unified() or [cgroups.V2_ROOT]
    return subprocess.run(["bpftool", "cgroup", "show", str(unified[0])], capture_output=True,
                          text=True, check=True).stdout.strip()


def _measured(cluster, tmp_path, datapath: str, cni: str) -> None:
    """The schedule runs with nothing lost; the run detects `datapath` and says `cni`."""
    outcome, rundir = run(cluster, tmp_path, SCHEDULE)
    assert outcome["repeats"] == 4 and outcome["failed"] == []
    manifest = json.loads((rundir / "manifest.json").read_text())
    found = manifest["cluster"]
    assert (found["datapath"], found["cni"], found["cni_daemonset"]) == (
        datapath, cni, "kube-system/cilium")
    for fp in manifest["fingerprints"][datapath].values():  # which Cilium, which mode
        assert fp["cni"]["name"] == cni
        assert fp["cni"]["version"] == "localhost/k8sdds/cilium:1.19.0"
    df = pd.read_csv(rundir / "results.csv")
    s = df[df.kind == "summary"].set_index(["test", "role", "metric"]).value
    for test in (1, 3, 4):  # real pods, real bytes, across the two nodes
        assert s[(test, "sub0", "throughput_mbps")] > 1 and s[(test, "sub0", "lost")] == 0
    assert 0 < s[(2, "pub", "latency_us_p50")] < 100_000
    assert set(df.datapath) == {datapath}
    # multicast, probed: Cilium drops it, to node2 and beside the sender on node1 alike
    assert probed_multicast(rundir, datapath) == ({"node2": False}, False)


def test_cilium_is_the_real_one_with_ebpf_host_routing(cluster):
    """Its agent on every worker, its operator, in the images built here; by its own word the
    agent replaced kube-proxy and routes at the host with BPF; its VXLAN device is a
    collect-metadata one on Cilium's port; it compiled its programs at start; its socket
    programs are on the node's own cgroup, none on this machine's."""
    pods = _api(cluster).list_namespaced_pod("kube-system").items
    agents = [p for p in pods if p.metadata.name.startswith("cilium-")
              and "operator" not in p.metadata.name]
    assert sorted(p.spec.node_name for p in agents) == ["node1", "node2"]
    assert {p.spec.containers[0].image for p in agents} == {"localhost/k8sdds/cilium:1.19.0"}
    operator = [p for p in pods if p.metadata.name.startswith("cilium-operator-")]
    assert [p.spec.containers[0].image for p in operator] == [
        "localhost/k8sdds/operator-generic:1.19.0"]
    assert all(p.status.phase == "Running" for p in agents + operator)
    status = _agent(cluster, "node1", "cilium-dbg", "status")
    assert "Routing:                 Network: Tunnel [vxlan]   Host: BPF" in status
    assert "KubeProxyReplacement:    True" in status
    assert "Daemon: 1.19.0" in _agent(cluster, "node1", "cilium-dbg", "version")
    assert "clang version 19.1.7" in _agent(cluster, "node1", "clang", "--version")
    ns = f"{cluster['name']}-node1"
    link = subprocess.run(["ip", "-n", ns, "-d", "link", "show", "cilium_vxlan"],
                          capture_output=True, text=True, check=True).stdout
    assert "vxlan external" in link and "dstport 8472" in link
    # compiled on the node from the image's sources (the image holds no object): the
    # agent's template cache, in the node's own /var/run/cilium (read on the machine, as a
    # restarted agent's log no longer says it compiled)
    run = Path(cluster["env"]["K8SDDS_STATE_DIR"]) / f"{cluster['name']}-kube"
    templates = run / "node1" / "view" / "cilium-run" / "state" / "templates"
    # the agent compiles bpf_host.o on its own time, after its status is up (seen here: a
    # moment after, and the file first empty, on a machine busy with builds): waited for
    # until it is whole, bounded
    def compiled() -> list[Path]:
        found = list(templates.glob("*/bpf_host.o"))
        return found if found and all(o.stat().st_size > 1000 for o in found) else []

    deadline = time.monotonic() + 120
    while not (objs := compiled()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert objs
    for obj in objs:
        head = obj.read_bytes()[:20]
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 247  # BPF
    node_cgroup = cgroups.unified_dir(f"/k8sdds/{cluster['name']}/node1/kube")
    on_node = subprocess.run(["bpftool", "cgroup", "show", str(node_cgroup)],
                             capture_output=True, text=True, check=True).stdout
    assert "cil_sock4_connect" in on_node
    assert _root_programs() == ""
    assert not Path("/sys/fs/bpf/cilium").exists()  # its pins are in the node's own


def test_dds_zenoh_and_mqtt_measure_across_cilium_vxlan(cluster, tmp_path):
    _measured(cluster, tmp_path, "cilium-vxlan", "cilium (tunnel, vxlan, eBPF host routing)")


def test_cilium_native_routing_carries_the_same_schedule(tmp_path_factory, tmp_path):
    """Native routing on a cluster of its own: a route per node's pod CIDR via the node, by
    the agent's word routed natively with BPF host routing; the same schedule."""
    with up_cluster("cn" + str(os.getpid() % 1000), "cilium-native",
                    cluster_env(tmp_path_factory), SAYS) as native:
        status = _agent(native, "node1", "cilium-dbg", "status")
        assert "Routing:                 Network: Native   Host: BPF" in status
        routes = subprocess.run(["ip", "-n", f"{native['name']}-node1", "route"],
                                capture_output=True, text=True, check=True).stdout
        assert "10.244.2.0/24 via 10.99.0.12 dev eth0" in routes
        _measured(native, tmp_path, "cilium-native", "cilium (native, eBPF host routing)")
