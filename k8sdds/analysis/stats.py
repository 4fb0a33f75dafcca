"""Statistics over repeats: mean, spread, confidence intervals, significance (pure).

Means may be combined across repeats; percentiles never are: a percentile is reported per
repeat, or recomputed from the underlying distribution (see latency_cdf).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

UNSTABLE_CV = 0.10  # std >= 10 % of the mean: say the result is unstable


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float  # sample standard deviation (ddof=1); nan for n = 1
    ci_low: float  # 95 % confidence interval of the mean (Student's t); nan for n = 1
    ci_high: float

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean)."""
        return self.std / self.mean if self.mean and not math.isnan(self.std) else math.nan

    @property
    def unstable(self) -> bool:
        return not math.isnan(self.cv) and abs(self.cv) >= UNSTABLE_CV


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """Mean, standard deviation and the `confidence` interval of the mean."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    n = len(x)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if n == 1:
        return Summary(1, mean, math.nan, math.nan, math.nan)
    # Student's t quantile from scipy.special (stdtrit, what scipy.stats' t.ppf computes),
    # whose import is a third of scipy.stats' (a second of a command's start, here)
    from scipy.special import stdtrit

    std = float(x.std(ddof=1))
    half = float(stdtrit(n - 1, (1 + confidence) / 2)) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half)


@dataclass(frozen=True)
class Significance:
    test: str  # "welch" or "mannwhitney"
    p_value: float
    significant: bool  # p < alpha


def smallest_p(test: str, n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value `test` can give with these counts. Welch's t can reach
    any; Mann-Whitney's U, a rank test, at most 2 / C(n_a + n_b, n_a): 0.1 with 3 values a
    side, so it cannot call a change significant at 0.05 before 4 a side."""
    if test != "mannwhitney":
        return 0.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def significance(a: Sequence[float], b: Sequence[float], test: str = "welch",
                 alpha: float = 0.05) -> Significance | None:
    """Whether samples `a` and `b` differ (two-sided); None where the test cannot tell: fewer
    than 2 values a side, or too few for `test` to reach `alpha` at all (`smallest_p`)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or smallest_p(test, len(a), len(b)) >= alpha:
        return None
    from scipy import stats as sps

    if test == "mannwhitney":
        p = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    else:
        if np.all(a == a[0]) and np.all(b == b[0]):  # no spread at all: equal or not
            p = 1.0 if a[0] == b[0] else 0.0
        else:
            p = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
    return Significance(test, p, p < alpha)


QUANTILES = (("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))


def latency_cdf(intervals: Sequence[dict[str, float]], points: int = 200,
                ) -> tuple[np.ndarray, np.ndarray]:
    """The latency distribution of a repeat from its per-interval quantiles.

    ddsperf prints, per second, min/p50/p90/p99/max and a count, not raw samples. Each
    interval's CDF is taken as piecewise linear through those quantiles, and the repeat's CDF
    is their count-weighted mixture (exact at every printed quantile of every interval).
    Returns (x, F(x)).
    """
    usable = [iv for iv in intervals if iv.get("cnt", 0) > 0]
    if not usable:
        return np.array([]), np.array([])
    lo = min(iv["min"] for iv in usable)
    hi = max(iv["max"] for iv in usable)
    x = np.geomspace(max(lo, 1e-3), hi, points) if hi > lo else np.array([lo])
    total = sum(iv["cnt"] for iv in usable)
    f = np.zeros_like(x)
    for iv in usable:
        qs = [iv[k] for k, _ in QUANTILES]
        ps = [p for _, p in QUANTILES]
        f += iv["cnt"] * np.interp(x, np.maximum.accumulate(qs), ps)
    return x, f / total
