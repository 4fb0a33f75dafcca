"""Which node each role runs on: pure, shared by every backend."""

from __future__ import annotations

from collections.abc import Sequence

from k8sdds.engines import hubs
from k8sdds.model import BESIDE

# roles that take a node no other role uses, where there is one: the engines' hubs (the MQTT
# broker, the Zenoh router)
OWN_NODE = hubs()


def place(roles: Sequence[str], nodes: Sequence[str], placement: str,
          spare: Sequence[str] = ()) -> dict[str, str]:
    """Publisher (the first role) on the first node; subscribers spread round-robin over
    the other nodes (`cross-node`), or all beside the publisher (`same-node`), or every
    role round-robin over all the nodes, the first on the first (`spread`). A broker
    (OWN_NODE) takes a node of its own: a node the others left free, else one of `spare`
    (nodes that run no test role otherwise, such as the control plane), else the
    publisher's. A stream beside a round trip (BESIDE) shares its ends' nodes."""
    if not nodes:
        raise ValueError("no nodes to place roles on")
    out = _spread([r for r in roles if r not in OWN_NODE and r not in BESIDE], nodes,
                  placement)
    free = [n for n in (*nodes, *spare) if n not in out.values()]
    for role in roles:
        if role in OWN_NODE:
            out[role] = free.pop(0) if free else nodes[0]
        elif role in BESIDE:  # a stream beside a round trip: on its ends' nodes
            out[role] = out[BESIDE[role]]
    return {role: out[role] for role in roles}


def side(role: str, roles: Sequence[str], path: str) -> str:
    """Where `role` runs on `path` ("node" or "pod", `sides`): the driver's side for the
    driver and what runs beside it, the others' for the rest."""
    first, other = sides(path)
    return first if role == roles[0] or BESIDE.get(role) == roles[0] else other


def _spread(roles: Sequence[str], nodes: Sequence[str], placement: str) -> dict[str, str]:
    first, *others = roles
    if placement == "same-node" or len(nodes) == 1:
        return {role: nodes[0] for role in roles}
    if placement == "spread":
        return {role: nodes[i % len(nodes)] for i, role in enumerate(roles)}
    spread = list(nodes[1:])
    out = {first: nodes[0]}
    for i, role in enumerate(others):
        out[role] = spread[i % len(spread)]
    return out


SIDES = {"node-node": ("node", "node"), "pod-pod-same-node": ("pod", "pod"),
         "pod-pod-cross-node": ("pod", "pod"), "node-pod": ("node", "pod"),
         "pod-node": ("pod", "node"),
         # through a Service: a pod on another node dials its ClusterIP; a client outside the
         # pod network (the publisher's node) dials the server node's NodePort
         "pod-service": ("pod", "pod"), "external-nodeport": ("node", "pod")}


def sides(path: str) -> tuple[str, str]:
    """Where the driver (first role) and the other roles run on `path`: "node" (the node's
    own network, as a hostNetwork pod would) or "pod"."""
    return SIDES[path]
