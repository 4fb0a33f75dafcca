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


class Column(NamedTuple):
    """Many samples of one metric, kept as arrays (a long log parses without one object per
    number; `Parsed.all_values` turns them into values when they are written)."""

    metric: str
    unit: str
    t: Any  # numpy array: seconds (interval number) into the repeat
    values: Any  # numpy array


@dataclass(frozen=True)
class Parsed:
    values: tuple[Value, ...] = ()
    failure: str | None = None  # why this role's output holds no valid result
    columns: tuple[Column, ...] = ()  # further samples, as arrays

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
