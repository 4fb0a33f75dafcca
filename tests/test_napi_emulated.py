"""Kernel datapath work charged to the node, on real namespaces: the uplink NAPI thread of a
limited node sits in the node's cgroup and does the node's receive work there; nothing is
left in the machine's cgroups after down."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from k8sdds.testbed import calibration, capabilities, napi, netns
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed

from .emulated_support import requires_namespaces

pytestmark = [pytest.mark.emulated, pytest.mark.exclusive, requires_namespaces()]


def _cgroup_of(pid: int) -> str:
    """The cpu controller's cgroup path of `pid`."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") or controllers == "":
            return path
    return ""


def _leftover_cgroups(name: str) -> list[str]:
    return [str(p) for root in ("cpu", "cpuset", "unified")
            for p in Path("/sys/fs/cgroup", root).glob(f"k8sdds/{name}")]


@pytest.fixture
def limited(tmp_path, monkeypatch):
    """A 3-node testbed of Pi 3B workers, at a known budget (this machine's calibration
    file left aside)."""
    if capabilities.threaded_napi():
        pytest.skip(f"datapath work cannot be charged here: {capabilities.threaded_napi()}")
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "cal.json"))
    calibration.save(calibration.Calibration(board="rpi3b", cpu=0.2, target_ratio=0.87,
                                             ratio=0.87, link_mbps=95.0))
    tb = Testbed(default_nodes(3, "rpi3b", name="kdz" + str(os.getpid() % 1000)))
    tb.up()
    try:
        yield tb
    finally:
        tb.down()
    assert _leftover_cgroups(tb.spec.name) == []


def test_the_uplink_napi_thread_of_each_limited_node_is_in_its_cgroup(limited):
    tb = limited
    assert tb.profiles()["rpi3b"]["cpu"] == 0.2
    n1, n2 = tb.node("node1"), tb.node("node2")
    pods = {n1.name: tb.add_pod(n1, "a", 1500), n2.name: tb.add_pod(n2, "b", 1500)}
    for node in (n1, n2):
        group = tb.cgroup(node)
        assert group and group.endswith(f"k8sdds/{tb.spec.name}/{node.name}")
        threads = napi.threads(node.ns)
        assert len(threads) == 1 and threads[0].pid  # the uplink eth0's
        assert _cgroup_of(threads[0].pid).endswith(f"/{tb.spec.name}/{node.name}")
        # a pod's veths keep the plain backlog: processed in the thread that feeds them
        assert napi.threads(pods[node.name].ns) == []
    switch = napi.threads(tb.switch)
    assert len(switch) == 2  # the ports of the two limited nodes
    for t in switch:  # the switch is hardware: no node pays for it
        assert tb.spec.name not in _cgroup_of(t.pid)
    assert tb.node("node0").profile == "cloud" and tb.cgroup(tb.node("node0")) is None
    # what a calibration counts as the testbed's own work: the four threads, by their names
    named = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in tb.kernel_threads()]
    assert sorted(n.split("-")[0] for n in named) == ["napi/eth0"] * 2 + ["napi/n1", "napi/n2"]


def test_a_move_the_kernel_refuses_names_the_thread_after_fresh_listings(limited):
    from k8sdds.errors import TestbedError

    node = limited.node("node1")
    [thread] = napi.threads(node.ns)
    absent = f"/sys/fs/cgroup/cpu/k8sdds/{limited.spec.name}/absent"  # every move refused
    with pytest.raises(TestbedError) as refused:
        napi.charge(node.ns, absent)
    said = str(refused.value)
    assert f"NAPI thread {thread.pid} (napi/eth0-" in said and node.ns in said
    assert said.endswith("No such file or directory"), said
    assert _cgroup_of(thread.pid).endswith(f"/{limited.spec.name}/{node.name}")  # unmoved


def test_receive_work_runs_in_the_receiving_nodes_thread(limited):
    tb = limited
    tb.use_datapath("flannel-vxlan")
    n1, n2 = tb.node("node1"), tb.node("node2")
    a = tb.add_pod(n1, "a", 1450)
    b = tb.add_pod(n2, "b", 1450)
    receivers = [t.pid for t in napi.threads(n2.ns)]
    before = sum(netns.cpu_seconds(p) for p in receivers)
    # 3 s of UDP from pod a to pod b: each packet is decapsulated, bridged and delivered to
    # pod b by node2's uplink thread
    flood = subprocess.run(netns.exec_argv(a.ns, [
        "python3", "-c",
        "import socket,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "end=time.monotonic()+3\n"
        "while time.monotonic()<end:\n"
        f" s.sendto(b'x'*1024,('{b.address}',9))\n"]), capture_output=True, timeout=30)
    assert flood.returncode == 0, flood.stderr
    time.sleep(0.2)
    used = sum(netns.cpu_seconds(p) for p in receivers) - before
    assert used > 0, "the receiving node's NAPI thread did no work: it ran elsewhere"


RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5001))
print("ready", flush=True)
s.settimeout(10); s.recv(2048); n = 1
s.settimeout(1.0)
try:
    while True:
        s.recv(2048); n += 1
except socket.timeout:
    print(n)
"""

SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + 0.5
while time.monotonic() < end:
    s.sendto(b"x" * 64, (sys.argv[1], 5001))
"""


def test_the_nodes_receive_work_is_paid_from_its_budget(limited):
    """A node's NAPI threads spend its budget: with a tiny budget, the node's own process
    (in its cgroup, as every role is) gets little of a flood that its receive path handled;
    with a full CPU it gets most of it. (Since Linux 6.18 a throttled cgroup stops its tasks
    only on their way back to user space, so the threads themselves run on and the node's
    processes wait until the budget is repaid.)"""
    from k8sdds.testbed import cgroups

    tb = limited
    n1, n2 = tb.node("node1"), tb.node("node2")
    group = tb.cgroup(n2)

    def received(cpus: float) -> int:
        cgroups.limit(group, cpus)
        sink = subprocess.Popen(netns.exec_argv(n2.ns, ["python3", "-c", RECEIVER]),
                                stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: cgroups.join(group))
        assert sink.stdout.readline().strip() == "ready"
        subprocess.run(netns.exec_argv(n1.ns, ["python3", "-c", SENDER, n2.address]),
                       timeout=30, check=True)
        out, _ = sink.communicate(timeout=60)
        return int(out.strip())

    full, starved = received(1.0), received(0.05)
    assert starved < full * 0.25, f"{starved} packets at 0.05 CPU against {full} at 1 CPU"
