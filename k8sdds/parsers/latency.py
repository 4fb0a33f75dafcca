"""One latency definition: every `latency_us_*` k8sdds stores is one round trip (a ping's
send to its echo's receipt), whatever the engine printed. Each program's own definition is
a record (`Printed`) in its parser's module (`PRINTED`), with the line of its own source that
sets it, so a parser turns what it read into a round trip with the program's factor and
never assumes it from a label; the engine's record carries it (`Parser.printed`).

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


__all__ = ["ROUND_TRIP", "Printed", "definition", "is_latency", "round_trips"]
