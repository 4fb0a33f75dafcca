"""Scale on the real emulated cluster: 8 nodes x 8 pods, and 1 publisher with 32 subscribers.
(How fast is measured in benchmarks/datapaths.py, not here.)"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from k8sdds.testbed import netns
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed
from k8sdds.testbed.wiring.kinds import datapath_unavailable

from .emulated_support import cli, namespaces, requires_namespaces, root_links

pytestmark = [pytest.mark.emulated, requires_namespaces()]


def test_eight_nodes_of_eight_pods_up_and_down(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path))
    before = root_links()
    tb = Testbed(default_nodes(8, name="kds" + str(os.getpid() % 1000)))
    tb.up()
    try:
        tb.use_datapath("flannel-vxlan")
        pods = [tb.add_pod(node, f"p{k}", 1450) for node in tb.nodes for k in range(8)]
        assert len({p.address for p in pods}) == 64
        assert len(namespaces(tb.spec.name)) == 1 + 8 + 64
        first, last = pods[0], pods[-1]  # node0 to node7, through VXLAN
        assert netns.run(netns.exec_argv(first.ns, ["ping", "-c", "1", "-W", "2",
                                                    last.address]), check=False).returncode == 0
    finally:
        tb.down()
    assert namespaces(tb.spec.name) == []
    assert root_links() == before


def test_one_publisher_and_32_subscribers_across_8_nodes(tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state")}
    sch = tmp_path / "s32.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,false,32,false,0\n")
    name = "kdt" + str(os.getpid() % 1000)
    proc = cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw", "--nodes", "8",
               "--duration", "4", "--out", str(tmp_path / "logs"), "--testbed", name,
               "--json", "--no-plot", env=env)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["failed"] == []
    df = pd.read_csv(f"{outcome['run_dir']}/results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert sorted(thr.role) == sorted(f"sub{i}" for i in range(32))  # every subscriber reports
    assert (thr.value > 0).all()
    assert set(thr.node) == {f"node{i}" for i in range(2, 8)}  # spread over the other workers
    assert namespaces(name) == []


def test_two_testbeds_at_once_do_not_clash(tmp_path, monkeypatch):
    from k8sdds import model

    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path))
    dp = "weave-encrypted"  # the most shared state: WireGuard sockets in /var/run/wireguard
    if why := datapath_unavailable(model.datapath(dp)):  # a skip CI fails
        pytest.skip(f"{dp} is not available here: {why}")
    a = Testbed(default_nodes(3, name="kda" + str(os.getpid() % 1000)))
    b = Testbed(default_nodes(3, name="kdb" + str(os.getpid() % 1000)))
    try:
        for tb in (a, b):
            tb.up()
            tb.use_datapath(dp)
        info = model.datapath(dp)
        for tb in (a, b):
            x = tb.add_pod(tb.node("node1"), "x", info.mtu, info.pod_prefix)
            y = tb.add_pod(tb.node("node2"), "y", info.mtu, info.pod_prefix)
            ping = netns.run(netns.exec_argv(x.ns, ["ping", "-c", "2", "-W", "2", y.address]),
                             check=False)
            assert ping.returncode == 0, f"{tb.spec.name}: {ping.stdout}"
        a.down()
        # the other testbed still works after the first is gone
        x, y = (f"{b.spec.name}-node1-x", "10.244.2.10")
        assert netns.run(netns.exec_argv(x, ["ping", "-c", "1", "-W", "2", y]),
                         check=False).returncode == 0
    finally:
        a.down()
        b.down()
    assert namespaces(a.spec.name) == [] and namespaces(b.spec.name) == []
