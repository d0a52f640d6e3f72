"""What the hover readout says: every plotted series' value at the hovered x of one chart (the
logged point nearest to the hovered step: raw, and smoothed where smoothing applies), sorted by
value. No Qt here; resplot/data/readout.py lays the readings out, resplot/ui/crosshair.py shows
them.

At full resolution the nearest point is a drawn stored point, its value exactly as stored.
Zoomed out to an envelope, the value is still the logged one (resplot.data.views.value_at):
from the raw tile of that step when it is cached, which the hover asks for when it is not
(until it arrives, the nearest bucket extreme, and the readout says so); inside a stretch of
NaN it is NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from reslog.text import number
from resplot.data.decimate import in_order
from resplot.data.pages import Item
from resplot.data.views import value_at


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


def _x_and_steps(track) -> tuple[np.ndarray, np.ndarray]:
    """(x, step) pairs of this track's axis: its drawn points and, zoomed out, the middle of
    every bucket, which a stretch of NaN has too (it draws no point: the steps under the
    pointer there were read off the drawn points around it, clamped to the last finite one,
    2,000 steps before a NaN tail)."""
    xs, steps = track.x, track.view.steps
    mid = getattr(track, "x_mid", None)
    if track.view.level != 0 and mid is not None and len(mid) == len(track.view.mid_steps):
        xs, steps = np.concatenate([xs, mid]), np.concatenate([steps, track.view.mid_steps])
    ok = np.isfinite(xs)
    return xs[ok], steps[ok].astype(np.float64)


def _hovered_step(track, x: float) -> int:
    """The step under x on this track's axis."""
    xs, steps = in_order(*_x_and_steps(track))
    return round(float(np.interp(x, xs, steps)))


def _x_of(track, step: int) -> float:
    """Where `step` is on this track's axis."""
    xs, steps = _x_and_steps(track)
    steps, xs = in_order(steps, xs)
    return float(np.interp(step, steps, xs))


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
        step, at_x, raw, envelope = (
            int(view.steps[i]),
            float(track.x[i]),
            float(view.values[i]),
            False,
        )
        if view.level != 0:
            envelope = True
            cache = getattr(track, "cache", None)
            logged = None
            if cache is not None:
                logged = value_at(cache, item.ref, item.key, _hovered_step(track, x), view)
            if logged is not None and logged.exact:
                step, raw, envelope = logged.step, logged.value, False
                at_x = _x_of(track, step)
        smoothed = None
        if track.smoothed is not None and len(view.mid_steps):
            j = int(np.clip(np.searchsorted(view.mid_steps, step), 0, len(view.mid_steps) - 1))
            if j > 0 and abs(view.mid_steps[j - 1] - step) <= abs(view.mid_steps[j] - step):
                j -= 1
            smoothed = float(track.smoothed[j])
        out.append(Reading(item, step, at_x, raw, smoothed, envelope))

    def key(r: Reading) -> tuple[int, float]:
        v = r.smoothed if r.smoothed is not None else r.raw
        return (1, 0.0) if math.isnan(v) else (0, -v)

    return sorted(out, key=key)
