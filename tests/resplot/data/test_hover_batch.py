"""The hover reads every series of a chart at once (resplot.data.hover.readings, issue 31: at
100 runs the lookups one series at a time were most of a move): the same readings as the
lookup a series at a time (`readings_each`, `value_at`) on real stores, zoomed out and in,
inside NaN stretches, on ties between two points, with duplicated steps and with runs that
ended before the pointer."""

from __future__ import annotations

import gc
import math
import weakref
from dataclasses import astuple, replace
from types import SimpleNamespace

import numpy as np
import pytest

from resplot.data import hover as hover_mod
from resplot.data.cache import SeriesCache
from resplot.data.hover import readings, readings_each
from resplot.data.logged import value_at, values_at
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources import open_source, parse_spec
from tests.fixtures.stores import make_run, new_store

N = 60_000


def _same(a: list, b: list) -> bool:
    """Readings equal field by field, NaN equal to NaN."""

    def key(r):
        fields = ["nan" if isinstance(v, float) and math.isnan(v) else v for v in astuple(r)[1:]]
        return (*fields, r.item)

    return [key(r) for r in a] == [key(r) for r in b]


@pytest.fixture
def sweep(tmp_path):
    """Four runs: one with a NaN stretch and a NaN tail, one ended at 25,000, one logging two
    points at some steps, one with validation every 1,000 steps (ties halfway between)."""
    path = tmp_path / "sweep.db"
    engine = new_store(path)
    rng = np.random.default_rng(3)
    steps = np.arange(N)
    a = 3.0 + rng.standard_normal(N)
    a[20_000:23_000] = np.nan
    a[55_000:] = np.nan
    make_run(
        engine,
        name="nan",
        points={"train/loss": list(zip(steps.tolist(), a.tolist(), strict=True))},
    )
    short = 2.5 + rng.standard_normal(25_000)
    make_run(engine, name="short", points={"train/loss": list(enumerate(short.tolist()))})
    dup = [(int(s), float(v)) for s, v in zip(steps[::2], 2.0 + rng.random(N // 2), strict=True)]
    dup += [(s, v + 1.0) for s, v in dup[::50]]  # a second point at every 100th step
    make_run(engine, name="dup", points={"train/loss": sorted(dup, key=lambda p: p[0])})
    valid = [(int(s), 2.0 + 0.1 * math.sin(s)) for s in range(0, N, 1_000)]
    make_run(engine, name="valid", points={"valid/loss": valid, "train/loss": valid[:10]})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    refs = [r.ref for r in cache.runs()]
    yield cache, source, refs
    source.close()


def _page(cache, source, refs, smoothing: float):
    state = ViewState(page="custom", smoothing=smoothing, custom_keys=["train/loss", "valid/loss"])
    return render(cache, state, refs, size=(8, 4), fetch=lambda: source.poll(cache))


def _xs() -> list[float]:
    xs = [float(x) for x in np.linspace(-500, N + 500, 37)]
    xs += [500.0, 1_500.0, 20_500.0, 22_999.0, 25_010.0, 40_000.0, 56_000.0, 59_999.0]
    return [*xs, math.inf, -math.inf]


@pytest.mark.slow
@pytest.mark.parametrize("smoothing", [0.0, 0.6])
def test_batched_readings_are_the_ones_read_a_series_at_a_time(sweep, smoothing):
    cache, source, refs = sweep
    page = _page(cache, source, refs, smoothing)
    levels = set()
    for zoom in (None, (10_000, 30_000), (24_000, 26_000)):
        if zoom is not None:
            for tracks in page.tracks:
                for track in tracks.values():
                    ctx = replace(track.ctx, lo=zoom[0], hi=zoom[1])
                    track.prepare(cache, ctx, track.mode, smoothing, 700)
        for _poll in range(3):  # before and after the raw tiles the hover asks for arrive
            for tracks in page.tracks:
                levels |= {t.view.level for t in tracks.values() if t.view is not None}
                for x in _xs():
                    got, want = readings(tracks, x), readings_each(tracks, x)
                    assert got and _same(got, want), (zoom, x, got, want)
            source.poll(cache)
            for tracks in page.tracks:
                for track in tracks.values():
                    track.prepare(cache, track.ctx, track.mode, smoothing, 700)
    assert 0 in levels and len(levels) > 1  # zoomed out (buckets) and in (raw points)


def test_values_at_answers_as_value_at_does(sweep):
    cache, source, refs = sweep
    steps = [-10, 0, 1, 999, 1_000, 1_500, 4_095, 4_096, 4_097, 20_500, 24_999, 25_000, 30_000]
    steps += [54_999, 55_000, 59_999, 70_000]
    # Between a sparse key's points, on both sides of tile edges (a tile is 4,096 steps).
    steps += [1_400, 1_600, 3_999, 4_000, 4_001, 4_500, 8_191, 8_192, 8_600, 12_345, 58_800]
    for _poll in range(3):
        queries = [
            (ref, key, s, None)
            for ref in refs
            for key in ("train/loss", "valid/loss")
            for s in steps
        ]
        got = values_at(cache, queries)
        want = [value_at(cache, *q) for q in queries]
        assert [g if g is None else astuple(g) for g in got] == [
            w if w is None else astuple(w) for w in want
        ] or all(_same_logged(g, w) for g, w in zip(got, want, strict=True))
        source.poll(cache)
    assert any(g is not None and g.exact for g in got)


def test_a_sparse_key_between_its_points_is_read_from_the_cached_tiles(sweep, monkeypatch):
    """Validation every 1,000 steps: most hovered steps fall between two points, often past
    the last one of their tile. Once the tiles are cached that is answered from them, not by
    value_at's copies of the tiles (half of the 100-run hover's moves went that way)."""
    cache, source, refs = sweep
    valid = next(ref for ref in refs if cache.summary(ref, "valid/loss") is not None)
    steps = [1_400, 1_600, 4_000, 4_100, 4_500, 8_600, 12_345, 58_800]
    queries = [(valid, "valid/loss", s, None) for s in steps]
    for _poll in range(2):  # the raw tiles asked for, then cached
        values_at(cache, queries)
        source.poll(cache)
    want = [value_at(cache, *q) for q in queries]
    assert all(w.exact for w in want)
    from resplot.data import logged

    def slow(*_args, **_kwargs):
        raise AssertionError("value_at's path for a cached tile")

    monkeypatch.setattr(logged, "value_at", slow)
    got = values_at(cache, queries)
    assert [astuple(g) for g in got] == [astuple(w) for w in want]
    # 4,500 lies in the tile from 4,096, whose only point is 5,000: the tie goes to 4,000, the
    # previous tile's last point.
    assert got[steps.index(4_500)].step == 4_000


def test_a_sparse_key_hovered_early_in_a_tile_reads_the_nearest_point_a_poll_later(sweep):
    """Validation every 1,000 steps, hovered at 1,400: its tile (1,024-2,047) holds only 2,000;
    the nearer 1,000 is in the tile before, which the hover now asks for. Before, it was read
    only once some other move asked for that tile, and 2,000 showed meanwhile."""
    cache, source, refs = sweep
    valid = next(ref for ref in refs if cache.summary(ref, "valid/loss") is not None)
    query = [(valid, "valid/loss", 1_400, None)]
    for _poll in range(3):
        values_at(cache, query)
        source.poll(cache)
    (got,) = values_at(cache, query)
    assert (got.step, got.exact) == (1_000, True)
    assert value_at(cache, valid, "valid/loss", 1_400).step == 1_000


def _same_logged(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(
        (x == y) or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(astuple(a), astuple(b), strict=True)
    )


def test_the_joined_lookups_are_numpys_on_random_axes():
    """The joined search and interpolation give np.interp's and the one-track bisection's
    answers exactly, on rising axes with duplicates, NaN and single points."""
    rng = np.random.default_rng(11)
    for _trial in range(200):
        arrays = []
        for _t in range(int(rng.integers(1, 6))):
            xs = np.sort(rng.integers(0, 30, int(rng.integers(1, 12))).astype(float))
            if rng.random() < 0.3:
                xs[rng.integers(0, len(xs))] = np.nan
            if rng.random() < 0.15:
                xs = xs[::-1].copy()  # falling: read by argmin, not joined
            arrays.append(xs)
        axes = [hover_mod._Axis(SimpleNamespace(x=xs, view=None, x_mid=None)) for xs in arrays]
        batch = hover_mod._Batch(axes)
        tracks = np.flatnonzero(batch.rising)
        for x in [*rng.uniform(-3, 33, 5), 0.0, 29.0, 14.5, *[a[0] for a in arrays]]:
            if not math.isfinite(x):
                continue
            if len(tracks):
                got = batch.nearest(tracks, float(x)).tolist()
                assert got == [hover_mod._nearest(axes[k], float(x)) for k in tracks]
        finite = [a[np.isfinite(a)] for a in arrays]
        values = [rng.standard_normal(len(a)) for a in finite]
        runs = hover_mod._Runs([np.sort(a) for a in finite], values)
        ks = np.array([k for k, a in enumerate(finite) if len(a)], np.int64)
        if len(ks):
            at = rng.uniform(-3, 33, len(ks))
            at[0] = np.sort(finite[ks[0]])[-1]  # on the last point
            want = [
                np.interp(q, np.sort(finite[k]), values[k]) for k, q in zip(ks, at, strict=True)
            ]
            assert runs.interp(ks, at).tolist() == want


class _Track:
    """A track's axis as the hover reads it, nothing else holding its arrays."""

    def __init__(self, steps: np.ndarray, level: int = 0) -> None:
        self.x, self.x_mid = steps.astype(float), steps.astype(float)
        self.view = _View(steps, level)


class _View:
    def __init__(self, steps: np.ndarray, level: int) -> None:
        self.steps, self.mid_steps, self.level = steps, steps.copy(), level


@pytest.mark.slow
def test_the_kept_axis_outlives_a_redraw_that_brings_the_same_arrays():
    """A page redraw prepares every track again: new arrays, mostly the same content. The
    axis kept for a track stands then (rebuilding 200 was the first move after each redraw),
    refers to the new arrays (the old view is freed), and is built anew when content differs."""
    track = _Track(np.arange(0, 500, 5))
    axis = hover_mod._axis(track)
    old_view = weakref.ref(track.view)
    same = _Track(np.arange(0, 500, 5))
    track.x, track.x_mid, track.view = same.x, same.x_mid, same.view
    del same
    gc.collect()
    assert old_view() is None
    assert hover_mod._axis(track) is axis and axis.fresh(track)
    assert axis.mid_steps is track.view.mid_steps
    assert hover_mod._nearest(axis, 42.0) == 8
    for other in (_Track(np.arange(0, 505, 5)), _Track(np.arange(0, 500, 5), level=-2)):
        track.x, track.x_mid, track.view = other.x, other.x_mid, other.view
        assert hover_mod._axis(track) is not axis
        axis = hover_mod._axis(track)
    moved = _Track(np.arange(0, 500, 5))
    moved.x = moved.x + 1.0  # the same steps drawn elsewhere (another x axis)
    track.x, track.x_mid, track.view = moved.x, moved.x_mid, moved.view
    fresh = hover_mod._axis(track)
    assert fresh is not axis and fresh.finite_x[0] == 1.0


@pytest.mark.slow
def test_a_chart_kept_between_moves_is_read_again_when_a_track_changes(sweep):
    """`readings` keeps each chart's tracks joined between moves (one fancy index a move, not
    a loop over 200 series); a track prepared again (new arrays: another smoothing, a zoom)
    is read from its new arrays, the same readings as a series at a time."""
    cache, source, refs = sweep
    source.poll(cache)
    page = _page(cache, source, refs, 0.6)
    tracks = page.tracks[0]
    x = 40_000.0
    first = readings(tracks, x)
    kept = hover_mod._chart(tracks)
    assert hover_mod._chart(tracks) is kept  # nothing changed: the same joined arrays
    assert _same(first, readings_each(tracks, x))
    assert hover_mod.chart_ends(tracks) == _ends(tracks) and _ends(tracks)
    for smoothing, zoom in ((0.0, None), (0.9, (39_000, 41_000))):
        for track in tracks.values():
            ctx = track.ctx if zoom is None else replace(track.ctx, lo=zoom[0], hi=zoom[1])
            track.prepare(cache, ctx, track.mode, smoothing, 700)
        got = readings(tracks, x)
        assert hover_mod._chart(tracks) is not kept
        kept = hover_mod._chart(tracks)
        assert _same(got, readings_each(tracks, x))
        assert hover_mod.chart_ends(tracks) == _ends(tracks)
        assert not _same(got, first)  # the readings did change (smoothed, or exact points)
    assert len(hover_mod._charts) <= hover_mod.KEEP_CHARTS


def _ends(tracks: dict) -> dict:
    """chart_ends as each track's x_range gives it."""
    return {item: span[1] for item, t in tracks.items() if (span := t.x_range()) is not None}
