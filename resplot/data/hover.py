"""What the hover readout says: every plotted series' value at the hovered x of one chart (the
nearest drawn point: raw, and smoothed where smoothing applies), sorted by value. No Qt here;
resplot/data/readout.py lays the readings out, resplot/ui/crosshair.py shows them.

At full resolution the nearest point is a stored point, its value exactly as stored. Zoomed out
to an envelope, it is the nearest bucket extreme (also a stored point: the bucket's min or max),
and the readout says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reslog.text import number
from resplot.data.pages import Item


def value_text(value: float | None) -> str:
    """A value for a legend or readout: 4 significant digits ("" when unknown)."""
    return "" if value is None else number(value, 4)


@dataclass(frozen=True)
class Reading:
    item: Item
    step: int
    x: float
    raw: float
    smoothed: float | None
    envelope: bool  # the point is a bucket extreme (the view is zoomed out)


def _nearest(xs: np.ndarray, x: float) -> int | None:
    ok = np.flatnonzero(np.isfinite(xs))
    if len(ok) == 0:
        return None
    return int(ok[np.argmin(np.abs(xs[ok] - x))])


def readings(tracks: dict, x: float) -> list[Reading]:
    """One reading per track (Item -> Track of one chart) with data, sorted by value, highest
    first (the smoothed value where there is one); NaN readings last."""
    out = []
    for item, track in tracks.items():
        view = track.view
        if view is None or len(track.x) == 0 or len(track.x) != len(view.steps):
            continue
        i = _nearest(track.x, x)
        if i is None:
            continue
        step = int(view.steps[i])
        smoothed = None
        if track.smoothed is not None and len(view.mid_steps):
            j = int(np.clip(np.searchsorted(view.mid_steps, step), 0, len(view.mid_steps) - 1))
            if j > 0 and abs(view.mid_steps[j - 1] - step) <= abs(view.mid_steps[j] - step):
                j -= 1
            smoothed = float(track.smoothed[j])
        out.append(Reading(item, step, float(track.x[i]), float(view.values[i]), smoothed,
                           view.level > 0))  # fmt: skip

    def key(r: Reading) -> tuple[int, float]:
        v = r.smoothed if r.smoothed is not None else r.raw
        return (1, 0.0) if math.isnan(v) else (0, -v)

    return sorted(out, key=key)
