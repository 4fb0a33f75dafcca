"""The testbed cluster's configuration, pure: what each daemon is told (node-private paths
only, no host-wide setting) and the credentials; the API forwarder on loopback."""

from __future__ import annotations

import json
import socket
import stat
import threading
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from k8sdds import cni as detection
from k8sdds.cni import cilium, flannel, kube_router, manifests, weave
from k8sdds.errors import UserError
from k8sdds.images.kubernetes import built_version
from k8sdds.testbed.kube import forward, node, pki
from k8sdds.testbed.kube import pod_network as cni
from k8sdds.testbed.layout import Node

tomllib = pytest.importorskip("tomllib", reason="reading TOML needs Python 3.11")
FILES = node.NodeFiles(root=Path("/var/lib/k8sdds/tb/node1"),
                       run=Path("/run/k8sdds/tb-kube/node1"), view=Path("/run/k8sdds/tb-kube/node"))
NODE = Node(name="node1", index=1, ns="tb-node1", address="10.99.0.11",
            pod_cidr="10.244.1.0/24", gateway="10.244.1.1")


def test_containerd_keeps_to_the_node_and_never_raises_oom_priority():
    config = tomllib.loads(node.containerd_config(FILES))
    assert config["root"].startswith(str(FILES.root))
    assert config["state"].startswith(str(FILES.run))
    assert config["grpc"]["address"] == str(FILES.socket)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True and cri["netns_mounts_under_state_dir"]
    assert cri["sandbox_image"] == node.PAUSE
    assert cri["cni"]["conf_dir"] == str(FILES.view / "net.d")  # the node view: its own
    assert cri["cni"]["bin_dir"] == str(FILES.view / "cni-bin")
    assert "/run/containerd" not in node.containerd_config(FILES)


def test_cni_gives_the_nodes_pod_cidr_without_masquerade():
    conf = json.loads(node.cni_config(NODE.pod_cidr, NODE.gateway, 1450, FILES))
    bridge = conf["plugins"][0]
    assert bridge["bridge"] == "cni0" and bridge["ipMasq"] is False and bridge["mtu"] == 1450
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.1.0/24", "gateway": "10.244.1.1"}]]
    assert bridge["ipam"]["dataDir"].startswith(str(FILES.run))


def test_the_kubelet_runs_on_cgroup_v1_with_its_own_root_and_the_clusters_dns():
    config = yaml.safe_load(node.kubelet_config(FILES, "/k8sdds-kube/tb/node1", "10.99.0.10"))
    assert config["failCgroupV1"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/k8sdds-kube/tb/node1"
    assert config["clusterDNS"] == ["10.99.0.10"]
    assert config["protectKernelDefaults"] is False  # it is shown the values it wants instead
    assert set(node.KUBELET_SYSCTLS) >= {"vm/overcommit_memory", "kernel/panic",
                                          "kernel/panic_on_oops"}


def test_kube_proxy_leaves_host_wide_conntrack_alone():
    config = yaml.safe_load(node.proxy_config(FILES.run / "kp.kubeconfig", NODE))
    assert config["mode"] == "iptables"
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["min"] == 0
    assert config["nodePortAddresses"] == ["10.99.0.11/32"]
    assert config["iptables"]["minSyncPeriod"] == "0s"


def test_credentials(tmp_path):
    creds = pki.make(tmp_path / "pki", "10.99.0.10",
                     {"admin": ("admin", "system:masters"),
                      "node1": ("system:node:node1", "system:nodes")})
    assert stat.S_IMODE((tmp_path / "pki").stat().st_mode) == 0o700
    for secret in ("apiserver.key", "sa.key", "tokens.csv"):
        assert stat.S_IMODE((tmp_path / "pki" / secret).stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((tmp_path / "pki" / "apiserver.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {
        "10.99.0.10", "10.96.0.1", "127.0.0.1"}
    tokens = (tmp_path / "pki" / "tokens.csv").read_text()
    assert f'{creds.tokens["node1"]},system:node:node1,node1,"system:nodes"' in tokens
    config = yaml.safe_load(pki.kubeconfig(creds, "https://127.0.0.1:1", "node1"))
    assert config["users"][0]["user"]["token"] == creds.tokens["node1"]


def test_the_forwarder_carries_both_directions():
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)

    def echo():
        conn, _ = upstream.accept()
        conn.sendall(conn.recv(100).upper())
        conn.close()

    threading.Thread(target=echo, daemon=True).start()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    threading.Thread(target=forward.serve, args=(listener, "127.0.0.1",
                                                 upstream.getsockname()[1]),
                     daemon=True).start()
    with socket.create_connection(listener.getsockname(), timeout=5) as client:
        client.sendall(b"hello")
        assert client.recv(100) == b"HELLO"


def _applied(real: cni.Real, workers: int) -> dict:
    """The objects the testbed's real CNI applies, by (kind, name)."""
    return {(d["kind"], d["metadata"]["name"]): d
            for d in detection.base.objects(real.documents(FILES.view, workers))}


def _flannel(datapath: str) -> dict:
    """What the testbed's real flannel applies: the shipped manifest, the images built here,
    the testbed's host paths."""
    real = cni.Real(datapath, record=flannel.CNI, built={
        "ghcr.io/flannel-io/flannel": "localhost/k8sdds/flannel:v0.28.9",
        "ghcr.io/flannel-io/flannel-cni-plugin": "localhost/k8sdds/flannel-cni-plugin:v0.9.1"})
    return _applied(real, 2)


@pytest.mark.parametrize("datapath, backend", [("flannel-vxlan", "vxlan"),
                                               ("flannel-hostgw", "host-gw")])
def test_the_upstream_flannel_manifest_adapted_to_the_testbed(datapath, backend):
    objs = _flannel(datapath)
    cfg = objs[("ConfigMap", "kube-flannel-cfg")]["data"]
    net = json.loads(cfg["net-conf.json"])
    assert net["Backend"]["Type"] == backend and net["Network"] == "10.244.0.0/16"
    plugin = json.loads(cfg["cni-conf.json"])["plugins"][0]
    assert plugin["type"] == "flannel"
    assert plugin["subnetFile"] == str(FILES.view / "flannel" / "subnet.env")
    spec = objs[("DaemonSet", "kube-flannel-ds")]["spec"]["template"]["spec"]
    images = {c["image"] for c in spec["containers"] + spec["initContainers"]}
    assert images == {"localhost/k8sdds/flannel:v0.28.9",
                      "localhost/k8sdds/flannel-cni-plugin:v0.9.1"}
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    # nothing of this machine's own: every host path is under the node view
    assert paths and all(p.startswith(str(FILES.view) + "/") for p in paths)
    assert spec["hostNetwork"] is True  # flanneld in the node's network namespace
    # what the kubernetes backend's detection makes of it
    found = detection.detect([objs[("DaemonSet", "kube-flannel-ds")]],
                             {("kube-flannel", "kube-flannel-cfg"):
                              objs[("ConfigMap", "kube-flannel-cfg")]})
    assert found.datapath == datapath


def test_the_upstream_kube_router_manifest_adapted_to_the_testbed():
    """Its own DaemonSet (router and network policy on, its IPVS proxy off as upstream's
    kubeadm manifest has it), in the image built here, every host path node-private."""
    real = cni.Real("kube-router", record=kube_router.CNI, built={
        "docker.io/cloudnativelabs/kube-router": "localhost/k8sdds/kube-router:v2.1.0"})
    objs = _applied(real, 2)
    spec = objs[("DaemonSet", "kube-router")]["spec"]["template"]["spec"]
    [router] = spec["containers"]
    assert {"--run-router=true", "--run-firewall=true", "--run-service-proxy=false"} <= set(
        router["args"])
    images = {c["image"] for c in spec["containers"] + spec["initContainers"]}
    assert images == {"localhost/k8sdds/kube-router:v2.1.0"}
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert len(paths) == 5 and all(p.startswith(str(FILES.view) + "/") for p in paths)
    assert all(name in node.VIEW for name in kube_router.HOST_PATHS.values())
    assert "bridge" in objs[("ConfigMap", "kube-router-cfg")]["data"]["cni-conf.json"]
    found = detection.detect([objs[("DaemonSet", "kube-router")]], {})
    assert found.datapath == "kube-router"


@pytest.mark.parametrize("datapath", ["weave", "weave-encrypted"])
def test_the_upstream_weave_manifest_adapted_to_the_testbed(datapath):
    """2.8.1's DaemonSet run by 2.6.5's images: no init container (2.6.5's launch.sh installs
    the CNI), the CNI directories of the node view mounted where launch.sh writes them, the
    sleeve mode, consensus over every node, and encrypted: the password from a Secret."""
    real = cni.Real(datapath, record=weave.CNI, built={
        "weaveworks/weave-kube": "localhost/k8sdds/weave-kube:2.6.5",
        "weaveworks/weave-npc": "localhost/k8sdds/weave-npc:2.6.5"})
    objs = _applied(real, 3)
    spec = objs[("DaemonSet", "weave-net")]["spec"]["template"]["spec"]
    assert "initContainers" not in spec
    [router] = [c for c in spec["containers"] if c["name"] == "weave"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in router["env"]}
    assert env["IPALLOC_RANGE"] == "10.244.0.0/16" and env["IPALLOC_INIT"] == "consensus=3"
    assert env["WEAVE_NO_FASTDP"] == "1" and env["CHECKPOINT_DISABLE"] == "1"
    assert {m["mountPath"] for m in router["volumeMounts"]} >= {"/host/opt/cni/bin",
                                                                "/host/etc/cni/net.d"}
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert all(p.startswith(str(FILES.view) + "/") for p in paths)
    assert str(FILES.view / "weave-machine-id") in paths
    assert node.VIEW["weave-machine-id"] == "file"
    assert (("WEAVE_PASSWORD" in env) == (datapath == "weave-encrypted")
            == (("Secret", "weave-passwd") in objs))
    found = detection.detect([objs[("DaemonSet", "weave-net")]], {})
    assert found.datapath == datapath


@pytest.mark.parametrize("datapath", ["cilium-vxlan", "cilium-native"])
def test_the_rendered_cilium_manifest_adapted_to_the_testbed(datapath):
    """No init container that enters PID 1's mount namespace or mounts a BPF filesystem, no
    mount propagation, no capability this machine's bounding set lacks, every host path but
    the agent's /proc/sys views node-private, native routing's keys where asked; the agent
    and operator in the images built here."""
    real = cni.Real(datapath, record=cilium.CNI, built={
        "quay.io/cilium/cilium": "localhost/k8sdds/cilium:1.19.0",
        "quay.io/cilium/operator-generic": "localhost/k8sdds/operator-generic:1.19.0"})
    objs = _applied(real, 2)
    spec = objs[("DaemonSet", "cilium")]["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == [
        "config", "clean-cilium-state", "install-cni-binaries"]
    every = spec["initContainers"] + spec["containers"]
    assert not [m for c in every for m in c.get("volumeMounts", []) if "mountPropagation" in m]
    allowed = node.bounding_set()
    added = {cap for c in every
             for cap in c.get("securityContext", {}).get("capabilities", {}).get("add", [])}
    assert added and added <= allowed
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert paths - {str(FILES.view / n) for n in cilium.HOST_PATHS.values()} == {
        "/proc/sys/net", "/proc/sys/kernel", "/sys/fs/bpf"}  # the node's own, shadowed
    assert all(name in node.VIEW for name in cilium.HOST_PATHS.values())
    images = {c["image"] for c in every}
    assert images == {"localhost/k8sdds/cilium:1.19.0"}
    [operator] = objs[("Deployment", "cilium-operator")]["spec"]["template"]["spec"][
        "containers"]
    assert operator["image"] == "localhost/k8sdds/operator-generic:1.19.0"
    conf = objs[("ConfigMap", "cilium-config")]["data"]
    assert (conf["kube-proxy-replacement"], conf["enable-bpf-masquerade"]) == ("true", "true")
    found = detection.detect([objs[("DaemonSet", "cilium")]],
                             {("kube-system", "cilium-config"): {"data": conf}})
    assert found.datapath == datapath
    if datapath == "cilium-native":
        assert conf["routing-mode"] == "native"
        assert conf["ipv4-native-routing-cidr"] == "10.244.0.0/16"
        assert found.cni == "cilium (native, eBPF host routing)"
    else:
        assert found.cni == "cilium (tunnel, vxlan, eBPF host routing)"


def test_the_bounding_set_names_each_capability_by_its_bit():
    """CapBnd as /proc/self/status shows it here: every capability but CAP_SYS_RESOURCE
    (bit 24), up to CAP_CHECKPOINT_RESTORE (40)."""
    status = "Name:\tpython3\nCapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\n"
    caps = node.bounding_set(status)
    assert "SYS_RESOURCE" not in caps and {"NET_ADMIN", "SYS_ADMIN", "BPF"} <= caps
    assert len(caps) == 40
    assert node.bounding_set("CapBnd:\t0000000000003000\n") == {"NET_ADMIN", "NET_RAW"}


def test_the_shipped_flannel_manifest_is_the_pinned_upstream_one():
    import hashlib

    where = manifests.path(flannel.CNI.manifest)
    assert hashlib.sha256(where.read_bytes()).hexdigest() == flannel.CNI.manifest.sha256


def test_choosing_what_carries_the_pods(tmp_path):
    assert not cni.choose("flannel-hostgw", "emulated", tmp_path).real
    fallback = cni.choose("flannel-vxlan", "auto", tmp_path)  # nothing built in tmp_path
    assert not fallback.real and "not built" in fallback.fallback
    with pytest.raises(UserError, match="not built"):
        cni.choose("flannel-vxlan", "real", tmp_path)
    with pytest.raises(UserError, match="no real CNI for calico-vxlan"):
        cni.choose("calico-vxlan", "real", tmp_path)
    with pytest.raises(UserError, match="--pod-network bogus"):
        cni.choose("kube-router", "bogus", tmp_path)
    for name in flannel.CNI.testbed.binaries:
        (tmp_path / f"{name}-v1").touch()
        (tmp_path / name).symlink_to(f"{name}-v1")
    assert cni.choose("flannel-vxlan", "auto", tmp_path).real
    assert built_version(tmp_path, "flanneld") == "v1"


def test_an_emulated_wiring_is_detected_by_its_marker():
    found = detection.detect([], {cni.MARKER: {"data": {"datapath": "flannel-hostgw",
                                                        "wiring": "emulated"}}})
    assert found.datapath == "flannel-hostgw" and "emulated wiring" in found.cni
    assert detection.detect([], {}).datapath == "unknown"
