"""A settled series' whole level kept once (resplot/data/whole_level.py): a view of any range
at that level is a slice of it, the same arrays a view gathered from the tiles gives (the
neighbouring points past the edges as far as that looks, EDGE_TILES), and its smoothed curve
is the whole's, close to the warmed-up curve of a gathered view; a zoom then reads no tile.
A live series (its tiles changed since the last ask) and a level over WHOLE_ROWS are gathered
from the tiles as before.

A real SQLite store read through a local agent (resplot.sources.polling.Loaded).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from resplot.data import view_columns, whole_level
from resplot.data.pages import Item
from resplot.data.views import ViewMemo, series_view
from resplot.draw.track_inputs import smoothed_curve
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from schema.store.connect import open_store
from tests.fixtures.stores import add_points, make_run, new_store
from tests.resplot.data.test_view_edges import PIXELS, _settled

N = 60_000


def _loss(steps, seed: int = 0) -> list:
    noise = np.random.default_rng(seed).normal(0, 0.05, len(steps))
    return [(int(s), 2 + np.exp(-s / 9_000) + float(e)) for s, e in zip(steps, noise, strict=True)]


def _spike(step: int) -> float:
    if 20_000 <= step < 21_000:
        return float("nan")
    return {30_000: float("inf"), 30_250: float("-inf")}.get(step, 1.0 + (step % 13) / 13)


@pytest.fixture
def source(store_path):
    engine = new_store(store_path)
    run = make_run(
        engine,
        name="sweep",
        points={
            "loss": _loss(range(N)),  # level 1: 469 buckets
            "valid/loss": [(s, 3.0 - s / 1e5) for s in range(0, N + 1, 250)],  # raw: 241 points
            # Neighbours 20 raw tiles apart: past EDGE_TILES of a view between them.
            "rare": [(s, float(s % 7)) for s in range(0, 200_001, 20_480)],
            # A NaN stretch, +inf and -inf: the buckets' flags and means, the points' masks.
            "spiky": [(s, _spike(s)) for s in range(N)],
            "spiky_valid": [(s, _spike(s)) for s in range(0, N + 1, 250)],
        },
    )
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as loaded:
        yield loaded, store_path, run.id


def _kept_whole(loaded, key, level) -> ViewMemo:
    """A memo holding the series' whole level: the whole range asked until its tiles are in,
    then another range (a zoom)."""
    memo = ViewMemo()
    _settled(loaded, key, -np.inf, np.inf, level, memo)
    series_view(loaded.cache, loaded.cache.runs()[0].ref, key, 10, 20, PIXELS, level, memo=memo)
    assert memo.whole is not None and memo.whole.level == level
    return memo


def _same(a, b) -> None:
    for f in dataclasses.fields(a):
        if f.name == "origin":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


def _ranges(hi: int, count: int = 40) -> list[tuple[int, int]]:
    rng = np.random.default_rng(7)
    out = [(0, hi), (-5, 3), (hi - 3, hi + 9)]
    for _ in range(count):
        a, b = sorted(int(v) for v in rng.integers(0, hi, 2))
        out.append((a, b))
    return out


@pytest.mark.parametrize(
    ("key", "level", "last"),
    [
        ("loss", 1, N),
        ("valid/loss", 0, N),
        ("rare", 0, 200_000),
        ("spiky", 1, N),
        ("spiky_valid", 0, N),
    ],
)
def test_a_slice_of_the_whole_level_is_the_view_the_tiles_give(source, key, level, last):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = _kept_whole(loaded, key, level)
    for lo, hi in _ranges(last):
        sliced = series_view(cache, ref, key, lo, hi, PIXELS, level, memo=memo)
        assert sliced.origin is not None and sliced.origin[0] is memo.whole
        _same(sliced, _settled(loaded, key, lo, hi, level))  # no memo: gathered from the tiles


def test_the_neighbour_past_edge_tiles_is_left_out_as_the_tiles_leave_it(source):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = _kept_whole(loaded, "rare", 0)
    # Between the points at 81,920 and 102,400: the one after is in the next tile, the one
    # before 18 tiles (of 1,024 steps) before the view's first: past EDGE_TILES.
    view = series_view(cache, ref, "rare", 101_000, 102_000, PIXELS, 0, memo=memo)
    assert list(view.steps) == [102_400]
    _same(view, _settled(loaded, "rare", 101_000, 102_000, 0))
    near = series_view(cache, ref, "rare", 90_000, 100_000, PIXELS, 0, memo=memo)
    assert list(near.steps) == [81_920, 102_400]


def test_a_zoom_over_a_settled_series_reads_no_tile(source, monkeypatch):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = _kept_whole(loaded, "valid/loss", 0)
    whole = memo.whole
    read = []
    real = cache.tiles
    monkeypatch.setattr(cache, "tiles", lambda *a, **k: read.append(a) or real(*a, **k))
    monkeypatch.setattr(view_columns, "concat_tiles", lambda *a: pytest.fail("concatenated"))
    for lo, hi in _ranges(N, 10):
        view = series_view(cache, ref, "valid/loss", lo, hi, PIXELS, 0, memo=memo)
        assert view.origin[0] is whole
        assert np.shares_memory(view.values, whole.view.values) or len(view.values) == 0
    assert read == [] and memo.whole is whole
    with pytest.raises(ValueError):
        view.values[:1] = 0.0  # the whole's arrays, under every view of the series: read-only


def test_its_smoothed_curve_is_the_whole_curves_slice_and_near_the_warmed_up_one(source):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = _kept_whole(loaded, "loss", 1)
    item = Item(ref, "loss", "loss", "C0")
    full = whole_level.smoothed(memo.whole, 0.9)
    for lo, hi in _ranges(N, 12)[3:]:
        sliced = series_view(cache, ref, "loss", lo, hi, PIXELS, 1, memo=memo)
        curve, whole = smoothed_curve(cache, item, sliced, 0.9, lo)
        _whole, a, b = sliced.origin
        assert whole and np.array_equal(curve, full[a:b])  # the same curve at every zoom
        gathered = _settled(loaded, "loss", lo, hi, 1)
        warmed, complete = smoothed_curve(cache, item, gathered, 0.9, lo)
        # Started WARMUP_LEFT's worth of weight later: within that of the noise (0.05).
        assert complete and np.max(np.abs(curve - warmed)) < 1e-3


def test_a_live_series_is_gathered_from_its_tiles_as_its_points_come(source):
    loaded, path, run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = _kept_whole(loaded, "loss", 1)
    engine = open_store(path)
    try:
        for start in (N, N + 300, N + 900):
            add_points(engine, run_id, {"loss": _loss(range(start, start + 300), start)})
            loaded.fetch()
            view = _settled(loaded, "loss", 1_000, start + 200, 1, memo)
            # Its tiles changed since the last ask: not settled, not kept whole.
            assert view.origin is None and memo.whole.changes != cache.changes(ref, "loss")
            _same(view, _settled(loaded, "loss", 1_000, start + 200, 1))
    finally:
        engine.dispose()
    # Settled (the same change count twice): kept whole again, with the new points.
    series_view(cache, ref, "loss", 5, 500, PIXELS, 1, memo=memo)
    view = series_view(cache, ref, "loss", 1_000, N + 1_100, PIXELS, 1, memo=memo)
    assert view.origin is not None and memo.whole.changes == cache.changes(ref, "loss")
    _same(view, _settled(loaded, "loss", 1_000, N + 1_100, 1))


def test_a_level_over_whole_rows_is_not_kept(source, monkeypatch):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    monkeypatch.setattr(whole_level, "WHOLE_ROWS", 240)  # valid/loss: 241 points
    memo = ViewMemo()
    _settled(loaded, "valid/loss", -np.inf, np.inf, 0, memo)
    view = series_view(cache, ref, "valid/loss", 1_000, 9_000, PIXELS, 0, memo=memo)
    assert view.origin is None and memo.whole is None
    _same(view, _settled(loaded, "valid/loss", 1_000, 9_000, 0))


def test_a_tile_missing_from_the_cache_gathers_the_view_and_asks_for_it(source):
    loaded, _path, _run_id = source
    cache, ref = loaded.cache, loaded.cache.runs()[0].ref
    memo = ViewMemo()
    # Only the tiles of a zoomed range are fetched: the whole level is not all there.
    _settled(loaded, "valid/loss", 20_000, 30_000, 0, memo)
    view = series_view(cache, ref, "valid/loss", 21_000, 29_000, PIXELS, 0, memo=memo)
    assert view.complete and view.origin is None and memo.whole is None
    assert memo.unbuilt == (0, cache.changes(ref, "valid/loss"))
    _same(view, _settled(loaded, "valid/loss", 21_000, 29_000, 0))
