"""What the hover readout says: every plotted series' value at the hovered x of one chart (the
logged point nearest to the hovered step: raw, and smoothed where smoothing applies), sorted by
value. No Qt here; resplot/data/readout.py lays the readings out, resplot/ui/crosshair.py shows
them.

At full resolution the nearest point is a drawn stored point, its value exactly as stored.
Zoomed out to an envelope, the value is still the logged one (resplot.data.logged.value_at):
from the raw tile of that step when it is cached, which the hover asks for when it is not
(until it arrives, the nearest bucket extreme, and the readout says so); inside a stretch of
NaN it is NaN.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from resplot.data.decimate import in_order
from resplot.data.logged import value_at, values_at
from resplot.data.numbers import short_value
from resplot.data.pages import Item


def value_text(value: float | None, steady: bool = False) -> str:
    """A value for a legend or readout: 4 significant digits, `428k` ("" when unknown);
    `steady`: with its trailing zeros (a legend's latest value: resplot/data/numbers.py)."""
    return "" if value is None else short_value(value, steady)


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

    __slots__ = ("by_step", "by_x", "digest", "finite_x", "mid_steps", "of", "ok", "rising", "span")

    def __init__(self, track, digest: int | None = None) -> None:
        self.digest = _digest(track) if digest is None else digest
        self.bind(track)
        self.ok = np.flatnonzero(np.isfinite(track.x))
        self.finite_x = track.x[self.ok]
        self.rising = bool(np.all(self.finite_x[1:] >= self.finite_x[:-1]))
        xs = steps = np.empty(0)
        if track.view is not None and len(track.x) == len(track.view.steps):
            xs, steps = _x_and_steps(track)
        self.by_x = in_order(xs, steps)
        self.by_step = in_order(steps, xs)
        # The buckets' middles, where a smoothed value is read (the view's own array, not the
        # view: a track prepared again frees its old view).
        self.mid_steps = track.view.mid_steps if track.view is not None else np.empty(0)
        x_range = getattr(track, "x_range", None)
        self.span = x_range() if x_range is not None else None

    def bind(self, track) -> None:
        """Refer to the track's arrays now (the same content as those it was computed from)."""
        # What it was computed from (a track's prepare assigns new arrays and a new view,
        # never edits them), weakly: a track not hovered again keeps no old view alive.
        self.of = tuple(_ref(o) for o in (track.x, track.view, getattr(track, "x_mid", None)))
        self.mid_steps = track.view.mid_steps if track.view is not None else np.empty(0)

    def fresh(self, track) -> bool:
        x, view, mid = self.of
        return x() is track.x and view() is track.view and mid() is getattr(track, "x_mid", None)


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
        digest = _digest(track)
        if got is not None and got.digest == digest:
            # Prepared again with the same content (a page redraw that only brought other
            # series' tiles): the axis stands, pointed at the new arrays (rebuilding every
            # track's was the whole first move after each redraw: ~10-20 ms at 100 runs).
            got.bind(track)
        else:
            got = _axes[track] = _Axis(track, digest)
    return got


def _digest(track) -> int:
    """A hash of everything an _Axis is computed from (its arrays' bytes, the view's level)."""
    view = track.view
    arrays = [track.x, getattr(track, "x_mid", None)]
    if view is not None:
        arrays += [view.steps, view.mid_steps]
    parts = [None if a is None else (a.dtype.str, a.shape, a.tobytes()) for a in arrays]
    return hash((None if view is None else view.level, *parts))


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


def readings_each(tracks: dict, x: float) -> list[Reading]:
    """`readings`, a track at a time (what the batched lookup must agree with; tests)."""
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

    return _by_value(out)


def _by_value(found: list[Reading]) -> list[Reading]:
    def key(r: Reading) -> tuple[int, float]:
        v = r.smoothed if r.smoothed is not None else r.raw
        return (1, 0.0) if math.isnan(v) else (0, -v)

    return sorted(found, key=key)


def _keys(tracks: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Complex keys: the track's number, then the value (set, not multiplied: 1j * inf has a
    NaN real part)."""
    key = np.empty(len(at), np.complex128)
    key.real, key.imag = tracks, at
    return key


class _Runs:
    """Sorted arrays of several tracks laid end to end, each keyed by its track's number as the
    real part of a complex key (numpy orders complex numbers by real part, then imaginary): one
    searchsorted finds a place in every track's own array at once."""

    __slots__ = ("end", "key", "start", "values")

    def __init__(self, arrays: list[np.ndarray], values: list[np.ndarray] | None = None) -> None:
        lengths = np.array([len(a) for a in arrays], np.int64)
        self.end = np.cumsum(lengths)
        self.start = self.end - lengths
        self.key = _keys(
            np.repeat(np.arange(len(arrays)), lengths),
            np.concatenate([np.asarray(a, np.float64) for a in arrays]),
        )
        self.values = (
            np.concatenate([np.asarray(v, np.float64) for v in values]) if values else np.empty(0)
        )

    def find(self, tracks: np.ndarray, at: np.ndarray, side: str = "left") -> np.ndarray:
        """np.searchsorted(array, at, side) of each track, as an index into the joined arrays."""
        return np.searchsorted(self.key, _keys(tracks, at), side=side)

    def interp(self, tracks: np.ndarray, at: np.ndarray) -> np.ndarray:
        """np.interp(at, array, values) of each track (none empty), by numpy's own steps: the
        end values outside, the value itself at a point, else the line between two."""
        xs, ys = self.key.imag, self.values
        first, last = self.start[tracks], self.end[tracks] - 1
        j = self.find(tracks, at, "right") - 1  # the last point at or left of `at`
        inside = (j >= first) & (j < last)
        j0 = np.clip(j, first, last)
        j1 = np.minimum(j0 + 1, last)
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = (ys[j1] - ys[j0]) / (xs[j1] - xs[j0])
            between = slope * (at - xs[j0]) + ys[j0]
        out = np.where(inside & (xs[j0] != at), between, ys[j0])
        return np.where(j < first, ys[first], out)


class _Batch:
    """What one move reads of a chart's tracks, joined (built once per set of drawn views)."""

    __slots__ = ("axes", "by_step", "by_x", "mids", "near", "ok", "rising")

    def __init__(self, axes: list[_Axis]) -> None:
        self.axes = axes  # (held: their ids key the batch)
        empty = np.empty(0)
        self.rising = np.array([a.rising and len(a.ok) > 0 for a in axes], bool)
        self.near = _Runs([a.finite_x if a.rising else empty for a in axes])
        # Where each of `near`'s x is in its track's x (one index a move, not a loop).
        none = np.empty(0, np.int64)
        self.ok = np.concatenate([a.ok if a.rising else none for a in axes] + [none])
        self.by_x = _Runs([a.by_x[0] for a in axes], [a.by_x[1] for a in axes])
        self.by_step = _Runs([a.by_step[0] for a in axes], [a.by_step[1] for a in axes])
        self.mids = _Runs([a.mid_steps for a in axes])

    def nearest(self, tracks: np.ndarray, x: float) -> np.ndarray:
        """_nearest of each (rising, non-empty) track: the index in its x."""
        near, n = self.near, len(tracks)
        xs = near.key.imag
        first, end = near.start[tracks], near.end[tracks]
        j = near.find(tracks, np.full(n, x))
        at_end = j == end
        jr = np.minimum(j, end - 1)
        left = at_end | ((j > first) & (np.abs(xs[j - 1] - x) <= np.abs(xs[jr] - x)))
        # The left neighbour: the first of its equal values.
        return self.ok[np.where(left, near.find(tracks, xs[np.maximum(j - 1, first)]), j)]

    def nearest_mid(self, tracks: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """Per track, the index of the bucket middle nearest `steps` (the left one on a tie;
        past the last, the last)."""
        mids = self.mids
        ms = mids.key.imag
        first, last = mids.start[tracks], mids.end[tracks] - 1
        j = np.minimum(mids.find(tracks, steps), last)
        left = (j > first) & (np.abs(ms[j - 1] - steps) <= np.abs(ms[j] - steps))
        return j - left - first


_batches: dict[tuple[int, ...], _Batch] = {}  # the last few charts read
KEEP_BATCHES = 8


def _batch(axes: list[_Axis]) -> _Batch:
    key = tuple(map(id, axes))
    got = _batches.pop(key, None)
    if got is None:
        got = _Batch(axes)
        while len(_batches) >= KEEP_BATCHES:
            _batches.pop(next(iter(_batches)))
    _batches[key] = got  # the newest last
    return got


def _signature(tracks: dict) -> tuple[int, ...]:
    """The identities of everything `readings` reads of a chart's tracks (a track's prepare
    assigns new arrays and a new view, never edits them)."""
    held: list = []
    for item, t in tracks.items():
        held += (
            item,
            t,
            t.x,
            t.view,
            t.smoothed,
            getattr(t, "x_mid", None),
            getattr(t, "cache", None),
        )
    return tuple(map(id, held))


class _Chart:
    """One chart's tracks with data, their arrays joined (built once per set of drawn views):
    a move then picks every series' nearest point by one fancy index (at 100 runs a Python
    loop over 200 series, reading numpy scalars, was most of `readings`)."""

    __slots__ = (
        "axes",
        "batch",
        "cached",
        "ends",
        "held",
        "items",
        "level",
        "sig",
        "smooth",
        "smoothed",
        "smoothed_at",
        "start",
        "steps",
        "values",
        "views",
        "x",
    )

    def __init__(self, tracks: dict, sig: tuple[int, ...]) -> None:
        self.sig = sig
        self.ends: dict | None = None  # chart_ends, when asked
        # Held so that the ids in `sig` stay theirs while this is kept.
        self.held = [
            (item, t, t.x, t.view, t.smoothed, getattr(t, "x_mid", None), getattr(t, "cache", None))
            for item, t in tracks.items()
        ]
        self.items, self.views, self.axes = [], [], []
        for item, track in tracks.items():
            view = track.view
            if view is None or len(track.x) == 0 or len(track.x) != len(view.steps):
                continue
            self.items.append((item, track))
            self.views.append(view)
            self.axes.append(_axis(track))
        if not self.items:
            return
        self.batch = _batch(self.axes)
        lengths = np.array([len(v.steps) for v in self.views], np.int64)
        self.start = np.cumsum(lengths) - lengths
        self.steps = np.concatenate([np.asarray(v.steps).astype(np.int64) for v in self.views])
        self.x = np.concatenate([np.asarray(t.x, np.float64) for _i, t in self.items])
        self.values = np.concatenate([np.asarray(v.values, np.float64) for v in self.views])
        self.level = np.array([v.level != 0 for v in self.views], bool)
        self.cached = np.array([getattr(t, "cache", None) is not None for _i, t in self.items])
        self.smooth = np.array(
            [
                t.smoothed is not None and len(v.mid_steps) > 0
                for (_i, t), v in zip(self.items, self.views, strict=True)
            ],
            bool,
        )
        sm = [
            np.asarray(t.smoothed, np.float64) if ok else np.empty(0)
            for (_i, t), ok in zip(self.items, self.smooth, strict=True)
        ]
        lengths = np.array([len(a) for a in sm], np.int64)
        self.smoothed_at = np.cumsum(lengths) - lengths
        self.smoothed = np.concatenate([*sm, np.empty(0)])


_charts: dict[int, _Chart] = {}  # id(tracks) -> the last few charts read
KEEP_CHARTS = 4


def _chart(tracks: dict) -> _Chart:
    sig = _signature(tracks)
    got = _charts.pop(id(tracks), None)
    if got is None or got.sig != sig:
        got = _Chart(tracks, sig)
        while len(_charts) >= KEEP_CHARTS:
            _charts.pop(next(iter(_charts)))
    _charts[id(tracks)] = got  # the newest last
    return got


def forget(charts: list[dict]) -> None:
    """Drop what is kept of these charts' tracks (a page giving back its charts: the kept
    arrays held the tracks, and so their axes, alive)."""
    for tracks in charts:
        _charts.pop(id(tracks), None)


def readings(tracks: dict, x: float) -> list[Reading]:
    """One reading per track (Item -> Track of one chart) with data, sorted by value, highest
    first (the smoothed value where there is one); NaN readings last. Every track of the chart
    is read at once (a move reads them all: at 100 runs, 200 lookups one by one were most of
    a move's time); `readings_each` is the same a track at a time."""
    chart = _chart(tracks)
    items, views, axes = chart.items, chart.views, chart.axes
    if not items:
        return []
    batch = chart.batch
    n = len(items)
    index = np.full(n, -1, np.int64)
    fast = np.flatnonzero(batch.rising) if math.isfinite(x) else np.empty(0, np.int64)
    if len(fast):
        index[fast] = batch.nearest(fast, x)
    for k in np.flatnonzero(index < 0).tolist():
        i = _nearest(axes[k], x)
        index[k] = -2 if i is None else i
    found = index >= 0
    at = chart.start + np.maximum(index, 0)
    # Per track as Python values (200 numpy scalars a move cost more than the lookups).
    idx = index.tolist()
    steps = chart.steps[at].tolist()
    at_x = chart.x[at].tolist()
    raw = chart.values[at].tolist()
    envelope = (chart.level & found).tolist()
    # Zoomed out: the logged value at the hovered step, from its raw tile.
    out_k = np.flatnonzero(chart.level & found & chart.cached).tolist()
    if out_k:
        ks = np.array(out_k, np.int64)
        hovered = np.round(batch.by_x.interp(ks, np.full(len(ks), x))).astype(np.int64)
        step_of = dict(zip(out_k, hovered.tolist(), strict=True))
        by_cache: dict[int, list[int]] = {}
        for k in out_k:
            by_cache.setdefault(id(items[k][1].cache), []).append(k)
        exact: list[int] = []
        for group in by_cache.values():
            cache = items[group[0]][1].cache
            queries = [(items[k][0].ref, items[k][0].key, step_of[k], views[k]) for k in group]
            for k, logged in zip(group, values_at(cache, queries), strict=True):
                if logged is not None and logged.exact:
                    steps[k], raw[k], envelope[k] = logged.step, logged.value, False
                    exact.append(k)
        if exact:
            ke = np.array(exact, np.int64)
            xs = batch.by_step.interp(ke, np.array([steps[k] for k in exact], np.float64))
            for k, value in zip(exact, xs.tolist(), strict=True):
                at_x[k] = value
    smoothed: list[float | None] = [None] * n
    ks = np.flatnonzero(chart.smooth & found)
    if len(ks):
        mids = batch.nearest_mid(ks, np.array(steps, np.float64)[ks])
        values = chart.smoothed[chart.smoothed_at[ks] + mids].tolist()
        for k, value in zip(ks.tolist(), values, strict=True):
            smoothed[k] = value
    out = [
        Reading(items[k][0], steps[k], at_x[k], raw[k], smoothed[k], envelope[k])
        for k in range(n)
        if idx[k] >= 0
    ]
    return _by_value(out)


def chart_ends(tracks: dict) -> dict:
    """Each track's last x with data (Item -> x), for the readout's "ended" rows (once per set
    of drawn views: the kept chart's)."""
    chart = _chart(tracks)
    if chart.ends is None:
        chart.ends = {
            item: span[1] for item, t in tracks.items() if (span := x_span(t)) is not None
        }
    return dict(chart.ends)
