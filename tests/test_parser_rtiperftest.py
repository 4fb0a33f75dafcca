"""The RTI Perftest parser on every format: real K8sDDS logs, samples from Perftest's public
output-format document, 4.x CSV headers, and hand-written variants of each (see
tests/fixtures/rtiperftest/README.md for where each file comes from). Perftest prints half the
round trip ("one-way"); every latency is stored as the round trip, twice the printed figure."""

from __future__ import annotations

import pytest

from k8sdds.parsers.rtiperftest import parse

from .conftest import FIXTURES
from .parsers_support import PARSERS

R = FIXTURES / "rtiperftest"


def _summary(result) -> dict[str, float]:
    return {v.metric: v.value for v in result.values if v.kind == "summary"}


def _samples(result, metric: str) -> list[float]:
    return [v.value for v in result.all_values() if v.kind == "sample" and v.metric == metric]


def test_registered():
    assert PARSERS["rtiperftest"] is parse


@pytest.mark.parametrize("name,mbps,samples_s,received,cpu", [
    ("legacy-throughput-sub.log", 2.1, 4154, 498487, 12.03),
    ("legacy-throughput-sub5-of-8.log", 2.5, 1232, 147934, 6.23),
    ("multicast-throughput-sub7.log", 3.5, 1710, 205255, 7.98),
    ("csv-throughput-sub-tls.log", 21.4, 2611, 313420, 18.71),
    ("secure-throughput-sub.log", 1.2, 2337, 280537, 14.61),
])
def test_real_throughput_subscribers(name, mbps, samples_s, received, cpu):
    result = parse((R / name).read_text(), "sub0", latency_test=False)
    assert result.failure is None
    s = _summary(result)
    assert (s["throughput_mbps"], s["samples_per_s"], s["received"], s["cpu_pct"]) == (
        mbps, samples_s, received, cpu)
    assert s["lost"] == 0


@pytest.mark.parametrize("name,ave,p50,p99,p999999,cpu", [
    ("legacy-latency-pub.log", 1446, 1413, 2195, 18977, 7.43),
    ("csv-latency-pub-tls.log", 1137, 1092, 1867, 14304, 12.93),
])
def test_real_latency_publishers(name, ave, p50, p99, p999999, cpu):
    result = parse((R / name).read_text(), "pub", latency_test=True)
    assert result.failure is None
    s = _summary(result)
    assert (s["latency_us_mean"], s["latency_us_p50"], s["latency_us_p99"],
            s["latency_us_p999999"], s["cpu_pct"]) == (2 * ave, 2 * p50, 2 * p99, 2 * p999999,
                                                       cpu)  # printed one-way: round trips
    assert s["latency_us_min"] <= s["latency_us_p50"] <= s["latency_us_p90"] \
        <= s["latency_us_p99"] <= s["latency_us_max"]


def test_loaded_latency_of_a_throughput_publisher():
    result = parse((R / "legacy-throughput-pub-loaded-latency.log").read_text(), "pub", False)
    assert result.failure is None
    assert _summary(result)["latency_us_mean"] == 2 * 3519


def test_echoing_subscriber_of_a_latency_test_is_not_a_failure():
    result = parse((R / "legacy-latency-sub.log").read_text(), "sub0", latency_test=True)
    assert result.failure is None


def test_refused_parameters_are_a_failed_repeat_with_the_reason():
    result = parse((R / "failed-batching-in-latency-test.log").read_text(), "pub", True)
    assert "Batching cannot be used in a Latency test." in result.failure
    assert "exit code 255" in result.failure
    assert not _summary(result)  # never a zero


def test_doc_legacy_interval_lines():
    sub = parse((R / "doc-legacy-intervals-sub.log").read_text(), "sub0", False)
    assert _samples(sub, "throughput_mbps") == [1767.8, 1665.7]
    assert _samples(sub, "samples_per_s") == [2209783, 2082150]
    assert _summary(sub)["throughput_mbps"] == 1644.0
    pub = parse((R / "doc-legacy-intervals-pub.log").read_text(), "pub", True)
    assert _samples(pub, "latency_us") == [2 * 69, 2 * 92, 2 * 47]
    assert _summary(pub)["latency_us_mean"] == 2 * 126


def test_doc_csv_with_intervals_cpu_and_serialization():
    pub = parse((R / "doc-csv-intervals-cpu-serialization-pub.log").read_text(), "pub", True)
    s = _summary(pub)
    assert s["latency_us_mean"] == 2 * 70 and s["latency_us_p50"] == 2 * 51
    assert s["cpu_pct"] == 26.43
    assert s["serialize_us"] == 0.343 and s["deserialize_us"] == 0.324
    assert _samples(pub, "latency_us") == [2 * 74, 2 * 51, 2 * 62]
    sub = parse((R / "doc-csv-intervals-cpu-sub.log").read_text(), "sub0", False)
    s = _summary(sub)
    assert s["throughput_mbps"] == 1563.3 and s["samples_per_s"] == 1954063
    assert s["cpu_pct"] == 20.34 and s["received"] == 9772745
    assert _samples(sub, "throughput_mbps") == [1526.7, 1565.9]  # not the running averages
    assert _samples(sub, "samples_per_s") == [1908340, 1957341]
    assert _samples(sub, "cpu_pct") == [12.12, 22.75]


def test_doc_json_mixed_key_styles():
    sub = parse((R / "doc-json-sub.log").read_text(), "sub0", False)
    s = _summary(sub)
    assert (s["throughput_mbps"], s["samples_per_s"], s["received"], s["cpu_pct"]) == (
        1618.1, 2022647, 6066172, 17.0)
    assert _samples(sub, "throughput_mbps") == [1616.4, 1713.5]
    assert _samples(sub, "samples_per_s") == [2020500, 2141823]
    pub = parse((R / "doc-json-pub.log").read_text(), "pub", True)
    s = _summary(pub)
    assert s["latency_us_mean"] == 2 * 194.5 and s["latency_us_p9999"] == 2 * 672
    assert s["serialization_total_us"] == 1.062
    assert _samples(pub, "latency_us") == [2 * 72, 2 * 526]


THR4 = ", ".join(["Sample Size (Bytes)", "Total Samples", "Samples/s", "Avg Samples/s", "Mbps",
                  "Avg Mbps", "Lost Samples", "Lost Samples (%)", "CPU (%)"])
SUM4 = ", ".join(["Sample Size (Bytes)", "Total Samples", "Avg Samples/s", "Avg Mbps",
                  "Lost Samples", "Lost Samples (%)", "CPU (%)"])
PERFTEST_4 = f"""RTI Perftest 4.1 (RTI Connext DDS 7.2.0)
Interval Throughput for 1024 Bytes:
{THR4}
1024, 100000, 50000, 50000, 409.6, 409.6, 0, 0.00, 20.5
Throughput Summary:
{SUM4}
1024, 250000, 49000, 401.4, 3, 0.00, 21.0
"""
LAT43 = ", ".join(["Sample Size (Bytes)", "Latency (μs)", "Avg (μs)", "Std (μs)", "Min (μs)",
                   "Max (μs)", "CPU (%)"])
LSUM43 = ", ".join(["Sample Size (Bytes)", "Avg (μs)", "Std (μs)", "Min (μs)", "Max (μs)",
                    "50% (μs)", "90% (μs)", "99% (μs)", "99.99% (μs)", "99.9999% (μs)",
                    "CPU (%)"])
PERFTEST_43_LATENCY = f"""Intervals One-Way Latency for 256 Bytes:
{LAT43}
256, 80, 81, 5.0, 70, 99, 11.0
One-Way Latency Summary:
{LSUM43}
256, 81, 5.0, 70, 99, 80, 90, 97, 99, 99, 11.5
"""


def test_perftest_4_csv_headers():
    s = _summary(parse(PERFTEST_4, "sub0", False))
    assert (s["throughput_mbps"], s["samples_per_s"], s["lost"], s["cpu_pct"]) == (
        401.4, 49000, 3, 21.0)
    pub = parse(PERFTEST_43_LATENCY, "pub", True)
    s = _summary(pub)
    assert s["latency_us_mean"] == 2 * 81 and s["latency_us_p99"] == 2 * 97
    assert s["cpu_pct"] == 11.5
    assert _samples(pub, "latency_us") == [2 * 80]


def test_windows_line_ends_and_blank_lines_change_nothing():
    text = (R / "csv-throughput-sub-tls.log").read_text()
    base = _summary(parse(text, "sub0", False))
    crlf = text.replace("\n", "\r\n")
    assert _summary(parse(crlf, "sub0", False)) == base
    spaced = text.replace("Throughput Summary:\n", "Throughput Summary:\n\n\n")
    assert _summary(parse(spaced, "sub0", False)) == base


# the end of a latency publisher's log on the kubernetes backend (2026-11-29, Perftest on
# Cyclone in a pod): Perftest's note on stderr came between its summary's header and row on
# stdout, as the pod's log took the two streams
INTERLEAVED = """\
           256,           78,       57,     54.4,       24,     4006,    0.00

One-way Latency Summary:
Sample Size (Bytes), Ave (μs), Std (μs), \
Min (μs), Max (μs), 50% (μs), \
90% (μs), 99% (μs), 99.99% (μs), \
99.9999% (μs), CPU (%)
Finishing test due to timer...
                256,       57,     54.4,       24,     4006,       53,       68,      114,\
        3078,          4006,    0.39
Test ended.
"""


def test_a_note_on_stderr_among_the_summarys_lines_is_passed_over():
    result = parse(INTERLEAVED, "pub", True)
    assert not result.failure
    s = _summary(result)
    assert (s["latency_us_mean"], s["latency_us_p50"], s["latency_us_p99"]) == (114, 106, 228)
    # "Waiting for data ..." between an interval section's header and its rows, as a
    # subscriber prints it: the rows are still the section's
    sub = ("Interval Throughput for 256 Bytes:\n"
           "Length (Bytes), Total Samples,  Samples/s, Avg Samples/s,     Mbps,  Avg Mbps, "
           "Lost Samples, Lost Samples (%), CPU (%)\nWaiting for data ...\n"
           "           256,         15220,       4913,          4913,     10.1,      10.1,"
           "            0,             0.00,   11.50\n\nThroughput Summary:\n"
           "Sample Size (Bytes), Total Samples, Avg Samples/s,    Avg Mbps, Lost Samples, "
           "Lost Samples (%), CPU (%)\n"
           "                256,         15255,          5085,        10.4,            0,"
           "             0.00,   11.50\nFinishing test...\nTest ended.\n")
    got = parse(sub, "sub0", False)
    assert _summary(got)["throughput_mbps"] == 10.4
    assert _samples(got, "throughput_mbps") == [10.1]


def test_truncated_files_fail_instead_of_inventing_numbers():
    text = (R / "csv-throughput-sub-tls.log").read_text()
    cut = text[: text.index("Throughput Summary:") + 60]  # header cut mid-way, no row
    result = parse(cut, "sub0", False)
    assert result.failure and "no result line" in result.failure
    assert "throughput_mbps" not in _summary(result)
    legacy = (R / "legacy-throughput-sub.log").read_text()
    cut = legacy[: legacy.index("Mbps(ave)")]
    assert "no result line" in parse(cut, "sub0", False).failure


def test_intervals_only_is_a_failure_but_keeps_the_samples():
    text = "\n".join((R / "doc-legacy-intervals-sub.log").read_text().splitlines()[:3])
    result = parse(text, "sub0", False)
    assert "no result line" in result.failure
    assert _samples(result, "throughput_mbps") == [1767.8, 1665.7]


@pytest.mark.parametrize("text", ["", "\x00\xff garbage", "{\"perftest\": [", "Length:"])
def test_garbage_is_a_failure(text):
    assert parse(text, "sub0", False).failure


def test_the_perftest_header_names_its_test():
    from k8sdds.parsers.perftest_header import header

    said = header((FIXTURES / "rtiperftest" / "legacy-throughput-pub-loaded-latency.log")
                  .read_text())
    assert said["data_len"] == 64 and said["latency_test"] is False
    assert said["best_effort"] is False and said["batch_size"] == 0
    assert said["transport"] == "udp" and "secure" not in said
    assert said["num_subscribers"] == 1  # "Waiting to discover 1 subscribers"
    secure = header((FIXTURES / "rtiperftest" / "secure-throughput-sub.log").read_text())
    assert secure.get("secure") is True
    assert "num_subscribers" not in secure  # a subscriber waits for publishers
    eight = header("Perftest Configuration:\n\tData Size: 1024\n"
                   "Waiting to discover 8 subscribers ...\n")
    assert eight == {"data_len": 1024, "num_subscribers": 8}


def test_a_long_logs_interval_lines_are_read_a_piece_at_a_time_and_all_kept(monkeypatch):
    """Pieces of a few hundred characters (a real log's are 8 MiB): every interval line is
    read, numbered and valued as the log wrote it, whichever piece it fell in."""
    import numpy as np

    from k8sdds.parsers import rtiperftest as rti

    head = (R / "legacy-throughput-sub.log").read_text().partition("Waiting for data...\n")
    lines = "".join(f"Packets: {i * 10:8d}  Packets/s: {i:5d}  Packets/s(ave): {i:5d}  "
                    f"Mbps: {i / 10:.1f}  Mbps(ave): 1.0  Lost: {i % 3} (0.00%)\n"
                    for i in range(1, 1001))
    text = head[0] + head[1] + lines + head[2]
    monkeypatch.setattr(rti, "CHUNK", 300)
    parsed = rti.parse(text, "sub0", False)
    by = {c.metric: c for c in parsed.columns}
    assert by["throughput_mbps"].t.tolist() == list(range(1, 1001))
    assert np.allclose(by["throughput_mbps"].values, [i / 10 for i in range(1, 1001)])
    assert by["lost"].values.tolist() == [i % 3 for i in range(1, 1001)]
    assert by["samples_per_s"].values.tolist() == list(range(1, 1001))
    assert parsed.summary("throughput_mbps") == 2.1  # the result line, untouched


def test_a_csv_interval_section_goes_on_across_pieces(monkeypatch):
    """Perftest 4's CSV interval rows, one a pong, in a log read in pieces of a few hundred
    characters: every row counted, whichever piece it fell in (the end of a piece is no
    blank line: the section went on past it; a real 4 s latency run kept 26,872 of its
    54,557 pongs when it was taken for one)."""
    from k8sdds.parsers import rtiperftest as rti

    rows = "".join(f"{256:19d},{i % 90 + 10:13d},{50:9d},{9.5:9.1f},{10:9d},{99:9d},"
                   f"{0.2:8.2f}\n" for i in range(1000))
    text = ("Intervals One-Way Latency for 256 Bytes:\n"
            "Length (Bytes), Latency (μs), Ave (μs), Std (μs), Min (μs), Max (μs), CPU (%)\n"
            + rows + "\nOne-way Latency Summary:\nSample Size (Bytes), Ave (μs), Std (μs), "
            "Min (μs), Max (μs), 50% (μs), 90% (μs), 99% (μs), 99.99% (μs), 99.9999% (μs), "
            "CPU (%)\n                256,       50,     9.5,       10,     99,       45,"
            "       88,       98,        99,          99,    0.20\n")
    monkeypatch.setattr(rti, "CHUNK", 300)
    parsed = rti.parse(text, "pub", True)
    assert parsed.summary("roundtrips") == 1000
    [pongs] = [c for c in parsed.columns if c.metric == "latency_us"]
    assert pongs.values.tolist() == [2 * (i % 90 + 10) for i in range(1000)]


def test_a_roles_samples_are_thinned_evenly_past_an_hour_and_said():
    import numpy as np

    from k8sdds.parsers.base import Parsed, Trace
    from k8sdds.records import MAX_SAMPLES, thinned

    assert MAX_SAMPLES == 3600
    long = Parsed(columns=(Trace("throughput_mbps", "Mb/s", np.arange(1.0, 10001.0),
                                  np.arange(10000.0)),))
    said: list[str] = []
    [col] = thinned(long, said, "sub0").columns
    # every 4th: the smallest power of two leaving at most 3,600 of 10,000 (3 would too, but
    # a log read a piece at a time cannot know its length before its end)
    assert col.t.tolist() == list(range(1, 10001, 4)) and len(col.t) == 2500
    assert said == ["sub0.log: throughput_mbps: 10,000 interval samples, one in 4 kept (at "
                    "most 3,600; the summaries are of all)"]
    short = Parsed(columns=(Trace("lost", "samples", np.arange(1.0, 3601.0),
                                   np.zeros(3600)),))
    assert thinned(short, said, "sub0") == short and len(said) == 1


def test_samples_thinned_as_read_are_those_of_the_whole_log_and_bounded():
    import numpy as np

    from k8sdds.parsers.base import MAX_SAMPLES, Samples

    for n, step in ((3600, 1), (3601, 2), (7200, 2), (7201, 4), (100_000, 32)):
        kept = Samples("lost", "samples")
        rng = np.random.default_rng(n)
        at = 0
        while at < n:  # pieces of any length, as a log's lines fall into its pieces
            size = int(rng.integers(1, 2000))
            t = np.arange(at + 1.0, min(at + size, n) + 1.0)
            kept.add(t, t * 10)
            at += len(t)
            assert kept.kept <= MAX_SAMPLES
        col = kept.column()
        assert col.t.tolist() == list(range(1, n + 1, step)), n
        assert col.values.tolist() == [10.0 * i for i in range(1, n + 1, step)]
        assert col.seen == n
    assert Samples("lost", "samples").column() is None


def test_a_long_log_is_thinned_as_read_and_said_once(monkeypatch):
    from k8sdds.parsers import rtiperftest as rti
    from k8sdds.records import thinned

    head = (R / "legacy-throughput-sub.log").read_text().partition("Waiting for data...\n")
    lines = "".join(f"Packets: {i * 10:8d}  Packets/s: {i:5d}  Packets/s(ave): {i:5d}  "
                    f"Mbps: {i / 10:.1f}  Mbps(ave): 1.0  Lost: 0 (0.00%)\n"
                    for i in range(1, 10001))
    monkeypatch.setattr(rti, "CHUNK", 5000)
    parsed = rti.parse(head[0] + head[1] + lines + head[2], "sub0", False)
    by = {c.metric: c for c in parsed.columns}
    assert by["samples_per_s"].t.tolist() == list(range(1, 10001, 4))
    assert by["samples_per_s"].values.tolist() == list(range(1, 10001, 4))
    said: list[str] = []
    assert thinned(parsed, said, "sub0") == parsed  # already thinned: said, not cut again
    assert "sub0.log: samples_per_s: 10,000 interval samples, one in 4 kept (at most 3,600; " \
        "the summaries are of all)" in said
    assert parsed.summary("throughput_mbps") == 2.1




def test_summaries_without_a_title_under_no_print_intervals():
    """Perftest 4.x with -noPrintIntervals prints each summary's header with no section
    title (a real pair of Perftest-on-Cyclone logs: the figures below are theirs)."""
    sub = parse((R / "cyclone-noprint-throughput-sub-armhf.log").read_text(), "sub0", False)
    assert sub.failure is None
    assert sub.summary("throughput_mbps") == 393.5 and sub.summary("received") == 192158
    assert sub.summary("lost") == 0
    pub = parse((R / "cyclone-noprint-throughput-pub-arm64.log").read_text(), "pub", False)
    assert pub.summary("latency_us_mean") == 2 * 2852
    assert pub.summary("latency_us_p50") == 2 * 3651


def test_a_stopped_stream_receiver_is_read_from_its_interval_lines():
    # the stream beside a round trip is stopped before Perftest prints its summary: what it
    # carried is the mean of its interval lines (here all of them, two: no partial second
    # left out of fewer than three)
    cut = "\n".join((R / "doc-csv-intervals-cpu-sub.log").read_text().splitlines()[:4])
    s = _summary(parse(cut, "sink", False))
    assert s["throughput_mbps"] == pytest.approx(1546.3)  # Perftest's own "Ave Mbps", 2nd line
    assert s["samples_per_s"] == pytest.approx((1908340 + 1957341) / 2)
    legacy = "\n".join((R / "doc-legacy-intervals-sub.log").read_text().splitlines()[:3])
    assert _summary(parse(legacy, "sink", False))["throughput_mbps"] == pytest.approx(1716.75)
    # a summary it did print is kept as printed
    assert _summary(parse((R / "doc-csv-intervals-cpu-sub.log").read_text(), "sink", False))[
        "throughput_mbps"] == 1563.3
    assert parse("Waiting to discover 1 publishers ...\n", "sink", False).failure == (
        "no result line")
