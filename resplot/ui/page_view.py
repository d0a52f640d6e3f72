"""A chart page in a tab: the matplotlib toolbar, and the canvas in a scroll area, so a page of
many charts (a custom page of 60 keys) scrolls instead of squeezing them or dropping some."""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.backend_bases import MouseButton
from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg, NavigationToolbar2QT
from matplotlib.figure import Figure
from PyQt5.QtCore import QSize, Qt, pyqtSignal
from PyQt5.QtGui import QCursor
from PyQt5.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from resplot.draw.charts import ChartPage
from resplot.draw.legends import strip_html
from resplot.draw.text_stamps import StampRenderer
from resplot.ui.crosshair import Crosshair
from resplot.ui.drag_pan import DragPan
from resplot.ui.layers import Layers
from resplot.ui.page_figure import PageFigure
from resplot.ui.page_release import PageRelease
from resplot.ui.pieces import QueuedDraw
from resplot.ui.region_paint import paint_region
from resplot.ui.view_history import ViewHistory


class ChartToolbar(NavigationToolbar2QT):
    """A chart page's toolbar: its pan tool moves x only (the left button drags, the right one
    zooms x), matplotlib's own x-only pan (the x key held), and each chart's y then fits the
    data in view (ChartPage._refit_y, the outlier rule where the chart has it). A pan that also
    moved y made that chart's y the user's, kept until Follow data, so panning along a loss
    curve left it out of its chart."""

    page: ChartPage | None = None
    drag: DragPan | None = None  # the left button's drag, previewed (resplot/ui/drag_pan.py)

    def __init__(self, *args, **kwargs) -> None:
        # Back, Forward and Home move in a bounded history of views, not matplotlib's stack
        # (resplot/ui/view_history.py). Made first: the toolbar's set-up asks for its buttons.
        self.history = ViewHistory()
        super().__init__(*args, **kwargs)

    def push_current(self) -> None:
        self.history.push(self.canvas.figure)
        self.set_history_buttons()

    def update(self) -> None:
        """Forget the back and forward views."""
        self.history.clear()
        self.set_history_buttons()

    def home(self, *_args) -> None:
        self.show_view(self.history.home())

    def back(self, *_args) -> None:
        self.show_view(self.history.back())

    def forward(self, *_args) -> None:
        self.show_view(self.history.forward())

    def show_view(self, moved: bool) -> None:
        self.set_history_buttons()
        if moved:
            self.canvas.draw_idle()

    def set_history_buttons(self) -> None:
        for action in self.actions():
            if action.text() == "Back":
                action.setEnabled(self.history.can_back())
            elif action.text() == "Forward":
                action.setEnabled(self.history.can_forward())

    def press_pan(self, event) -> None:
        super().press_pan(event)
        ax = event.inaxes
        if (
            self.drag is not None
            and event.button == MouseButton.LEFT
            and ax is not None
            and ax.get_navigate()
            and ax.can_pan()
        ):
            self.drag.begin()

    def drag_pan(self, event) -> None:
        event.key = "x"
        if self.page is None:
            super().drag_pan(event)
            return
        drag = self.drag
        with self.page.keeping_y():
            if drag is not None and drag.active:
                with drag.holding_draws():
                    super().drag_pan(event)
            else:
                super().drag_pan(event)
        if drag is not None and drag.active:
            drag.moved()

    def release(self) -> None:
        """Forget the zoom tool's back and forward views (of axes given back)."""
        self.update()

    def release_pan(self, event) -> None:
        drag = self.drag
        if drag is None or not drag.active:
            super().release_pan(event)
            return
        # Under a real X server a release can come in the same batch as the last moves, before
        # the queued move ran: it moves the limits before the pan tool lets the drag go (after,
        # matplotlib's drag_pan has nothing to pan and raised).
        drag.flush()
        with drag.holding_draws():
            super().release_pan(event)
        drag.end()


def page_toolbar(
    canvas: FigureCanvasQTAgg, parent: QWidget, page: ChartPage | None = None
) -> NavigationToolbar2QT:
    """matplotlib's zoom/pan toolbar of a page, small and flat (the chart pages, with `page`:
    ChartToolbar; the Ranks page)."""
    if page is not None:
        toolbar = ChartToolbar(canvas, parent, coordinates=False)
        toolbar.page = page
    else:
        toolbar = NavigationToolbar2QT(canvas, parent, coordinates=False)
    toolbar.setIconSize(QSize(16, 16))
    toolbar.setStyleSheet("QToolBar { border: 0px; padding: 0px; spacing: 0px; }")
    return toolbar


class PageCanvas(FigureCanvasQTAgg):
    """The canvas of a chart page, drawn in layers (resplot/ui/layers.py: a full draw leaves
    out the charts scrolled out of view), a queued full draw in pieces between turns of the
    event loop (resplot/ui/pieces.py; `draw()` draws at once). A resize draws the page again
    (matplotlib's own rule), except while `hold_resize_draw()` says the draw that follows will
    show more: a first view grows its canvas to fit its charts before any tile has come, and
    drawing those empty axes (~0.3 s for a training page) held up the draw of the data that
    arrived meanwhile."""

    def __init__(self, figure: Figure) -> None:
        super().__init__(figure)
        self.hold_resize_draw: Callable[[], bool] = lambda: False
        # A draw in pieces waits while this says a refresh of the page is due or under way
        # (resplot/ui/redraw_turns.py): drawn then, it would be drawn again.
        self.hold_pieces: Callable[[], bool] = lambda: False
        self._resizing = False
        self.layers: Layers | None = None
        # A draw is asked for and has not run: the crosshair leaves its line to it rather than
        # blit (Qt's paint of a blit would run the whole draw inside a pointer move).
        self.draw_due = False
        self.draws_held = False  # a previewed drag-pan move: the pan tool's draw_idle is not
        self.drag: DragPan | None = None
        self._stamp_key: tuple | None = None  # the renderer's (width, height, dpi)
        self.queued = QueuedDraw(self)  # draw_idle's draw, in pieces

    def get_renderer(self) -> StampRenderer:
        # matplotlib's own, but its text drawn from stamps (resplot/draw/text_stamps.py), and
        # the size read from the figure's box (it starts at 0, 0) rather than through
        # get_width_height: every artist drawn over the saved axes asks (2,000 at 100 runs),
        # 7 µs each that way, 0.6 this.
        size = self.figure.bbox.get_points()[1]
        key = (int(size[0]), int(size[1]), self.figure.dpi)
        if self._stamp_key != key:
            self.renderer = StampRenderer(key[0], key[1], self.figure.dpi)
            self._stamp_key = key
        return self.renderer

    def inaxes(self, xy):
        # matplotlib's rule (the topmost visible axes holding the point, the last drawn of
        # equals), by each axes' box: its patch is that rectangle here, and the patches' path
        # test, run at every mouse event, cost 1.6 ms of a 100-run page's hover move.
        x, y = xy
        found = [a for a in self.figure.get_axes() if a.get_visible() and a.bbox.contains(x, y)]
        return max(reversed(found), key=lambda a: a.zorder) if found else None

    def release(self) -> None:
        """Give back the Agg buffer (the whole page's RGBA, 10-80 MB): the renderer is made
        anew for a one-pixel figure and the figure's size put back, so the next draw makes
        one of the page's size."""
        self.queued.cancel()
        self.queued.timer.stop()  # a draw due is the page's next showing's
        self.draw_due = False
        figure = self.figure
        size = figure.get_size_inches()
        figure.set_size_inches(1 / figure.dpi, 1 / figure.dpi, forward=False)
        self.get_renderer()
        figure.set_size_inches(size, forward=False)

    def held_bytes(self) -> int:
        """Bytes of the Agg buffer the canvas holds."""
        renderer = getattr(self, "renderer", None)
        return 0 if renderer is None else memoryview(renderer.buffer_rgba()).nbytes

    def mouseMoveEvent(self, event) -> None:
        # While the left button pans, moves go to the pan tool alone, coalesced (the hover
        # readout is hidden while dragging): resplot/ui/drag_pan.py.
        if self.drag is not None and self.drag.active:
            self.drag.queue_move(*self.mouseEventCoords(event))
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if self.drag is not None and self.drag.active:
            self.drag.end()  # the pan tool was switched off during the drag: its exact frame

    def paintEvent(self, event) -> None:
        frozen = self.queued.frozen
        if frozen is not None:  # a draw in pieces: the last whole frame
            frozen.paint(self, event)
            return
        # The strips that changed one by one, not their bounding box (a hover move's line on
        # two chart columns): resplot/ui/region_paint.py.
        paint_region(event, super().paintEvent)

    def resizeEvent(self, event) -> None:
        self._resizing = True
        try:
            super().resizeEvent(event)
        finally:
            self._resizing = False

    @property
    def drawing(self) -> bool:
        """A full draw is under way in pieces (resplot/ui/pieces.py): the buffer is not a
        frame, the canvas shows the last one."""
        return self.queued.pieces is not None

    def draw_idle(self) -> None:
        # matplotlib's own queues one draw of the whole page, done in the next turn of the
        # event loop (or in a paint, if one comes first); this one draws it in pieces.
        if self.draws_held or (self._resizing and self.hold_resize_draw()):
            return
        self.draw_due = True
        self.queued.queue()

    def draw(self) -> None:
        self.queued.cancel()
        hidden = self.layers.begin_full_draw() if self.layers is not None else []
        try:
            super().draw()
        finally:
            if self.layers is not None:
                self.layers.end_full_draw(hidden)
            self.draw_due = False  # (a draw_idle during the draw schedules none)


class PageView(QWidget):
    pinRequested = pyqtSignal(list)  # the keys of a chart, to add to the Custom page
    sectionToggled = pyqtSignal(str)  # an All-page section's card was clicked: fold/unfold it

    def __init__(self, name: str, on_view_changed, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page = ChartPage(
            name, PageFigure(figsize=(10, 6), dpi=100), self._view_moved, strip_in_figure=False
        )
        self.page.headroom = True  # a live page follows in steps (resplot/data/headroom.py)
        self.canvas = PageCanvas(self.page.figure)
        # Zoom, pan, home and save: shown by the window in the tab bar's corner (a row of its
        # own took 40 px of a laptop's height); the readout gives values, not coordinates.
        self.toolbar = page_toolbar(self.canvas, self, self.page)
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.setFrameShape(QScrollArea.NoFrame)
        self.scroll.setWidget(self.canvas)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        # Every plotted run by name, in its colour and line style (ChartPage.entries).
        self.strip = QLabel(self)
        self.strip.setTextFormat(Qt.RichText)
        self.strip.setWordWrap(True)
        self.strip.setContentsMargins(6, 2, 6, 2)
        self._strip_entries: list = []
        self.strip.hide()  # until it has entries
        # The "all" page: a search over key names, and how many keys it shows of how many.
        self.search: QLineEdit | None = None
        self.count = QLabel(self)
        # The "custom" page: the globs of its keys.
        self.keys_edit: QLineEdit | None = None
        if name == "custom":
            row = QHBoxLayout()
            row.setContentsMargins(6, 0, 6, 0)
            row.addWidget(QLabel("keys:", self))
            self.keys_edit = QLineEdit(self)
            self.keys_edit.setPlaceholderText("globs, e.g. train/* valid/* (Enter to apply)")
            self.keys_edit.setClearButtonEnabled(True)
            row.addWidget(self.keys_edit, 1)
            layout.addLayout(row)
        if name == "all":
            row = QHBoxLayout()
            row.setContentsMargins(6, 0, 6, 0)
            self.search = QLineEdit(self)
            self.search.setPlaceholderText(
                "search metrics: words or regular expressions, each must match (^sys/gpu[01]/)…"
            )
            self.search.setClearButtonEnabled(True)
            row.addWidget(self.search, 1)
            row.addWidget(self.count)
            layout.addLayout(row)
        layout.addWidget(self.strip)
        layout.addWidget(self.scroll)
        self._on_view_changed = on_view_changed
        self._viewport = (-1, -1)
        self.canvas.mpl_connect("resize_event", self._on_resize)
        # Before the crosshair: its draw_event handler saves the page with the series drawn.
        self.layers = Layers(self.canvas, self.page, self._view_rows)
        self.canvas.layers = self.layers
        self.crosshair = Crosshair(self.canvas, self.page, self.toolbar)
        self.layers.on_blit.append(self._blitted)
        self.layers.before_patch.append(self.crosshair.erase)
        self.layers.on_behind = on_view_changed
        self.page.in_view = self.layers.shown_charts
        # After the layers and the crosshair: its draw_event handler takes the finished frame.
        self.drag = DragPan(
            self.canvas, self.page, self._view_rows, lambda: self.layers.drawn, on_view_changed
        )
        self.drag.toolbar = self.toolbar
        self.drag.on_begin.append(self.crosshair.hide)
        self.canvas.drag = self.toolbar.drag = self.drag
        self.layers.on_blit.append(self.drag.rebase)
        self.drag.on_preview.append(self.layers.scribbled)
        bar = self.scroll.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._scrolled)
        self.canvas.mpl_connect("button_press_event", self._on_press)
        self.release = PageRelease(self, on_view_changed)  # unshown a minute: charts given back

    def _view_moved(self) -> None:
        """The x range moved (a zoom, a pan): the window refreshes and draws the page, except
        during a previewed drag, which asks for that when it pauses or ends."""
        if self.drag is not None and self.drag.active:
            return
        self._on_view_changed()

    def _on_resize(self, _event) -> None:
        # The margins are pixels as fractions of the figure's height: any new size needs them
        # again (cheap), before the draw matplotlib makes for it. The charts are laid out for
        # the visible part (measure()): only a change there is a new view. fit() growing the
        # canvas below it is not; a refresh of the page for it would only ask for the same tiles.
        self.page.replace_axes()
        viewport = self.scroll.viewport()
        size = (viewport.width(), viewport.height())
        if size != self._viewport:
            self._viewport = size
            self._on_view_changed()

    def present(self) -> None:
        """Show what the last refresh set: the series alone over the saved axes when nothing
        else changed, else a full draw (resplot/ui/layers.py)."""
        self.layers.present()

    def _view_rows(self) -> tuple[float, float] | None:
        """The canvas rows the scroll area shows (None: all of them)."""
        viewport = self.scroll.viewport().height()
        if self.canvas.height() <= viewport:
            return None
        top = float(self.scroll.verticalScrollBar().value())
        return top, top + viewport

    def _scrolled(self, *_args) -> None:
        # Charts that were out of view at the last full draw come in: draw them now, refreshed
        # first if the page's last refresh left them behind (a user's view).
        if self.layers.background is None:
            return
        if self.layers.behind_in_view():
            self._on_view_changed()
        elif self.layers.charts_due() != self.layers.drawn:
            self.canvas.draw_idle()

    def _blitted(self) -> None:
        # The series were drawn over the saved axes: the hover line's saved pixels are gone
        # with its old place; it draws itself again into this frame.
        self.crosshair.redrawn()

    def _on_press(self, event) -> None:
        if event.button == 1 and event.inaxes in self.page.axes:
            spec = self.page.specs[self.page.axes.index(event.inaxes)]
            if spec.kind == "section":
                self.sectionToggled.emit(spec.section)
                return
        if event.button == 3 and event.inaxes in self.page.axes and not self.toolbar.mode:
            # (with the pan or zoom tool on, the right button drags: a menu there held the
            # drag in its modal loop)
            menu = self.chart_menu(self.page.axes.index(event.inaxes))
            if menu is not None:
                menu.exec_(QCursor.pos())

    def chart_menu(self, index: int) -> QMenu | None:
        """The right-click menu of chart `index`: pin its keys to the Custom page."""
        keys = sorted({item.key for item in self.page.specs[index].items})
        if not keys or self.page.page == "custom":
            return None
        menu = QMenu(self)
        shown = ", ".join(keys[:3]) + (f" +{len(keys) - 3}" if len(keys) > 3 else "")
        menu.addAction(f"Pin {shown} to the Custom page", lambda: self.pinRequested.emit(keys))
        return menu

    def measure(self) -> None:
        """Tell the page how tall the visible part is (it lays charts out for that height)."""
        ratio = self.canvas.device_pixel_ratio or 1.0
        self.page.view_height_px = self.scroll.viewport().height() * ratio

    def fit(self) -> None:
        """Give the canvas the height its charts need (the scroll area scrolls past the view),
        and show the run strip of the last refresh."""
        entries = self.page.entries
        if entries != self._strip_entries:
            self._strip_entries = list(entries)
            self.strip.setText(strip_html(entries))
            self.strip.setVisible(bool(entries))
        ratio = self.canvas.device_pixel_ratio or 1.0
        need = int(self.page.min_height() / ratio)
        if self.canvas.minimumHeight() != need:
            self.canvas.setMinimumHeight(need)
