"""What every parser returns: measured values, and why a repeat failed if it did."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

SAMPLE = "sample"
SUMMARY = "summary"


class Value(NamedTuple):
    """One measured value (a NamedTuple: immutable, and cheap to make by the million)."""

    metric: str
    value: float
    unit: str
    kind: str = SUMMARY  # "sample" (one interval line) or "summary" (the whole repeat)
    t: float | None = None  # seconds into the repeat, samples only


class Trace(NamedTuple):
    """Many samples of one metric, kept as arrays (a long log parses without one object per
    number; `Parsed.all_values` turns them into values when they are written)."""

    metric: str
    unit: str
    t: Any  # numpy array: seconds (interval number) into the repeat
    values: Any  # numpy array
    seen: int = 0  # how many samples the log had, when fewer are kept (`Samples`)


# the interval samples of one metric a role keeps: an hour of seconds. A log with more (a
# day-long Perftest run) keeps every k-th, evenly (`thinning_step`); its summaries are the
# parser's, of every line, and stay exact
MAX_SAMPLES = 3600


def steady(seconds):
    """A per-second series without its first and last second (discovery, the stop: partial
    seconds), where it has three or more; else the whole of it. The one rule every parser
    reads an interval series' mean by."""
    return seconds[1:-1] if len(seconds) >= 3 else seconds


def thinning_step(n: int) -> int:
    """Of `n` samples every k-th is kept: k the smallest power of two that leaves at most
    MAX_SAMPLES (a power of two, so a log read a piece at a time is thinned as it is read,
    to the same samples). Pure."""
    k = 1
    while -(-n // k) > MAX_SAMPLES:
        k *= 2
    return k


class Samples:
    """One metric's interval samples, thinned as a long log is read: every k-th of those
    seen so far kept, k doubled (every other kept sample dropped) whenever more than
    MAX_SAMPLES would stay. Memory holds at most MAX_SAMPLES and one piece, whatever the
    log's length; the samples kept are those `thinning_step` keeps of the whole."""

    def __init__(self, metric: str, unit: str):
        self.metric, self.unit = metric, unit
        self.seen, self.step, self.kept = 0, 1, 0
        self._t: list[Any] = []
        self._v: list[Any] = []

    def add(self, t: Any, values: Any) -> None:
        """The next samples (numpy arrays of times and values), in the log's order."""
        first = -self.seen % self.step  # the first of them whose number is a multiple
        # copies, not views: a view would keep each piece's whole array alive
        self._t.append(t[first::self.step].copy())
        self._v.append(values[first::self.step].copy())
        self.kept += len(self._t[-1])
        self.seen += len(values)
        while self.kept > MAX_SAMPLES:
            import numpy as np

            t_all, v_all = np.concatenate(self._t)[::2], np.concatenate(self._v)[::2]
            self._t, self._v, self.step, self.kept = [t_all], [v_all], self.step * 2, len(t_all)

    def column(self) -> Trace | None:
        """The samples kept, or None when none was seen."""
        if not self.seen:
            return None
        import numpy as np

        return Trace(self.metric, self.unit, np.concatenate(self._t), np.concatenate(self._v),
                      self.seen)


@dataclass(frozen=True)
class Parsed:
    values: tuple[Value, ...] = ()
    failure: str | None = None  # why this role's output holds no valid result
    columns: tuple[Trace, ...] = ()  # further samples, as arrays

    def all_values(self) -> Iterator[Value]:
        """Every value: `values`, then the samples held in `columns`."""
        yield from self.values
        for col in self.columns:
            for t, v in zip(col.t.tolist(), col.values.tolist(), strict=True):
                yield Value(col.metric, v, col.unit, SAMPLE, t)

    def summary(self, metric: str) -> float | None:
        """The summary value of `metric`, or None."""
        for v in self.values:
            if v.kind == SUMMARY and v.metric == metric:
                return v.value
        return None
