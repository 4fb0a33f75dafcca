"""The vocabulary as data: tests, command-line defaults, backend limits and datapaths.

A leaf: it imports nothing of the package, so every layer (schedule, engines, backends,
runner, analysis) can use it without a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

TRANSPORTS = ("udp", "tcp", "tls", "dtls")
PLACEMENTS = ("cross-node", "same-node")
# the network path between the driver (publisher, client) and the other roles
# pod-service and external-nodeport go through a Service (kube-proxy): kubernetes only
PATHS = ("node-node", "pod-pod-same-node", "pod-pod-cross-node", "node-pod", "pod-node",
         "pod-service", "external-nodeport")
SERVICE_PATHS = ("pod-service", "external-nodeport")
# cds: an RTI Cloud Discovery Service the run deploys as one more role (rtiperftest)
DISCOVERIES = ("multicast", "peers", "cds")


@dataclass(frozen=True)
class Test:
    """One row of a schedule: the parameters of one measurement."""

    __test__ = False  # not a pytest test class

    row: int  # 0-based index of the row in the schedule (K8sDDS `I`)
    line: int  # line of the row in the file, for messages
    data_len: int
    multicast: bool
    num_subscribers: int
    best_effort: bool
    batch_size: int
    engine: str = "ddsperf"
    latency_test: bool = False
    transport: str = "udp"
    secure: bool = False
    duration: float = 10.0
    repeats: int = 1
    datapath: str | None = None  # None: the run's --datapath list
    placement: str = "cross-node"
    pub_rate: int = 0  # samples/s; 0: as fast as possible
    send_queue_size: int = 0  # samples; 0: the engine's default
    discovery: str | None = None  # None: chosen from the datapath
    path: str | None = None  # None: from the datapath and placement
    streams: int = 1  # parallel streams (iperf3 -P)
    no_print: bool = False
    number: int = 0  # 1-based position in the run (after expansion over datapaths)

    def params(self) -> dict[str, Any]:
        """The measured parameters, as the snake_case columns of results.csv (the path is
        added by whoever knows the datapath: `effective_path`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("row", "line", "number", "no_print", "path")}

    @property
    def effective_path(self) -> str:
        """The path the traffic takes: the row's own, else node-node on a host-network
        datapath, else pod to pod on the same or another node."""
        if self.path:
            return self.path
        if self.datapath and datapath(self.datapath).host_network:
            return "node-node"
        return "pod-pod-same-node" if self.placement == "same-node" else "pod-pod-cross-node"


@dataclass(frozen=True)
class Defaults:
    """Command-line values for optional columns; None leaves the column's own default."""

    engine: str | None = None
    latency_test: bool | None = None
    transport: str | None = None
    secure: bool | None = None
    duration: float | None = None
    repeats: int | None = None
    placement: str | None = None
    send_queue_size: int | None = None
    discovery: str | None = None
    no_print: bool | None = None


@dataclass(frozen=True)
class Limits:
    """What the backend can place; checked at load time."""

    max_subscribers: int = 64
    engines: Sequence[str] = field(default_factory=lambda: ("ddsperf",))
    paths: Sequence[str] = tuple(p for p in PATHS if p not in SERVICE_PATHS)


# ---- datapaths: how pod traffic crosses the network, whatever backend provides it ----

@dataclass(frozen=True)
class Datapath:
    name: str
    emulates: str
    encapsulation: str
    mtu: int  # pod MTU
    multicast_across_nodes: bool
    host_network: bool = False  # processes run in the node, not in pods (the baseline)
    encryption: str = "none"
    pod_prefix: int = 24  # 24: a routed /24 per node; 16: one L2 segment over all nodes
    kernel_links: tuple[str, ...] = ()  # link types the emulation needs from the kernel
    unencrypted: str | None = None  # the same datapath without encryption, to price it


DATAPATHS: dict[str, Datapath] = {
    d.name: d
    for d in (
        Datapath("host", "hostNetwork: processes in the node itself (the baseline)", "none",
                 1500, True, host_network=True),
        Datapath("flannel-hostgw", "Flannel host-gw: a route to each pod CIDR via its node",
                 "none (routed)", 1500, False),
        Datapath("flannel-vxlan", "Flannel vxlan: flannel.1, VNI 1, UDP 8472, static FDB",
                 "VXLAN", 1450, False, kernel_links=("vxlan",)),
        Datapath("kube-router", "kube-router: pod CIDRs routed via node addresses (learnt "
                 "by BGP; the same packet path as host-gw)", "none (routed)", 1500, False),
        Datapath("weave", "Weave Net: one L2 segment over all nodes; the pods' bridge "
                 "reaches the datapath (a bridge for Open vSwitch's) through a veth pair, "
                 "VXLAN there with head-end replication", "VXLAN (L2)", 1376, True, pod_prefix=16,
                 kernel_links=("vxlan",)),
        Datapath("calico-vxlan", "Calico VXLAN: vxlan.calico, VNI 4096, UDP 4789, routed",
                 "VXLAN", 1450, False, kernel_links=("vxlan",)),
        Datapath("weave-encrypted", "Weave Net encrypted: the weave L2 segment, its VXLAN "
                 "carried node to node through a WireGuard tunnel", "VXLAN in WireGuard",
                 1370, True, encryption="WireGuard (ChaCha20-Poly1305)", pod_prefix=16,
                 kernel_links=("vxlan",), unencrypted="weave"),
        Datapath("flannel-wireguard", "Flannel wireguard: pod CIDRs routed through a "
                 "WireGuard device per node", "WireGuard", 1420, False,
                 encryption="WireGuard (ChaCha20-Poly1305)", unencrypted="flannel-vxlan"),
        Datapath("calico-ipip", "Calico IP-in-IP: tunl0, routes via remote nodes onlink",
                 "IP-in-IP", 1480, False, kernel_links=("ipip",)),
        # found on real clusters (kubernetes backend), not emulated
        Datapath("calico", "Calico BGP: pod CIDRs routed between nodes, no encapsulation",
                 "none (routed)", 1500, False),
        Datapath("cilium", "Cilium: eBPF datapath, VXLAN tunnel by default", "VXLAN (eBPF)",
                 1450, False),
        Datapath("unknown", "a CNI k8sdds does not recognise", "unknown", 1450, False),
    )
}


def datapath(name: str) -> Datapath:
    """The datapath called `name` (already validated by the caller)."""
    return DATAPATHS[name]
