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
    mtu: int
    multicast_across_nodes: bool
    host_network: bool  # processes run in the node, not in pods (the baseline)


DATAPATHS: dict[str, Datapath] = {
    d.name: d
    for d in (
        Datapath("host", "hostNetwork: processes in the node itself (baseline)", "none", 1500,
                 True, True),
        Datapath("flannel-hostgw", "Flannel host-gw: routes to each pod CIDR via its node",
                 "none (routed)", 1500, False, False),
        Datapath("flannel-vxlan", "Flannel vxlan: flannel.1, VNI 1, UDP 8472, static FDB",
                 "VXLAN", 1450, False, False),
    )
}


def get(name: str) -> Datapath:
    """The datapath called `name` (already validated by the caller)."""
    return DATAPATHS[name]
