"""Placement of roles on nodes (pure)."""

from k8sdds.deployment.placement import path_of, place

NODES = ["node0", "node1", "node2"]


def test_publisher_alone_subscribers_spread_over_other_nodes():
    roles = ["pub", "sub0", "sub1", "sub2", "sub3"]
    assert place(roles, NODES, "cross-node") == {
        "pub": "node0", "sub0": "node1", "sub1": "node2", "sub2": "node1", "sub3": "node2"}


def test_same_node_puts_everyone_beside_the_publisher():
    assert set(place(["pub", "sub0", "sub1"], NODES, "same-node").values()) == {"node0"}


def test_path_names():
    assert path_of(True, "cross-node") == "node-node"
    assert path_of(False, "cross-node") == "pod-pod-cross-node"
    assert path_of(False, "same-node") == "pod-pod-same-node"
