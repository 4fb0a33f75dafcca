"""One L2 segment for weave, and weave encrypted: as Weave Net wires a node, cni0, a veth
pair to the datapath (Open vSwitch's kernel datapath there, a second bridge here) and the
VXLAN on it, with head-end replication; under weave encrypted's VXLAN, WireGuard."""

from __future__ import annotations

from functools import partial

from k8sdds.cni.base import L2Segment
from k8sdds.testbed.layout import Layout, Node
from k8sdds.testbed.netns import ip, run
from k8sdds.testbed.wiring import wireguard
from k8sdds.testbed.wiring.hooks import Wiring, nothing_missing, remote_pairs

KIND = L2Segment


def _setup(seg: L2Segment, tb: Layout) -> None:
    """Pods of every node share one prefix (10.244.0.0/16); the names are the CNI's own."""
    if seg.encrypted:
        wireguard.setup(tb, route_pods=False)

    def underlay(node: Node) -> tuple[str, str]:  # (address, device) the VXLAN rides on
        if seg.encrypted:
            return wireguard.tunnel_address(node), wireguard.wg_interface(tb, node)
        return node.address, "eth0"

    mtu = seg.mtu
    for node in tb.nodes:
        local, dev = underlay(node)
        ip("addr", "del", f"{node.gateway}/24", "dev", "cni0", ns=node.ns, check=False)
        ip("addr", "replace", f"{node.gateway}/{seg.prefix}", "dev", "cni0", ns=node.ns)
        ip("link", "add", seg.dev, "mtu", str(node.shrink(mtu)), "type", "vxlan", "id", "2",
           "local", local, "dev", dev, "dstport", str(seg.port), ns=node.ns)
        # weave's own topology: the pods' bridge reaches the datapath (Open vSwitch's
        # kernel datapath; a second bridge here) through a veth pair, the VXLAN hangs there
        ip("link", "add", seg.bridge, "type", "bridge", "mcast_snooping", "0", ns=node.ns)
        ip("link", "add", seg.veth[0], "mtu", str(node.shrink(mtu)), "type", "veth", "peer",
           "name", seg.veth[1], "mtu", str(node.shrink(mtu)), ns=node.ns)
        ip("link", "set", seg.veth[0], "master", "cni0", "up", ns=node.ns)
        ip("link", "set", seg.veth[1], "master", seg.bridge, "up", ns=node.ns)
        ip("link", "set", seg.dev, "master", seg.bridge, "up", ns=node.ns)
        ip("link", "set", seg.bridge, "up", ns=node.ns)
    for node, remote in remote_pairs(tb):
        # head-end replication: broadcast, multicast and unknown unicast go to every node
        run(["bridge", "-n", node.ns, "fdb", "append", "00:00:00:00:00:00", "dev", seg.dev,
             "dst", underlay(remote)[0]])


def _teardown(seg: L2Segment, tb: Layout) -> None:
    for node in tb.nodes:
        for dev in (seg.dev, seg.veth[0], seg.bridge):
            ip("link", "del", dev, ns=node.ns, check=False)
        ip("addr", "del", f"{node.gateway}/{seg.prefix}", "dev", "cni0", ns=node.ns,
           check=False)
        ip("addr", "replace", f"{node.gateway}/24", "dev", "cni0", ns=node.ns)
    if seg.encrypted:
        wireguard.teardown(tb)


def wiring(kind: L2Segment, mtu: int) -> Wiring:
    return Wiring(partial(_setup, kind), partial(_teardown, kind),
                  unavailable=wireguard.unavailable if kind.encrypted else nothing_missing)
