"""The Ranks page in a tab: the job, phase and cell choosers above the heatmap
(resplot/draw/ranks.py), the matplotlib toolbar (zoom and pan in steps, shown by the window in
the tab bar's corner like every page's), and the hover: the cell's rank breakdown and the alerts
marked on it, beside the pointer.

The tab shows only while a multi-rank job is in the cache (or while it is the current page: it
then says plainly that there is none).
"""

from __future__ import annotations

from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
from PyQt5.QtCore import QPoint, Qt, pyqtSignal
from PyQt5.QtGui import QFontDatabase
from PyQt5.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from reslog.text import safe
from resplot.data.ranks import STATS, jobs_in
from resplot.data.state import PAGES, ViewState
from resplot.draw.ranks import PAIR, RanksPage
from resplot.ui.crosshair import GAP_PX
from resplot.ui.page_figure import PageFigure
from resplot.ui.page_view import page_toolbar


class RanksView(QWidget):
    jobChosen = pyqtSignal(str)  # a group
    phaseChosen = pyqtSignal(str)
    statChosen = pyqtSignal(str)  # resplot.data.state.RANK_STATS

    search = None  # what the window asks of every page view (the All page's search)
    keys_edit = None

    def __init__(self, on_view_changed, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = RanksPage(PageFigure(figsize=(10, 6), dpi=100), on_view_changed)
        self.canvas = FigureCanvasQTAgg(self.page.figure)
        self.toolbar = page_toolbar(self.canvas, self)
        self.job_combo = QComboBox(self)
        self.job_combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.phase_combo = QComboBox(self)
        self.phase_combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.stat_combo = QComboBox(self)
        for stat, text in STATS.items():
            self.stat_combo.addItem(f"{text} of a cell", stat)
        self.job_combo.activated.connect(
            lambda i: self.jobChosen.emit(self.job_combo.itemData(i) or "")
        )
        self.phase_combo.activated.connect(
            lambda i: self.phaseChosen.emit(self.phase_combo.itemData(i))
        )
        self.stat_combo.activated.connect(
            lambda i: self.statChosen.emit(self.stat_combo.itemData(i))
        )
        row = QHBoxLayout()
        row.setContentsMargins(6, 2, 6, 0)
        self.job_label = QLabel("job:", self)
        for widget in (
            self.job_label,
            self.job_combo,
            QLabel("phase:", self),
            self.phase_combo,
            QLabel("cell:", self),
            self.stat_combo,
        ):
            row.addWidget(widget)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(row)
        layout.addWidget(self.canvas, 1)
        self.hover = QLabel(self.canvas)
        self.hover.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.hover.setStyleSheet(
            "QLabel { background: rgba(255, 255, 255, 235); border: 1px solid #999999;"
            " padding: 4px; color: #222222; }"
        )
        self.hover.setTextFormat(Qt.PlainText)
        self.hover.hide()
        self.canvas.mpl_connect("motion_notify_event", self._on_move)
        self.canvas.mpl_connect("figure_leave_event", lambda _e: self.hover.hide())
        self.canvas.mpl_connect("resize_event", lambda _e: on_view_changed())

    # -- what the window calls -----------------------------------------------------------------
    def refresh(self, cache, state: ViewState) -> None:
        self.page.refresh(cache, state)
        self._sync_choosers()

    def measure(self) -> None:
        """Nothing to measure: the map fills the canvas (a chart page scrolls)."""

    def fit(self) -> None:
        """Nothing to fit: see measure()."""

    def present(self) -> None:
        """Draw the map (one image: no layers to keep apart)."""
        self.canvas.draw_idle()

    def _sync_choosers(self) -> None:
        page = self.page
        jobs = page.jobs
        if [self.job_combo.itemData(i) for i in range(self.job_combo.count())] != [
            g for g, _ in jobs
        ]:
            self.job_combo.clear()
            for group, label in jobs:
                self.job_combo.addItem(label, group)
        many = len(jobs) > 1
        self.job_combo.setVisible(many)
        self.job_label.setVisible(many)
        if page.group is not None:
            self.job_combo.setCurrentIndex(max(0, self.job_combo.findData(page.group)))
        phases = list(page.view.matrices) if page.view is not None else []
        if [self.phase_combo.itemData(i) for i in range(self.phase_combo.count())] != phases:
            self.phase_combo.clear()
            for phase in phases:  # a phase is a key's name: shown safe, chosen by its own
                # The page opens on "step": the culprit's map over the step time's.
                self.phase_combo.addItem("step & culprit" if phase == PAIR else safe(phase), phase)
        if phases:
            self.phase_combo.setCurrentIndex(max(0, self.phase_combo.findData(page.phase)))
        self.stat_combo.setCurrentIndex(max(0, self.stat_combo.findData(page.stat)))
        for combo in (self.phase_combo, self.stat_combo):
            combo.setEnabled(page.view is not None)

    # -- hover -----------------------------------------------------------------------------------
    def _on_move(self, event) -> None:
        if self.toolbar.mode or event.inaxes not in self.page.axes:
            self.hover.hide()
            return
        text = self.page.hover_text(event.xdata, event.ydata)
        if not text:
            self.hover.hide()
            return
        self.show_hover(text, event.x, event.y)

    def show_hover(self, text: str, fx: float, fy: float) -> None:
        """The hover's text beside the pointer at figure pixels (fx, fy), inside the canvas."""
        self.hover.setText(text)
        self.hover.adjustSize()
        ratio = self.canvas.device_pixel_ratio or 1.0
        qx, qy = fx / ratio, (self.page.figure.bbox.height - fy) / ratio
        w, h = self.hover.width(), self.hover.height()
        area = self.canvas.rect()
        top = min(max(float(area.top()), qy - h / 2), float(area.bottom() - h))
        if qx + GAP_PX + w <= area.right():  # right of the pointer, else left of it
            left = qx + GAP_PX
        elif qx - GAP_PX - w >= area.left():
            left = qx - GAP_PX - w
        else:  # too wide for either side: above or below it, off the hovered cell
            left = min(max(float(area.left()), qx - w / 2), float(area.right() - w))
            below = qy + GAP_PX
            top = below if below + h <= area.bottom() else max(0.0, qy - GAP_PX - h)
        self.hover.move(QPoint(int(max(0.0, left)), int(max(0.0, top))))
        self.hover.show()
        self.hover.raise_()


def attach(win) -> RanksView:
    """The Ranks page of a MainWindow: its choosers change the window's view state."""
    view = RanksView(win.view_changed, win)

    def job(group: str) -> None:
        if group != win.state.ranks_job:
            win.state.ranks_job = group
            view.page.reset_view()  # another job's steps
            win.schedule_redraw()

    def phase(name: str) -> None:
        win.state.ranks_phase = name
        win.schedule_redraw()

    def stat(name: str) -> None:
        win.state.set_ranks_stat(name)
        win.schedule_redraw()

    view.jobChosen.connect(job)
    view.phaseChosen.connect(phase)
    view.statChosen.connect(stat)
    return view


def show_tab(win) -> None:
    """The Ranks tab while a multi-rank job is in the window's cache, or while it is the page
    shown (which then says there is none)."""
    on = win.state.page == "ranks" or bool(jobs_in(win.cache))
    index = PAGES.index("ranks")
    if win.tabs.isTabVisible(index) != on:
        win.tabs.setTabVisible(index, on)
