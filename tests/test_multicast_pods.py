"""The multicast probe's pods on a real cluster (deployment.kubernetes.multicast_pods): their
plan and what a receiver's log means. The probe itself runs on the testbed clusters
(test_kube_testbed, test_kube_router_testbed, test_weave_testbed, test_cilium_testbed) and,
program against program, beside the Python probe on every emulated datapath (test_emulated)."""

from __future__ import annotations

from k8sdds.deployment.kubernetes import multicast_pods as mp


def test_the_pods_are_a_sender_a_receiver_a_node_and_a_control_beside_the_sender():
    sender, receivers = mp.plan("r1", ["a", "b", "c"], False, {"a": "10.0.0.1"})
    assert (sender.name, sender.node, sender.address) == ("mc0-send-r1", "a", "0.0.0.0")
    assert [(r.name, r.node, r.address, r.told_as) for r in receivers] == [
        ("mc1-recv-r1", "b", "0.0.0.0", "b"), ("mc2-recv-r1", "c", "0.0.0.0", "c"),
        ("mc0-beside-r1", "a", "0.0.0.0", "(same node)")]


def test_on_the_hosts_network_each_pod_joins_on_its_nodes_address_and_has_no_control():
    sender, receivers = mp.plan("r1", ["a", "b"], True, {"a": "10.0.0.1", "b": "10.0.0.2"})
    assert sender.address == "10.0.0.1"
    assert [(r.node, r.address) for r in receivers] == [("b", "10.0.0.2")]


def test_the_argv_is_the_engine_images_program_in_its_probe_mode():
    assert mp.argv("recv", "0.0.0.0", "ab12", 370.5) == (
        "k8sdds-discovery", "probe", "recv", "0.0.0.0", "ab12", "370.5")
    assert mp.argv("send", "10.0.0.1", "ab12", 370.5) == (
        "k8sdds-discovery", "probe", "send", "10.0.0.1", "ab12")


def test_a_receivers_log_says_arrived_none_or_not_yet():
    # the lines engines/discovery/probe.c prints
    assert mp.heard("ready\narrived from 10.244.1.3\n") is True
    assert mp.heard("ready\nnone\n") is False
    assert mp.heard("ready\n") is None
    assert mp.heard("") is None


def test_a_receiver_listens_past_the_pods_started_beside_it_and_its_own_start():
    # the fingerprint's pods get the pod timeout to finish, the receiver as much to start,
    # the sender as much again: a receiver that stopped listening first would read "none"
    assert mp.heard_for(120.0) > 3 * 120.0
