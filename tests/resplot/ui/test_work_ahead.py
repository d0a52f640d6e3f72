"""A live poll's data work done on the poller's thread (MainWindow.work_ahead): once new points
are in the cache, the live series' views, smoothed curves and cuts into the chart's pixel
columns are worked out there, and the poll's refresh on the GUI thread takes them instead of
doing that work itself. What it takes is what the GUI thread would have worked out; work done
for a view the user has since changed (smoothing, a zoom) is not taken.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, with
test_layers.py's fixtures and helpers; the poller's thread is a real thread doing what its
worker does (the read, then the hook).
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PyQt5.QtWidgets import QApplication

from resplot.data.smoothing import WARMUP_LEFT
from resplot.data.views import series_view
from resplot.draw.tracks import Track
from tests.fixtures.stores import add_points, make_run, new_store
from tests.fixtures.windows import open_window
from tests.resplot.ui.test_layers import (  # noqa: F401 (mixed, mixed_tokens: fixtures)
    N,
    _assert_same_pixels,
    _full_draw_rows,
    _run,
    _shown_rows,
    drawn,
    last_value,
    mixed,
    mixed_tokens,
    show,
    tokens_at,
    write_points,
)

pytestmark = pytest.mark.integration

LIVE = "lr-2e-4"  # mixed's run that streams in (the other two finished)


def _write(win, loaded, steps: np.ndarray) -> None:
    """Points at `steps` for every series of the live run, written to the store: each
    series' last value with a little noise (within the followed y range)."""
    summaries = win.cache.summaries(_run(win, LIVE).ref)
    rng = np.random.default_rng(int(steps[0]))
    series = {}
    for key, summary in summaries.items():
        if key == "train/tokens":  # (mixed_tokens: what the run has seen, counted on)
            series[key] = tokens_at(steps)
            continue
        last = last_value(summary)
        series[key] = [(int(s), last * (1 + 1e-3 * rng.standard_normal())) for s in steps]
    write_points(loaded, {LIVE: series})


def _poll_on_a_thread(win, loaded) -> None:
    """What the poller's worker does with a poll: the read into the cache, then the window's
    hook with the runs that got points, on a thread that is not the GUI's."""
    failed: list[BaseException] = []

    def work() -> None:
        try:
            win.work_ahead(loaded.fetch())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not failed, failed


def _spy(monkeypatch) -> list[tuple[str, int, Track]]:
    """(what, thread ident, track) of each view, curve and cut a track works out."""
    calls: list[tuple[str, int, Track]] = []
    work, cut = Track._work, Track._cut

    def spied_work(self, *args):
        calls.append(("work", threading.get_ident(), self))
        return work(self, *args)

    def spied_cut(view, worked, pixels, xlim, grid, reuse):
        calls.append(("cut", threading.get_ident(), worked[0]))
        return cut(view, worked, pixels, xlim, grid, reuse)

    monkeypatch.setattr(Track, "_work", spied_work)
    monkeypatch.setattr(Track, "_cut", staticmethod(spied_cut))
    return calls


def _live_tracks(win) -> list[Track]:
    ref = _run(win, LIVE).ref
    page = win.current_page()
    return [t for ts in page.tracks for t in ts.values() if t.item.ref == ref and t.view]


def _as_worked_out_now(win, track: Track) -> None:
    """The track's view, x, curve and main line are what the GUI thread works out from the
    cache now, without any memo or work kept."""
    ctx, mode, weight, pixels, fine = track.asked
    ref, key = track.item.ref, track.item.key
    view = series_view(win.cache, ref, key, ctx.lo, ctx.hi, pixels, fine_per_pixel=fine)
    x, x_mid, smoothed, whole = track._work(win.cache, view, ctx, mode, weight)
    assert whole
    np.testing.assert_array_equal(track.view.steps, view.steps)
    np.testing.assert_array_equal(track.view.values, view.values)
    np.testing.assert_array_equal(track.x, x)
    np.testing.assert_array_equal(track.x_mid, x_mid)
    if smoothed is None:
        assert track.smoothed is None
    elif track.view.origin is None:
        np.testing.assert_array_equal(track.smoothed, smoothed)
    else:
        # A slice of the settled series' whole level: its curve smoothed from the series'
        # first point, which a view's warm-up matches to within WARMUP_LEFT of the values.
        spread = np.ptp(view.values[np.isfinite(view.values)])
        np.testing.assert_allclose(track.smoothed, smoothed, rtol=0, atol=WARMUP_LEFT * spread)
        smoothed = track.smoothed
    raw, main = Track._cut(view, (x, x_mid, smoothed), *track._cut_args, None)
    drawn_as = [(track.line, main)]
    if track.raw is not None and track.raw.get_visible():  # the faint raw line
        drawn_as.append((track.raw, raw))
    for line, cut in drawn_as:
        np.testing.assert_array_equal(np.asarray(line.get_xdata(), float), cut.x)
        np.testing.assert_array_equal(np.asarray(line.get_ydata(), float), cut.y)


@pytest.mark.parametrize("axis", ["auto", "tokens"])
def test_a_poll_worked_ahead_leaves_the_gui_thread_no_series_work(request, monkeypatch, axis):
    """On the steps axis, and on the tokens axis (each run's points placed by its tokens
    series: the guide the next refresh reads is worked out ahead too)."""
    win, loaded = request.getfixturevalue("mixed" if axis == "auto" else "mixed_tokens")
    if axis != "auto":
        win.set_x_axis(axis)
        show(win, loaded)
    gui = threading.get_ident()
    for k in range(2):  # the live run's first polls (full draws: its tier laid out)
        _write(win, loaded, np.arange(N + 5 * k, N + 5 * k + 5))
        loaded.fetch()
        win.redraw_now()
        drawn(win)
    tracks = _live_tracks(win)
    assert len(tracks) >= 4  # train/loss, lr, grad_norm, tokens_per_s, ... of the live run
    calls = _spy(monkeypatch)
    _write(win, loaded, np.arange(N + 10, N + 17))
    _poll_on_a_thread(win, loaded)
    ahead = [c for c in calls if c[1] != gui]
    worked = {id(t) for what, _thread, t in ahead if what == "work"}
    assert worked == {id(t) for t in tracks}  # every live series, off the GUI thread
    assert sum(1 for c in ahead if c[0] == "cut") == len(tracks)
    calls.clear()
    view = win.page_view()
    blits = view.layers.blits
    win.redraw_now()
    drawn(win)
    assert view.layers.blits == blits + 1  # the poll drawn over the saved picture
    cut_on_gui = {id(x) for what, _thread, x in calls if what == "cut"}
    for track in tracks:
        assert track.changed and track.view.steps[-1] >= N + 16  # the new points drawn
        assert not any(c[0] == "work" and c[2] is track for c in calls)
        assert id(track.x) not in cut_on_gui
        _as_worked_out_now(win, track)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


@pytest.mark.parametrize("change", ["smoothing", "zoom", "headroom"])
def test_work_done_for_a_view_since_changed_is_not_taken(mixed, monkeypatch, change):
    """The poller's thread works from the view and columns the last refresh drew. The user
    changes the view before the poll's refresh (another smoothing, a zoom): that refresh works
    the series out for the view now. The new points run past the followed x range (its
    headroom): the views worked ahead are taken, their cuts into the old columns are not."""
    win, loaded = mixed
    gui = threading.get_ident()
    start = N
    if change == "headroom":  # points into the next raw tile, which the window then fetches
        start = N + 80
        _write(win, loaded, np.arange(N, start))
        loaded.fetch()
        show(win, loaded)
    calls = _spy(monkeypatch)
    xlim = win.current_page().axes[0].get_xlim()
    _write(win, loaded, np.arange(start, int(xlim[1]) + 2 if change == "headroom" else N + 7))
    _poll_on_a_thread(win, loaded)
    assert any(c[1] != gui for c in calls)
    calls.clear()
    if change == "smoothing":
        win.set_smoothing(0.3)
    elif change == "zoom":
        win.current_page().axes[0].set_xlim(N - 600, N + 10)  # what the toolbar does
        QApplication.processEvents()
    show(win, loaded)  # (a zoom asks for its tiles)
    tracks = _live_tracks(win)
    on_gui = {id(c[2]) for c in calls if c[0] == "work" and c[1] == gui}
    if change == "smoothing":
        smoothed = [t for t in tracks if t.smoothed is not None]
        assert smoothed and all(id(t) in on_gui for t in smoothed)
    elif change == "zoom":
        assert on_gui >= {id(t) for t in tracks}
    else:
        assert win.current_page().axes[0].get_xlim()[1] > xlim[1]  # the range moved on
        assert not on_gui & {id(t) for t in tracks}
        cut_on_gui = {id(c[2]) for c in calls if c[0] == "cut" and c[1] == gui}
        assert {id(t.x) for t in tracks} <= cut_on_gui
    for track in tracks:
        _as_worked_out_now(win, track)


def test_work_ahead_racing_the_gui_thread_leaves_the_series_as_worked_out(mixed):
    """The poller's thread working ahead over and over while the GUI thread polls, redraws
    and zooms: nothing raises on either thread, and each series ends as the GUI thread works
    it out alone (the tracks' memos and cuts are one thread's at a time)."""
    win, loaded = mixed
    refs = {run.ref for run in win.cache.runs()}
    stop, failed = threading.Event(), []

    def race() -> None:
        while not stop.is_set():
            try:
                win.work_ahead(refs)
            except BaseException as exc:
                failed.append(exc)
                return

    thread = threading.Thread(target=race)
    thread.start()
    try:
        page = win.current_page()
        for k in range(6):
            _write(win, loaded, np.arange(N + 10 * k, N + 10 * k + 10))
            loaded.fetch()
            if k == 3:
                page.axes[0].set_xlim(N - 800, N + 80)
            win.redraw_now()
            drawn(win)
    finally:
        stop.set()
        thread.join()
    assert not failed, failed
    show(win, loaded)
    tracks = _live_tracks(win)
    assert tracks and all(np.nanmax(t.x) >= N + 59 for t in tracks)
    for track in tracks:
        _as_worked_out_now(win, track)


def test_the_window_works_a_live_poll_ahead_on_its_pollers_thread(qtbot, tmp_path, monkeypatch):
    """The window as run: its real Poller reads a live run's new points on the source's
    worker thread and works the series out there; the redraw takes that work."""
    path = tmp_path / "reslog.db"
    engine = new_store(path)
    points = {"train/loss": [(s, 3.0 - s / 1000) for s in range(500)]}
    run = make_run(
        engine, name="live", status="running", heartbeat_at=time.time() + 1e6, points=points
    )
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    try:
        ref = win.cache.runs()[0].ref
        gui = threading.get_ident()
        calls = _spy(monkeypatch)
        before = win.redraw_count
        add_points(engine, run.id, {"train/loss": [(s, 2.5 - s / 1000) for s in range(500, 520)]})
        track = next(
            t
            for ts in win.current_page().tracks
            for t in ts.values()
            if t.item.ref == ref and t.item.key == "train/loss"
        )
        qtbot.waitUntil(
            lambda: (
                win.redraw_count > before and track.view is not None and track.view.steps[-1] == 519
            ),
            timeout=30_000,
        )
        works = [c for c in calls if c[0] == "work" and c[2] is track]
        assert works and all(c[1] != gui for c in works)  # on the poller's thread only
        _as_worked_out_now(win, track)
    finally:
        win.close()
        engine.dispose()
