"""A chart page's layout: its axes made for its charts (a chart at a time: a page built anew
is built over turns of the event loop, resplot/ui/redraw_turns.py), moved to other cells when a
resize changes the grid, and placed in pixels below the run strip (resplot.data.layout).
ChartPage (resplot/draw/charts.py) is one; its series and refresh live there, its limits in
resplot/draw/limits.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from resplot.data import layout, xaxis
from resplot.data.pages import PanelSpec
from resplot.data.state import ViewState
from resplot.draw.axes_setup import dress, section_card
from resplot.draw.axis_art import drop_tick_artists
from resplot.draw.legends import AxesLegend, Entry, RunStrip
from resplot.draw.titles import fit_titles


class ChartLayout:
    """The layout part of a ChartPage (its figure, axes, per-chart lists and strip are the
    page's)."""

    def _rebuild(self, specs: list[PanelSpec], mode: str, grid: layout.Grid) -> None:
        for _ in self._build(specs, mode, grid):
            pass

    def _build(self, specs: list[PanelSpec], mode: str, grid: layout.Grid) -> Iterator[None]:
        """The page's axes made anew for `specs`, a yield after each chart made (refresh_steps:
        ~10-40 ms a chart, 200-700 ms for the All page of the soak's sweep in one turn); until
        it ends the page holds the charts made so far, each beside its spec. A chart the page
        shows already (the same spec, the same x axis) is kept, moved to its new cell with its
        series and their views: a section folded, a search typed, a key come or a run gone
        make only the charts that are new (_kept_charts)."""
        kept = self._kept_charts(specs, mode)
        before = _Charts(
            self.axes,
            self.tracks,
            self._extra,
            self._composites,
            self._events,
            self._empty,
            self._views,
            self._notes,
            self._legends,
        )
        if kept:
            keep = {id(before.axes[j]) for j in kept.values()}
            discard_axes(self.figure, [ax for ax in before.axes if id(ax) not in keep])
            clear_figure_artists(self.figure)
        else:
            discard_axes(self.figure)
            self.figure.clear()
            self._x_root = None
        self._gridspec = None
        self.axes, self.tracks, self._extra, self._events, self._empty = [], [], [], [], []
        self._composites = []
        self.specs = []
        self._legends = []
        self._clipped = set()
        self._placeholders = {}

        self._user_y = set()
        self._followed = {}
        self._autoscaled = {}
        self._sticky = {}
        self._layered = {}
        self._placed = None
        self.strip = RunStrip(self.figure)
        self._views, self._notes = [], []
        self.message = None
        n = len(specs)
        if n == 0:
            self.message = self.figure.text(
                0.5,
                0.5,
                self.empty_text,
                ha="center",
                va="center",
                color="#666666",
                wrap=True,
            )
            return
        rows, cols = grid.rows, grid.cols
        self.grid = grid
        starts, bands = _starts_and_bands(specs)
        cells, _rows = layout.slots(starts, cols, bands)
        self._gridspec = self.figure.add_gridspec(rows, cols)
        try:
            yield from self._lay_out(specs, mode, cells, cols, kept, before)
        finally:
            # A build dropped before its end (refresh_steps) leaves no chart it had yet to
            # take drawn in the figure: the next build starts from the charts taken.
            taken = {id(ax) for ax in [*self.axes, self._x_root]}
            left = [ax for ax in self.figure.axes if id(ax) not in taken]
            if left:
                discard_axes(self.figure, left)

    def _lay_out(
        self,
        specs: list[PanelSpec],
        mode: str,
        cells: list[int],
        cols: int,
        kept: dict[int, int],
        before: _Charts,
    ) -> Iterator[None]:
        """_build's charts, each kept or made in its cell, a yield after each made."""
        for i, spec in enumerate(specs):
            row, col = divmod(cells[i], cols)
            section = spec.kind == "section"  # a band across the page above its charts
            cell = self._gridspec[row, :] if section else self._gridspec[row, col]
            j = kept.get(i)
            if j is not None:
                ax = before.axes[j]
                ax.set_subplotspec(cell)
                self._take_axes(before, j)
            elif section:
                ax = self.figure.add_subplot(cell)
                self._add_axes(ax, *section_card(ax, spec))
            else:
                ax = self.figure.add_subplot(cell, sharex=self._x_anchor())
                self._add_axes(ax, *dress(ax, spec, mode))
                ax.callbacks.connect("ylim_changed", self._on_chart_ylim_changed)
            self.specs.append(spec)
            if j is None:
                yield
        charts = self._label_x(specs, cols, mode)
        if charts:
            # The shared ticker sizes its ticks by the axis it was given: a chart's (not the
            # anchor's, nor the one a chart taken out handed it to).
            ticker = charts[0].xaxis
            ticker.get_major_locator().set_axis(ticker)
            ticker.get_major_formatter().set_axis(ticker)

    def _x_anchor(self):
        """The axes every chart shares x with (limits, locator, formatter): invisible, never a
        chart, so that any chart can go while the others stay (each axes holds the one it was
        made sharing with). It hears the x range change from every chart."""
        if self._x_root is None:
            anchor = self.figure.add_axes((0, 0, 1, 1), label="x anchor")
            anchor.set_visible(False)
            anchor.set_navigate(False)
            drop_tick_artists(anchor)
            anchor.callbacks.connect("xlim_changed", self._on_xlim_changed)
            self._x_root = anchor
        return self._x_root

    def _kept_charts(self, specs: list[PanelSpec], mode: str) -> dict[int, int]:
        """Which charts shown now the page can keep for `specs` on x axis `mode`: new index ->
        old index, for each spec dressed as an old chart was (the same x axis)."""
        if not self.axes or mode != self.x_mode or len(self.specs) != len(self.axes):
            return {}
        shown: dict[tuple, list[int]] = {}
        for j, spec in enumerate(self.specs):
            shown.setdefault(_dressed_as(spec), []).append(j)
        kept = {}
        for i, spec in enumerate(specs):
            same = shown.get(_dressed_as(spec))
            if same:
                kept[i] = same.pop(0)
        return kept

    def _relayout(self, specs: list[PanelSpec], grid: layout.Grid) -> None:
        """The same charts in another grid (a resize past a column's width): each axes moved
        to its cell, its series, artists and the view kept. Building the page anew for it
        took 150-450 ms on the All page of the soak's sweep, and then every series' view."""
        starts, bands = _starts_and_bands(specs)
        cells, _rows = layout.slots(starts, grid.cols, bands)
        self._gridspec = self.figure.add_gridspec(grid.rows, grid.cols)
        for i, (ax, spec) in enumerate(zip(self.axes, specs, strict=True)):
            row, col = divmod(cells[i], grid.cols)
            whole_row = spec.kind == "section"
            ax.set_subplotspec(self._gridspec[row, :] if whole_row else self._gridspec[row, col])
        self._label_x(specs, grid.cols, self.x_mode)
        self.grid = grid
        self._placed = None  # laid out again by _place
        # Followed limits fitted anew, as on a page built at this size (headroom kept from
        # the size before made them depend on the sizes the page went through).
        self._followed = {}

    def _label_x(self, specs: list[PanelSpec], cols: int, mode: str) -> list:
        """Name the x axis under the bottom row's charts (where the page shows it), no other;
        the charts, not the section cards, in order."""
        charts = [ax for ax, spec in zip(self.axes, specs, strict=True) if spec.kind != "section"]
        if self.x_labels:
            bottom = charts[-cols:]
            for ax in charts:
                ax.set_xlabel(xaxis.label(mode) if ax in bottom else "", fontsize=8)
        return charts

    def _take_axes(self, before: _Charts, j: int) -> None:
        """Keep chart j of `before` (its axes, series, events, notes, legend) as the next."""
        self.axes.append(before.axes[j])
        self.tracks.append(before.tracks[j])
        self._extra.append(before.extra[j])
        self._composites.append(before.composites[j])
        self._events.append(before.events[j])
        self._empty.append(before.empty[j])
        self._views.append(before.views[j])
        self._notes.append(before.notes[j])
        self._legends.append(before.legends[j])

    def _add_axes(self, ax, events, empty, note) -> None:
        self.axes.append(ax)
        self.tracks.append({})
        self._extra.append([])
        self._composites.append(None)
        self._events.append(events)
        self._empty.append(empty)
        self._views.append([])
        self._notes.append(note)
        self._legends.append(AxesLegend())

    def _layout_key(self, specs: list[PanelSpec], state: ViewState) -> tuple:
        """What the axes are laid out from: a change lays them out anew (_rebuild)."""
        height = self.view_height_px or self.figure.bbox.height
        legend_rows = self.strip.rows if self.strip_in_figure else 0
        grid = layout.grid(len(specs), self._frame(self.figure.bbox.width, height, legend_rows))
        # The All page's sections each begin a row, their cards a band of their own.
        starts, bands = _starts_and_bands(specs)
        cells, rows = layout.slots(starts, grid.cols, bands)
        grid = layout.Grid(rows, grid.cols, layout.band_rows(cells, bands, grid.cols))
        return (tuple(s.layout_key() for s in specs), state.x_axis, grid)

    def replace_axes(self) -> None:
        """Lay the axes out again for the figure's current size (a canvas resize): the margins
        are pixels turned into fractions of the size they were computed for."""
        if self.axes:
            self._place(self.entries if self.strip_in_figure else [])

    def _place(self, entries: list[Entry]) -> None:
        """The run strip, and the axes laid out below it in pixels (resplot.data.layout)."""
        self.strip.update(entries)
        w, h = self.figure.bbox.width, self.figure.bbox.height
        frame = self._frame(w, h, self.strip.rows)
        margins = layout.margins(frame, self.grid)
        ratios = None
        if self._gridspec is not None and self._gridspec.nrows == self.grid.rows:
            ratios = layout.height_ratios(self.grid, layout.axes_px(frame, self.grid)[1])
        # Laid out again only when something moved: it marks the page for a full draw.
        placed = (w, h, tuple(sorted(margins.items())), None if ratios is None else tuple(ratios))
        if placed != self._placed:
            if ratios is not None:
                self._gridspec.set_height_ratios(ratios)
            self.figure.subplots_adjust(**margins)
            self._placed = placed
        fit_titles(self.axes, self.specs, self.figure, self.grid.cols)

    def _frame(self, width_px: float, height_px: float, legend_rows: int) -> layout.Frame:
        return layout.Frame(width_px, height_px, self.figure.dpi, legend_rows, self.x_labels)

    def min_height(self) -> int:
        """Pixels the page needs to give each chart a readable height (the window scrolls)."""
        w, h = self.figure.bbox.width, self.figure.bbox.height
        return layout.min_height_px(self._frame(w, h, self.strip.rows), self.grid)


class _Charts(NamedTuple):
    """A page's per-chart lists as they were before a build (what a kept chart takes along)."""

    axes: list
    tracks: list
    extra: list
    composites: list
    events: list
    empty: list
    views: list
    notes: list
    legends: list


def _dressed_as(spec: PanelSpec) -> tuple:
    """What a chart's axes are set up from (dress, section_card): a spec alike keeps them."""
    return (*spec.layout_key(), spec.ylabel, spec.log_refused, spec.section, spec.stack_ref)


def discard_axes(figure, axes: list | None = None) -> None:
    """Take these axes (every one) out of `figure`, each artist in them detached (as
    `Axes.clear()` leaves them: a twin or a saved reach that outlives the page holds no
    chart). `figure.clear()` clears each axes first, which makes its ticks, titles, patch and
    grid anew only to throw them away: ~2 ms and ~100 objects for the collector an axes (the
    All page of the soak's sweep: 100 ms against 6 at each rebuild and release)."""
    for ax in tuple(figure.axes) if axes is None else axes:
        kinds = (ax.lines, ax.patches, ax.texts, ax.collections, ax.images, ax.artists, ax.tables)
        for artist in [a for kind in kinds for a in kind]:
            artist.remove()
        figure.delaxes(ax)


def clear_figure_artists(figure) -> None:
    """What `figure.clear()` does but for the axes it holds: the figure's own artists (the run
    strip's, a message) removed, the toolbar's back and forward views forgotten."""
    kinds = (figure.texts, figure.lines, figure.patches, figure.images, figure.legends)
    for artist in [a for kind in kinds for a in kind] + list(figure.artists):
        artist.remove()
    toolbar = figure.canvas.toolbar
    if toolbar is not None:
        toolbar.update()


def _starts_and_bands(specs: list[PanelSpec]) -> tuple[list[bool], list[bool]]:
    """Which panels begin a row, and which are a row of their own (section cards)."""
    return [s.starts_row for s in specs], [s.kind == "section" for s in specs]
