"""benchmarks/fidelity_cells.py: the fidelity table's cells, ratios, rounds and count."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import fidelity_cells as fc  # noqa: E402

from k8sdds.analysis import published  # noqa: E402


def _row(datapath, data_len, value, transport="udp", secure=False, role="sub0", **over):
    row = {"kind": "summary", "metric": "throughput_mbps", "role": role,
           "num_subscribers": 1, "best_effort": False, "multicast": False, "batch_size": 0,
           "latency_test": False, "transport": transport, "secure": secure,
           "datapath": datapath, "data_len": data_len, "value": value}
    return {**row, **over}


def test_cells_keep_one_reliable_unicast_subscriber_and_divide_by_udp_host():
    rows = [_row("host", 1024, 80.0), _row("host", 1024, 90.0),  # two sweeps: median 85
            _row("flannel-vxlan", 1024, 42.5),
            _row("flannel-vxlan", 1024, 10.0, best_effort=True),  # not compared
            _row("flannel-vxlan", 1024, 10.0, num_subscribers=2),
            _row("flannel-vxlan", 1024, 10.0, role="pub"),
            _row("flannel-vxlan", 1024, 10.0, metric="latency_us_p50"),
            _row("host", 1024, 68.0, transport="tcp"),
            _row("weave", 1024, 17.0, transport="tcp", secure="true"),  # text, as a CSV reads
            _row("weave", 4096, 17.0, transport="tls"),  # TLS only at 1 KiB and 16 KiB
            _row("weave", 1024, 9.0, transport="dtls")]  # not a transport of the table
    cells = fc.ratios(fc.throughput(pd.DataFrame(rows)))
    got = {(r.transport, r.datapath, r.data_len): round(r.ratio, 3)
           for r in cells.itertuples()}
    assert got == {("UDP", "host", 1024): 1.0, ("UDP", "flannel-vxlan", 1024): 0.5,
                   ("TCP", "host", 1024): 0.8, ("DDS Security/TCP", "weave", 1024): 0.2}


def test_rounds_give_median_and_range_and_the_count_says_what_is_within():
    tree = pd.DataFrame([
        {"transport": "UDP", "datapath": "host", "data_len": 1024, "ratio": 1.0},
        {"transport": "UDP", "datapath": "flannel-vxlan", "data_len": 1024, "ratio": 0.77},
        {"transport": "UDP", "datapath": "kube-router", "data_len": 1024, "ratio": 0.78},
        {"transport": "TCP", "datapath": "host", "data_len": 1024, "ratio": 0.78}])
    rounds = [pd.DataFrame([
        {"transport": "UDP", "datapath": "flannel-vxlan", "data_len": 1024, "ratio": v},
        {"transport": "UDP", "datapath": "kube-router", "data_len": 1024, "ratio": k},
        {"transport": "UDP", "datapath": "host", "data_len": 1024, "ratio": 1.0}])
        for v, k in ((0.60, 0.95), (0.70, 0.96), (0.74, 0.97))]
    table = fc.compare(tree, fc.over_rounds(rounds))
    assert list(table.datapath) == ["kube-router", "flannel-vxlan", "host"]  # no UDP host
    vx = table[table.datapath == "flannel-vxlan"].iloc[0]
    assert (vx["median"], vx.low, vx.high, vx.rounds) == (0.70, 0.60, 0.74, 3)
    assert vx.difference == pytest.approx(-0.07) and bool(vx.within)
    assert vx.half_range == pytest.approx(0.07)
    kr = table[table.datapath == "kube-router"].iloc[0]
    assert not kr.within  # 0.96 against 0.78
    tcp = table[table.transport == "TCP"].iloc[0]
    assert pd.isna(tcp["median"])  # the tree has it; no round measured it
    assert fc.count_line(table) == (
        "within ±0.10: 1 of 2 cells; UDP 1 of 2 (1 of 1 without kube-router); other "
        "transports at 1 KiB 0 of 0; range over rounds within ±0.05: 1 of 2")


def test_the_cell_a_calibration_was_fitted_on_is_named_and_counted_in_no_score():
    tree = pd.DataFrame([
        {"transport": "UDP", "datapath": "host", "data_len": 1024, "ratio": 1.0},
        {"transport": "UDP", "datapath": "flannel-vxlan", "data_len": 1024, "ratio": 0.77},
        {"transport": "UDP", "datapath": "weave", "data_len": 1024, "ratio": 0.54}])
    rounds = [pd.DataFrame([
        {"transport": "UDP", "datapath": "flannel-vxlan", "data_len": 1024, "ratio": 0.78},
        {"transport": "UDP", "datapath": "weave", "data_len": 1024, "ratio": 0.72},
        {"transport": "UDP", "datapath": "host", "data_len": 1024, "ratio": 1.0}])] * 3
    table = fc.compare(tree, fc.over_rounds(rounds),
                       frozenset({("UDP", "flannel-vxlan", 1024)}))
    assert table.set_index("datapath").fitted.to_dict() == {"flannel-vxlan": True,
                                                            "weave": False}
    assert fc.count_line(table) == (
        "within ±0.10: 0 of 1 cells; UDP 0 of 1 (0 of 1 without kube-router); other "
        "transports at 1 KiB 0 of 0; range over rounds within ±0.05: 1 of 1; not counted, "
        "fitted on: UDP flannel-vxlan 1024 B")
    known = fc.known(pd.DataFrame(columns=fc.KNOWN), table, "rpi3b-armhf", 0.356,
                     "2026-12-03").set_index("datapath")
    assert known.fitted.to_dict() == {"flannel-vxlan": True, "host": False, "weave": False}


def test_the_shipped_tree_figures_are_the_tables_cells():
    """k8sdds/analysis/published.csv, written by `fidelity.py --tree Data --write-tree`: every
    cell is one the table compares, UDP host is 1 at each payload, and the study's headline
    holds (encryption costs most at 1 KiB)."""
    tree = pd.read_csv(published.DATA)
    assert all(fc.wanted(t, n) for t, n in zip(tree.transport, tree.data_len, strict=True))
    host = tree[(tree.transport == "UDP") & (tree.datapath == "host")]
    assert sorted(host.data_len) == list(fc.PAYLOADS) and set(host.ratio) == {1.0}
    udp = tree[(tree.transport == "UDP")]
    assert len(udp) == 30 and len(tree) == 66
    kib = udp[udp.data_len == 1024].set_index("datapath").ratio
    assert kib.idxmin() == "weave-encrypted" and kib.drop("host").idxmax() == "flannel-hostgw"


def test_the_tree_s_publisher_cpu_a_message_is_perftest_s_share_of_four_cores_over_its_rate():
    """The study's flannel-vxlan-udp test-2 at 1 KiB: Perftest's publisher printed CPU 27.2 %
    (of the Pi's four cores) and its subscriber 7,738 packets a second: 0.272 x 4 / 7738 s =
    140.6 us a message. k8sdds' own figure is taken as it is."""
    rows = [_row("flannel-vxlan", 1024, 27.2, role="pub", metric="cpu_pct"),
            _row("flannel-vxlan", 1024, 7738.0, metric="samples_per_s"),
            _row("flannel-vxlan", 1024, 63.4)]
    tree = fc.pub_cpu(pd.DataFrame(rows), fc.PI_CORES)
    assert tree.pub_us.iloc[0] == pytest.approx(140.6, abs=0.05)
    ours = fc.pub_cpu(pd.DataFrame([_row("host", 1024, 9.5, role="pub",
                                         metric="cpu_per_message_us")]))
    assert list(ours.pub_us) == [9.5]


def test_the_shipped_tree_has_the_pis_publisher_cpu_a_message():
    """published.csv's pub_us at UDP 1 KiB, against the study's own logs read by hand
    (Data/throughput-test/<path>-udp, the last `Length:` line of each side's log): host 109.1,
    flannel-hostgw 119.4, kube-router 143.1, flannel-vxlan 140.6, weave 199.2 us."""
    cells = published.cells()
    got = {d: cells[("UDP", d, 1024)].pub_us for d in
           ("host", "flannel-hostgw", "kube-router", "flannel-vxlan", "weave")}
    assert got == pytest.approx({"host": 109.1, "flannel-hostgw": 119.4, "kube-router": 143.1,
                                 "flannel-vxlan": 140.6, "weave": 199.2}, abs=0.05)


def test_the_shipped_tree_has_the_pis_round_trip_median():
    """published.csv's rtt_p50_us at UDP 64 B and 1 KiB against the study's latency logs read
    by hand (Data/latency-test/<path>-udp, the last `Length:` line: Perftest prints half the
    round trip, p50 host 484 and 731 us, flannel-vxlan 694 and 987, weave 768 and 1047):
    k8sdds keeps the whole round trip."""
    cells = published.cells()
    got = {(d, n): cells[("UDP", d, n)].rtt_p50_us for d in ("host", "flannel-vxlan", "weave")
           for n in (64, 1024)}
    assert got == {("host", 64): 968, ("host", 1024): 1462, ("flannel-vxlan", 64): 1388,
                   ("flannel-vxlan", 1024): 1974, ("weave", 64): 1536, ("weave", 1024): 2094}
    rows = [_row("weave", 64, 1536.0, role="pub", metric="latency_us_p50", latency_test=True),
            _row("weave", 64, 999.0, role="pub", metric="latency_us_p50")]  # a throughput
    assert fc.round_trip(pd.DataFrame(rows)).rtt_p50_us.tolist() == [1536.0]


def test_a_sittings_cells_replace_their_own_and_carry_its_budget_and_date():
    """A UDP-only sitting at 0.07 CPU replaces the UDP cells it measured (host 1 by rule) and
    leaves a TLS cell of an earlier sitting as it was, with that sitting's budget and date."""
    existing = pd.DataFrame([
        {"profile": "rpi3b", "transport": "UDP", "datapath": "host", "data_len": 1024,
         "emulated": 1.0, "cpu": 0.1888, "measured": "2026-11-25"},
        {"profile": "rpi3b", "transport": "UDP", "datapath": "weave", "data_len": 1024,
         "emulated": 0.7, "cpu": 0.1888, "measured": "2026-11-25"},
        {"profile": "rpi3b", "transport": "TLS", "datapath": "weave", "data_len": 1024,
         "emulated": 0.19, "cpu": 0.1888, "measured": "2026-11-25"}])
    table = pd.DataFrame([{"transport": "UDP", "datapath": "weave", "data_len": 1024,
                           "median": 0.5612},
                          {"transport": "UDP", "datapath": "kube-router", "data_len": 1024,
                           "median": float("nan")}])  # the tree has it, not measured
    out = fc.known(existing, table, "rpi3b", 0.07, "2026-11-27").set_index(
        ["transport", "datapath"])
    assert out.loc[("UDP", "weave"), ["emulated", "cpu", "measured"]].tolist() == [
        0.56, 0.07, "2026-11-27"]
    assert out.loc[("UDP", "host"), ["emulated", "cpu"]].tolist() == [1.0, 0.07]
    assert out.loc[("TLS", "weave"), ["emulated", "cpu", "measured"]].tolist() == [
        0.19, 0.1888, "2026-11-25"]
    assert ("UDP", "kube-router") not in out.index
