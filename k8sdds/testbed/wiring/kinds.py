"""The wiring kinds: each module of this package by the CNI record class it wires (BY_KIND),
and the Wiring of every datapath the emulated testbed wires (WIRING)."""


from __future__ import annotations

from collections.abc import Callable

from k8sdds import model
from k8sdds.cni.base import Datapath
from k8sdds.testbed import capabilities
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

def datapath_unavailable(dp: Datapath) -> str | None:
    """Why datapath `dp` cannot be emulated here, or None: a kernel link type it needs
    (capabilities.link_type), then what its wiring says it lacks."""
    for kind in dp.kernel_links:
        reason = capabilities.link_type(kind)
        if reason:
            return reason
    wired = WIRING.get(dp.name)
    return wired.unavailable() if wired else None


__all__ = ["BY_KIND", "MODULES", "TUNNEL_PROCESSES", "WIRING", "Wiring", "datapath_unavailable",
           "vtep_mac", "wg_interface", "wiring_of"]
