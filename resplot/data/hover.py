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
import weakref
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


class _Axis:
    """What a hover reads of one track's axis, computed once per drawn view (a move reads
    every track of a chart: at 100 runs, 200 sorts and copies a move were most of its time)."""

    __slots__ = ("by_step", "by_x", "finite_x", "of", "ok", "rising", "span")

    def __init__(self, track) -> None:
        # What it was computed from (a track's prepare assigns new arrays and a new view,
        # never edits them), weakly: a track not hovered again keeps no old view alive.
        self.of = tuple(_ref(o) for o in (track.x, track.view, getattr(track, "x_mid", None)))
        self.ok = np.flatnonzero(np.isfinite(track.x))
        self.finite_x = track.x[self.ok]
        self.rising = bool(np.all(self.finite_x[1:] >= self.finite_x[:-1]))
        xs = steps = np.empty(0)
        if track.view is not None and len(track.x) == len(track.view.steps):
            xs, steps = _x_and_steps(track)
        self.by_x = in_order(xs, steps)
        self.by_step = in_order(steps, xs)
        x_range = getattr(track, "x_range", None)
        self.span = x_range() if x_range is not None else None

    def fresh(self, track) -> bool:
        x, view, mid = (ref() for ref in self.of)
        return x is track.x and view is track.view and mid is getattr(track, "x_mid", None)


def _ref(obj):
    """A weak reference to `obj`, or a strong one where it takes none (None)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


_axes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # track -> _Axis


def _axis(track) -> _Axis:
    got = _axes.get(track)
    if got is None or not got.fresh(track):
        got = _axes[track] = _Axis(track)
    return got


def x_span(track) -> tuple[float, float] | None:
    """track.x_range() (its smallest and largest x), once per drawn view."""
    return _axis(track).span


def _nearest(axis: _Axis, x: float) -> int | None:
    """The index in track.x of the finite x nearest `x` (the first of equals, as argmin)."""
    if len(axis.ok) == 0:
        return None
    xs = axis.finite_x
    if not axis.rising or not math.isfinite(x):
        return int(axis.ok[np.argmin(np.abs(xs - x))])
    # Rising (a view's x almost always): the two neighbours of x, by the same float
    # distances argmin compares, the left one on a tie, the first of its equal values.
    j = int(np.searchsorted(xs, x))
    if j == len(xs) or (j > 0 and abs(xs[j - 1] - x) <= abs(xs[j] - x)):
        j = int(np.searchsorted(xs, xs[j - 1]))
    return int(axis.ok[j])


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


def _hovered_step(axis: _Axis, x: float) -> int:
    """The step under x on this track's axis."""
    xs, steps = axis.by_x
    return round(float(np.interp(x, xs, steps)))


def _x_of(axis: _Axis, step: int) -> float:
    """Where `step` is on this track's axis."""
    steps, xs = axis.by_step
    return float(np.interp(step, steps, xs))


def readings(tracks: dict, x: float) -> list[Reading]:
    """One reading per track (Item -> Track of one chart) with data, sorted by value, highest
    first (the smoothed value where there is one); NaN readings last."""
    out = []
    for item, track in tracks.items():
        view = track.view
        if view is None or len(track.x) == 0 or len(track.x) != len(view.steps):
            continue
        axis = _axis(track)
        i = _nearest(axis, x)
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
                logged = value_at(cache, item.ref, item.key, _hovered_step(axis, x), view)
            if logged is not None and logged.exact:
                step, raw, envelope = logged.step, logged.value, False
                at_x = _x_of(axis, step)
        smoothed = None
        if track.smoothed is not None and len(view.mid_steps):
            j = min(int(np.searchsorted(view.mid_steps, step)), len(view.mid_steps) - 1)
            if j > 0 and abs(view.mid_steps[j - 1] - step) <= abs(view.mid_steps[j] - step):
                j -= 1
            smoothed = float(track.smoothed[j])
        out.append(Reading(item, step, at_x, raw, smoothed, envelope))

    def key(r: Reading) -> tuple[int, float]:
        v = r.smoothed if r.smoothed is not None else r.raw
        return (1, 0.0) if math.isnan(v) else (0, -v)

    return sorted(out, key=key)
