"""Whether a change earns a word: better, worse, within noise, or no verdict. One rule for
the answer, the report's tables, the middlewares' lines and `k8sdds compare`: a change is
called better or worse only where it rests on intervals over repeats that do not overlap
(or a significance test over repeat values); with one repeat on either side there is no
interval, so the figure is shown and no word is said. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

WITHIN = "within noise"
NO_VERDICT = "no verdict"
# how a reader gets one, said on the first line of an answer that has none
HOW = "run with --repeats 3 (or more) for an interval and a verdict"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a mean over repeats and its 95 % interval (NaN: one
    repeat)."""

    mean: float
    low: float
    high: float
    repeats: int

    @property
    def interval(self) -> bool:
        """Whether an interval backs the mean (two repeats or more)."""
        return self.repeats >= 2 and not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def half_pct(self) -> float | None:
        """The half width of the interval in % of the mean (None: no interval)."""
        if not self.interval or not self.mean:
            return None
        return (self.high - self.low) / 2 / abs(self.mean) * 100

    @classmethod
    def of(cls, summary) -> Side:
        """The side a `stats.Summary` of repeat values gives."""
        return cls(summary.mean, summary.ci_low, summary.ci_high, summary.n)

    def apart(self, other: Side) -> bool:
        """The two intervals do not overlap."""
        return self.high < other.low or self.low > other.high


def noise(value: Side, base: Side, enough: bool = True) -> bool | None:
    """True: within noise (the intervals overlap, or `enough` is false: too few samples
    behind a percentile); False: the intervals are apart; None: no verdict (a side without
    an interval)."""
    if not (value.interval and base.interval):
        return None
    return not value.apart(base) or not enough


# whether a rise of a metric is better, by the words its name starts with; a metric not
# named here gets no better/worse word, only "changed"
RISE_IS_BETTER: tuple[tuple[str, bool], ...] = (
    ("throughput", True), ("samples_per_s", True), ("received", True),
    ("requests_per_s", True), ("latency_", False), ("p50", False), ("p99", False),
    ("lost", False), ("cpu", False))


def rise_is_better(metric: str) -> bool | None:
    """Whether a rise of `metric` is better (None: not known)."""
    return next((better for prefix, better in RISE_IS_BETTER if metric.startswith(prefix)),
                None)


def word(metric: str, change_pct: float, noise: bool | None) -> str:
    """The verdict on a change of `metric`, in a word or two."""
    if noise is None:
        return NO_VERDICT
    if noise:
        return WITHIN
    better = rise_is_better(metric)
    if better is None:
        return "changed"
    return "better" if (change_pct > 0) == better else "worse"
