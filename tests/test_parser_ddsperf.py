"""The ddsperf parser, on output captured from real ddsperf 0.10.2 runs (tests/fixtures/ddsperf).

throughput-*-hostgw-1k.log, latency-*-vxlan-256.log: a k8sdds run on the emulated cluster
(cross-node pods). sub-no-match.log: a subscriber that found no publisher.
latency-ping-two-pongs-loopback.log: one ping, two pongs, in one namespace over loopback.
throughput-sub-besteffort-loss-extended.log: best effort over loopback with -X, with loss.
"""

from __future__ import annotations

import re

import pytest

from k8sdds.parsers.ddsperf import parse, weighted_median

from .conftest import FIXTURES
from .parsers_support import PARSERS

D = FIXTURES / "ddsperf"


def _read(name: str) -> str:
    return (D / name).read_text()


def _sub_lines(text: str) -> list[tuple[float, float, int]]:
    """(Mb/s, kS/s, delta) of each interval line, read independently of the parser."""
    out = []
    for line in text.splitlines():
        m = re.search(r"delta (\d+) lost \d+ rate ([\d.]+) kS/s ([\d.]+) Mb/s", line)
        if m:
            out.append((float(m[3]), float(m[2]), int(m[1])))
    return out


def test_registry_points_at_the_parser():
    assert PARSERS["ddsperf"] is parse


def test_throughput_summary_is_mean_of_steady_intervals():
    text = _read("throughput-sub-hostgw-1k.log")
    result = parse(text, "sub0", latency_test=False)
    assert result.failure is None
    lines = _sub_lines(text)
    assert len(lines) >= 3
    steady = [r for r in lines if r[2] > 0][1:-1]
    expected = sum(r[0] for r in steady) / len(steady)
    assert result.summary("throughput_mbps") == pytest.approx(expected)
    assert result.summary("samples_per_s") == pytest.approx(
        sum(r[1] for r in steady) * 1000 / len(steady))
    assert result.summary("intervals") == len(steady)
    assert result.summary("lost") == 0
    samples = [v for v in result.values if v.kind == "sample" and v.metric == "throughput_mbps"]
    assert [v.value for v in samples] == [r[0] for r in lines]
    assert samples[0].t == 1.0 and samples[1].t == 2.0


def test_best_effort_loss_is_counted():
    result = parse(_read("throughput-sub-besteffort-loss-extended.log"), "sub0", False)
    assert result.summary("lost") == 174512  # `total ... lost N` of the last line
    lost_samples = [v.value for v in result.values if v.kind == "sample" and v.metric == "lost"]
    assert lost_samples == [71682, 61451, 41379]


def test_publisher_rate_and_resources():
    result = parse(_read("throughput-pub-hostgw-1k.log"), "pub", False)
    assert result.failure is None
    rates = [v.value for v in result.values if v.kind == "sample" and v.metric == "samples_per_s"]
    assert len(rates) >= 3 and all(r > 1000 for r in rates)
    assert result.summary("samples_per_s") == pytest.approx(sum(rates[1:-1]) / len(rates[1:-1]))
    assert result.summary("rss_mb") > 1
    assert result.summary("cpu_pct") > 0


def test_latency_summary_never_averages_percentiles():
    text = _read("latency-ping-vxlan-256.log")
    result = parse(text, "pub", latency_test=True)
    assert result.failure is None
    # ddsperf prints half the round trip; k8sdds stores the round trip (x2)
    rows = [tuple(float(x) * (1 if i == 6 else 2) for i, x in enumerate(m)) for m in re.findall(
        r"mean ([\d.]+)us min ([\d.]+)us 50% ([\d.]+)us 90% ([\d.]+)us 99% ([\d.]+)us "
        r"max ([\d.]+)us cnt (\d+)", text)]
    assert len(rows) >= 2
    total = sum(r[6] for r in rows)
    assert result.summary("roundtrips") == total
    assert result.summary("latency_us_mean") == pytest.approx(
        sum(r[0] * r[6] for r in rows) / total)
    assert result.summary("latency_us_min") == min(r[1] for r in rows)
    assert result.summary("latency_us_max") == max(r[5] for r in rows)
    # each percentile is one of the printed interval values, not an average of them
    assert result.summary("latency_us_p50") in [r[2] for r in rows]
    assert result.summary("latency_us_p99") in [r[4] for r in rows]
    p = [result.summary(f"latency_us_{k}") for k in ("min", "p50", "p90", "p99", "max")]
    assert p == sorted(p)


def test_latency_with_two_pongs_uses_every_pong_line():
    result = parse(_read("latency-ping-two-pongs-loopback.log"), "pub", latency_test=True)
    assert result.summary("roundtrips") == 7087 * 2 + 7725 * 2
    assert result.summary("latency_us_min") == 2 * 15.043  # printed halves, stored doubled
    assert result.summary("latency_us_max") == 2 * 1640.137


def test_pong_side_measures_nothing_and_is_not_a_failure():
    result = parse(_read("latency-pong-vxlan-256.log"), "sub0", latency_test=True)
    assert result.failure is None
    assert not [v for v in result.values if v.metric.startswith("latency")]


def test_no_match_is_a_failure_with_the_reason():
    result = parse(_read("sub-no-match.log"), "sub0", latency_test=False)
    assert result.failure == "too few matching participants (0)"
    assert result.summary("throughput_mbps") is None  # never a zero


@pytest.mark.parametrize("text", ["", "garbage\n\x00\xff", "[1] 1.000  size 1024 total"])
def test_empty_or_garbage_output_is_a_failure(text):
    result = parse(text, "sub0", latency_test=False)
    assert result.failure and "no data received" in result.failure
    assert result.summary("throughput_mbps") is None


def test_latency_without_lines_is_a_failure():
    assert "no round trips" in parse("", "pub", latency_test=True).failure


def test_weighted_median():
    assert weighted_median([(10.0, 1), (20.0, 1), (30.0, 1)]) == 20.0
    assert weighted_median([(10.0, 1), (20.0, 1), (30.0, 10)]) == 30.0
    assert weighted_median([(5.0, 3), (100.0, 1)]) == 5.0
