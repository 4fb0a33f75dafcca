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


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A three-node cloud testbed the module's tests share: (its name, the environment of a
    `k8sdds` run on it); this process sees its state too. Down, and its cgroups gone, after."""
    state = tmp_path_factory.mktemp("state")
    env = {**os.environ, "K8SDDS_STATE_DIR": str(state), "COLUMNS": "200"}
    name = "kdc" + str(os.getpid() % 1000)
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", env=env)
    assert up.returncode == 0, up.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("K8SDDS_STATE_DIR", str(state))
        try:
            yield name, env
        finally:
            down = cli("testbed", "down", "--testbed", name, env=env)
    assert down.returncode == 0 and namespaces(name) == []
    assert not (Path("/sys/fs/cgroup/cpuacct/k8sdds") / name).exists()


def _run(bed, sch: Path, out: Path, datapath: str) -> pd.DataFrame:
    """Two repeats of 3 s on the shared testbed; the summary rows."""
    name, env = bed
    proc = cli("run", "--sch", str(sch), "--datapath", datapath, "--duration", "3",
               "--repeats", "2", "--out", str(out), "--testbed", name, "--no-plot",
               "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(Path(json.loads(proc.stdout)["run_dir"]) / "results.csv")
    return df


def test_a_roles_cpu_is_what_the_kernel_counted_for_its_node(tmp_path, bed):
    """The publisher alone on node1 (hostNetwork): its process's CPU over two repeats is
    what node1's cgroup counted over the run, within 5 % (the cgroup's counter also holds
    the few milliseconds of starting it); ddsperf's own per-second figures of its threads
    agree within a quarter (they leave out its first and last partial seconds); and its CPU
    per message is that over the samples its subscriber received."""
    sch = tmp_path / "one.csv"
    sch.write_text(HEADER + "1024,false,1,false,0,false\n")
    before = _node_counter(bed[0], "node1")
    df = _run(bed, sch, tmp_path / "logs", "host")
    counted = _node_counter(bed[0], "node1") - before
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


def test_the_kernel_s_share_of_a_pod_path_lands_on_the_publisher_s_own_cpu(tmp_path, bed):
    """A charge of idle rules on flannel-vxlan (k8sdds.testbed.hopcost) costs the publisher's
    own process, in system time, per message: with 3,000 rules each of its packets crosses at
    node1's uplink, its system CPU per message rises by at least 3,000 x the packets node1's
    counter charged a message x 1 ns (a rule costs more: about 16 ns on this project's
    machines), beside the same run without rules; the rise is its system time's, not its
    user time's (which rises a little per message too: its fixed work a second is shared by
    fewer messages)."""
    from k8sdds.testbed import hopcost
    from k8sdds.testbed.testbed import Testbed

    tb = Testbed.existing(bed[0])
    node1 = tb.node("node1")
    sch = tmp_path / "one.csv"
    sch.write_text(HEADER + "1024,false,1,false,0,false\n")
    per_message = {}
    for rules in (0, 3000):
        for node in tb.workers():
            tb.set_hop(node, {"flannel-vxlan": rules})
        before = hopcost.crossings(node1.ns)
        df = _run(bed, sch, tmp_path / f"logs-{rules}", "flannel-vxlan")
        charged = hopcost.crossings(node1.ns) - before
        assert hopcost.rules_in(node1.ns) == rules
        s = df[(df.kind == "summary")]
        received = s[(s.role == "sub0") & (s.metric == "received")].value.sum()
        pub = s[s.role == "pub"].groupby("metric").value.sum()
        per_message[rules] = {"system": pub["cpu_system_s"] / received * 1e6,
                              "user": pub["cpu_user_s"] / received * 1e6,
                              "packets": charged / received}
    for node in tb.workers():
        tb.set_hop(node, {})
    uncharged, charged = per_message[0], per_message[3000]
    assert uncharged["packets"] >= 1, per_message  # each 1 KiB sample: a VXLAN packet out
    floor_us = 3000 * charged["packets"] * 1e-3
    assert charged["system"] - uncharged["system"] >= floor_us, per_message
    rise = {k: charged[k] - uncharged[k] for k in ("system", "user")}
    assert rise["system"] >= 0.8 * (rise["system"] + rise["user"]), per_message
