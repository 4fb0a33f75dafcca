"""What every parser returns: measured values, and why a repeat failed if it did."""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE = "sample"
SUMMARY = "summary"


@dataclass(frozen=True)
class Value:
    metric: str
    value: float
    unit: str
    kind: str = SUMMARY  # "sample" (one interval line) or "summary" (the whole repeat)
    t: float | None = None  # seconds into the repeat, samples only


@dataclass(frozen=True)
class Parsed:
    values: tuple[Value, ...] = ()
    failure: str | None = None  # why this role's output holds no valid result

    def summary(self, metric: str) -> float | None:
        """The summary value of `metric`, or None."""
        for v in self.values:
            if v.kind == SUMMARY and v.metric == metric:
                return v.value
        return None
