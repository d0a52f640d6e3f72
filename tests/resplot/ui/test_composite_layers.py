"""Charts of several series at once in layers (resplot/draw/composites.py): a run's step-time
stack and the GPU throttle bars are kept between refreshes, so a live poll sets the live run's
in place and patches its chart, and the finished runs' stay in the saved picture.

The real MainWindow (offscreen) over a real SQLite store read through a local agent, with
test_layers.py's fixtures and helpers.
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.resplot.ui.test_layers import (  # noqa: F401 (mixed: a fixture)
    N,
    _assert_same_pixels,
    _feed,
    _full_draw_rows,
    _mixed,
    _points,
    _run,
    _shown_rows,
    counts,
    drawn,
    mixed,
    show,
)

pytestmark = pytest.mark.integration


def _throttled_points(i: int) -> dict:
    """_points, and GPU 0's throttle reasons: power cap (0x4) over a stretch of each run, a
    thermal slowdown (0x20) over another."""
    bits = np.zeros(N)
    bits[500 + 100 * i : 900 + 100 * i] = 0x4
    bits[2200 : 2300 + 50 * i] = 0x20
    return {**_points(i), "sys/gpu0/throttle": [(s, float(b)) for s, b in enumerate(bits)]}


@pytest.fixture
def throttled(qtbot, store_path, tmp_path):
    """mixed, its runs logging GPU throttle reasons too (the System page's bars)."""
    yield from _mixed(qtbot, store_path, tmp_path, _throttled_points)


def _live_page(win, loaded, name: str):
    """Page `name` shown after the live run's first poll (its limits fitted to it): the page's
    view, the page and the live run's ref."""
    show(win, loaded, name)
    _feed(win, loaded, "lr-2e-4", np.arange(N, N + 2), last=True)
    show(win, loaded)
    view = win.page_view()
    return view, view.page, _run(win, "lr-2e-4").ref


def test_a_poll_on_the_timing_page_sets_the_live_stack_and_keeps_the_finished_ones(
    mixed, monkeypatch
):
    """The step-time stacks keep their polygons: a poll that brings the live run points sets
    its stack's polygons again in place and patches that chart alone; the finished runs'
    stacks are the same polygons, untouched, in the saved picture, and are not drawn.
    (Before: every stack was made anew at every refresh, so every poll drew the page's whole
    live tier and left the old polygons to the collector.) The kept polygons are the ones a
    stack made afresh for the same state has, and the frame is a full draw's pixels."""
    from matplotlib.figure import Figure

    from resplot.draw.composites import Stack

    win, loaded = mixed
    view, page, live = _live_page(win, loaded, "timing")
    stacked = {page.specs[i].stack_ref: i for i, s in enumerate(page._composites) if s is not None}
    assert len(stacked) == 3 and live in stacked
    polys = {ref: list(page._composites[i].polys) for ref, i in stacked.items()}
    assert all(len(p) == len(polys[live]) == 5 for p in polys.values())
    finished = [a for ref, p in polys.items() if ref != live for a in p]
    assert set(finished) <= set().union(*(page.settled_artists(i) for i in stacked.values()))
    assert not set(polys[live]) & page.settled_artists(stacked[live])
    before = [poly.get_paths()[0].vertices.copy() for poly in polys[live]]
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    full, blits = counts(win)
    patches = view.layers.patches
    _feed(win, loaded, "lr-2e-4", np.arange(N + 2, N + 7), last=True)
    assert counts(win) == (full, blits + 1) and view.layers.patches == patches + 1
    for ref, i in stacked.items():
        assert page._composites[i].polys == polys[ref]  # the same polygons, none made anew
    moved = [poly.get_paths()[0].vertices for poly in polys[live]]
    assert any(a.shape != b.shape or (a != b).any() for a, b in zip(before, moved, strict=True))
    assert not {id(a) for a in drawn} & {id(a) for a in finished}
    # As a stack made afresh for the same state draws them.
    i = stacked[live]
    ax = Figure().add_subplot()
    pixels = page._pixels(i)
    contexts = page._contexts(win.cache, win.state, [live], None, pixels)
    fresh = Stack().refresh(
        ax, page.specs[i], win.cache, contexts, win.state.x_axis, pixels, None, page._fine
    )[0]
    assert len(fresh) == len(polys[live])
    for kept, made in zip(polys[live], fresh, strict=True):
        np.testing.assert_array_equal(kept.get_paths()[0].vertices, made.get_paths()[0].vertices)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_poll_on_the_system_page_sets_the_live_runs_throttle_bars_in_place(
    throttled, monkeypatch
):
    """The throttle bars are kept as the stacks are: a poll that brings the live run throttled
    readings sets its bars again in place (the same collection, new bars) and patches that
    chart; the finished runs' bars are the same collections, in the saved picture, not drawn;
    the bars are those a chart drawn afresh has, in its order; and the frame is a full draw's
    pixels."""
    from matplotlib.figure import Figure

    from resplot.draw.composites import ThrottleBars

    win, loaded = throttled
    view, page, live = _live_page(win, loaded, "system")
    [i] = [i for i, c in enumerate(page._composites) if isinstance(c, ThrottleBars)]
    bars = dict(page._composites[i].bars)
    assert {item.ref for item in bars} == {r.ref for r in win.cache.runs()}
    finished = [b for item, b in bars.items() if item.ref != live]
    [mine] = [b for item, b in bars.items() if item.ref == live]
    assert set(finished) <= page.settled_artists(i) and mine not in page.settled_artists(i)
    before = [seg.copy() for seg in mine.get_segments()]
    drawn: list = []
    real = page.figure.draw_artist
    monkeypatch.setattr(page.figure, "draw_artist", lambda a: drawn.append(a) or real(a))
    full, blits = counts(win)
    patches = view.layers.patches
    power_cap = {"sys/gpu0/throttle": float(0x4)}
    _feed(win, loaded, "lr-2e-4", np.arange(N + 2, N + 7), last=True, values=power_cap)
    assert counts(win) == (full, blits + 1) and view.layers.patches == patches + 1
    assert page._composites[i].bars == bars  # the same collections, none made anew
    after = mine.get_segments()
    assert len(after) == len(before) + 1  # the new stretch under the power cap
    assert not {id(a) for a in drawn} & {id(a) for a in finished}
    # As a chart drawn afresh draws them, in its order.
    ax = Figure().add_subplot()
    pixels = page._pixels(i)
    refs = [r.ref for r in win.cache.runs()]
    contexts = page._contexts(win.cache, win.state, refs, None, pixels)
    fresh = ThrottleBars()
    fresh.refresh(ax, page.specs[i], win.cache, contexts, win.state.x_axis, pixels, None, 0)
    fresh_bars = fresh.bars
    assert list(fresh_bars) == list(bars)
    for item, kept in bars.items():
        made = fresh_bars[item].get_segments()
        assert len(made) == len(kept.get_segments())
        for a, b in zip(kept.get_segments(), made, strict=True):
            np.testing.assert_array_equal(a, b)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))


def test_a_run_crashed_long_ago_keeps_its_stack_and_bars_with_the_finished_ones(throttled):
    """A run whose heartbeat stopped ten minutes ago is settled (resplot/draw/tiers.py): its
    step-time stack and throttle bars go into the saved picture with the finished runs', at
    their zorder; crashed a minute ago, they stay live."""
    from resplot.draw import tiers
    from resplot.draw.composites import BARS_ZORDER, ThrottleBars
    from tests.resplot.ui.test_layers_tier_rules import LIVE, _beat

    win, loaded = throttled
    for ago, settled in ((60.0, False), (2 * tiers.CRASH_SETTLES_S, True)):
        _beat(loaded, LIVE, time.time() - ago)
        show(win, loaded, "timing")
        live = _run(win, LIVE)
        assert live.status == "crashed"
        page = win.current_page()
        [i] = [i for i, s in enumerate(page.specs) if s.stack_ref == live.ref]
        assert bool(page._composites[i].settled_artists()) == settled
        show(win, loaded, "system")
        page = win.current_page()
        [i] = [i for i, c in enumerate(page._composites) if isinstance(c, ThrottleBars)]
        [mine] = [b for item, b in page._composites[i].bars.items() if item.ref == live.ref]
        assert (mine in page.settled_artists(i)) == settled
        assert mine.get_zorder() == tiers.tier_zorder(BARS_ZORDER, not settled)
    _assert_same_pixels(_shown_rows(win.page_view()), _full_draw_rows(win.page_view()))
