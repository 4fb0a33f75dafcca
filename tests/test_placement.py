"""Placement of roles on nodes (pure)."""
from dataclasses import replace

from k8sdds.deployment.placement import place, sides
from k8sdds.model import PATHS, Test

NODES = ["node0", "node1", "node2"]


def test_publisher_alone_subscribers_spread_over_other_nodes():
    roles = ["pub", "sub0", "sub1", "sub2", "sub3"]
    assert place(roles, NODES, "cross-node") == {
        "pub": "node0", "sub0": "node1", "sub1": "node2", "sub2": "node1", "sub3": "node2"}


def test_same_node_puts_everyone_beside_the_publisher():
    assert set(place(["pub", "sub0", "sub1"], NODES, "same-node").values()) == {"node0"}


def test_path_names():
    t = Test(row=0, line=2, data_len=64, multicast=False, num_subscribers=1,
             best_effort=False, batch_size=0)
    assert replace(t, datapath="host").effective_path == "node-node"
    assert replace(t, datapath="flannel-vxlan").effective_path == "pod-pod-cross-node"
    assert replace(t, datapath="flannel-vxlan", placement="same-node").effective_path == \
        "pod-pod-same-node"
    assert replace(t, datapath="flannel-vxlan", path="node-pod").effective_path == "node-pod"


def test_sides_of_every_path():
    assert {p: sides(p) for p in PATHS} == {
        "node-node": ("node", "node"), "pod-pod-same-node": ("pod", "pod"),
        "pod-pod-cross-node": ("pod", "pod"), "node-pod": ("node", "pod"),
        "pod-node": ("pod", "node"), "pod-service": ("pod", "pod"),
        "external-nodeport": ("node", "pod")}
