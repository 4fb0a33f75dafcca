"""A figure as the answer and the benchmarks print it (k8sdds.analysis.numbers)."""

from __future__ import annotations

import pytest

from k8sdds.analysis.numbers import three


@pytest.mark.parametrize(("value", "said"), [
    (9000, "9,000"), (11_134.7, "11,100"), (146.2, "146"), (8.543, "8.54"),
    (0.0866, "0.0866"), (1.0, "1"), (0.0, "0"), (999.6, "1,000"), (-5.5, "-5.5"),
    (float("nan"), "nan")])
def test_three_significant_digits_without_an_exponent(value, said):
    assert three(value) == said
