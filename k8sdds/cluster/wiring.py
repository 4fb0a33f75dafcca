"""How each datapath is wired on the emulated cluster (a registry: name -> setup/teardown).

The wiring follows what the real CNI installs in the node's kernel, so packets take the same
path: plain routes for flannel host-gw, a `flannel.1` VXLAN device with static neighbour and
FDB entries for flannel vxlan, nothing for the host network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from k8sdds.cluster.netns import ip, run

if TYPE_CHECKING:
    from k8sdds.cluster.emulated import Node, Testbed


@dataclass(frozen=True)
class Wiring:
    setup: Callable[[Testbed], None]
    teardown: Callable[[Testbed], None]


def _nothing(tb: Testbed) -> None:
    return None


def _remote_pairs(tb: Testbed) -> list[tuple[Node, Node]]:
    return [(a, b) for a in tb.nodes for b in tb.nodes if a is not b]


def _hostgw_setup(tb: Testbed) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", "eth0", ns=node.ns)


def _hostgw_teardown(tb: Testbed) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "del", remote.pod_cidr, ns=node.ns, check=False)


VXLAN_DEV = "flannel.1"
VXLAN_MTU = 1450


def vtep_mac(node: Node) -> str:
    """A fixed MAC per node's VTEP, so FDB and neighbour entries can be written up front."""
    return f"0e:6b:64:00:00:{node.index + 1:02x}"


def _vtep_address(node: Node) -> str:
    return node.pod_cidr.split("/")[0]  # flannel gives flannel.1 the .0 of the pod CIDR


def _vxlan_setup(tb: Testbed) -> None:
    for node in tb.nodes:
        ip("link", "add", VXLAN_DEV, "address", vtep_mac(node), "mtu", str(VXLAN_MTU),
           "type", "vxlan", "id", "1", "local", node.address, "dev", "eth0",
           "dstport", "8472", "nolearning", ns=node.ns)
        ip("addr", "add", f"{_vtep_address(node)}/32", "dev", VXLAN_DEV, ns=node.ns)
        ip("link", "set", VXLAN_DEV, "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        vtep = _vtep_address(remote)
        ip("neigh", "replace", vtep, "lladdr", vtep_mac(remote), "dev", VXLAN_DEV,
           "nud", "permanent", ns=node.ns)
        run(["bridge", "-n", node.ns, "fdb", "append", vtep_mac(remote), "dev", VXLAN_DEV,
             "dst", remote.address])
        ip("route", "replace", remote.pod_cidr, "via", vtep, "dev", VXLAN_DEV, "onlink",
           ns=node.ns)


def _vxlan_teardown(tb: Testbed) -> None:
    for node in tb.nodes:
        ip("link", "del", VXLAN_DEV, ns=node.ns, check=False)


WIRING: dict[str, Wiring] = {
    "host": Wiring(_nothing, _nothing),
    "flannel-hostgw": Wiring(_hostgw_setup, _hostgw_teardown),
    "flannel-vxlan": Wiring(_vxlan_setup, _vxlan_teardown),
}
