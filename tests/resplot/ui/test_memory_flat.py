"""Memory flat (issue 31): what the window holds stays bounded while a run logs and a person
hovers, zooms, pans and switches pages (the real window, pytest-qt offscreen, a real process
logging into a real store). The speed and the RSS curve are scripts/bench/bench_soak.py's; this
counts what a leak would be made of: matplotlib artists, and the page pixels the hover keeps
(each page's crosshair kept a whole copy of its canvas, 10-80 MB at 1920 px wide)."""

from __future__ import annotations

import gc

import pytest
from matplotlib.artist import Artist
from matplotlib.axis import Tick
from PyQt5.QtCore import QEvent, QPoint, QPointF, Qt
from PyQt5.QtGui import QMouseEvent
from PyQt5.QtWidgets import QApplication

from schema.store.rollup import STEP_HI
from tests.fixtures import live_logger
from tests.fixtures.sweep import PROJECT, make_sweep
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

PAGES = ("training", "all")  # the all page: the tallest canvas


@pytest.fixture
def live(tmp_path):
    store = tmp_path / "runs.db"
    make_sweep(store, steps=1000, runs=2)
    logger = live_logger.start(store, PROJECT, every=600)
    try:
        yield store
    finally:
        logger.kill()
        logger.wait()


def _drag(canvas, a: QPoint, b: QPoint) -> None:
    app = QApplication.instance()
    press = QMouseEvent(
        QEvent.MouseButtonPress, QPointF(a), Qt.LeftButton, Qt.LeftButton, Qt.NoModifier
    )
    QApplication.sendEvent(canvas, press)
    for k in range(1, 5):
        at = QPointF(a.x() + (b.x() - a.x()) * k / 4, a.y())
        QApplication.sendEvent(
            canvas, QMouseEvent(QEvent.MouseMove, at, Qt.NoButton, Qt.LeftButton, Qt.NoModifier)
        )
        app.processEvents()
    release = QMouseEvent(
        QEvent.MouseButtonRelease, QPointF(b), Qt.LeftButton, Qt.NoButton, Qt.NoModifier
    )
    QApplication.sendEvent(canvas, release)


def _round(qtbot, win) -> None:
    """Each page: shown, hovered at three places, zoomed, panned, followed again."""
    for name in PAGES:
        before = win.redraw_count
        win.set_page(name)
        settle(qtbot, win, before)
        view = win.pages[name]
        page, canvas = view.page, view.canvas
        ax = page.chart_axes()[0]
        view.scroll.ensureVisible(0, 0)
        canvas.draw()
        x0, x1 = ax.get_xlim()
        for f in (0.2, 0.5, 0.8):
            view.crosshair.show_at(page.axes.index(ax), x0 + f * (x1 - x0))
        before = win.redraw_count
        ax.set_xlim(x0 + 0.3 * (x1 - x0), x0 + 0.6 * (x1 - x0))
        settle(qtbot, win, before)
        box, ratio = ax.bbox, canvas.device_pixel_ratio or 1.0
        y = int((canvas.figure.bbox.height - (box.y0 + box.height / 2)) / ratio)
        view.toolbar.pan()
        _drag(
            canvas,
            QPoint(int((box.x0 + 0.7 * box.width) / ratio), y),
            QPoint(int((box.x0 + 0.4 * box.width) / ratio), y),
        )
        view.toolbar.pan()
        view.crosshair.show_at(page.axes.index(ax), sum(ax.get_xlim()) / 2)
        before = win.redraw_count
        win.reset_view()
        settle(qtbot, win, before)


def _artists() -> int:
    """Artists alive, less the axes' tick pools: matplotlib keeps the most ticks an axis has
    needed so far (five artists each) and never shrinks the pool, so a zoom that wants one more
    tick than any before adds them for good (17 ticks, 85 artists, in a round on a loaded
    machine where polls moved the limits differently). `_tick_pools_bounded` bounds those."""
    gc.collect()
    alive = [obj for obj in gc.get_objects() if isinstance(obj, Artist)]
    of_ticks = {id(child) for obj in alive if isinstance(obj, Tick) for child in obj.get_children()}
    return sum(1 for obj in alive if not isinstance(obj, Tick) and id(obj) not in of_ticks)


def _tick_pools(win) -> int:
    """The largest tick pool of any axis of the window's pages."""
    return max(
        len(axis.majorTicks) + len(axis.minorTicks)
        for view in win.pages.values()
        for ax in view.page.figure.axes
        for axis in (ax.xaxis, ax.yaxis)
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # two rounds of two pages: minutes on a loaded 2-core machine
def test_artists_and_hover_pixels_stay_bounded_while_a_run_logs(qtbot, tmp_path, live):
    win = open_window(qtbot, [live], tmp_path / "settings.json", runs=3, size=(1920, 1080))
    try:
        live_ref = next(r.ref for r in win.cache.runs() if r.name.startswith("live-"))
        _round(qtbot, win)  # every page laid out once: its artists made
        first = _artists()
        steps_at_first = win.cache.summary(live_ref, "train/loss").agg[STEP_HI]
        _round(qtbot, win)
        # Polls brought points meanwhile (the live run's last step moved on).
        assert win.cache.summary(live_ref, "train/loss").agg[STEP_HI] > steps_at_first
        assert _artists() <= first * 1.02 + 20, (first, _artists())
        # A pool holds the most ticks its axis has shown at once, a few dozen at most.
        assert _tick_pools(win) <= 40, _tick_pools(win)
        for name in PAGES:
            view = win.pages[name]
            fig = view.page.figure.bbox
            held = view.crosshair.held_bytes()
            # The pixels under the line and dots only, not a copy of the page.
            assert held < 0.05 * fig.width * fig.height * 4, (name, held, fig.bounds)
    finally:
        win.close()
