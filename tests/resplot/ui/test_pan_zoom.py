"""Zoom and drag-pan in the real window (pytest-qt, offscreen, real mouse events on a real
store), issue 31: a zoom or a pan frame draws the page once, with the refreshed columns; the
pan tool moves x only and every chart's y then fits the data in view."""

from __future__ import annotations

import numpy as np
import pytest
from PyQt5.QtCore import QEvent, QPoint, QPointF, Qt
from PyQt5.QtGui import QMouseEvent
from PyQt5.QtWidgets import QApplication

from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

STEPS = np.arange(0, 3000)


def _loss(s: np.ndarray) -> np.ndarray:
    return 2.5 + 2.0 * np.exp(-s / 400.0)


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "runs.db"
    engine = new_store(path)
    points = {
        "train/loss": list(zip(STEPS.tolist(), _loss(STEPS).tolist(), strict=True)),
        "train/grad_norm": [(int(s), 1.0 + s / 1000) for s in STEPS],
    }
    make_run(engine, name="r", points=points, created_at=BASE_TIME)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    w.set_smoothing(0.0)
    w.set_log_y(False)
    settle(qtbot, w)
    yield w
    w.close()


def _axes(page, word: str):
    return page.axes[next(i for i, s in enumerate(page.specs) if word in s.title.lower())]


def _zoom(qtbot, win, ax, lo: float, hi: float) -> list[bool]:
    """What the toolbar's zoom does on release (the limits, then draw_idle); for each page draw
    until the page is refreshed and drawn, whether the refresh had run before it."""
    view = win.pages["training"]
    qtbot.wait(120)  # past the window's 50 ms between redraws: a fresh zoom
    before = win.redraw_count
    draws: list[bool] = []
    cid = view.canvas.mpl_connect("draw_event", lambda _e: draws.append(win.redraw_count > before))
    try:
        ax.set_xlim(lo, hi)
        view.canvas.draw_idle()
        qtbot.waitUntil(lambda: bool(draws) and draws[-1], timeout=10_000)
        settle(qtbot, win, before)
        qtbot.wait(100)
    finally:
        view.canvas.mpl_disconnect(cid)
    return draws


def test_a_zoom_to_cached_data_refreshes_then_draws_the_page_once(win, qtbot):
    page = win.current_page()
    ax = _axes(page, "loss")
    _zoom(qtbot, win, ax, 1000, 1500)  # its tiles come
    win.reset_view()
    settle(qtbot, win)
    draws = _zoom(qtbot, win, ax, 1000, 1500)
    # Drawn once, after the refresh: not first at the new limits with the old columns.
    assert draws == [True], draws
    assert tuple(ax.get_xlim()) == (1000, 1500)


def test_a_zoom_leaves_the_side_panel_alone_and_new_data_refreshes_it(win, qtbot):
    """The run table, sources tree and alerts show the cache, the state and the time, not the
    view: a zoom's redraw does not refresh them (their own timer does, each second; stopped
    here), a redraw for new data does."""
    page = win.current_page()
    ax = _axes(page, "loss")
    _zoom(qtbot, win, ax, 1000, 1500)  # its tiles come (new data: the side refreshed)
    win.reset_view()
    settle(qtbot, win)
    win._side_timer.stop()
    own, calls = win._refresh_side, []
    win._refresh_side = lambda: (calls.append(win.redraw_count), own())
    before = win.redraw_count
    draws = _zoom(qtbot, win, ax, 1000, 1500)
    assert draws == [True] and win.redraw_count > before  # refreshed and drawn
    assert calls == []
    win.on_data_arrived()
    settle(qtbot, win, win.redraw_count)
    assert calls == [win.redraw_count]  # that redraw's


def _drag(canvas, a: QPoint, b: QPoint, moves: int = 8) -> None:
    """A left-button drag with real events (QTest's move carries no held button offscreen)."""
    app = QApplication.instance()
    press = QMouseEvent(
        QEvent.MouseButtonPress, QPointF(a), Qt.LeftButton, Qt.LeftButton, Qt.NoModifier
    )
    QApplication.sendEvent(canvas, press)
    for k in range(1, moves + 1):
        at = QPointF(a.x() + (b.x() - a.x()) * k / moves, a.y() + (b.y() - a.y()) * k / moves)
        QApplication.sendEvent(
            canvas, QMouseEvent(QEvent.MouseMove, at, Qt.NoButton, Qt.LeftButton, Qt.NoModifier)
        )
        app.processEvents()
    release = QMouseEvent(
        QEvent.MouseButtonRelease, QPointF(b), Qt.LeftButton, Qt.NoButton, Qt.NoModifier
    )
    QApplication.sendEvent(canvas, release)


def _widget_point(canvas, ax, fx: float, fy: float) -> QPoint:
    box = ax.bbox
    ratio = canvas.device_pixel_ratio or 1.0
    x, y = box.x0 + fx * box.width, box.y0 + fy * box.height
    return QPoint(int(x / ratio), int((canvas.figure.bbox.height - y) / ratio))


def test_a_drag_pan_moves_x_only_and_the_dragged_chart_fits_y_to_the_data(win, qtbot):
    view = win.pages["training"]
    page, canvas = view.page, view.canvas
    loss, grad = _axes(page, "loss"), _axes(page, "grad")
    _zoom(qtbot, win, loss, 200, 700)
    lo, hi = loss.get_ylim()
    shown = _loss(np.arange(200, 701))
    assert lo <= shown.min() and hi >= shown.max() and hi - lo < 1.5 * np.ptp(shown)
    before = win.redraw_count
    view.toolbar.pan()
    try:
        # Dragged to the left and down: the view moves to later steps, and only along x.
        a = _widget_point(canvas, loss, 0.8, 0.3)
        b = _widget_point(canvas, loss, 0.2, 0.9)
        _drag(canvas, a, b)
    finally:
        view.toolbar.pan()  # the tool off again
    settle(qtbot, win, before)
    qtbot.wait(150)
    x0, x1 = loss.get_xlim()
    assert x0 > 400 and x1 - x0 == pytest.approx(500, rel=1e-6), (x0, x1)
    assert not page.follow
    # The dragged chart's y fits what is in view now (a decaying loss: lower, narrower),
    # as the chart beside it does; the drag's vertical part moved nothing.
    shown = _loss(np.arange(int(np.ceil(x0)), int(x1) + 1))
    lo, hi = loss.get_ylim()
    assert lo <= shown.min() and hi >= shown.max(), (lo, hi, shown.min(), shown.max())
    assert hi - lo < 1.5 * np.ptp(shown), (lo, hi, np.ptp(shown))
    g = 1.0 + np.arange(int(np.ceil(x0)), int(x1) + 1) / 1000
    glo, ghi = grad.get_ylim()
    assert glo <= g.min() and ghi >= g.max() and ghi - glo < 1.5 * np.ptp(g), (glo, ghi)
