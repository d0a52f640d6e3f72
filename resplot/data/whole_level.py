"""A settled series' whole level worked out once, so that a zoom or a pan over it is a slice.

A zoom to cached data used to build each series' view again from its tiles: look them up
(~45 a view for a sparse key such as validation loss, whose raw tiles hold a point or two),
concatenate their columns, work out the buckets' lines (~40 array operations), then smooth
the view from a warm-up read before it. On the Training page of a 12-run sweep that was ~18
ms of a ~78 ms zoom (scripts/bench/bench_zoom_page.py). Each bucket's line depends on that
bucket alone and the view of a range is the buckets (points) overlapping it, so a view of any
range at a level is a slice of the view of the whole level: kept once per series and level,
a zoom costs two binary searches and a slice of each array (views of the kept arrays, which
are read-only).

The smoothed curve is kept the same way, from the series' first point (resplot/data/smoothing.py
starts a zoomed view's EMA far enough before it that the points left out weigh under
WARMUP_LEFT: the curve of the whole differs from that by less, and is the curve at every zoom).

Only settled series are kept whole: a series whose tiles have not changed between two asks (a
live run's move at every poll; their views go on being built per poll, with the newest buckets
worked out alone: ViewMemo), and whose level holds at most WHOLE_ROWS points or buckets. A
view reaches the series' neighbouring point past each edge only as far as EDGE_TILES tiles
off, as a view gathered from tiles does, so both give the same arrays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from resplot.data.smoothing import smooth, smooth_buckets
from resplot.data.view_columns import (
    POINT_FIELDS,
    SeriesView,
    bucket_cut,
    concat_tiles,
    every_bucket,
    raw_cut,
    raw_view,
)
from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO, N

# A whole level is kept up to this many points (raw) or buckets: a 500k-step run at level 1
# (128 steps a bucket), a sparse key's raw points. Its view takes ~21 numbers a bucket (three
# points and the per-bucket arrays): ≤ ~0.7 MB a series, against the tiles' own ~0.13 MB.
WHOLE_ROWS = 4096


@dataclass
class WholeLevel:
    """One series' view of its whole span at `level`, built from the tiles as they were when
    the cache's change count for the series was `changes`."""

    level: int
    changes: int
    view: SeriesView
    starts: np.ndarray  # per bucket, its first point's index in view.steps; then the count
    tiles: frozenset  # the tiles it was built from (counted in view while it is read)
    unit: float
    curve: tuple = ()  # (smoothing weight, the whole's smoothed curve): the last one asked


def rows_at(summary, level: int) -> int:
    """At most how many points (raw) or buckets the series holds at `level`."""
    agg = summary.agg
    if level == 0:
        return int(agg[N])
    span = buckets.bucket_of(agg[STEP_HI], level) - buckets.bucket_of(agg[STEP_LO], level) + 1
    return int(min(agg[N], span))


def build(cache, ref, key: str, summary, level: int, changes: int, unit: float):
    """The series' WholeLevel at `level`, or None where one of its tiles is not cached."""
    agg = summary.agg
    ends = buckets.tiles_for(level, agg[STEP_LO], agg[STEP_HI])
    tiles, missing = cache.tiles(ref, key, level, ends, every_missing=False)
    if missing:
        return None
    cols = concat_tiles(tiles, level)
    if level == 0:
        view = raw_view(cols, agg[STEP_LO], agg[STEP_HI], 0)  # every point: its ends are these
        starts = np.arange(len(view.steps) + 1)
    else:
        view = every_bucket(cols, level, level)
        at = np.searchsorted(view.steps, view.first_steps, side="left")
        starts = np.append(at, len(view.steps))
    for f in dataclasses.fields(SeriesView):
        arr = getattr(view, f.name)
        if isinstance(arr, np.ndarray):
            arr.flags.writeable = False  # sliced into every view of the series: never changed
    keys = cache.tile_keys(ref, key, [(level, i) for i in ends])
    return WholeLevel(level, changes, view, starts, keys, unit)


def cut(whole: WholeLevel, lo: int, hi: int, edge_tiles: int) -> SeriesView:
    """The view of steps [lo, hi] (within the series): the points or buckets overlapping it
    and the neighbouring one past each end, where that lies within `edge_tiles` tiles of those
    covering [lo, hi] (views.EDGE_TILES: as far as a view gathered from tiles looks)."""
    v, level = whole.view, whole.level
    if level == 0:
        a, b = raw_cut(v.steps, lo, hi)
        first, last = v.steps, v.steps
    else:
        a, b = bucket_cut({"step_lo": v.first_steps, "step_hi": v.last_steps}, lo, hi)
        first, last = v.first_steps, v.last_steps
    span = buckets.tiles_for(level, lo, hi)
    # A neighbour outside the view's tiles that a view gathered from tiles would not reach.
    if a < b and last[a] < lo and _tile(last[a], level) < span.start - edge_tiles:
        a += 1
    if a < b and first[b - 1] > hi and _tile(first[b - 1], level) >= span.stop + edge_tiles:
        b -= 1
    p, q = int(whole.starts[a]), int(whole.starts[b])
    out = SeriesView(
        **{
            f.name: _slice(getattr(v, f.name), f.name, a, b, p, q)
            for f in dataclasses.fields(SeriesView)
        }
    )
    out.origin = (whole, a, b)
    return out


def _tile(step, level: int) -> int:
    return buckets.tile_of(buckets.bucket_of(int(step), level))


def _slice(arr, name: str, a: int, b: int, p: int, q: int):
    if not isinstance(arr, np.ndarray):
        return arr
    return arr[p:q] if name in POINT_FIELDS else arr[a:b]


def smoothed(whole: WholeLevel, weight: float) -> np.ndarray:
    """The EMA of the whole level (per point, or per bucket as smooth_buckets gives it), from
    the series' first point; kept for the last weight asked."""
    if whole.curve and whole.curve[0] == weight:
        return whole.curve[1]
    v = whole.view
    if whole.level == 0:
        out = smooth(v.steps, v.values, weight, whole.unit)
    else:
        out = smooth_buckets(v.first_steps, v.last_steps, v.means, weight, whole.unit)
    out.flags.writeable = False
    whole.curve = (weight, out)  # (one tuple replaced whole: read on two threads)
    return out
