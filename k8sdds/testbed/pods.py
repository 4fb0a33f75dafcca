"""A testbed's pods: a namespace per pod, its `eth0` a veth enslaved to its node's `cni0`
bridge (or, for a /32, alone behind its veth: Cilium's), an address of the node's pod range;
made per test and deleted after it. The wiring hears of each change (kube-router's firewall
keeps a chain per local pod, Cilium's programs know each local pod)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from k8sdds.errors import TestbedError
from k8sdds.testbed import netns
from k8sdds.testbed.layout import Layout, Node, State, host_veth, pods_on
from k8sdds.testbed.netns import ip
from k8sdds.testbed.wiring.kinds import WIRING

MAX_PODS_PER_NODE = 32


@dataclass(frozen=True)
class Pod:
    name: str
    node: str
    ns: str
    address: str


def add(tb: Layout, node: Node, name: str, mtu: int, prefix: int = 24) -> Pod:
    """A pod `name` on `node`, at the node's first free address, its veth at `mtu`."""
    state = tb.load_state()
    taken = {p["address"] for p in state.pods.values() if p["node"] == node.name}
    net = node.gateway.rsplit(".", 1)[0]
    free = [f"{net}.{10 + k}" for k in range(MAX_PODS_PER_NODE)
            if f"{net}.{10 + k}" not in taken]
    if not free:
        raise TestbedError(f"{node.name} has no free pod address "
                           f"(at most {MAX_PODS_PER_NODE} pods per node)")
    pod = Pod(name=name, node=node.name, ns=tb.pod_namespace(node, name), address=free[0])
    state.pods[pod.ns] = asdict(pod)
    tb.add_namespace(state, pod.ns)
    veth = host_veth(name)
    ip("link", "add", veth, "mtu", str(mtu), "type", "veth", "peer", "name", "eth0",
       "netns", pod.ns, ns=node.ns)
    alone = prefix == 32  # no bridge: the gateway is the node's, answered on the veth
    ip("link", "set", veth, *(() if alone else ("master", "cni0")), "up", ns=node.ns)
    ip("addr", "add", f"{pod.address}/{prefix}", "dev", "eth0", ns=pod.ns)
    ip("link", "set", "eth0", "mtu", str(mtu), "up", ns=pod.ns)
    ip("route", "add", "default", "via", node.gateway,
       *(("dev", "eth0", "onlink") if alone else ()), ns=pod.ns)
    if alone:  # the node's own way to it (its programs skip the node's routes)
        ip("route", "replace", f"{pod.address}/32", "dev", veth, ns=node.ns)
    _changed(tb, state, [node])
    return pod


def _changed(tb: Layout, state: State, nodes: list[Node]) -> None:
    """Tell the wiring (kube-router's firewall keeps a chain per local pod)."""
    hook = WIRING[state.datapath].pods if state.datapath and state.wired else None
    for node in nodes if hook else ():
        hook(tb, node, pods_on(node, state))


def remove_all(tb: Layout) -> None:
    """Delete every pod (and kill its processes)."""
    state = tb.load_state()
    for ns, pod in list(state.pods.items()):
        netns.kill_all(ns)
        # delete the veth first: namespace deletion frees its links asynchronously, and
        # the next pod of that name would find the old peer still in the node
        ip("link", "del", host_veth(pod["name"]), ns=tb.node(pod["node"]).ns, check=False)
        netns.delete(ns)
        state.pods.pop(ns)
        if ns in state.namespaces:
            state.namespaces.remove(ns)
    tb.save_state(state)
    _changed(tb, state, tb.nodes)

