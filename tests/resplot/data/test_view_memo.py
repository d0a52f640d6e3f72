"""A series' view kept between polls (resplot.data.views.ViewMemo): the same tiles give the
same view object back, and a live poll that changes the newest buckets works out only those
again, giving the arrays a whole rebuild gives.

A real SQLite store read through a local agent (resplot.sources.polling.Loaded), points added
between polls as a live run's writer adds them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from resplot.data import view_columns, views
from resplot.data.views import ViewMemo, series_view
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from schema.store.connect import open_store
from tests.fixtures.stores import BASE_TIME, add_points, make_run, new_store

N = 60_000
PIXELS = 300  # a bucket level, not raw points, for 60,000 steps


def _loss(steps) -> list:
    return [(int(s), 2 + np.exp(-s / 9_000) + 0.01 * np.sin(s)) for s in steps]


@pytest.fixture
def live(store_path):
    engine = new_store(store_path)
    run = make_run(
        engine,
        name="live",
        status="running",
        heartbeat_at=BASE_TIME + 1e6,
        points={"loss": _loss(range(N))},
    )
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as source:
        yield source, run.id, store_path


def _view(cache, ref, memo=None):
    for _ in range(4):
        view = series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo)
        if view is not None and view.complete:
            return view
    raise AssertionError("the view's tiles did not come")


def _first_view(live):
    """The live series' first complete view through a memo (its tiles asked for, fetched)."""
    source, _run_id, _path = live
    cache = source.cache
    ref = cache.runs()[0].ref
    memo = ViewMemo()
    series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo)
    source.fetch()
    return source, cache, ref, memo, _view(cache, ref, memo)


def _same_arrays(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        else:
            assert x == y, f.name


@pytest.mark.slow
def test_a_poll_works_out_only_the_newest_buckets_again(live, monkeypatch):
    source, run_id, path = live
    cache = source.cache
    ref = cache.runs()[0].ref
    memo = ViewMemo()
    series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo)  # asks for its tiles
    source.fetch()
    first = _view(cache, ref, memo)
    assert first.level > 0 and len(first.mid_steps) > 100
    assert _view(cache, ref, memo) is first  # nothing new: the same view

    built = []
    real = view_columns.every_bucket

    def counted(c, *a):
        built.append(len(c["n"]))
        return real(c, *a)

    # (a view's buckets worked out: again from the newest, or all of them)
    monkeypatch.setattr(views, "every_bucket", counted)
    monkeypatch.setattr(view_columns, "every_bucket", counted)
    engine = open_store(path)
    for start in (N, N + 7, N + 500):  # into the last bucket, then past it
        add_points(engine, run_id, {"loss": _loss(range(start, start + 7))})
        source.fetch()
        built.clear()
        now = _view(cache, ref, memo)
        assert now is not first and built and max(built) <= 3  # the newest buckets only
        whole = _view(cache, ref)  # no memo: every bucket worked out
        _same_arrays(now, whole)
        first = now
    engine.dispose()


def test_tiles_fetched_again_alike_rebuild_the_view(live):
    """Evicted and fetched again, the tiles bring the same buckets in new arrays: nothing kept
    from the memo's view changed and nothing is new. That indexed past the buckets (an
    IndexError in the window's redraw); it is the view a rebuild gives."""
    source, cache, ref, memo, first = _first_view(live)
    cache.begin_view()  # no view holds the tiles: the tight bound evicts them all
    cache.set_tile_limit(1)
    cache.set_tile_limit(256 << 20)
    assert series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo) is None
    source.fetch()
    again = _view(cache, ref, memo)
    assert again is not first
    _same_arrays(again, first)


def _counting_tiles(cache, monkeypatch) -> list:
    """The tiles looked up from now on, one at a time (tile) or together (tiles)."""
    looked: list = []
    one, many = cache.tile, cache.tiles

    def tiles(ref, key, level, indices, every_missing=True):
        indices = list(indices)
        found, missing = many(ref, key, level, indices, every_missing)
        looked.extend((ref, key, level, i) for i in indices[: len(found) + len(missing)])
        return found, missing

    monkeypatch.setattr(cache, "tile", lambda *a: looked.append(a) or one(*a))
    monkeypatch.setattr(cache, "tiles", tiles)
    return looked


def test_a_series_that_did_not_change_is_not_looked_at(live, monkeypatch):
    """A poll that brought a series nothing (a finished run's beside a live one) gets the view
    it had without a tile looked up, and those tiles still count as the view's: a bound of one
    byte evicts none of them. Another question of it, or another series' change, is not
    that."""
    _source, cache, ref, memo, first = _first_view(live)
    looked = _counting_tiles(cache, monkeypatch)

    cache.begin_view()  # a page's next refresh
    cache.forget_series(ref, "not-plotted")  # another series changed
    assert series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo) is first
    assert looked == []
    held = cache.tile_bytes
    cache.set_tile_limit(1)
    assert cache.tile_bytes == held  # in view: kept past the bound
    cache.set_tile_limit(256 << 20)

    series_view(cache, ref, "loss", 0, N // 2, PIXELS, memo=memo)  # zoomed: another question
    assert looked


@pytest.mark.parametrize("change", ["put", "evicted", "forgotten", "store dropped"])
def test_a_change_to_what_the_view_was_built_from_builds_it_again(live, change):
    """Every change to a series' summary or tiles moves its count (SeriesCache.changes): the
    memo's view is not given back for it."""
    _source, cache, ref, memo, first = _first_view(live)
    count = cache.changes(ref, "loss")
    if change == "put":
        tile = cache.tiles_of(ref, "loss")[-1]
        cols = {name: arr.copy() for name, arr in tile.cols.items()}  # the same, read again
        cache.put_tile(ref, "loss", type(tile)(tile.level, tile.index, cols, tile.epoch))
    elif change == "evicted":
        cache.begin_view()
        cache.set_tile_limit(1)
        cache.set_tile_limit(256 << 20)
    elif change == "forgotten":
        cache.forget_series(ref, "loss")
    else:
        cache.drop_store(ref.source, ref.store)
    assert cache.changes(ref, "loss") != count
    again = series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS, memo=memo)
    assert again is not first
    if change == "put":
        _same_arrays(again, first)  # built again from the new columns: the same view
    else:
        assert again is None  # its tiles (or summary) are gone: asked for again
