"""One latency definition: every stored `latency_us_*` is one round trip, whatever the engine
printed. Each engine's factor is checked three ways from outside k8sdds' code: the line of the
program's own source that sets what it prints (read in that source), real logs of real runs
(the round trips an interval counted times their mean round trip come to the interval's
length, one ping in flight), and old run directories read with the right factor. The live
runs of every engine are checked in the tests that make them (`latency_identity` below):
test_analysis_emulated (ddsperf), test_emulated (Zenoh peer and routed, MQTT, ping, qperf),
test_perftest_cyclone (Perftest on Cyclone)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest

from k8sdds.results import upgrade

from .conftest import FIXTURES
from .parsers_support import PARSERS, PRINTED

ROOT = Path(__file__).parent.parent

# Cyclone DDS 0.10.2 (the version of Debian's cyclonedds-tools here) as the crate `cyclors`
# 0.1.7 vendors it, whole: Debian's mirror serves no sources here, crates.io does
CYCLORS = ("https://static.crates.io/crates/cyclors/cyclors-0.1.7.crate",
           "cyclors-0.1.7/cyclonedds/",
           "f8cb4a24704f4efe7758a6233f889a0099a308e10dbe7427f6960a84c500ec02")


def _line(text: str, line: str) -> bool:
    """`line` is one of the lines of `text`, whitespace aside."""
    want = " ".join(line.split())
    return any(" ".join(have.split()) == want for have in text.splitlines())


# ---- the stored figure is the printed one times the program's factor -----------------

def _printed_ddsperf_rows(text: str) -> list[tuple[float, float, float]]:
    """(t, printed mean, cnt) of each latency interval line (read here, not by the parser)."""
    import re

    return [(float(t), float(mean), float(cnt)) for t, mean, cnt in re.findall(
        r"^\[\d+\]\s+([\d.]+)\s+.*?mean ([\d.]+)us .* cnt (\d+)$", text, re.M)]


@pytest.mark.parametrize("engine, log, factor", [
    ("ddsperf", "ddsperf/latency-ping-vxlan-256.log", 2.0),  # half printed
    ("zenoh", "zenoh/ping-peer-64.log", 1.0),  # whole printed
    ("zenoh", "zenoh/ping-routed-64.log", 1.0),
    ("mqtt", "mqtt/ping-qos0-64.log", 1.0),
])
def test_each_interval_of_a_real_run_holds_its_round_trips(engine, log, factor):
    """Real logs: ping-pong with one ping in flight, so an interval of about 1 s holds `cnt`
    round trips: cnt x (printed mean x factor) is 1 s, and the parser stores that round trip."""
    text = (FIXTURES / log).read_text()
    rows = _printed_ddsperf_rows(text)
    assert len(rows) >= 3
    for (t0, _, _), (t1, mean, cnt) in zip(rows, rows[1:], strict=False):
        assert cnt * mean * factor / 1e6 == pytest.approx(t1 - t0, rel=0.10)
    parsed = PARSERS[engine](text, "pub", True)
    stored = [v.value for v in parsed.values if v.kind == "sample"
              and v.metric == "latency_us_mean"]
    assert stored == pytest.approx([m * factor for _, m, _ in rows])
    assert parsed.summary("latency_us_mean") == pytest.approx(
        sum(m * c for _, m, c in rows) / sum(c for *_, c in rows) * factor)


def test_qperf_half_round_trip_is_doubled():
    """qperf's `latency` is the time over the messages both ends received (`msg_rate` counts
    both): half a round trip. Real output: 7.08 us, 141 K msg/s, so 70.5 K round trips/s of
    14.16 us fill the second."""
    parsed = PARSERS["qperf"]((FIXTURES / "network/qperf-v-udp_lat.log").read_text(),
                              "client", True)
    assert parsed.summary("latency_us_mean") == pytest.approx(2 * 7.08)
    assert parsed.summary("samples_per_s") / 2 * parsed.summary("latency_us_mean") / 1e6 \
        == pytest.approx(1.0, rel=0.01)


def test_perftest_one_way_is_doubled_and_its_pongs_counted():
    """The K8sDDS study's own log (RTI Perftest 3.1.0): its summary line's one-way figures, as
    printed, doubled; one interval line a pong."""
    text = (FIXTURES / "rtiperftest/csv-latency-pub-tls.log").read_text()
    parsed = PARSERS["rtiperftest"](text, "pub", True)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("One-way Latency Summary"))
    summary = dict(zip([h.strip() for h in lines[head + 1].split(",")],
                       [float(x) for x in lines[head + 2].split(",")], strict=False))
    assert parsed.summary("latency_us_mean") == pytest.approx(2 * summary["Ave (us)"])
    assert parsed.summary("latency_us_p50") == pytest.approx(2 * summary["50% (us)"])
    assert parsed.summary("latency_us_p99") == pytest.approx(2 * summary["99% (us)"])
    # Perftest's design document's sample: an interval line per pong, its first figure that
    # pong's one-way latency
    parsed = PARSERS["rtiperftest"](
        (FIXTURES / "rtiperftest/doc-legacy-intervals-pub.log").read_text(), "pub", True)
    assert parsed.summary("roundtrips") == 3
    [pongs] = [c for c in parsed.columns if c.metric == "latency_us"]
    assert pongs.values.tolist() == [2 * 69, 2 * 92, 2 * 47]
    assert parsed.summary("latency_us_mean") == 2 * 126


def test_every_engine_with_a_latency_has_its_definition():
    from k8sdds import engines

    engines = engines.registry()
    measured = {n for n, e in engines.items() if e.parser.printed is not None}
    # iperf3 measures no latency, dds-discovery and zenoh-discovery discovery
    assert set(engines) - measured == {"iperf3", "dds-discovery", "zenoh-discovery"}


# ---- the line of each program's own source -------------------------------------------

def _cyclone_source(path: str) -> str:
    """A file of Cyclone DDS 0.10.2's source, from the cyclors crate (cached)."""
    url, prefix, sha256 = CYCLORS
    cache = Path(os.environ.get("K8SDDS_CACHE", "/var/cache/k8sdds")) / "sources"
    crate = cache / url.rsplit("/", 1)[1]
    if not crate.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=60) as got:  # noqa: S310 - a fixed https URL
            data = got.read()
        assert hashlib.sha256(data).hexdigest() == sha256, "cyclors 0.1.7 changed"
        crate.with_suffix(".part").write_bytes(data)
        crate.with_suffix(".part").rename(crate)
    with tarfile.open(crate) as tar:
        return tar.extractfile(prefix + path).read().decode()



@pytest.mark.sources
def test_ddsperf_halves_the_round_trip_in_its_own_source():
    """Cyclone DDS 0.10.2, the release Debian's ddsperf is built from: process_pong stores
    (tnow - source_timestamp) / 2 as the `roundtrip` it prints as mean and percentiles."""
    package = _cyclone_source("package.xml")
    assert "<version>0.10.2</version>" in package
    debian = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "cyclonedds-tools"],
                            capture_output=True, text=True)
    assert debian.stdout.startswith("0.10.2"), debian
    source = _cyclone_source(PRINTED["ddsperf"].source)
    assert _line(source, PRINTED["ddsperf"].line)
    assert PRINTED["ddsperf"].factor == 2.0


def test_perftest_halves_the_round_trip_in_its_own_source():
    """RTI Perftest (the sources the tests build from): `latency /= 2;` under 'keep track of
    one-way latency', in the pong handler of the C++ program k8sdds builds and runs."""
    src = os.environ.get("PERFTEST_SRC") or next(
        iter(sorted((ROOT.parent / "shared/third_party").glob("rtiperftest-*.tar.gz"))), "")
    assert src, "no RTI Perftest sources (PERFTEST_SRC or ../shared/third_party)"
    want = PRINTED["rtiperftest"]
    if Path(src).is_dir():
        text = (Path(src) / want.source).read_text()
    else:
        with tarfile.open(src) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/" + want.source))
            text = tar.extractfile(member).read().decode()
    assert _line(text, want.line)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    at = lines.index(" ".join(want.line.split()))
    assert lines[at - 1] == "// keep track of one-way latency"
    assert want.factor == 2.0


@pytest.mark.parametrize("engine", ["zenoh", "mqtt"])
def test_k8sdds_own_clients_time_the_whole_round_trip_in_their_source(engine):
    want = PRINTED[engine]
    assert _line((ROOT / want.source).read_text(), want.line)
    assert want.factor == 1.0


# ---- runs written before the one definition -----------------------------------------

def _old_run(tmp_path: Path) -> Path:
    """A run directory written by k8sdds before the `definition` column (its results.csv
    from the logs of a real latency run, as it was then: ddsperf's halves as printed)."""
    from .conftest import fake_run

    run = fake_run(tmp_path)
    from k8sdds.reparse import reparse

    reparse(run.path)
    rows = list(csv.DictReader(io.StringIO(run.results_path.read_text())))
    for row in rows:  # as that k8sdds wrote them: no column, latencies as printed
        del row["definition"]
        if row["metric"].startswith("latency_us"):
            row["value"] = f"{float(row['value']) / 2:.6g}"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    run.results_path.write_text(out.getvalue())
    return run.path


def _printed_means(run: Path) -> list[float]:
    text = (run / "test-2/rep-1/pub.log").read_text()
    return [m for _, m, _ in _printed_ddsperf_rows(text)]


def test_an_old_run_is_read_as_round_trips_and_parse_rewrites_it(tmp_path):
    from k8sdds.analysis.load import load
    from k8sdds.reparse import reparse

    run = _old_run(tmp_path)
    printed = _printed_means(run)
    df = load([run]).results
    samples = df[(df.metric == "latency_us_mean") & (df.kind == "sample")]
    assert sorted(samples.value) == pytest.approx(sorted(2 * m for m in printed), rel=1e-5)
    assert set(df[df.metric.str.startswith("latency_us")].definition) == {"round trip"}
    reparse(run)
    rows = list(csv.DictReader(io.StringIO((run / "results.csv").read_text())))
    means = [float(r["value"]) for r in rows
             if r["metric"] == "latency_us_mean" and r["kind"] == "sample"]
    assert sorted(means) == pytest.approx(sorted(2 * m for m in printed), rel=1e-5)
    assert sorted(load([run]).results.value) == pytest.approx(sorted(df.value), rel=1e-5)


def test_an_old_and_a_new_run_compare_on_one_definition(tmp_path):
    """The same logs as an old run (half printed) and as a new one: one p50."""
    from k8sdds.analysis.load import load
    from k8sdds.reparse import reparse

    from .conftest import fake_run

    old = _old_run(tmp_path / "old")
    new = fake_run(tmp_path / "new", run_id="20260101-000000-bcde").path
    reparse(new)
    a = load([old]).summaries
    b = load([new]).summaries
    for df in (a, b):
        assert len(df[df.metric == "latency_us_p50"]) == 1
    assert a[a.metric == "latency_us_p50"].value.iloc[0] == pytest.approx(
        b[b.metric == "latency_us_p50"].value.iloc[0])


def test_a_resumed_old_run_keeps_its_old_rows_as_round_trips(tmp_path):
    """A run written before the column, resumed now: its rows are rewritten once with today's
    header, doubled, and the new rows follow; no row is doubled twice."""
    from k8sdds.results import RunDir

    run = _old_run(tmp_path)
    printed = _printed_means(run)
    rundir = RunDir(run)
    rundir.append_results([])
    rundir.append_results([])  # a second time: already today's header, left as it is
    rows = list(csv.DictReader(io.StringIO((run / "results.csv").read_text())))
    means = [float(r["value"]) for r in rows
             if r["metric"] == "latency_us_mean" and r["kind"] == "sample"]
    assert sorted(means) == pytest.approx(sorted(2 * m for m in printed), rel=1e-5)
    assert {r["definition"] for r in rows if r["metric"].startswith("latency_us")} == \
        {"round trip"}


def test_an_old_imported_k8sdds_tree_row_is_doubled_and_a_network_row_is_not():
    rows = [{"engine": "rtiperftest", "metric": "latency_us_p50", "value": "400"},
            {"engine": "qperf", "metric": "latency_us_mean", "value": "18.8"},
            {"engine": "ping", "metric": "latency_us_mean", "value": "32"},
            {"engine": "zenoh", "metric": "latency_us_p99", "value": "90"},
            {"engine": "ddsperf", "metric": "throughput_mbps", "value": "90"}]
    got = [upgrade.upgrade_row(r) for r in rows]
    assert [g["value"] for g in got] == ["800", "18.8", "32", "90", "90"]
    assert [g["definition"] for g in got] == ["round trip"] * 4 + [""]
    assert [upgrade.upgrade_row(g) for g in got] == got  # once only


def test_the_run_directory_v1_fixture_reads_with_the_column(tmp_path):
    """The oldest run directory format (tests/fixtures/rundir-v1) loads with `definition`."""
    from k8sdds.analysis.load import load

    run = tmp_path / "20261123-022731-ee79"
    shutil.copytree(FIXTURES / "rundir-v1", run)
    df = load([run]).results
    assert "definition" in df and set(df.definition) <= {"", "round trip"}
    assert json.loads((run / "manifest.json").read_text())["schema_version"] == 1
