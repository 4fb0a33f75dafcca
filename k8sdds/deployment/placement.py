"""Which node each role runs on: pure, shared by every backend."""

from __future__ import annotations

from collections.abc import Sequence


def place(roles: Sequence[str], nodes: Sequence[str], placement: str) -> dict[str, str]:
    """Publisher (the first role) on the first node; subscribers spread round-robin over
    the other nodes (`cross-node`), or all beside the publisher (`same-node`)."""
    if not nodes:
        raise ValueError("no nodes to place roles on")
    first, *others = roles
    if placement == "same-node" or len(nodes) == 1:
        return {role: nodes[0] for role in roles}
    spread = list(nodes[1:])
    out = {first: nodes[0]}
    for i, role in enumerate(others):
        out[role] = spread[i % len(spread)]
    return out


def path_of(host_network: bool, placement: str) -> str:
    """The network path the test's traffic takes."""
    if host_network:
        return "node-node"
    return "pod-pod-same-node" if placement == "same-node" else "pod-pod-cross-node"
