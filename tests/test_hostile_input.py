"""Hostile and broken input: no traceback, a clear error or a recorded parse failure, and no
schedule value reaches a command line or a file name (property-based, with hypothesis).

Examples tried per target are the max_examples of each test."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k8sdds import model, schedule
from k8sdds.errors import ScheduleError, UserError

from .cli_support import invoke
from .conftest import FIXTURES
from .parsers_support import PARSERS

HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize"
LOGS = sorted((FIXTURES / "ddsperf").glob("*.log")) + sorted(
    (FIXTURES / "rtiperftest").glob("*.log"))
PROFILE = dict(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


@settings(max_examples=300, **PROFILE)
@given(st.binary(max_size=2000))
def test_schedule_from_arbitrary_bytes(tmp_path, raw):
    path = tmp_path / "s.csv"
    path.write_bytes(raw)
    try:
        tests = schedule.load(path)
    except ScheduleError as exc:
        assert str(path) in str(exc)
    else:
        assert all(isinstance(t, model.Test) for t in tests)


CELLS = st.one_of(st.text(max_size=40), st.integers().map(str),
                  st.sampled_from(["true", "false", "TRUE", "", "1e309", "nan", "-0",
                                   "9" * 400, "64\x00", "; rm -rf /", "$(reboot)",
                                   "../../etc/passwd", "`id`"]))


@settings(max_examples=500, **PROFILE)
@given(st.lists(CELLS, min_size=5, max_size=5))
def test_schedule_rows_with_arbitrary_cells(tmp_path, cells):
    if any("\x00" in c for c in cells):
        cells = [c.replace("\x00", "") for c in cells]
    row = ",".join('"' + c.replace('"', '""') + '"' for c in cells)
    path = tmp_path / "s.csv"
    path.write_text(HEADER + "\n" + row + "\n")
    try:
        [test] = schedule.load(path)
    except ScheduleError as exc:
        assert "line 2" in str(exc) or "line 1" in str(exc) or str(path) in str(exc)
    else:  # what passes is typed and in range: nothing free-form reaches a command line
        assert isinstance(test.data_len, int) and 1 <= test.data_len
        assert isinstance(test.multicast, bool) and isinstance(test.best_effort, bool)
        assert 1 <= test.num_subscribers <= 64 and test.batch_size >= 0


@pytest.mark.parametrize("parser", sorted(PARSERS))
@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=3000))
def test_parsers_on_arbitrary_text(parser, text):
    for role, latency in (("pub", False), ("sub0", False), ("pub", True), ("sub0", True)):
        result = PARSERS[parser](text, role, latency)
        values = list(result.all_values())
        assert result.failure is None or isinstance(result.failure, str)
        assert all(v.value == v.value for v in values)  # no NaN is ever reported


# parser -> (its real logs, the role whose log is the measurement)
MEASURED = {
    "ddsperf": (LOGS, "sub0"), "rtiperftest": (LOGS, "sub0"),
    "mqtt": ([FIXTURES / "mqtt" / "sub-qos1-1024.log"], "sub0"),
    "zenoh": ([FIXTURES / "zenoh" / "sub-routed-1024.log"], "sub0"),
    "discovery": (sorted((FIXTURES / "discovery").glob("*.log")), "p0"),
    **{name: (sorted(p for p in (FIXTURES / "network").glob(f"{name}-*")
                     if "server" not in p.name), "client")
       for name in ("iperf3", "qperf", "ping", "ab")},
}


@pytest.mark.parametrize("parser", sorted(PARSERS))
@settings(max_examples=200, deadline=None)
@given(data=st.data(), cut=st.floats(0, 1), noise=st.binary(max_size=64))
def test_parsers_on_truncated_and_corrupted_real_logs(parser, data, cut, noise):
    logs, role = MEASURED[parser]
    log = data.draw(st.sampled_from(logs))
    raw = log.read_bytes()
    raw = raw[: int(len(raw) * cut)] + noise
    text = raw.decode("utf-8", errors="replace")
    result = PARSERS[parser](text, role, False)
    summaries = {v.metric for v in result.values if v.kind == "summary"}
    # the measuring role reports its figure or says why not: never neither
    assert summaries & {"throughput_mbps", "latency_us_mean", "requests_per_s",
                        "discovery_s"} or result.failure


@pytest.mark.parametrize("log", sorted((FIXTURES / "rtiperftest").glob("*.log")),
                         ids=lambda p: p.name)
def test_rtiperftest_parser_takes_a_stray_quote_as_a_character(log):
    """Found by the test above: a quote in a cut log made pandas read to the end of the file
    for the end of a string, and fail (a traceback, no failure reason)."""
    role = "pub" if "pub" in log.name else "sub0"

    def counts(text: str) -> dict[str, int]:
        parsed = PARSERS["rtiperftest"](text, role, False)
        return {c.metric: len(c.values) for c in parsed.columns}

    raw = log.read_text(errors="replace")
    for clean in (raw[: len(raw) // 2], raw):
        before, after = counts(clean), counts(clean + '"')  # a cut log, then a quote
        assert all(after.get(m, 0) >= n - 1 for m, n in before.items()), (before, after)
        middle = len(clean) // 2  # anywhere else: parsed or refused, never an exception
        for quoted in ('"' + clean, clean[:middle] + '"' + clean[middle:]):
            counts(quoted)


@pytest.mark.parametrize("value", ["; rm -rf /tmp/x", "$(touch /tmp/pwned)", "`id`",
                                   "../../../etc/passwd", "a" * 100_000, "udp\nx", "tcp;ls"])
@pytest.mark.parametrize("column", ["transport", "engine", "datapath", "placement",
                                    "discovery", "dataLen"])
def test_values_cannot_inject(tmp_path, column, value):
    path = tmp_path / "s.csv"
    path.write_text(f'{HEADER},{column if column != "dataLen" else "duration"}\n'
                    f'64,false,1,false,0,"{value}"\n' if column != "dataLen" else
                    f'{HEADER}\n"{value}",false,1,false,0\n')
    with pytest.raises(ScheduleError) as info:
        schedule.load(path)
    assert "not allowed" in str(info.value) or "unknown engine" in str(info.value)
    assert len(str(info.value)) < 2000  # a huge value does not flood the message... much


def test_nul_bytes_and_wrong_encodings(tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(HEADER.encode() + b"\n64,false,1,false\x00,0\n")
    with pytest.raises(ScheduleError, match="NUL"):
        schedule.load(path)
    path.write_bytes(HEADER.encode("utf-16"))
    with pytest.raises(ScheduleError):
        schedule.load(path)


@pytest.mark.parametrize("name", ["../../etc", "x;rm", "a/b", "", "UPPER", "x" * 40, "-x"])
def test_testbed_names_cannot_escape(name):
    from k8sdds.testbed.layout import check_name

    with pytest.raises(UserError, match="testbed name"):
        check_name(name)
    done = invoke("testbed", "status", "--testbed", name)  # the CLI, in this process
    assert done.returncode == 2 and "Traceback" not in done.stderr
