"""How each datapath is wired on the emulated cluster: one module per wiring kind of the CNI
records (k8sdds.cni.base), chosen by the kind (BY_KIND), giving the testbed a Wiring.

The wiring follows what the real CNI installs in the node's kernel, so packets take the same
path: plain routes for flannel host-gw, and for kube-router with its firewall rules
(routed), a VXLAN device with static neighbour and FDB entries for flannel vxlan and calico
vxlan (vxlan), an IP-in-IP device for calico ipip (ipip), a WireGuard device per node for
flannel wireguard (wireguard), one L2 segment for weave and weave encrypted (segment),
k8sdds' own tc programs for cilium (ebpf), nothing for the host.

Adding a wiring kind: its record in k8sdds/cni/base.py, its module here with `KIND` (the
record's class) and `wiring(kind, mtu) -> Wiring`, and its module in MODULES.
"""

from __future__ import annotations

from collections.abc import Callable

from k8sdds import model
from k8sdds.testbed.wiring import ebpf, ipip, routed, segment, vxlan, wireguard
from k8sdds.testbed.wiring.hooks import Wiring, nothing
from k8sdds.testbed.wiring.vxlan import vtep_mac
from k8sdds.testbed.wiring.wireguard import TUNNEL_PROCESSES, wg_interface

MODULES = (routed, vxlan, ipip, wireguard, segment, ebpf)
# a CNI record's wiring kind (its class) -> the Wiring it asks for, given the record and MTU
BY_KIND: dict[type, Callable[[object, int], Wiring]] = {m.KIND: m.wiring for m in MODULES}


def wiring_of(kind: object, mtu: int) -> Wiring:
    """The Wiring a CNI record's wiring asks for."""
    made = BY_KIND.get(type(kind))
    if made is None:
        raise TypeError(f"no wiring for {kind!r}")
    return made(kind, mtu)


# the datapaths the emulated testbed wires, from the CNI records (k8sdds/cni)
WIRING: dict[str, Wiring] = {
    name: (Wiring(nothing, nothing) if dp.host_network else wiring_of(dp.wiring, dp.mtu))
    for name, dp in model.DATAPATHS.items() if dp.host_network or dp.wiring is not None}

__all__ = ["BY_KIND", "MODULES", "TUNNEL_PROCESSES", "WIRING", "Wiring", "vtep_mac",
           "wg_interface", "wiring_of"]
