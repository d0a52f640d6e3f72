"""A drag-pan at screen speed. An exact frame of a chart page is a refresh of its series for the
new x range and a draw of the page (~0.3-1 s for a training page on a busy 2-core machine): a
drag that drew one a mouse move showed a frame every second or two. While the left button
drags, each move instead shows the last exact frame moved along x by the drag's pixels
(a preview): every visible chart's inside and the strip of x tick labels under it shifted as
a bitmap, the strip the drag uncovers left empty (no data was drawn there yet), the legend and
the chart's notes kept in place. Mouse moves are coalesced to one a turn of the event loop.
When the drag pauses (PAUSE_MS) or ends, the page is refreshed and drawn exactly (the window's
`view_changed`), and that frame is the base of the next previews: a preview is never left on
screen, and the frame after the release is the pixels of a full draw of the same limits
(tests/resplot/ui/test_drag_pan.py). The y axes keep their range while previewing and fit the data
in view at each exact frame (ChartPage._refit_y).

Only a pan (the same x span) is previewed; the right button's drag-zoom draws exact frames.

A drag pressed while the page is drawn in pieces (resplot/ui/pieces.py) waits for that draw:
its moves are kept, not applied (a new limit would start the draw again), and the first
preview moves the finished frame. Finishing the draw at the press cost one turn of the event
loop 150-520 ms (the 30-minute soak's longest stalls, docs/benchmarks/viewer.md).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from matplotlib.backend_bases import MouseButton, MouseEvent
from matplotlib.colors import to_rgba
from matplotlib.transforms import Bbox
from PyQt5.QtCore import QObject, QTimer

from resplot.draw.axis_art import AxisArt

PAUSE_MS = 100  # a drag holding still this long gets its exact frame
EDGE_PX = 2  # the axes' own edge (spines, antialiased) stays where it is


@dataclass
class _Chart:
    """One visible chart's pixels in the base frame (rows from the buffer's top)."""

    top: int  # the inside of the axes, within the spines
    bottom: int
    left: int
    right: int
    labels: int  # the last row of the x tick labels' strip under it
    width: float  # the axes' width in pixels (the x span's)
    inside: np.ndarray  # the fill of an uncovered strip: the axes' face colour
    outside: np.ndarray  # and under the axes: the figure's
    fixed: list[tuple[int, int, int, int]]  # legend and notes: (top, bottom, left, right)


class DragPan(QObject):
    def __init__(
        self,
        canvas,
        page,
        view_rows: Callable[[], tuple[float, float] | None],
        drawn: Callable[[], list[int]],
        exact: Callable[[], None],
    ) -> None:
        """`view_rows`: the canvas rows the window shows (None: all); `drawn`: the charts the
        last full draw drew; `exact`: refresh and draw the page for its current limits."""
        super().__init__(canvas)
        self.canvas, self.page, self.view_rows, self.drawn, self.exact = (
            canvas,
            page,
            view_rows,
            drawn,
            exact,
        )
        self.toolbar = None  # the pan tool's (it sets the limits of each move)
        self.on_begin: list[Callable[[], None]] = []  # the hover line leaves the frame
        # A preview drew into the canvas's buffer (the page's layers draw all of it next).
        self.on_preview: list[Callable[[], None]] = []
        self.active = False  # the left button pans with previews
        self.frames = 0  # previews shown (tests and the benchmark read it)
        self.exact_frames = 0  # exact frames asked for during or at the end of drags
        self.pause_ms = PAUSE_MS
        self._stale = False  # the limits moved since the last exact frame
        self._base: np.ndarray | None = None  # the last exact frame, the rows shown
        self._rows = (0, 0)
        self._xlim: tuple[float, float] | None = None
        self._charts: list[_Chart] = []
        self._move: tuple[float, float] | None = None  # the latest move, not yet applied
        self._move_timer = QTimer(self)
        self._move_timer.setSingleShot(True)
        self._move_timer.setInterval(0)
        self._move_timer.timeout.connect(self._apply_move)
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.timeout.connect(self._paused)
        # A bound method: matplotlib holds it weakly (no cycle keeps a closed page alive).
        canvas.mpl_connect("draw_event", self._on_draw)

    @property
    def base_xlim(self) -> tuple[float, float] | None:
        """The x range of the exact frame the previews move (None: none taken)."""
        return self._xlim if self._base is not None else None

    # -- the drag -----------------------------------------------------------------------------
    def begin(self) -> None:
        """The left button went down on a chart with the pan tool."""
        self.active, self._stale, self._move = True, False, None
        for told in self.on_begin:
            told()
        self.rebase()

    def queue_move(self, x: float, y: float) -> None:
        """A mouse move while dragging (figure pixels): applied once the event loop is free,
        the latest of those that came meanwhile."""
        self._move = (x, y)
        if not self._move_timer.isActive():
            self._move_timer.start()

    def _apply_move(self, now: bool = False) -> None:
        if not self.active or self._move is None or self.toolbar is None:
            return
        if str(self.toolbar.mode) != "pan/zoom":  # the pan tool was switched off meanwhile
            self._move = None
            self.end()
            return
        if not now and self._frame_coming():
            return  # kept: the frame's draw applies it (rebase); else the next move
        x, y = self._move
        self._move = None
        event = MouseEvent("motion_notify_event", self.canvas, x, y, buttons={MouseButton.LEFT})
        self.toolbar.drag_pan(event)

    def moved(self) -> None:
        """The pan tool moved the limits: show the preview, and the exact frame once the drag
        holds still."""
        self._stale = True
        self._pause.start(self.pause_ms)
        self._preview()

    def flush(self) -> None:
        """Apply the move still queued (one the release overtook, or a frame's draw held):
        called before the pan tool lets the drag go, while it can still move the limits."""
        self._apply_move(now=True)

    def end(self) -> None:
        """The button was released: the exact frame, unless nothing moved. A move still
        queued is dropped (flush() applied it where the pan tool still panned)."""
        self.active = False
        self._move = None
        self._move_timer.stop()
        self._pause.stop()
        self._base, self._charts = None, []
        if self._stale:
            self._stale = False
            self.exact_frames += 1
            self.exact()

    def release(self) -> None:
        """Drop the frame the previews move (a copy of the rows shown) and the charts' boxes."""
        self._base, self._charts, self._xlim = None, [], None

    def _paused(self) -> None:
        if self.active and self._stale:
            self._stale = False
            self.exact_frames += 1
            self.exact()

    @contextmanager
    def holding_draws(self):
        """The pan tool's own `draw_idle` (a whole page draw a move) is not asked for."""
        held = self.canvas.draws_held
        self.canvas.draws_held = True
        try:
            yield
        finally:
            self.canvas.draws_held = held

    def _on_draw(self, _event) -> None:
        self.rebase(drawn=True)

    def _frame_coming(self) -> bool:
        """Whether the page is being drawn in pieces: the buffer is not a frame yet."""
        return self.canvas.drawing

    # -- frames -------------------------------------------------------------------------------
    def rebase(self, drawn: bool = False) -> None:
        """The canvas holds an exact frame (a draw, or the series drawn over the saved axes):
        the next previews move it. (`drawn`: a draw's end, in pieces its last.)"""
        if not self.active:
            return
        canvas = self.canvas
        if (
            getattr(canvas, "renderer", None) is None
            or (canvas.queued.held and canvas.draw_due)
            or (self._frame_coming() and not drawn)
        ):
            # Never drawn, or the frame shown is of the view before a redraw under way (the
            # page half refreshed: not drawn until it ends), or a draw is half done: nothing
            # to move until its draw.
            self._base = None
            return
        buf = np.asarray(self.canvas.buffer_rgba())
        height, width = buf.shape[:2]
        ratio = self.canvas.device_pixel_ratio or 1.0
        rows = self.view_rows()
        r0, r1 = (0, height) if rows is None else (int(rows[0] * ratio), int(rows[1] * ratio))
        r0, r1 = max(0, r0), min(height, r1)
        charts = self.page.chart_axes()
        if r1 <= r0 or not charts:
            self._base = None
            return
        self._rows = (r0, r1)
        self._base = buf[r0:r1].copy()
        self._xlim = tuple(charts[0].get_xlim())
        face = _rgba(self.page.figure.get_facecolor())
        renderer = self.canvas.get_renderer()
        self._charts = []
        for i in self.drawn():
            if i >= len(self.page.axes) or self.page.specs[i].kind == "section":
                continue
            ax = self.page.axes[i]
            box = ax.bbox
            top, bottom = height - int(np.ceil(box.y1)) + EDGE_PX, height - int(box.y0) - EDGE_PX
            left, right = int(box.x0) + EDGE_PX, min(width, int(np.ceil(box.x1)) - EDGE_PX)
            art = AxisArt.of(ax)
            labels = art.x_labels_extent(renderer) if art else ax.xaxis.get_tightbbox(renderer)
            under = bottom + 2 * EDGE_PX
            if labels is not None:
                under = max(under, min(height, height - int(labels.y0)))
            fixed = []
            for artist in [ax.get_legend(), *ax.texts]:
                if artist is None or not artist.get_visible():
                    continue
                e = artist.get_window_extent(renderer)
                if e.width > 0 and e.height > 0:
                    fixed.append(
                        (
                            height - int(np.ceil(e.y1)) - 1,
                            height - int(e.y0) + 1,
                            int(e.x0) - 1,
                            int(np.ceil(e.x1)) + 1,
                        )
                    )
            self._charts.append(
                _Chart(
                    top,
                    bottom,
                    left,
                    right,
                    under,
                    box.width,
                    _rgba(ax.get_facecolor()),
                    face,
                    fixed,
                )
            )
        if self._move is not None and not self._move_timer.isActive():
            self._move_timer.start()  # moves kept while the frame was drawn

    def _preview(self) -> None:
        charts = self.page.chart_axes()
        if self._base is None or self._xlim is None or not charts:
            return
        (a0, a1), (b0, b1) = self._xlim, tuple(charts[0].get_xlim())
        span = a1 - a0
        if not span or abs((b1 - b0) - span) > 1e-9 * abs(span):
            return  # not a pan: its exact frame comes at the pause
        buf = np.asarray(self.canvas.buffer_rgba())
        r0, r1 = self._rows
        if buf.shape[0] < r1 or buf.shape[1:] != self._base.shape[1:]:
            return  # resized since: the exact frame comes at the pause
        for told in self.on_preview:
            told()
        for chart in self._charts:
            dx = round((a0 - b0) / span * chart.width)
            self._shift(buf, chart, dx)
        ratio = self.canvas.device_pixel_ratio or 1.0
        height = buf.shape[0]
        del buf
        self.canvas.blit(Bbox([[0, height - r1], [self.canvas.width() * ratio, height - r0]]))
        self.frames += 1

    def _shift(self, buf: np.ndarray, chart: _Chart, dx: int) -> None:
        r0, r1 = self._rows
        for top, bottom, fill in (
            (chart.top, chart.bottom, chart.inside),
            (chart.bottom + 2 * EDGE_PX, chart.labels, chart.outside),
        ):
            top, bottom = max(top, r0), min(bottom, r1)
            if bottom <= top:
                continue
            _moved(
                buf[top:bottom],
                self._base[top - r0 : bottom - r0],
                chart.left,
                chart.right,
                dx,
                fill,
            )
        # The legend and notes stay where they are: the place each moved to is blank (what
        # was under it was never drawn), and its own place shows it as the exact frame did.
        for top, bottom, left, right in chart.fixed:
            top, bottom = max(top, chart.top, r0), min(bottom, chart.bottom, r1)
            left, right = max(left, chart.left), min(right, chart.right)
            if bottom <= top or right <= left:
                continue
            gl, gr = max(left + dx, chart.left), min(right + dx, chart.right)
            if gr > gl:
                buf[top:bottom, gl:gr] = chart.inside
            buf[top:bottom, left:right] = self._base[top - r0 : bottom - r0, left:right]


def _moved(dst: np.ndarray, src: np.ndarray, left: int, right: int, dx: int, fill) -> None:
    """Columns left..right of `src` moved by dx into `dst`; what nothing moved into: `fill`."""
    w = right - left
    if abs(dx) >= w:
        dst[:, left:right] = fill
    elif dx >= 0:
        dst[:, left + dx : right] = src[:, left : right - dx]
        dst[:, left : left + dx] = fill
    else:
        dst[:, left : right + dx] = src[:, left - dx : right]
        dst[:, right + dx : right] = fill


def _rgba(color) -> np.ndarray:
    return np.round(np.asarray(to_rgba(color)) * 255).astype(np.uint8)
