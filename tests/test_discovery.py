"""The discovery test kind without a testbed: k8sdds-discovery's output and a node's sampled
counters parsed (real output, tests/fixtures/discovery/README.md), the engine's command
lines and refusals, the `spread` placement, the schedule's refusals of what cannot run, and
the traffic a node's counters give over a span (figures worked out by hand)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from k8sdds import schedule
from k8sdds.analysis import discovery as analysis
from k8sdds.deployment.placement import place
from k8sdds.engines import RoleContext, registry
from k8sdds.errors import ScheduleError
from k8sdds.expansion import expand, problem
from k8sdds.model import Limits, Test
from k8sdds.parsers import counters
from k8sdds.parsers import discovery as parser
from k8sdds.repeat import discovery_of

from .conftest import FIXTURES

HERE = FIXTURES / "discovery"
HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize,engine,discovery\n"
BASE = Test(row=0, line=2, data_len=64, multicast=False, num_subscribers=3, best_effort=False,
            batch_size=0, engine="dds-discovery", datapath="weave", duration=5)
ENDPOINTS = {"p0": "10.244.1.10", "p1": "10.244.2.10", "p2": "10.244.3.10",
             "p3": "10.244.2.11"}


def _values(parsed) -> dict[str, float]:
    return {v.metric: v.value for v in parsed.values}


def test_a_participants_output_gives_its_times_and_its_interfaces_traffic():
    got = parser.parse((HERE / "p1-host-multicast-4.log").read_text(), "p1", False)
    assert got.failure is None
    v = _values(got)
    assert v["discovery_s"] == 0.006711  # `discovered 0.006711`
    assert v["participants_s"] == 0.005883  # `participants 0.005883 3/3`
    assert v["start_late_s"] == 0.000079
    assert v["discovery_bytes"] == 4314 + 10584  # `traffic discovery 0.006711 4314 23 10584 46`
    assert v["discovery_tx_packets_per_s"] == pytest.approx(23 / 0.006711)
    assert v["steady_rx_bytes_per_s"] == pytest.approx(2006 / 3.000137)
    [trace] = got.columns  # the fewer of readers and writers matched, at each change
    assert list(trace.t) == [0.002557, 0.003959, 0.004430, 0.004563, 0.006386, 0.006711]
    assert list(trace.values) == [0, 1, 1, 2, 2, 3]


def test_a_participant_that_matched_no_peer_in_time_is_a_failure_saying_so():
    got = parser.parse((HERE / "timeout-alone.log").read_text(), "p0", False)
    assert got.failure == "not every peer matched within 1.0 s: readers 0/2, writers 0/2"
    missing = parser.parse((HERE / "no-interface.log").read_text(), "p0", False)
    assert missing.failure == ("/sys/class/net/nosuch/statistics/tx_bytes: No such file or "
                               "directory")
    assert parser.parse("", "p0", False).failure == "no `discovered` line"


def test_a_zenoh_session_s_output_reads_as_a_participant_s():
    got = parser.parse((HERE / "zenoh-p0-peers-2.log").read_text(), "p0", False)
    v = _values(got)
    assert v["discovery_s"] == 0.006489 and v["participants_s"] == 0.006489
    assert v["discovery_bytes"] == 1035 + 1035  # `traffic discovery 0.006489 1035 11 1035 11`
    assert got.columns == ()  # Zenoh matches no readers and writers: no `matched` lines
    alone = parser.parse((HERE / "zenoh-timeout-alone.log").read_text(), "p0", False)
    assert alone.failure == "not every peer matched within 1.0 s: peers known 0/2"
    assert parser.parse("error: cannot open a Zenoh peer session: refused\n", "p1",
                        False).failure == "cannot open a Zenoh peer session: refused"
    # the router of a routed test says only its errors (parsers.zenoh)
    assert parser.parse("[77] 0.508 router up\n", "router", False).failure is None


def test_zenoh_sessions_scout_dial_their_peers_or_their_router():
    engine = registry()["zenoh-discovery"]
    zbase = replace(BASE, engine="zenoh-discovery", transport="tcp")
    scouting = engine.command(zbase, _ctx("p2", "multicast", 1796170000.25)).argv
    assert scouting == ("k8sdds-zenoh", "-mode", "discover", "-peers", "3", "-wait", "30",
                        "-settle", "2", "-steady", "5", "-id", "p2", "-zmode", "peer",
                        "-listen", "tcp/0.0.0.0:7449", "-scout", "-iface", "eth0", "-at",
                        "1796170000.250")
    dialing = engine.command(zbase, _ctx("p0", "peers")).argv
    assert dialing[dialing.index("-connect") + 1] == (
        "tcp/10.244.2.10:7448,tcp/10.244.3.10:7449,tcp/10.244.2.11:7450")
    assert "-scout" not in dialing
    # each pair once, the later started dialing the earlier (followers p1.. then p0)
    assert "-connect" not in engine.command(zbase, _ctx("p1", "peers")).argv
    third = engine.command(zbase, _ctx("p3", "peers")).argv
    assert third[third.index("-connect") + 1] == "tcp/10.244.2.10:7448,tcp/10.244.3.10:7449"
    routed = replace(zbase, topology="routed")
    assert list(engine.roles(routed)) == ["p0", "router", "p1", "p2", "p3"]
    ctx = RoleContext(role="p1", address="", interface="", config_dir="/tmp/x",
                      endpoints={**ENDPOINTS, "router": "10.244.4.2"}, discovery="peers")
    client = engine.command(routed, ctx).argv
    assert client[client.index("-zmode"):client.index("-zmode") + 4] == (
        "-zmode", "client", "-connect", "tcp/10.244.4.2:7447")
    assert engine.command(routed, replace(ctx, role="router")).argv == (
        "k8sdds-zenoh", "-mode", "router", "-listen", "tcp/0.0.0.0:7447")
    assert [engine.mode(t, d) for t, d in (("peer", "multicast"), ("peer", "peers"),
                                           ("routed", "peers"))] == [
        "zenoh scouting", "zenoh peers", "zenoh router"]
    assert engine.check(replace(zbase, transport="udp"))[0] == "transport"
    assert engine.check(replace(routed, discovery="multicast"))[2].startswith(
        "through a router")
    assert engine.check(replace(zbase, latency_test=True))[0] == "latency_test"


def test_a_nodes_sampled_counters_are_four_cumulative_series():
    got = counters.parse((HERE / "counters-node2-head.log").read_text())
    series = {c.metric: c for c in got.columns}
    assert set(series) == {"node_rx_bytes", "node_rx_packets", "node_tx_bytes",
                           "node_tx_packets"}
    assert list(series["node_rx_bytes"].t[:2]) == [0.003626, 0.053853]
    assert list(series["node_rx_bytes"].values[:3]) == [2036, 19414, 20752]
    assert list(series["node_tx_packets"].values[-1:]) == [88]
    assert counters.parse("nothing here").failure == "no counter line"


def _ctx(role: str, discovery: str, start_at: float = 0.0) -> RoleContext:
    return RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                       endpoints=ENDPOINTS, discovery=discovery, config_dir="/tmp/x",
                       start_at=start_at)


def test_each_participant_runs_k8sdds_discovery_with_its_mode_and_the_common_start():
    engine = registry()["dds-discovery"]
    assert list(engine.roles(BASE)) == ["p0", "p1", "p2", "p3"]
    cmd = engine.command(BASE, _ctx("p2", "multicast", 1796170000.25))
    assert cmd.argv == ("k8sdds-discovery", "-peers", "3", "-wait", "30", "-settle", "2",
                        "-steady", "5", "-iface", "eth0", "-at", "1796170000.250")
    [xml] = cmd.files.values()
    root = ET.fromstring(xml)
    assert root.find(".//AllowMulticast").text == "spdp"
    assert root.find(".//Peers") is None
    assert cmd.env["CYCLONEDDS_URI"] == "file:///tmp/x/p2.cyclonedds.xml"
    listed = ET.fromstring(next(iter(engine.command(BASE, _ctx("p0", "peers")).files.values())))
    assert listed.find(".//AllowMulticast").text == "false"
    # each address once (p1 and p3 share a node's pod network, not an address)
    assert [p.get("address") for p in listed.iter("Peer")] == list(ENDPOINTS.values())
    assert listed.find(".//SPDPInterval").text == "1s"


@pytest.mark.parametrize(("change", "column", "said"), [
    ({"transport": "tcp"}, "transport", "over UDP"),
    ({"multicast": True}, "multicast", "choose the discovery mode with discovery="),
    ({"latency_test": True}, "latency_test", "not round trips"),
    ({"batch_size": 8}, "batch_size", "sends no data"),
    ({"pub_rate": 100}, "pub_rate", "sends no data"),
    ({"secure": True}, "secure", "without DDS Security"),
])
def test_what_a_discovery_test_cannot_honour_is_refused_with_the_reason(change, column, said):
    found = registry()["dds-discovery"].check(replace(BASE, **change))
    assert found is not None and found[0] == column and said in found[2]


def test_spread_puts_every_role_round_robin_over_the_workers():
    roles = [f"p{i}" for i in range(8)]
    assert place(roles, ["n1", "n2", "n3"], "spread") == {
        "p0": "n1", "p1": "n2", "p2": "n3", "p3": "n1", "p4": "n2", "p5": "n3", "p6": "n1",
        "p7": "n2"}
    assert list(place(roles, ["n1", "n2", "n3"], "cross-node").values()).count("n1") == 1


def test_the_schedule_refuses_a_mode_or_a_size_that_cannot_run(write_schedule):
    def error(text: str, **kw) -> str:
        with pytest.raises(ScheduleError) as info:
            schedule.load(write_schedule(text), **kw)
        return str(info.value)

    said = error(HEADER + "64,false,3,false,0,dds-discovery,cds\n")
    assert "column 'discovery'" in said and "has no discovery service" in said
    said = error(HEADER + "64,false,40,false,0,dds-discovery,peers\n",
                 limits=Limits(max_subscribers=32))
    assert "column 'numSubscribers'" in said and "at most 32" in said
    said = error(HEADER + "64,false,3,false,0,dds-discovery,multicast\n",
                 limits=Limits(no_multicast="its nodes run the Pi's own programs"))
    assert "cannot use multicast: its nodes run the Pi's own programs" in said
    [ok] = schedule.load(write_schedule(
        HEADER.strip() + ",placement\n64,false,15,false,0,dds-discovery,peers,spread\n"))
    assert ok.placement == "spread" and len(registry()["dds-discovery"].roles(ok)) == 16


def test_multicast_discovery_is_refused_where_the_datapath_drops_it_naming_what_works(
        write_schedule):
    tests = schedule.load(write_schedule(HEADER + "64,false,3,false,0,dds-discovery,"
                                                  "multicast\n"))
    with pytest.raises(ScheduleError, match="multicast discovery does not cross nodes on "
                       "this datapath; use discovery=peers"):
        expand(tests, ["flannel-vxlan"])
    assert [t.datapath for t in expand(tests, ["weave"])] == ["weave"]
    # Cilium drops multicast between two pods of one node too (its record, probed)
    same = replace(tests[0], datapath="cilium-native", placement="same-node")
    column, value, reason, fix = problem(same)
    assert (column, value) == ("discovery", "multicast") and "same node" in reason
    assert "discovery=peers" in fix
    assert problem(replace(same, datapath="flannel-vxlan")) is None
    assert discovery_of(replace(same, discovery=None)) == "peers"
    assert discovery_of(replace(same, discovery=None, datapath="flannel-vxlan")) == "multicast"


def _samples(node: str, points: list[tuple[float, float]]) -> pd.DataFrame:
    rows = []
    for t, value in points:  # the bytes split over rx and tx: the node's traffic is both
        rows += [{"node": node, "t": t, "metric": "node_rx_bytes", "value": value / 2},
                 {"node": node, "t": t, "metric": "node_tx_bytes", "value": value / 2},
                 {"node": node, "t": t, "metric": "node_rx_packets", "value": value / 100},
                 {"node": node, "t": t, "metric": "node_tx_packets", "value": 0.0}]
    return pd.DataFrame(rows)


def test_a_nodes_traffic_is_read_between_the_start_and_the_last_discovery():
    """By hand: 0 B at 0 s, 1,000 B at 1 s, 1,900 B at 10 s. Discovery until 0.5 s: 500 B,
    1,000 B/s. The steady window from 2.5 s (0.5 + 2 s), 5 s long: 1,150 to 1,650 B,
    100 B/s. A second node with twice the traffic: the mean of the two. Packets: one per
    100 B received."""
    one = [(0.0, 0.0), (1.0, 1000.0), (10.0, 1900.0)]
    two = [(t, 2 * v) for t, v in one]
    got = analysis._node_traffic(pd.concat([_samples("n1", one), _samples("n2", two)]),
                                 0.0, 0.5, 5.0)
    assert got["discovery_bytes"] == pytest.approx(750.0)
    assert got["discovery_bytes_per_s"] == pytest.approx(1500.0)
    assert got["steady_bytes_per_s"] == pytest.approx(150.0)
    assert got["discovery_packets_per_s"] == pytest.approx(15.0)  # 10 and 20 a second
    # a window the samples do not cover says so (NaN), never a guess
    late = analysis._node_traffic(_samples("n1", one), 0.0, 9.0, 5.0)
    assert np.isnan(late["steady_bytes_per_s"]) and late["discovery_bytes"] > 0


def test_the_answer_says_each_mode_side_by_side_and_no_verdict_word():
    tab = pd.DataFrame([
        {"datapath": "weave", "discovery": d, "participants": 16, "repeats": r, "failed": f,
         "time_s": t, "time_low": lo, "time_high": hi, "discovery_kB": 800.0,
         "steady_kBps": 23.5, "why_failed": w}
        for d, r, f, t, lo, hi, w in (
            ("multicast", 3, 0, 0.273, 0.2, 0.35, ""),
            ("peers", 1, 1, 1.84, float("nan"), float("nan"), "p3: not every peer matched"))])
    [line] = analysis.sentences(tab)
    assert line == ("discovery on weave, 16 participants: multicast 273 ms (200 ms to 350 ms, "
                    "3 repeats), 800 kB a node, then 23.5 kB/s steady; peers 1.84 s (1 repeat, "
                    "no interval), 800 kB a node, then 23.5 kB/s steady (1 of 2 repeats did "
                    "not match every peer: p3: not every peer matched)")
    for word in ("better", "worse", "within noise"):
        assert word not in line


def test_a_nodes_counters_are_rows_of_that_node_and_a_stray_file_is_left_out(tmp_path):
    from k8sdds import records

    (tmp_path / "p0.log").write_text((HERE / "p1-host-multicast-4.log").read_text())
    (tmp_path / "counters-node2.log").write_text((HERE / "counters-node2-head.log").read_text())
    (tmp_path / "counters-elsewhere.log").write_text("0.1 1 1 1 1\n0.2 2 2 2 2\n")
    test = replace(BASE, num_subscribers=0, number=1)
    parsed = records.parse_logs(test, tmp_path, ["p0"], parser.PARSER)
    dropped: list[str] = []
    rows = records.rows("r", "emulated", test, 1, {"p0": "node2"}, parsed, dropped=dropped)
    nodes = [r for r in rows if r["role"] == "node"]
    assert len(nodes) == 4 * 8 and {r["node"] for r in nodes} == {"node2"}
    assert dropped == ["counters-elsewhere.log: no role of the repeat ran on such a node; "
                       "left out"]


def test_where_multicast_arrived_is_a_fingerprint_field_compare_reads():
    from k8sdds import fingerprint

    def prints(arrived: bool) -> dict:
        return {"weave": {"node1": {"kernel": "6.1", "multicast": {
            "from": "node1", "between": "pods", "group": "239.255.0.1:7400",
            "arrived": {"node2": arrived, "node3": True}}}}}

    assert fingerprint.differences(prints(True), prints(False)) == [
        "weave node1 multicast to node2: arrived against lost"]
    [row] = fingerprint.rows(prints(False))
    assert row["multicast"] == "to node2 lost, node3 arrived (pods from node1)"
    assert fingerprint.rows({"host": {"node1": {"kernel": "6.1"}}})[0]["multicast"] == ""


def test_a_probe_says_how_far_multicast_reached_and_whether_a_record_disagrees():
    from k8sdds import model
    from k8sdds.testbed.multicast import MulticastProbe, record_says

    routed = MulticastProbe("node1", "pods", {"node2": False, "node3": False}, control=True)
    assert routed.said() == ("did not arrive at node2, node3 (pods, from node1, "
                             "239.255.0.1:7400; beside the sender: arrived)")
    assert routed.reach() == "same node" and not routed.crossed
    assert not routed.disagrees(model.datapath("flannel-vxlan"))
    assert routed.disagrees(model.datapath("weave"))  # weave's record: it crosses
    assert routed.disagrees(model.datapath("cilium-native"))  # Cilium's: not even beside
    half = MulticastProbe("node1", "pods", {"node2": True, "node3": False}, control=True)
    assert not half.crossed and half.said().startswith("arrived at node2; did not arrive at "
                                                       "node3")
    assert half.record() == {"from": "node1", "between": "pods", "group": "239.255.0.1:7400",
                             "arrived": {"node2": True, "node3": False}, "same_node": True}
    assert [record_says(model.datapath(n)) for n in ("host", "kube-router", "cilium-vxlan")] \
        == ["yes", "same node", "no"]
