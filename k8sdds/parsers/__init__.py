"""Parsers by name: pure functions from an engine's output text to values."""

from __future__ import annotations

from collections.abc import Callable

from k8sdds.parsers import ab, ddsperf, discovery, iperf3, mqtt, ping, qperf, rtiperftest, zenoh
from k8sdds.parsers.base import SAMPLE, SUMMARY, Parsed, Trace, Value

# parser(text, role, latency_test) -> Parsed
PARSERS: dict[str, Callable[[str, str, bool], Parsed]] = {
    "ddsperf": ddsperf.parse, "rtiperftest": rtiperftest.parse, "iperf3": iperf3.parse,
    "qperf": qperf.parse, "ping": ping.parse, "ab": ab.parse, "mqtt": mqtt.parse,
    "zenoh": zenoh.parse, "discovery": discovery.parse}

# parsers that can also read a log a piece at a time (Stream(role, latency_test): feed(piece),
# result()): their memory does not grow with a log's lines
STREAMS = {"rtiperftest": rtiperftest.Stream}

__all__ = ["PARSERS", "STREAMS", "SAMPLE", "SUMMARY", "Trace", "Parsed", "Value"]
