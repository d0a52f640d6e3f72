"""Tick labels that carry their own scale, and log axes that always label at least two ticks.

matplotlib's default formatter moves a scale out of the labels into an offset text above the
axis (`1e6`, `1e-5`, `1e-15+3.6e-1`), where it sat on the chart's title, in the window and in
snapshots. Here every label says its whole value, as compactly as the ticks allow: `1.5M`,
`430k`, `3e-4`, `0.25`. A log axis over less than a decade (a loss from 2.4 to 2.9) got one
labelled tick or none; ReadableLogLocator then places plain ticks between the decades.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from matplotlib.ticker import Formatter, LogLocator, MaxNLocator

from resplot.data.numbers import SI, short_value, si_power

MAX_DECIMALS = 6


def _smallest_gap(values: Sequence[float]) -> float:
    """The smallest distance between two different values (0 where there are none)."""
    gaps = [b - a for a, b in itertools.pairwise(sorted(set(values))) if b > a]
    return min(gaps) if gaps else 0.0


def _decimals(values: Sequence[float]) -> int:
    """The fewest decimals that tell the values apart (and show each within a tenth of the
    smallest gap between them)."""
    vals = sorted(set(values))
    gap = _smallest_gap(vals)
    for d in range(MAX_DECIMALS + 1):
        texts = [f"{v:.{d}f}" for v in vals]
        close = all(abs(float(t) - v) <= gap / 10 for t, v in zip(texts, vals, strict=True))
        if len(set(texts)) == len(vals) and (gap == 0.0 or close):
            return d
    return MAX_DECIMALS


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def compact_labels(values: Sequence[float]) -> list[str]:
    """Labels for tick values, one style for all of them: SI suffixes from 10^4 up
    (`12.5k`, `1.5M`), powers of ten below 10^-3 (`3e-4`, `2.5e-5`), plain numbers between."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ["" for _ in values]
    top = max(abs(v) for v in finite)
    if top >= 1e4:
        power = si_power(top)
        d = _decimals([v / 10**power for v in finite])
        return [
            _strip(f"{v / 10**power:.{d}f}") + SI[power] if math.isfinite(v) and v else "0"
            for v in values
        ]
    if top < 1e-3:
        parts = [
            (v / 10 ** math.floor(math.log10(abs(v))), math.floor(math.log10(abs(v))))
            if math.isfinite(v) and v
            else None
            for v in values
        ]
        gap = _smallest_gap(finite)
        # As few mantissa digits as keep the values apart, each within a tenth of the
        # smallest gap (one digit labelled ticks at 2.5e-5 and 7.5e-5 `2e-5` and `7e-5`).
        for digits in range(MAX_DECIMALS + 1):
            out = ["0" if p is None else f"{_strip(f'{p[0]:.{digits}f}')}e{p[1]}" for p in parts]
            close = all(
                abs(float(text) - v) <= gap / 10
                for text, v in zip(out, values, strict=True)
                if math.isfinite(v)
            )
            if len(set(out)) == len(set(values)) and (gap == 0.0 or close):
                break
        return out
    if len(set(finite)) == 1:
        return [f"{v:.4g}" if math.isfinite(v) else "" for v in values]
    d = _decimals(finite)
    return [f"{v:.{d}f}" if math.isfinite(v) else "" for v in values]


class CompactFormatter(Formatter):
    """compact_labels as a matplotlib formatter: no offset text, ever."""

    def __init__(self) -> None:
        self.labels: dict[float, str] = {}

    def format_ticks(self, values):
        labels = compact_labels(list(values))
        self.labels = dict(zip(values, labels, strict=True))
        return labels

    def __call__(self, x, pos=None) -> str:
        if x in self.labels:
            return self.labels[x]
        return compact_labels([x])[0]

    def get_offset(self) -> str:
        return ""

    def format_data_short(self, value) -> str:
        """One value where the pointer is (the hover's x, the toolbar's coordinates): four
        significant digits, `6.342G`, `12.35k`, `0.0125`. A tick's style, made for values
        a tick apart, said `6G` for a hover anywhere between 5.5 and 6.5 billion tokens."""
        return short_value(value)


class ReadableLogLocator(LogLocator):
    """Major ticks at 1, 2, 3, 5 × 10^k when the axis spans about a decade (losses), fewer per
    decade as it spans more, so that labels never run into each other; and at least two ticks
    in view: over less than a decade (2.4 to 2.9), every 1..9 × 10^k, else evenly spaced plain
    values (2.5, 2.6, 2.7...)."""

    def __init__(self) -> None:
        super().__init__(base=10, subs=(1.0, 2.0, 3.0, 5.0))

    def tick_values(self, vmin, vmax):
        if vmin > 0 and vmax > 0:
            lo, hi = sorted((vmin, vmax))
            decades = abs(np.log10(hi) - np.log10(lo))
            subs = (
                (1.0, 2.0, 3.0, 5.0) if decades <= 1.5 else (1.0, 3.0) if decades <= 2.5 else (1.0,)
            )
            self.set_params(subs=subs)
            ticks = super().tick_values(vmin, vmax)
            if np.count_nonzero((ticks >= lo) & (ticks <= hi)) >= 2:
                return ticks
            self.set_params(subs=tuple(float(s) for s in range(1, 10)))
            ticks = super().tick_values(vmin, vmax)
            if np.count_nonzero((ticks >= lo) & (ticks <= hi)) >= 2:
                return ticks
            return MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        return super().tick_values(vmin, vmax)
