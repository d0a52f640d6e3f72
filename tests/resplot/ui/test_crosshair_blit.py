"""The crosshair at screen speed (issue 31), in the real window (pytest-qt, offscreen) on a real
store: a pointer move hands Qt only the strips that changed, leaves no line behind, and never
runs a page draw inside itself; a draw that was due paints the line where the pointer is."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from PyQt5.QtCore import QRect
from PyQt5.QtGui import QRegion

from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

STEPS = np.arange(0, 600, 3)
LINE = tuple(round(255 * c) for c in to_rgba("#555555")[:3])


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "runs.db"
    engine = new_store(path)
    for i in range(3):
        loss = 2.0 + 0.5 * i + np.exp(-STEPS / 80.0)
        points = {
            "train/loss": list(zip(STEPS.tolist(), loss.tolist(), strict=True)),
            "train/lr": [(int(s), 3e-4) for s in STEPS],
        }
        make_run(engine, name=f"run-{i}", points=points, created_at=BASE_TIME + i)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=3)
    w.set_smoothing(0.0)
    settle(qtbot, w)
    view = w.pages["training"]
    view.canvas.draw()
    yield w
    w.close()


def _buffer(canvas) -> np.ndarray:
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def _line_columns(canvas, ax, image: np.ndarray) -> set[int]:
    """Columns (figure pixels) inside `ax` where the crosshair's grey runs most of its height."""
    height = image.shape[0]
    top, bottom = int(height - ax.bbox.y1) + 2, int(height - ax.bbox.y0) - 2
    inside = image[top:bottom, int(ax.bbox.x0) + 2 : int(ax.bbox.x1) - 2]
    grey = np.all(inside == LINE, axis=2).mean(axis=0)
    return {int(ax.bbox.x0) + 2 + int(c) for c in np.flatnonzero(grey > 0.5)}


def _rects(*args) -> list[QRect]:
    """What a canvas.update() call marks: a region's rectangles, a rectangle, or the whole."""
    if not args:
        return [QRect(0, 0, 10**6, 10**6)]
    if isinstance(args[0], QRegion):
        return list(args[0].rects())
    return [args[0] if isinstance(args[0], QRect) else QRect(*args)]


def _px(ax, x: float) -> int:
    return int(ax.transData.transform((x, 0))[0])


def test_a_move_blits_thin_strips_and_leaves_no_line_behind(win):
    view = win.pages["training"]
    canvas, page, hair = view.canvas, view.page, view.crosshair
    ax = page.axes[0]
    clean = _buffer(canvas)
    blits = []  # the rectangles handed to Qt for its next paint (widget pixels)
    real_update = canvas.update
    canvas.update = lambda *a: (blits.extend(_rects(*a)), real_update(*a))[1]
    x0, x1 = ax.get_xlim()
    a, b = x0 + 0.3 * (x1 - x0), x0 + 0.7 * (x1 - x0)
    hair.show_at(0, a)
    assert {abs(c - _px(ax, a)) <= 1 for c in _line_columns(canvas, ax, _buffer(canvas))} == {True}
    blits.clear()
    hair.show_at(0, b)
    after = _buffer(canvas)
    # The line moved: gone from a, drawn at b, and every pixel away from the two strips and
    # the dots is the page's own.
    assert _line_columns(canvas, ax, after)
    assert all(abs(c - _px(ax, b)) <= 1 for c in _line_columns(canvas, ax, after))
    changed = np.any(after != clean, axis=2)
    cols = np.flatnonzero(changed.any(axis=0))
    at = {_px(other, b) for other in page.axes}  # the line is on every chart (two columns)
    assert cols.size and all(min(abs(c - p) for p in at) <= 12 for c in cols), (cols, at)
    # What Qt was handed: strips around the old and the new line, not the whole canvas.
    assert blits
    area = sum(r.width() * r.height() for r in blits)
    fig = page.figure.bbox
    assert area < 0.1 * fig.width * fig.height, (area, fig.width * fig.height)
    assert all(r.width() < 40 for r in blits), blits
    # It keeps the page's pixels under the line and dots only, no copy of the whole canvas
    # (10-80 MB a page at 1920 px wide: the memory the soak of issue 31 saw grow by page).
    assert 0 < hair.held_bytes() < 0.1 * fig.width * fig.height * 4
    blits.clear()
    hair.hide()
    assert np.array_equal(_buffer(canvas), clean)
    assert blits and all(r.width() < 40 for r in blits)


def test_a_move_while_a_draw_is_due_does_not_draw_and_the_draw_paints_the_line(win, qtbot):
    view = win.pages["training"]
    canvas, page, hair = view.canvas, view.page, view.crosshair
    ax = page.axes[0]
    draws = []
    canvas.mpl_connect("draw_event", lambda _e: draws.append(1))
    x0, x1 = ax.get_xlim()
    a = x0 + 0.4 * (x1 - x0)
    canvas.draw_idle()  # new data came: a draw is due
    hair.show_at(0, a)
    # The readout is up at once; the page draw did not run inside the move.
    assert hair.label.isVisible() and hair.found
    assert not draws
    qtbot.waitUntil(lambda: bool(draws), timeout=5000)
    # The draw that was due painted the line where the pointer is.
    cols = _line_columns(canvas, ax, _buffer(canvas))
    assert cols and all(abs(c - _px(ax, a)) <= 1 for c in cols), cols
    # And the next move blits again (from the new background).
    b = x0 + 0.6 * (x1 - x0)
    hair.show_at(0, b)
    cols = _line_columns(canvas, ax, _buffer(canvas))
    assert cols and all(abs(c - _px(ax, b)) <= 1 for c in cols), cols
    assert len(draws) == 1


def test_the_lines_drawn_as_one_artist_are_the_pixels_of_a_line2d_a_chart(win):
    """The line on every chart is one LineCollection in figure pixels: the same pixels as the
    Line2D a chart it replaced (x on the data, y across the axes), dots over it."""
    from matplotlib.lines import Line2D

    view = win.pages["training"]
    canvas, page, hair = view.canvas, view.page, view.crosshair
    x0, x1 = page.axes[0].get_xlim()
    for f in (0.137, 0.5, 0.861):
        x = x0 + f * (x1 - x0)
        clean = _buffer(canvas)
        hair.show_at(0, x)
        drawn = _buffer(canvas)
        hair.hide()
        assert np.array_equal(_buffer(canvas), clean)
        for ax in page.axes:
            transform = ax.get_xaxis_transform()
            line = Line2D([x, x], [0, 1], color="#555555", linewidth=0.8, transform=transform)
            line.set_figure(page.figure)
            page.figure.draw_artist(line)
        page.figure.draw_artist(hair.dots)
        assert np.array_equal(_buffer(canvas), drawn), f
        canvas.draw()


def test_the_canvas_paints_no_page_under_the_readout_where_it_moves(win, qtbot):
    """The readout is opaque: where it moves to, Qt paints it alone, not the page under it
    too (a translucent one made the canvas copy its whole area again on every move)."""
    from PyQt5.QtCore import QPoint

    view = win.pages["training"]
    canvas, page, hair = view.canvas, view.page, view.crosshair
    ax = page.axes[0]
    painted: list[QRegion] = []
    real_paint = canvas.paintEvent

    def paint(event) -> None:
        painted.append(QRegion(event.region()))
        real_paint(event)

    canvas.paintEvent = paint
    ratio = canvas.device_pixel_ratio or 1.0
    height = page.figure.bbox.height

    def move(f: float) -> None:
        x, y = ax.bbox.x0 + f * ax.bbox.width, ax.bbox.y0 + 0.5 * ax.bbox.height
        qtbot.mouseMove(canvas, QPoint(int(x / ratio), int((height - y) / ratio)))
        qtbot.wait(50)

    move(0.3)
    qtbot.waitUntil(hair.label.isVisible, timeout=5000)
    before = hair.label.geometry()
    painted.clear()
    move(0.33)
    after = hair.label.geometry()
    assert after != before and painted
    # Inside the readout's new place, away from where it was: nothing of the page painted.
    fresh = QRegion(after) - QRegion(before)
    assert not fresh.isEmpty()
    for region in painted:
        assert region.intersected(fresh).isEmpty(), region.intersected(fresh).rects()


def test_the_dots_colours_are_the_rgba_matplotlib_makes_of_the_runs_colours(win):
    """The dots' colours are converted once per colour and kept: the same RGBA (and so the
    same pixels) as the colour names handed to the collection, move after move."""
    from matplotlib.colors import to_rgba_array

    view = win.pages["training"]
    page, hair = view.page, view.crosshair
    x0, x1 = page.axes[0].get_xlim()
    for f in (0.2, 0.6, 0.9):
        hair.show_at(0, x0 + f * (x1 - x0))
        shown = [r for r in hair.found if math.isfinite(hair_value(r))]
        assert len(shown) == 3
        want = to_rgba_array([r.item.color for r in shown])
        assert np.array_equal(hair.dots.get_facecolors(), want)
        assert np.array_equal(hair.dots.get_offsets(), [(r.x, hair_value(r)) for r in shown])
        hair.hide()


def hair_value(r) -> float:
    return r.smoothed if r.smoothed is not None else r.raw
