"""How each datapath is wired on the emulated cluster (a registry: name -> setup/teardown).

The wiring follows what the real CNI installs in the node's kernel, so packets take the same
path: plain routes for flannel host-gw and kube-router, a VXLAN device with static neighbour
and FDB entries for flannel vxlan and calico vxlan, an IP-in-IP device for calico ipip, one
L2 segment (VXLAN enslaved to cni0, head-end replication) for weave, nothing for the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
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


# ---- routed: flannel host-gw, kube-router ----------------------------------------------
def _routed_setup(tb: Testbed) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", "eth0", ns=node.ns)


def _routed_teardown(tb: Testbed) -> None:
    for node, remote in _remote_pairs(tb):
        ip("route", "del", remote.pod_cidr, ns=node.ns, check=False)


# ---- routed VXLAN: flannel vxlan, calico vxlan ------------------------------------------
@dataclass(frozen=True)
class Vxlan:
    dev: str
    vni: int
    port: int
    mtu: int
    mac_prefix: str  # five octets; the sixth is the node index + 1


FLANNEL_VXLAN = Vxlan("flannel.1", 1, 8472, 1450, "0e:6b:64:00:01")
CALICO_VXLAN = Vxlan("vxlan.calico", 4096, 4789, 1450, "0e:6b:64:00:02")


def vtep_mac(vx: Vxlan, node: Node) -> str:
    """A fixed MAC per node's VTEP, so FDB and neighbour entries can be written up front."""
    return f"{vx.mac_prefix}:{node.index + 1:02x}"


def _vtep_address(node: Node) -> str:
    return node.pod_cidr.split("/")[0]  # the .0 of the node's pod CIDR, as flannel does


def _vxlan_setup(vx: Vxlan, tb: Testbed) -> None:
    for node in tb.nodes:
        ip("link", "add", vx.dev, "address", vtep_mac(vx, node), "mtu", str(vx.mtu),
           "type", "vxlan", "id", str(vx.vni), "local", node.address, "dev", "eth0",
           "dstport", str(vx.port), "nolearning", ns=node.ns)
        ip("addr", "add", f"{_vtep_address(node)}/32", "dev", vx.dev, ns=node.ns)
        ip("link", "set", vx.dev, "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        vtep = _vtep_address(remote)
        ip("neigh", "replace", vtep, "lladdr", vtep_mac(vx, remote), "dev", vx.dev,
           "nud", "permanent", ns=node.ns)
        run(["bridge", "-n", node.ns, "fdb", "append", vtep_mac(vx, remote), "dev", vx.dev,
             "dst", remote.address])
        ip("route", "replace", remote.pod_cidr, "via", vtep, "dev", vx.dev, "onlink",
           ns=node.ns)


def _link_teardown(dev: str, tb: Testbed) -> None:
    for node in tb.nodes:
        ip("link", "del", dev, ns=node.ns, check=False)


# ---- IP-in-IP: calico ipip ---------------------------------------------------------------
IPIP_DEV = "tunl0"
IPIP_MTU = 1480


def _ipip_setup(tb: Testbed) -> None:
    for node in tb.nodes:
        if ip("link", "show", IPIP_DEV, ns=node.ns, check=False).returncode != 0:
            ip("link", "add", IPIP_DEV, "type", "ipip", ns=node.ns)
        ip("link", "set", IPIP_DEV, "mtu", str(IPIP_MTU), "up", ns=node.ns)
        ip("addr", "replace", f"{_vtep_address(node)}/32", "dev", IPIP_DEV, ns=node.ns)
    for node, remote in _remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", IPIP_DEV,
           "onlink", ns=node.ns)


def _ipip_teardown(tb: Testbed) -> None:
    for node in tb.nodes:
        ip("addr", "flush", "dev", IPIP_DEV, ns=node.ns, check=False)
        ip("link", "set", IPIP_DEV, "down", ns=node.ns, check=False)
    _routed_teardown(tb)


# ---- one L2 segment: weave ---------------------------------------------------------------
WEAVE_DEV = "weave.vx"
WEAVE_PORT = 6784  # Weave Net's fast datapath port
WEAVE_MTU = 1376
WEAVE_PREFIX = 16  # pods of every node share 10.244.0.0/16


def _weave_setup(tb: Testbed) -> None:
    for node in tb.nodes:
        ip("addr", "del", f"{node.gateway}/24", "dev", "cni0", ns=node.ns, check=False)
        ip("addr", "replace", f"{node.gateway}/{WEAVE_PREFIX}", "dev", "cni0", ns=node.ns)
        ip("link", "add", WEAVE_DEV, "mtu", str(WEAVE_MTU), "type", "vxlan", "id", "2",
           "local", node.address, "dev", "eth0", "dstport", str(WEAVE_PORT), ns=node.ns)
        ip("link", "set", WEAVE_DEV, "master", "cni0", "up", ns=node.ns)
    for node, remote in _remote_pairs(tb):
        # head-end replication: broadcast, multicast and unknown unicast go to every node
        run(["bridge", "-n", node.ns, "fdb", "append", "00:00:00:00:00:00", "dev", WEAVE_DEV,
             "dst", remote.address])


def _weave_teardown(tb: Testbed) -> None:
    for node in tb.nodes:
        ip("link", "del", WEAVE_DEV, ns=node.ns, check=False)
        ip("addr", "del", f"{node.gateway}/{WEAVE_PREFIX}", "dev", "cni0", ns=node.ns,
           check=False)
        ip("addr", "replace", f"{node.gateway}/24", "dev", "cni0", ns=node.ns)


WIRING: dict[str, Wiring] = {
    "host": Wiring(_nothing, _nothing),
    "flannel-hostgw": Wiring(_routed_setup, _routed_teardown),
    "kube-router": Wiring(_routed_setup, _routed_teardown),
    "flannel-vxlan": Wiring(partial(_vxlan_setup, FLANNEL_VXLAN),
                            partial(_link_teardown, FLANNEL_VXLAN.dev)),
    "calico-vxlan": Wiring(partial(_vxlan_setup, CALICO_VXLAN),
                           partial(_link_teardown, CALICO_VXLAN.dev)),
    "calico-ipip": Wiring(_ipip_setup, _ipip_teardown),
    "weave": Wiring(_weave_setup, _weave_teardown),
}
