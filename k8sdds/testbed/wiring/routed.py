"""Plain routes between nodes: flannel host-gw; and kube-router, with its firewall rules
(k8sdds.testbed.netfilter) and connection tracking."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

from k8sdds.cni.base import Routed
from k8sdds.testbed import netfilter
from k8sdds.testbed.layout import Layout, Node
from k8sdds.testbed.wiring.hooks import Wiring, route_setup, route_teardown

KIND = Routed


def _firewall_setup(tb: Layout) -> None:
    route_setup(tb)
    for node in tb.nodes:
        netfilter.apply_kube_router(node.ns, [n.pod_cidr for n in tb.nodes],
                                    [n.address for n in tb.nodes], tb.pods_of(node))


def _firewall_teardown(tb: Layout) -> None:
    for node in tb.nodes:
        netfilter.remove_kube_router(node.ns)
    route_teardown(tb)


def _firewall_pods(tb: Layout, node: Node, pods: Sequence[tuple[str, str]]) -> None:
    netfilter.sync_pods(node.ns, pods)


def _firewall_tools() -> str | None:
    missing = [tool for tool in ("iptables-restore", "ipset") if shutil.which(tool) is None]
    if missing:
        return (f"its firewall rules need {' and '.join(missing)} (apt-get install "
                "--no-install-recommends iptables ipset)")
    return None


def wiring(kind: Routed, mtu: int) -> Wiring:
    if kind.firewall:
        return Wiring(_firewall_setup, _firewall_teardown, _firewall_pods,
                      unavailable=_firewall_tools)
    return Wiring(route_setup, route_teardown)
