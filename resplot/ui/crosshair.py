"""The hover line and readout of a chart page: a vertical line across every chart at the
pointer, and beside it every series' value there (resplot/data/hover.py), in run colours. A click on
a series highlights its run (the window fades the others and selects its row).

The line is blitted (matplotlib's blitting recipe): a pointer move restores the last full
draw's pixels and draws only the lines. With 20 runs (40 series) a move costs ~6 ms with the
readout, a full page draw 130-220 ms (scripts/bench/bench_hover.py, docs/benchmarks.md). The
lines are not added to the axes, so they never enter autoscaling.
"""

from __future__ import annotations

from matplotlib.lines import Line2D
from PyQt5.QtCore import QObject, Qt, pyqtSignal
from PyQt5.QtWidgets import QLabel

from resplot.data.hover import Reading, readings, readout_html

CLICK_PX = 10  # how near a click must be to a series' point to pick its run


class Crosshair(QObject):
    runClicked = pyqtSignal(object)  # RunRef, or None: a click away from every series

    def __init__(self, canvas, page, toolbar=None) -> None:
        super().__init__(canvas)
        self.canvas, self.page, self.toolbar = canvas, page, toolbar
        self.label = QLabel(canvas)
        self.label.setTextFormat(Qt.RichText)
        self.label.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.label.setStyleSheet(
            "QLabel { background: rgba(255, 255, 255, 235); border: 1px solid #bbbbbb;"
            " padding: 3px; font-size: 11px; }"
        )
        self.label.hide()
        self.background = None
        self.lines: list[Line2D] = []
        self._line_axes: list = []  # the axes each line was made for (a rebuild replaces them)
        self.found: list[Reading] = []
        self.axes_index: int | None = None
        canvas.mpl_connect("draw_event", self._on_draw)
        canvas.mpl_connect("motion_notify_event", self._on_move)
        canvas.mpl_connect("figure_leave_event", lambda _e: self.hide())
        canvas.mpl_connect("button_press_event", self._on_click)

    def _on_draw(self, _event) -> None:
        self.background = self.canvas.copy_from_bbox(self.page.figure.bbox)

    def hide(self) -> None:
        self.label.hide()
        self.found, self.axes_index = [], None
        if self.background is not None:
            self.canvas.restore_region(self.background)
            self.canvas.blit(self.page.figure.bbox)

    def _lines(self) -> list[Line2D]:
        axes = self.page.axes
        if self._line_axes != axes:
            self.lines, self._line_axes = [], list(axes)
            for ax in axes:
                line = Line2D([0, 0], [0, 1], color="#555555", linewidth=0.8,
                              transform=ax.get_xaxis_transform())  # fmt: skip
                line.set_figure(self.page.figure)
                self.lines.append(line)
        return self.lines

    def _on_move(self, event) -> None:
        if event.inaxes is None or event.inaxes not in self.page.axes or event.xdata is None:
            self.hide()
            return
        index = self.page.axes.index(event.inaxes)
        self.show_at(index, float(event.xdata), event.x, event.y)

    def show_at(self, index: int, x: float, px: float | None = None, py: float | None = None):
        """The line at data x on every chart and the readout of chart `index` (what a pointer
        move does; px, py: the pointer in figure pixels, for where the readout goes)."""
        self.axes_index = index
        spec = self.page.specs[index] if index < len(self.page.specs) else None
        self.found = readings(self.page.tracks[index], x)
        text = readout_html(spec.title if spec is not None else "", self.found)
        if self.background is not None:
            self.canvas.restore_region(self.background)
            for line in self._lines():
                line.set_xdata([x, x])
                self.page.figure.draw_artist(line)
            self.canvas.blit(self.page.figure.bbox)
        if not text:
            self.label.hide()
            return
        self.label.setText(text)
        self.label.adjustSize()
        if px is None or py is None:
            ax = self.page.axes[index]
            px, py = ax.transData.transform((x, 0))[0], ax.bbox.y1
        ratio = self.canvas.device_pixel_ratio or 1.0
        qx, qy = px / ratio, (self.page.figure.bbox.height - py) / ratio
        w, h = self.label.width(), self.label.height()
        left = qx + 14 if qx + 14 + w <= self.canvas.width() else qx - 14 - w
        top = min(max(0.0, qy - h / 2), max(0.0, self.canvas.height() - h))
        self.label.move(int(max(0.0, left)), int(top))
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
