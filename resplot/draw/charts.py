"""Chart pages as matplotlib Figures (no pyplot): built once, then updated in place.

A ChartPage owns one Figure with one axes per panel (data/pages.py says which). Every plotted
series is a Track (draw/tracks.py) holding its artists; refresh() sets each from its series' view at
the panel's width (tiles, smoothing, decimation per pixel column for the visible x-range) and
calls `set_data` on the existing artists. The same class draws the window's canvases and the
headless `resplot snapshot`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    EngFormatter,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    PercentFormatter,
)

from resplot.data import layout, xaxis
from resplot.data.alerts import THROTTLE_BITS
from resplot.data.cache import SeriesCache
from resplot.data.decimate import Grid, bucket_mean
from resplot.data.model import RunRef
from resplot.data.pages import TIMING_PARTS, Item, PanelSpec, panels_for
from resplot.data.state import ViewState
from resplot.data.views import FINE_PER_PIXEL, FINE_POINTS_PER_PAGE, fine_points, series_view
from resplot.data.yrange import robust_limits
from resplot.draw import fonts
from resplot.draw.legends import AxesLegend, Entry, RunStrip
from resplot.draw.tracks import (
    BAND_FROM_SERIES,
    DENSE_PAGE_FINE_PER_PIXEL,
    RunContext,
    Track,
    tokens_guide,
)
from schema.compare import metric_stats

EVENT_KINDS = {"alert": "#d62728", "checkpoint": "#7f7f7f", "resume": "#1f77b4"}
PART_COLORS = {
    "data": "#e15759",
    "forward": "#4e79a7",
    "backward": "#f28e2b",
    "optimizer": "#59a14f",
    "other": "#bab0ac",
}
# Where non-finite points are marked, in axes height fractions.
SAVE_FORMATS = ("png", "svg", "pdf")
NOTE_PT = 6.5
BAR_PT = 6.0  # height of a throttle bar (a '|' marker of 8 pt before)


class ReadableLogLocator(LogLocator):
    """Major ticks at 1, 2, 3, 5 × 10^k when the axis spans about a decade (losses), fewer
    per decade as it spans more, so that labels never run into each other."""

    def __init__(self) -> None:
        super().__init__(base=10, subs=(1.0, 2.0, 3.0, 5.0))

    def tick_values(self, vmin, vmax):
        if vmin > 0 and vmax > 0:
            decades = abs(np.log10(vmax) - np.log10(vmin))
            subs = (
                (1.0, 2.0, 3.0, 5.0) if decades <= 1.5 else (1.0, 3.0) if decades <= 2.5 else (1.0,)
            )
            self.set_params(subs=subs)
        return super().tick_values(vmin, vmax)


class ChartPage:
    """One page (training, system, timing, custom) of charts for the ticked runs."""

    def __init__(
        self,
        page: str,
        figure: Figure | None = None,
        on_view_changed: Callable[[], None] | None = None,
        strip_in_figure: bool = True,
    ) -> None:
        self.page = page
        self.figure = figure if figure is not None else Figure(figsize=(12, 7.5), dpi=100)
        self.on_view_changed = on_view_changed
        self.axes: list = []
        self.specs: list[PanelSpec] = []
        self.tracks: list[dict[Item, Track]] = []
        self._layout: tuple | None = None
        self._extra: list[list] = []  # per axes: artists rebuilt every refresh (stacks)
        self._events: list[LineCollection] = []
        self._empty: list = []
        self._legends: list[AxesLegend] = []
        self._views: list[list] = []  # per axes: the series views drawn by the last refresh
        self._notes: list = []
        # Names every plotted run above the charts: drawn in the figure (snapshots), or by the
        # window in a Qt label above the canvas, where its text costs no draw time (a strip of
        # 10 runs took ~20 ms of every redraw as matplotlib text).
        self.strip_in_figure = strip_in_figure
        self.strip = RunStrip(self.figure)
        self.entries: list[Entry] = []
        self.grid = layout.Grid(1, 1)
        self.follow = True  # autoscale to all data; False after the user zooms or pans
        # Per run: (x, step) pairs of its widest drawn view, sorted by x: how a zoomed x range
        # on the wall, relative or tokens axis maps back to the steps whose tiles it needs.
        self._x_steps: dict[RunRef, tuple[np.ndarray, np.ndarray]] = {}
        self._updating = False
        self._dense = False  # more series than BAND_FROM_SERIES: bands, one fine bucket a pixel
        self._fine = FINE_PER_PIXEL
        self.message = None
        self.highlighted: RunRef | None = None  # a clicked run: the others are faded
        self._clipped: set[int] = set()  # charts whose y range ignores outliers
        self.view_height_px: float | None = None  # what the window shows of the figure
        self.empty_text = "No series to show: tick runs, or widen the custom key globs."

    # -- layout -------------------------------------------------------------------------------
    def _rebuild(self, specs: list[PanelSpec], mode: str, grid: layout.Grid) -> None:
        self.figure.clear()
        self.axes, self.tracks, self._extra, self._events, self._empty = [], [], [], [], []
        self._legends = []
        self._clipped = set()
        self.strip = RunStrip(self.figure)
        self._views, self._notes = [], []
        self.message = None
        n = len(specs)
        if n == 0:
            self.message = self.figure.text(
                0.5, 0.5, self.empty_text, ha="center", va="center", color="#666666", wrap=True,
            )  # fmt: skip
            return
        rows, cols = grid.rows, grid.cols
        self.grid = grid
        first = None
        for i, spec in enumerate(specs):
            ax = self.figure.add_subplot(rows, cols, i + 1, sharex=first)
            first = first or ax
            # y fixed: matplotlib would otherwise measure every top tick label at each draw to
            # lift the title over them (~20 ms a page), and layout.py leaves it the room.
            ax.set_title(spec.title, fontsize=9, loc="left", y=1.0)
            ax.set_ylabel(spec.ylabel, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.25, linewidth=0.6)
            if spec.log_y:
                ax.set_yscale("log")
                # Losses span less than a decade: label 2, 3, 5 as plain numbers, not 10^x.
                ax.yaxis.set_major_locator(ReadableLogLocator())
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
                ax.yaxis.set_minor_formatter(NullFormatter())
            if spec.percent:
                ax.yaxis.set_major_formatter(PercentFormatter(spec.percent))
            if spec.kind == "throttle":
                names = list(THROTTLE_BITS.values())
                ax.set_yticks(range(len(names)), names, fontsize=7)
                ax.set_ylim(-0.6, len(names) - 0.4)
            events = LineCollection(
                [], linewidths=0.8, linestyles="dotted", transform=ax.get_xaxis_transform(),
                zorder=0.5,
            )  # fmt: skip
            ax.add_collection(events, autolim=False)
            empty = ax.text(
                0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                color="#999999", fontsize=8,
            )  # fmt: skip
            note = ax.text(
                0.995, 0.01, "", transform=ax.transAxes, ha="right", va="bottom",
                color="#888888", fontsize=NOTE_PT, zorder=5,
            )  # fmt: skip
            self.axes.append(ax)
            self.tracks.append({})
            self._extra.append([])
            self._events.append(events)
            self._empty.append(empty)
            self._views.append([])
            self._notes.append(note)
            self._legends.append(AxesLegend())
        for ax in self.axes[-cols:]:
            ax.set_xlabel(xaxis.label(mode), fontsize=8)
        if mode == "wall":
            locator = AutoDateLocator()
            first.xaxis.set_major_locator(locator)
            first.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        elif xaxis.is_guided(mode):
            first.xaxis.set_major_formatter(EngFormatter())
        first.callbacks.connect("xlim_changed", self._on_xlim_changed)

    def _on_xlim_changed(self, _ax) -> None:
        if self._updating:
            return
        self.follow = False
        if self.on_view_changed is not None:
            self.on_view_changed()

    def reset_view(self) -> None:
        """Follow all data again (autoscale on every refresh) after a zoom or pan."""
        self.follow = True

    def incomplete(self) -> int:
        """Series of the last refresh drawn coarser than their charts asked for, or not at all
        (their tiles have not arrived)."""
        tracks = [t for ts in self.tracks for t in ts.values()]
        return sum(1 for t in tracks if t.view is None or not t.view.complete)

    def shows_data(self) -> bool:
        """Whether the last refresh left anything to draw (stand-ins while tiles load count)."""
        return any(self._views)

    # -- refresh ------------------------------------------------------------------------------
    def refresh(self, cache: SeriesCache, state: ViewState, refs: list[RunRef]) -> None:
        """Bring every artist up to date with the cache and the state (no drawing)."""
        cache.begin_view()
        specs = panels_for(self.page, cache, refs, state)
        texts = [s.title for s in specs] + [it.label for s in specs for it in s.items]
        if fonts.enable_for(texts):  # CJK names or keys: texts made from now on fall back
            self._layout = None
        height = self.view_height_px or self.figure.bbox.height
        grid = layout.grid(len(specs), self.figure.bbox.width, height, self.figure.dpi)
        key = (tuple(s.layout_key() for s in specs), state.x_axis, grid)
        if key != self._layout:
            self._rebuild(specs, state.x_axis, grid)
            self._layout = key
            self.follow = True
        self.specs = specs
        if not self.axes:
            if self.message is not None:
                self.message.set_text(self.empty_text)
            return
        self.entries = self._strip_entries(cache, state, refs, specs)
        self._place(self.entries if self.strip_in_figure else [])
        self._updating = True
        try:
            xlim = None if self.follow else tuple(self.axes[0].get_xlim())
            if xlim is None:
                self._x_steps = {}
            lines = sum(len(s.items) for s in specs if s.kind == "line")
            self._dense = lines > BAND_FROM_SERIES
            self._fine = DENSE_PAGE_FINE_PER_PIXEL if self._dense else FINE_PER_PIXEL
            contexts = [
                self._contexts(cache, state, [*refs, *(it.ref for it in s.items)], xlim,
                               self._pixels(i))
                for i, s in enumerate(specs)
            ]  # fmt: skip
            if self._fine_points(cache, specs, contexts) > FINE_POINTS_PER_PAGE:
                self._fine = 0  # past the budget: level 1 where it gives fewer buckets than pixels
            for i, spec in enumerate(specs):
                self._prepare_panel(i, spec, cache, state, contexts[i])
            # Every series of the page is cut into the same pixel columns: the x range shown
            # (when following the data, the one autoscaling would give), set before drawing.
            shown = xlim if xlim is not None else self._follow_xlim()
            if shown is not None and xlim is None:
                self.axes[0].set_xlim(shown)  # the axes share x
            for i, spec in enumerate(specs):
                self._refresh_panel(i, spec, cache, state, refs, xlim, shown, contexts[i])
            if self.follow:
                for i, ax in enumerate(self.axes):
                    ax.autoscale_view(scalex=shown is None)
                    self._clip_outliers(i, state)
        finally:
            self._updating = False

    def _strip_entries(self, cache, state, refs, specs) -> list[Entry]:
        names = {}
        for ref in refs:
            run = cache.run(ref)
            names[ref] = run.name if run is not None else ref.uid[:8]
            if run is not None and run.status != "finished":
                names[ref] += f" · {run.status}"  # its line ends in the status's mark
        entries = [Entry(names[r], *state.look(r)) for r in refs]
        if any(s.kind == "stacked" for s in specs):
            entries += [Entry(n, PART_COLORS[n], patch=True) for n in [*TIMING_PARTS, "other"]]
        return entries

    def replace_axes(self) -> None:
        """Lay the axes out again for the figure's current size (a canvas resize): the margins
        are pixels turned into fractions of the size they were computed for."""
        if self.axes:
            self._place(self.entries if self.strip_in_figure else [])

    def _place(self, entries: list[Entry]) -> None:
        """The run strip, and the axes laid out below it in pixels (resplot.data.layout)."""
        self.strip.update(entries)
        w, h = self.figure.bbox.width, self.figure.bbox.height
        margins = layout.margins(w, h, self.grid, self.figure.dpi, self.strip.rows)
        self.figure.subplots_adjust(**margins)

    def min_height(self) -> int:
        """Pixels the page needs to give each chart a readable height (the window scrolls)."""
        return layout.min_height_px(self.grid, self.figure.dpi, self.strip.rows)

    def _clip_outliers(self, i: int, state: ViewState) -> None:
        """A loss chart's y range without its top 1 % (resplot.data.yrange), said in its note."""
        spec, ax = self.specs[i], self.axes[i]
        limits = None
        if spec.robust_y and state.ignore_outliers and spec.kind == "line":
            tracks = self.tracks[i].values()
            lines = [t.line for t in tracks] + [t.raw for t in tracks if t.raw is not None]
            ys = [np.asarray(ln.get_ydata(), float) for ln in lines if ln.get_visible()]
            ys += [xy[:, 1] for t in tracks for xy in t.band_xy]
            if ys:
                limits = robust_limits(np.concatenate(ys), log=spec.log_y)
        if limits is not None:
            ax.set_ylim(*limits)
        if (limits is not None) != (i in self._clipped):
            self._clipped.symmetric_difference_update({i})
            self._note(i, state.smoothing)

    def _sync_tracks(self, i: int, spec: PanelSpec) -> dict[Item, Track]:
        tracks = self.tracks[i]
        wanted = set(spec.items) if spec.kind == "line" else set()
        for item in [it for it in tracks if it not in wanted]:
            tracks.pop(item).remove()
        for item in spec.items:
            if item in wanted and item not in tracks:
                tracks[item] = Track(self.axes[i], item)
        return tracks

    def _step_range(self, ref: RunRef, mode: str, xlim) -> tuple[float, float]:
        """The steps of a run that an x range shows (±inf: follow all data)."""
        if xlim is None:
            return -np.inf, np.inf
        lo, hi = sorted(xlim)
        if mode == "step":
            return np.floor(lo), np.ceil(hi)
        known = self._x_steps.get(ref)
        if known is None or len(known[0]) < 2:
            return -np.inf, np.inf  # nothing drawn yet to map it by: ask for everything
        x, steps = known
        pad = (steps[-1] - steps[0]) / max(1, len(steps))  # one drawn point's worth of steps
        a = np.interp(lo, x, steps, left=-np.inf, right=np.inf)
        b = np.interp(hi, x, steps, left=-np.inf, right=np.inf)
        return a - pad, b + pad

    def _contexts(self, cache, state, refs, xlim, pixels) -> dict[RunRef, RunContext]:
        out = {}
        for ref in refs:
            lo, hi = self._step_range(ref, state.x_axis, xlim)
            guide = None
            key = xaxis.guide_key(state.x_axis, cache.keys(ref), cache.events(ref))
            if key is not None:
                guide = tokens_guide(cache, ref, lo, hi, pixels, key)
            out[ref] = RunContext(cache.run(ref), lo, hi, guide)
        return out

    def _remember_x(self, track: Track) -> None:
        view = track.view
        if view is None or len(track.x) < 2:
            return
        order = np.argsort(track.x, kind="stable")
        x, steps = track.x[order], view.steps[order].astype(np.float64)
        known = self._x_steps.get(track.item.ref)
        if known is None or len(x) > len(known[0]) or x[-1] - x[0] > known[0][-1] - known[0][0]:
            self._x_steps[track.item.ref] = (x, steps)

    def _pixels(self, i: int) -> int:
        return max(int(self.axes[i].bbox.width), 50)

    def _fine_points(self, cache, specs, contexts) -> float:
        """The raw points the host would read for the page's fine views."""
        total = 0.0
        for i, spec in enumerate(specs):
            for item in spec.items:
                summary, ctx = cache.summary(item.ref, item.key), contexts[i][item.ref]
                if summary is not None:
                    total += fine_points(summary, ctx.lo, ctx.hi, self._pixels(i), self._fine)
        return total

    def _prepare_panel(self, i, spec, cache, state, contexts) -> None:
        """The views of a panel's series at its width (before the page's x range is known)."""
        for track in self._sync_tracks(i, spec).values():
            track.prepare(cache, contexts[track.item.ref], state.x_axis, state.smoothing,
                          self._pixels(i), self._fine)  # fmt: skip

    def _follow_xlim(self) -> tuple[float, float] | None:
        """The x range autoscaling would give every series of the page (None: no series, or
        one x: matplotlib's own rules then)."""
        found = [r for ts in self.tracks for t in ts.values() if (r := t.x_range()) is not None]
        if not found:
            return None
        lo, hi = min(r[0] for r in found), max(r[1] for r in found)
        if not hi > lo:
            return None
        margin = self.axes[0].margins()[0] * (hi - lo)
        return lo - margin, hi + margin

    def _refresh_panel(self, i, spec, cache, state, refs, xlim, shown, contexts) -> None:
        ax = self.axes[i]
        pixels = max(int(ax.bbox.width), 50)
        for artist in self._extra[i]:
            artist.remove()
        self._extra[i] = []
        self._views[i] = []
        tracks = self.tracks[i]
        grid = None if shown is None else Grid.of(shown, ax.bbox.x0, ax.bbox.width)
        for track in tracks.values():
            track.fade(self.highlighted is not None and track.item.ref != self.highlighted)
            track.place(pixels, shown, grid, self._dense)
            view = track.view
            if view is not None:
                self._views[i].append(view)
                if xlim is None:
                    self._remember_x(track)
        if spec.kind == "stacked" and spec.stack_ref is not None:
            ref = spec.stack_ref
            self._draw_stack(i, ref, cache, contexts[ref], state.x_axis, pixels)
        elif spec.kind == "throttle":
            self._draw_throttle(i, spec, cache, contexts, state.x_axis, pixels, xlim)
        self._draw_events(i, cache, refs, contexts, state.x_axis)
        self._note(i, state.smoothing)
        has_data = any(len(t.line.get_xdata()) for t in tracks.values()) or bool(self._extra[i])
        self._empty[i].set_visible(not has_data)
        if self.follow:
            ax.relim()
            for track in tracks.values():
                for xy in track.band_xy:
                    ax.update_datalim(xy)
            for artist in self._extra[i]:
                if hasattr(artist, "_resplot_limits"):
                    ax.update_datalim(artist._resplot_limits)
        if spec.kind == "line":
            latest = {}
            for item in tracks:
                summary = cache.summary(item.ref, item.key)
                latest[item] = metric_stats(summary.agg if summary is not None else None)[0]
            self._legends[i].update(ax, tracks, self.follow, latest)

    def _draw_stack(self, i: int, ref: RunRef, cache: SeriesCache, ctx: RunContext, mode: str,
                    pixels: int):  # fmt: skip
        """One run's step time split into data/forward/backward/optimizer/other: the mean of
        each part per bucket (or per step at full resolution), stacked."""
        total = series_view(cache, ref, "time/step", ctx.lo, ctx.hi, pixels,
                            fine_per_pixel=self._fine)  # fmt: skip
        if total is None or len(total.mid_steps) == 0:
            return
        grid = total.mid_steps
        parts = []
        for name in TIMING_PARTS:
            part = series_view(cache, ref, f"time/{name}", ctx.lo, ctx.hi, pixels, total.level)
            col = np.zeros(len(grid))
            if part is not None and part.level == total.level and len(part.mid_steps):
                idx = np.clip(np.searchsorted(part.mid_steps, grid), 0, len(part.mid_steps) - 1)
                col = np.where(part.mid_steps[idx] == grid, part.means[idx], 0.0)
            parts.append(np.nan_to_num(col, nan=0.0, posinf=0.0, neginf=0.0))
        whole = np.nan_to_num(total.means, nan=0.0, posinf=0.0, neginf=0.0)
        other = np.clip(whole - np.sum(parts, axis=0), 0.0, None)
        x = xaxis.x_values(mode, ctx.run, grid, total.mid_walls, ctx.guide)
        if x is None:
            return
        order = np.argsort(x, kind="stable")
        bx, bys = bucket_mean(x[order], [p[order] for p in [*parts, other]], pixels)
        ax = self.axes[i]
        names = [*TIMING_PARTS, "other"]
        polys = ax.stackplot(
            bx, *bys, colors=[PART_COLORS[n] for n in names], labels=names, alpha=0.85
        )
        if len(bx):
            top = np.sum(bys, axis=0)
            polys[0]._resplot_limits = np.column_stack(
                [np.concatenate((bx, bx)), np.concatenate((np.zeros(len(bx)), top))]
            )
        # The parts' colours are named once, in the run strip above the charts: a stack fills
        # its axes (any corner would cover it) and a legend above it ran into its title.
        self._extra[i] = [*polys]
        self._views[i].append(total)

    def _draw_throttle(self, i, spec, cache, contexts, mode, pixels, xlim) -> None:
        """Throttle reasons as bars, a row per reason and a lane per series: from raw samples,
        or from each bucket's OR of the flags when zoomed out (exact: any throttling in a bucket
        shows). A throttled pixel column is marked, and a stretch of them is one bar: a card
        under a power cap all week is one bar, where a marker per column drew ~700 of them per
        reason and series (0.6 s for the system page of 8 runs × 8 GPUs)."""
        ax = self.axes[i]
        bits = list(THROTTLE_BITS)
        n = max(len(spec.items), 1)
        for j, item in enumerate(spec.items):
            ctx = contexts[item.ref]
            view = series_view(cache, item.ref, item.key, ctx.lo, ctx.hi, pixels,
                               fine_per_pixel=self._fine)  # fmt: skip
            if view is None:
                continue
            self._views[i].append(view)
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
                    segments, linewidths=BAR_PT, colors=item.color, capstyle="butt",
                    label=item.label,
                )  # fmt: skip
                ax.add_collection(bars, autolim=False)
                flat = np.asarray(segments).reshape(-1, 2)
                bars._resplot_limits = [flat.min(axis=0), flat.max(axis=0)]
                self._extra[i].append(bars)

    def _draw_events(self, i: int, cache: SeriesCache, refs: list[RunRef], contexts,
                     mode: str) -> None:  # fmt: skip
        segments, colors = [], []
        for ref in refs:
            ctx = contexts.get(ref)
            run = cache.run(ref)
            for ev in cache.events(ref):
                color = EVENT_KINDS.get(ev.kind)
                if color is None:
                    continue
                x = xaxis.event_x(mode, run, ev.step, ev.wall, ctx.guide if ctx else None)
                if x is not None and np.isfinite(x):
                    segments.append([(x, 0.0), (x, 1.0)])
                    colors.append(color)
        self._events[i].set_segments(segments)
        self._events[i].set_color(colors or ["#7f7f7f"])

    def _note(self, i: int, smoothing: float) -> None:
        """Say on the chart what it draws when that is not every raw point: the bucket width of
        an envelope, what smoothing ran on, and tiles still loading."""
        views = self._views[i]
        coarse = [v for v in views if v.level != 0]  # stored or fine buckets
        parts = []
        if coarse:
            width = max(v.width for v in coarse)
            parts.append(f"min–max per {width:,} steps")
        smoothed = [t.view for t in self.tracks[i].values() if t.smoothed is not None and t.view]
        if smoothing > 0 and smoothed:  # what the EMA ran on (resplot/data/smoothing.py)
            on = [v.width for v in smoothed if v.level != 0]
            parts.append(f"smoothed {max(on):,}-step means" if on else "smoothed raw points")
        if any(not v.complete for v in views):
            parts.append("loading finer detail…")
        if i in self._clipped:
            parts.append("y: top 1 % ignored")
        unplaced = sorted({t.item.label for t in self.tracks[i].values() if t.unplaced})
        if unplaced:
            parts.append(f"not on this x axis (not logged): {', '.join(unplaced)}")
        text = " · ".join(parts)
        # One line inside the chart: cut to its width (the hover and docs say the rest).
        fit = int(self.axes[i].bbox.width / (NOTE_PT * 0.62 * self.figure.dpi / 72.0))
        self._notes[i].set_text(text if len(text) <= fit else text[: max(0, fit - 1)] + "…")

    # -- queries used by the window and tests --------------------------------------------------
    def lines(self) -> dict[tuple[str, RunRef, str], Line2D]:
        """(panel title, run, key) -> the main (smoothed if smoothing applies) line."""
        return {
            (spec.title, item.ref, item.key): track.line
            for spec, tracks in zip(self.specs, self.tracks, strict=False)
            for item, track in tracks.items()
        }

    def save(self, path: str | Path, dpi: int = 120) -> None:
        save_figure(self.figure, path, dpi)


def save_figure(figure: Figure, path: str | Path, dpi: int = 120) -> None:
    """PNG, SVG or PDF by the file's extension."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in SAVE_FORMATS:
        raise ValueError(
            f"cannot save a chart as {path.name!r}: use a .png, .svg or .pdf file name"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format=fmt, dpi=dpi)


def render(
    cache: SeriesCache,
    state: ViewState,
    refs: list[RunRef],
    size=(12, 7.5),
    dpi: int = 100,
    fetch: Callable[[], object] | None = None,
    rounds: int = 4,
) -> ChartPage:
    """A page drawn once, headless (for `resplot snapshot` and tests). `fetch` reads the tiles
    the charts asked for (the sources' poll); without it, only what the cache holds is drawn."""
    state.assign_looks(refs)
    page = ChartPage(state.page, Figure(figsize=size, dpi=dpi))
    page.refresh(cache, state, refs)  # lays the axes out, so the next pass knows their widths
    for _ in range(rounds):
        page.refresh(cache, state, refs)
        if fetch is None or not cache.wanted_count():
            break
        fetch()  # the tiles at the resolution each chart asked for (and the tokens guide's)
    else:
        page.refresh(cache, state, refs)  # what the last fetch brought
    return page
