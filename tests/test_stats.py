"""Statistics on known data (hand-computed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from k8sdds.analysis.stats import latency_cdf, significance, smallest_p, summarize


def test_confidence_interval_by_hand():
    # x = 10, 12, 14: mean 12, s = 2, t(0.975, 2) = 4.302653, half = 4.302653 * 2 / sqrt(3)
    s = summarize([10, 12, 14])
    assert s.n == 3 and s.mean == 12 and s.std == pytest.approx(2.0)
    half = 4.302653 * 2 / math.sqrt(3)
    assert s.ci_low == pytest.approx(12 - half, rel=1e-5)
    assert s.ci_high == pytest.approx(12 + half, rel=1e-5)
    assert s.cv == pytest.approx(2 / 12) and s.unstable  # 16.7 % >= 10 %


def test_stable_and_single_values():
    assert not summarize([100, 101, 99, 100]).unstable
    one = summarize([5.0])
    assert one.n == 1 and one.mean == 5 and math.isnan(one.ci_low) and not one.unstable
    assert summarize([]).n == 0


def test_clearly_different_samples_are_significant():
    a = [100, 101, 99, 100, 102]
    b = [80, 81, 79, 80, 82]
    for test in ("welch", "mannwhitney"):
        sig = significance(a, b, test)
        assert sig.significant and sig.p_value < 0.05 and sig.test == test


def test_clearly_equal_samples_are_not():
    rng = np.random.default_rng(1)
    a = rng.normal(100, 1, 20)
    b = rng.normal(100, 1, 20)
    assert not significance(a, b).significant
    assert not significance(a, b, "mannwhitney").significant


def test_too_few_values_give_no_verdict():
    assert significance([1.0], [2.0, 3.0]) is None


def test_mann_whitney_cannot_judge_three_repeats_a_side():
    """Three far-apart repeats a side: Welch calls it; Mann-Whitney's smallest two-sided p
    is 2 / C(6, 3) = 0.1, so it cannot, and says so (None) instead of 'not significant'."""
    a, b = [100, 101, 99], [80, 81, 79]
    assert significance(a, b, "welch").significant
    assert smallest_p("mannwhitney", 3, 3) == pytest.approx(0.1)
    assert significance(a, b, "mannwhitney") is None
    assert smallest_p("mannwhitney", 4, 4) == pytest.approx(2 / 70)
    assert significance(a + [100], b + [80], "mannwhitney").significant


def test_no_spread_equal_and_unequal():
    assert significance([5, 5], [5, 5]).p_value == 1.0
    assert significance([5, 5], [6, 6]).significant


def test_latency_cdf_passes_through_every_printed_quantile():
    iv = {"min": 10, "p50": 20, "p90": 40, "p99": 80, "max": 100, "cnt": 1000}
    x, f = latency_cdf([iv], points=2000)
    assert f[0] == pytest.approx(0, abs=1e-9) and f[-1] == pytest.approx(1)
    for q, p in ((20, 0.5), (40, 0.9), (80, 0.99)):
        assert np.interp(q, x, f) == pytest.approx(p, abs=0.01)
    assert np.all(np.diff(f) >= 0)


def test_latency_cdf_weights_intervals_by_count():
    fast = {"min": 1, "p50": 2, "p90": 3, "p99": 4, "max": 5, "cnt": 900}
    slow = {"min": 10, "p50": 20, "p90": 30, "p99": 40, "max": 50, "cnt": 100}
    x, f = latency_cdf([fast, slow], points=4000)
    assert np.interp(5, x, f) == pytest.approx(0.9, abs=0.01)  # all of fast, none of slow
