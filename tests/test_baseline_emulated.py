"""`k8sdds baseline`: the full path matrix (ping, iperf3, qperf, ab, ddsperf on every path) on
two datapaths of the real emulated cluster, and a schedule that mixes engines."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from k8sdds.analysis import load, tables
from k8sdds.model import Limits

from .emulated_support import cli, namespaces, requires_namespaces

PATHS = Limits().paths  # what the emulated backend offers (no Service paths)

pytestmark = [pytest.mark.emulated, requires_namespaces()]


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp / "state"), "COLUMNS": "200"}
    name = "kdb" + str(os.getpid() % 1000)
    proc = cli("baseline", "--datapath", "flannel-hostgw,flannel-vxlan", "--paths", "all",
               "--engines", "ping,iperf3,qperf,ab", "--duration", "1", "--out", str(tmp / "logs"),
               "--testbed", name, "--json", "--report", env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert namespaces(name) == []
    return json.loads(proc.stdout)


# Seen twice in CI and never in five local runs: the first ddsperf test of the matrix
# (flannel-hostgw, node-node) had its publisher match the reader and block ("write error:
# -10") while the subscriber received nothing. One such ddsperf repeat may fail, with its
# reason recorded; the network engines never may. The test then ends as an xfail, not a pass.
DDS_FAILURES_TOLERATED = 1


def _failed_tests(run: dict) -> dict[str, str]:
    manifest = json.loads(open(f"{run['run_dir']}/manifest.json").read())
    tests = {t["number"]: t for t in manifest["tests"]}
    return {key: tests[int(key.split("/")[0][5:])]["engine"]
            for key, e in manifest["repeats"].items() if e["status"] == "failed"}


def test_every_path_of_both_datapaths_is_measured(matrix_run):
    failed = _failed_tests(matrix_run)
    assert set(failed.values()) <= {"ddsperf"}, matrix_run["failed"]
    assert len(failed) <= DDS_FAILURES_TOLERATED, matrix_run["failed"]
    assert all(": " in f for f in matrix_run["failed"])  # each with its reason
    run = matrix_run["run_dir"]
    df = pd.read_csv(f"{run}/results.csv")
    s = df[df.kind == "summary"]
    for dp in ("flannel-hostgw", "flannel-vxlan"):
        got = s[s.datapath == dp]
        assert set(got.path) == set(PATHS)
        for path in PATHS:
            at = got[got.path == path]
            for engine, metric in (("iperf3", "throughput_mbps"), ("qperf", "throughput_mbps"),
                                   ("qperf", "latency_us_mean"), ("ping", "latency_us_p50"),
                                   ("ab", "requests_per_s"),
                                   ("ddsperf", "throughput_mbps")):
                v = at[(at.engine == engine) & (at.metric == metric)].value
                if engine == "ddsperf" and failed and v.empty:
                    continue  # the tolerated repeat
                assert len(v) and (v > 0).all(), (dp, path, engine, metric)
            # one latency definition: qperf's message rate counts both ends' messages, two a
            # round trip, so half of it times the stored round trip fills the second
            lat = at[(at.engine == "qperf") & at.latency_test]
            for _, one in lat.groupby(["test", "repeat"]):
                v = one.set_index("metric").value
                fill = v["samples_per_s"] / 2 * v["latency_us_mean"] / 1e6
                assert fill == pytest.approx(1.0, abs=0.10), (dp, path, fill)
            udp = at[(at.engine == "iperf3") & (at.transport == "udp")]
            assert {"jitter_ms", "lost"} <= set(udp.metric)
            tcp = at[(at.engine == "iperf3") & (at.transport == "tcp")]
            assert "retransmits" in set(tcp.metric)
    # placement follows the path: the client on node1, the server on node2 (or beside it)
    manifest = json.loads(open(f"{run}/manifest.json").read())
    tests = {t["number"]: t for t in manifest["tests"]}
    for key, entry in manifest["repeats"].items():
        t = tests[int(key.split("/")[0][5:])]
        if t["engine"] != "iperf3":
            continue
        same = t["path"] == "pod-pod-same-node"
        assert entry["placement"] == {"client": "node1",
                                      "server": "node1" if same else "node2"}
    if failed:  # the rest is tested; the failed repeat's figure is not (an xfail, not a pass)
        pytest.xfail(f"a ddsperf repeat failed, its reason recorded: {matrix_run['failed']}")


def test_the_report_shows_the_matrix_and_dds_efficiency(matrix_run):
    runs = load.load([matrix_run["run_dir"]])
    m = tables.matrix(runs)
    assert len(m) == 10  # 2 datapaths x 5 paths
    eff = tables.efficiency(runs).set_index(["datapath", "path"])
    share = eff["ddsperf / iperf3 TCP (%)"]
    missing = len(_failed_tests(matrix_run))
    assert share.notna().sum() >= len(m) - missing and (share.dropna() > 0).all()
    assert eff["ddsperf RTT / ping p50 (x)"].notna().sum() >= len(m) - missing
    page = open(matrix_run["report"]).read()
    section = page[page.index('<section id="baselines">'):]
    assert "DDS efficiency" in section and "pod-node" in section and "iperf3 TCP" in section
    assert "ab (requests/s)" in section
    if missing:
        pytest.xfail(f"a ddsperf repeat failed, its share not shown: {matrix_run['failed']}")


def test_datapath_cpu_cost_counts_the_tunnel_process(tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    sch = tmp_path / "s.csv"
    sch.write_text("engine,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "iperf3,tcp,131072,false,1,false,0\n")
    proc = cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw,flannel-wireguard",
               "--duration", "3", "--out", str(tmp_path / "logs"), "--testbed",
               "kdu" + str(os.getpid() % 1000), "--json", "--no-plot", env=env)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["run_dir"]
    df = pd.read_csv(f"{run}/results.csv")
    cost = df[df.role == "datapath"].set_index(["datapath", "metric"]).value
    assert cost[("flannel-hostgw", "datapath_cpu_pct")] == 0  # the kernel routes: no process
    assert cost[("flannel-wireguard", "datapath_cpu_pct")] > 10  # wireguard-go encrypts
    assert cost[("flannel-wireguard", "softirq_pct")] > 0  # the kernel's side of the tunnel
    assert os.path.exists(f"{run}/test-1/rep-1/usage.json")
    table = tables.resources(load.load([run])).set_index("datapath")
    assert table.loc["flannel-wireguard", "datapath processes (% core)"] > 10
