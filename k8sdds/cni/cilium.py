"""Cilium: an eBPF datapath, VXLAN between nodes (its default) or native routing. The emulated
testbed wires each mode with k8sdds' own tc programs (k8sdds/testbed/wiring/bpf/datapath.c, see
base.Ebpf); the testbed cluster and `cluster init` run Cilium itself.

Real: Cilium publishes a Helm chart, not a manifest. k8sdds ships the chart of the v1.19.0 module
rendered by Helm (k8sdds/manifests/cilium.yaml, the values beside it), in images built here from
the module: the agent's on Debian with clang-19 (the agent compiles its BPF programs from the
module's sources at its start, as upstream's image does with its LLVM 19), the operator's on
busybox. 1.19 is the newest minor whose agent, CNI plugin and operator resolve on the Go module
proxy (1.20's need a gobgp/v4 commit and sigs.k8s.io/mcs-api/controllers v0.5.2, both
refused); v1.19.0 is the release first tried and pinned. What each install changes (`adapt`):
native routing's three cilium-config keys.
What the testbed changes beside (`testbed_adapt`, nothing else):
* the host paths are node-private (the node view), never this machine's /run, /etc or /opt;
  the CNI plugin finds the agent's socket there through CILIUM_SOCK, which the runtime's
  environment passes on to it;
* three init containers go: `mount-cgroup` and `apply-sysctl-overwrites` enter the mount
  namespace of this machine's PID 1 (to mount cgroup2, and to write /etc/sysctl.d and restart
  systemd-sysctl), `mount-bpf-fs` mounts a BPF filesystem the node already has (its own, at
  /sys/fs/bpf in its mount namespace: the record's `node.bpf_fs`);
* no mount propagation: each node's mounts are private to it, which the runtime refuses for
  HostToContainer; everything the agent reads is mounted before it starts;
* the machine-wide sysctls the agent sets (`SYSCTLS`) are shown to it as set, read-only, in the
  node: the machine keeps its own;
* the cgroup2 root the agent finds (/run/cilium/cgroupv2) is the node's own cgroup v2
  subtree (`cgroup2`): with kube-proxy replaced, Cilium 1.19 attaches its socket programs
  to that root whatever the chart says of socket load balancing, and this machine's own
  root would take every socket of the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from k8sdds.cni.base import (
    POD_CIDR,
    Argv,
    ClusterCni,
    Cni,
    Datapath,
    Detected,
    Ebpf,
    Image,
    Install,
    NodeParts,
    Reset,
    UpstreamManifest,
    containers,
    named,
    objects,
    where,
)

VERSION = "1.19.0"  # built here (.ci/k8s-versions), rendered in k8sdds/manifests/cilium.yaml
CONFIG_MAPS = (("kube-system", "cilium-config"),)
VXLAN = "cilium-vxlan"
NATIVE = "cilium-native"

DATAPATHS = (
    Datapath(name=VXLAN,
             emulates="Cilium, VXLAN tunnel (its default): tc programs move a pod's packets "
             "to cilium_vxlan, the remote node as tunnel key, and from it into the pod "
             "(bpf_redirect_peer); no bridge, no netfilter on a pod's path",
             encapsulation="VXLAN (eBPF)", mtu=1450, multicast_across_nodes=False,
             pod_prefix=32, kernel_links=("vxlan",), wiring=Ebpf(tunnel="cilium_vxlan"),
             multicast_same_node=False),
    Datapath(name=NATIVE,
             emulates="Cilium, native routing: tc programs move a pod's packets to the "
             "uplink after a FIB lookup (bpf_redirect_neigh) and from it into the pod "
             "(bpf_redirect_peer); a route per node's pod CIDR, no bridge, no netfilter on "
             "a pod's path",
             encapsulation="none (routed, eBPF)", mtu=1500, multicast_across_nodes=False,
             pod_prefix=32, wiring=Ebpf(), multicast_same_node=False),
)

# what native routing sets in cilium-config (the chart's routingMode=native,
# ipv4NativeRoutingCIDR and autoDirectNodeRoutes): the nodes share one L2 segment
NATIVE_CONFIG = {"routing-mode": "native", "auto-direct-node-routes": "true"}

# the sysctls the agent sets machine-wide (the module's pkg/datapath/loader/base.go), with the
# values it sets; its per-namespace ones (rp_filter, fib_multipath_use_neigh) are the node's
SYSCTLS = {"net/core/bpf_jit_enable": "1", "kernel/unprivileged_bpf_disabled": "1",
           "kernel/timer_migration": "0"}

# (the agent finds its cgroup2 root inside /var/run/cilium, a mount within it on a host)
HOST_PATHS = {"/var/run/cilium": "cilium-run", "/run/cilium/cgroupv2": "cilium-run/cgroupv2",
              "/var/run/netns": "cilium-netns", "/opt/cni/bin": "cni-bin",
              "/etc/cni/net.d": "net.d", "/lib/modules": "cilium-modules",
              "/run/xtables.lock": "xtables.lock", "/proc": "cilium-proc"}
# init containers the testbed leaves out (see the module's text)
NOT_ON_TESTBED = ("mount-cgroup", "apply-sysctl-overwrites", "mount-bpf-fs")


def config_map(docs: list[dict]) -> dict:
    for doc in objects(docs):
        if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == "cilium-config":
            return doc
    raise ValueError("the Cilium manifest has no cilium-config ConfigMap")


def _routing(docs: list[dict], datapath: str, pod_cidr: str) -> list[dict]:
    if datapath == NATIVE:
        config_map(docs)["data"].update(NATIVE_CONFIG, **{"ipv4-native-routing-cidr": pod_cidr})
    return docs


def adapt(install: Install, docs: list[dict]) -> list[dict]:
    """kubeadm: the install's routing mode."""
    return _routing(docs, install.datapath, install.pod_cidr)


def url_steps(install: Install, kubectl: Argv) -> list[Argv]:
    """--manifest-url: a rendered manifest runs VXLAN unless told; native routing is patched in
    and the agents restarted."""
    import json

    if install.datapath != NATIVE:
        return []
    data = {**NATIVE_CONFIG, "ipv4-native-routing-cidr": install.pod_cidr}
    return [(*kubectl, "-n", "kube-system", "patch", "configmap", "cilium-config", "--type",
             "merge", "-p", json.dumps({"data": data})),
            (*kubectl, "-n", "kube-system", "rollout", "restart", "daemonset/cilium")]


def testbed_adapt(docs: list[dict], datapath: str, view: Path, network: str,
                  workers: int) -> list[dict]:
    """The rendered manifest's objects, adapted to the testbed (see the module's text)."""
    for doc in objects(docs):
        spec = ((doc.get("spec") or {}).get("template") or {}).get("spec")
        if not spec:
            continue
        if spec.get("initContainers"):
            spec["initContainers"] = [c for c in spec["initContainers"]
                                      if c["name"] not in NOT_ON_TESTBED]
        for c in containers(doc):
            for mount in c.get("volumeMounts") or []:
                mount.pop("mountPropagation", None)
    return _routing(docs, datapath, network)


def datapath(conf: Mapping) -> str | None:
    """The datapath cilium-config's data names, or None for one k8sdds does not have
    (Geneve). Pure."""
    if (conf.get("routing-mode") or conf.get("tunnel")) in ("native", "disabled"):
        return NATIVE
    protocol = conf.get("tunnel-protocol") or conf.get("tunnel") or "vxlan"
    return VXLAN if protocol == "vxlan" else None


def detect(ds: Mapping, config_maps: Mapping[tuple[str, str], Mapping]) -> Detected | None:
    if "cilium" not in named(ds) or "operator" in (ds.get("metadata") or {}).get("name", ""):
        return None
    conf = (config_maps.get(CONFIG_MAPS[0]) or {}).get("data") or {}
    found = datapath(conf)
    said = [conf.get("routing-mode")]
    if found != NATIVE:  # a tunnel's protocol (native routing leaves the key as it was)
        said.append(conf.get("tunnel-protocol") or conf.get("tunnel"))
    if conf.get("kube-proxy-replacement") == "true" and conf.get(
            "enable-bpf-masquerade") == "true":
        said.append("eBPF host routing")
    mode = ", ".join(str(word) for word in said if word) or "vxlan"
    return Detected(found or "unknown", f"cilium ({mode})", where(ds))


CNI = Cni(
    name="cilium",
    datapaths=DATAPATHS,
    manifest=UpstreamManifest(
        file="cilium.yaml",
        sha256="054a5ff114458f7dbe24fe5dc1ac14df2526363bd93678ead9f02035679d5ff8",
        url=f"https://github.com/cilium/cilium/tree/v{VERSION}/install/kubernetes/cilium"),
    installs=(Install(name=VXLAN, pod_cidr=POD_CIDR, datapath=VXLAN),
              Install(name=NATIVE, pod_cidr=POD_CIDR, datapath=NATIVE)),
    adapt=adapt, url_steps=url_steps, detect=detect, config_maps=CONFIG_MAPS,
    images=(
        # the agent on Debian with what upstream's runtime image gives it: clang (LLVM 19, to
        # compile its datapath at start), iproute2, iptables, ipset, kmod
        Image(repository="quay.io/cilium/cilium", binary="cilium-agent",
              files={"/usr/bin/cilium-agent": "cilium-agent", "/usr/bin/cilium-dbg": "cilium-dbg",
               "/opt/cni/bin/cilium-cni": "cilium-cni", "/var/lib/cilium/bpf": "cilium-bpf",
               "/init-container.sh": "cilium-init-container",
               "/install-plugin.sh": "cilium-install-plugin",
               "/cni-uninstall.sh": "cilium-cni-uninstall"},
              apt=("clang-19", "iproute2", "iptables", "ipset", "kmod", "ca-certificates"),
              run=("ln -s /usr/bin/clang-19 /usr/local/bin/clang",),
              tag_of=lambda v: f"v{v}"),
        Image(repository="quay.io/cilium/operator-generic", binary="cilium-operator-generic",
              files={"/usr/local/bin/cilium-operator-generic": "cilium-operator-generic"},
              entrypoint=("/usr/local/bin/cilium-operator-generic",), tag_of=lambda v: f"v{v}"),
    ),
    testbed=ClusterCni(
        datapaths=(VXLAN, NATIVE),
        binaries=("cilium-agent", "cilium-cni", "cilium-dbg", "cilium-operator-generic",
                  "cilium-bpf", "cilium-init-container", "cilium-install-plugin",
                  "cilium-cni-uninstall"),
        daemonset=("kube-system", "cilium"), host_paths=HOST_PATHS, adapt=testbed_adapt,
        node=NodeParts(sysctls=SYSCTLS, bpf_fs=True, cgroup2="cilium-run/cgroupv2",
                       plugin_env={"CILIUM_SOCK": "{view}/cilium-run/cilium.sock"})),
    reset=Reset(files=("/opt/cni/bin/cilium-cni", "/var/run/cilium", "/var/lib/cilium",
                       "/sys/fs/bpf/cilium"),
                links=("cilium_host", "cilium_net", "cilium_vxlan"), chains=("CILIUM_",)),
)
