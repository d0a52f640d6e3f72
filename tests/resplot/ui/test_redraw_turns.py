"""A redraw's series worked out over turns of the event loop before the page's refresh
(resplot/ui/redraw_turns.py): no turn shows a page half refreshed, no draw starts before the
refresh, and the frame it ends with is a whole draw's pixels.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, as in
test_layers.py (its fixtures and helpers); `redraw_turns.turn_s = 0` makes each series a turn.
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import time

import pytest
from PyQt5.QtWidgets import QApplication

from resplot.ui import pieces
from tests.resplot.ui.test_layers import (  # noqa: F401 (loaded, window: the fixtures)
    N,
    _assert_same_pixels,
    _full_draw_rows,
    _shown_rows,
    fetch,
    loaded,
    show,
    window,
)

pytestmark = pytest.mark.integration


def _views(page) -> list:
    return [t.view for tracks in page.tracks for t in tracks.values()]


def test_a_zoom_is_worked_out_over_turns_then_refreshed_and_drawn(window, loaded, monkeypatch):
    show(window, loaded, "training")
    view = window.page_view()
    page = view.page
    window.redraw_turns.turn_s = 0.0
    before = _views(page)
    assert all(v is not None for v in before)
    begun = []  # at each draw in pieces begun: whether the page was refreshed then
    start = pieces.PiecewiseDraw.__init__

    def starting(self, canvas) -> None:
        begun.append(all(a is not b for a, b in zip(_views(page), before, strict=True)))
        start(self, canvas)

    monkeypatch.setattr(pieces.PiecewiseDraw, "__init__", starting)
    turns_before = window.redraw_turns.turns
    ax = page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo + 0.4 * (hi - lo), lo + 0.6 * (hi - lo))  # the toolbar's zoom
    view.canvas.draw_idle()
    shown = []  # at each turn: how many series show a view made after the zoom
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.001)  # (the redraw timer's 50 ms after the last redraw)
        now = _views(page)
        shown.append(sum(a is not b for a, b in zip(now, before, strict=True)))
        busy = window._redraw_timer.isActive() or window._view_redraw_posted
        if not busy and not view.canvas.draw_due:
            break
    assert time.monotonic() < deadline, "the zoom's redraw did not end"
    series = len(before)
    assert window.redraw_turns.turns - turns_before >= series - 1  # a series a turn (turn_s 0)
    assert set(shown) == {0, series}, shown  # never some series refreshed and not the rest
    assert shown.index(series) >= series - 1  # ... and the refresh after the warm-up
    assert begun == [True]  # one draw, begun with the page refreshed
    assert not window.redraw_turns.pending(page)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_redraw_asked_for_directly_refreshes_at_once(window, loaded):
    """redraw_now() (tests, exports, the tile wait) refreshes in the same call, and drops a
    warm-up under way: the page it was for is refreshed."""
    show(window, loaded, "training")
    view = window.page_view()
    page = view.page
    window.redraw_turns.turn_s = 0.0
    before = _views(page)
    ax = page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, lo + 0.5 * (hi - lo))
    window._redraw_due()  # a turn of the warm-up: one series
    assert window.redraw_turns.pending(page) and window._redraw_timer.isActive()
    assert _views(page) == before
    window.redraw_now()
    assert not window.redraw_turns.pending(page) and not window._redraw_timer.isActive()
    assert all(a is not b for a, b in zip(_views(page), before, strict=True))


def _run_events(window, until, what: str) -> None:
    deadline = time.monotonic() + 30
    while not until():
        assert time.monotonic() < deadline, what
        QApplication.processEvents()
        time.sleep(0.001)


def test_data_that_come_during_a_redraw_are_drawn_by_one_more(window, loaded):
    """A poll's points that arrive while a redraw runs over turns: the charts it refreshed
    before them are refreshed again, by one more redraw after it."""
    show(window, loaded, "training")
    view = window.page_view()
    page = view.page
    window.redraw_turns.turn_s = 0.0
    redraws = window.redraw_count
    window.schedule_redraw()
    _run_events(window, lambda: window.redraw_turns.busy, "no redraw began")
    fetch(window, loaded, [N + 5, N + 6])  # (the poller's thread would, between turns)
    window.on_data_arrived()
    assert window.redraw_turns.again

    def done() -> bool:
        busy = window._redraw_timer.isActive() or window.redraw_turns.busy
        return not busy and not view.canvas.draw_due

    _run_events(window, done, "the redraws did not end")
    assert window.redraw_count == redraws + 2
    lasts = {int(t.view.steps[-1]) for ts in page.tracks for t in ts.values() if t.view}
    assert lasts == {N + 6}


def test_a_page_built_anew_is_built_a_chart_a_turn_and_drawn_once_built(window, loaded):
    """A page laid out anew (first shown, or given back) makes its charts and their series'
    views a chart a turn: at each turn the page holds the charts made so far beside their
    specs, nothing is drawn until it is built and refreshed, and then it is the pixels of a
    whole draw."""
    show(window, loaded, "all")
    view = window.page_view()
    page = view.page
    charts = len(page.axes)
    page.release()
    window.redraw_turns.turn_s = 0.0
    draws = []
    view.canvas.mpl_connect("draw_event", lambda _e: draws.append(len(page.axes)))
    turns = window.redraw_turns.turns
    pairs = []  # at each turn: (charts made, specs beside them)
    window.schedule_redraw()

    def done() -> bool:
        pairs.append((len(page.axes), len(page.specs)))
        busy = window._redraw_timer.isActive() or window.redraw_turns.busy
        return not busy and not view.canvas.draw_due and not window.cache.wanted_count()

    _run_events(window, done, "the page was not built")
    assert all(a == s for a, s in pairs), pairs
    made = sorted({a for a, _s in pairs})
    assert len(made) >= charts // 2 and made[-1] == charts  # (a chart a turn, turns coalesce)
    assert window.redraw_turns.turns - turns >= charts
    assert draws and set(draws) == {charts}  # no draw of a page half built
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_poll_of_the_view_drawn_whole_warms_no_series_and_a_zoom_does(
    window, loaded, monkeypatch
):
    """A poll in the view the last refresh drew whole brings live series' ends only: the
    refresh's own work, no series walked ahead of it (ChartPage.warm); a zoom warms them."""
    from resplot.draw.tracks import Track

    show(window, loaded, "training")
    view = window.page_view()
    page = view.page
    warmed = []
    warm = Track.warm
    monkeypatch.setattr(Track, "warm", lambda t, *a, **k: warmed.append(t) or warm(t, *a, **k))

    def redrawn() -> None:
        def done() -> bool:
            busy = window._redraw_timer.isActive() or window.redraw_turns.busy
            return not busy and not view.canvas.draw_due

        _run_events(window, done, "the redraw did not end")

    fetch(window, loaded, [N + 5])
    window.schedule_redraw()
    redrawn()
    assert not warmed
    assert {int(t.view.steps[-1]) for ts in page.tracks for t in ts.values()} == {N + 5}
    ax = page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    time.sleep(0.06)  # (a redraw at once, posted)
    ax.set_xlim(lo, lo + 0.5 * (hi - lo))
    redrawn()
    assert len(warmed) == sum(len(ts) for ts in page.tracks)


def test_a_stand_in_due_during_a_redraw_leaves_the_page_to_its_end(window, loaded):
    """The tile wait's stand-in timer (a coarser level drawn while finer tiles load) fires
    during a redraw over turns: the page's charts are half refreshed, so nothing is drawn or
    blitted then; the redraw's end presents the page."""
    show(window, loaded, "training")
    view = window.page_view()
    layers = view.layers
    window.redraw_turns.turn_s = 0.0
    ax = view.page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    time.sleep(0.06)  # (a redraw at once, posted)
    ax.set_xlim(lo, lo + 0.5 * (hi - lo))
    _run_events(window, lambda: window.redraw_turns.busy, "no redraw began")
    drawn = (layers.full_draws, layers.blits)
    window.tile_wait._stand_in()
    assert (layers.full_draws, layers.blits) == drawn
    window.redraw_turns.forget()
    window.tile_wait._stand_in()  # no redraw under way: the page is presented
    assert (layers.full_draws, layers.blits) != drawn or view.canvas.draw_due
