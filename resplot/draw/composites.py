"""Panels drawn from several series at once: a run's step time stacked by part (data wait,
forward, backward, optimizer, other: a Stack, its polygons kept between refreshes), and GPU
throttle reasons as bars (ThrottleBars, kept alike). Each gives the artists it drew and the
series views it drew them from."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from resplot.data import xaxis
from resplot.data.alerts import THROTTLE_BITS
from resplot.data.cache import SeriesCache
from resplot.data.decimate import bucket_mean
from resplot.data.model import RunInfo
from resplot.data.pages import TIMING_PARTS, Item, PanelSpec
from resplot.data.views import SeriesView, ViewMemo, series_view
from resplot.draw.clip_box import share_clip_box
from resplot.draw.tiers import streams, tier_zorder
from resplot.draw.track_inputs import RunContext

PART_COLORS = {
    "data": "#e15759",
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "optimizer": "#59a14f",
    "other": "#bab0ac",
}
BAR_PT = 6.0  # height of a throttle bar (a '|' marker of 8 pt before)
BARS_ZORDER = 2.0  # a LineCollection's own: a settled run's bars (a live run's: over them)


class Stack:
    """One run's step time split into data/forward/backward/optimizer/other: the mean of each
    part per bucket (or per step at full resolution), stacked. The keys are the panel's
    items' (whatever the run named them: key_roles.TIMING_ROLES).

    Its polygons are kept between refreshes: set again in place where a view changed (a live
    run's poll), and left as they are where none did, so that a finished run's stack stays in
    the window's saved picture (resplot/ui/layers.py). Made anew at every refresh, each
    poll of the Timing page drew its whole live tier again and left ~5 artists' objects a
    chart to the collector."""

    def __init__(self) -> None:
        self.polys: list = []
        self.run: RunInfo | None = None  # the run the last refresh drew
        self._memos: dict[str, ViewMemo] = {}
        self._drawn: tuple = ((), ())  # what the polygons were set from (_stamp)

    def settled_artists(self) -> list:
        """Its polygons where its run ended (a live poll leaves them as they are)."""
        return list(self.polys) if self.run is not None and not streams(self.run) else []

    def remove(self) -> None:
        for poly in self.polys:
            poly.remove()
        self.polys = []
        self._drawn = ((), ())

    def _view(self, cache: SeriesCache, ref, key: str, ctx, pixels: int, **kw):
        memo = self._memos.setdefault(key, ViewMemo())
        return series_view(cache, ref, key, ctx.lo, ctx.hi, pixels, memo=memo, **kw)

    def artists(self) -> list:
        return list(self.polys)

    def refresh(
        self,
        ax,
        spec: PanelSpec,
        cache: SeriesCache,
        contexts: dict,
        mode: str,
        pixels: int,
        xlim,
        fine: int,
    ) -> tuple[list, list]:
        """Its polygons (set for this state) and the views they were drawn from (`xlim`: the
        buckets' columns are the view's own)."""
        ref = spec.stack_ref
        ctx = contexts[ref]
        self.run = ctx.run
        keys = {item.part: item.key for item in spec.items}
        total_key = keys.get("other", "time/step")
        total = self._view(cache, ref, total_key, ctx, pixels, fine_per_pixel=fine)
        if total is None or len(total.mid_steps) == 0:
            self.remove()
            return [], []
        parts = [
            None
            if (key := keys.get(name)) is None
            else self._view(cache, ref, key, ctx, pixels, level=total.level)
            for name in TIMING_PARTS
        ]
        drawn = _stamp(ctx, mode, (ref, pixels), (total, *parts))
        if self.polys and _alike(drawn, self._drawn):
            return self.artists(), [total]
        x, bys = _stacked(total, parts, mode, ctx, pixels)
        if x is None:
            self.remove()
            return [], [total]
        self._drawn = drawn
        self._set(ax, x, bys)
        return self.artists(), [total]

    def _set(self, ax, bx: np.ndarray, bys: list[np.ndarray]) -> None:
        names = [*TIMING_PARTS, "other"]
        if len(self.polys) != len(bys):
            self.remove()
            self.polys = ax.stackplot(
                bx, *bys, colors=[PART_COLORS[n] for n in names], labels=names, alpha=0.85
            )
        else:
            # As stackplot stacks them (its float type, its baseline of zero).
            y = np.vstack(bys)
            stack = np.cumsum(y, axis=0, dtype=np.promote_types(y.dtype, np.float32))
            below = [0.0, *stack[:-1]]
            for poly, lo, hi in zip(self.polys, below, stack, strict=True):
                poly.set_data(bx, lo, hi)
        if len(bx):
            top = np.sum(bys, axis=0)
            self.polys[0]._resplot_limits = np.column_stack(
                [np.concatenate((bx, bx)), np.concatenate((np.zeros(len(bx)), top))]
            )
        elif hasattr(self.polys[0], "_resplot_limits"):
            del self.polys[0]._resplot_limits
        # The parts' colours are named once, in the run strip above the charts: a stack fills
        # its axes (any corner would cover it) and a legend above it ran into its title.


def _stamp(ctx: RunContext, mode: str, plain: tuple, objects: tuple) -> tuple:
    """What a composite's artists are set from: `plain` values and the run's context (the run
    matters to x on a time axis only), compared equal; views and the tokens guide's arrays,
    compared as objects (a view is the same object while its data is: its memo)."""
    guide = () if ctx.guide is None else tuple(ctx.guide)
    return (*plain, ctx.lo, ctx.hi, ctx.run if mode != "step" else None), (*objects, *guide)


def _alike(a: tuple, b: tuple) -> bool:
    """Stamps alike: their plain values equal, their objects the same ones."""
    return (
        a[0] == b[0]
        and len(a[1]) == len(b[1])
        and all(x is y for x, y in zip(a[1], b[1], strict=True))
    )


def _stacked(total: SeriesView, parts: list, mode: str, ctx: RunContext, pixels: int):
    """(x, the stacked parts and the rest, each a pixel column's mean), x None where this x
    axis cannot place the run."""
    grid = total.mid_steps
    cols = []
    for part in parts:
        col = np.zeros(len(grid))
        if part is not None and part.level == total.level and len(part.mid_steps):
            idx = np.clip(np.searchsorted(part.mid_steps, grid), 0, len(part.mid_steps) - 1)
            col = np.where(part.mid_steps[idx] == grid, part.means[idx], 0.0)
        cols.append(np.nan_to_num(col, nan=0.0, posinf=0.0, neginf=0.0))
    whole = np.nan_to_num(total.means, nan=0.0, posinf=0.0, neginf=0.0)
    other = np.clip(whole - np.sum(cols, axis=0), 0.0, None)
    x = xaxis.x_values(mode, ctx.run, grid, total.mid_walls, ctx.guide)
    if x is None:
        return None, []
    order = np.argsort(x, kind="stable")
    return bucket_mean(x[order], [p[order] for p in [*cols, other]], pixels)


class ThrottleBars:
    """Throttle reasons as bars, a row per reason and a lane per series: from raw samples,
    or from each bucket's OR of the flags when zoomed out (exact: any throttling in a bucket
    shows). A throttled pixel column is marked, and a stretch of them is one bar: a card
    under a power cap all week is one bar, where a marker per column drew ~700 of them per
    reason and series (0.6 s for the system page of 8 runs × 8 GPUs).

    A series' bars are kept between refreshes as a Stack's polygons are: set again where its
    view or the chart's range changed, left as they are where nothing did (a finished run's,
    in the window's saved picture), and made anew, in the chart's order, only where the
    series that have bars changed."""

    def __init__(self) -> None:
        self.bars: dict[Item, LineCollection] = {}
        self._segments: dict[Item, list] = {}  # each series' bars as set
        self._drawn: dict[Item, tuple] = {}  # what they were set from (_stamp)
        self._runs: dict[Item, RunInfo | None] = {}
        self._memos: dict[Item, ViewMemo] = {}

    def artists(self) -> list:
        return list(self.bars.values())

    def settled_artists(self) -> list:
        """The bars of runs that ended (a live poll leaves them as they are)."""
        return [
            bars
            for item, bars in self.bars.items()
            if (run := self._runs.get(item)) is not None and not streams(run)
        ]

    def remove(self) -> None:
        for bars in self.bars.values():
            bars.remove()
        self.bars = {}

    def refresh(
        self,
        ax,
        spec: PanelSpec,
        cache: SeriesCache,
        contexts: dict,
        mode: str,
        pixels: int,
        xlim,
        fine: int,
    ) -> tuple[list, list]:
        """The bars (set for this state) and the views they were drawn from."""
        views, segments, changed = [], {}, []
        n = max(len(spec.items), 1)
        for item in set(self._memos) - set(spec.items):
            self._memos.pop(item)
            self._drawn.pop(item, None)
            self._segments.pop(item, None)
            self._runs.pop(item, None)
        for j, item in enumerate(spec.items):
            ctx = contexts[item.ref]
            self._runs[item] = ctx.run
            memo = self._memos.setdefault(item, ViewMemo())
            view = series_view(
                cache, item.ref, item.key, ctx.lo, ctx.hi, pixels, fine_per_pixel=fine, memo=memo
            )
            if view is None:
                continue
            views.append(view)
            drawn = _stamp(ctx, mode, (pixels, xlim, j, n), (view,))
            if item in self._segments and _alike(drawn, self._drawn[item]):
                found = self._segments[item]
            else:
                found = _throttle_segments(view, mode, ctx, pixels, xlim, j, n)
                self._segments[item], self._drawn[item] = found, drawn
                changed.append(item)
            if found:
                segments[item] = found
        if list(segments) != list(self.bars):
            # Series with bars came or went: all made anew, in the chart's order (the order a
            # page drawn afresh draws them in).
            self.remove()
            changed = list(segments)
        for item in changed:
            if item not in segments:
                continue
            bars = self.bars.get(item)
            if bars is None:
                bars = self.bars[item] = LineCollection(
                    segments[item],
                    linewidths=BAR_PT,
                    colors=item.color,
                    capstyle="butt",
                    label=item.label,
                )
                ax.add_collection(bars, autolim=False)
                share_clip_box(ax, bars)
            else:
                bars.set_segments(segments[item])
            flat = np.asarray(segments[item]).reshape(-1, 2)
            bars._resplot_limits = [flat.min(axis=0), flat.max(axis=0)]
        for item, bars in self.bars.items():
            # A live run's bars over every finished run's, as its series are (tracks.py): the
            # finished ones' then lie in the window's saved picture.
            run = self._runs.get(item)
            z = tier_zorder(BARS_ZORDER, streams(run))
            if bars.get_zorder() != z:
                bars.set_zorder(z)
        return self.artists(), views


def _throttle_segments(view: SeriesView, mode: str, ctx: RunContext, pixels: int, xlim, j, n):
    """One series' bars, lane j of n: a segment a stretch of throttled pixel columns a
    reason."""
    x = xaxis.x_values(mode, ctx.run, view.mid_steps, view.mid_walls, ctx.guide)
    if x is None or len(x) == 0:
        return []
    if view.level == 0:
        mask = np.nan_to_num(view.values, nan=0.0).astype(np.int64)
    else:
        mask = np.where(view.bits >= 0, view.bits, 0)
    segments = []
    lo, hi = (x.min(), x.max()) if xlim is None else xlim
    width = (hi - lo) / pixels if hi > lo else 1.0
    for row, bit in enumerate(THROTTLE_BITS):
        on = x[(mask & bit) != 0]
        if len(on) == 0:
            continue
        columns = np.unique(np.floor((on - lo) / width))
        # Runs of adjacent columns: where the next column is not this one plus one.
        breaks = np.flatnonzero(np.diff(columns) > 1)
        starts = columns[np.concatenate(([0], breaks + 1))]
        ends = columns[np.concatenate((breaks, [len(columns) - 1]))] + 1
        y = row + 0.8 * ((j + 0.5) / n - 0.5)
        pairs = zip(starts * width + lo, ends * width + lo, strict=True)
        segments.extend([(a, y), (b, y)] for a, b in pairs)
    return segments
