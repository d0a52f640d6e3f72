"""A live run's series over a saved picture of the finished runs' (resplot/ui/layers.py): a
poll draws the live tier alone, each of its artists once a chart, and a finished run's series
changing, or a run ending, draws the page.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, with
test_layers.py's fixtures and helpers.
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from PyQt5.QtWidgets import QApplication

from resplot.ui import layers as layers_module
from schema.store.connect import open_store
from tests.resplot.ui.test_layers import (  # noqa: F401 (mixed, mixed_tokens: fixtures)
    TOKENS_PER_STEP,
    N,
    _assert_same_pixels,
    _feed,
    _full_draw_rows,
    _run,
    _shown_rows,
    counts,
    drawn,
    mixed,
    mixed_tokens,
    show,
)

pytestmark = pytest.mark.integration


def test_a_poll_draws_the_live_run_over_a_picture_of_the_finished_ones(mixed, monkeypatch):
    """The finished runs' series are in the saved picture, under the live run's: a poll that
    brings the live run points draws its series alone (and what lies over every series), and
    the frame is a full draw's pixels."""
    win, loaded = mixed
    _feed(win, loaded, "lr-2e-4", np.arange(N, N + 2))  # the live run's first poll
    show(win, loaded)
    view = win.page_view()
    page = view.page
    live = _run(win, "lr-2e-4").ref
    tracks = [t for ts in page.tracks for t in ts.values() if t.view is not None]
    assert {t.item.ref for t in tracks if t.live} == {live}
    settled = [a for t in tracks if not t.live for a in t.settled_artists()]
    for i, ts in enumerate(page.tracks):  # the live run's series lie over the finished ones'
        low = [a.get_zorder() for t in ts.values() if not t.live for a in t.settled_artists()]
        high = [a.get_zorder() for t in ts.values() if t.live for a, _z in t._tiered()]
        if low and high:
            assert max(low) < min(high) <= max(high) < page.axes[i].spines["left"].get_zorder()
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    full, blits = counts(win)
    _feed(win, loaded, "lr-2e-4", np.arange(N + 2, N + 7))
    assert counts(win) == (full, blits + 1)
    assert drawn and not {id(a) for a in drawn} & {id(a) for a in settled}
    assert any(t.changed for t in tracks if t.item.ref == live)
    blitted = _shown_rows(view)
    _assert_same_pixels(blitted, _full_draw_rows(view))


def test_a_poll_draws_each_live_artist_of_a_chart_once(mixed, monkeypatch):
    """A poll changes a live series' tail and its chart legend's latest value: two boxes of
    one chart (here 6 boxes for 3 charts), each drawing every live artist that reaches into
    it, drew an artist reaching into both twice (following one run at 1280x800: 5 draws of
    spines a poll for 4 charts). One box a chart: each artist once, the frame a full draw's
    pixels."""
    win, loaded = mixed
    _feed(win, loaded, "lr-2e-4", np.arange(N, N + 2))
    show(win, loaded)
    view = win.page_view()
    page = view.page
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    boxes: list = []
    real_box = layers_module.redraw_box
    monkeypatch.setattr(
        layers_module, "redraw_box", lambda *a, **k: boxes.append(a[2]) or real_box(*a, **k)
    )
    keys = win.cache.summaries(_run(win, "lr-2e-4").ref)
    for k, steps in enumerate([np.arange(N + 2, N + 7), np.arange(N + 7, N + 12)]):
        drawn.clear()
        boxes.clear()
        full, blits = counts(win)
        _feed(win, loaded, "lr-2e-4", steps, values={key: 2.5 + 0.01 * (k + 1) for key in keys})
        assert counts(win) == (full, blits + 1)
        legends = [a for a in drawn if a in {ax.get_legend() for ax in page.axes}]
        assert legends  # a new latest value drawn
        times = Counter(id(a) for a in drawn)
        assert max(times.values()) == 1, [a for a in drawn if times[id(a)] > 1]
        # (the tail's box and the legend's of a chart were two: 6 boxes for 3 charts)
        assert 0 < len(boxes) <= len(page.axes)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_finished_runs_series_changing_or_a_run_ending_draws_the_page(mixed, monkeypatch):
    """A settled series that changes (a finished run's late points) is not in the saved
    picture any more: the next draw is a full one; so is a run moving between the tiers (it
    ended), after which its series are in the picture and a redraw draws none of them."""
    win, loaded = mixed
    view = win.page_view()
    page = view.page
    full = counts(win)[0]
    _feed(win, loaded, "lr-0e-4", np.arange(N, N + 5))  # a finished run's late flush
    assert counts(win)[0] == full + 1
    show(win, loaded)
    engine = open_store(loaded.path)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE runs SET status = 'finished', ended_at = heartbeat_at WHERE name = 'lr-2e-4'"
        )
    engine.dispose()
    loaded.fetch()
    full = counts(win)[0]
    show(win, loaded)
    assert counts(win)[0] == full + 1
    tracks = [t for ts in page.tracks for t in ts.values() if t.view is not None]
    assert tracks and not any(t.live for t in tracks)
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    full, blits = counts(win)
    win.redraw_now()
    QApplication.processEvents()
    assert counts(win) == (full, blits) and not drawn  # nothing changed: nothing drawn
    view.layers.scribbled()  # (as a drag's preview does): the whole live tier drawn again
    win.redraw_now()
    QApplication.processEvents()
    assert counts(win) == (full, blits + 1)
    series = {id(a) for t in tracks for a, _z in t._tiered()}
    assert drawn and not {id(a) for a in drawn} & series


def test_marking_the_series_again_touches_none_until_they_change(mixed, monkeypatch):
    """Each present() marks every chart's series `animated` (a full draw leaves them out): the
    same artists marked the same way are left alone (a poll marked ~100 a chart each time);
    a new artist, or layers turned off, marks them all again."""
    from matplotlib.artist import Artist

    win, _loaded = mixed
    view = win.page_view()
    layers = view.layers
    layers.mark()
    touched: list[object] = []
    set_animated = Artist.set_animated
    monkeypatch.setattr(
        Artist, "set_animated", lambda self, b: (touched.append(self), set_animated(self, b))[1]
    )
    layers.mark()
    assert touched == []
    (line,) = view.page.axes[0].plot([0, 1], [0, 1])
    layered = layers.mark()
    assert line in layered[0] and line.get_animated()
    assert all(a.get_animated() for artists in layered for a in artists)
    layers.enabled = False
    layered = layers.mark()
    assert not any(a.get_animated() for artists in layered for a in artists)


def test_on_a_guided_x_axis_a_poll_recomputes_and_draws_the_live_run_alone(mixed_tokens):
    """On the tokens axis each run's points are placed by its tokens series (its guide). A
    finished run's guide is the same arrays from poll to poll, so its series are not worked
    out again and the poll draws the live run over the saved picture; its guide worked out
    anew each refresh made every poll redraw every series, in a full draw."""
    win, loaded = mixed_tokens
    win.set_x_axis("tokens")
    show(win, loaded)
    for k in range(2):  # the live run's first polls (its tier laid out)
        _feed(win, loaded, "lr-2e-4", np.arange(N + 2 * k, N + 2 * k + 2), last=True)
    page = win.current_page()
    live = _run(win, "lr-2e-4").ref
    tracks = [t for ts in page.tracks for t in ts.values() if t.view is not None]
    settled = [t for t in tracks if t.item.ref != live]
    assert settled and all(t.x[-1] > TOKENS_PER_STEP * (N - 100) for t in settled)  # by tokens
    kept = {id(t): (t.view, t.x, t.smoothed) for t in settled}
    full, blits = counts(win)
    _feed(win, loaded, "lr-2e-4", np.arange(N + 4, N + 9), last=True)
    assert counts(win) == (full, blits + 1)
    for t in settled:
        assert not t.changed
        assert all(a is b for a, b in zip((t.view, t.x, t.smoothed), kept[id(t)], strict=True))
    assert all(t.changed for t in tracks if t.item.ref == live)
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))
