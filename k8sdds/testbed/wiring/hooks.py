"""What a wiring kind gives the testbed (Wiring), and what several kinds share: the pairs of
nodes, the routes to the other nodes' pods and a node's tunnel address."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from k8sdds.testbed.layout import Layout, Node
from k8sdds.testbed.netns import ip


def nothing(tb: Layout) -> None:
    return None


def said_nothing() -> dict[str, str]:
    return {}


def nothing_missing() -> str | None:
    return None


@dataclass(frozen=True)
class Wiring:
    """One datapath's wiring of a testbed: set up, taken down, told of a node's pods."""

    setup: Callable[[Layout], None]
    teardown: Callable[[Layout], None]
    # called when a node's pods change, with its pods as (name, address)
    pods: Callable[[Layout, Node, Sequence[tuple[str, str]]], None] | None = None
    # what a node's fingerprint says of the wiring beyond the CNI's name and mode
    about: Callable[[], dict[str, str]] = field(default=said_nothing)
    # why this machine cannot make it (a tool or kernel part it lacks, and the fix), or None
    unavailable: Callable[[], str | None] = field(default=nothing_missing)


def remote_pairs(tb: Layout) -> list[tuple[Node, Node]]:
    """Every (node, other node) pair, both ways."""
    return [(a, b) for a in tb.nodes for b in tb.nodes if a is not b]


def route_setup(tb: Layout) -> None:
    """Each node's route to every other node's pods, via that node's address."""
    for node, remote in remote_pairs(tb):
        ip("route", "replace", remote.pod_cidr, "via", remote.address, "dev", "eth0", ns=node.ns)


def route_teardown(tb: Layout) -> None:
    for node, remote in remote_pairs(tb):
        ip("route", "del", remote.pod_cidr, ns=node.ns, check=False)


def vtep_address(node: Node) -> str:
    """A tunnel device's address on `node`: the .0 of its pod CIDR, as flannel does."""
    return node.pod_cidr.split("/")[0]
