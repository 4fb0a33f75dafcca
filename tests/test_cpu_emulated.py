"""CPU per message on a live run of the emulated backend, against what the kernel itself
counted: the publisher's node's cgroup counter, read by this test before and after the run,
and ddsperf's own print of its threads' CPU (docs/reference/results.md, `parsers/cpu.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"


def _node_counter(testbed: str, node: str) -> float:
    """CPU seconds of the node's cgroup so far, read here from the kernel's own file: cgroup
    v1's cpuacct hierarchy where it is mounted apart (this project's machines), else the v2
    cgroup's cpu.stat."""
    v1 = Path("/sys/fs/cgroup/cpuacct/k8sdds") / testbed / node / "cpuacct.usage"
    if v1.exists():
        return int(v1.read_text()) / 1e9
    v2 = Path("/sys/fs/cgroup/k8sdds") / testbed / node / "cpu.stat"
    usec = dict(line.split() for line in v2.read_text().splitlines())["usage_usec"]
    return int(usec) / 1e6


def test_a_roles_cpu_is_what_the_kernel_counted_for_its_node(tmp_path, env):
    """The publisher alone on node1 (hostNetwork): its process's CPU over two repeats is
    what node1's cgroup counted over the run, within 5 % (the cgroup's counter also holds
    the few milliseconds of starting it); ddsperf's own per-second figures of its threads
    agree within a quarter (they leave out its first and last partial seconds); and its CPU
    per message is that over the samples its subscriber received."""
    name = "kdc" + str(os.getpid() % 1000)
    sch = tmp_path / "one.csv"
    sch.write_text(HEADER + "1024,false,1,false,0,false\n")
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", env=env)
    assert up.returncode == 0, up.stderr
    try:
        before = _node_counter(name, "node1")
        proc = cli("run", "--sch", str(sch), "--datapath", "host", "--duration", "3",
                   "--repeats", "2", "--out", str(tmp_path / "logs"), "--testbed", name,
                   "--no-plot", "--json", env=env)
        counted = _node_counter(name, "node1") - before
    finally:
        down = cli("testbed", "down", "--testbed", name, env=env)
    assert proc.returncode == 0, proc.stderr
    assert down.returncode == 0 and namespaces(name) == []
    assert not (Path("/sys/fs/cgroup/cpuacct/k8sdds") / name).exists()
    run = json.loads(proc.stdout)["run_dir"]
    df = pd.read_csv(f"{run}/results.csv")
    s = df[df.kind == "summary"]

    def summed(role: str, metric: str) -> float:
        return s[(s.role == role) & (s.metric == metric)].value.sum()

    pub_cpu = summed("pub", "cpu_user_s") + summed("pub", "cpu_system_s")
    assert counted > 0.05  # a publisher as fast as it can go for 2 x 3 s
    assert pub_cpu == pytest.approx(counted, rel=0.05)
    nodes = s[(s.role == "node") & (s.metric == "node_cpu_s")]
    assert set(nodes.node) == {"node1", "node2"}
    assert nodes[nodes.node == "node1"].value.sum() == pytest.approx(counted, rel=0.05)
    # ddsperf's own account: each thread's user + system % of a core, each second
    printed = df[(df.role == "pub") & (df.kind == "sample") & (df.metric == "cpu_pct")]
    assert printed.value.sum() / 100 == pytest.approx(pub_cpu, rel=0.25)
    for rep in (1, 2):
        rows = s[s.repeat == rep]
        got = rows[(rows.role == "sub0") & (rows.metric == "received")].value.iloc[0]
        pub = rows[rows.role == "pub"].set_index("metric").value
        assert pub["cpu_per_message_us"] == pytest.approx(
            (pub["cpu_user_s"] + pub["cpu_system_s"]) / got * 1e6, rel=1e-3)
