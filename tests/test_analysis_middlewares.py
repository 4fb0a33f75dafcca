"""Middlewares side by side (analysis/middlewares.py): the line names, the table that keeps
each middleware apart on the payload sweep, and the sentences of the answer. Pure: tables
in; the real run of every middleware is in test_emulated.py."""

from __future__ import annotations

import pandas as pd

from k8sdds.analysis import middlewares
from k8sdds.results.schema import PARAMS

DEFAULTS = {"datapath": "flannel-vxlan", "path": "pod-pod-cross-node", "engine": "ddsperf",
            "transport": "udp", "data_len": 1024, "multicast": False, "num_subscribers": 1,
            "best_effort": False, "batch_size": 0, "latency_test": False,
            "placement": "cross-node", "secure": False, "streams": 1, "topology": "",
            "mqtt_qos": -1, "load": "", "load_len": 0}


def _row(**over) -> dict:
    return {**{p: DEFAULTS[p] for p in PARAMS}, **over}


def _thr(rows: list[tuple[dict, float]], half: float = 1.0, repeats: int = 3
         ) -> pd.DataFrame:
    """Throughput means over `repeats` repeats, each ± `half` (NaN: one repeat)."""
    return pd.DataFrame([{**_row(**over), "mean": mean, "ci_low": mean - half,
                          "ci_high": mean + half, "repeats": repeats} for over, mean in rows])


def _lat(rows: list[tuple[dict, float, float]], half: float = 1.0, repeats: int = 3
         ) -> pd.DataFrame:
    out = []
    for over, p50, p99 in rows:
        row = {**_row(latency_test=True, **over), "p50": p50, "p99": p99, "repeats": repeats}
        for name, value in (("p50", p50), ("p99", p99)):
            row |= {f"{name}_mean": value, f"{name}_ci_low": value - half,
                    f"{name}_ci_high": value + half}
        out.append(row)
    return pd.DataFrame(out)


def test_each_middleware_has_a_line_name_of_its_own():
    names = [middlewares.label(pd.Series(_row(**over))) for over in (
        {}, {"transport": "tcp"}, {"best_effort": True},
        {"engine": "zenoh", "transport": "tcp"},
        {"engine": "zenoh", "transport": "tcp", "topology": "routed"},
        {"engine": "mqtt", "transport": "tcp", "best_effort": True},
        {"engine": "mqtt", "transport": "tcp"},
        {"engine": "mqtt", "transport": "tcp", "mqtt_qos": 2})]
    assert names == ["ddsperf", "ddsperf tcp", "ddsperf best effort", "zenoh (peer)",
                     "zenoh (routed)", "mqtt QoS 0", "mqtt QoS 1", "mqtt QoS 2"]


ZENOH = {"engine": "zenoh", "transport": "tcp"}
ROUTED = {**ZENOH, "topology": "routed"}
MQTT = {"engine": "mqtt", "transport": "tcp"}


def test_the_table_keeps_the_middlewares_apart_and_leaves_out_the_network_engines():
    thr = _thr([({}, 250.0), (ZENOH, 900.0), (ROUTED, 600.0), (MQTT, 40.0),
                ({**MQTT, "mqtt_qos": 2}, 20.0), ({"engine": "iperf3", "transport": "tcp"},
                                                  2000.0),
                ({"data_len": 64}, 12.0), ({**ZENOH, "data_len": 64}, 30.0)])
    lat = _lat([({}, 105.0, 300.0), (ZENOH, 120.0, 900.0)])
    tab = middlewares.table(thr, lat)
    at = tab[tab.data_len == 1024].set_index("middleware")
    assert at.throughput_mbps.to_dict() == {"ddsperf": 250.0, "mqtt QoS 1": 40.0,
                                            "mqtt QoS 2": 20.0, "zenoh (peer)": 900.0,
                                            "zenoh (routed)": 600.0}
    assert at.loc["zenoh (peer)", "p99_us"] == 900.0 and pd.isna(at.loc["mqtt QoS 1",
                                                                          "p50_us"])
    assert set(tab.data_len) == {64, 1024}


def test_one_middleware_alone_gives_no_table():
    assert middlewares.table(_thr([({}, 250.0), ({"data_len": 64}, 12.0)]),
                             pd.DataFrame()).empty
    # one engine's reliability side by side (K8sDDS's schedule) is not a middleware comparison
    assert middlewares.table(_thr([({}, 140.0), ({"best_effort": True}, 166.0)]),
                             pd.DataFrame()).empty
    mqtt = middlewares.table(_thr([(MQTT, 40.0), ({**MQTT, "best_effort": True}, 160.0),
                                   ({**ZENOH, "data_len": 64}, 30.0), ({"data_len": 64}, 12.0)]),
                             pd.DataFrame())
    assert set(mqtt.middleware) == {"mqtt QoS 0", "mqtt QoS 1", "zenoh (peer)", "ddsperf"}
    # at 1 KiB only mqtt measured: no line for it; at 64 B two engines: one line
    assert [line.split(":")[0] for line in middlewares.sentences(mqtt)] == [
        "flannel-vxlan, 64 B"]


def test_the_broker_and_router_nodes_come_from_the_placements():
    manifest = {"tests": [{"number": 1, "engine": "mqtt", "transport": "tcp",
                           "best_effort": False, "mqtt_qos": -1, "topology": ""},
                          {"number": 2, "engine": "zenoh", "transport": "tcp",
                           "best_effort": False, "topology": "routed"},  # no mqtt_qos: older
                          {"number": 3, "engine": "zenoh", "transport": "tcp",
                           "best_effort": False, "mqtt_qos": -1, "topology": "peer"}],
                "repeats": {"test-1/rep-1": {"placement": {"pub": "n1", "broker": "n0"}},
                            "test-1/rep-2": {"placement": {"pub": "n1", "broker": "n3"}},
                            "test-2/rep-1": {"placement": {"pub": "n1", "router": "n0"}},
                            "test-3/rep-1": {"placement": {"pub": "n1", "sub0": "n2"}}}}
    assert middlewares.hubs({"r": manifest}) == {"mqtt QoS 1": "n0/n3", "zenoh (routed)": "n0"}
    tab = middlewares.table(_thr([(ZENOH, 900.0), (ROUTED, 600.0), (MQTT, 40.0)]),
                            pd.DataFrame(), middlewares.hubs({"r": manifest}))
    assert middlewares.sentences(tab) == [
        "flannel-vxlan, 1 KiB: zenoh (peer) moves the most (900 ± 1 Mb/s; zenoh (routed) via "
        "n0 600 ± 1, mqtt QoS 1 via n0/n3 40 ± 1)."]


def test_the_answer_says_which_moves_the_most_and_which_answers_first():
    tab = middlewares.table(_thr([({}, 250.0), (ZENOH, 900.0), (MQTT, 40.0)]),
                            _lat([({}, 105.0, 300.0), (ZENOH, 120.0, 900.0)]))
    assert middlewares.sentences(tab) == [
        "flannel-vxlan, 1 KiB: zenoh (peer) moves the most (900 ± 1 Mb/s; ddsperf 250 ± 1, "
        "mqtt QoS 1 40 ± 1); ddsperf answers first (105 ± 1 µs p50; zenoh (peer) 120 ± 1)."]


def test_middlewares_whose_intervals_overlap_are_within_noise():
    """ddsperf 105 ± 10 µs against zenoh 110 ± 10: neither answers first."""
    tab = middlewares.table(_thr([({}, 250.0), (ZENOH, 900.0)], half=5.0),
                            _lat([({}, 105.0, 300.0), (ZENOH, 110.0, 900.0)], half=10.0))
    assert middlewares.sentences(tab) == [
        "flannel-vxlan, 1 KiB: zenoh (peer) moves the most (900 ± 5 Mb/s; ddsperf 250 ± 5); "
        "p50 round trip within noise between ddsperf and zenoh (peer) (105 ± 10 µs p50; "
        "zenoh (peer) 110 ± 10)."]


def test_one_repeat_gives_middleware_figures_and_no_ranking_word():
    nan = float("nan")
    tab = middlewares.table(_thr([({}, 250.0), (ZENOH, 900.0)], half=nan, repeats=1),
                            _lat([({}, 105.0, 300.0), (ZENOH, 120.0, 900.0)], half=nan,
                                 repeats=1))
    [line] = middlewares.sentences(tab)
    assert line == ("flannel-vxlan, 1 KiB: throughput (no verdict, one repeat): zenoh (peer) "
                    "900 Mb/s, ddsperf 250; p50 round trip (no verdict, one repeat): ddsperf "
                    "105 µs p50, zenoh (peer) 120.")
    assert "most" not in line and "first" not in line
