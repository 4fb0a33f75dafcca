"""A figure as a reader reads it: three significant digits, thousands grouped, no exponent
but for the tiniest (11,100 µs, not 1.11e+04; 0.0866 as it is). Pure."""

from __future__ import annotations

import math


def three(value: float) -> str:
    """`value` to three significant digits: `9,000`, `11,100`, `146`, `8.54`, `0.0866`."""
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.3g}")
    if abs(rounded) >= 100:
        return f"{rounded:,.0f}"
    return f"{rounded:.3g}"
