"""Live points folded into the cache (SeriesCache.add_live): the summary is the fold of every
point, and the new points are folded, into the summary and the cached tiles, before the cache's
lock is taken (the GUI thread asks for it hundreds of times a refresh; a poll of two live runs
folds ~8,000 points in Python)."""

from __future__ import annotations

import numpy as np

import resplot.data.cache as cache_mod
from resplot.data.cache import SeriesCache
from resplot.data.model import RunInfo, RunRef
from resplot.data.tiles import Tile, empty_columns, folded
from schema.store.rollup import fold, merge

REF = RunRef("local", "/tmp/reslog.db", "d" * 32)
T0 = 1_700_000_000.0


def test_the_summary_is_the_fold_of_every_live_point_a_poll_at_a_time():
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "lm", "running", T0, T0)])
    steps = np.arange(200)
    values = np.sin(steps / 7.0)
    values[50] = np.nan
    walls = T0 + steps * 0.5
    cache.add_live(REF, "train/loss", steps[:120], walls[:120], values[:120], epoch=1)
    cache.add_live(REF, "train/loss", steps[120:], walls[120:], values[120:], epoch=2)
    vals = [None if v != v else v for v in values.tolist()]
    polls = [slice(0, 120), slice(120, None)]
    want = merge(*(fold(steps[p].tolist(), walls[p].tolist(), vals[p]) for p in polls))
    assert cache.summary(REF, "train/loss").agg == want


def test_new_points_are_folded_before_the_lock_is_taken(monkeypatch):
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "lm", "running", T0, T0)])
    held = []

    def folding(*args, **kwargs):
        held.append(cache._lock.locked())
        return fold(*args, **kwargs)

    monkeypatch.setattr(cache_mod, "fold", folding)
    steps = np.arange(10)
    cache.add_live(REF, "train/loss", steps, T0 + steps, steps * 1.0, epoch=1)
    assert held == [False]
    assert cache.summary(REF, "train/loss") is not None


def test_live_points_fold_into_cached_tiles_outside_the_lock(monkeypatch):
    """A poll of two live runs folded ~1,800 points into ~36 cached tiles, 80-250 ms on the
    source's worker; under the lock the GUI thread waited that out (a soak's stalls)."""
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "lm", "running", T0, T0)])
    steps = np.arange(300)
    cache.add_live(REF, "train/loss", steps, T0 + steps, np.cos(steps / 9.0), epoch=1)
    level = -1  # a fine level: 2 steps a bucket
    stored = Tile(
        level, 0, folded(level, empty_columns(level), steps, T0 + steps, np.cos(steps / 9.0)), 1
    )
    cache.put_tile(REF, "train/loss", stored)
    held = []

    def folding(*args, **kwargs):
        held.append(cache._lock.locked())
        return folded(*args, **kwargs)

    monkeypatch.setattr(cache_mod, "folded", folding)
    more = np.arange(300, 420)
    values = np.cos(more / 9.0)
    cache.add_live(REF, "train/loss", more, T0 + more, values, epoch=2)
    assert held == [False]
    (tile,), _missing = cache.tiles(REF, "train/loss", level, [0])
    every = np.arange(420)
    want = folded(level, empty_columns(level), every, T0 + every, np.cos(every / 9.0))
    assert tile is stored and len(tile) == 210
    for name, column in want.items():
        np.testing.assert_allclose(tile.cols[name], column, rtol=1e-12, err_msg=name)
