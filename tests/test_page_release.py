"""A page left unshown gives back its charts (issue 31, memory flat; resplot/ui/page_release.py):
the real window, pytest-qt offscreen, a real store read by the real Poller. Its artists are gone
(none of its figure's old artists alive), its canvas buffer and saved pixels dropped; shown
again it draws the same pixels, and hover, zoom and pan work on the charts built anew."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import weakref

import numpy as np
import pytest
from matplotlib.artist import Artist
from PyQt5.QtCore import QPoint
from PyQt5.QtGui import QImage

from tests.fixtures.sweep import make_sweep
from tests.fixtures.windows import open_window, settle
from tests.test_memory_flat import _drag


def _of_figure(figure) -> int:
    """Artists alive that belong to `figure` (the figure itself not counted)."""
    gc.collect()
    return sum(
        1
        for obj in gc.get_objects()
        if isinstance(obj, Artist) and obj is not figure and obj.get_figure(root=True) is figure
    )


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _pixels(view) -> np.ndarray:
    """The page's pixels as a full draw leaves them. Drawn once more first: a legend's first
    draw is direct and the next from a bitmap of itself (resplot/draw/legend_bitmap.py), a
    level or two apart in its translucent frame, and a page's last draw may be either."""
    view.canvas.draw()
    image = view.canvas.grab().toImage().convertToFormat(QImage.Format_RGBA8888)
    data = image.constBits().asstring(image.byteCount())
    return np.frombuffer(data, np.uint8).reshape(image.height(), image.bytesPerLine())


def _show(qtbot, win, name: str) -> None:
    before = win.redraw_count
    win.set_page(name)
    settle(qtbot, win, before)
    view = win.pages[name]
    qtbot.waitUntil(lambda: not view.canvas.draw_due and view.layers.background is not None)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_unshown_page_gives_back_its_charts_and_draws_them_again(qtbot, tmp_path):
    store = tmp_path / "runs.db"
    make_sweep(store, steps=1000, runs=2)
    win = open_window(qtbot, [store], tmp_path / "settings.json", runs=2, size=(1280, 800))
    try:
        _show(qtbot, win, "all")
        view = win.pages["all"]
        figure = view.page.figure
        first = _pixels(view)
        built = _of_figure(figure)
        old_axes = weakref.ref(view.page.axes[0])
        assert built > 500, built  # the All page: a chart for each key
        assert hasattr(view.canvas, "renderer")

        buffer = np.prod(view.canvas.get_width_height(physical=True)) * 4  # RGBA
        gc.collect()
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(
            0
        )  # the heap as the release leaves it
        held = _rss()
        view.release.after_s = 0.05  # the test's timeout, not the minute
        _show(qtbot, win, "training")
        qtbot.waitUntil(lambda: view.release.released, timeout=10_000)
        left = _of_figure(figure)
        # The empty page's note, the run strip's and the crosshair's own artists at most.
        assert left <= 10, (built, left)
        # Given back to the system: the canvas's buffer and the artists' heap (~100 MB here).
        assert held - _rss() > buffer, (held, _rss(), buffer)
        assert old_axes() is None  # nothing (crosshair, layers, toolbar) holds its axes
        assert not hasattr(view.canvas, "renderer")  # the Agg buffer given back
        assert view.layers.background is None and view.crosshair.held_bytes() == 0
        assert view.page.tracks == []
        # The page shown keeps its charts.
        assert not win.pages["training"].release.released and win.pages["training"].page.axes

        full = view.layers.full_draws
        _show(qtbot, win, "all")
        assert not view.release.released and view.layers.full_draws > full
        again = _pixels(view)
        assert again.shape == first.shape
        assert np.array_equal(again, first), np.count_nonzero(again != first)
        assert _of_figure(figure) >= built * 0.9

        # Hover, zoom and pan on the charts built anew.
        page, canvas = view.page, view.canvas
        ax = page.chart_axes()[0]
        x0, x1 = ax.get_xlim()
        view.crosshair.show_at(page.axes.index(ax), (x0 + x1) / 2)
        assert view.crosshair.found and view.crosshair.held_bytes() > 0
        view.crosshair.hide()
        before = win.redraw_count
        ax.set_xlim(x0 + 0.3 * (x1 - x0), x0 + 0.6 * (x1 - x0))
        settle(qtbot, win, before)
        assert not page.follow
        z0, z1 = ax.get_xlim()
        assert (z0, z1) == pytest.approx((x0 + 0.3 * (x1 - x0), x0 + 0.6 * (x1 - x0)))
        box, ratio = ax.bbox, canvas.device_pixel_ratio or 1.0
        y = int((canvas.figure.bbox.height - (box.y0 + box.height / 2)) / ratio)
        view.toolbar.pan()
        _drag(
            canvas,
            QPoint(int((box.x0 + 0.7 * box.width) / ratio), y),
            QPoint(int((box.x0 + 0.4 * box.width) / ratio), y),
        )
        view.toolbar.pan()
        p0, p1 = ax.get_xlim()
        assert p0 > z0 and p1 - p0 == pytest.approx(z1 - z0)  # dragged left: later steps

        # A zoomed page keeps its charts (and the user's view) while unshown.
        _show(qtbot, win, "training")
        qtbot.waitUntil(lambda: not view.release._timer.isActive(), timeout=10_000)
        assert not view.release.released and ax.get_xlim() == (p0, p1)
    finally:
        win.close()
