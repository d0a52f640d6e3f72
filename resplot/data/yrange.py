"""The y range of a chart that ignores outliers (TensorBoard's "ignore outliers in chart
scaling"), on by default for losses: the loss at step 0 (10 and more, against 2-3 after a few
hundred steps) no longer squeezes the whole curve into the bottom tenth. No Qt here.

The range runs from the smallest value to the 99th percentile of the values drawn (per pixel
column after decimation, so roughly uniform in x: one spike or the first 1 % of the x range),
padded by 5 %, on a log axis in log space. Nothing is hidden: the note on the chart says the
range is clipped, and the toolbar's "ignore outliers" turns it off.

A placeholder logged before training has a value (nanoGPT logs `mfu = -100` at iteration 0, its
running MFU's -1 before the first measurement) is left out of every line chart's y range: the
series' first values, all equal and negative, where every later value is >= 0 (a quantity that
cannot be negative, given a sentinel). The chart's note says so; the point is still drawn.
"""

from __future__ import annotations

import numpy as np

QUANTILE = 0.99
PAD = 0.05
# A range this small against its values is rounding, not data (an EMA of a constant: its
# values a few ULPs apart): flat. Padded by PAD of it, a zoomed chart's y axis spanned 1e-17
# and labelled every tick 0.200000 (a step time of exactly 0.2 s, smoothed).
FLAT = 1e-12


def _flat(lo: float, hi: float) -> bool:
    return hi - lo <= FLAT * max(abs(lo), abs(hi))


def robust_limits(values: np.ndarray, log: bool = False) -> tuple[float, float] | None:
    """(low, high) that leave out the top 1 % of `values`; None when that clips nothing
    worth it (the full range is less than 1.5× the robust one) or there is too little data."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if log:
        v = np.log10(v[v > 0])
    if len(v) < 20:
        return None
    lo, hi, top = float(v.min()), float(np.quantile(v, QUANTILE)), float(v.max())
    if _flat(lo, top) or hi <= lo or (top - lo) < 1.5 * (hi - lo):
        return None
    pad = PAD * (hi - lo)
    lo, hi = lo - pad, hi + pad
    return (10**lo, 10**hi) if log else (lo, hi)


# A placeholder is at most this many leading points (nanoGPT's first 5 iterations at most).
PLACEHOLDER_POINTS = 5


def placeholder_lead(values: np.ndarray) -> int:
    """How many of a series' first `values` are a placeholder (0: none): a run of at most
    PLACEHOLDER_POINTS equal negative values, followed by at least two finite values, none
    negative."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 3 or not v[0] < 0:
        return 0
    k = int(np.argmax(v != v[0])) if np.any(v != v[0]) else len(v)
    rest = v[k:][np.isfinite(v[k:])]
    if k > PLACEHOLDER_POINTS or len(rest) < 2 or rest.min() < 0:
        return 0
    return k


def padded(values: np.ndarray, log: bool = False) -> tuple[float, float] | None:
    """(low, high) of the finite `values` padded by 5 % (in log space on a log axis)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if log:
        v = np.log10(v[v > 0])
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    pad = PAD * (hi - lo) if not _flat(lo, hi) else 0.05 * max(abs(lo), 1e-12)
    lo, hi = lo - pad, hi + pad
    return (10**lo, 10**hi) if log else (lo, hi)


# -- the y range of a zoomed chart (kept apart from the rule above, which it uses as it is) ----
def visible_limits(
    values: np.ndarray, log: bool = False, robust: bool = False
) -> tuple[tuple[float, float] | None, bool]:
    """(low, high) that fit `values` (the points drawn inside a zoomed x range), padded by
    PAD as matplotlib's margins are; with `robust` the rule above where it applies. Also
    whether the range leaves outliers out. (None, False) when nothing is there to fit."""
    v = np.asarray(values, dtype=np.float64)
    if robust:
        limits = robust_limits(v, log=log)
        if limits is not None:
            return limits, True
    v = v[np.isfinite(v)]
    if log:
        v = np.log10(v[v > 0])
    if len(v) == 0:
        return None, False
    lo, hi = float(v.min()), float(v.max())
    pad = PAD * (hi - lo) if not _flat(lo, hi) else (0.05 * abs(lo) if lo else 0.5)
    lo, hi = lo - pad, hi + pad
    return ((10**lo, 10**hi) if log else (lo, hi)), False
