"""Panels drawn from several series at once: a run's step time stacked by part (data wait,
forward, backward, optimizer, other), and GPU throttle reasons as bars. Each returns the artists
it added (rebuilt every refresh) and the series views it drew."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from resplot.data import xaxis
from resplot.data.alerts import THROTTLE_BITS
from resplot.data.cache import SeriesCache
from resplot.data.decimate import bucket_mean
from resplot.data.pages import TIMING_PARTS, PanelSpec
from resplot.data.views import series_view
from resplot.draw.clip_box import share_clip_box
from resplot.draw.track_inputs import RunContext

PART_COLORS = {
    "data": "#e15759",
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "optimizer": "#59a14f",
    "other": "#bab0ac",
}
BAR_PT = 6.0  # height of a throttle bar (a '|' marker of 8 pt before)


def draw_stack(
    ax, spec: PanelSpec, cache: SeriesCache, ctx: RunContext, mode: str, pixels: int, fine: int
) -> tuple[list, list]:
    """One run's step time split into data/forward/backward/optimizer/other: the mean of
    each part per bucket (or per step at full resolution), stacked. The keys are the
    panel's items' (whatever the run named them: key_roles.TIMING_ROLES)."""
    ref = spec.stack_ref
    keys = {item.part: item.key for item in spec.items}
    total = series_view(
        cache, ref, keys.get("other", "time/step"), ctx.lo, ctx.hi, pixels, fine_per_pixel=fine
    )
    if total is None or len(total.mid_steps) == 0:
        return [], []
    grid = total.mid_steps
    parts = []
    for name in TIMING_PARTS:
        key = keys.get(name)
        part = (
            None
            if key is None
            else series_view(cache, ref, key, ctx.lo, ctx.hi, pixels, total.level)
        )
        col = np.zeros(len(grid))
        if part is not None and part.level == total.level and len(part.mid_steps):
            idx = np.clip(np.searchsorted(part.mid_steps, grid), 0, len(part.mid_steps) - 1)
            col = np.where(part.mid_steps[idx] == grid, part.means[idx], 0.0)
        parts.append(np.nan_to_num(col, nan=0.0, posinf=0.0, neginf=0.0))
    whole = np.nan_to_num(total.means, nan=0.0, posinf=0.0, neginf=0.0)
    other = np.clip(whole - np.sum(parts, axis=0), 0.0, None)
    x = xaxis.x_values(mode, ctx.run, grid, total.mid_walls, ctx.guide)
    if x is None:
        return [], [total]
    order = np.argsort(x, kind="stable")
    bx, bys = bucket_mean(x[order], [p[order] for p in [*parts, other]], pixels)
    names = [*TIMING_PARTS, "other"]
    polys = ax.stackplot(bx, *bys, colors=[PART_COLORS[n] for n in names], labels=names, alpha=0.85)
    if len(bx):
        top = np.sum(bys, axis=0)
        polys[0]._resplot_limits = np.column_stack(
            [np.concatenate((bx, bx)), np.concatenate((np.zeros(len(bx)), top))]
        )
    # The parts' colours are named once, in the run strip above the charts: a stack fills
    # its axes (any corner would cover it) and a legend above it ran into its title.
    return [*polys], [total]


def draw_throttle(
    ax, spec: PanelSpec, cache: SeriesCache, contexts, mode: str, pixels: int, xlim, fine: int
) -> tuple[list, list]:
    """Throttle reasons as bars, a row per reason and a lane per series: from raw samples,
    or from each bucket's OR of the flags when zoomed out (exact: any throttling in a bucket
    shows). A throttled pixel column is marked, and a stretch of them is one bar: a card
    under a power cap all week is one bar, where a marker per column drew ~700 of them per
    reason and series (0.6 s for the system page of 8 runs × 8 GPUs)."""
    artists, views = [], []
    bits = list(THROTTLE_BITS)
    n = max(len(spec.items), 1)
    for j, item in enumerate(spec.items):
        ctx = contexts[item.ref]
        view = series_view(cache, item.ref, item.key, ctx.lo, ctx.hi, pixels, fine_per_pixel=fine)
        if view is None:
            continue
        views.append(view)
        x = xaxis.x_values(mode, ctx.run, view.mid_steps, view.mid_walls, ctx.guide)
        if x is None or len(x) == 0:
            continue
        if view.level == 0:
            mask = np.nan_to_num(view.values, nan=0.0).astype(np.int64)
        else:
            mask = np.where(view.bits >= 0, view.bits, 0)
        segments = []
        lo, hi = (x.min(), x.max()) if xlim is None else xlim
        width = (hi - lo) / pixels if hi > lo else 1.0
        for row, bit in enumerate(bits):
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
        if segments:
            bars = LineCollection(
                segments,
                linewidths=BAR_PT,
                colors=item.color,
                capstyle="butt",
                label=item.label,
            )
            ax.add_collection(bars, autolim=False)
            share_clip_box(ax, bars)
            flat = np.asarray(segments).reshape(-1, 2)
            bars._resplot_limits = [flat.min(axis=0), flat.max(axis=0)]
            artists.append(bars)
    return artists, views
