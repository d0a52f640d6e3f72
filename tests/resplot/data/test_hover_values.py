"""The hover reads the truth: zoomed out to bucket envelopes, the value at the hovered step is
the logged one (its raw tile fetched when not resident), and inside a stretch of NaN it is NaN,
never a finite value from thousands of steps away."""

from __future__ import annotations

import gc
import math
import weakref
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from resplot.data import hover as hover_mod
from resplot.data.cache import SeriesCache
from resplot.data.hover import readings, x_span
from resplot.data.logged import value_at
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources import open_source, parse_spec
from tests.fixtures.stores import make_run, new_store

N = 100_000
NAN_FROM, NAN_TO = 40_000, 46_000


@pytest.fixture
def zoomed_out(tmp_path):
    path = tmp_path / "r.db"
    engine = new_store(path)
    rng = np.random.default_rng(5)
    loss = 3.0 + rng.standard_normal(N)
    loss[NAN_FROM:NAN_TO] = np.nan
    make_run(engine, name="r", points={"train/loss": list(enumerate(loss.tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    refs = [r.ref for r in cache.runs()]
    state = ViewState(page="custom", smoothing=0.0, custom_keys=["train/loss"])
    page = render(cache, state, refs, size=(8, 4), fetch=lambda: source.poll(cache))
    tracks = page.tracks[0]
    track = next(iter(tracks.values()))
    assert track.view.level >= 1  # buckets: 100,000 steps on ~700 pixels
    yield cache, source, tracks, track, loss
    source.close()


def test_inside_a_nan_stretch_the_hover_says_nan_at_once(zoomed_out):
    _cache, _source, tracks, _track, _loss = zoomed_out
    for step in (NAN_FROM + 500, (NAN_FROM + NAN_TO) // 2, NAN_TO - 600):
        (reading,) = readings(tracks, float(step))
        assert math.isnan(reading.raw) and not reading.envelope
        assert abs(reading.step - step) < 2


@pytest.mark.slow
def test_the_hovered_value_is_the_logged_one_once_its_tile_arrives(zoomed_out):
    cache, source, tracks, _track, loss = zoomed_out
    step = 71_234
    (first,) = readings(tracks, float(step))
    assert first.envelope  # not resident yet: the nearest bucket extreme, said as such
    assert cache.wanted_count() == 1  # its raw tile is asked for
    source.poll(cache)
    (reading,) = readings(tracks, float(step))
    assert not reading.envelope and reading.step == step and reading.raw == loss[step]


def test_value_at_takes_the_nearest_logged_point_across_tiles(tmp_path):
    path = tmp_path / "sparse.db"
    engine = new_store(path)
    make_run(engine, name="v", points={"valid/loss": [(0, 3.0), (3_000, 2.0), (6_100, np.nan)]})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        ref = cache.runs()[0].ref
        assert value_at(cache, ref, "valid/loss", 2_900).pending
        source.poll(cache)
        got = value_at(cache, ref, "valid/loss", 2_900)
        assert (got.step, got.value, got.exact) == (3_000, 2.0, True)
        for step in (4_700, 6_000):
            value_at(cache, ref, "valid/loss", step)
            source.poll(cache)
        got = value_at(cache, ref, "valid/loss", 6_000)
        assert got.step == 6_100 and math.isnan(got.value) and got.exact
    finally:
        source.close()


def test_inside_a_nan_tail_the_hover_says_nan_where_the_pointer_is(tmp_path):
    """A run gone NaN to its end (the sweep's NaN run): zoomed out, its NaN buckets draw no
    point, and the hovered step was read off the drawn points, clamped to the last finite one:
    `2.556 @14,999` at step 17,000. It says NaN at the hovered step, as zoomed in, and the
    run has not ended there (its NaN points were logged)."""
    path = tmp_path / "tail.db"
    engine = new_store(path)
    rng = np.random.default_rng(7)
    loss = 3.0 + rng.standard_normal(N)
    loss[75_000:] = np.nan
    make_run(engine, name="r", points={"train/loss": list(enumerate(loss.tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="custom", smoothing=0.6, custom_keys=["train/loss"])
        page = render(cache, state, refs, size=(8, 4), fetch=lambda: source.poll(cache))
        tracks = page.tracks[0]
        track = next(iter(tracks.values()))
        assert track.view.level != 0
        for step in (76_000, 88_000, 99_000):
            for _poll in range(2):  # before and after its raw tile arrives
                (reading,) = readings(tracks, float(step))
                assert math.isnan(reading.raw) and math.isnan(reading.smoothed), step
                assert abs(reading.step - step) < 2 and abs(reading.x - step) < 2
                source.poll(cache)
        assert track.x_range()[1] >= N - 1_000  # its end for the readout: not "ended" at 75,000
    finally:
        source.close()


def test_a_track_prepared_again_is_read_from_its_new_view(zoomed_out):
    """The hover keeps each track's sorted axis between moves; a track prepared again (a zoom,
    new data) is read from its new arrays, never the ones kept."""
    cache, source, tracks, track, loss = zoomed_out
    (wide,) = readings(tracks, 20_000.0)
    assert x_span(track) == track.x_range() and x_span(track)[1] > 90_000
    # Zoomed in to steps 10,000-12,000: a finer view, new arrays.
    track.prepare(cache, replace(track.ctx, lo=10_000, hi=12_000), track.mode, 0.0, 700)
    source.poll(cache)
    track.prepare(cache, replace(track.ctx, lo=10_000, hi=12_000), track.mode, 0.0, 700)
    assert track.view.level == 0
    lo, hi = x_span(track)
    assert (lo, hi) == track.x_range() and lo >= 9_000 and hi <= 13_000
    (reading,) = readings(tracks, 11_111.0)
    assert reading.step == 11_111 and reading.raw == loss[11_111] and not reading.envelope
    assert reading.x == 11_111.0 and wide.step != reading.step


def test_the_nearest_point_is_argmins_on_ties_duplicates_and_nan():
    """The hover finds the nearest x by bisection on a rising axis: the same index as the
    argmin over every finite x it replaced (the left one on a tie, the first of equals)."""
    rng = np.random.default_rng(1)
    for trial in range(600):
        xs = np.sort(rng.integers(0, 20, int(rng.integers(1, 30))).astype(float))
        if trial % 3 == 0:
            xs[rng.integers(0, len(xs), 2)] = np.nan
        if trial % 7 == 0:
            xs = xs[::-1].copy()  # falling: argmin itself
        track = SimpleNamespace(x=xs, view=None, x_mid=None)
        axis = hover_mod._Axis(track)
        ok = np.flatnonzero(np.isfinite(xs))
        for x in [*rng.uniform(-3, 23, 6), *xs[:3], 5.5, 19.5, math.inf, -math.inf]:
            want = None if len(ok) == 0 else int(ok[np.argmin(np.abs(xs[ok] - x))])
            assert hover_mod._nearest(axis, float(x)) == want, (xs, x)


class _Track:
    """A track's axis as the hover reads it (x, view, x_mid), nothing else holding them."""

    def __init__(self, n: int) -> None:
        steps = np.arange(n)
        self.x, self.x_mid = steps.astype(float), steps.astype(float)
        self.view = _View(steps)


class _View:
    def __init__(self, steps: np.ndarray) -> None:
        self.steps = self.mid_steps = steps
        self.level = 0


def test_the_kept_axis_holds_no_old_view_alive():
    """A track prepared again frees its old view and x even when it is not hovered again,
    and is read afresh when it is."""
    track = _Track(50)
    assert hover_mod._axis(track).finite_x[-1] == 49
    old_view, old_x = weakref.ref(track.view), weakref.ref(track.x)
    fresh = _Track(80)
    track.x, track.x_mid, track.view = fresh.x, fresh.x_mid, fresh.view
    del fresh
    gc.collect()
    assert old_view() is None and old_x() is None
    assert hover_mod._axis(track).finite_x[-1] == 79
