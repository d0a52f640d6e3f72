"""A drag-pan at screen speed (resplot/ui/drag_pan.py, issue 31), in the real window (pytest-qt,
offscreen, real QMouseEvents on a real store): each move of a left-button drag with the pan
tool shows the last exact frame moved by the drag's pixels, with no refresh and no page draw;
moves that come together are one frame; when the drag pauses or ends the page is refreshed and
drawn, and the canvas is then the pixels of a full draw of the same limits (the preview is
never left on screen)."""

from __future__ import annotations

import numpy as np
import pytest
from PyQt5.QtCore import QEvent, QPointF, Qt
from PyQt5.QtGui import QMouseEvent
from PyQt5.QtWidgets import QApplication

from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

STEPS = np.arange(0, 3000)
HELD = 600_000  # a pause no test waits for: every move a preview until the release


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "runs.db"
    engine = new_store(path)
    for i in range(3):
        loss = 2.5 + 0.1 * i + 2.0 * np.exp(-STEPS / 400.0) + 0.05 * np.sin(STEPS / (7 + i))
        points = {
            "train/loss": list(zip(STEPS.tolist(), loss.tolist(), strict=True)),
            "train/grad_norm": [(int(s), 1.0 + s / 1000 + 0.1 * np.sin(s / 13)) for s in STEPS],
            "valid/loss": [(int(s), float(loss[s]) + 0.1) for s in STEPS[::250]],
        }
        make_run(engine, name=f"lr-{i}e-4", points=points, created_at=BASE_TIME + i)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=3, size=(1280, 800))
    w.set_smoothing(0.0)
    settle(qtbot, w)
    yield w
    w.close()


def _loss_axes(page):
    return page.axes[next(i for i, s in enumerate(page.specs) if "loss" in s.title.lower())]


def _zoomed(qtbot, win, lo: float, hi: float):
    """The training page zoomed to steps lo..hi (what the toolbar's zoom does), drawn."""
    view = win.pages["training"]
    ax = _loss_axes(view.page)
    qtbot.wait(120)
    before = win.redraw_count
    ax.set_xlim(lo, hi)
    view.canvas.draw_idle()
    settle(qtbot, win, before)
    _drawn(qtbot, win)
    return view, ax


def _drawn(qtbot, win) -> None:
    """No refresh or draw due (what a drag's exact frame asked for has been drawn)."""
    canvas = win.pages["training"].canvas
    qtbot.waitUntil(
        lambda: not (win._redraw_timer.isActive() or win._view_redraw_posted or canvas.draw_due),
        timeout=30_000,
    )
    settle(qtbot, win, win.redraw_count - 1)
    QApplication.processEvents()


def _point(view, ax, fx: float, fy: float = 0.5) -> QPointF:
    box, canvas = ax.bbox, view.canvas
    ratio = canvas.device_pixel_ratio or 1.0
    y = canvas.figure.bbox.height - (box.y0 + fy * box.height)
    return QPointF((box.x0 + fx * box.width) / ratio, y / ratio)


def _send(canvas, kind, at: QPointF, button=Qt.NoButton, buttons=Qt.LeftButton) -> None:
    QApplication.sendEvent(canvas, QMouseEvent(kind, at, button, buttons, Qt.NoModifier))


def _press(view, at, button=Qt.LeftButton) -> None:
    _send(view.canvas, QEvent.MouseButtonPress, at, button, button)


def _move(view, at, buttons=Qt.LeftButton, process: bool = True) -> None:
    _send(view.canvas, QEvent.MouseMove, at, Qt.NoButton, buttons)
    if process:
        QApplication.processEvents()


def _release(view, at, button=Qt.LeftButton) -> None:
    _send(view.canvas, QEvent.MouseButtonRelease, at, button, Qt.NoButton)


def _shown(view) -> np.ndarray:
    """The canvas's pixels the window shows."""
    rgba = np.asarray(view.canvas.buffer_rgba()).copy()
    rows = view.layers.view_rows()
    return rgba if rows is None else rgba[int(rows[0]) : int(rows[1])]


def _full_draw(view) -> np.ndarray:
    """matplotlib's own draw of the whole page at its current state (layers off)."""
    view.layers.enabled = False
    try:
        view.layers.mark()
        view.canvas.draw()
        return _shown(view)
    finally:
        view.layers.enabled = True
        view.layers.mark()
        view.canvas.draw()


def _draws(view) -> list[int]:
    got: list[int] = []
    view.canvas.mpl_connect("draw_event", lambda _e: got.append(1))
    return got


def test_a_drag_shows_previews_without_drawing_then_ends_on_a_full_draw(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    draws, redraws, frames = _draws(view), win.redraw_count, view.drag.frames
    view.toolbar.pan()
    try:
        _press(view, _point(view, ax, 0.8))
        for k in range(1, 7):
            _move(view, _point(view, ax, 0.8 - 0.1 * k, 0.5 + 0.05 * k))
        # Six frames, each the last exact frame moved: no refresh, no page draw.
        assert view.drag.frames == frames + 6
        assert draws == [] and win.redraw_count == redraws
        x0, x1 = ax.get_xlim()
        assert x0 > 1200 and x1 - x0 == pytest.approx(500)  # moved along x only
        preview = _shown(view)
        _release(view, _point(view, ax, 0.2, 0.9))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    # One exact frame after the release: refreshed first, then drawn; no preview is left.
    assert win.redraw_count > redraws and draws
    assert view.drag.frames == frames + 6
    assert tuple(ax.get_xlim()) == (x0, x1)
    shown = _shown(view)
    assert (shown != preview).any(axis=2).sum() > 100
    full = _full_draw(view)
    differ = np.argwhere((shown != full).any(axis=2))
    assert len(differ) == 0, f"{len(differ)} pixels differ, first at {differ[:5].tolist()}"


def test_a_preview_is_the_last_exact_frame_moved_by_the_drags_pixels(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    base = np.asarray(view.canvas.buffer_rgba()).copy()
    height = base.shape[0]
    box = ax.bbox
    top, bottom = height - int(np.ceil(box.y1)), height - int(box.y0)
    left, right = int(box.x0), int(np.ceil(box.x1))
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.6)
        _press(view, a)
        _move(view, QPointF(a.x() - 40, a.y() + 30))  # 40 px to the left (and down)
        frame = np.asarray(view.canvas.buffer_rgba()).copy()
        # The buffer is not the page's last frame: its next blit draws all of the live tier.
        assert not view.layers.intact
        _release(view, QPointF(a.x() - 40, a.y() + 30))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    # Rows through the chart's middle, clear of its legend and note: the data 40 px left.
    rows = slice(top + (bottom - top) // 3, top + (bottom - top) // 2)
    inner = slice(left + 45, right - 45)
    moved = slice(left + 5, right - 85)
    assert np.array_equal(frame[rows, moved], base[rows, inner])
    assert not np.array_equal(frame[rows, inner], base[rows, inner])  # it did move
    # The strip the drag uncovered is the chart's face, nothing drawn in it yet.
    face = np.round(np.asarray(ax.get_facecolor()) * 255).astype(np.uint8)
    assert (frame[rows, right - 40 : right - 3] == face).all()
    # Outside the charts (the y labels, the titles) the frame is as it was.
    assert np.array_equal(frame[top - 10 : bottom, : left - 3], base[top - 10 : bottom, : left - 3])


def test_moves_that_come_together_are_one_preview(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    frames = view.drag.frames
    width = ax.bbox.width
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.5)
        _press(view, a)
        for k in range(1, 6):  # five moves before the event loop runs again
            _move(view, QPointF(a.x() - 10 * k, a.y()), process=False)
        QApplication.processEvents()
        assert view.drag.frames == frames + 1
        x0 = ax.get_xlim()[0]
        assert x0 == pytest.approx(1000 + 50 / width * 500, abs=1e-6)  # the last move's
        _release(view, QPointF(a.x() - 50, a.y()))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()


def test_a_release_that_overtakes_the_last_move_pans_to_it_first(win, qtbot, capsys):
    """Under a real X server the release can come in the same batch as the last moves, before
    the queued move ran: the limits go where the pointer was released (the move applied while
    the pan tool still pans; applied after it let go, matplotlib's drag_pan raised and the
    move was lost), and the drag ends on its exact frame."""
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    width = ax.bbox.width
    exact = view.drag.exact_frames
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.5)
        _press(view, a)
        _move(view, QPointF(a.x() - 20, a.y()))  # applied
        assert ax.get_xlim()[0] == pytest.approx(1000 + 20 / width * 500, abs=1e-6)
        _move(view, QPointF(a.x() - 50, a.y()), process=False)  # queued ...
        _release(view, QPointF(a.x() - 50, a.y()))  # ... and overtaken
        assert ax.get_xlim()[0] == pytest.approx(1000 + 50 / width * 500, abs=1e-6)
        assert not view.drag.active and view.drag.exact_frames == exact + 1
        _drawn(qtbot, win)
        assert ax.get_xlim()[0] == pytest.approx(1000 + 50 / width * 500, abs=1e-6)
    finally:
        view.toolbar.pan()
    assert "Traceback" not in capsys.readouterr().err


def test_a_drag_that_holds_still_gets_its_exact_frame_and_previews_from_it(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = 30
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.7)
        _press(view, a)
        _move(view, QPointF(a.x() - 60, a.y()))
        exact = view.drag.exact_frames
        qtbot.waitUntil(lambda: view.drag.exact_frames == exact + 1, timeout=10_000)
        _drawn(qtbot, win)
        # The button still held: the page is refreshed and drawn for the limits reached.
        shown = _shown(view)
        held_at = tuple(ax.get_xlim())
        full = _full_draw(view)  # (a draw while dragging: the next base, the same pixels)
        assert np.array_equal(shown, full)
        view.drag.pause_ms = HELD
        frames = view.drag.frames
        _move(view, QPointF(a.x() - 100, a.y()))
        assert view.drag.frames == frames + 1
        assert view.drag.base_xlim == held_at  # moved from the frame drawn at the pause
        _release(view, QPointF(a.x() - 100, a.y()))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    assert np.array_equal(_shown(view), _full_draw(view))


def test_the_right_buttons_drag_zoom_draws_exact_frames(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    frames, redraws = view.drag.frames, win.redraw_count
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.5)
        _press(view, a, Qt.RightButton)
        _move(view, QPointF(a.x() + 60, a.y()), Qt.RightButton)
        qtbot.waitUntil(lambda: win.redraw_count > redraws, timeout=10_000)
        _release(view, QPointF(a.x() + 60, a.y()), Qt.RightButton)
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    x0, x1 = ax.get_xlim()
    assert x1 - x0 < 500  # zoomed in along x
    assert view.drag.frames == frames and not view.drag.active


def test_a_drag_whose_pan_tool_is_switched_off_ends_on_its_exact_frame(win, qtbot):
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    view.toolbar.pan()
    a = _point(view, ax, 0.6)
    _press(view, a)
    _move(view, QPointF(a.x() - 50, a.y()))
    view.toolbar.pan()  # off (its shortcut) with the button still down
    _move(view, QPointF(a.x() - 80, a.y()))
    _release(view, QPointF(a.x() - 80, a.y()))
    _drawn(qtbot, win)
    assert not view.drag.active
    assert np.array_equal(_shown(view), _full_draw(view))
    frames = view.drag.frames
    _move(view, QPointF(a.x(), a.y()), Qt.NoButton)  # a hover again, not a drag
    assert view.drag.frames == frames and view.crosshair.readout is not None


def test_a_drag_begun_during_a_redraw_moves_nothing_until_the_page_is_drawn(win, qtbot):
    """A zoom's redraw runs over turns (resplot/ui/redraw_turns.py), its draw held until it
    ends: the frame shown is of the view before. A drag begun then has no frame to move (the
    soak found a press on a page never drawn: no renderer); it ends on the exact frame."""
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    win.redraw_turns.turn_s = 0.0  # a series a turn: the refresh many turns away
    qtbot.wait(120)  # (a redraw at once, posted)
    ax.set_xlim(1100, 1400)
    view.canvas.draw_idle()
    for _ in range(20):
        QApplication.processEvents()
        if view.canvas.queued.held:
            break
    assert view.canvas.queued.held and view.canvas.draw_due and win.redraw_turns.pending(view.page)
    draws, frames = _draws(view), view.drag.frames
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.6)
        _press(view, a)
        assert draws == [] and view.drag.base_xlim is None
        _move(view, QPointF(a.x() - 40, a.y()))
        assert view.drag.frames == frames  # no preview of the frame before
        _release(view, QPointF(a.x() - 40, a.y()))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    assert draws and ax.get_xlim()[0] > 1100
    shown = _shown(view)
    full = _full_draw(view)
    differ = np.argwhere((shown != full).any(axis=2))
    assert len(differ) == 0, f"{len(differ)} pixels differ, first at {differ[:5].tolist()}"


def test_a_drag_begun_during_a_draw_in_pieces_waits_for_its_frame(win, qtbot):
    """A press while the page is drawn in pieces does not finish that draw in its turn (the
    soak's longest stalls): the draw goes on a piece a turn, the moves meanwhile are kept (a
    new limit would start it again), and the first preview moves the finished frame from
    where the press was."""
    view, ax = _zoomed(qtbot, win, 1000, 1500)
    view.drag.pause_ms = HELD
    canvas = view.canvas
    canvas.queued.turn_s = 0.0  # a piece a turn
    qtbot.wait(120)  # (a redraw at once, posted)
    ax.set_xlim(1100, 1600)
    canvas.draw_idle()
    for _ in range(200):
        QApplication.processEvents()
        if canvas.drawing:
            break
    assert canvas.drawing
    draws, frames, done = _draws(view), view.drag.frames, canvas.queued.done
    view.toolbar.pan()
    try:
        a = _point(view, ax, 0.6)
        _press(view, a)
        assert canvas.drawing and draws == []  # not finished at the press
        _move(view, QPointF(a.x() - 40, a.y()))
        assert canvas.drawing and ax.get_xlim() == (1100, 1600)  # kept for the frame
        qtbot.waitUntil(lambda: view.drag.frames > frames, timeout=30_000)
        assert canvas.queued.done == done + 1 and len(draws) == 1  # that draw, in pieces
        lo, hi = ax.get_xlim()
        assert lo > 1100 and hi - lo == pytest.approx(500)
        assert view.drag.base_xlim == (1100, 1600)  # the finished frame, moved
        _release(view, QPointF(a.x() - 40, a.y()))
        _drawn(qtbot, win)
    finally:
        view.toolbar.pan()
    assert ax.get_xlim() == (lo, hi)
    shown = _shown(view)
    full = _full_draw(view)
    differ = np.argwhere((shown != full).any(axis=2))
    assert len(differ) == 0, f"{len(differ)} pixels differ, first at {differ[:5].tolist()}"
