"""A page's full draw in pieces between turns of the event loop (resplot/ui/pieces.py): the
window shows the last whole frame meanwhile, the frame it ends with is a whole draw's pixels,
a change to the page between pieces starts the draw again, and a poll between them is drawn
with it.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, as in
test_layers.py (its fixtures and helpers); `queued.turn_s = 0` makes each piece a turn of its own.
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import time

import numpy as np
import pytest
from PyQt5.QtGui import QImage
from PyQt5.QtWidgets import QApplication

from tests.resplot.ui.test_layers import (  # noqa: F401 (loaded, window, mixed: the fixtures)
    DRAW_WAIT_S,
    N,
    _assert_same_pixels,
    _feed,
    _full_draw_rows,
    _shown_rows,
    drawn,
    loaded,
    mixed,
    poll,
    show,
    window,
)

pytestmark = pytest.mark.integration


def _turns(view) -> int:
    """Run the event loop a turn at a time until the page's draw is done; how many turns.
    Bounded by time, not turns: a draw the window holds for its redraw (one due within
    REDRAW_DELAY_MS of the last: `hold_pieces`) waits for that timer, and 2,000 idle turns
    passed in less (CI found a resize right after a redraw so)."""
    turns, deadline = 0, time.monotonic() + DRAW_WAIT_S
    while time.monotonic() < deadline:
        turns += 1
        QApplication.processEvents()
        if not view.canvas.draw_due:
            return turns
    raise AssertionError("the page's draw did not end")


def _painted_rows(view) -> np.ndarray:
    """What a paint of the canvas shows now, the rows in view (RGBA, as the buffer's)."""
    image = view.canvas.grab().toImage().convertToFormat(QImage.Format_RGBA8888)
    ptr = image.constBits()
    ptr.setsize(image.sizeInBytes())
    rgba = np.frombuffer(ptr, np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    rgba = rgba[:, : image.width()].copy()  # the image's memory goes with it
    rows = view.layers.view_rows()
    return rgba if rows is None else rgba[int(rows[0]) : int(rows[1])]


def _into_live_pieces(view) -> None:
    """Run the event loop until the draw under way has drawn the first charts' live tier."""
    for _ in range(1000):
        QApplication.processEvents()
        if view.layers.reaches or not view.canvas.drawing:
            break
    assert view.canvas.drawing and view.layers.reaches


def _whole_draw_begun(window, loaded):
    """The Training page with no picture held, its whole draw queued a piece a turn."""
    show(window, loaded, "training")
    view = window.page_view()
    view.canvas.queued.turn_s = 0.0
    view.layers.release()  # no picture held: the next present draws the whole page
    window.redraw_now()
    return view


def _zoom(win, view, share: float) -> None:
    """The toolbar's zoom: x limits set on every chart, then the window's refresh."""
    ax = view.page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo + share * (hi - lo), lo + (share + 0.3) * (hi - lo))
    win.redraw_now()


def test_a_page_is_drawn_in_pieces_to_the_pixels_of_a_whole_draw(window, loaded):
    show(window, loaded, "all")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0  # a piece a turn
    before = _shown_rows(view)
    pieced, full, restarts = canvas.queued.done, view.layers.full_draws, canvas.queued.restarts
    _zoom(window, view, 0.2)
    QApplication.processEvents()  # the first piece
    assert canvas.drawing and canvas.draw_due
    # Meanwhile the window shows the last whole frame, not the cleared, half-drawn buffer.
    assert not np.array_equal(_shown_rows(view), before)
    _assert_same_pixels(_painted_rows(view), before)
    assert not view.layers.present()  # a poll's blit waits for the draw
    turns = _turns(view) + 1
    charts = len(view.layers.drawn)
    assert turns > 2 * charts  # each chart's axes, its series and its live tier: a turn each
    assert (canvas.queued.done, view.layers.full_draws) == (pieced + 1, full + 1)
    assert not canvas.drawing and canvas.queued.restarts == restarts
    shown = _shown_rows(view)
    _assert_same_pixels(_painted_rows(view), shown)
    _assert_same_pixels(shown, _full_draw_rows(view))


def test_a_zoom_between_pieces_starts_the_draw_again(window, loaded):
    show(window, loaded, "all")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    restarts = canvas.queued.restarts
    _zoom(window, view, 0.1)
    for _ in range(3):
        QApplication.processEvents()
    assert canvas.drawing
    _zoom(window, view, 0.5)  # the figure is stale: what was drawn is not the page's
    _turns(view)
    assert canvas.queued.restarts == restarts + 1 and canvas.queued.done
    limits = view.page.chart_axes()[0].get_xlim()
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))
    assert view.page.chart_axes()[0].get_xlim() == limits


def test_a_poll_between_pieces_is_in_the_frame_it_ends_with(window, loaded):
    """A poll that adds points inside the followed limits changes only the live tier: the
    draw goes on, and the blit the poll would have made follows it (the first charts' live
    series were drawn before the poll)."""
    show(window, loaded, "training")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    view.layers.release()  # no picture held: the next present draws the whole page
    restarts = canvas.queued.restarts
    window.redraw_now()
    _into_live_pieces(view)
    blits = view.layers.blits
    poll(window, loaded, np.arange(N, N + 3))  # drawn(): to the end of the draw
    assert canvas.queued.restarts == restarts and not canvas.drawing
    assert view.layers.blits == blits + 1  # the put-off poll, drawn over the new frame
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_finished_runs_series_changing_between_pieces_starts_the_draw_again(mixed):
    """The settled series (finished runs') are drawn into the saved picture a chart at a
    time; one changed after it was drawn is caught at the draw's end."""
    win, loaded = mixed
    view = win.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    view.layers.release()
    restarts = canvas.queued.restarts
    win.redraw_now()
    charts = len(view.layers.in_view())
    for _ in range(charts + 2):  # the axes, and the first charts' settled series
        QApplication.processEvents()
    assert canvas.drawing
    _feed(win, loaded, "lr-0e-4", np.arange(N, N + 5))  # a finished run's late flush
    assert canvas.queued.restarts > restarts and not canvas.drawing
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_drag_begins_over_a_whole_frame(window, loaded):
    """A drag's preview moves the canvas's pixels: a drag begun during a draw in pieces takes
    no frame (the buffer is half drawn) and does not finish the draw in its turn; the draw's
    end is its frame."""
    show(window, loaded, "training")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    _zoom(window, view, 0.2)
    QApplication.processEvents()
    assert canvas.drawing
    full = view.layers.full_draws
    view.drag.active = True  # as press_pan does before begin()
    try:
        view.drag.begin()
        assert canvas.drawing and view.layers.full_draws == full
        assert view.drag.base_xlim is None
        _turns(view)
        assert not canvas.drawing and view.layers.full_draws == full + 1
        assert view.drag.base_xlim == view.page.chart_axes()[0].get_xlim()
    finally:
        view.drag.active = False
    drawn(window)


def test_an_artist_removed_between_pieces_is_not_drawn(window, loaded):
    """A chart's refresh between pieces may remove a series' artist without marking the
    figure stale (quietly: a live artist; the soak found one drawn without its figure): the
    draw leaves it out and ends with the frame a whole draw makes."""
    from matplotlib.lines import Line2D

    from resplot.draw.limits import quietly

    view = _whole_draw_begun(window, loaded)
    canvas = view.canvas
    QApplication.processEvents()
    assert canvas.drawing
    ax = view.page.axes[0]
    gone = next(  # a run's series (cut into a body and a tail: resplot/ui/tails.py)
        a for a in view.page.layer_artists(0) if isinstance(a, Line2D) and a.get_label()[0] != "_"
    )
    with quietly(ax):
        gone.remove()
    assert not view.page.figure.stale
    full = view.layers.full_draws
    _turns(view)
    assert view.layers.full_draws == full + 1 and gone not in view.layers.reaches
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_cut_series_changed_between_pieces_is_drawn_as_it_is_now(window, loaded):
    """A refresh between pieces may change a live series cut earlier in the draw so that it
    has no tail there any more (the soak found a tail set from no columns: a TypeError that
    gave the draw up): it is drawn whole, and the present the refresh asked for, put off to
    the draw's end, leaves a whole draw's frame."""
    from resplot.draw.limits import quietly

    view = _whole_draw_begun(window, loaded)
    canvas, layers = view.canvas, view.layers
    _into_live_pieces(view)  # every chart's series cut, the first chart's live tier drawn
    page = view.page
    cut = [
        a
        for i in range(len(page.axes))
        for a in page.layer_artists(i)
        if id(a) in layers.tails.cuts and a not in layers.reaches
    ]
    assert cut  # a chart whose live tier is still to draw
    artist = cut[0]
    xy = artist.get_xydata()
    with quietly(artist.axes):
        artist.set_data(xy[-2:, 0], xy[-2:, 1])  # two points: nothing to cut
    view.present()  # what the refresh asks for: put off while the draw is under way
    full = layers.full_draws
    _turns(view)
    assert layers.full_draws == full + 1 and not canvas.drawing
    assert artist in layers.reaches
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_resize_shows_the_last_frame_until_its_draw_is_done(window, loaded):
    """A resize's paint comes before the draw's first piece: it shows the frame the canvas
    held (where the new size overlaps it), not a blank renderer of the new size."""
    show(window, loaded, "training")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    before = _painted_rows(view)
    window.resize(1200, 760)
    QApplication.processEvents()  # the layout's resize, its paint, the first piece
    assert canvas.draw_due and canvas.get_width_height() != (before.shape[1], before.shape[0])
    painted = _painted_rows(view)
    rows, cols = min(len(painted), len(before)), min(painted.shape[1], before.shape[1])
    _assert_same_pixels(painted[:rows, :cols], before[:rows, :cols])
    _turns(view)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_draw_given_up_holds_none_of_the_pages_artists(window, loaded):
    """A page given back in the middle of a draw in pieces frees its charts' artists: what the
    draw read of the page is let go with it (CI once found 508 artists of a given-back page
    alive)."""
    import gc
    import weakref

    view = _whole_draw_begun(window, loaded)
    _into_live_pieces(view)
    line = weakref.ref(next(iter(view.page.tracks[0].values())).line)
    assert view.release.release()
    gc.collect()
    assert line() is None and not view.canvas.drawing


def test_a_resize_right_after_a_redraw_is_drawn_after_the_redraw_it_waits_for(window, loaded):
    """Within REDRAW_DELAY_MS of the last redraw a resize's redraw waits for the window's
    timer, and the page's draw waits for that refresh (`hold_pieces`: a draw now would be
    drawn again after): held, then done once the timer has run, at the new size. (The
    event loop turns idle meanwhile: a wait of 2,000 turns ended before the timer, in CI.)"""
    show(window, loaded, "training")
    view = window.page_view()
    canvas = view.canvas
    canvas.queued.turn_s = 0.0
    redraws = window.redraw_count
    window.redraw_now()
    window.resize(1200, 760)
    QApplication.processEvents()
    assert canvas.draw_due and canvas.queued.held  # the draw waits for the redraw
    _turns(view)
    assert window.redraw_count >= redraws + 2  # the resize's own redraw ran
    assert canvas.get_width_height() == (canvas.width(), canvas.height())
    assert not canvas.queued.held and canvas.queued.pieces is None
