"""What each datapath is, independent of the backend that provides it.

A datapath is how pod traffic crosses the network. The schedule checks tests against these
facts (multicast across nodes) before anything runs; backends wire them up.
"""

from __future__ import annotations

from dataclasses import dataclass


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
        Datapath("weave", "Weave Net: one L2 segment over all nodes, VXLAN on cni0 with "
                 "head-end replication", "VXLAN (L2)", 1376, True, pod_prefix=16,
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


def get(name: str) -> Datapath:
    """The datapath called `name` (already validated by the caller)."""
    return DATAPATHS[name]
