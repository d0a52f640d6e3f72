"""Which tier a series is drawn in (resplot/draw/tiers.py), besides its run's status: a live
run's series whose end lies past the view's right edge is drawn with the settled series (a zoom
into the run's past cuts none of its series into a body and a tail, a poll whose points land
past the edge draws nothing under the live tier, and a point that lands in view draws the page
again), and so is a run crashed long ago (one that comes back moves to the live tier). Each
frame is a full draw's pixels.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, with
test_layers.py's fixtures and helpers (`mixed`: two finished runs and one streaming in).
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from resplot.data.decimate import Decimated
from resplot.draw import tiers
from schema.store.connect import open_store
from tests.resplot.ui.test_layers import (  # noqa: F401 (mixed: a fixture)
    N,
    _assert_same_pixels,
    _feed,
    _full_draw_rows,
    _run,
    _shown_rows,
    counts,
    mixed,
    show,
    write_points,
)

LIVE = "lr-2e-4"


def _zoom(win, loaded, lo: float, hi: float) -> None:
    for ax in win.current_page().chart_axes():
        ax.set_xlim(lo, hi)  # the toolbar's zoom
    show(win, loaded)


def _live_tracks(win) -> list:
    page = win.current_page()
    ref = _run(win, LIVE).ref
    return [
        (i, t)
        for i, ts in enumerate(page.tracks)
        for t in ts.values()
        if t.item.ref == ref and t.view is not None
    ]


@pytest.mark.integration
def test_a_zoom_into_a_live_runs_past_draws_its_series_with_the_settled_ones(mixed, monkeypatch):
    """Zoomed to steps 500-1500 of a run streaming at 3,000: its series are settled (their
    zorders under every live tier's, in the saved picture), none is cut, and polls that bring
    it points past the edge leave them as they are: no full draw, none of them drawn."""
    win, loaded = mixed
    _zoom(win, loaded, 500, 1500)
    page = win.current_page()
    layers = win.page_view().layers
    live = _live_tracks(win)
    assert live and all(t.streaming and not t.live for _i, t in live)
    for i, t in live:
        assert set(t.settled_artists()) <= page.settled_artists(i)
        # over every finished run's series, as in the live tier: the same line on top
        done = [u for u in page.tracks[i].values() if not u.streaming]
        low = [a.get_zorder() for u in done for a in u.settled_artists()]
        assert low and max(low) < min(a.get_zorder() for a in t.settled_artists())
        assert all(a.get_zorder() < tiers.LIVE_FLOOR for a in t.settled_artists())
    assert not layers.tails.cuts  # (the finished runs' series are not cut either)
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    series = {id(a) for _i, t in live for a in t.settled_artists()}
    # The zoom found the run settled (no poll since the fixture wrote it) and sliced its whole
    # level, whose curves start at its first point; from its first poll on it is gathered
    # per poll, its curves warmed up before the view (within WARMUP_LEFT of those): the
    # first poll may change their last bits.
    _feed(win, loaded, LIVE, np.arange(N, N + 5), last=True)
    for k in range(1, 4):
        full = counts(win)[0]
        drawn.clear()
        _feed(win, loaded, LIVE, np.arange(N + 5 * k, N + 5 * k + 5), last=True)
        assert counts(win)[0] == full
        assert not any(t.changed for _i, t in live)
        assert not {id(a) for a in drawn} & series
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))


@pytest.mark.integration
def test_a_live_end_in_view_puts_its_series_back_in_the_live_tier(mixed):
    """Panned so that the live run's end is in view, its series are in the live tier again,
    cut into a body and a tail: a poll draws their tails over the saved picture."""
    win, loaded = mixed
    _zoom(win, loaded, 500, 1500)
    assert not any(t.live for _i, t in _live_tracks(win))
    _zoom(win, loaded, 2000, 3500)
    live = _live_tracks(win)
    assert live and all(t.live for _i, t in live)
    assert win.page_view().layers.tails.cuts
    _feed(win, loaded, LIVE, np.arange(N, N + 5), last=True)  # (its first poll: see above)
    full, blits = counts(win)
    _feed(win, loaded, LIVE, np.arange(N + 5, N + 10), last=True)
    assert counts(win) == (full, blits + 1)
    assert any(t.changed for _i, t in live)
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))


@pytest.mark.integration
def test_a_live_runs_point_landing_in_view_draws_the_page(mixed):
    """A point of the live run that lands inside the view (a late validation, a resumed run
    writing over its past) changes pixels under the live tier: the next draw is a full one,
    and its frame shows the point."""
    win, loaded = mixed
    _zoom(win, loaded, 500, 1500)
    live = dict((t.item.key, t) for _i, t in _live_tracks(win))
    valid = live["valid/loss"]
    before = np.asarray(valid.line.get_xdata(), float).copy()
    assert not np.any(before == 1225.0)
    full = counts(win)[0]
    write_points(loaded, {LIVE: {"valid/loss": [(1225, 9.0)]}})
    loaded.fetch()
    show(win, loaded)
    assert counts(win)[0] == full + 1
    assert not valid.live and np.any(np.asarray(valid.line.get_xdata(), float) == 1225.0)
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))


def test_a_series_ends_past_the_edge_once_its_new_points_cannot_reach_the_view():
    """The first point past the right edge is drawn (the line runs to it): while it is the
    series' newest, a poll moves it, so where the view holds the series' end two must lie
    past (a bucket level: two buckets, its newest fills in over polls). A view that ends
    before the series does is left of every point a poll brings."""
    x = np.arange(10.0)
    assert not tiers.ends_past(x, x, 0, (0.0, 12.0), holds_end=True)  # none past
    assert not tiers.ends_past(x, x, 0, (0.0, 8.5), holds_end=True)  # the newest alone
    assert tiers.ends_past(x, x, 0, (0.0, 7.5), holds_end=True)
    assert tiers.ends_past(x, x, 0, (7.5, 0.0), holds_end=True)  # either order
    assert tiers.ends_past(x[:8], x[:8], 0, (0.0, 7.0), holds_end=False)  # the series goes on
    assert not tiers.ends_past(x, x, 0, None, holds_end=False)  # no range: all of it drawn
    assert not tiers.ends_past(x[:0], x[:0], 0, (0.0, 7.0), holds_end=False)  # nothing drawn
    mid = np.array([1.0, 4.0, 7.0, 9.0])  # a bucket level: three points a bucket
    assert not tiers.ends_past(x, mid, 1, (0.0, 7.5), holds_end=True)  # one bucket past
    assert tiers.ends_past(x, mid, 1, (0.0, 5.5), holds_end=True)
    with_nan = np.array([0.0, 1.0, np.nan, np.nan])
    assert not tiers.ends_past(with_nan, with_nan, 0, (0.0, 0.5), holds_end=True)  # NaN: none


def _cut(**change) -> Decimated:
    fields = {
        "x": np.arange(4.0),
        "y": np.array([1.0, 2.0, np.nan, 3.0]),
        "nan_x": np.array([2.0]),
        "posinf_x": np.empty(0),
        "neginf_x": np.empty(0),
        "col_x": None,
        "col_min": None,
        "col_max": None,
    }
    return Decimated(**(fields | change))


def test_two_cuts_are_the_same_only_byte_for_byte():
    a = _cut()
    assert tiers.same_cut((a, a), (a, a))
    assert tiers.same_cut((a,), (_cut(),))  # equal copies, NaN where NaN was
    assert not tiers.same_cut((a,), (_cut(y=np.array([1.0, 2.0, np.nan, 3.5])),))
    assert not tiers.same_cut((a,), (_cut(x=np.arange(4, dtype=np.float32)),))
    assert not tiers.same_cut((a,), (_cut(x=np.arange(5.0), y=np.ones(5)),))
    assert not tiers.same_cut((a,), (_cut(col_x=np.arange(2.0)),))  # columns now
    assert not tiers.same_cut((a,), (a, a))


def _beat(loaded, name: str, at: float) -> None:
    """The run's heartbeat as its writer would leave it (at `at`), read by the headless poll."""
    engine = open_store(loaded.path)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET heartbeat_at = ? WHERE name = ?", (at, name))
    engine.dispose()
    loaded.fetch()


@pytest.mark.integration
def test_a_run_crashed_long_ago_is_settled_and_one_that_comes_back_is_live(mixed):
    """A run whose heartbeat stopped CRASH_SETTLES_S ago reads as crashed, its series drawn
    with the finished runs' (a sweep's crashed runs are never cut into bodies and tails). Its
    points still show: a poll that brings some draws the page. Its heartbeat back, it is live
    again: one full draw moves it to the live tier, and its next poll draws its tails alone."""
    win, loaded = mixed
    _beat(loaded, LIVE, time.time() - 2 * tiers.CRASH_SETTLES_S)
    show(win, loaded)
    assert _run(win, LIVE).status == "crashed"
    live = _live_tracks(win)
    assert live and not any(t.live or t.streaming for _i, t in live)
    assert not win.page_view().layers.tails.cuts
    full = counts(win)[0]
    _feed(win, loaded, LIVE, np.arange(N, N + 5), last=True)
    assert counts(win)[0] == full + 1  # a settled series changed: its points drawn
    assert np.any(np.asarray(dict(_keyed(live))["train/loss"].line.get_xdata()) >= N)
    _beat(loaded, LIVE, time.time() + 1e6)
    full = counts(win)[0]
    _feed(win, loaded, LIVE, np.arange(N + 5, N + 10), last=True)
    assert _run(win, LIVE).status == "running"
    assert counts(win)[0] == full + 1 and all(t.live for _i, t in live)
    full, blits = counts(win)
    _feed(win, loaded, LIVE, np.arange(N + 10, N + 15), last=True)
    assert counts(win) == (full, blits + 1)
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))


def _keyed(tracks: list) -> list:
    return [(t.item.key, t) for _i, t in tracks]


def _info(status: str, beat_ago: float) -> SimpleNamespace:
    return SimpleNamespace(status=status, heartbeat_at=1_000_000.0 - beat_ago)


def test_a_run_streams_until_it_ends_or_crashed_long_ago():
    now = 1_000_000.0
    assert tiers.streams(None, now)  # not known yet
    for status in ("running", "stalled"):
        assert tiers.streams(_info(status, 1e6), now)  # its process is there
    for status in ("finished", "failed", "killed"):
        assert not tiers.streams(_info(status, 0.0), now)
    assert tiers.streams(_info("crashed", 60.0), now)  # lately: it may come back
    assert not tiers.streams(_info("crashed", tiers.CRASH_SETTLES_S + 1), now)
