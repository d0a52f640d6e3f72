"""A metric's value as text where one value stands alone (a legend's latest value, the hover's
readout and x): four significant digits, with an SI suffix from 10^4 up, the suffixes the
charts' tick labels use (resplot/draw/ticks.py): `2.957`, `0.00028`, `11.48k`, `428k`,
`8.378G`. Python's `.4g` alone wrote those last three `1.148e+04`, `4.28e+05`, `8.378e+09`
beside ticks labelled `12k` and `430k`."""

from __future__ import annotations

import math

SI = {3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}


def si_power(top: float) -> int:
    """The power of ten (3, 6, ... 15) whose SI suffix labels values up to `top` (>= 10^4)."""
    return min(15, 3 * math.floor(math.log10(top) / 3))


def short_value(value: float) -> str:
    """`value` to four significant digits, with an SI suffix from 10^4 up; nan and ±inf spelled
    as Python does."""
    if not math.isfinite(value):
        return str(value)
    top = abs(value)
    if top >= 1e4:
        power = si_power(top)
        mantissa = f"{value / 10**power:.4g}"
        if abs(float(mantissa)) >= 1000 and power < 15:  # 999.96k rounds up to 1000k
            power += 3
            mantissa = f"{value / 10**power:.4g}"
        return mantissa + SI[power]
    return f"{value:.4g}"
