"""A real Kubernetes cluster on the emulated testbed: real kubelets, containerd and runc run
real pods from the engine image built here; k8sdds runs schedules on it through the
kubernetes backend; the machine is left as it was (sysctls, links, mounts, cgroups, files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.testbed.kube import kubelets as kube

from .builds import ENGINES, needs
from .emulated_support import cli, host_mounts, missing, namespaces, root_links
from .load_support import STOP_BOUND_S, busy_machine, stop_timed
from .testbed_cluster_support import ROOT, cluster_env, probed_multicast, up_cluster
from .testbed_cluster_support import run as _run


def _why() -> str | None:
    return missing() or kube.missing()


pytestmark = [pytest.mark.kubelet, needs("k8s-amd64", *ENGINES, why=_why)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # flanneld, not the emulated wiring
    with up_cluster("kk" + str(os.getpid() % 1000), "flannel-vxlan",
                    cluster_env(tmp_path_factory), "flannel v0.28") as made:
        yield made


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
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,duration,load\n"
    outcome, run = _run(cluster, tmp_path, head + "1024,false,1,false,0,false,3,\n"
                        "64,false,1,false,0,true,2,\n64,false,1,false,0,true,2,max\n")
    assert outcome["repeats"] == 3 and outcome["failed"] == []
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {"pub": "node1",
                                                                "sub0": "node2"}
    # under load: the stream's pods beside the round trip's, across the same nodes
    assert manifest["repeats"]["test-3/rep-1"]["placement"] == {
        "pub": "node1", "sub0": "node2", "stream": "node1", "sink": "node2"}
    sink = (run / "test-3" / "rep-1" / "sink.log").read_text()
    assert "size 1024 total" in sink and " lost 0 " in sink
    df = pd.read_csv(run / "results.csv")
    summary = df[df.kind == "summary"]
    thr = summary[(summary.metric == "throughput_mbps") & (summary.role == "sub0")]
    assert thr.value.iloc[0] > 10  # real pods, real bytes: not a fixture's figure
    lat = summary[(summary.metric == "latency_us_p50") & (summary.role == "pub")]
    assert 0 < lat.value.iloc[0] < 100_000
    assert "node_load1" in set(summary.metric)  # read by exec in the repeat's own pods
    assert manifest["cluster"]["datapath"] == "flannel-vxlan"  # detected: flannel's DaemonSet
    assert manifest["cluster"]["cni"] == "flannel (vxlan)"
    # the nodes' fingerprints: from the API the real kubelets' versions and the CNI's images
    # for its version; from the unprivileged probe pods, the node's flannel VXLAN device at
    # its MTU (50 under the node's 1500), the pods' interface at flannel's MTU, the sysctls
    prints = manifest["fingerprints"]["flannel-vxlan"]
    assert set(prints) == {"node1", "node2"}
    for fp in prints.values():
        assert fp["kubelet"] == "v1.34.3" and fp["runtime"].startswith("containerd://")
        assert "flannel" in fp["cni"]["version"] and fp["cni"]["mode"] == "VXLAN"
        assert "not_read" not in fp, fp.get("not_read")
        assert fp["interfaces"]["flannel.1"]["kind"] == "vxlan"
        assert fp["interfaces"]["flannel.1"]["mtu"] == fp["interfaces"]["eth0"]["mtu"] - 50
        assert fp["interfaces"]["flannel.1"]["offloads"]  # ethtool -k, without privilege
        assert fp["pods"]["pod"]["eth0"]["mtu"] == fp["interfaces"]["flannel.1"]["mtu"]
        assert fp["pods"]["pod"]["eth0"]["kind"] == "veth"
        assert "net.core.rmem_max" in fp["sysctls"]
    # multicast, probed by pods of the image (k8sdds-discovery's probe): flannel's VXLAN does
    # not carry it to node2; its bridge carries it to a pod beside the sender
    assert probed_multicast(run, "flannel-vxlan") == ({"node2": False}, True)
    # metrics-server (built here) reads flanneld's pod and the nodes over the repeat
    usage = json.loads((run / "test-1" / "rep-1" / "usage.json").read_text())
    assert usage["datapath_memory_mb"] > 1 and usage["datapath_cpu_s"] > 0  # flanneld ran
    assert usage["node_cpu_s"] > 0
    assert (run / "test-1" / "rep-1" / "sub0.log").read_text().count("size 1024") >= 1


def test_zenoh_and_mqtt_pods_run_the_engines_the_image_carries(cluster, tmp_path):
    head = ("engine,transport,topology,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
            "duration\n")
    outcome, run = _run(cluster, tmp_path, head + "zenoh,tcp,peer,1024,false,1,false,0,2\n"
                        "zenoh,tcp,routed,1024,false,1,false,0,2\n"
                        "mqtt,tcp,,1024,false,1,false,0,2\n")
    assert outcome["repeats"] == 3 and outcome["failed"] == []
    manifest = json.loads((run / "manifest.json").read_text())
    # two workers: the router and the broker share the publisher's node
    assert manifest["repeats"]["test-2/rep-1"]["placement"] == {
        "pub": "node1", "router": "node1", "sub0": "node2"}
    assert manifest["repeats"]["test-3/rep-1"]["placement"] == {
        "pub": "node1", "broker": "node1", "sub0": "node2"}
    df = pd.read_csv(run / "results.csv")
    s = df[(df.kind == "summary") & (df.role == "sub0")].set_index(["test", "metric"]).value
    for test in (1, 2, 3):  # real pods across flannel's VXLAN, nothing lost
        assert s[(test, "throughput_mbps")] > 1 and s[(test, "lost")] == 0
    assert manifest["repeats"]["test-2/rep-1"]["argv"]["router"][:3] == [
        "k8sdds-zenoh", "-mode", "router"]


def test_dds_discovery_pods_start_together_and_each_node_samples_its_uplink(cluster, tmp_path):
    """engine=dds-discovery on real pods: four participants (the image's k8sdds-discovery)
    spread over the two workers, by a peers list (flannel carries no multicast across
    nodes), each started at the common instant; a hostNetwork pod on each node samples its
    uplink's counters, read back into the run. Then zenoh-discovery's four sessions (the
    image's k8sdds-zenoh) through a router pod, and by a peers list."""
    head = "engine,discovery,placement,dataLen,multicast,numSubscribers,bestEffort,batchSize," \
           "duration,transport,topology\n"
    outcome, run = _run(cluster, tmp_path, head + "dds-discovery,peers,spread,64,false,3,false,"
                        "0,2,udp,peer\n"
                        "zenoh-discovery,,spread,64,false,3,false,0,1,tcp,routed\n"
                        "zenoh-discovery,peers,spread,64,false,3,false,0,1,tcp,peer\n")
    assert outcome["failed"] == [], outcome["failed"]
    zenoh = pd.read_csv(run / "results.csv").query("test > 1 and metric == 'discovery_s'")
    assert len(zenoh) == 2 * 4 and zenoh.value.between(0, 30).all()  # every session knew all
    said = next(line for line in outcome["answer"] if "zenoh router" in line)
    assert "zenoh peers" in said, said
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {
        "p0": "node1", "p1": "node2", "p2": "node1", "p3": "node2"}
    df = pd.read_csv(run / "results.csv").query("test == 1")
    s = df[df.kind == "summary"].set_index(["role", "metric"]).value
    for role in ("p0", "p1", "p2", "p3"):
        # each waits for the common instant; beside other work a pod may still come up after
        # it (2.2 s late once, in CI), and its discovery is then timed from its own start:
        # late by less than the lead it was given (11 s, start_lead of six pods), never more
        assert 0 < s[(role, "discovery_s")] < 5 and 0 <= s[(role, "start_late_s")] < 11
    for node in ("node1", "node2"):
        rx = df[(df.role == "node") & (df.node == node) & (df.metric == "node_rx_bytes")]
        assert len(rx) > 20 and rx.value.iloc[-1] > rx.value.iloc[0]  # 50 ms apart, counting
    assert any(line.startswith("discovery on flannel-vxlan, 4 participants: peers ")
               and "kB a node" in line for line in outcome["answer"])


def test_perftest_pods_run_the_build_the_image_carries(cluster, tmp_path):
    """engine=rtiperftest with no Perftest given: the pods run the perftest_cpp `make
    perftest` built on Cyclone DDS, which the engine image carries; Perftest's own summaries
    across flannel's VXLAN."""
    head = "engine,dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,duration\n"
    outcome, run = _run(cluster, tmp_path, head + "rtiperftest,1024,false,1,false,0,false,3\n"
                        "rtiperftest,256,false,1,false,0,true,3\n")
    assert outcome["failed"] == [], outcome["failed"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["repeats"]["test-1/rep-1"]["argv"]["pub"][0] == "perftest_cpp"
    df = pd.read_csv(run / "results.csv")
    s = df[df.kind == "summary"].set_index(["test", "role", "metric"]).value
    assert s[(1, "sub0", "throughput_mbps")] > 1 and s[(1, "sub0", "lost")] == 0
    assert 1 < s[(2, "pub", "latency_us_mean")] < 100_000  # a round trip, µs
    log = (run / "test-1" / "rep-1" / "pub.log").read_text()
    assert log.startswith("RTI Perftest ") and "(Eclipse Cyclone DDS " in log.splitlines()[0]


def _iperf3_through(cluster, tmp_path, path: str) -> list[str]:
    """An iperf3 run on a Service path: it measured (over 10 Mb/s); the client's argv."""
    sch = ("engine,path,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
           f"duration\niperf3,{path},tcp,131072,false,1,false,0,2\n")
    outcome, run = _run(cluster, tmp_path, sch)
    assert outcome["failed"] == []
    df = pd.read_csv(run / "results.csv")
    assert df[(df.kind == "summary") & (df.metric == "throughput_mbps")].value.max() > 10
    manifest = json.loads((run / "manifest.json").read_text())
    return manifest["repeats"]["test-1/rep-1"]["argv"]["client"]


def test_a_service_path_goes_through_kube_proxy(cluster, tmp_path):
    argv = _iperf3_through(cluster, tmp_path, "pod-service")
    assert any(a.startswith("10.96.") for a in argv)  # dialled the ClusterIP


def test_an_image_that_is_not_there_fails_its_repeat_with_the_kubelets_reason(cluster,
                                                                              tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
    outcome, _ = _run(cluster, tmp_path, head + "1024,false,1,false,0,2\n", "--image",
                      "localhost/k8sdds/absent:0", "--pod-timeout", "60")
    [failure] = outcome["failed"]
    assert "ErrImagePull" in failure or "ImagePullBackOff" in failure, failure


def _ip(ns: str, *argv: str) -> str:
    return subprocess.run(["ip", "-n", ns, *argv], capture_output=True, text=True,
                          check=True).stdout


def test_flannel_is_the_real_one(cluster):
    """flanneld's DaemonSet runs on every worker and made the datapath itself: its VXLAN
    device (its own MAC, not the emulated wiring's), its routes, its node annotations."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))
    pods = api.list_namespaced_pod("kube-flannel").items
    assert sorted(p.spec.node_name for p in pods) == ["node1", "node2"]
    assert all(p.status.phase == "Running" for p in pods)
    assert all(p.spec.containers[0].image.startswith("localhost/k8sdds/flannel:") for p in pods)
    for node in api.list_node().items:
        notes = node.metadata.annotations
        assert notes["flannel.alpha.coreos.com/backend-type"] == "vxlan"
        assert notes["flannel.alpha.coreos.com/public-ip"] == node.status.addresses[0].address
    ns = f"{cluster['name']}-node1"
    link = _ip(ns, "-d", "link", "show", "flannel.1")
    assert "vxlan id 1 " in link and "dstport 8472" in link
    mac = link.split("link/ether ")[1].split()[0]
    assert not mac.startswith("0e:6b:64")  # the emulated wiring's fixed MACs
    assert "10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink" in _ip(ns, "route")
    subnet = (Path(cluster["env"]["K8SDDS_STATE_DIR"]) / f"{cluster['name']}-kube" / "node1"
              / "view" / "flannel" / "subnet.env").read_text()
    assert "FLANNEL_SUBNET=10.244.1.1/24" in subnet
    assert not Path("/run/flannel").exists() and not Path("/etc/cni/net.d/10-flannel.conflist"
                                                            ).exists()


def test_external_nodeport_reaches_the_server_through_kube_proxy(cluster, tmp_path):
    argv = _iperf3_through(cluster, tmp_path, "external-nodeport")
    assert argv[argv.index("-c") + 1].startswith("10.99.0.")  # a node address
    assert 30000 <= int(argv[argv.index("-p") + 1]) <= 32767  # its NodePort


def test_tls_and_dds_security_run_with_credentials_from_the_secret(cluster, tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
    outcome, run = _run(cluster, tmp_path, head + "1024,false,1,false,0,2\n", "--transport",
                        "tls", "--secure")
    assert outcome["failed"] == [], outcome["failed"]
    df = pd.read_csv(run / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps") & (df.role == "sub0")]
    assert thr.value.iloc[0] > 1  # data flowed over TLS with DDS Security on
    assert set(df.transport) == {"tls"} and set(df.secure) == {True}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["cluster"]["not_applied"] == []  # nothing left out, metrics-server there


def test_an_image_loaded_into_the_running_cluster_runs_a_pod(cluster, tmp_path):
    from kubernetes import client, config

    from k8sdds.images.build import busybox_image

    tag = f"localhost/k8sdds/loaded:{os.getpid()}"
    archive = busybox_image(tag, {}, ["--config.cmd=/bin/sh", "--config.cmd=-c",
                                      "--config.cmd=echo loaded here"], "test-loaded",
                            cache=tmp_path)
    done = cli("image", "load", "--testbed", cluster["name"], "--archive", str(archive),
               env=cluster["env"])
    assert done.returncode == 0, done.stderr
    assert "loaded into node1, node2" in done.stdout
    api = client.CoreV1Api(config.new_client_from_config(cluster["kubeconfig"]))
    pod = {"metadata": {"name": "loaded", "namespace": "default"},
           "spec": {"nodeName": "node2", "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": tag,
                                    "imagePullPolicy": "IfNotPresent"}]}}
    api.create_namespaced_pod("default", pod)
    try:
        deadline = time.monotonic() + 60
        while api.read_namespaced_pod("loaded", "default").status.phase not in (
                "Succeeded", "Failed") and time.monotonic() < deadline:
            time.sleep(0.5)  # a pod of the test's own: polled
        assert api.read_namespaced_pod("loaded", "default").status.phase == "Succeeded"
        assert api.read_namespaced_pod_log("loaded", "default").strip() == "loaded here"
    finally:
        api.delete_namespaced_pod("loaded", "default", grace_period_seconds=0)


def _managed_pods(kubeconfig: str) -> list[str]:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(kubeconfig))
    return [p.metadata.name for p in api.list_pod_for_all_namespaces(
        label_selector="app.kubernetes.io/managed-by=k8sdds").items]


def _start(cluster, tmp_path, schedule: str, *extra: str) -> subprocess.Popen:
    sch = tmp_path / "s.csv"
    sch.write_text(schedule)
    return subprocess.Popen([sys.executable, "-m", "k8sdds", "run", "--backend", "kubernetes",
                             "--kubeconfig", cluster["kubeconfig"], "--sch", str(sch), "--out",
                             str(tmp_path / "logs"), "--json", "--no-plot", *extra],
                            env=cluster["env"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_running(kubeconfig: str, count: int, timeout: float = 90) -> None:
    """Until `count` of the run's role pods run: its fingerprint and multicast probe pods,
    which come and go before the roles start, are not counted (in a cold run beside the
    builds, the two probes running were once taken for the roles, and node2's kubelet was
    killed before its role's pod had started)."""
    from kubernetes import client, config

    from k8sdds.deployment.kubernetes.objects import ROLE_LABEL
    from k8sdds.deployment.kubernetes.probes import ROLE as PROBE

    api = client.CoreV1Api(config.new_client_from_config(kubeconfig))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = api.list_pod_for_all_namespaces(
            label_selector=f"app.kubernetes.io/managed-by=k8sdds,{ROLE_LABEL}!={PROBE}").items
        if sum(p.status.phase == "Running" for p in pods) >= count:
            return
        time.sleep(0.3)  # another process's pods: polled from the test
    raise AssertionError("the run's pods did not come up")


def test_sigint_mid_run_leaves_no_pod(cluster, tmp_path):
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
    proc = _start(cluster, tmp_path, head + "1024,false,1,false,0,60\n")
    try:
        _wait_running(cluster["kubeconfig"], 2)
        with busy_machine():  # real kubelets deleting real pods, on a loaded machine
            took, err = stop_timed(proc, signal.SIGINT)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err, err[-2000:]
    assert took < STOP_BOUND_S, f"the run took {took:.1f} s to end after SIGINT"
    assert _managed_pods(cluster["kubeconfig"]) == []


def test_a_second_cluster_runs_beside_the_first(cluster, tmp_path):
    """Two testbed clusters at once: flannel host-gw (real) beside the module's vxlan one;
    a run on each; down of the second leaves the first Ready."""
    name = cluster["name"] + "b"
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", "--kubernetes", "--datapath",
             "flannel-hostgw", env=cluster["env"], cwd=ROOT, timeout=600)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        second = {**cluster, "name": name,
                  "kubeconfig": up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: ")}
        assert second["kubeconfig"] != cluster["kubeconfig"]
        assert "10.244.2.0/24 via 10.99.0.12 dev eth0" in _ip(f"{name}-node1", "route")
        head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
        outcome, run = _run(second, tmp_path, head + "1024,false,1,false,0,2\n")
        assert outcome["failed"] == []
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["cluster"]["datapath"] == "flannel-hostgw"
        status = cli("testbed", "status", "--testbed", name, env=cluster["env"])
        assert "flannel" in status.stdout and "node2" in status.stdout, status.stdout
        assert status.stdout.count("yes") >= 2  # both workers Ready
    finally:
        down = cli("testbed", "down", "--testbed", name, env=cluster["env"])
    assert down.returncode == 0, down.stderr
    assert namespaces(name) == []
    test_the_nodes_are_real_kubelets(cluster)  # the first is as it was


def test_the_emulated_wiring_carries_pods_when_asked(cluster, tmp_path):
    name = cluster["name"] + "e"
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", "--kubernetes", "--datapath",
             "flannel-hostgw", "--pod-network", "emulated", env=cluster["env"], cwd=ROOT,
             timeout=600)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        kubeconfig = up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: ")
        head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
        outcome, run = _run({**cluster, "kubeconfig": kubeconfig}, tmp_path,
                            head + "1024,false,1,false,0,2\n")
        assert outcome["failed"] == []
        found = json.loads((run / "manifest.json").read_text())["cluster"]
        assert found["datapath"] == "flannel-hostgw" and "emulated wiring" in found["cni"]
    finally:
        down = cli("testbed", "down", "--testbed", name, env=cluster["env"])
    assert down.returncode == 0, down.stderr


def test_a_killed_bring_up_is_cleaned_by_down(cluster, tmp_path):
    """SIGKILL to `testbed up --kubernetes` once its first kubelet runs: `testbed down`
    removes every process, mount, namespace and file it had made."""
    name = cluster["name"] + "k"
    before = (host_mounts(name), root_links())
    up = subprocess.Popen([sys.executable, "-m", "k8sdds", "testbed", "up", "--testbed", name,
                           "--nodes", "3", "--kubernetes", "--pod-network", "emulated"],
                          env=cluster["env"], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    pattern = f"{name}-kube/node1/kubelet.yaml"
    deadline = time.monotonic() + 300
    while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode != 0:
        assert up.poll() is None and time.monotonic() < deadline, "no kubelet came up"
        time.sleep(0.2)  # another process's progress: polled from the test
    up.kill()
    up.wait()
    assert subprocess.run(["pgrep", "-f", f"{name}-kube"], capture_output=True).stdout
    down = cli("testbed", "down", "--testbed", name, env=cluster["env"])
    assert down.returncode == 0, down.stderr
    assert subprocess.run(["pgrep", "-f", f"{name}-kube"], capture_output=True,
                          text=True).stdout.split() == []
    assert namespaces(name) == [] and (host_mounts(name), root_links()) == before
    assert not Path(f"/var/lib/k8sdds/{name}").exists()
    assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}"))


def test_a_killed_kubelet_fails_only_its_repeats(cluster, tmp_path):
    """Last: node2's kubelet is killed mid-run; the repeat with a pod there fails with the
    reason, the next test (both pods on node1) runs."""
    sch = ("path,dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
           "pod-pod-cross-node,1024,false,1,false,0,8\n"
           "pod-pod-same-node,1024,false,1,false,0,2\n")
    proc = _start(cluster, tmp_path, sch, "--pod-timeout", "30")
    try:
        _wait_running(cluster["kubeconfig"], 2)
        subprocess.run(["pkill", "-KILL", "-f", f"{cluster['name']}-kube/node2/kubelet.yaml"],
                       check=True)
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    outcome = json.loads(out)
    assert outcome["repeats"] == 2
    [failure] = outcome["failed"]
    assert failure.startswith("test-1/rep-1: sub0"), failure  # the role on node2
    df = pd.read_csv(Path(outcome["run_dir"]) / "results.csv")
    subs = df[(df.kind == "summary") & (df.role == "sub0")]
    assert set(subs.test) == {2}  # the next test, both pods on node1, measured
    assert set(df[(df.test == 2) & df.node.notna()].node) == {"node1"}
