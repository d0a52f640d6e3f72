"""The Ranks page as a matplotlib Figure (no Qt): one job's rank x step heatmaps.

It opens (phase "step") on two maps over the same steps and colours: above, what tells the
culprit (JobView.culprit: each rank's own work, its step minus its wait in collectives; without
a logged `comm`, the phase the straggler is named in), with each rank's relative and individual
performance score beside its row (JobView.scores); below, the step time, where every rank of a
synchronous job is as slow as the slowest. Any other phase chosen is one map of it.

Rows are the job's ranks grouped by host (a host's name beside its rows, a line between hosts),
columns are step ranges of whole rollup buckets (resplot/data/ranks.py: each cell's largest,
mean or smallest value of the phase is exact), the straggler and hang alerts are outlined on the
cells they cover and said above the map, and what the map does not show as it is (a cell's
width in steps, the straggler rule's resolution, ranks no source holds) is said under the
title. The x axis is steps: zoom and pan ask the cache for the steps in view, as a chart does.
The same class draws the window's page and `resplot snapshot --page ranks`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import blended_transform_factory, offset_copy

from reslog.text import cell, safe
from resplot.data.cache import SeriesCache
from resplot.data.layout import TITLE_PT
from resplot.data.ranks import (
    STATS,
    STEP_INTERVALS,
    JobView,
    job_label,
    job_view,
    jobs_in,
    newest_first,
)
from resplot.data.state import ViewState
from resplot.draw.axes_setup import NOTE_PT
from resplot.draw.figure_files import save_figure
from resplot.draw.follow import FollowsData
from resplot.draw.ticks import CompactFormatter
from schema.rules.alerts import HANG, STRAGGLER

CELL_PX = 4  # the narrowest cell the page asks for: a 1,000 px map is 250 columns
ROW_LABEL_PX = 11  # rank numbers are labelled when rows are at least this tall, else every n-th
HOST_CHARS = 18  # a longer host name is cut (its whole name is in the hover)
MARK_COLORS = {STRAGGLER: "#ff4fa3", HANG: "#ff2a1a"}
MISSING_COLOR = "#e6e6e6"  # a rank that logged nothing in a cell's steps
MARK_LINES = 3  # alerts said above the map; more are counted (each is in its cells' hover)
# Above this many times the 99th percentile, the largest cells are drawn at the top colour
# (and the colour bar says so), so that one stalled step does not turn every other cell dark.
CLIP_OVER_P99 = 2.0
PAIR = "step"  # the phase that opens the page: the culprit's map over the step time's
SCORE_PX = 92  # the scores' column, right of the culprit's map
LOW_SCORE = 0.75  # a score under this is drawn bold (nvidia-resiliency-ext's usual threshold)
CHAR_EM = 0.62  # a character's width in ems (DejaVu Sans, about): where captions wrap

NO_JOB = (
    "No multi-rank job in these sources.\n"
    "A job is the runs of one group logged by two or more ranks: the trainer under torchrun, or "
    "reslog.init(group=..., rank=..., world_size=...) on every rank (docs/ranks.md)."
)


def _ms(seconds: float, _pos=None) -> str:
    ms = seconds * 1000.0
    return f"{ms:,.0f} ms" if abs(ms) >= 10 else f"{ms:.1f} ms"


class RanksPage(FollowsData):
    """One job's heatmap, refreshed from the cache; the job, phase and statistic come from the
    view state (ranks_job, ranks_phase, ranks_stat)."""

    page = "ranks"

    def __init__(
        self, figure: Figure | None = None, on_view_changed: Callable[[], None] | None = None
    ) -> None:
        self.figure = figure if figure is not None else Figure(figsize=(12, 7.5), dpi=100)
        self.on_view_changed = on_view_changed
        self.view: JobView | None = None
        self.jobs: list[tuple[str, str]] = []  # (group, label) of the jobs in the cache
        self.group: str | None = None  # the job shown
        self.phase = "step"
        self.stat = "max"
        self.follow = True  # all steps; False after the user zooms or pans
        self._updating = False
        self._shape: tuple[int, int] | None = None
        self.ax = self.figure.add_axes((0.1, 0.1, 0.8, 0.8))
        self.cax = self.figure.add_axes((0.92, 0.1, 0.012, 0.8))
        self.ax.tick_params(labelsize=7)
        self.cax.tick_params(labelsize=7)
        self.ax.xaxis.set_major_formatter(CompactFormatter())
        cmap = colormaps["viridis"].with_extremes(bad=MISSING_COLOR)
        self.image = self.ax.imshow(
            np.full((1, 1), np.nan),
            cmap=cmap,
            aspect="auto",
            interpolation="nearest",
            origin="upper",
            extent=(0, 1, 1, 0),
        )
        self.colorbar = self.figure.colorbar(self.image, cax=self.cax)
        self.colorbar.formatter = FuncFormatter(_ms)
        # The step time below the culprit's map: the same steps (shared x) and colours.
        self.ax_step = self.figure.add_axes((0.1, 0.1, 0.8, 0.4), sharex=self.ax)
        self.ax_step.tick_params(labelsize=7)
        self.image_step = self.ax_step.imshow(
            np.full((1, 1), np.nan),
            cmap=cmap,
            norm=self.image.norm,
            aspect="auto",
            interpolation="nearest",
            origin="upper",
            extent=(0, 1, 1, 0),
        )
        self.ax_step.set_visible(False)
        self.shown = "step"  # the matrix of the (upper) map
        self.pair = False  # two maps: the culprit's and the step time's
        self._lines: list[tuple[str, str]] = []  # the alerts said above, wrapped, and colour
        self.title = self.figure.text(0.01, 0.99, "", fontsize=TITLE_PT + 1, va="top")
        self.note = self.figure.text(
            0.01, 0.95, "", fontsize=NOTE_PT + 1, va="top", color="#555555"
        )
        self.mark_texts = [
            self.figure.text(0.01, 0.9, "", fontsize=NOTE_PT + 1, va="top")
            for _ in range(MARK_LINES + 1)
        ]
        self.message = self.figure.text(
            0.5, 0.5, "", ha="center", va="center", wrap=True, color="#666666", fontsize=9
        )
        self._artists: list = []  # mark outlines: made again each refresh
        self._host_artists: list = []  # host names and separators, made again when they move
        self._host_key: tuple = ()
        for ax in (self.ax, self.ax_step):
            ax.set_autoscale_on(False)
            ax.callbacks.connect("xlim_changed", self._on_xlim_changed)

    # -- what the window and snapshot ask ------------------------------------------------------
    @property
    def axes(self) -> list:
        if self.view is None:
            return []
        return [self.ax, self.ax_step] if self.pair else [self.ax]

    def shows_data(self) -> bool:
        return self.view is not None

    def incomplete(self) -> int:
        return int(self.view is not None and not self.view.complete)

    def save(self, path: str | Path, dpi: int = 120) -> None:
        save_figure(self.figure, path, dpi)

    def cell_at(self, x: float | None, y: float | None) -> tuple[int, int] | None:
        """(row, column) of the cell at data x (step), y (row), or None."""
        view = self.view
        if view is None or x is None or y is None or not (0 <= y < len(view.rows)):
            return None
        column = view.column_of(math.floor(x))
        return None if column is None else (int(y), column)

    def hover_text(self, x: float | None, y: float | None) -> str | None:
        at = self.cell_at(x, y)
        return None if at is None or self.view is None else self.view.hover_text(*at)

    # -- refresh ---------------------------------------------------------------------------------
    def refresh(self, cache: SeriesCache, state: ViewState) -> None:
        """Bring the map up to date with the cache and the state (no drawing)."""
        cache.begin_view()
        found = jobs_in(cache)
        self.jobs = [(g, job_label(g, found[g])) for g in newest_first(found)]
        self.group = state.ranks_job if state.ranks_job in found else None
        if self.group is None and self.jobs:
            self.group = self.jobs[0][0]
        self.stat = state.ranks_stat
        if self.group is None:
            return self._show_message(NO_JOB)
        self._place()
        lo, hi = -math.inf, math.inf
        if not self.follow:
            x0, x1 = sorted(self.ax.get_xlim())
            lo, hi = math.floor(x0), math.ceil(x1)
        columns = max(8, int(self.ax.bbox.width / CELL_PX))
        view = job_view(cache, self.group, lo, hi, columns)
        if view is None:
            label = dict(self.jobs)[self.group]
            return self._show_message(
                f"Job {label}: no rank has logged its step phases (time/step, time/data, ...) yet."
            )
        self.view = view
        self.phase = state.ranks_phase if state.ranks_phase in view.matrices else PAIR
        self.pair = self.phase == PAIR
        self.shown = view.culprit()[0] if self.pair else self.phase
        self.pair &= self.shown != PAIR
        self._draw(view, dict(self.jobs)[self.group])

    def _show_message(self, text: str) -> None:
        self.view = None
        for artist in (self.ax, self.cax, self.ax_step):
            artist.set_visible(False)
        for t in (self.title, self.note, *self.mark_texts):
            t.set_text("")
        self._clear_artists()
        self.message.set_text(text)

    def _clear_artists(self, hosts: bool = True) -> None:
        for artist in self._artists + (self._host_artists if hosts else []):
            artist.remove()
        self._artists = []
        if hosts:
            self._host_artists, self._host_key = [], ()

    def _chars(self) -> int:
        """Characters of a note line across the figure (where captions wrap)."""
        px = self.figure.dpi / 72.0
        return max(20, int((self.figure.bbox.width - 12 * px) / (CHAR_EM * (NOTE_PT + 1) * px)))

    def _wrap(self, text: str) -> list[str]:
        return textwrap.wrap(text, self._chars(), break_on_hyphens=False) or [""]

    def _place(self) -> None:
        """Margins in pixels, as fractions of the figure: host names and rank numbers on the
        left, the colour bar (and the scores' column) on the right, the title, note and alerts
        on top (each wrapped to the figure's width), a caption over each map."""
        w, h = self.figure.bbox.width, self.figure.bbox.height
        px = self.figure.dpi / 72.0  # pixels a point
        hosts = [safe(r.host)[:HOST_CHARS] for r in self.view.rows] if self.view else []
        host_px = max((len(name) for name in hosts), default=6) * 0.62 * 8 * px
        left = 14 + host_px + 30 * px
        line = 1.6 * (NOTE_PT + 1) * px  # a note line, in pixels
        note = len(self._wrap(self.note.get_text())) if self.view is not None else 1
        marks = sum(t.count("\n") + 1 for t, _ in self._lines)
        captions = 1 if self.view is not None else 0  # each map's, above it
        top = 12 * px + 2 + line * (1 + note + marks + captions) + 2 * px
        bottom, right = 26 * px, 70 * px + (SCORE_PX * px / 1.39 if self.pair else 0)
        width, height = max(0.05, (w - left - right) / w), max(0.05, (h - top - bottom) / h)
        if self.pair:
            gap = (line + 4 * px) / h  # the lower map's caption
            each = max(0.025, (height - gap) / 2)
            self.ax.set_position((left / w, bottom / h + each + gap, width, each))
            self.ax_step.set_position((left / w, bottom / h, width, each))
        else:
            self.ax.set_position((left / w, bottom / h, width, height))
        bar = 70 * px - 10 * px
        self.cax.set_position((1 - bar / w, bottom / h, 10 * px / w, height))
        y = 1 - 6 * px / h
        self.title.set_position((6 * px / w, y))
        self.note.set_position((6 * px / w, y - 1.15 * line / h - 2 * px / h))
        at = y - (1.15 + note) * line / h - 2 * px / h
        for text in self.mark_texts:
            text.set_position((6 * px / w, at))
            at -= (text.get_text().count("\n") + 1) * line / h

    def _draw(self, view: JobView, label: str) -> None:
        stat = STATS[self.stat]
        what = f"{safe(self.shown)} and step" if self.pair else safe(self.phase)
        self.title.set_text(f"{label} · job {safe(view.group)} · {what} time, {stat} of each cell")
        self.note.set_text("\n".join(self._wrap(view.note())))
        self._say_marks(view)
        self._place()  # again: the rows, notes and marks of this view decide the margins
        self.message.set_text("")
        self.ax.set_visible(True)
        self.cax.set_visible(True)
        self.ax_step.set_visible(self.pair)
        self.ax.tick_params(axis="x", labelbottom=not self.pair)
        self._clear_artists(hosts=False)
        values = view.matrices[self.shown].values(self.stat)
        rows, cols = values.shape
        x0, x1 = float(view.edges[0]), float(view.edges[-1])
        both = [values]
        self.image.set_data(np.ma.masked_invalid(values))
        if self.pair:
            step = view.matrices[PAIR].values(self.stat)
            self.image_step.set_data(np.ma.masked_invalid(step))
            both.append(step)
        self._updating = True  # set_extent would autoscale: the limits are ours (below)
        try:
            self.image.set_extent((x0, x1, rows, 0))
            self.image_step.set_extent((x0, x1, rows, 0))
        finally:
            self._updating = False
        finite = np.concatenate([v[np.isfinite(v)] for v in both])
        clipped = False
        low, high = (0.0, 1.0)
        if len(finite):
            low, high = float(finite.min()), float(finite.max())
            p99 = float(np.percentile(finite, 99))
            if high > CLIP_OVER_P99 * p99 > low:
                high, clipped = p99, True
        extend = "max" if clipped else "neither"
        if extend != self.colorbar.extend:  # a colour bar's extend is fixed when it is made
            self.colorbar.remove()
            self.cax = self.figure.add_axes(self.cax.get_position())
            self.cax.tick_params(labelsize=7)
            self.colorbar = self.figure.colorbar(self.image, cax=self.cax, extend=extend)
            self.colorbar.formatter = FuncFormatter(_ms)
        # The same norm, new limits: the colour bar follows (one update, its formatter kept).
        self.image.set_clim(low, high if high > low else low + 1e-6)
        named = "both maps" if self.pair else safe(self.phase)
        self.cax.set_ylabel(
            f"{named}, {STATS[self.stat]} of a cell"
            + (f" (over {_ms(high)}: the top colour)" if clipped else ""),
            fontsize=7,
        )
        self._captions(view)
        self._updating = True
        try:
            if self.follow:
                self.ax.set_xlim(x0, x1)
            if self.follow or self._shape is None or self._shape[0] != rows:
                self.ax.set_ylim(rows, 0)
                self.ax_step.set_ylim(rows, 0)
        finally:
            self._updating = False
        self._shape = (rows, cols)
        placed = (
            tuple((h, r.start, r.stop) for h, r in view.hosts),
            tuple(r.rank for r in view.rows),
            tuple(self.ax.get_position().bounds),
            tuple(self.figure.bbox.size),
            self.pair,
        )
        if placed != self._host_key:  # ~25 ms of a 64-rank refresh: only when they move
            self._clear_artists()
            for ax in self.axes:
                self._rank_ticks(view, ax)
                self._hosts(view, ax)
            self._host_key = placed
        self._marks(view)
        if self.pair:
            self._scores(view)

    def _captions(self, view: JobView) -> None:
        """What each map is, over it (wrapped to its width); a single map has none."""
        for ax in (self.ax, self.ax_step):
            ax.set_title("", loc="left")
        if not self.pair:
            return
        upper = view.culprit()[1]
        lower = "step time" + (
            ": the interval between a rank's log() calls (no time/step logged)"
            if view.step_from == STEP_INTERVALS
            else " (time/step): every rank waits for the slowest"
        )
        for ax, text in ((self.ax, upper), (self.ax_step, lower)):
            ax.set_title(
                cell(text, self._chars()), loc="left", fontsize=NOTE_PT + 1, pad=3, color="#333333"
            )

    def _scores(self, view: JobView) -> None:
        """Each rank's relative and individual performance score of the culprit's map, beside
        its row (JobView.scores); a low one bold."""
        mixed = blended_transform_factory(self.ax.transAxes, self.ax.transData)
        beside = offset_copy(mixed, fig=self.figure, x=6, units="points")
        rows = len(view.rows)
        every = max(1, math.ceil(ROW_LABEL_PX / max(1e-9, self.ax.bbox.height / max(1, rows))))
        head = _outside(
            self.ax, 1, 0, "worst score: rel · ind", beside, va="bottom", color="#555555"
        )
        self._artists.append(head)
        for i, (rel, ind) in enumerate(view.scores(self.shown)):
            if i % every or math.isnan(rel):
                continue
            low = min(rel, ind) < LOW_SCORE
            text = _outside(
                self.ax,
                1,
                i + 0.5,
                f"{rel:.2f} · {ind:.2f}",
                beside,
                color="#b0005a" if low else "#333333",
                fontweight="bold" if low else "normal",
            )
            self._artists.append(text)

    def _rank_ticks(self, view: JobView, ax) -> None:
        rows = len(view.rows)
        every = max(1, math.ceil(ROW_LABEL_PX / max(1e-9, ax.bbox.height / max(1, rows))))
        shown = [i for i in range(rows) if i % every == 0]
        ax.set_yticks([i + 0.5 for i in shown], [str(view.rows[i].rank) for i in shown])
        ax.tick_params(axis="y", length=0, pad=3)
        lowest = ax is self.ax_step or not self.pair
        ax.set_xlabel("step" if lowest else "", fontsize=7, labelpad=1)

    def _hosts(self, view: JobView, ax) -> None:
        """Each host's name beside its rows, and a line between hosts across the map and the
        rank numbers."""
        mixed = blended_transform_factory(ax.transAxes, ax.transData)
        names = offset_copy(mixed, fig=self.figure, x=-24, units="points")
        margin = -ax.get_position().x0 * self.figure.bbox.width / max(1.0, ax.bbox.width)
        for host, rows in view.hosts:
            text = cell(host, HOST_CHARS)
            y = (rows.start + rows.stop) / 2
            self._host_artists.append(
                _outside(ax, 0, y, text, names, ha="right", fontsize=8, color="#333333")
            )
            if rows.start > 0:
                across = Line2D(
                    [0, 1],
                    [rows.start, rows.start],
                    transform=mixed,
                    color="white",
                    linewidth=2.0,
                    zorder=3,
                )
                self._host_artists.append(ax.add_line(across))
                beside = Line2D(
                    [0.9 * margin, 0],
                    [rows.start, rows.start],
                    transform=mixed,
                    color="#999999",
                    linewidth=0.8,
                    clip_on=False,
                )
                self._host_artists.append(ax.add_line(beside))

    def _say_marks(self, view: JobView) -> None:
        """The alerts above the map (MARK_LINES of them), each wrapped to the figure's width:
        a hang's frame chain is long, and one line ran off the right edge."""
        marks = view.marks
        for i, text in enumerate(self.mark_texts):
            if i < min(len(marks), MARK_LINES):
                mark = marks[i]
                text.set_text("\n".join(self._wrap(f"▭ {mark.kind}: {safe(mark.message)}")))
                text.set_color(MARK_COLORS.get(mark.kind, "#ff4fa3"))
            elif i == MARK_LINES and len(marks) > MARK_LINES:
                text.set_text(f"+{len(marks) - MARK_LINES} more (hover a marked cell)")
                text.set_color("#555555")
            else:
                text.set_text("")
        self._lines = [(t.get_text(), "") for t in self.mark_texts if t.get_text()]

    def _marks(self, view: JobView) -> None:
        """Outline each alert's cells, on every map shown."""
        edges = view.edges
        for mark in view.marks:
            color = MARK_COLORS.get(mark.kind, "#ff4fa3")
            lo = max(mark.first, int(edges[0]))
            hi = int(edges[-1]) - 1 if mark.last is None else min(mark.last, int(edges[-1]) - 1)
            first, last = view.column_of(lo), view.column_of(hi)
            if lo > hi or first is None or last is None:
                continue  # outside the steps in view
            x0, x1 = float(edges[first]), float(edges[last + 1])
            for ax in self.axes:
                for row in mark.rows:
                    rect = Rectangle(
                        (x0, row + 0.06),
                        x1 - x0,
                        0.88,
                        fill=False,
                        edgecolor=color,
                        linewidth=1.8,
                        zorder=4,
                    )
                    self._artists.append(ax.add_patch(rect))


def _outside(ax, x: float, y: float, text: str, transform, **style) -> Text:
    """A text beside a map, outside its axes and so never clipped (the scores right of it, the
    hosts left of it): left-aligned, centred on its row, at 7 pt unless `style` says else."""
    style = {"ha": "left", "va": "center", "fontsize": 7, **style}
    return ax.text(x, y, text, transform=transform, clip_on=False, **style)


def render_ranks(
    cache: SeriesCache,
    state: ViewState,
    size=(12, 7.5),
    dpi: int = 100,
    fetch: Callable[[], object] | None = None,
    rounds: int = 6,
) -> RanksPage:
    """The Ranks page drawn once, headless (`resplot snapshot --page ranks`, tests): refreshed
    until every cell comes from the level it asked for, `fetch` reading the tiles it lacks."""
    page = RanksPage(Figure(figsize=size, dpi=dpi))
    for _ in range(rounds):
        page.refresh(cache, state)
        if fetch is None or page.view is None or page.view.complete:
            break
        fetch()
    else:
        page.refresh(cache, state)
    return page
