"""What a Track (resplot/draw/tracks.py) is prepared from besides its series' view: the run's
context on a panel (the step range in view, the tokens guide) and the view's smoothed curve,
warmed up over the points before the view so that it is the same at every zoom.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from resplot.data import whole_level, xaxis
from resplot.data.cache import SeriesCache
from resplot.data.model import RunInfo, RunRef
from resplot.data.pages import Item
from resplot.data.smoothing import smooth, smooth_buckets, unit_of, warmup_steps
from resplot.data.views import SeriesView, ViewMemo, series_view
from schema.store.rollup import STEP_LO


def smoothed_curve(
    cache: SeriesCache, item: Item, view: SeriesView, weight: float, lo: float
) -> tuple[np.ndarray, bool]:
    """The EMA of a view, in steps (resplot/data/smoothing.py): of its raw points, or of its
    buckets' exact means. A view that starts after its series does starts the EMA earlier, by
    as many steps as it takes the points left out to weigh nothing (at the view's level), so
    the curve is the same at every zoom; False with it while those points' tiles load. A view
    sliced from the series' whole level takes the same slice of the whole's curve."""
    if view.origin is not None:
        whole, a, b = view.origin
        return whole_level.smoothed(whole, weight)[a:b], True
    summary = cache.summary(item.ref, item.key)
    unit = unit_of(summary.agg) if summary is not None else 1.0
    steps, means = view.mid_steps, view.means
    lows, highs = view.first_steps, view.last_steps  # per bucket (None: raw points)
    whole = True
    first = summary.agg[STEP_LO] if summary is not None else steps[0]
    if np.isfinite(lo) and steps[0] > first:
        start = max(first, int(steps[0]) - warmup_steps(weight, unit))
        before = series_view(cache, item.ref, item.key, start, int(steps[0]) - 1, 1, view.level)
        whole = before is not None and before.complete and before.level == view.level
        if whole:
            take = before.mid_steps < steps[0]
            steps = np.concatenate([before.mid_steps[take], steps])
            means = np.concatenate([before.means[take], means])
            if lows is not None and before.first_steps is not None:
                lows = np.concatenate([before.first_steps[take], lows])
                highs = np.concatenate([before.last_steps[take], highs])
    if view.level != 0 and lows is not None and len(lows) == len(steps):
        # Buckets: the EMA of their points, averaged over each (the same curve as zoomed in).
        out = smooth_buckets(lows, highs, means, weight, unit)
    else:
        out = smooth(steps, means, weight, unit)
    return out[len(steps) - len(view.mid_steps) :], whole


@dataclass
class RunContext:
    """What every track of one run on one panel shares: the run, the step range in view
    (±inf: the series' own ends) and, on a guided axis (tokens, a counter), the guide and the
    key it is read from."""

    run: RunInfo | None
    lo: float
    hi: float
    guide: xaxis.Guide | None
    guide_key: str | None = None


def tokens_guide(
    cache: SeriesCache,
    ref: RunRef,
    lo: float,
    hi: float,
    pixels: int,
    key: str = xaxis.TOKENS_KEY,
    memo: ViewMemo | None = None,
):
    """(steps, count) of a run's cumulative counter `key` (train/tokens, iter, epoch) over a
    step range: its points, or each bucket's last value (the count at its last step). With a
    `memo`, the same arrays while the counter has no new points (a track's work is kept while
    its guide's arrays are the same objects)."""
    view = series_view(cache, ref, key, lo, hi, pixels, memo=memo)
    if view is None or len(view.last_steps) == 0:
        return None
    return view.last_steps, view.lasts
