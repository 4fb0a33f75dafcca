"""The nodes `k8sdds serve` shows: a cluster's nodes from a real kube-apiserver (kwok as
their kubelets: Ready, with heartbeats), an inventory's hosts from real sshd servers (the
ones that answer), and a cluster that cannot be reached as a row saying so."""

from __future__ import annotations

import os

import pytest

from k8sdds.serve import nodes

from . import kube_support as ks
from . import ssh_support as ss
from .builds import needs


@pytest.mark.kube
@needs("k8s-amd64", why=ks.missing)
def test_a_clusters_nodes_with_their_heartbeats(tmp_path):
    plane = ks.ControlPlane(tmp_path / "k8s").start()
    try:
        plane.add_nodes(ks.EDGE)
        plane.wait_ready([n["metadata"]["name"] for n in ks.EDGE])
        found = nodes.kubernetes(plane.kubeconfig)
        assert sorted(n["name"] for n in found) == sorted(n["metadata"]["name"]
                                                         for n in ks.EDGE)
        assert all(n["state"] == "Ready" and n["last_seen"] for n in found)
    finally:
        plane.stop()


@pytest.mark.ssh
@pytest.mark.skipif(ss.missing() is not None, reason=ss.missing() or "")
def test_an_inventorys_hosts_that_answer(tmp_path):
    hosts = ss.Hosts(tmp_path / "ssh", f"ksn{os.getpid() % 1000}", net=238).up()
    try:
        inventory = hosts.inventory((1, 2, 3), hosts.known_hosts((1, 2, 3)))
        found = {n["name"]: n for n in nodes.ssh(inventory)}
        assert found["h1"]["state"] == found["h2"]["state"] == "answers"
        assert found["h3"]["state"] == "no answer" and found["h3"]["last_seen"] is None
    finally:
        hosts.down()


def test_a_cluster_out_of_reach_is_a_row_not_an_error(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                          "    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n"
                          "    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n"
                          "  user: {token: x}\n")
    rows = [n for n in nodes.online(kubeconfig=kubeconfig) if n["backend"] == "kubernetes"]
    assert len(rows) == 1 and rows[0]["state"].startswith("unreachable")
