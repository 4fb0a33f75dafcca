"""ddsperf output -> per-interval samples and a whole-repeat summary.

ddsperf prints per-interval lines only (`[pid] seconds ...`), so the summary is computed here:

* throughput (a `sub` role): the mean of the per-interval rates over the steady intervals:
  those that carried data, without the first and the last when at least three did (the first
  holds discovery, the last is cut by the publisher stopping). `lost` is the total loss.
* latency (the `ping` side of a latency test): the count-weighted mean, the overall min and
  max, and for each percentile the count-weighted median of the per-interval percentiles
  (ddsperf prints no histogram, and percentiles must never be averaged).
* `intervals` says how many interval lines the summary used.
"""

from __future__ import annotations

import re

from k8sdds.model import STREAM
from k8sdds.parsers import latency
from k8sdds.parsers.base import SAMPLE, Parsed, Value, steady
from k8sdds.parsers.latency import Printed
from k8sdds.parsers.reader import Parser

# what ddsperf's program prints as a latency, and where its source says so
PRINTED = Printed(
    "ddsperf (Eclipse Cyclone DDS 0.10.2, Debian's cyclonedds-tools)",
    "half the round trip: the pong's receipt minus the ping's source timestamp, / 2",
    2.0, "src/tools/ddsperf/ddsperf.c",
    "const bool all = update_roundtrip (iseq[i].publication_handle, "
    "(tnow - iseq[i].source_timestamp) / 2, isping, *seq);")


_PREFIX = r"^\[(?P<pid>\d+)\]\s+(?P<t>\d+(?:\.\d+)?)\s+"
_SUB = re.compile(
    _PREFIX + r"(?:\S+\s+)?size (?P<size>\d+) total (?P<total>\d+) lost (?P<total_lost>\d+) "
    r"delta (?P<delta>\d+) lost (?P<lost>\d+) rate (?P<ks>[\d.]+) kS/s (?P<mbps>[\d.]+) Mb/s")
_PING = re.compile(
    _PREFIX + r"(?:(?P<peer>\S+)\s+)?size (?P<size>\d+) mean (?P<mean>[\d.]+)us "
    r"min (?P<min>[\d.]+)us 50% (?P<p50>[\d.]+)us 90% (?P<p90>[\d.]+)us "
    r"99% (?P<p99>[\d.]+)us max (?P<max>[\d.]+)us cnt (?P<cnt>\d+)")
_PUB = re.compile(_PREFIX + r"(?P<rate>[\d.]+)(?P<mult>[kMG]?)/s\s+\S+\s+\|")
_RSS = re.compile(_PREFIX + r"rss:(?P<rss>[\d.]+)(?P<unit>[kMG]B)(?P<rest>.*)$")
_THREAD_CPU = re.compile(r"\b[\w.-]+:(\d+)%\+(\d+)%")
_ERROR = re.compile(r"^(?:\[\d+\]\s+)?(?:[\d.]+\s+)?error:\s*(?P<msg>.+)$")
SENDERS = ("pub", STREAM)  # the publisher, and the stream's beside a round trip (`load`)
_MULT = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_RSS_MB = {"kB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def parse(text: str, role: str, latency_test: bool) -> Parsed:
    """Parse one ddsperf process's output (pure: no I/O); its latencies, half a round trip
    as ddsperf prints them, as round trips (`PRINTED`)."""
    return latency.round_trips(read(text, role, latency_test),
                               PRINTED.factor)


def read(text: str, role: str, latency_test: bool) -> Parsed:
    """The values of one process's lines in ddsperf's format, latencies as printed (also
    k8sdds-zenoh's and k8sdds-mqtt's, which print whole round trips in it)."""
    values: list[Value] = []
    sub_rows: list[dict[str, float]] = []
    ping_rows: list[dict[str, float]] = []
    pub_rates: list[float] = []
    errors: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if m := _SUB.match(line):
            row = {k: float(v) for k, v in m.groupdict().items() if v is not None
                   and k != "pid"}
            sub_rows.append(row)
            t = row["t"]
            values += [Value("throughput_mbps", row["mbps"], "Mb/s", SAMPLE, t),
                       Value("samples_per_s", row["ks"] * 1000, "samples/s", SAMPLE, t),
                       Value("lost", row["lost"], "samples", SAMPLE, t)]
        elif m := _PING.match(line):
            row = {k: float(v) for k, v in m.groupdict().items()
                   if k not in ("pid", "peer")}
            ping_rows.append(row)
            t = row["t"]
            values += [Value(f"latency_us_{k}", row[k], "us", SAMPLE, t)
                       for k in ("mean", "min", "p50", "p90", "p99", "max")]
            values.append(Value("roundtrips", row["cnt"], "roundtrips", SAMPLE, t))
        elif m := _PUB.match(line):
            rate = float(m["rate"]) * _MULT[m["mult"]]
            pub_rates.append(rate)
            values.append(Value("samples_per_s", rate, "samples/s", SAMPLE, float(m["t"])))
        elif m := _RSS.match(line):
            t = float(m["t"])
            values.append(Value("rss_mb", float(m["rss"]) * _RSS_MB[m["unit"]], "MB", SAMPLE, t))
            cpu = sum(int(u) + int(s) for u, s in _THREAD_CPU.findall(m["rest"]))
            values.append(Value("cpu_pct", float(cpu), "%", SAMPLE, t))
        elif m := _ERROR.match(line):
            errors.append(m["msg"].strip())

    sender = role in SENDERS
    if latency_test and sender:
        summary, failure = _latency_summary(ping_rows)
    elif not latency_test and not sender:
        summary, failure = _throughput_summary(sub_rows)
    elif not latency_test and sender:
        summary, failure = _rate_summary(pub_rates)
    else:  # the pong side of a latency test measures nothing itself
        summary, failure = [], None
    values += _resource_summary(values)
    if errors:
        failure = "; ".join(dict.fromkeys(errors))
    return Parsed(values=tuple(values + summary), failure=failure)


def _steady(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    return steady([r for r in rows if r["delta"] > 0])


def _throughput_summary(rows: list[dict[str, float]]) -> tuple[list[Value], str | None]:
    used = _steady(rows)
    if not used:
        return [], "no data received (no interval with samples)"
    n = len(used)
    return [
        Value("throughput_mbps", sum(r["mbps"] for r in used) / n, "Mb/s"),
        Value("samples_per_s", sum(r["ks"] for r in used) * 1000 / n, "samples/s"),
        Value("lost", rows[-1]["total_lost"], "samples"),
        Value("received", rows[-1]["total"], "samples"),
        Value("intervals", float(n), "intervals"),
    ], None


def _rate_summary(rates: list[float]) -> tuple[list[Value], str | None]:
    used = steady([r for r in rates if r > 0])
    if not used:
        return [], None  # the subscribers' output decides whether the repeat failed
    return [Value("samples_per_s", sum(used) / len(used), "samples/s"),
            Value("intervals", float(len(used)), "intervals")], None


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The value at half the total weight of (value, weight) pairs."""
    ordered = sorted(pairs)
    half = sum(w for _, w in ordered) / 2
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= half:
            return value
    return ordered[-1][0]


def _latency_summary(rows: list[dict[str, float]]) -> tuple[list[Value], str | None]:
    rows = [r for r in rows if r["cnt"] > 0]
    if not rows:
        return [], "no round trips measured (no latency interval line)"
    total = sum(r["cnt"] for r in rows)
    out = [
        Value("latency_us_mean", sum(r["mean"] * r["cnt"] for r in rows) / total, "us"),
        Value("latency_us_min", min(r["min"] for r in rows), "us"),
        Value("latency_us_max", max(r["max"] for r in rows), "us"),
    ]
    out += [Value(f"latency_us_{p}", weighted_median([(r[p], r["cnt"]) for r in rows]), "us")
            for p in ("p50", "p90", "p99")]
    out += [Value("roundtrips", total, "roundtrips"),
            Value("intervals", float(len(rows)), "intervals")]
    return out, None


def _resource_summary(values: list[Value]) -> list[Value]:
    out = []
    for metric, unit, agg in (("rss_mb", "MB", max), ("cpu_pct", "%", None)):
        series = [v.value for v in values if v.kind == SAMPLE and v.metric == metric]
        if series:
            value = agg(series) if agg else sum(series) / len(series)
            out.append(Value(metric, value, unit))
    return out


# what the engine that runs this program reads its logs with
PARSER = Parser("ddsperf", parse, PRINTED)
