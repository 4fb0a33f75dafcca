"""What a CNI record says: its datapaths and their facts, how the emulated testbed wires each,
its pinned manifest, what `cluster init --cni` installs, the images it runs and how k8sdds
builds them, how a cluster is seen to run it, and what `cluster reset` removes. Data and pure
functions only: the testbed, kubeadm, image and detection code interpret it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Argv = tuple[str, ...]


# ---- how the emulated testbed wires a datapath (testbed/wiring/: a module per kind) ----
@dataclass(frozen=True)
class Routed:
    """A route to each node's pod CIDR via the node's address (host-gw, BGP-learnt routes);
    `firewall`: the CNI's own network policy rules are on every pod packet's path too."""

    firewall: bool = False


@dataclass(frozen=True)
class Vxlan:
    """A routed VXLAN device with static neighbour and FDB entries, as flanneld writes them."""

    dev: str
    vni: int
    port: int
    mtu: int
    mac_prefix: str  # five octets; the sixth is the node index + 1


@dataclass(frozen=True)
class Ipip:
    """An IP-in-IP device, pod CIDRs routed onlink via the remote nodes."""

    dev: str
    mtu: int


@dataclass(frozen=True)
class WireGuard:
    """A WireGuard device per node; pod CIDRs routed through it (also the tunnel an
    encrypted L2 segment rides in)."""

    port: int = 51820  # WireGuard's UDP port
    mtu: int = 1420  # its device's


TUNNEL = WireGuard()  # the WireGuard every encrypted wiring uses


@dataclass(frozen=True)
class L2Segment:
    """One L2 segment over all nodes: the pods' bridge, a veth pair to a second bridge (the
    CNI's datapath) and a VXLAN there with head-end replication; inside WireGuard when
    encrypted."""

    dev: str
    port: int
    mtu: int
    bridge: str
    veth: tuple[str, str]
    prefix: int = 16
    encrypted: bool = False


@dataclass(frozen=True)
class Ebpf:
    """No bridge and no netfilter on a pod's path: each pod alone behind its veth (a /32),
    tc programs moving its packets (k8sdds/testbed/wiring/bpf/datapath.c): into a pod of the same
    node, to the tunnel device `tunnel` (a VXLAN device in collect-metadata mode, the remote
    node the tunnel key) or, without one, to the uplink after a FIB lookup (native routing,
    a route per node's pod CIDR); and from the uplink or the tunnel straight into the pod's
    namespace."""

    tunnel: str | None = None  # the VXLAN device; None: native routing
    port: int = 8472  # its UDP port
    vni: int = 2  # the VNI every packet carries (Cilium's: the sender's identity)


Wiring = Routed | Vxlan | Ipip | WireGuard | L2Segment | Ebpf


@dataclass(frozen=True)
class Datapath:
    """How pod traffic crosses the network, whatever backend provides it."""

    name: str
    emulates: str
    encapsulation: str
    mtu: int  # pod MTU
    multicast_across_nodes: bool
    host_network: bool = False  # processes run in the node, not in pods (the baseline)
    encryption: str = "none"
    # 24: a routed /24 per node; 16: one L2 segment over all nodes; 32: each pod alone
    # behind its veth, no bridge (the pod's default route on-link)
    pod_prefix: int = 24
    kernel_links: tuple[str, ...] = ()  # link types the emulation needs from the kernel
    unencrypted: str | None = None  # the same datapath without encryption, to price it
    wiring: Wiring | None = None  # the emulated testbed's wiring (None: nothing to wire)
    # multicast between two pods of one node (False: dropped there too, as Cilium drops it
    # without its multicast feature); `testbed.multicast` probes both facts
    multicast_same_node: bool = True


# kubeadm's usual pod range, as flannel's manifest has it (flannel, kube-router and Cilium
# install with it; Weave's own default differs)
POD_CIDR = "10.244.0.0/16"


# ---- a real cluster ----------------------------------------------------------------------
@dataclass(frozen=True)
class UpstreamManifest:
    """The CNI's manifest as its project publishes it, shipped in k8sdds/manifests and pinned
    by SHA-256."""

    file: str
    sha256: str
    url: str  # where its project publishes it (--manifest-url)
    pins: Mapping[str, str] = field(default_factory=dict)  # upstream image -> pinned one


@dataclass(frozen=True)
class Install:
    """One `k8sdds cluster init --cni` choice."""

    name: str
    pod_cidr: str
    datapath: str  # what a run on the cluster it makes detects
    options: Mapping[str, Any] = field(default_factory=dict)  # the CNI's own knobs
    secret: str | None = None  # a Secret of a generated password its manifest reads


@dataclass(frozen=True)
class Image:
    """An image the CNI's pods run, as k8sdds builds it here from binaries built from their Go
    modules (no registry)."""

    repository: str  # the upstream name its manifest uses
    binary: str  # the binary whose version is the image's (in the binaries cache)
    files: Mapping[str, str]  # path in the image -> binary in the cache
    apt: tuple[str, ...] = ()  # Debian packages: a Debian base; none: busybox
    run: tuple[str, ...] = ()  # shell steps after the packages (what upstream's image does)
    entrypoint: tuple[str, ...] = ()
    tag_of: Callable[[str], str] = lambda v: v  # the binary's version -> the tag ("": any)
    note: str = ""


@dataclass(frozen=True)
class NodeParts:
    """What a CNI's own pods need of each testbed node beyond its host paths, said by the CNI
    that needs it (Cilium: its kernel parts; Weave: a machine id); nothing by default."""

    # machine-wide sysctls the CNI sets (/proc/sys path -> its value): each node shows them
    # with that value, read-only, so the machine keeps its own
    sysctls: Mapping[str, str] = field(default_factory=dict)
    bpf_fs: bool = False  # a BPF filesystem of the node's own at /sys/fs/bpf, for its maps
    # a node-view directory where each node shows its own cgroup v2 subtree as a cgroup2
    # root (the CNI attaches socket programs to the root it finds: never this machine's)
    cgroup2: str | None = None
    # what the CNI's plugin reads from its environment (the runtime passes its own on), each
    # value's "{view}" the node view: where it finds its agent when its host path moved there
    plugin_env: Mapping[str, str] = field(default_factory=dict)
    # a node-view file each node gets its own machine id in (/etc/machine-id, which the CNI
    # names its peer by); None: the CNI reads none
    machine_id: str | None = None


@dataclass(frozen=True)
class ClusterCni:
    """The real CNI on the testbed cluster (`testbed up --kubernetes --pod-network real`)."""

    datapaths: tuple[str, ...]  # those of its datapaths it carries on the testbed
    binaries: tuple[str, ...]  # built by .ci/k8s-test-binaries; the first names its version
    daemonset: tuple[str, str]  # (namespace, name): ready when every pod of it is
    host_paths: Mapping[str, str]  # a hostPath of the manifest -> its directory in the node view
    # the record's own changes: (documents, datapath, node view, pod network, workers) ->
    # documents, images already the built ones and host paths already in the node view
    adapt: Callable[..., list[dict]] = lambda docs, *_: docs
    node: NodeParts = NodeParts()  # what its pods need of each node, beyond host paths


@dataclass(frozen=True)
class Reset:
    """What the CNI leaves on a host after `kubeadm reset`, for `cluster reset` to remove."""

    files: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    chains: tuple[str, ...] = ()  # iptables chain name prefixes
    routes: tuple[Argv, ...] = ()
    ipsets: tuple[str, ...] = ()  # ipset name prefixes (destroyed once no rule uses them)
    # what marks the CNI's own iptables rules in built-in chains (their comments)
    comments: tuple[str, ...] = ()


@dataclass(frozen=True)
class Detected:
    datapath: str  # a datapath name, or "unknown"
    cni: str  # what was found, for the manifest ("flannel (vxlan)", "weave (encrypted)")
    daemonset: str = ""  # namespace/name of the CNI's DaemonSet
    # how it carries packets, where the DaemonSet says more than the datapath's record
    # (Weave told WEAVE_NO_FASTDP: its sleeve mode); "": the datapath's encapsulation
    mode: str = ""


# a DaemonSet (as the API's dict), the ConfigMaps read -> what it shows, or None: not this CNI
Detect = Callable[[Mapping, Mapping[tuple[str, str], Mapping]], Detected | None]


def _no_adapt(install: Install, docs: list[dict]) -> list[dict]:
    return docs


def _no_steps(install: Install, kubectl: Argv) -> list[Argv]:
    return []


@dataclass(frozen=True)
class Cni:
    """One CNI: everything k8sdds knows of it, in one place."""

    name: str
    datapaths: tuple[Datapath, ...]
    manifest: UpstreamManifest | None = None  # None: nothing to install (the host)
    installs: tuple[Install, ...] = ()
    adapt: Callable[[Install, list[dict]], list[dict]] = _no_adapt  # the install's changes
    url_steps: Callable[[Install, Argv], list[Argv]] = _no_steps  # the same, by URL
    detect: Detect | None = None
    config_maps: tuple[tuple[str, str], ...] = ()  # (namespace, name) detection reads
    images: tuple[Image, ...] = ()
    testbed: ClusterCni | None = None
    reset: Reset = Reset()
    aliases: Mapping[str, str] = field(default_factory=dict)  # K8sDDS data's names -> datapath


@dataclass(frozen=True)
class Plan:
    """A `cluster init --cni` choice: the install, its CNI, and --manifest-url's URL."""

    cni: Cni
    install: Install
    url: str | None = None  # None: the record's

    @property
    def name(self) -> str:
        return self.install.name

    @property
    def pod_cidr(self) -> str:
        return self.install.pod_cidr

    @property
    def manifest(self) -> UpstreamManifest | None:
        return self.cni.manifest


def in_view(docs: list[dict], view: Path, host_paths: Mapping[str, str]) -> list[dict]:
    """Every DaemonSet's host paths named in `host_paths` moved under the node `view`."""
    for doc in objects(docs):
        if doc.get("kind") == "DaemonSet":
            for volume in doc["spec"]["template"]["spec"].get("volumes") or []:
                host = volume.get("hostPath")
                if host and host["path"] in host_paths:
                    host["path"] = str(view / host_paths[host["path"]])
    return docs


def bounded(docs: list[dict], allowed: frozenset[str]) -> list[dict]:
    """Each container's added capabilities (as `CAP_` less names) within `allowed`: a runtime
    cannot give a container one its own bounding set lacks. Pure."""
    for doc in objects(docs):
        for c in containers(doc):
            caps = ((c.get("securityContext") or {}).get("capabilities") or {})
            if caps.get("add"):
                caps["add"] = [cap for cap in caps["add"] if cap in allowed]
    return docs


def containers(obj: Mapping) -> list[dict]:
    """A workload's init containers and containers."""
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def objects(docs: list[dict]) -> list[dict]:
    """Every object, the items of a `List` included."""
    out = []
    for doc in docs:
        out += doc.get("items", []) if doc.get("kind") == "List" else [doc]
    return out


def named(ds: Mapping) -> str:
    """What detection matches a CNI's name against: a DaemonSet's name and images."""
    meta = ds.get("metadata") or {}
    return " ".join([meta.get("name", "")] + [c.get("image", "") for c in containers(ds)])


def where(ds: Mapping) -> str:
    meta = ds.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
