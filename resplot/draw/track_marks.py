"""The marks a Track (resplot/draw/tracks.py) sets on its chart besides its lines and bands:
the item's point markers or a dot on each point no segment reaches, one marker and a shaded
span for each stretch of NaN (+inf, -inf), and the run's state where its line ends (a live
dot, a crash's cross; resplot/data/marks.py says which). A mixin: the artists, item, axes and
cache are the Track's.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from resplot.data import marks, xaxis
from resplot.data.model import RunInfo
from resplot.data.views import SeriesView
from resplot.draw.clip_box import share_clip_box
from schema.store.rollup import STEP_HI
from schema.store.status import RUNNING

NONFINITE_Y = {"nan": 0.96, "+inf": 0.99, "-inf": 0.01}  # axes fraction of NaN/inf markers
LONE_MARKER = "o"  # on a point no segment of its line reaches (_set_markers)


class TrackMarks:
    """A Track's marks (the module's docstring); Track holds the artists they set."""

    def show_markers(self, on: bool) -> None:
        """The item's point markers on the line, or none (ChartPage's declutter)."""
        self._markers_on = on
        self._set_markers()

    def _set_markers(self) -> None:
        """The item's point markers while shown, else a dot on each point of the line that no
        segment reaches (a series' only point, a value between NaNs): a line draws nothing
        there, and the value was on no chart."""
        if self.item.marker and self._markers_on:
            marker, every = self.item.marker, None
        elif self._lone:
            marker, every = LONE_MARKER, self._lone
        else:
            marker, every = "None", None
        # Set only when they change: a set marks a settled series' picture stale.
        if self.line.get_marker() != marker:
            self.line.set_marker(marker)
        if self.line.get_markevery() != every:
            self.line.set_markevery(every)

    def _mark_nonfinite(self, view: SeriesView, x_mid: np.ndarray, pixels: int, xlim) -> None:
        """One marker at the start of each stretch of NaN (+inf, -inf), the stretch shaded."""
        # Most series have none: a refresh of a page places hundreds of tracks.
        flagged = [
            (flags, kind)
            for flags, kind in ((view.nan, "nan"), (view.posinf, "+inf"), (view.neginf, "-inf"))
            if flags.any()
        ]
        bx, by, spans = [], [], []
        if flagged:
            finite_x = x_mid[np.isfinite(x_mid)]
            lo, hi = (
                xlim
                if xlim is not None
                else ((finite_x.min(), finite_x.max()) if len(finite_x) else (0.0, 1.0))
            )
            merge = marks.MERGE_PX * (hi - lo) / max(pixels, 1)
        for flags, kind in flagged:
            for a, b in marks.stretches(x_mid, flags, merge):
                if xlim is not None and (b < lo or a > hi):
                    continue
                bx.append(a)
                by.append(NONFINITE_Y[kind])
                if b > a:
                    spans.append(np.array([[a, 0.0], [b, 0.0], [b, 1.0], [a, 1.0]]))
        if bx:
            bad, shade = self._bad()
            bad.set_data(bx, by)
            bad.set_visible(True)
            shade.set_verts(spans)
            shade.set_visible(bool(spans))
        elif self.bad is not None and self.bad_span is not None:
            self.bad.set_data([], [])
            self.bad.set_visible(False)
            self.bad_span.set_visible(False)

    def _ends_in(self, view: SeriesView, xlim) -> tuple[float, float] | None:
        """The x range the series' end mark may go in: None when the view does not hold the
        series' last point (a zoom that ends before the run does: its last point drawn is
        one past the view's edge, not where the run ended), else the x range shown."""
        summary = self.cache.summary(self.item.ref, self.item.key) if self.cache else None
        if summary is not None and len(view.steps) and view.steps.max() < summary.agg[STEP_HI]:
            return None
        if xlim is None:
            return (-np.inf, np.inf)
        lo, hi = sorted(xlim)
        return (lo, hi)

    def _mark_end(
        self,
        x: np.ndarray,
        y: np.ndarray,
        run: RunInfo | None,
        mode: str,
        room: tuple[float, float] | None = (-np.inf, np.inf),
    ) -> None:
        """The run's state where its line ends (a live dot, a cross for a crash…), where
        that end is inside `room` (the x range shown; None: not in the view): a mark at the
        view's edge, half cut, said the run ended there. On a time axis a run that stopped
        without finishing gets a dashed tail from its last point to its last sign of life
        (heartbeat), the cross at its end."""
        status = run.status if run is not None else None
        mark = marks.end_mark(status) if self.item.marker == "" and room is not None else None
        at = marks.last_finite(np.asarray(x, float), np.asarray(y, float)) if mark else None
        if at is not None and room is not None and not room[0] <= at[0] <= room[1]:
            at = None
        if mark is None or at is None:
            if self.end is not None:
                self.end.set_visible(False)
            return
        if self.end is None:
            self.end = Line2D([], [], linestyle="None", linewidth=1.0, zorder=4)
            self.ax.add_line(self.end)
            share_clip_box(self.ax, self.end)
        xs, ys = [at[0]], [at[1]]
        if run is not None and status != RUNNING and mode in ("wall", "relative"):
            gone = run.ended_at or run.heartbeat_at
            end = xaxis.x_values(mode, run, np.zeros(1, np.int64), np.array([gone]))
            if end is not None and end[0] > at[0]:
                xs, ys = [at[0], float(end[0])], [at[1], at[1]]
        color = self.item.color
        look = (color, len(xs), mark.marker, mark.size, mark.edge or color, mark.face or color)
        if look != self._end_look:  # a live dot moves every poll; its look seldom changes
            self._end_look = look
            # The mark alone has no segment to dash: matplotlib still strokes its one vertex
            # (nothing drawn, ~0.1 ms a live poll's draw of each live series' mark).
            self.end.set_linestyle("--" if len(xs) > 1 else "None")
            self.end.set_color(color)
            self.end.set_markevery([len(xs) - 1])
            self.end.set_marker(mark.marker)
            self.end.set_markersize(mark.size)
            self.end.set_markeredgecolor(mark.edge or color)
            self.end.set_markerfacecolor(mark.face or color)
        self.end.set_data(xs, ys)
        self.end.set_visible(True)
