"""How k8sdds' own middleware clients stand against each middleware's reference tool
(analysis/references.csv, from benchmarks/reference_tools.py), and the report's paragraph
that shows it."""

from __future__ import annotations

import pandas as pd

from k8sdds.analysis import references, report

# the middleware lines the report draws for Zenoh and MQTT (middlewares.label)
LINES = {"zenoh (peer)", "zenoh (routed)", "mqtt QoS 0", "mqtt QoS 1"}
TOOLS = {"z_pub_thr/z_sub_thr", "z_ping/z_pong", "mosquitto_pub/mosquitto_sub"}


def test_every_row_is_a_measurement_of_a_line_the_report_draws():
    rows = references.rows()
    assert {r.middleware for r in rows} == LINES
    for r in rows:
        assert r.metric in ("throughput_mbps", "latency_us_p50") and r.tool in TOOLS
        assert r.data_len in (64, 1024, 16384) and r.pairs >= 5
        assert r.k8sdds > 0 and r.reference > 0 and 0 <= r.half < 1
        assert r.measured.startswith("2026-") and "host datapath" in r.measured
    # each line at each payload: throughput, and Zenoh's round trip too
    for line in LINES:
        for size in (64, 1024, 16384):
            metrics = {r.metric for r in rows if r.middleware == line and r.data_len == size}
            assert metrics == ({"throughput_mbps", "latency_us_p50"}
                               if line.startswith("zenoh") else {"throughput_mbps"})


def test_the_report_shows_the_rows_of_the_middlewares_it_draws():
    mw = pd.DataFrame({"middleware": ["ddsperf", "zenoh (peer)"]})
    html = report._references(mw)
    assert "Against each middleware's own tools" in html
    assert html.count("<td>zenoh (peer)</td>") == 6  # 3 payloads x 2 metrics
    assert "z_ping/z_pong" in html and "mosquitto_pub" not in html
    assert report._references(pd.DataFrame({"middleware": ["ddsperf"]})) == ""
    assert report._references(pd.DataFrame()) == ""
