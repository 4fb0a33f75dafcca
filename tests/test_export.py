"""`k8sdds results --format github-bigger|github-smaller|openmetrics` on runs of real ddsperf
logs: github-action-benchmark's custom JSON checked against the fields its README documents,
the OpenMetrics text read back by prometheus-client's own OpenMetrics parser."""

from __future__ import annotations

import json
import math

import pytest

from .cli_support import invoke
from .conftest import run_with_throughput

# github-action-benchmark's README, "Examples" > customBiggerIsBetter / customSmallerIsBetter:
# each entry has name, unit and value; range and extra are optional strings
REQUIRED = {"name": str, "unit": str, "value": (int, float)}
OPTIONAL = {"range": str, "extra": str}


@pytest.fixture
def run(tmp_path):
    """Subscriber throughput 100, 101, 99 Mb/s over three repeats: mean 100, and a 95 %
    interval of ± t(0.975, 2) * 1 / sqrt(3) = ± 2.484."""
    return run_with_throughput(tmp_path, "a", [100.0, 101.0, 99.0])


def _export(run, fmt: str) -> str:
    done = invoke("results", str(run), "--format", fmt)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _entries(text: str) -> list[dict]:
    entries = json.loads(text)
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert set(entry) <= set(REQUIRED) | set(OPTIONAL), entry
        for key, kind in REQUIRED.items():
            assert isinstance(entry[key], kind), (key, entry)
        for key, kind in OPTIONAL.items():
            assert key not in entry or isinstance(entry[key], kind), (key, entry)
    return entries


def test_github_bigger_has_throughput_with_its_interval_and_no_latency(run):
    entries = _entries(_export(run, "github-bigger"))
    names = [e["name"] for e in entries]
    assert "flannel-hostgw ddsperf udp 1024 B (pod-pod-cross-node): throughput_mbps" in names
    [thr] = [e for e in entries if e["name"].endswith(": throughput_mbps")]
    assert thr["unit"] == "Mb/s" and thr["value"] == pytest.approx(100)
    assert thr["range"].startswith("± ") and float(thr["range"][2:]) == pytest.approx(
        2.484, abs=0.001)
    assert "3 repeats" in thr["extra"]
    assert not any("latency" in n or n.endswith(": lost") for n in names)


def test_github_smaller_has_latency_and_loss_and_no_throughput(run):
    entries = _entries(_export(run, "github-smaller"))
    names = [e["name"] for e in entries]
    # the latency test of the fixture: 256 B round trips on flannel-vxlan
    assert "flannel-vxlan ddsperf udp 256 B latency_test (pod-pod-cross-node): latency_us_p50" \
        in names
    assert any(n.endswith(": lost") for n in names)
    assert not any(n.endswith((": throughput_mbps", ": samples_per_s")) for n in names)
    [p50] = [e for e in entries if e["name"].endswith("latency_us_p50")]
    assert p50["unit"] == "us round trip" and p50["value"] > 0  # one latency definition


def test_openmetrics_reads_back_through_prometheus_clients_parser(run):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    text = _export(run, "openmetrics")
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"k8sdds_cell_mean", "k8sdds_cell_ci_low", "k8sdds_cell_ci_high",
            "k8sdds_cell_repeats", "k8sdds_run"} <= set(families)

    def sample(family: str, metric: str) -> float:
        [s] = [s for s in families[family].samples if s.labels["metric"] == metric
               and s.labels["datapath"] == "flannel-hostgw"]
        return s.value

    assert sample("k8sdds_cell_mean", "throughput_mbps") == pytest.approx(100)
    assert sample("k8sdds_cell_ci_low", "throughput_mbps") == pytest.approx(100 - 2.484,
                                                                           abs=0.001)
    assert sample("k8sdds_cell_ci_high", "throughput_mbps") == pytest.approx(100 + 2.484,
                                                                            abs=0.001)
    assert sample("k8sdds_cell_repeats", "throughput_mbps") == 3
    # bounded labels: no run id or time on a cell's series; the run is one info series
    for family in ("k8sdds_cell_mean", "k8sdds_cell_repeats"):
        for s in families[family].samples:
            assert set(s.labels) == {"test", "datapath", "engine", "transport",
                                     "payload_bytes", "metric", "unit"}
            assert not math.isnan(s.value)
    [info] = families["k8sdds_run"].samples
    assert info.labels == {"run_id": "20260101-000000-a", "backend": "emulated"}


def test_one_repeat_has_no_interval_in_either_format(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    one = run_with_throughput(tmp_path, "b", [100.0])
    [thr] = [e for e in _entries(_export(one, "github-bigger"))
             if e["name"].endswith(": throughput_mbps")]
    assert "range" not in thr and thr["extra"].startswith("1 repeat;")
    families = {f.name: f for f in text_string_to_metric_families(_export(one, "openmetrics"))}
    assert families["k8sdds_cell_ci_low"].samples == []
    assert [s.value for s in families["k8sdds_cell_repeats"].samples
            if s.labels["metric"] == "throughput_mbps"] == [1]


def test_an_unknown_format_names_the_allowed_ones(run):
    done = invoke("results", str(run), "--format", "junit")
    assert done.returncode == 2
    assert "github-bigger" in done.stderr and "openmetrics" in done.stderr


def test_a_label_from_a_hostile_results_table_is_printable_and_bounded():
    """A results table is evidence read from disk: a path or datapath holding a line end,
    quotes and 5,000 characters reaches /metrics as one printable label of at most 200
    characters, and the text reads back through prometheus-client's own parser."""
    import pandas as pd
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from k8sdds.analysis import cells as cell_table
    from k8sdds.analysis import export

    hostile = 'pod"\n} k8sdds_evil 1\n# EOF\n' + "x" * 5000
    cell = {param: default for param, default in cell_table.DEFAULTS.items()}
    cell |= {"datapath": 'weave"\nevil', "engine": "ddsperf", "transport": "udp",
             "data_len": 1024, "path": hostile, "metric": "throughput_mbps", "unit": "Mb/s",
             "mean": 100.0, "ci_low": 99.0, "ci_high": 101.0, "repeats": 3,
             "run_id": "20260101-000000-a"}
    for param in cell_table.SHOWN:
        cell.setdefault(param, "")
    text = export.openmetrics(pd.DataFrame([cell]), [("20260101-000000-a", "emulated\n")])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "k8sdds_evil" not in families
    [mean] = families["k8sdds_cell_mean"].samples
    assert mean.value == 100.0
    for value in (*mean.labels.values(), *families["k8sdds_run"].samples[0].labels.values()):
        assert value.isprintable() and len(value) <= 200, value
    assert mean.labels["datapath"] == 'weave"?evil'
    assert mean.labels["test"].endswith("...") and len(mean.labels["test"]) == 200
