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


def test_a_broker_takes_a_node_of_its_own():
    roles = ["pub", "broker", "sub0"]
    # a worker the others left free
    assert place(roles, NODES, "cross-node") == {"pub": "node0", "broker": "node2",
                                                  "sub0": "node1"}
    # none free: the spare node (the control plane), not a worker
    assert place(roles, ["node1", "node2"], "cross-node", spare=["node0"])["broker"] == "node0"
    assert place(["pub", "broker", "sub0", "sub1"], ["node1", "node2"], "same-node",
                 spare=["node0"]) == {"pub": "node1", "broker": "node2", "sub0": "node1",
                                      "sub1": "node1"}
    # no node at all to spare: beside the publisher
    assert place(roles, ["node1", "node2"], "cross-node")["broker"] == "node1"
    # roles come back in their own order
    assert list(place(roles, NODES, "cross-node")) == roles
