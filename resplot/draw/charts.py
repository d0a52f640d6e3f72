"""Chart pages as matplotlib Figures (no pyplot): built once, then updated in place.

A ChartPage owns one Figure with one axes per panel (data/pages.py says which). Every plotted
series is a Track (draw/tracks.py) holding its artists; refresh() sets each from its series' view at
the panel's width (tiles, smoothing, decimation per pixel column for the visible x-range) and
calls `set_data` on the existing artists. The same class draws the window's canvases and the
headless `resplot snapshot`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reslog.text import safe
from resplot.data import hover, layout, marks, xaxis
from resplot.data.cache import SeriesCache
from resplot.data.decimate import Grid
from resplot.data.model import RunRef
from resplot.data.names import distinct_parts
from resplot.data.pages import TIMING_PARTS, Item, PanelSpec, panels_for
from resplot.data.state import ViewState
from resplot.data.views import FINE_PER_PIXEL, ViewMemo
from resplot.draw import fonts
from resplot.draw.axes_setup import NOTE_PT
from resplot.draw.chart_layout import ChartLayout
from resplot.draw.chart_scope import ChartScope
from resplot.draw.composites import PART_COLORS, Stack, ThrottleBars
from resplot.draw.events import EventLines, EventPlaces, draw_events
from resplot.draw.figure_files import save_figure
from resplot.draw.legends import AxesLegend, Entry, RunStrip
from resplot.draw.limits import ChartLimits, fit_data_limits, quietly, shown_limits
from resplot.draw.tracks import Track
from schema.rules.compare import metric_stats
from schema.store.status import FINISHED

STRIP_ROWS = 2  # more rows of whole run names: the strip names the part that differs


class ChartPage(ChartLayout, ChartLimits, ChartScope):
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
        self._gridspec = None  # the figure's grid of charts (section bands: shorter rows)
        self._extra: list[list] = []  # per axes: its composite's artists as last drawn
        # per axes: its step-time stack or throttle bars, kept between refreshes
        self._composites: list[Stack | ThrottleBars | None] = []
        self._events: list[EventLines] = []
        self._event_places = EventPlaces()  # each run's, shared by the charts
        self._empty: list = []
        self._legends: list[AxesLegend] = []
        self._views: list[list] = []  # per axes: the series views drawn by the last refresh
        self._notes: list = []
        # Names every plotted run above the charts: drawn in the figure (snapshots), or by the
        # window in a Qt label above the canvas, where its text costs no draw time (a strip of
        # 10 runs took ~20 ms of every redraw as matplotlib text).
        self.strip_in_figure = strip_in_figure
        # The x axis's name under the bottom charts: in snapshots; the window's toolbar names
        # it (and the 18 px go to the charts at laptop height).
        self.x_labels = strip_in_figure
        self.strip = RunStrip(self.figure)
        self.entries: list[Entry] = []
        self.grid = layout.Grid(1, 1)
        self.follow = True  # autoscale to all data; False after the user zooms or pans
        # Follow with headroom (resplot/data/headroom.py): limits move in steps as data
        # streams in, so that a poll redraws the data alone (the window's pages; a snapshot
        # fits its data exactly).
        self.headroom = False
        # The charts the window shows (None: every one): set by the window's page view. In a
        # user's view (a zoom, a pan) the others keep what they drew and are `behind`: the
        # window leaves them out of its draws and has the page refreshed when they come into
        # view (resplot/ui/layers.py). Follow mode refreshes every chart (the x range is the
        # page's data).
        self.in_view: Callable[[], list[int] | None] | None = None
        self.behind: set[int] = set()
        self._followed: dict[int, tuple] = {}  # ylim follow mode set per axes; -1: the xlim
        # chart -> (what its y autoscaling depended on, the range it gave): _autoscaled_y
        self._autoscaled: dict[int, tuple[tuple, tuple[float, float]]] = {}
        self._sticky: dict[int, tuple[tuple, tuple]] = {}  # chart -> its children, sticky y
        self._placed: tuple | None = None  # the layout _place() last applied
        self._layered: dict[int, tuple] = {}  # chart -> its children then, its layer_artists
        # Per run: (x, step) pairs of its widest drawn view, sorted by x: how a zoomed x range
        # on the wall, relative or tokens axis maps back to the steps whose tiles it needs.
        self._x_steps: dict[RunRef, tuple[np.ndarray, np.ndarray]] = {}
        self._updating = False
        self._x_root = None  # the axes every chart shares x with (chart_layout._x_anchor)
        self._dense = False  # more series than BAND_FROM_SERIES: bands, one fine bucket a pixel
        self._fine = FINE_PER_PIXEL
        # (chart, run, key) -> (what its fine points were worked out from, the count): _fine_points
        self._fine_kept: dict[tuple, tuple[tuple, float]] = {}
        self._guides: dict[tuple, ViewMemo] = {}  # (run, key, width) -> its guide's view memo
        self._guide_lock = threading.Lock()  # the memos are work_ahead's too
        self.message = None
        self.highlighted: RunRef | None = None  # a clicked run: the others are faded
        self.selected: set[RunRef] = set()  # runs selected in the table (their events show)
        self._events_left_out: set[int] = set()  # charts that left some runs' events out
        self._clipped: set[int] = set()  # charts whose y range ignores outliers
        self._placeholders: dict[int, float] = {}  # charts whose y range leaves one out

        self._user_y: set[int] = set()  # charts whose y range the user zoomed or panned
        self._keeping_y = False  # a pan along x is setting limits (keeping_y)
        self.view_height_px: float | None = None  # what the window shows of the figure
        self.run_names: dict[RunRef, str] = {}  # of the plotted runs (the hover readout's rows)
        self.x_mode = "step"  # the x axis of the last refresh
        self._settled: tuple | None = None  # the _view_key of the last refresh drawn whole
        # The tracks the last refresh prepared, whose new points the poller's thread works on
        # ahead of the next one (work_ahead); replaced whole, never changed in place.
        self.ahead: tuple[Track, ...] = ()
        self.empty_text = "No series to show: tick runs, or widen the custom key globs."

    def user_view(self) -> bool:
        """Whether the view is the user's: x zoomed or panned, or a chart's y (kept until
        Follow data)."""
        return not self.follow or bool(self._user_y)

    def release(self) -> None:
        """Give back the charts (resplot/ui/page_release.py): the figure cleared, and with it
        the axes, tracks, legends and notes (their bitmaps); the layout forgotten, so the next
        refresh builds the page anew, as a first view."""
        hover.forget(self.tracks)
        self.ahead, self._guides = (), {}
        self._rebuild([], self.x_mode, self.grid)
        self._layout = None
        self.specs, self._x_steps = [], {}

    def chart_axes(self) -> list:
        """The axes that draw data (not the All page's section cards); they share x."""
        charts = [ax for ax, s in zip(self.axes, self.specs, strict=False) if s.kind != "section"]
        return charts or self.axes

    def incomplete(self) -> int:
        """Series of the last refresh drawn coarser than their charts asked for, or not at all
        (their tiles have not arrived). A series the x axis cannot place (a run that did not
        log the counter the axis is) is not one: its chart's note says so, and no tile that
        comes changes it."""
        tracks = [t for ts in self.tracks for t in ts.values() if not t.unplaced]
        return sum(1 for t in tracks if t.view is None or not t.view.complete)

    def shows_data(self) -> bool:
        """Whether the last refresh left anything to draw (stand-ins while tiles load count)."""
        return any(self._views)

    # -- refresh ------------------------------------------------------------------------------
    def refresh(
        self, cache: SeriesCache, state: ViewState, refs: list[RunRef], every: bool = False
    ) -> None:
        """Bring the artists up to date with the cache and the state (no drawing): those of
        every chart, or in a user's view of the charts in view only (`behind`; `every`: all
        the same, as a saved file draws them)."""
        for _ in self.refresh_steps(cache, state, refs, every):
            pass

    def refresh_steps(
        self, cache: SeriesCache, state: ViewState, refs: list[RunRef], every: bool = False
    ) -> Iterator[None]:
        """refresh(), a yield after each chart's artists are set (resplot/ui/redraw_turns.py runs
        it over turns of the event loop, the page not drawn until it ends). Between yields the
        page is not `_updating`: a limit changed there is the user's. Dropped (closed) before
        its end, it leaves charts set and charts not: the page is to be refreshed again."""
        cache.begin_view()
        specs = panels_for(self.page, cache, refs, state)
        texts = [s.title for s in specs] + [it.label for s in specs for it in s.items]
        if fonts.enable_for(texts):  # CJK names or keys: texts made from now on fall back
            self._layout = None
        key = self._layout_key(specs, state)
        grid = key[2]
        built = key != self._layout and not (
            self.axes and self._layout is not None and key[:2] == self._layout[:2]
        )
        if built:
            self._layout = None  # until built (a redraw dropped meanwhile builds it again)
            yield from self._build(specs, state.x_axis, grid)
            self.follow = True
        elif key != self._layout:
            self._relayout(specs, grid)  # the same charts, another grid: a resize
        self._layout = key
        self.specs = specs
        self.x_mode = state.x_axis
        self.run_names = {}
        for ref in refs:
            run = cache.run(ref)
            self.run_names[ref] = safe(run.name) if run is not None else ref.uid[:8]
        if not self.axes:
            if self.message is not None:
                self.message.set_text(self.empty_text)
            return
        self.entries = self._strip_entries(cache, state, refs, specs)
        self._place(self.entries if self.strip_in_figure else [])
        self._updating = True
        try:
            xlim = None if self.follow else tuple(self.chart_axes()[0].get_xlim())
            if xlim is None:
                self._x_steps = {}
            scope = self._scope(cache, state, specs, refs, xlim, every)
            fresh, contexts = scope.fresh, scope.contexts
            self.behind = set(range(len(specs))) - set(fresh)
            self._dense, self._fine = scope.dense, scope.fine
            self._event_places.keep(scope.page_refs)
            for i in fresh:
                self._prepare_panel(i, specs[i], cache, state, contexts[i])
                if built:  # every series new (none shown): a chart's views a step
                    self._updating = False
                    yield
                    self._updating = True
            # Every series of the page is cut into the same pixel columns: the x range shown
            # (when following the data, the one autoscaling would give), set before drawing.
            shown = xlim if xlim is not None else self._follow_x()
            limits = [shown_limits(ax) for ax in self.axes]  # as drawn: a change redraws the axes
            for i in fresh:
                with quietly(self.axes[i]):  # its data only: drawn over the saved axes
                    self._refresh_panel(i, specs[i], cache, state, refs, xlim, shown, contexts[i])
                self._updating = False
                yield
                self._updating = True
            if self.follow:
                for i, ax in enumerate(self.axes):
                    limits[i] = self._follow_y(i, ax, state, shown is None, limits[i])
            else:
                for i in fresh:
                    ax = self.axes[i]
                    with quietly(ax):
                        self._refit_y(i, state, xlim)
                    now = shown_limits(ax)
                    if now != limits[i]:
                        ax.stale = True
                    limits[i] = now
            for i in fresh:
                self._update_legend(i, specs[i], cache)
            self._whole_end_marks(limits)  # (each chart's limits now)
            for events in self._events:
                events.show()  # for the limits now set
            self._settled = self._view_key(state, refs) if not self.incomplete() else None
            self.ahead = tuple(t for i in fresh for t in self.tracks[i].values())
        finally:
            self._updating = False

    def warm(self, cache: SeriesCache, state: ViewState, refs: list[RunRef]) -> Iterator[None]:
        """Work out the series' views and curves the next refresh() with these arguments will
        draw, a track at a time (a yield after each), changing nothing the page shows: that
        refresh finds them made (Track.warm). Nothing where the page is to be laid out anew
        (its tracks are made then) or a chart's series are new, nor where the view is the one
        the last refresh drew whole (a poll: only live series' ends are new, the refresh's
        own work; walking every series for that cost a followed poll ~3 ms)."""
        if self._settled is not None and self._view_key(state, refs) == self._settled:
            return
        specs = panels_for(self.page, cache, refs, state)
        if not self.axes or self._layout_key(specs, state) != self._layout:
            return
        xlim = None if self.follow else tuple(self.chart_axes()[0].get_xlim())
        scope = self._scope(cache, state, specs, refs, xlim)
        for i in scope.fresh:
            if specs[i].kind != "line":
                continue
            for item in specs[i].items:
                track = self.tracks[i].get(item)
                if track is None:
                    continue
                ctx = scope.contexts[i][item.ref]
                pixels = self._pixels(i)
                track.warm(cache, ctx, state.x_axis, state.smoothing, pixels, scope.fine)
                yield

    def work_ahead(self, refs: set[RunRef]) -> None:
        """On the poller's thread, once `refs`' new points are in the cache: the views,
        curves and cuts of their series that the next refresh will ask for (Track.work_ahead;
        on a guided axis with the guide it will find), so that a live poll's data work is off
        the GUI thread. Changes nothing the page shows."""
        guides: dict[tuple, object] = {}
        for track in self.ahead:
            ref, asked, cache = track.item.ref, track.asked, track.cache
            if ref not in refs or asked is None or cache is None:
                continue
            ctx, pixels = asked[0], asked[3]
            if ctx.guide_key is not None:
                at = (ref, ctx.guide_key, pixels, ctx.lo, ctx.hi)
                if at not in guides:
                    guides[at] = self._guide_ahead(cache, ref, ctx, pixels)
                if guides[at] is False:
                    continue
                ctx = replace(ctx, guide=guides[at])
            track.work_ahead(ctx)

    def _view_key(self, state: ViewState, refs: list[RunRef]) -> tuple:
        """What the series' views of a refresh depend on besides their data: the layout, the
        x range (following: none), the x axis, smoothing, runs, charts' widths, those shown."""
        xlim = None if self.follow or not self.axes else tuple(self.chart_axes()[0].get_xlim())
        shown = self.in_view() if self.in_view is not None else None
        shown = None if shown is None else tuple(sorted(shown))
        widths = tuple(self._pixels(i) for i in range(len(self.axes)))
        return (self._layout, xlim, state.x_axis, state.smoothing, tuple(refs), widths, shown)

    def _whole_end_marks(self, limits: list[tuple]) -> None:
        """An end mark (live dot, crash cross) on a point at the chart's edge, a run's last
        value the top of the y range, was cut in half by the axes' clip: drawn whole where
        every point of it is inside the chart's limits (`limits`: each chart's (xlim, ylim)),
        clipped otherwise (a dashed tail past the view, a value above an outlier-clipped
        range)."""
        for (xlim, ylim), tracks in zip(limits, self.tracks, strict=False):
            (x0, x1), (y0, y1) = sorted(xlim), sorted(ylim)
            for track in tracks.values():
                end = track.end
                if end is None or not end.get_visible():
                    continue
                x = np.asarray(end.get_xdata(), float)
                y = np.asarray(end.get_ydata(), float)
                inside = bool(np.all((x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)))
                if end.get_clip_on() == inside:
                    end.set_clip_on(not inside)

    @property
    def x_label(self) -> str:
        return xaxis.label(self.x_mode)

    def _strip_entries(self, cache, state, refs, specs) -> list[Entry]:
        names = dict(self.run_names)
        if (
            self.strip.rows_for([Entry(n, "") for n in names.values()], self.figure.bbox.width)
            > STRIP_ROWS
        ):
            # A sweep's long names, whole, took 4 rows at 1280 px: the part that tells them
            # apart (the hover readout and the table's tooltips have the whole names).
            short = distinct_parts(list(self.run_names.values()))
            names = {r: short[n] for r, n in names.items()}
        for ref in refs:
            run = cache.run(ref)
            if run is not None and run.status != FINISHED:
                names[ref] += f" · {run.status}"  # its line ends in the status's mark
        entries = [Entry(names[r], *state.look(r)) for r in refs]
        if any(s.kind == "stacked" for s in specs):
            entries += [Entry(n, PART_COLORS[n], patch=True) for n in [*TIMING_PARTS, "other"]]
        return entries

    def _sync_tracks(self, i: int, spec: PanelSpec) -> dict[Item, Track]:
        tracks = self.tracks[i]
        if spec.kind == "line" and list(tracks) == spec.items:
            return tracks  # a poll: the chart's series as they were (no Item hashed)
        wanted = set(spec.items) if spec.kind == "line" else set()
        for item in [it for it in tracks if it not in wanted]:
            tracks.pop(item).remove()
        for item in spec.items:
            if item in wanted and item not in tracks:
                tracks[item] = Track(self.axes[i], item)
        return tracks

    def _remember_x(self, track: Track) -> None:
        pairs = track.x_steps()
        if pairs is None:
            return
        x, steps = pairs
        known = self._x_steps.get(track.item.ref)
        if known is None or len(x) > len(known[0]) or x[-1] - x[0] > known[0][-1] - known[0][0]:
            self._x_steps[track.item.ref] = (x, steps)

    def _pixels(self, i: int) -> int:
        return max(int(self.axes[i].bbox.width), 50)

    def _prepare_panel(self, i, spec, cache, state, contexts) -> None:
        """The views of a panel's series at its width (before the page's x range is known)."""
        for track in self._sync_tracks(i, spec).values():
            track.prepare(
                cache,
                contexts[track.item.ref],
                state.x_axis,
                state.smoothing,
                self._pixels(i),
                self._fine,
            )

    def _refresh_panel(self, i, spec, cache, state, refs, xlim, shown, contexts) -> None:
        if spec.kind == "section":
            return
        ax = self.axes[i]
        pixels = max(int(ax.bbox.width), 50)
        kind = _composite_kind(spec)
        composite = self._composites[i]
        if composite is not None and type(composite) is not kind:
            composite.remove()
            composite = self._composites[i] = None
        if composite is None and kind is not None:
            composite = self._composites[i] = kind()
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
                if xlim is None and state.x_axis != "step":  # (steps are the x: no map)
                    self._remember_x(track)
        artists, views = (
            composite.refresh(ax, spec, cache, contexts, state.x_axis, pixels, xlim, self._fine)
            if composite is not None
            else ([], [])
        )
        self._extra[i] += artists
        self._views[i] += views
        hidden = set(state.hidden_events)
        left_out = draw_events(
            self._events[i],
            self._event_places,
            cache,
            refs,
            contexts,
            state.x_axis,
            hidden,
            self.highlighted,
            self.selected,
        )
        self._events_left_out.discard(i)
        if left_out:
            self._events_left_out.add(i)
        self._declutter_markers(tracks, xlim)
        self._note(i, state.smoothing)
        has_data = any(len(t.line.get_xdata()) for t in tracks.values()) or bool(self._extra[i])
        self._empty[i].set_visible(not has_data)
        if self.follow:
            fit_data_limits(ax, tracks.values(), self._extra[i])

    def _update_legend(self, i: int, spec: PanelSpec, cache: SeriesCache) -> None:
        """A line chart's legend, its latest values and its corner, for the limits set."""
        if spec.kind != "line":
            return
        tracks = self.tracks[i]
        latest = {}
        for item in tracks:
            summary = cache.summary(item.ref, item.key)
            latest[item] = metric_stats(summary.agg if summary is not None else None)[0]
        # The note ("smoothed raw points", "min–max per 8 steps") sits in the lower right
        # corner: a legend placed there covered it.
        taken = ("lower right",) if self._notes[i].get_text() else ()
        with quietly(self.axes[i]):  # the legend is drawn with the data (resplot/ui/layers.py)
            self._legends[i].update(self.axes[i], tracks, self.follow, latest, taken)

    def _declutter_markers(self, tracks: dict[Item, Track], xlim) -> None:
        """Point markers (validation) only while few points are in view (data/marks.py)."""
        marked = [t for t in tracks.values() if t.item.marker]
        if not marked:
            return
        counts = []
        for t in marked:
            x = np.asarray(t.line.get_xdata(), float)
            if xlim is not None:
                lo, hi = sorted(xlim)
                x = x[(x >= lo) & (x <= hi)]
            counts.append(len(x))
        on = marks.markers_shown(counts)
        for t in marked:
            t.show_markers(on)

    def _note(self, i: int, smoothing: float) -> None:
        """Say on the chart what it draws when that is not every raw point: the bucket width of
        an envelope, what smoothing ran on, and tiles still loading."""
        views = self._views[i]
        coarse = [v for v in views if v.level != 0]  # stored or fine buckets
        parts = []
        if coarse:
            width = max(v.width for v in coarse)
            parts.append(f"min–max per {width:,} steps")
            if self._fine == 0 and any(len(v.mid_steps) < self._pixels(i) for v in coarse):
                parts[-1] += ", coarser than pixels (zoom in)"  # the page's fine budget
        smoothed = [t.view for t in self.tracks[i].values() if t.smoothed is not None and t.view]
        if smoothing > 0 and smoothed:  # what the EMA ran on (resplot/data/smoothing.py)
            on = [v.width for v in smoothed if v.level != 0]
            parts.append(f"smoothed {max(on):,}-step means" if on else "smoothed raw points")
        if any(not v.complete for v in views):
            parts.append("loading finer detail…")
        if i in self._clipped:
            parts.append("y: top 1 % ignored")
        if i in self._placeholders:
            parts.append(f"y: placeholder {self._placeholders[i]:g} at the start left out")
        if self.specs[i].log_refused:
            parts.append("y: linear, values ≤ 0 (no log)")
        if i in self._events_left_out and i == min(self._events_left_out):  # said once a page
            parts.append(f"events: >{marks.EVENT_RUNS_MAX} runs, click or select one")
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


def _composite_kind(spec: PanelSpec) -> type[Stack] | type[ThrottleBars] | None:
    """What draws a chart of several series at once (None: its tracks alone)."""
    if spec.kind == "stacked" and spec.stack_ref is not None:
        return Stack
    return ThrottleBars if spec.kind == "throttle" else None


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
