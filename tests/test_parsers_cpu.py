"""cpu.json -> each role's CPU and its CPU per message (k8sdds.parsers.cpu), on literal files
and literal parses: the definition in docs/reference/results.md, case by case."""

from __future__ import annotations

import json

import pytest

from k8sdds.parsers import Parsed, Value
from k8sdds.parsers.cpu import parse, per_message

CPU = json.dumps({"roles": {"pub": {"user_s": 0.3, "system_s": 0.1},
                            "sub0": {"user_s": 0.1, "system_s": 0.1},
                            "sub1": {"user_s": 0.05, "system_s": 0.05}},
                  "nodes": {"node1": {"cpu_s": 0.5}}})


def _received(got: float, lost: float = 0.0) -> Parsed:
    return Parsed(values=(Value("received", got, "samples"), Value("lost", lost, "samples")))


def _figure(parsed: Parsed, metric: str) -> float | None:
    return parsed.summary(metric)


def test_a_throughput_tests_sender_pays_per_sample_its_receivers_saw():
    roles, nodes = parse(CPU)
    assert nodes == {"node1": (Value("node_cpu_s", 0.5, "s"),)}
    out = per_message({"pub": Parsed(), "sub0": _received(10_000, 0),
                       "sub1": _received(7_000, 1_000)}, roles, round_trips=False)
    # 0.4 s over the 10,000 the subscriber that saw most received: 40 µs
    assert _figure(out["pub"], "cpu_per_message_us") == pytest.approx(40.0)
    assert _figure(out["pub"], "cpu_user_s") == pytest.approx(0.3)
    assert _figure(out["pub"], "cpu_system_s") == pytest.approx(0.1)
    assert _figure(out["sub0"], "cpu_per_message_us") == pytest.approx(20.0)  # 0.2 s / 10,000
    assert _figure(out["sub1"], "cpu_per_message_us") == pytest.approx(1e6 * 0.1 / 7_000)


def test_a_round_trips_two_sides_pay_per_round_trip():
    roles, _ = parse(CPU)
    pub = Parsed(values=(Value("roundtrips", 2_000, "roundtrips"),))
    out = per_message({"pub": pub, "sub0": Parsed()}, roles, round_trips=True)
    assert _figure(out["pub"], "cpu_per_message_us") == pytest.approx(200.0)
    assert _figure(out["sub0"], "cpu_per_message_us") == pytest.approx(100.0)


def test_the_stream_beside_a_round_trip_pays_per_sample_of_its_sink():
    roles, _ = parse(json.dumps({"roles": {"stream": {"user_s": 1.0, "system_s": 0.0},
                                           "sink": {"user_s": 0.5, "system_s": 0.0}}}))
    out = per_message({"stream": Parsed(), "sink": _received(50_000, 0)}, roles,
                      round_trips=True)
    assert _figure(out["stream"], "cpu_per_message_us") == pytest.approx(20.0)
    assert _figure(out["sink"], "cpu_per_message_us") == pytest.approx(10.0)


def test_a_role_with_no_messages_keeps_its_cpu_without_a_figure_per_message():
    roles, _ = parse(CPU)
    out = per_message({"pub": Parsed(failure="no log"), "sub0": Parsed(failure="no log")},
                      roles, round_trips=False)
    assert _figure(out["pub"], "cpu_user_s") == pytest.approx(0.3)
    assert _figure(out["pub"], "cpu_per_message_us") is None
    assert out["pub"].failure == "no log"


@pytest.mark.parametrize("text", [
    "", "{", "[]", json.dumps({"roles": {"pub": {"user_s": -1, "system_s": 0}}}),
    json.dumps({"roles": {"pub": {"user_s": "1", "system_s": 0}}}),
    json.dumps({"roles": {"pub": {"user_s": True, "system_s": 0}}}),
    json.dumps({"roles": {"pub": {"user_s": 1e300, "system_s": 0}}}),
    json.dumps({"roles": {"pub": {"user_s": 1}}}),
    json.dumps({"nodes": {"node1": {"cpu_s": float("nan")}}}),
    json.dumps({"nodes": {"node1": 3}}), json.dumps({"roles": [1], "nodes": "x"}),
])
def test_a_damaged_or_impossible_file_gives_nothing(text):
    assert parse(text) == ({}, {})
