"""A routed VXLAN device with static neighbour and FDB entries: flannel vxlan, calico vxlan."""

from __future__ import annotations

from functools import partial

from k8sdds.cni.base import Vxlan
from k8sdds.testbed.layout import Layout, Node
from k8sdds.testbed.netns import ip, run
from k8sdds.testbed.wiring.hooks import Wiring, remote_pairs, vtep_address

KIND = Vxlan


def vtep_mac(vx: Vxlan, node: Node) -> str:
    """A fixed MAC per node's VTEP, so FDB and neighbour entries can be written up front."""
    return f"{vx.mac_prefix}:{node.index + 1:02x}"


def _setup(vx: Vxlan, tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "add", vx.dev, "address", vtep_mac(vx, node), "mtu", str(node.shrink(vx.mtu)),
           "type", "vxlan", "id", str(vx.vni), "local", node.address, "dev", "eth0",
           "dstport", str(vx.port), "nolearning", ns=node.ns)
        ip("addr", "add", f"{vtep_address(node)}/32", "dev", vx.dev, ns=node.ns)
        ip("link", "set", vx.dev, "up", ns=node.ns)
    for node, remote in remote_pairs(tb):
        vtep = vtep_address(remote)
        ip("neigh", "replace", vtep, "lladdr", vtep_mac(vx, remote), "dev", vx.dev,
           "nud", "permanent", ns=node.ns)
        run(["bridge", "-n", node.ns, "fdb", "append", vtep_mac(vx, remote), "dev", vx.dev,
             "dst", remote.address])
        ip("route", "replace", remote.pod_cidr, "via", vtep, "dev", vx.dev, "onlink",
           ns=node.ns)


def _teardown(vx: Vxlan, tb: Layout) -> None:
    for node in tb.nodes:
        ip("link", "del", vx.dev, ns=node.ns, check=False)


def wiring(kind: Vxlan, mtu: int) -> Wiring:
    return Wiring(partial(_setup, kind), partial(_teardown, kind))
