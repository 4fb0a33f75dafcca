"""A real Kubernetes cluster on the emulated testbed: real kubelets, containerd and runc run
real pods from the engine image built here; k8sdds runs schedules on it through the
kubernetes backend; the machine is left as it was (sysctls, links, mounts, cgroups, files)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.testbed.kube import cluster as kube

from .emulated_support import cli, missing, namespaces, root_links

REASON = missing() or kube.missing()
pytestmark = [pytest.mark.kubelet, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
ROOT = Path(__file__).parent.parent
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
           "net.netfilter.nf_conntrack_max")


def _sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key.replace(".", "/")
        out[key] = path.read_text().strip() if path.exists() else ""
    return out


def _mounts() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    name = "kk" + str(os.getpid() % 1000)
    env = {**os.environ, "COLUMNS": "200",
           "K8SDDS_STATE_DIR": str(tmp_path_factory.mktemp("state"))}
    before = (_sysctls(), root_links(), _mounts())
    up = cli("testbed", "up", "--name", name, "--nodes", "3", "--kubernetes", env=env,
             cwd=ROOT, timeout=1800)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        kubeconfig = up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: ")
        assert _sysctls() == before[0]  # the kubelets changed nothing host-wide
        yield {"name": name, "env": env, "kubeconfig": kubeconfig}
    finally:
        down = cli("testbed", "down", "--name", name, env=env)
        assert down.returncode == 0, down.stderr
        assert (_sysctls(), root_links(), _mounts()) == before
        assert namespaces(name) == []
        assert not any(Path(f"/sys/fs/cgroup/{h}/k8sdds/{name}").exists()
                       for h in ("cpu", "memory", "pids", "cpuset"))
        assert not Path(f"/var/lib/k8sdds/{name}").exists()
        leftover = subprocess.run(["pgrep", "-f", f"{name}-kube"], capture_output=True,
                                  text=True).stdout.split()
        assert leftover == []


def _run(cluster, tmp_path, schedule: str, *extra: str) -> tuple[dict, Path]:
    sch = tmp_path / "s.csv"
    sch.write_text(schedule)
    done = cli("run", "--backend", "kubernetes", "--kubeconfig", cluster["kubeconfig"],
               "--sch", str(sch), "--out", str(tmp_path / "logs"), "--json", "--no-plot",
               *extra, env=cluster["env"], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    return outcome, Path(outcome["run_dir"])


def test_the_nodes_are_real_kubelets(cluster):
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))
    nodes = {n.metadata.name: n for n in api.list_node().items}
    assert sorted(nodes) == ["node1", "node2"]
    for node in nodes.values():
        assert node.status.node_info.kubelet_version == "v1.34.3"
        assert node.status.node_info.container_runtime_version.startswith("containerd://")
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    # the pods' cgroups are the node's own, where its profile's CPU quota is
    for name in nodes:
        assert Path(f"/sys/fs/cgroup/cpu/k8sdds/{cluster['name']}/{name}/kube/kubepods").is_dir()


def test_ddsperf_pods_measure_throughput_and_latency_across_nodes(cluster, tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,duration\n"
    outcome, run = _run(cluster, tmp_path, head + "1024,false,1,false,0,false,3\n"
                        "64,false,1,false,0,true,3\n")
    assert outcome["repeats"] == 2 and outcome["failed"] == []
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {"pub": "node1",
                                                                "sub0": "node2"}
    df = pd.read_csv(run / "results.csv")
    summary = df[df.kind == "summary"]
    thr = summary[(summary.metric == "throughput_mbps") & (summary.role == "sub0")]
    assert thr.value.iloc[0] > 10  # real pods, real bytes: not a fixture's figure
    lat = summary[(summary.metric == "latency_us_p50") & (summary.role == "pub")]
    assert 0 < lat.value.iloc[0] < 100_000
    assert "node_load1" in set(summary.metric)  # read by exec in the repeat's own pods
    assert (run / "test-1" / "rep-1" / "sub0.log").read_text().count("size 1024") >= 1


def test_a_service_path_goes_through_kube_proxy(cluster, tmp_path):
    sch = ("engine,path,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
           "duration\niperf3,pod-service,tcp,131072,false,1,false,0,2\n")
    outcome, run = _run(cluster, tmp_path, sch)
    assert outcome["failed"] == []
    df = pd.read_csv(run / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert thr.value.max() > 10
    argv = json.loads((run / "manifest.json").read_text())["repeats"]["test-1/rep-1"]["argv"]
    assert any(a.startswith("10.96.") for a in argv["client"])  # dialled the ClusterIP


def test_an_image_that_is_not_there_fails_its_repeat_with_the_kubelets_reason(cluster,
                                                                              tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
    outcome, _ = _run(cluster, tmp_path, head + "1024,false,1,false,0,2\n", "--image",
                      "localhost/k8sdds/absent:0", "--pod-timeout", "60")
    [failure] = outcome["failed"]
    assert "ErrImagePull" in failure or "ImagePullBackOff" in failure, failure
