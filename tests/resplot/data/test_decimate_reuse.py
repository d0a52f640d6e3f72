"""A live series decimated again from its last decimation (decimate.Reuse): the columns before
the first point that changed are kept, and the result is the whole decimation's, array for
array; no Qt."""

from __future__ import annotations

import numpy as np

from resplot.data.decimate import Decimated, Grid, Reuse, decimate_many

FIELDS = ("x", "y", "nan_x", "posinf_x", "neginf_x", "col_x", "col_min", "col_max")


def _same(a: Decimated, b: Decimated) -> None:
    for name in FIELDS:
        u, v = getattr(a, name), getattr(b, name)
        assert (u is None) == (v is None), name
        if u is not None:
            assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), name


def _both(x, ys, grid, reuse, line_max=4):
    """The decimation with `reuse` and the whole one, checked equal; the first."""
    got = decimate_many(x, ys, grid.n, grid=grid, reuse=reuse, line_max=line_max)
    whole = decimate_many(x, ys, grid.n, grid=grid, line_max=line_max)
    assert len(got) == len(whole)
    for a, b in zip(got, whole, strict=True):
        _same(a, b)
    return got


def _live(n: int, seed: int, bad: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.choice(np.arange(4 * n), n, replace=False)).astype(float)
    y = rng.standard_normal(n)
    smooth = np.cumsum(y) / np.arange(1, n + 1)
    if bad:
        for value in (np.nan, np.inf, -np.inf):
            y[rng.integers(0, n, 12)] = value
    return x, y, smooth


def test_a_series_growing_poll_by_poll_matches_its_whole_decimation_every_time():
    """Points appended (and the last ones changed, as a bucket folding in new points does),
    NaN and ±inf among them, into a fixed grid with headroom right of the data."""
    for seed, bad in ((0, False), (1, True), (2, True)):
        x, y, smooth = _live(40_000, seed, bad)
        grid = Grid.of((0.0, 4 * 40_000 * 1.1), 80.3, 600.0)
        reuse = Reuse()
        rng = np.random.default_rng(seed)
        end = 30_000
        for _ in range(25):
            end += int(rng.integers(0, 200))
            yy, ss = y[:end].copy(), smooth[:end].copy()
            yy[-3:] += rng.standard_normal(3)  # the newest bucket, folded in again
            _both(x[:end].copy(), [yy, ss], grid, reuse)
        assert reuse.tails >= 20  # most polls cut the tail only


def test_a_change_before_the_end_cuts_from_its_column_on():
    x, y, _smooth = _live(20_000, 3, False)
    grid = Grid.of((0.0, 80_000.0), 0.0, 400.0)
    reuse = Reuse()
    _both(x, [y], grid, reuse)
    y2 = y.copy()
    y2[5_000] = 50.0  # a spike a quarter of the way in
    (got,) = _both(x.copy(), [y2], grid, reuse)
    assert reuse.tails == 1 and got.col_max.max() == 50.0


def test_nothing_changed_gives_the_same_columns_back():
    x, y, _smooth = _live(20_000, 4, True)
    grid = Grid.of((0.0, 80_000.0), 0.0, 400.0)
    reuse = Reuse()
    first = _both(x, [y], grid, reuse)
    again = _both(x.copy(), [y.copy()], grid, reuse)
    assert again[0] is first[0]


def test_another_grid_or_a_first_point_changed_cuts_every_column():
    x, y, _smooth = _live(20_000, 5, False)
    grid = Grid.of((0.0, 80_000.0), 0.0, 400.0)
    reuse = Reuse()
    _both(x, [y], grid, reuse)
    _both(x.copy(), [y * 2], grid, reuse)  # every point changed
    _both(x.copy(), [y], Grid.of((0.0, 90_000.0), 0.0, 400.0), reuse)  # zoomed out
    _both(x + 1.0, [y], Grid.of((0.0, 90_000.0), 0.0, 400.0), reuse)  # every x moved
    assert reuse.tails == 0


def test_an_array_changed_in_place_is_cut_again_whole():
    """The kept arrays are the caller's: one changed in place cannot be compared with itself."""
    x, y, _smooth = _live(20_000, 6, False)
    grid = Grid.of((0.0, 80_000.0), 0.0, 400.0)
    reuse = Reuse()
    first = _both(x, [y], grid, reuse)
    y[10] = 99.0  # y changed where it is kept
    (got,) = _both(x.copy(), [y], grid, reuse)
    assert got is not first[0] and got.col_max.max() == 99.0
    kept = x.copy()
    _both(kept, [y.copy()], grid, reuse)
    kept[15_000:] += 150.0  # x changed where it is kept: the last columns hold other points
    _both(kept, [y.copy()], grid, reuse)
    assert reuse.tails == 0


def test_a_series_sparse_enough_to_draw_as_a_line_keeps_nothing():
    x, y, _smooth = _live(1_000, 7, False)
    grid = Grid.of((0.0, 4_000.0), 0.0, 400.0)  # 2.5 points a pixel: a line, no columns
    reuse = Reuse()
    (got,) = _both(x, [y], grid, reuse)
    assert got.col_x is None and reuse.grid is None
    (got,) = _both(x, [y], grid, reuse, line_max=1)  # now cut into columns, all of them
    assert got.col_x is not None and reuse.grid == grid and reuse.tails == 0
