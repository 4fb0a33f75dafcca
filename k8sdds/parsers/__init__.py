"""Parsers by name: pure functions from an engine's output text to values."""

from __future__ import annotations

from collections.abc import Callable

from k8sdds.parsers import ab, ddsperf, iperf3, mqtt, ping, qperf, rtiperftest, zenoh
from k8sdds.parsers.base import SAMPLE, SUMMARY, Column, Parsed, Value

# parser(text, role, latency_test) -> Parsed
PARSERS: dict[str, Callable[[str, str, bool], Parsed]] = {
    "ddsperf": ddsperf.parse, "rtiperftest": rtiperftest.parse, "iperf3": iperf3.parse,
    "qperf": qperf.parse, "ping": ping.parse, "ab": ab.parse, "mqtt": mqtt.parse,
    "zenoh": zenoh.parse}

__all__ = ["PARSERS", "SAMPLE", "SUMMARY", "Column", "Parsed", "Value"]
