"""The path's capacity a `load` share is taken of: the same engine's throughput of the
stream's samples (`load_len`) between the same nodes, measured in the run itself as a test
of its own (added before the first row that needs it, and repeated as often), so a stream of
"75%" sends at 0.75 of what that path carried in this sitting. Pure."""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from k8sdds.model import Test

METRIC = "samples_per_s"  # what the capacity test's receiver measured, a second
LOAD_LEN = 1024  # bytes a sample of the stream has, where a load row leaves loadLen empty
ALLOWED = "a share of the path's capacity from 0% to 100% (0: no stream), or max"


def canonical(text: str) -> str | None:
    """A `load` cell as the test keeps it: `N%` (N or N% written, 0 to 100), `max`, or ""
    for 0 (an idle path); None where it is none of these."""
    low = text.strip().lower()
    if low == "max":
        return low
    try:
        share = float(low.removesuffix("%"))
    except ValueError:
        return None
    if not 0 <= share <= 100:  # also refuses nan
        return None
    return f"{share:g}%" if share else ""


def of(test: Test) -> Test | None:
    """The throughput test whose rate `test`'s stream takes its share of; None for a test
    without a share (no stream, or `max`)."""
    if test.load_share is None:
        return None
    return replace(test, data_len=test.load_len, latency_test=False, load="", load_len=0,
                   num_subscribers=1, pub_rate=0, number=0)


def _same(a: Test, b: Test) -> bool:
    """The same measurement, however often repeated."""
    def key(t: Test) -> tuple[dict, str | None]:
        return {k: v for k, v in t.params().items() if k != "repeats"}, t.path
    return key(a) == key(b)


def added(tests: Sequence[Test]) -> list[Test]:
    """`tests` with each capacity test their shares need, once each, just before the first
    test that needs it (so it runs first in every round), renumbered from 1; its repeats:
    the most any of those tests has."""
    needed: list[Test] = []
    for test in tests:
        base = of(test)
        if base is None:
            continue
        for i, have in enumerate(needed):
            if _same(have, base):
                needed[i] = replace(have, repeats=max(have.repeats, test.repeats))
                break
        else:
            needed.append(base)
    out: list[Test] = []
    placed: list[Test] = []
    for test in tests:
        base = of(test)
        if base is not None and not any(_same(p, base) for p in placed):
            mine = next(n for n in needed if _same(n, base))
            out.append(mine)
            placed.append(mine)
        out.append(test)
    return [replace(t, number=i) for i, t in enumerate(out, start=1)]


def test_of(test: Test, tests: Sequence[Test]) -> Test | None:
    """Among a run's `tests`, the capacity test of `test`; None where it has none."""
    base = of(test)
    if base is None:
        return None
    return next((t for t in tests if _same(t, base)), None)


@dataclass(frozen=True)
class StreamRate:
    """The stream a repeat runs beside its round trip: its rate, and what it was taken of."""

    rate: float  # samples a second; 0: as fast as it goes (`max`)
    capacity: float | None = None  # the capacity test's samples a second (median)
    source: str = ""  # which test measured it: `test-N`, and over how many repeats
    missing: str = ""  # why there is no rate: the repeat cannot run

    def record(self) -> dict:
        """What the manifest keeps of it, beside the repeat."""
        out: dict = {"rate_per_s": round(self.rate, 3)}
        if self.capacity is not None:
            out.update(capacity_per_s=round(self.capacity, 3), of=self.source)
        return out


def measured(results: str, number: int) -> list[float]:
    """The capacity test `number`'s receivers' samples a second, one per finished repeat,
    read from a results table's text."""
    per_repeat: dict[str, list[float]] = {}
    for row in csv.DictReader(io.StringIO(results)):
        if (row.get("test") == str(number) and row.get("kind") == "summary"
                and row.get("metric") == METRIC and str(row.get("role", "")).startswith("sub")):
            per_repeat.setdefault(row["repeat"], []).append(float(row["value"]))
    return [statistics.fmean(v) for v in per_repeat.values()]


def stream(test: Test, tests: Sequence[Test],
           rates: Callable[[int], list[float]]) -> StreamRate | None:
    """The stream of a repeat of `test`: None without one; `max` as fast as it goes; a share
    of the median its capacity test measured so far (its `missing` said where none did).
    `rates(number)`: what capacity test `number` measured so far, a value per finished
    repeat (`measured` of the run's results; the runner reads them once per new repeat)."""
    if not test.load:
        return None
    share = test.load_share
    if share is None:
        return StreamRate(rate=0.0)
    base = test_of(test, tests)
    if base is None:
        return StreamRate(0.0, missing=f"load={test.load} needs the path's capacity, and the run "
                      "holds no test of it (a run written before it was added)")
    got = [r for r in rates(base.number) if r > 0]
    where = f"test-{base.number}"
    if not got:
        return StreamRate(0.0, source=where, missing=f"load={test.load}: the path's capacity "
                      f"({where}, {test.engine} at {test.load_len} B) has no finished repeat "
                      "to take a share of")
    capacity = statistics.median(got)
    return StreamRate(rate=share * capacity, capacity=capacity,
                      source=f"{where}, median of {len(got)} repeat(s)")
