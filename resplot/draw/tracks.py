"""One series on one axes (a Track): its line, its min/max band, the faint raw series under a
smoothed line and NaN/±inf markers, set from the series' view at the chart's resolution.
ChartPage (resplot/draw/charts.py) keeps one Track per plotted item; on refresh it prepares
every track (its view), then places each in the chart's pixel columns. The marks it sets
besides its lines and bands (point markers and lone points' dots, NaN/±inf, the run's end) are
TrackMarks (resplot/draw/track_marks.py).
"""

from __future__ import annotations

import threading

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon

from resplot.data import marks, xaxis
from resplot.data.cache import SeriesCache
from resplot.data.decimate import Grid, Reuse, decimate_many, in_order
from resplot.data.pages import Item
from resplot.data.smoothing import (
    smoothable,
)
from resplot.data.views import FINE_PER_PIXEL, SeriesView, ViewMemo, series_view
from resplot.draw.clip_box import share_clip_box
from resplot.draw.limits import extent_points, line_limits
from resplot.draw.plain_draw import PlainBand, PlainLine
from resplot.draw.tiers import ends_past, same_cut, streams, tier_zorder
from resplot.draw.track_inputs import RunContext, smoothed_curve
from resplot.draw.track_marks import TrackMarks
from schema.store.rollup import STEP_HI

BUCKET_POINTS = 4  # points a bucket view holds per bucket (its extremes, last value, last point)


def _band(ax, color: str, **kw) -> Polygon:
    """An envelope band: a patch added with add_artist, which Axes.relim() leaves out (it
    would walk the path in Python, ~60 ms for a 1000-column envelope; the caller adds the
    vertices' limits). Not a PolyCollection: matplotlib draws a one-polygon collection as a
    marker, 3.7 ms a band against 0.6 ms as a path (the 592-series system page: 0.8 s)."""
    band = PlainBand(np.zeros((0, 2)), closed=True, facecolor=color, edgecolor=color, **kw)
    band.set_visible(False)
    ax.add_artist(band)
    share_clip_box(ax, band)
    return band


# Pages with more series than this fill dense stretches as their min/max band: Agg strokes the
# M4 line ~3x slower than it fills the band (the system page of 8 runs x 66 keys: 3.2 s a draw
# against 1.0 s), and the band covers the line's pixels within one pixel (tests/
# test_pixel_fidelity.py). Fewer series are drawn as the line through each column's first,
# min, max and last point: within ~0.5 % of the pixels of the line through every point.
BAND_FROM_SERIES = 96
# Such pages also ask for one fine bucket a pixel, not four (views.FINE_PER_PIXEL): the system
# page of 8 runs x 66 keys at four a pixel brought 1.3M bucket rows to fill as bands.
DENSE_PAGE_FINE_PER_PIXEL = 1


def _set_band(band: Polygon, d) -> np.ndarray | None:
    """Fill `band` with a decimation's per-column envelope; its vertices, None when none (the
    line is drawn)."""
    if d.col_x is None:
        band.set_visible(False)
        return None
    ok = np.isfinite(d.col_min) & np.isfinite(d.col_max)
    cx, lo, hi = d.col_x[ok], d.col_min[ok], d.col_max[ok]
    if len(cx) == 0:
        band.set_visible(False)
        return None
    # Tops left to right, then bottoms back, written in place: np.r_ and column_stack took
    # 13.6 us for 400 columns, this 2.1 (a live poll sets ~8 bands).
    n = len(cx)
    xy = np.empty((2 * n, 2))
    xy[:n, 0], xy[n:, 0] = cx, cx[::-1]
    xy[:n, 1], xy[n:, 1] = hi, lo[::-1]
    band.set_xy(xy)
    band.set_visible(True)
    return xy


class Track(TrackMarks):
    """One Item on one axes: the raw series (faint when smoothed), the smoothed line, and
    markers for NaN/inf. Dense data (several points per pixel column) is drawn as its min/max
    envelope; sparse data as a line through the points."""

    def __init__(self, ax, item: Item) -> None:
        self.item = item
        self.ax = ax
        # The series is in the live tier (resplot/draw/tiers.py), its run streams in.
        self.live = self.streaming = False
        self.line = PlainLine(
            [],
            [],
            linewidth=1.4,
            label=item.label,
            marker=item.marker or "None",
            markersize=3.5,
            color=item.color,
            linestyle=item.style,
        )
        ax.add_line(self.line)
        share_clip_box(ax, self.line)
        # The main line's envelope on a dense page (BAND_FROM_SERIES), the faint raw series
        # under a smoothed line, and the NaN/inf markers are made when first needed: most
        # pages never fill the main line's band, a page of 600 series (the system page)
        # mostly needs neither of the others, and each artist costs matplotlib ~0.3 ms to add
        # and the collector ~13 objects to traverse at every full pass (resplot/draw/clip_box.py).
        self.band: Polygon | None = None
        self.raw: Line2D | None = None
        self.raw_band: Polygon | None = None
        self.bad: Line2D | None = None
        self.bad_span: PolyCollection | None = None  # shaded stretches of NaN / inf
        self.end: Line2D | None = None  # the run's state where the line ends
        self._end_look: tuple = ()  # its colour, marker and sizes as last set
        self.band_xy: list[np.ndarray] = []  # vertices drawn as bands (for the limits)
        self.view: SeriesView | None = None  # what the last update drew
        self.x = np.empty(0)  # x of view.steps
        self.x_mid = np.empty(0)  # x of view.mid_steps
        self.smoothed: np.ndarray | None = None  # at view.mid_steps (what the hover reads)
        self.faded = False
        self._markers_on = True  # the item's point markers shown (ChartPage's declutter)
        self._lone: list[int] = []  # the main line's points no segment reaches (_set_markers)
        self.unplaced = False  # has data the x axis cannot place (no tokens / counter logged)
        self.ctx: RunContext | None = None  # what the last prepare() drew from
        self.mode = "step"
        self.cache: SeriesCache | None = None  # where the hover looks up logged values
        # What the last prepare() and place() worked from: a poll that brought this series no
        # new points (nor changed its range, width or style) recomputes nothing and leaves
        # its artists as they are (`changed` says whether the last place() set them).
        self._memo = ViewMemo()
        # The memo and the warmed work are shared with the poller's thread, which warms a
        # live series ahead of the poll's refresh (work_ahead): one of the two at a time.
        self._lock = threading.Lock()
        self.asked: tuple | None = None  # the last prepare()'s arguments after the cache
        # A live series' last place() (pixels, x range, grid), and the cuts work_ahead made
        # into them from the view it worked out, for the place() after the prepare() that
        # takes that view.
        self._cut_args: tuple | None = None
        self._cuts_ahead: tuple | None = None
        self._prepared: tuple = ()
        self._warmed: tuple | None = None  # (what prepare() will be asked, its work): warm()
        self._placed: tuple = ()
        self._generation = 0
        # x_range() and x_steps() of a generation: a poll asks every track of the page for
        # them (the follow fit, the zoom's step map), and most tracks got no new points.
        self._spans: dict[str, tuple[int, object]] = {}
        self.changed = True
        # Per-line data limits of the last place() (ChartPage's follow fit, without relim).
        self.limits: list[tuple[bool, bool, np.ndarray]] = []
        # A live series' last cuts into pixel columns (its raw points', its line's): a poll
        # cuts again only the columns its new points changed (resplot/data/decimate.py).
        # None while settled: kept for every series of a page, they would double its memory.
        self._reuse: tuple[Reuse, Reuse] | None = None
        # A streaming series' last cut as set on its artists, and what it was cut for.
        self._set_cut: tuple | None = None

    def _main_band(self) -> Polygon:
        if self.band is None:
            # An edge, so that a column range of zero height still shows as a line.
            self.band = _band(self.ax, self.item.color, linewidth=1.0)
            self._tier(self._tiered())  # its zorder
            if self.faded:
                self.band.set_alpha(0.12)
        return self.band

    def _faint(self) -> tuple[Line2D, Polygon]:
        if self.raw is None or self.raw_band is None:
            item = self.item
            self.raw = PlainLine(
                [], [], linewidth=0.8, alpha=0.25, color=item.color, linestyle=item.style
            )
            # Never snapped to the pixel grid: Agg snaps a band whose edges are all level or
            # upright (a flat series), and a live one's newest column flipped that each poll
            # (a full draw each time: resplot/ui/tails.py); at a quarter alpha, alike.
            self.raw_band = _band(self.ax, item.color, linewidth=0, alpha=0.25, snap=False)
            self.ax.add_line(self.raw)
            share_clip_box(self.ax, self.raw)
            self._tier(self._tiered())  # their zorders
            if self.faded:
                self.raw.set_alpha(0.25 * 0.12)
                self.raw_band.set_alpha(0.25 * 0.12)
        return self.raw, self.raw_band

    def _bad(self) -> tuple[Line2D, PolyCollection]:
        if self.bad is None or self.bad_span is None:
            self.bad = Line2D(
                [],
                [],
                linestyle="none",
                marker="x",
                markersize=6,
                markeredgewidth=1.6,
                color=self.item.color,
                transform=self.ax.get_xaxis_transform(),
                clip_on=False,
            )
            self.ax.add_line(self.bad)
            self.bad_span = PolyCollection(
                [],
                facecolors=self.item.color,
                alpha=0.1,
                linewidths=0,
                transform=self.ax.get_xaxis_transform(),
            )
            self.ax.add_collection(self.bad_span, autolim=False)
            share_clip_box(self.ax, self.bad, self.bad_span)
            self._tier(self._tiered())  # their zorders
            if self.faded:
                self.bad.set_alpha(0.12)
        return self.bad, self.bad_span

    def remove(self) -> None:
        for artist in (
            self.raw,
            self.line,
            self.bad,
            self.raw_band,
            self.band,
            self.bad_span,
            self.end,
        ):
            if artist is not None:
                artist.remove()

    def clear(self) -> None:
        self._prepared = self._placed = ()
        self._reuse = self._set_cut = None
        self.limits = []
        self.changed = True
        # Only what is not clear already: a change marks a settled series' saved picture out
        # of date (resplot/ui/layers.py), and a series without data here is cleared each poll.
        for artist in (self.raw, self.line, self.bad):
            if artist is not None and len(artist.get_xdata(orig=True)):
                artist.set_data([], [])
        for band in (self.band, self.raw_band, self.bad_span, self.end):
            if band is not None and band.get_visible():
                band.set_visible(False)
        self._lone = []  # (markevery's indices are into the data: none now)
        self._set_markers()
        self.band_xy = []
        self.view = None
        self.smoothed = None

    def fade(self, faded: bool) -> None:
        """Dim this series while another run is highlighted."""
        if faded == self.faded:
            return
        self.faded = faded
        for artist, alpha in (
            (self.line, 1.0),
            (self.band, 1.0),
            (self.bad, 1.0),
            (self.raw, 0.25),
            (self.raw_band, 0.25),
        ):
            if artist is not None:
                artist.set_alpha(alpha * (0.12 if faded else 1.0))

    def prepare(
        self,
        cache: SeriesCache,
        ctx: RunContext,
        mode: str,
        weight: float,
        pixels: int,
        fine_per_pixel: int = FINE_PER_PIXEL,
    ) -> SeriesView | None:
        """The series' view at this resolution, its x and its smoothed curve (no artist yet:
        place() cuts them into the chart's pixel columns)."""
        self.ctx, self.mode, self.cache = ctx, mode, cache
        self.asked = (ctx, mode, weight, pixels, fine_per_pixel)
        with self._lock:
            view, stamp = self._view_for(cache, ctx, mode, weight, pixels, fine_per_pixel)
            warmed, self._warmed = self._warmed, None
            self._cuts_ahead = None
            if view is not None and _same(stamp, self._prepared):
                return view
            self._prepared = stamp
            if warmed is not None and _same(stamp, warmed[0]):
                worked, self._cuts_ahead = warmed[1], warmed[2]
            else:
                worked = self._work(cache, view, ctx, mode, weight)
        self._generation += 1  # what place() worked from changed
        if worked is None:
            self.clear()
            self.unplaced = view is not None  # data, but this x axis cannot place it
            return None
        self.unplaced = False
        self.view = view
        self.x, self.x_mid, self.smoothed, whole = worked
        if not whole:
            self._prepared = ()  # its warm-up's tiles are not here yet: again next time
        return view

    def warm(
        self,
        cache: SeriesCache,
        ctx: RunContext,
        mode: str,
        weight: float,
        pixels: int,
        fine_per_pixel: int = FINE_PER_PIXEL,
        cut: tuple | None = None,
    ) -> None:
        """Work out what prepare() with these arguments will, and keep it for that call; the
        view, x and curve the track shows (the hover reads them) stay as they are. A zoom's
        refresh of a page worked out every series' view in one turn of the event loop
        (resplot/ui/redraw_turns.py spreads this over turns). With `cut` (a live series'
        place() arguments), its cuts into those columns too. Safe on another thread (the
        poller's: work_ahead)."""
        with self._lock:
            view, stamp = self._view_for(cache, ctx, mode, weight, pixels, fine_per_pixel)
            if view is None or _same(stamp, self._prepared):
                return
            if self._warmed is None or not _same(stamp, self._warmed[0]):
                worked = self._work(cache, view, ctx, mode, weight)
                cuts = None
                if cut is not None and worked is not None and self._reuse is not None:
                    cuts = (cut, self._cut(view, worked[:3], *cut, self._reuse))
                self._warmed = (stamp, worked, cuts)

    def work_ahead(self, ctx: RunContext | None = None) -> None:
        """warm() with the last prepare()'s and place()'s arguments (the run's context
        `ctx` if given): on the poller's thread, once new points of the series are in the
        cache, so that the poll's refresh on the GUI thread finds their view, curve and cuts
        made (its ranges, width, smoothing and columns as they were: else it works them out
        itself, as without this)."""
        asked, cache = self.asked, self.cache
        if asked is not None and cache is not None:
            self.warm(cache, ctx or asked[0], *asked[1:], cut=self._cut_args)

    def _view_for(
        self,
        cache: SeriesCache,
        ctx: RunContext,
        mode: str,
        weight: float,
        pixels: int,
        fine_per_pixel: int,
    ) -> tuple[SeriesView | None, tuple]:
        """The series' view (kept in the memo between calls) and what the rest of prepare()
        works from."""
        item = self.item
        view = series_view(
            cache,
            item.ref,
            item.key,
            ctx.lo,
            ctx.hi,
            pixels,
            fine_per_pixel=fine_per_pixel,
            memo=self._memo,
        )
        # The run matters to x on the relative time axis only (its start: not its heartbeat,
        # which a live run's every poll moves, so that work done ahead of the poll's refresh
        # stays good for it: work_ahead); the guide's arrays on a guided axis.
        guide = () if ctx.guide is None else tuple(ctx.guide)
        start = ctx.run.created_at if mode == "relative" and ctx.run is not None else None
        return view, (view, mode, weight, ctx.lo, start, *guide)

    def _work(self, cache, view, ctx, mode, weight) -> tuple | None:
        """A view's x, its buckets' x and its smoothed curve, and whether that curve's warm-up
        was all there; None where there is no view or the x axis cannot place it."""
        if view is None:
            return None
        x = xaxis.x_values(mode, ctx.run, view.steps, view.walls, ctx.guide)
        if x is None:
            return None
        x_mid = (
            x
            if view.level == 0
            else xaxis.x_values(mode, ctx.run, view.mid_steps, view.mid_walls, ctx.guide)
        )
        smoothed, whole = None, True
        item = self.item
        if item.smooth and weight > 0 and len(view.mid_steps) and smoothable(item.key):
            smoothed, whole = smoothed_curve(cache, item, view, weight, ctx.lo)
        return x, x_mid, smoothed, whole

    @staticmethod
    def _cut(view: SeriesView, worked: tuple, pixels: int, xlim, grid, reuse) -> tuple:
        """(raw, main): the view's points (x, x_mid, smoothed: `worked`) cut into the chart's
        pixel columns, the smoothed curve's or else the raw points' again as the main line."""
        x, x_mid, smoothed = worked
        reuse = reuse or (None, None)
        if smoothed is not None and view.level == 0:
            raw, main = decimate_many(
                x, [view.values, smoothed], pixels, xlim, grid=grid, reuse=reuse[0]
            )
            return raw, main
        # Up to three points a bucket (its min, max and last): more than that a pixel are
        # cut into the pixel columns, like raw points past four a pixel.
        dense = BUCKET_POINTS if view.level else 4
        raw = decimate_many(
            x, [view.values], pixels, xlim, line_max=dense, grid=grid, reuse=reuse[0]
        )[0]
        if smoothed is None:
            return raw, raw
        return raw, decimate_many(x_mid, [smoothed], pixels, xlim, grid=grid, reuse=reuse[1])[0]

    def _tiered(self) -> list:
        """(artist, settled zorder) of the series' artists made so far: the faint raw series
        under every track's main line and band whatever the order made, the NaN shading
        lowest (the end mark, at 4, lies over every series either way)."""
        out = [(self.line, 2.0)]
        if self.band is not None:
            out.append((self.band, 1.0))
        if self.raw is not None and self.raw_band is not None:
            out += [(self.raw, 1.9), (self.raw_band, 0.9)]
        if self.bad is not None and self.bad_span is not None:
            out += [(self.bad, 2.0), (self.bad_span, 0.4)]
        return out

    def _tier(self, artists: list) -> None:
        for artist, base in artists:
            z = tier_zorder(base, self.live, self.streaming)
            if artist.get_zorder() != z:  # a set marks a settled series' picture stale
                artist.set_zorder(z)

    def settled_artists(self) -> list:
        """The series' artists, where they are settled (none in the live tier)."""
        return [] if self.live else [artist for artist, _base in self._tiered()]

    def set_tier(self, live: bool, streaming: bool) -> None:
        """Put the series in the live tier (over every settled series) or back; `streaming`:
        its run may still get points (tiers.py)."""
        if (live, streaming) != (self.live, self.streaming):
            self.live, self.streaming = live, streaming
            self._tier(self._tiered())

    def _kept(self, name: str, make):
        """make() once a generation (what prepare() set: view, x, x_mid)."""
        kept = self._spans.get(name)
        if kept is None or kept[0] != self._generation:
            kept = self._spans[name] = (self._generation, make())
        return kept[1]

    def x_range(self) -> tuple[float, float] | None:
        """The smallest and largest x this track draws (None: nothing to draw)."""
        if self.view is None:
            return None
        return self._kept("range", self._x_range)

    def x_steps(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(x, step) of the view's points sorted by x (None: fewer than two): how a zoomed x
        range on another x axis maps back to steps."""
        if self.view is None or len(self.x) < 2:
            return None
        return self._kept("steps", lambda: in_order(self.x, self.view.steps.astype(np.float64)))

    def _x_range(self) -> tuple[float, float] | None:
        # Zoomed out, a stretch of NaN draws no point; its buckets' middles still place it
        # (the hover's "ended" is read from here: a NaN tail is not an end).
        x = self.x if self.view.level == 0 else np.concatenate([self.x, self.x_mid])
        x = x[np.isfinite(x)]
        return (float(x.min()), float(x.max())) if len(x) else None

    def _ends_past(self, xlim, summary) -> bool:
        """Whether the series ends past the view's right edge (tiers.ends_past)."""
        view = self.view
        if view is None or not len(view.steps):
            return False
        # (a view's steps ascend: its cuts are binary searches of them)
        holds_end = summary is None or int(view.steps[-1]) >= summary.agg[STEP_HI]
        return ends_past(self.x, self.x_mid, view.level, xlim, holds_end)

    def place(self, pixels: int, xlim, grid: Grid | None = None, band: bool = False) -> None:
        """Cut the prepared view into the chart's pixel columns (`grid`, shared by every series
        of the chart; else `pixels` slices of `xlim`) and set the artists' data: a line through
        each column's first, min, max and last point, or with `band`, dense stretches filled
        as their min/max envelope (BAND_FROM_SERIES)."""
        view = self.view
        if view is None:
            return
        run = self.ctx.run if self.ctx is not None else None
        summary = self.cache.summary(self.item.ref, self.item.key) if self.cache else None
        streaming = streams(run)
        self.set_tier(streaming and not self._ends_past(xlim, summary), streaming)
        stamp = (
            self._generation,
            pixels,
            xlim,
            grid,
            band,
            None if run is None else (run.status, run.ended_at, run.heartbeat_at),
            None if summary is None else summary.agg[STEP_HI],
        )
        # (scalars, tuples and a Grid: compared by value in one go, not element by element as
        # the views' stamps must be)
        self.changed = stamp != self._placed
        if not self.changed:
            return
        self._placed = stamp
        with self._lock:  # (the cuts' reuse is work_ahead's too)
            if not self.streaming:
                self._reuse = None
            elif self._reuse is None:
                self._reuse = (Reuse(), Reuse())
            self._cut_args = (pixels, xlim, grid) if self.streaming else None
            ahead, self._cuts_ahead = self._cuts_ahead, None
            if ahead is not None and ahead[0] == (pixels, xlim, grid):
                raw, main = ahead[1]
            else:
                worked = (self.x, self.x_mid, self.smoothed)
                raw, main = self._cut(view, worked, pixels, xlim, grid, self._reuse)
        smoothed = self.smoothed
        frame = (pixels, xlim, grid, band, smoothed is None, self.live)
        kept, self._set_cut = self._set_cut, (frame, (raw, main)) if self.streaming else None
        if (
            not self.live
            and kept is not None
            and kept[0] == frame
            and same_cut(kept[1], (raw, main))
        ):
            # A streaming series in the settled tier whose new points all landed past the
            # view's edge: its artists stay as they are (tiers.py).
            self.changed = False
            return
        self.band_xy = []
        if smoothed is None:
            if self.raw is not None and self.raw_band is not None:
                self.raw.set_data([], [])
                self.raw.set_visible(False)
                self.raw_band.set_visible(False)
        else:
            faint, faint_band = self._faint()
            # The faint series under a smoothed curve is context: where it is cut into columns
            # it is filled as its min/max band on every page. Agg strokes that zig-zag ~6x
            # slower than it fills the band (150 of the 200 ms a draw of 12 runs took,
            # scripts/bench/bench_redraw.py), and at a quarter alpha the two look alike.
            faint_xy = _set_band(faint_band, raw)
            if faint_xy is None:
                faint.set_data(raw.x, raw.y)
            else:
                faint.set_data([], [])
                self.band_xy.append(faint_xy)
            faint.set_visible(faint_xy is None)
        main_xy = None
        if band:
            main_xy = _set_band(self._main_band(), main)
        elif self.band is not None:
            self.band.set_visible(False)
        # The line keeps the M4 points either way (queries, export of the view); it is hidden
        # under the band where the band is drawn.
        self.line.set_data(main.x, main.y)
        self._lone = marks.lone_points(main.y)
        self._set_markers()
        self.line.set_visible(main_xy is None)
        if main_xy is not None:
            self.band_xy.append(main_xy)
        self._mark_nonfinite(view, self.x_mid, pixels, xlim)
        self._mark_end(main.x, main.y, self.ctx.run, self.mode, self._ends_in(view, xlim))
        self.limits = [line_limits(ln) for ln in (self.line, self.raw, self.end) if ln is not None]
        if self.bad is not None:
            self.limits.append(line_limits(self.bad, y=False))
        # The bands: added with add_artist, out of relim; their vertices count as the page's.
        self.limits += [(True, True, extent_points(xy[:, 0], xy[:, 1])) for xy in self.band_xy]


def _same(a: tuple, b: tuple) -> bool:
    """Stamps alike: arrays and views the same objects, everything else equal."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y:
            continue
        if isinstance(x, tuple) and isinstance(y, tuple):
            if not _same(x, y):
                return False
        elif (
            isinstance(x, (np.ndarray, SeriesView))
            or isinstance(y, (np.ndarray, SeriesView))
            or x != y
        ):
            return False
    return True
