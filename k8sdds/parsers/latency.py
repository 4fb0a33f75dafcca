"""One latency definition: every `latency_us_*` k8sdds stores is one round trip (a ping's
send to its echo's receipt), whatever the engine printed. Each program's own definition is
a record here, with the line of its own source that sets it, so a parser turns what it read
into a round trip with the program's factor and never assumes it from a label.

`tests/test_latency_definition.py` reads each cited line in the program's real source and
checks every engine's stored round trip against a live run (the round trips an interval
counted times their mean come to the interval's length, one ping in flight).

Runs written before this definition stored ddsperf's and Perftest's figures as printed (half
a round trip); `k8sdds.results.upgrade` makes their rows round trips wherever results are
read. Pure."""

from __future__ import annotations

from dataclasses import dataclass

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


__all__ = ["PRINTED", "ROUND_TRIP", "Printed", "definition", "is_latency", "round_trips"]
