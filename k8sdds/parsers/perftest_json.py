"""RTI Perftest's JSON output (`-outputFormat json`: `{"perftest": [{"length": ...,
"intervals": [{...}, ...], "summary": {...}}]}`) read as its text comes, by ijson's event
parser: each interval becomes samples as it ends, each summary key a value, so a long log is
never one document in memory. What follows the document, or a document cut or broken, ends
the reading there: what was read stands."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from k8sdds.parsers.base import Samples, Value
from k8sdds.parsers.perftest_csv import unit

# JSON keys (lower case) -> metric, for summaries and intervals
KEYS = {
    "latency": "latency_us", "latency_ave": "latency_us_mean", "latency_std": "latency_us_std",
    "latency_min": "latency_us_min", "latency_max": "latency_us_max",
    "latency_50": "latency_us_p50", "latency_90": "latency_us_p90",
    "latency_99": "latency_us_p99", "latency_99.99": "latency_us_p9999",
    "latency_99.9999": "latency_us_p999999", "packets": "received",
    "packets/s": "samples_per_s", "packets/s_ave": "samples_per_s_ave", "mbps": "throughput_mbps",
    "mbps_ave": "throughput_mbps_ave", "lost": "lost", "lost_percent": "lost_pct",
    "cpu": "cpu_pct", "serialize": "serialize_us", "deserialize": "deserialize_us",
    "total_s": "serialization_total_us",
}


def _plans() -> tuple[dict, dict]:
    """(interval key -> (metric, unit): running averages and counts left out, summary key ->
    (metric, unit)). Pure."""
    interval, summary = {}, {}
    for key, metric in KEYS.items():
        if metric != "received" and not metric.endswith("_ave"):  # running averages: no
            interval[key] = (metric, unit(metric))
        name = metric.removesuffix("_ave")
        summary[key] = (name, unit(name))
    return interval, summary


INTERVAL, SUMMARY = _plans()
_INTERVAL = "perftest.item.intervals.item"
_SUMMARY = "perftest.item.summary"
BATCH = 4096  # intervals gathered before they become samples


def _number(event: str, value: Any) -> float | None:
    """An interval's value as a number (a number, or text that reads as one), else None."""
    if event == "number":
        return float(value)
    if event == "string":
        try:
            got = float(value.strip())
        except ValueError:
            return None
        return None if math.isnan(got) else got
    return None


def _own(keys: dict[str, str], prefix: str) -> str | None:
    """The prefix of a value of the object at `prefix` under its last key."""
    key = keys.get(prefix)
    return None if key is None else f"{prefix}.{key}"


class Document:
    """The JSON document, fed as text (`feed`, any cut), ended by `finish`: summaries into
    `values`, interval samples to `samples(metric, unit)`."""

    def __init__(self, values: list[Value], samples: Callable[[str, str], Samples]):
        import ijson

        self._values, self._samples = values, samples
        self._events = ijson.sendable_list()
        self._parser = ijson.parse_coro(self._events, use_float=True)
        self._errors = (ijson.JSONError, ijson.IncompleteJSONError)
        self._done = False
        self._t = 0  # intervals read, of every block
        self._interval: dict[str, float] | None = None
        self._batch: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        self._key: dict[str, str] = {}  # an object's prefix -> its last key

    def feed(self, text: str) -> None:
        if self._done:
            return
        try:
            self._parser.send(text.encode())
        except self._errors:
            self._done = True
        self._take()

    def finish(self) -> None:
        if not self._done:
            try:
                self._parser.close()
            except self._errors:
                pass
            self._take()
        self._flush()

    def _take(self) -> None:
        """The events parsed so far. A value counts only where it is a key's own (a key's
        name is its `map_key` event: a nested object's keys are not the interval's)."""
        for prefix, event, value in self._events:
            if self._done:
                break
            if event == "map_key":
                self._key[prefix] = value
            elif prefix == _INTERVAL and event == "start_map":
                self._interval = {}
            elif prefix == _INTERVAL and event == "end_map" and self._interval is not None:
                self._end_interval(self._interval)
                self._interval = None
            elif self._interval is not None and prefix == _own(self._key, _INTERVAL):
                key = self._key[_INTERVAL]
                got = _number(event, value) if key in INTERVAL else None
                if got is not None:
                    self._interval[key] = got
            elif event == "number" and prefix == _own(self._key, _SUMMARY):
                plan = SUMMARY.get(self._key[_SUMMARY].lower())
                if plan:
                    self._values.append(Value(plan[0], float(value), plan[1]))
            elif prefix == "" and event == "end_map":  # the document's end: nothing after
                self._done = True
        del self._events[:]

    def _end_interval(self, interval: dict[str, float]) -> None:
        self._t += 1
        for key, got in interval.items():
            times, values = self._batch.setdefault(INTERVAL[key], ([], []))
            times.append(float(self._t))
            values.append(got)
        if self._t % BATCH == 0:
            self._flush()

    def _flush(self) -> None:
        import numpy as np

        for (metric, measure), (times, values) in self._batch.items():
            self._samples(metric, measure).add(np.array(times), np.array(values))
        self._batch = {}
