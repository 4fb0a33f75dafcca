"""One latency definition: every `latency_us_*` k8sdds stores is one round trip (a ping's
send to its echo's receipt), whatever the engine printed. Each program's own definition is
a record here, with the line of its own source that sets it, so a parser turns what it read
into a round trip with the program's factor and never assumes it from a label.

`tests/test_latency_definition.py` reads each cited line in the program's real source and
checks every engine's stored round trip against a live run (the round trips an interval
counted times their mean come to the interval's length, one ping in flight).

Runs written before this definition stored ddsperf's and Perftest's figures as printed (half
a round trip): `BEFORE` has the factor each engine's old rows need, and `upgrade_row` /
`upgrade_frame` apply it to every row whose `definition` column is not `ROUND_TRIP` (the
column did not exist then), wherever results are read. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k8sdds.parsers.base import Parsed

ROUND_TRIP = "round trip"  # the `definition` column of a latency row
PREFIX = "latency_us"  # latency_us (Perftest's interval samples), latency_us_mean, _p50, ...


@dataclass(frozen=True)
class Printed:
    """What one program prints as its latency, and where its source says so."""

    program: str  # the program and the release whose source is cited
    prints: str  # in words
    factor: float  # printed figure x factor = one round trip
    source: str  # the file of the program's source that sets it
    line: str  # the line there, as written (whitespace aside)


# by parser name (the engine's `parser`)
PRINTED: dict[str, Printed] = {
    "ddsperf": Printed(
        "ddsperf (Eclipse Cyclone DDS 0.10.2, Debian's cyclonedds-tools)",
        "half the round trip: the pong's receipt minus the ping's source timestamp, / 2",
        2.0, "src/tools/ddsperf/ddsperf.c",
        "const bool all = update_roundtrip (iseq[i].publication_handle, "
        "(tnow - iseq[i].source_timestamp) / 2, isping, *seq);"),
    "rtiperftest": Printed(
        "perftest_cpp (RTI Perftest; also the K8sDDS study's published tree)",
        "half the round trip, called one-way latency",
        2.0, "srcCpp/perftest_cpp.cxx", "latency /= 2;"),
    "zenoh": Printed(
        "k8sdds-zenoh (engines/zenoh)",
        "the round trip: the pong's receipt minus the ping's send",
        1.0, "engines/zenoh/src/main.rs",
        "rtts.push(sent_at.elapsed().as_nanos() as f64 / 1e3);"),
    "mqtt": Printed(
        "k8sdds-mqtt (engines/mqtt)",
        "the round trip: the pong's receipt minus the ping's send",
        1.0, "engines/mqtt/main.go",
        "rtts = append(rtts, float64(time.Since(sentAt).Nanoseconds())/1e3)"),
    "qperf": Printed(
        "qperf 0.4.11",
        "half the round trip: the time over the messages both ends received",
        2.0, "src/qperf.c", "Res.latency = Res.l.time_real / no_msgs;"),
    "ping": Printed(
        "ping (iputils 20221126)",
        "the round trip of each echo",
        1.0, "ping/ping_common.c", "triptime = tv->tv_sec * 1000000 + tv->tv_usec;"),
    "ab": Printed(
        "ab (Apache 2.4)",
        "the time per request: a request's send to its response's end",
        1.0, "support/ab.c", "(double) concurrency * timetaken * 1000 / done);"),
}

# the factor a row written before the `definition` column needs, by engine: those stored as
# printed (half a round trip); qperf's was already doubled at parse, the others are whole
BEFORE: dict[str, float] = {"ddsperf": 2.0, "rtiperftest": 2.0}


def is_latency(metric: str) -> bool:
    return metric == PREFIX or metric.startswith(PREFIX + "_")


def round_trips(parsed: Parsed, factor: float) -> Parsed:
    """`parsed` with every latency value and sample multiplied by `factor` (the program's
    printed figure to a round trip); other metrics as they are."""
    if factor == 1.0:
        return parsed
    values = tuple(v._replace(value=v.value * factor) if is_latency(v.metric) else v
                   for v in parsed.values)
    columns = tuple(c._replace(values=c.values * factor) if is_latency(c.metric) else c
                    for c in parsed.columns)
    return Parsed(values=values, failure=parsed.failure, columns=columns)


def definition(metric: str) -> str:
    """The `definition` column of a row k8sdds writes now."""
    return ROUND_TRIP if is_latency(metric) else ""


def upgrade_row(row: dict[str, Any]) -> dict[str, Any]:
    """A results.csv row (text, as read) as k8sdds writes it now: a latency written before
    the one definition made a round trip (`BEFORE`), and its `definition` filled in."""
    metric = row.get("metric") or ""
    if row.get("definition") is not None and (row["definition"] == ROUND_TRIP
                                              or not is_latency(metric)):
        return row
    row = {**row, "definition": definition(metric)}
    factor = BEFORE.get(row.get("engine") or "", 1.0)
    if factor != 1.0 and is_latency(metric):
        try:
            row["value"] = f"{float(row['value']) * factor:.6g}"
        except (TypeError, ValueError):
            pass  # not a number: the reader's own check names it
    return row


def upgrade_frame(df: Any) -> Any:
    """`upgrade_row` over a results table read by pandas (value a float column)."""
    latency = df["metric"].astype(str).map(is_latency)
    old = latency & (df["definition"].astype(str) != ROUND_TRIP) if "definition" in df \
        else latency
    factor = df["engine"].astype(str).map(BEFORE).fillna(1.0)
    df = df.copy()
    df.loc[old, "value"] = df.loc[old, "value"] * factor[old]
    df["definition"] = latency.map({True: ROUND_TRIP, False: ""})
    return df


__all__ = ["BEFORE", "PRINTED", "ROUND_TRIP", "Printed", "definition", "is_latency",
           "round_trips", "upgrade_frame", "upgrade_row"]
