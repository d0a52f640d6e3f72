"""The hover line and readout of a chart page: a vertical line across every chart at the
pointer, a dot on each series of the hovered chart where the readout reads it, and beside the
pointer the readout (resplot/data/readout.py: one row per run, the hovered run first), in run
colours. A click on a series highlights its run (the window fades the others and selects its
row).

The line and dots are blitted (matplotlib's blitting recipe, with the page's pixels saved only
under them): a pointer move puts back the pixels it drew over, draws the line and dots, and
hands Qt only the strips that changed (where they were and are: a whole-canvas blit made Qt
convert and paint the full canvas, a tall page's 10-80 MB, on every move, and a whole-canvas
copy kept for it held as much memory a page). A move never waits for a page draw: while one
is due (new data, a zoom) the move sets the readout and leaves the line to that draw, which
paints it (`_on_draw`); a blit there would have made Qt's paint run the whole draw inside the
move.
A 12-run move costs ~8 ms of the GUI thread with the readout, a 100-run one ~22 ms, a full
page draw 300-1,100 ms (scripts/bench/bench_hover.py, docs/benchmarks.md). They are not
added to the axes, so they never enter autoscaling.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.collections import CircleCollection, LineCollection
from matplotlib.colors import to_rgba
from matplotlib.transforms import Bbox, IdentityTransform
from PyQt5.QtCore import QObject, QRect, pyqtSignal

from resplot.data import readout as readout_mod
from resplot.data import xaxis
from resplot.data.hover import Reading, chart_ends, readings
from resplot.data.model import RunRef
from resplot.ui.readout_view import ReadoutView
from resplot.ui.region_paint import update_boxes

CLICK_PX = 10  # how near a click must be to a series' point to pick its run
HOVER_PX = 24  # how near the pointer a series' point must be for its run to count as hovered
GAP_PX = 14  # between the pointer and the readout (the Ranks page's hover too)
# A run whose data ends this far left of the pointer has ended there; a value read this far
# from the hovered step says its own step.
END_PX = 3
MIN_WIDTH_PX = 120  # the readout of a chart narrower than this may be wider than it
DOT_PT2, FOCUS_PT2 = 16.0, 64.0  # marker areas of the dots: every series, the hovered run's
LINE_PAD_PX = 2  # each side of the line: its width, antialiasing
LINE_COLOR, LINE_WIDTH = "#555555", 0.8


class Crosshair(QObject):
    runClicked = pyqtSignal(object)  # RunRef, or None: a click away from every series

    def __init__(self, canvas, page, toolbar=None) -> None:
        super().__init__(canvas)
        self.canvas, self.page, self.toolbar = canvas, page, toolbar
        self.label = ReadoutView(canvas)
        self.drawn = False  # the canvas has drawn the page (there are pixels to draw over)
        self._under: list = []  # the page's pixels under the overlay (to erase it)
        # The line on every chart, one artist in figure pixels: a Line2D a chart drew the same
        # pixels with five times matplotlib's Python around each draw (~0.15 ms a chart).
        self.rules = LineCollection(
            [],
            colors=LINE_COLOR,
            linewidths=LINE_WIDTH,
            transform=IdentityTransform(),
            capstyle="projecting",  # as a Line2D's ends (rcParams' solid_capstyle)
            joinstyle="round",
            zorder=5,
        )
        self.rules.set_figure(page.figure)
        self.dots = CircleCollection([DOT_PT2], edgecolors="white", linewidths=0.8, zorder=6)
        self._rgba: dict[str, tuple[float, float, float, float]] = {}  # colour -> RGBA
        self.dots.set_figure(page.figure)
        self.found: list[Reading] = []
        self.readout: readout_mod.Readout | None = None
        self.order = "value"  # the readout's order after the hovered run: "value" or "name"
        self.axes_index: int | None = None
        self._at: float | None = None  # the line's data x while shown
        self._dirty: list[Bbox] = []  # where the last move drew (figure pixels)
        self._dots_of = False  # whether the dots are set (a series read at the line)
        canvas.mpl_connect("draw_event", self._on_draw)
        canvas.mpl_connect("motion_notify_event", self._on_move)
        canvas.mpl_connect("figure_leave_event", lambda _e: self.hide())
        canvas.mpl_connect("button_press_event", self._on_click)

    def _on_draw(self, _event) -> None:
        self.redrawn()

    def redrawn(self) -> None:
        """The page was drawn again into the canvas's buffer (a full draw, or the series over
        the saved axes): nothing of the overlay is in it; the line and dots go into it, for the
        paint or blit that shows it."""
        self.drawn, self._under, self._dirty = True, [], []
        if self._at is not None and self.axes_index is not None:
            # A page draw while the line is shown (new data, or one a move left to it): the
            # line and dots go into the buffer the coming paint shows.
            self._dirty = self._draw_overlay(self.axes_index, self._at, self._dots_of)

    def held_bytes(self) -> int:
        """Bytes of the page's pixels the crosshair keeps (those under its line and dots)."""
        return sum(memoryview(region).nbytes for region in self._under)

    def _draw_due(self) -> bool:
        return bool(getattr(self.canvas, "draw_due", False))

    def erase(self) -> None:
        """Put back the page's pixels under the overlay (saved before it was drawn)."""
        for region in self._under:
            self.canvas.restore_region(region)
        self._under = []

    def hide(self) -> None:
        self.label.hide()
        self.found, self.readout, self.axes_index, self._at = [], None, None, None
        if self._dirty and not self._draw_due():
            self.erase()
            self._blit(self._dirty)
        self._dirty = []

    def release(self) -> None:
        """Hidden, and holding nothing of the page: its saved pixels, its colours, and the
        chart transform and box the dots were set to (they kept that chart's axes alive)."""
        self.hide()
        self.label.release()
        self.dots.set_offsets(np.empty((0, 2)))
        self.dots.set_offset_transform(IdentityTransform())
        self.dots.set_clip_box(None)
        self.rules.set_segments([])
        self._under, self._dirty, self._dots_of, self.drawn = [], [], False, False
        self._rgba.clear()

    def _blit(self, boxes: list[Bbox]) -> None:
        """Mark the strips that changed for Qt's next paint (region_paint.update_boxes)."""
        update_boxes(self.canvas, _merged(boxes))

    def _pixel_box(self, x0: float, y0: float, x1: float, y1: float) -> Bbox | None:
        """Whole figure pixels around a box, inside the figure (None: outside it)."""
        fig = self.page.figure.bbox
        x0, y0 = max(math.floor(x0), math.ceil(fig.x0)), max(math.floor(y0), math.ceil(fig.y0))
        x1, y1 = min(math.ceil(x1), math.floor(fig.x1)), min(math.ceil(y1), math.floor(fig.y1))
        return Bbox([[x0, y0], [x1, y1]]) if x1 > x0 and y1 > y0 else None

    def _draw_overlay(self, index: int, x: float, dots: bool) -> list[Bbox]:
        """Draw the line on every chart and the dots of chart `index` into the canvas's
        buffer, the pixels under them saved first (`erase` puts them back: no copy of the
        whole canvas is kept, ~10-80 MB a page at 1920 px wide); the boxes they cover."""
        figure = self.page.figure
        boxes, artists, segments = [], [], []
        for ax, spec in zip(self.page.axes, self.page.specs, strict=False):
            if spec.kind == "section":
                continue  # an All-page section's card
            px = ax.transData.transform((x, 0))[0]
            box = math.isfinite(px) and self._pixel_box(
                px - LINE_PAD_PX,
                ax.bbox.y0 - LINE_PAD_PX,
                px + LINE_PAD_PX,
                ax.bbox.y1 + LINE_PAD_PX,
            )
            if box:
                boxes.append(box)
                segments.append([(px, ax.bbox.y0), (px, ax.bbox.y1)])
        if segments:
            self.rules.set_segments(segments)
            artists.append(self.rules)
        if dots and index < len(self.page.axes):
            ax = self.page.axes[index]
            xy = ax.transData.transform(np.asarray(self.dots.get_offsets(), float))
            xy = xy[np.isfinite(xy).all(axis=1)]
            r = math.sqrt(FOCUS_PT2) * figure.dpi / 72.0 / 2 + LINE_PAD_PX
            if len(xy):
                # The dots are clipped to their chart.
                lo, hi = xy.min(axis=0) - r, xy.max(axis=0) + r
                box = self._pixel_box(
                    max(lo[0], ax.bbox.x0 - 1),
                    max(lo[1], ax.bbox.y0 - 1),
                    min(hi[0], ax.bbox.x1 + 1),
                    min(hi[1], ax.bbox.y1 + 1),
                )
                if box is not None:
                    boxes.append(box)
                    artists.append(self.dots)
        self._under = [self.canvas.copy_from_bbox(box) for box in boxes]
        for artist in artists:
            figure.draw_artist(artist)
        return boxes

    def _on_move(self, event) -> None:
        if event.inaxes is None or event.inaxes not in self.page.axes or event.xdata is None:
            self.hide()
            return
        index = self.page.axes.index(event.inaxes)
        self.show_at(index, float(event.xdata), event.x, event.y)

    def _hovered(self, ax, found: list[Reading], py: float | None) -> RunRef | None:
        """The run whose point at the pointer's x is nearest the pointer (within HOVER_PX), else
        the highlighted run."""
        best, best_d = None, float(HOVER_PX)
        if py is not None and found:
            # One transform for every reading (one call per reading was ~0.1 ms each).
            xy = np.array([(r.x, _shown(r)) for r in found], float)
            with np.errstate(invalid="ignore", divide="ignore"):
                ys = ax.transData.transform(xy)[:, 1]
            for r, value, y in zip(found, xy[:, 1], ys, strict=True):
                if not math.isfinite(value):
                    continue
                d = abs(y - py)
                if d <= best_d:
                    best, best_d = r.item.ref, d
        return best or self.page.highlighted

    def _set_dots(self, ax, found: list[Reading], hovered: RunRef | None) -> bool:
        # The colours as RGBA, each converted once (matplotlib turned 200 colour names into
        # RGBA a move at 100 runs); the same numbers it would have made of the names.
        rgba = self._rgba
        xy, colors, sizes = [], [], []
        for r in found:
            y = r.smoothed if r.smoothed is not None else r.raw
            if not math.isfinite(y):
                continue
            color = r.item.color
            got = rgba.get(color) if isinstance(color, str) else None
            if got is None:
                got = to_rgba(color)
                if isinstance(color, str):
                    rgba[color] = got
            xy.append((r.x, y))
            colors.append(got)
            sizes.append(FOCUS_PT2 if r.item.ref == hovered else DOT_PT2)
        if not xy:
            return False
        self.dots.set_offsets(np.array(xy))
        self.dots.set_offset_transform(ax.transData)
        self.dots.set_facecolors(np.array(colors))
        self.dots.set_sizes(sizes)
        self.dots.set_clip_box(ax.bbox)
        return True

    def visible_rect(self) -> QRect:
        """The part of the canvas the window shows (it scrolls when the page is tall)."""
        rect = self.canvas.visibleRegion().boundingRect()
        return rect if not rect.isEmpty() else self.canvas.rect()

    def show_at(self, index: int, x: float, px: float | None = None, py: float | None = None):
        """The line at data x on every chart, a dot on each series of chart `index` and its
        readout (what a pointer move does; px, py: the pointer in figure pixels, for which run
        is hovered and where the readout goes)."""
        self.axes_index = index
        ax = self.page.axes[index]
        spec = self.page.specs[index] if index < len(self.page.specs) else None
        tracks = self.page.tracks[index]
        self.found = found = readings(tracks, x)
        hovered = self._hovered(ax, found, py)
        self._at = x
        self._dots_of = self._set_dots(ax, found, hovered)
        if self.drawn and not self._draw_due():
            self.erase()
            drawn = self._draw_overlay(index, x, self._dots_of)
            self._blit(self._dirty + drawn)
            self._dirty = drawn
        if not found:
            self.readout = None
            self.label.hide()
            return
        ratio = self.canvas.device_pixel_ratio or 1.0
        visible = self.visible_rect()
        x0, x1 = sorted(ax.get_xlim())
        tolerance = END_PX * (x1 - x0) / max(ax.bbox.width, 1.0)
        ends = chart_ends(tracks)
        step_axis = xaxis.steps_like(self.page.x_mode)
        where = f"step {round(x):,}" if step_axis else f"{self.page.x_label} {ax.format_xdata(x)}"
        # As many rows as the visible part of the page holds (header, column heads and notes
        # take the rest), and as wide as its chart at most (what gives way: ReadoutView.fit).
        max_rows = max(3, int(visible.height() / self.label.row_px()) - 4)
        for _ in range(3):
            self.readout = readout_mod.layout(
                spec.title if spec is not None else "",
                found,
                x=x,
                where=where,
                names=self.page.run_names,
                ends=ends,
                tolerance=tolerance,
                hovered=hovered,
                by=self.order,
                max_rows=max_rows,
                at_step=round(x) if step_axis else None,
                step_slack=int(tolerance) if step_axis else 0,
                columns=[item.part for item in tracks],
            )
            self.label.show_readout(self.readout, max(MIN_WIDTH_PX, int(ax.bbox.width / ratio)))
            over = self.label.height() - visible.height()
            if over <= 0 or max_rows <= 3:
                break
            max_rows = max(3, max_rows - math.ceil(over / self.label.row_px()))
        if px is None or py is None:
            px, py = ax.transData.transform((x, 0))[0], ax.bbox.y1
        qx, qy = px / ratio, (self.page.figure.bbox.height - py) / ratio
        w, h = self.label.width(), self.label.height()
        left = qx + GAP_PX if qx + GAP_PX + w <= visible.right() else qx - GAP_PX - w
        left = min(max(float(visible.left()), left), float(visible.right() - w))
        top = min(max(float(visible.top()), qy - h / 2), float(visible.bottom() - h))
        self.label.move(int(max(float(visible.left()), left)), int(max(visible.top(), top)))
        self.label.show()
        self.label.raise_()

    def _on_click(self, event) -> None:
        if event.button != 1 or (self.toolbar is not None and self.toolbar.mode):
            return  # zoom and pan own the left button while active
        if event.inaxes is None or event.inaxes not in self.page.axes or event.xdata is None:
            return
        ax = event.inaxes
        found = readings(self.page.tracks[self.page.axes.index(ax)], float(event.xdata))
        best, best_d = None, CLICK_PX
        for r in found:
            for value in (r.raw, r.smoothed):
                if value is None:
                    continue
                _sx, sy = ax.transData.transform((r.x, value))
                d = abs(sy - event.y)
                if d <= best_d:
                    best, best_d = r.item.ref, d
        self.runClicked.emit(best)


def _shown(r: Reading) -> float:
    """The value a reading's dot is drawn at: smoothed where there is one."""
    return r.smoothed if r.smoothed is not None else r.raw


def _merged(boxes: list[Bbox]) -> list[Bbox]:
    """Boxes whose x ranges meet as one (the line's strips on charts one above the other, the
    dots beside them, the last move's strips next to this one's): Qt paints each pixel once,
    in as few pieces as the strips allow."""
    out: list[list[float]] = []
    for x0, y0, x1, y1 in sorted(tuple(box.extents.tolist()) for box in boxes):
        if out and x0 <= out[-1][2] + 1:
            last = out[-1]
            last[:] = [min(last[0], x0), min(last[1], y0), max(last[2], x1), max(last[3], y1)]
        else:
            out.append([x0, y0, x1, y1])
    return [Bbox([[x0, y0], [x1, y1]]) for x0, y0, x1, y1 in out]
