"""A page left unshown gives back its charts (issue 31, memory flat; resplot/ui/page_release.py):
the real window, pytest-qt offscreen, a real store read by the real Poller. What is given back
is checked as objects, not as the process's RSS (which other tests in the same process move):
none of its figure's old artists alive, the old axes, legend and notes gone (nothing holds
them: crosshair, drag, toolbar, layers), the canvas's Agg buffer and the saved pixels dropped.
Shown again it draws the same pixels, and hover, zoom and pan work on the charts built anew."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from matplotlib.artist import Artist
from PyQt5.QtCore import QPoint

from resplot.draw.bitmap_draw import scratch_bytes
from resplot.draw.legend_bitmap import BitmapLegend
from tests.fixtures.sweep import make_sweep
from tests.fixtures.windows import open_window, settle
from tests.resplot.ui.test_memory_flat import _drag


def _of_figure(figure) -> list[Artist]:
    """Artists alive that belong to `figure` (the figure itself not counted)."""
    gc.collect()
    return [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, Artist) and obj is not figure and obj.get_figure(root=True) is figure
    ]


def _pixels(view) -> np.ndarray:
    """The page's pixels as matplotlib's own full draw leaves them, every chart drawn: the
    window's draw leaves out the charts outside the scroll area's viewport, whose height the
    window's layout sets (a scroll bar come or gone moved a chart at its edge in or out of a
    draw)."""
    view.layers.enabled = False
    try:
        view.layers.mark()
        view.canvas.draw()
        pixels = np.asarray(view.canvas.buffer_rgba()).copy()
    finally:
        view.layers.enabled = True
    view.canvas.draw()  # the window's own draw again (the saved picture the hover needs)
    return pixels


def _charts_apart(page, a: np.ndarray, b: np.ndarray) -> list[str]:
    """The titles of the charts whose boxes hold pixels that differ (the failure's message)."""
    height = a.shape[0]
    rows, cols = np.nonzero((a != b).any(axis=2))
    out = []
    for ax, spec in zip(page.axes, page.specs, strict=False):
        box = ax.bbox
        inside = (cols >= box.x0) & (cols <= box.x1)
        inside &= (height - rows >= box.y0) & (height - rows <= box.y1)
        if inside.any():
            out.append(f"{spec.title}: {int(inside.sum())} px")
    return out or [f"outside the charts: {len(rows)} px"]


def _show(qtbot, win, name: str) -> None:
    before = win.redraw_count
    win.set_page(name)
    settle(qtbot, win, before)
    view = win.pages[name]
    qtbot.waitUntil(lambda: not view.canvas.draw_due and view.layers.background is not None)


def _pan(view, ax, a: float, b: float) -> None:
    """A drag with the pan tool on chart `ax`, from fraction a of its width to b."""
    canvas = view.canvas
    box, ratio = ax.bbox, canvas.device_pixel_ratio or 1.0
    y = int((canvas.figure.bbox.height - (box.y0 + box.height / 2)) / ratio)
    view.toolbar.pan()
    _drag(
        canvas,
        QPoint(int((box.x0 + a * box.width) / ratio), y),
        QPoint(int((box.x0 + b * box.width) / ratio), y),
    )
    view.toolbar.pan()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_unshown_page_gives_back_its_charts_and_draws_them_again(qtbot, tmp_path):
    store = tmp_path / "runs.db"
    make_sweep(store, steps=1000, runs=2)
    win = open_window(qtbot, [store], tmp_path / "settings.json", runs=2, size=(1280, 800))
    try:
        _show(qtbot, win, "all")
        view = win.pages["all"]
        page, canvas = view.page, view.canvas
        figure = page.figure
        # Used as a person would first: hovered, panned (a drag's frame, the toolbar's
        # views), then followed again; the dots stay set on the hovered chart.
        first = _pixels(view)  # a first view's
        ax = page.chart_axes()[0]
        _pan(view, ax, 0.7, 0.4)
        before = win.redraw_count
        win.reset_view()
        settle(qtbot, win, before)
        assert not page.user_view()
        x0, x1 = ax.get_xlim()
        view.crosshair.show_at(page.axes.index(ax), (x0 + x1) / 2)
        assert view.crosshair.found
        label = view.crosshair.label
        qtbot.waitUntil(lambda: label.renders > 0, timeout=5000)
        assert label._statics  # its texts, laid out
        view.crosshair.hide()  # its line and readout go; its dots stay set on the chart
        built = len(_of_figure(figure))
        assert built > 500, built  # the All page: a chart for each key
        old_axes = weakref.ref(ax)
        legends = [a.get_legend() for a in page.axes if a.get_legend() is not None]
        notes = [note for note in page._notes if note.get_text()]
        assert legends and isinstance(legends[0], BitmapLegend) and notes
        old_legend, old_note = weakref.ref(legends[0]), weakref.ref(notes[0])
        old_line = weakref.ref(next(iter(page.tracks[page.axes.index(ax)].values())).line)
        del ax, legends, notes
        buffer = np.prod(canvas.get_width_height(physical=True)) * 4  # RGBA
        assert canvas.held_bytes() == buffer
        assert view.layers.background is not None
        assert scratch_bytes() > 0  # the legends' scratch canvas

        view.release.after_s = 0.05  # the test's timeout, not the minute
        _show(qtbot, win, "training")
        qtbot.waitUntil(lambda: view.release.released, timeout=10_000)
        left = _of_figure(figure)
        # The empty page's note, the run strip's and the crosshair's own artists at most.
        assert len(left) <= 10, (built, [type(a).__name__ for a in left])
        for gone in (old_axes, old_legend, old_note, old_line):
            assert gone() is None, gone()  # nothing (crosshair, layers, toolbar) holds it
        assert page.axes == [] and page.tracks == [] and page.specs == []
        assert canvas.held_bytes() <= 4, canvas.held_bytes()  # one pixel, not the page's
        assert view.layers.background is None and view.layers.drawn == []
        assert view.crosshair.held_bytes() == 0 and not view.crosshair.found
        assert not label._statics  # nor its texts laid out
        assert view.drag.base_xlim is None
        # The scratch canvas was given back (the training page, drawn since, has its own).
        assert scratch_bytes() < buffer
        # The page shown keeps its charts.
        shown = win.pages["training"]
        assert not shown.release.released and shown.page.axes

        full = view.layers.full_draws
        _show(qtbot, win, "all")
        assert not view.release.released and view.layers.full_draws > full
        assert canvas.held_bytes() == buffer
        again = _pixels(view)
        assert again.shape == first.shape
        assert np.array_equal(again, first), _charts_apart(page, first, again)
        assert len(_of_figure(figure)) >= built * 0.9

        # Hover, zoom and pan on the charts built anew.
        ax = page.chart_axes()[0]
        x0, x1 = ax.get_xlim()
        view.crosshair.show_at(page.axes.index(ax), (x0 + x1) / 2)
        assert view.crosshair.found and view.crosshair.held_bytes() > 0
        view.crosshair.hide()
        before = win.redraw_count
        ax.set_xlim(x0 + 0.3 * (x1 - x0), x0 + 0.6 * (x1 - x0))
        settle(qtbot, win, before)
        assert page.user_view()
        z0, z1 = ax.get_xlim()
        assert (z0, z1) == pytest.approx((x0 + 0.3 * (x1 - x0), x0 + 0.6 * (x1 - x0)))
        _pan(view, ax, 0.7, 0.4)
        p0, p1 = ax.get_xlim()
        assert p0 > z0 and p1 - p0 == pytest.approx(z1 - z0)  # dragged left: later steps

        # A zoomed page keeps its charts (and the user's view) while unshown.
        _show(qtbot, win, "training")
        qtbot.waitUntil(lambda: not view.release.timer.isActive(), timeout=10_000)
        assert not view.release.released and view.release.releases == 1
        assert ax.get_xlim() == (p0, p1)
    finally:
        win.close()
