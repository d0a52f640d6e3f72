"""The tile cache's bound: least recently used tiles go first, the view's own tiles never; live
points folded into a cached tile."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.tiles import Tile, TileCache, _agg_values, agg_at, empty_columns, folded
from schema.store import buckets
from schema.store.rollup import fold_buckets, merge


def raw_tile(index: int, points: int = 100) -> Tile:
    steps = np.arange(index * 1024, index * 1024 + points, dtype=np.int64)
    return Tile(0, index, {"step": steps, "wall": steps * 1.0, "value": steps * 0.5}, 0)


SIZE = raw_tile(0).nbytes


def test_least_recently_used_tiles_go_first_once_past_the_bound():
    cache = TileCache(limit_bytes=3 * SIZE)
    for i in range(3):
        cache.put(i, raw_tile(i))
    assert cache.get(0) is not None  # 0 is now the most recent
    cache.put(3, raw_tile(3))
    assert [k for k in range(4) if cache.get(k) is not None] == [0, 2, 3]
    assert cache.evicted == 1 and cache.bytes == 3 * SIZE and cache.over == 0


def test_tiles_the_view_uses_stay_past_the_bound_and_the_excess_is_reported():
    cache = TileCache(limit_bytes=2 * SIZE)
    cache.put("old", raw_tile(9))
    cache.keep = {0, 1, 2, 3}
    for i in range(4):
        cache.put(i, raw_tile(i))
    assert cache.get("old") is None  # not in view: evicted first
    assert all(cache.get(i) is not None for i in range(4))
    assert cache.over == 2 * SIZE and cache.bytes == 4 * SIZE
    cache.keep = {3}  # the view moved on: the bound holds again at the next change
    cache.set_limit(2 * SIZE)
    assert cache.over == 0 and cache.get(3) is not None and len(cache) == 2


def test_tiles_no_one_read_for_a_while_expire_unless_in_view(monkeypatch):
    """`expire` drops the matching tiles idle for `idle_s`, oldest first, never one the view
    keeps; reading a tile makes it recent again, and so does being in view at a run."""
    import resplot.data.tiles as tiles_mod

    clock = [1000.0]  # the cache's time.monotonic(), moved by hand
    monkeypatch.setattr(tiles_mod.time, "monotonic", lambda: clock[0])
    gone = []
    cache = TileCache(limit_bytes=100 * SIZE, on_gone=gone.append)
    for i in range(4):
        cache.put(("raw", i), raw_tile(i))
    cache.put(("overview", 0), raw_tile(8))
    clock[0] += 200
    assert cache.get(("raw", 1)) is not None  # read again: recent
    cache.keep = {("raw", 2)}  # in view
    cache.put(("raw", 4), raw_tile(4))
    clock[0] += 150  # raw 0, 3 and the overview idle for 350 s; raw 1 and 4 for 150 s
    freed = cache.expire(300, lambda k: k[0] == "raw")
    assert freed == 2 * SIZE and cache.expired == 2
    assert sorted(gone) == [("raw", 0), ("raw", 3)]
    assert cache.bytes == 4 * SIZE and len(cache) == 4
    assert cache.expire(300, lambda k: k[0] == "raw") == 0  # nothing idle left to match
    clock[0] += 200  # raw 2 in view all along, unread (a view kept whole reads none)
    assert cache.expire(300, lambda k: k[0] == "raw") == 2 * SIZE  # raw 1 and 4, not raw 2 ...
    assert sorted(gone[2:]) == [("raw", 1), ("raw", 4)]
    cache.keep = set()  # ... stamped as read by that run; out of view from here
    clock[0] += 299
    assert cache.expire(300, lambda k: k[0] == "raw") == 0
    clock[0] += 1
    assert cache.expire(300, lambda k: True) == 2 * SIZE and cache.bytes == 0


def test_a_tile_kept_without_being_read_does_not_stop_the_eviction_of_older_ones():
    """A view kept whole between polls keeps its tiles without reading them (ViewMemo): the
    oldest tile can be a kept one, and the ones behind it that no chart uses still go."""
    cache = TileCache(limit_bytes=3 * SIZE)
    for i in range(3):
        cache.put(i, raw_tile(i))
    cache.keep = {0}  # kept by a view that read it long ago
    cache.put(3, raw_tile(3))
    assert cache.over == 0 and cache.bytes == 3 * SIZE and cache.evicted == 1
    assert cache.peek(0) is not None and cache.peek(1) is None  # 1 went, not the kept 0
    cache.keep = {0, 2, 3, 4}  # every tile left in view: held over the bound, and said so
    cache.put(4, raw_tile(4))
    assert cache.over == SIZE and len(cache) == 4 and cache.evicted == 1
    cache.put(5, raw_tile(5))  # no view asked for it: the newest, spared by its own put ...
    assert cache.over == 2 * SIZE and cache.peek(5) is not None
    cache.keep.add(6)
    cache.put(6, raw_tile(6))  # ... and the first to go when another tile comes
    assert cache.peek(5) is None and cache.over == 2 * SIZE and cache.evicted == 2
    assert sorted(k for k in range(7) if cache.peek(k) is not None) == [0, 2, 3, 4, 6]


def test_a_series_tiles_looked_up_together_as_one_at_a_time():
    """SeriesCache.tiles (one hold of the lock for a view's ~40 lookups) finds, counts as part
    of the view and misses what tile() does, one index at a time."""
    from resplot.data.cache import SeriesCache
    from schema.store.records import RunRef

    ref = RunRef("local", "s.db", "r1")
    caches = [SeriesCache(), SeriesCache(), SeriesCache()]
    for cache in caches:
        for i in (0, 1, 3, 5):
            cache.put_tile(ref, "loss", raw_tile(i))
        cache.begin_view()
    one_by_one = [caches[0].tile(ref, "loss", 0, i) for i in range(7)]
    found, missing = caches[1].tiles(ref, "loss", 0, range(7))
    assert [t.index for t in found] == [t.index for t in one_by_one if t is not None]
    assert [t.index for t in found] == [0, 1, 3, 5] and missing == [2, 4, 6]
    seven = caches[0].tile_keys(ref, "loss", [(0, i) for i in range(7)])
    assert caches[1]._tiles.keep == caches[0]._tiles.keep == seven
    # Up to the first missing one only: the rest are not read, nor counted in view.
    found, missing = caches[2].tiles(ref, "loss", 0, range(7), every_missing=False)
    assert [t.index for t in found] == [0, 1] and missing == [2]
    assert caches[2]._tiles.keep == caches[2].tile_keys(ref, "loss", [(0, i) for i in range(3)])


def _fold_bucket_by_bucket(tile: Tile, steps, walls, values) -> dict:
    """The live fold as it was before it was batched: each new bucket its own np.insert."""
    shift = buckets.shift(tile.level)
    vals = [None if v != v else v for v in values.tolist()]
    deltas = fold_buckets(steps.tolist(), walls.tolist(), vals, shift)
    new = {name: arr.copy() for name, arr in tile.cols.items()}
    have = new["step_lo"] >> shift
    for b, delta in sorted(deltas.items()):
        i = int(np.searchsorted(have, b))
        if i < len(have) and have[i] == b:
            for name, v in _agg_values(merge(agg_at(new, i), delta)).items():
                new[name][i] = v
        else:
            for name, v in _agg_values(delta).items():
                new[name] = np.insert(new[name], i, v)
            have = np.insert(have, i, b)
    return new


@pytest.mark.parametrize("level", [-1, -3, 1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_live_points_fold_into_a_tile_as_bucket_by_bucket_merges(level, seed):
    """Live points folded into an aggregate tile: new buckets before, between and after the
    cached ones, merges into cached ones, NaN and infinities, steps repeated and out of order:
    the same columns, bit for bit, as merging them one bucket at a time."""
    rng = np.random.default_rng(seed)
    width = buckets.width(level)
    span = width * 300
    steps = np.sort(rng.choice(span, 400, replace=False)).astype(np.int64)
    old = steps[rng.random(len(steps)) < 0.5]
    shift = buckets.shift(level)
    tile = Tile(level, 0, empty_columns(level), epoch=0)
    tile.cols = folded(level, tile.cols, old, 1e9 + old * 0.5, rng.normal(size=len(old)))
    for _poll in range(4):
        new = rng.choice(steps, 60)  # arrival order: out of order, repeats
        values = rng.normal(size=len(new)) * 10.0 ** rng.integers(-3, 4)
        values[rng.random(len(new)) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        walls = 1e9 + new * 0.5 + rng.random(len(new))
        want = _fold_bucket_by_bucket(tile, new, walls, values)
        tile.cols = folded(level, tile.cols, new, walls, values)
        assert set(tile.cols) == set(want)
        for name, column in want.items():
            got = tile.cols[name]
            assert got.dtype == column.dtype, name
            assert got.tobytes() == column.tobytes(), name
    assert np.all(np.diff(tile.cols["step_lo"] >> shift) > 0)  # one row a bucket, in order
