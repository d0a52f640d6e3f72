"""A zoomed view of a sparse series reaches past both edges to the series' neighbouring points,
also where they lie in tiles before or after those covering the view (a key logged every 250
or 5,000 steps): the line runs to the chart's edges at both ends.

A real SQLite store read through a local agent (resplot.sources.polling.Loaded).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from resplot.data.views import EDGE_TILES, ViewMemo, series_view
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from schema.store import buckets
from tests.fixtures.stores import make_run, new_store

PIXELS = 600


@pytest.fixture
def sparse(store_path):
    engine = new_store(store_path)
    make_run(
        engine,
        name="sparse",
        points={
            "valid/loss": [(s, 3.0 - s / 1e5) for s in range(0, 20_001, 250)],
            "rare": [(s, float(s)) for s in range(0, 60_001, 5_000)],
        },
    )
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as source:
        yield source


def _settled(source, key, lo, hi, level=None, memo=None):
    """The view once every tile it asks for has come (each poll brings what the last asked)."""
    cache = source.cache
    ref = cache.runs()[0].ref
    for _ in range(2 * EDGE_TILES):
        view = series_view(cache, ref, key, lo, hi, PIXELS, level=level, memo=memo)
        if view is not None and view.complete:
            return view
        source.fetch()
    raise AssertionError("the view's tiles did not come")


def test_a_zoomed_raw_view_reaches_the_points_past_both_edges(sparse):
    # Tile 1 of the raw level (steps 1,024 .. 2,047) holds 1,250 .. 2,000: the point before
    # lo (1,000) is in tile 0 and the one after hi (2,250) in tile 2.
    lo, hi = 1_100, 2_040
    assert list(buckets.tiles_for(0, lo, hi)) == [1]
    view = _settled(sparse, "valid/loss", lo, hi, level=0)
    assert view.steps[0] == 1_000 and view.steps[-1] == 2_250
    assert list(view.steps) == list(range(1_000, 2_251, 250))


def test_a_very_sparse_view_looks_across_empty_tiles(sparse):
    # Points every 5,000 steps: between 10,000 and 15,000 lie three empty raw tiles.
    view = _settled(sparse, "rare", 11_000, 12_000, level=0)
    assert list(view.steps) == [10_000, 15_000]


def test_a_zoomed_bucket_view_reaches_the_buckets_past_both_edges(sparse):
    # Level -1 (2 steps a bucket, 2,048 steps a tile): tile 1 holds the buckets of 2,250 ..
    # 4,000 (the last before hi); the one before lo (2,000) is in tile 0, the one after hi
    # (4,250) in tile 2.
    lo, hi = 2_100, 4_050
    assert list(buckets.tiles_for(-1, lo, hi)) == [1]
    view = _settled(sparse, "valid/loss", lo, hi, level=-1)
    assert view.level == -1
    assert view.first_steps[0] == 2_000 and view.first_steps[-1] == 4_250
    assert view.steps[0] == 2_000 and view.steps[-1] == 4_250


def test_a_view_at_the_series_ends_asks_for_nothing_past_them(sparse):
    view = _settled(sparse, "rare", -np.inf, 12_000, level=0)
    assert list(view.steps) == [0, 5_000, 10_000, 15_000]
    view = _settled(sparse, "rare", 52_000, np.inf, level=0)
    assert list(view.steps) == [50_000, 55_000, 60_000]


def test_a_sparse_view_gets_its_neighbours_tiles_with_its_own(sparse):
    # valid/loss holds ~2 points a raw tile: the tiles just past the view's (0 and 2) are asked
    # for with its own (1), so one round trip brings the neighbours (tests/resplot/ui/test_scale.py
    # pans at full resolution and counts on one).
    cache = sparse.cache
    ref = cache.runs()[0].ref
    assert series_view(cache, ref, "valid/loss", 1_100, 2_040, PIXELS, level=0) is None
    sparse.fetch()
    view = series_view(cache, ref, "valid/loss", 1_100, 2_040, PIXELS, level=0)
    assert view is not None and view.complete and cache.wanted_count() == 0
    assert view.steps[0] == 1_000 and view.steps[-1] == 2_250


def test_points_at_the_edges_need_no_neighbours(sparse):
    # 1,250 and 2,000 are the view's ends and the first and last points of its tile (1): the
    # line reaches both edges without the points past them.
    view = _settled(sparse, "valid/loss", 1_250, 2_000, level=0)
    assert list(view.steps) == list(range(1_250, 2_001, 250))


def test_the_view_is_not_complete_while_an_edge_tile_loads(sparse):
    # "rare" every 5,000 steps: 11,000 .. 12,000 (tiles 10 and 11) holds no point; the tile
    # before (9) holds 10,000, the one after (12) nothing, and 15,000 is two tiles on (14).
    cache = sparse.cache
    ref = cache.runs()[0].ref
    memo = ViewMemo()
    assert series_view(cache, ref, "rare", 11_000, 12_000, PIXELS, level=0) is None
    sparse.fetch()  # tiles 9 .. 12 come; 13 and 14 are asked for only now
    view = series_view(cache, ref, "rare", 11_000, 12_000, PIXELS, level=0, memo=memo)
    assert view is not None and view.edges_pending and not view.complete
    assert list(view.steps) == [10_000]
    sparse.fetch()
    view = series_view(cache, ref, "rare", 11_000, 12_000, PIXELS, level=0, memo=memo)
    assert view.complete and list(view.steps) == [10_000, 15_000]


def test_a_memo_gives_the_view_a_whole_rebuild_gives(sparse):
    cache = sparse.cache
    ref = cache.runs()[0].ref
    memo = ViewMemo()
    for _ in range(2 * EDGE_TILES):
        view = series_view(cache, ref, "valid/loss", 2_100, 4_050, PIXELS, level=-1, memo=memo)
        if view is not None and view.complete:
            break
        sparse.fetch()
    whole = _settled(sparse, "valid/loss", 2_100, 4_050, level=-1)
    assert view.complete and view.first_steps[0] == 2_000 and view.first_steps[-1] == 4_250
    for f in dataclasses.fields(whole):
        x, y = getattr(view, f.name), getattr(whole, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name
