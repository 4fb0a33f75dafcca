"""`k8sdds cluster install|images|check|init|join|reset` against real kubeadm: three SSH test
hosts that are real nodes (tests/kubeadm_support.py: sshd, containerd and the kubelet in each
host's namespaces), the node parts put on by `cluster install`, images built here and loaded
over SSH, the pinned kube-router and Weave Net manifests applied from the control plane's
copy, then a run of the kubernetes backend on that cluster, then reset: each host as it was,
and this machine untouched throughout. flannel's cycle is the Pi tutorial's
(tests/test_pi_tutorial.py), on nodes of its own, so that the two files share the test
processes."""

from __future__ import annotations

import difflib
import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from . import kubeadm_support as ks
from .builds import ENGINES, needs
from .ssh_support import check_rows

pytestmark = [pytest.mark.kubelet, pytest.mark.ssh,
              needs("k8s-amd64", "cni-amd64", *ENGINES, why=ks.missing)]

# the Weave Net router's status, from its HTTP port on the node's loopback
WEAVE_STATUS = ("import urllib.request; print(urllib.request.urlopen("
                "'http://127.0.0.1:6784/status', timeout=5).read().decode())")
PREFIX = f"kka{os.getpid() % 1000}"  # the test hosts' namespaces and links
@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    with ks.node_set(tmp_path_factory.mktemp("kubeadm"), PREFIX, net=241) as made:
        yield made


@pytest.fixture(scope="module")
def inventory(nodes) -> Path:
    path = nodes.directory / "inventory.yaml"
    path.write_text(yaml.safe_dump({
        "known_hosts": str(nodes.known_hosts((1, 2, 3))),
        "defaults": {"user": "root", "key": str(nodes.directory / "id_ed25519")},
        "hosts": [{"name": f"h{i}", "address": nodes.address(i), "arch": "amd64",
                   "role": "control-plane" if i == 1 else "worker"} for i in (1, 2, 3)]}))
    return path


@pytest.fixture(scope="module")
def installed(nodes, inventory) -> str:
    """`k8sdds cluster install` on the three hosts: what it said."""
    done = ks.cli("cluster", "install", "--inventory", str(inventory), "--log-dir",
                  str(nodes.directory / "install-logs"))
    assert done.returncode == 0, done.stdout + done.stderr
    return " ".join(done.stdout.split())


def test_install_puts_the_node_parts_on_and_a_second_install_changes_nothing(
        nodes, inventory, installed, tmp_path):
    """kubelet and kubeadm on every host, kubectl on the control plane only, each the build
    of this machine's cache (SHA-256 compared here, outside k8sdds); the units, containerd's
    configuration and the CNI plugins; containerd, runc and the plugins are the hosts' own
    Debian packages (this machine's, seen through each node's dpkg): none installed. A second
    install and a dry run change nothing."""
    import hashlib

    assert "install: 3/3 hosts" in installed
    assert installed.count("containerd, runc, CNI plugins: the host's own") == 3
    assert installed.count("kubelet, kubeadm, kubectl v1.34.3 in /usr/local/bin;") == 1
    assert installed.count("kubelet, kubeadm v1.34.3 in /usr/local/bin;") == 2
    for i in (1, 2, 3):
        for part in ("kubelet", "kubeadm", "kubectl"):
            there = nodes.path(i, f"/usr/local/bin/{part}")
            if part == "kubectl" and i != 1:
                assert not there.exists()
                continue
            assert hashlib.sha256(there.read_bytes()).hexdigest() == hashlib.sha256(
                (ks.BIN / part).read_bytes()).hexdigest()
        unit = nodes.path(i, "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
        assert "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env" in unit.read_text()
        assert "SystemdCgroup = true" in nodes.path(
            i, "/etc/containerd/config.toml").read_text()
        assert os.readlink(nodes.path(i, "/opt/cni/bin/bridge")) == "/usr/lib/cni/bridge"
        record = json.loads(nodes.path(i, "/var/lib/k8sdds/node/install.json").read_text())
        assert record["packages"] == [] and record["modules"] == []
    before = {i: ks.snapshot(nodes, i) for i in (1, 2, 3)}
    logs = ("--log-dir", str(tmp_path / "logs"))
    dry = ks.cli("cluster", "install", "--inventory", str(inventory), "--dry-run", *logs)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "dpkg-query -W" in dry.stdout and "install -D -m 0755" in dry.stdout
    again = ks.cli("cluster", "install", "--inventory", str(inventory), "--log-dir",
                   str(tmp_path / "again"))
    assert again.returncode == 0, again.stdout + again.stderr
    said = " ".join(again.stdout.split())
    assert said.count("v1.34.3 in /usr/local/bin (already)") == 3, said
    assert said.count("0 of 6 configuration files written") == 3, said
    for i in (1, 2, 3):  # nothing copied, nothing written
        log = (tmp_path / "again" / f"h{i}.log").read_text()
        assert "sftp put" not in log and "$ install " not in log, log
    for i in (1, 2, 3):
        assert ks.snapshot(nodes, i) == before[i]


def test_images_from_a_directory_missing_one_names_it_and_changes_no_host(nodes, inventory,
                                                                         installed, tmp_path):
    """The folder has pause for amd64 and arm64 under one name; h3 is said to be arm64 (a
    hybrid cluster's Pi): what each host lacks is named with its architecture."""
    from k8sdds.images.build import pause

    folder = tmp_path / "archives"
    folder.mkdir()
    (folder / "pause.tar").symlink_to(pause("registry.k8s.io/pause:3.10.1"))
    (folder / "pause-arm64.tar").symlink_to(pause("registry.k8s.io/pause:3.10.1",
                                                  arch="arm64"))
    hybrid = tmp_path / "hybrid.yaml"
    data = yaml.safe_load(inventory.read_text())
    data["hosts"][2]["arch"] = "arm64"
    hybrid.write_text(yaml.safe_dump(data))
    done = ks.cli("cluster", "images", "--inventory", str(hybrid), "--cni", "flannel-vxlan",
                "--from", str(folder), "--log-dir", str(tmp_path / "logs"))
    assert done.returncode == 2, done.stdout + done.stderr
    text = " ".join(done.stderr.split())
    assert "the archives given have no registry.k8s.io/kube-apiserver:v1.34.3 (amd64)" in text
    assert "ghcr.io/flannel-io/flannel:v0.28.9 (arm64)" in text
    assert "registry.k8s.io/kube-proxy:v1.34.3 (arm64)" in text
    assert "kube-apiserver:v1.34.3 (arm64)" not in text  # h3 is a worker
    assert "pause:3.10.1 (" not in text and "no host was changed" in text  # both it has
    for i in (1, 2, 3):
        assert "images import" not in (tmp_path / "logs" / f"h{i}.log").read_text()


# flannel-hostgw is flannel-vxlan's daemon and images with another backend in its ConfigMap
# (tests/test_kubeadm_config.py checks that adaptation); its real host-gw routes are verified
# on the testbed cluster (test_kube_testbed's second cluster), which saves two minutes here
# flannel-vxlan's whole cycle is the Pi tutorial's (below), run from its page
@pytest.mark.parametrize("cni", ["kube-router", "weave"])
def test_init_join_run_reset_on_real_kubeadm(nodes, inventory, installed, cni, tmp_path):
    from kubernetes import client, config

    from k8sdds import cni as cnis

    plan = cnis.PLANS[cni]
    pods_in, daemonset = plan.cni.testbed.daemonset  # the CNI's own DaemonSet

    logs = ("--log-dir", str(tmp_path / "logs"))
    done = ks.cli("cluster", "images", "--inventory", str(inventory), "--cni", cni, "--build",
                *logs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "images for kubeadm and " + cni + ": 3/3 hosts" in " ".join(done.stdout.split())
    done = ks.cli("cluster", "check", "--inventory", str(inventory), "--cni", cni, *logs)
    rows = check_rows(done.stdout)
    for h in ("h1", "h2", "h3"):
        assert "pass" in rows[(h, "images")], rows[(h, "images")]
        assert "pass" in rows[(h, "kubeadm")] and "v1.34.3" in rows[(h, "kubeadm")]
    before = {i: ks.snapshot(nodes, i) for i in (1, 2, 3)}

    extra = tmp_path / "node.yaml"
    extra.write_text(yaml.safe_dump_all(ks.NODE_CONFIG))
    admin = tmp_path / "admin.conf"  # where init leaves the new cluster's kubeconfig
    admin.write_text("an earlier cluster's kubeconfig")
    done = ks.cli("cluster", "init", "--inventory", str(inventory), "--cni", cni,
                "--kubeadm-config", str(extra), "--ignore-preflight-errors", "all",
                "--kubeconfig", str(admin), *logs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kubeadm init v1.34.3 (pod network {plan.install.pod_cidr})" in done.stdout
    assert f"{plan.manifest.file} applied (shipped, pinned)" in " ".join(done.stdout.split())
    h1_log = (tmp_path / "logs" / "h1.log").read_text()
    assert "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f /tmp/k8sdds-" in h1_log
    assert "apply -f https://" not in h1_log  # nothing from the network
    done = ks.cli("cluster", "join", "--inventory", str(inventory),
                "--ignore-preflight-errors", "all", *logs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "join: 3/3 hosts" in done.stdout

    assert admin.stat().st_mode & 0o777 == 0o600
    def ca(path: Path) -> str:
        return yaml.safe_load(path.read_text())["clusters"][0]["cluster"][
            "certificate-authority-data"]

    assert ca(admin) == ca(nodes.admin_conf())  # the control plane's own, fetched over SSH
    api = config.new_client_from_config(str(admin))
    core = client.CoreV1Api(api)
    ready = {n.metadata.name: next(c.status for c in n.status.conditions if c.type == "Ready")
             for n in core.list_node().items}
    assert ready == {"h1": "True", "h2": "True", "h3": "True"}
    from kubernetes import watch

    running: set[str] = set()
    for event in watch.Watch().stream(core.list_namespaced_pod, pods_in,
                                      timeout_seconds=120):
        pod = event["object"]
        if pod.metadata.name.startswith(daemonset) and pod.status.phase == "Running" and all(
                s.ready for s in pod.status.container_statuses or []):
            running.add(pod.spec.node_name)
        if running == {"h1", "h2", "h3"}:
            break
    assert running == {"h1", "h2", "h3"}  # the CNI's own DaemonSet, Running on every node
    links = nodes.in_node(2, "ip", "-o", "link").stdout
    routes = nodes.in_node(2, "ip", "-4", "route").stdout
    if cni == "flannel-vxlan":
        assert "flannel.1" in links
    elif cni == "weave":  # its bridge and the router's peers: the two other nodes
        assert ": weave:" in links and "vethwe-bridge" in links
        status = ""
        deadline = time.monotonic() + 90
        while "2 established" not in status and time.monotonic() < deadline:
            time.sleep(1)  # the routers connecting: no event to wait on
            status = nodes.in_node(2, sys.executable, "-c", WEAVE_STATUS, check=False).stdout
        assert "2 established" in status and f"Range: {plan.install.pod_cidr}" in status, status
        assert any(s.startswith("weave-") for s in
                   nodes.in_node(2, "ipset", "list", "-n").stdout.split())  # weave-npc's
        assert "10-weave.conflist" in nodes.in_node(2, "ls", "/etc/cni/net.d").stdout
    else:  # kube-router: the same, learnt over BGP (its protocol number), its bridge
        learnt = f"via {nodes.address(3)} dev eth0 proto 17"
        deadline = time.monotonic() + 90
        while learnt not in routes and time.monotonic() < deadline:
            time.sleep(1)  # a BGP session coming up: no event to wait on
            routes = nodes.in_node(2, "ip", "-4", "route").stdout
        [pod] = [p for p in core.list_namespaced_pod(pods_in).items
                 if p.metadata.name.startswith(daemonset) and p.spec.node_name == "h2"]
        assert learnt in routes, routes + core.read_namespaced_pod_log(
            pod.metadata.name, pods_in, container="kube-router")[-3000:]
        links = nodes.in_node(2, "ip", "-o", "link").stdout
        assert "kube-bridge" in links
        assert "kube-router-pod-subnets" in nodes.in_node(2, "ipset", "list", "-n").stdout
    api.close()

    done = ks.cli("cluster", "load-image", "--inventory", str(inventory), *logs)
    assert done.returncode == 0, done.stdout + done.stderr
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,false,1,false,0\n")
    done = ks.cli("run", "--backend", "kubernetes", "--kubeconfig", str(admin), "--sch",
                str(sch), "--duration", "2", "--out", str(tmp_path / "out"), "--json",
                "--no-plot")
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == []
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["datapaths"] == [cni]
    assert set(manifest["repeats"]["test-1/rep-1"]["placement"].values()) == {"h2", "h3"}
    import pandas as pd

    df = pd.read_csv(run / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert len(thr) == 1 and thr.value.iloc[0] > 1

    done = ks.cli("cluster", "reset", "--inventory", str(inventory), *logs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reset: 3/3 hosts" in done.stdout
    said = " ".join(done.stdout.split())
    assert "h1: 3 nodes drained;" in said and "pods removed; kubeadm reset" in said
    for i in (1, 2, 3):
        after = ks.snapshot(nodes, i)
        assert after == before[i], f"h{i} differs after reset:\n" + "\n".join(
            difflib.unified_diff(before[i].splitlines(), after.splitlines(), lineterm="", n=0))
