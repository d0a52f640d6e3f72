"""A metric's value as text where one value stands alone (a legend's latest value, the hover's
readout and x): four significant digits, with an SI suffix from 10^4 up, the suffixes the
charts' tick labels use (resplot/draw/ticks.py): `2.957`, `0.00028`, `11.48k`, `428k`,
`8.378G`. Python's `.4g` alone wrote those last three `1.148e+04`, `4.28e+05`, `8.378e+09`
beside ticks labelled `12k` and `430k`.

A value that streams in (a chart legend's latest value) keeps its trailing zeros, `2.300`,
`428.0k`: its text keeps its width from poll to poll, so the legend neither changes size nor
is laid out again each time a value happens to end in a zero (resplot/draw/legend_bitmap.py)."""

from __future__ import annotations

import math

SI = {3: "k", 6: "M", 9: "G", 12: "T", 15: "P"}


def si_power(top: float) -> int:
    """The power of ten (3, 6, ... 15) whose SI suffix labels values up to `top` (>= 10^4)."""
    return min(15, 3 * math.floor(math.log10(top) / 3))


def short_value(value: float, steady: bool = False) -> str:
    """`value` to four significant digits, with an SI suffix from 10^4 up; nan and ±inf spelled
    as Python does. `steady`: its trailing zeros kept (the module's docstring)."""
    if not math.isfinite(value):
        return str(value)
    spec = "#.4g" if steady else ".4g"
    top = float(f"{abs(value):.4g}")  # as rounded: 999,960 is 1M, 9,999.6 is 10k
    power = si_power(top) if top >= 1e4 else 0
    # The alternate form keeps a point after a whole number of four digits ("3960.").
    return format(value / 10**power, spec).removesuffix(".") + SI.get(power, "")
