"""An IP-in-IP device between nodes: calico ipip."""

from __future__ import annotations

from functools import partial

from k8sdds.cni.base import Ipip
from k8sdds.testbed.layout import Layout
from k8sdds.testbed.netns import ip
from k8sdds.testbed.wiring.hooks import Wiring, remote_pairs, route_teardown, vtep_address

KIND = Ipip


def _setup(tun: Ipip, tb: Layout) -> None:
    for node in tb.nodes:
        if ip("link", "show", tun.dev, ns=node.ns, check=False).returncode != 0:
            ip("link", "add", tun.dev, "type", "ipip", ns=node.ns)
        ip("link", "set", tun.dev, "mtu", str(node.shrink(tun.mtu)), "up", ns=node.ns)
        ip("addr", "replace", f"{vtep_address(node)}/32", "dev", tun.dev, ns=node.ns)
    for node, remote in remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", tun.dev,
           "onlink", ns=node.ns)


def _teardown(tun: Ipip, tb: Layout) -> None:
    for node in tb.nodes:
        ip("addr", "flush", "dev", tun.dev, ns=node.ns, check=False)
        ip("link", "set", tun.dev, "down", ns=node.ns, check=False)
    route_teardown(tb)


def wiring(kind: Ipip, mtu: int) -> Wiring:
    return Wiring(partial(_setup, kind), partial(_teardown, kind))
