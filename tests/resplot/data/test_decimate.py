"""Per-pixel min/max decimation: extremes and non-finite positions survive; no Qt."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.decimate import bucket_mean, decimate, decimate_many


def _series(n=100_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(n, dtype=float), rng.standard_normal(n)


def test_small_series_is_returned_as_is():
    x, y = np.arange(10.0), np.arange(10.0) ** 2
    d = decimate(x, y, 800)
    np.testing.assert_array_equal(d.x, x)
    np.testing.assert_array_equal(d.y, y)


def test_every_pixel_column_keeps_its_min_and_max():
    x, y = _series()
    pixels = 500
    d = decimate(x, y, pixels)
    assert len(d.x) <= 4 * pixels + 4
    assert np.nanmax(d.y) == y.max() and np.nanmin(d.y) == y.min()
    # Each column's extremes appear in the output.
    cols = np.array_split(np.arange(len(x)), pixels)
    for idx in cols[::37]:
        lo, hi = x[idx[0]], x[idx[-1]]
        inside = (d.x >= lo) & (d.x <= hi)
        assert y[idx].max() in d.y[inside] or np.isclose(d.y[inside].max(), y[idx].max())


def test_single_spike_survives_any_zoom():
    x, y = _series()
    y[54_321] = 100.0
    assert np.nanmax(decimate(x, y, 300).y) == 100.0
    assert np.nanmax(decimate(x, y, 300, xlim=(50_000, 60_000)).y) == 100.0
    assert np.nanmax(decimate(x, y, 300, xlim=(0, 50_000)).y) < 100.0


def test_bucket_extremes_become_a_band_from_one_bucket_a_pixel():
    """Two points a bucket (its minimum and maximum, as the charts get them): at one bucket a
    pixel or more they are cut into columns (drawn as a band), below it kept as a line."""
    buckets = 782
    x = np.repeat(np.arange(buckets) * 128.0, 2) + np.tile([10.0, 90.0], buckets)
    y = np.tile([97.0, 98.0], buckets)
    y[2 * 400 + 1] = 150.0  # one bucket's spike
    (dense,) = decimate_many(x, [y], 400, line_max=2)
    (sparse,) = decimate_many(x, [y], 800, line_max=2)
    (as_points,) = decimate_many(x, [y], 400)  # up to 4 points a pixel: a line still
    assert dense.col_x is not None and dense.col_max.max() == 150.0
    assert dense.col_min.min() == 97.0
    assert sparse.col_x is None and as_points.col_x is None
    assert np.nanmax(sparse.y) == 150.0


def test_zoom_keeps_one_point_beyond_each_edge():
    x, y = _series()
    d = decimate(x, y, 200, xlim=(1000.5, 2000.5))
    assert d.x[0] <= 1000.5 and d.x[-1] >= 2000.5
    assert d.x[0] >= 999 and d.x[-1] <= 2002


def test_nan_and_inf_positions_are_reported_and_break_the_line():
    x, y = _series()
    y[10_000] = np.nan
    y[20_000] = np.inf
    y[30_000] = -np.inf
    d = decimate(x, y, 400)
    assert d.nan_x.tolist() == [10_000.0]
    assert d.posinf_x.tolist() == [20_000.0]
    assert d.neginf_x.tolist() == [30_000.0]
    assert sorted(d.nonfinite_x.tolist()) == [10_000.0, 20_000.0, 30_000.0]
    # The line breaks in each column that held a bad value, and nowhere else.
    width = len(x) / 400
    gaps = d.x[np.isnan(d.y)]
    for bad in (10_000, 20_000, 30_000):
        assert np.any(np.abs(gaps - bad) <= width)
    assert np.all(np.min(np.abs(gaps[:, None] - [10_000, 20_000, 30_000]), axis=1) <= width)
    assert np.isfinite(d.y[~np.isnan(d.y)]).all()  # inf never reaches the line
    assert np.nanmax(d.y) == np.nanmax(np.where(np.isfinite(y), y, np.nan))


def test_nan_in_a_small_series_is_kept_as_a_gap():
    x = np.arange(5.0)
    y = np.array([1.0, np.nan, 3.0, np.inf, 5.0])
    d = decimate(x, y, 100)
    assert np.isnan(d.y[1]) and np.isnan(d.y[3])
    assert d.nan_x.tolist() == [1.0] and d.posinf_x.tolist() == [3.0]


def test_unsorted_x_is_sorted_first():
    x = np.array([0.0, 1.0, 2.0, 1.5, 3.0])
    d = decimate(x, np.array([0.0, 1.0, 2.0, 1.5, 3.0]), 100)
    assert np.all(np.diff(d.x) >= 0)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in length"):
        decimate(np.arange(3.0), np.arange(4.0), 10)


def test_bucket_mean_averages_aligned_layers():
    x = np.arange(10_000.0)
    a, b = np.ones(10_000), np.full(10_000, 2.0)
    b[5] = np.nan
    bx, (ba, bb) = bucket_mean(x, [a, b], 100)
    assert len(bx) <= 101
    np.testing.assert_allclose(ba, 1.0)
    np.testing.assert_allclose(bb, 2.0)


def test_a_point_without_a_finite_x_is_in_no_column():
    """NaN x sorts after +inf: it had broken the cut into columns (a broadcast error). The
    x axes never give one; here the points that have an x are cut as if it were not there."""
    x, y = _series()
    holes = [17, 50_000, 99_998]
    bad_x = x.copy()
    bad_x[holes] = np.nan
    keep = np.isfinite(bad_x)
    for xlim in (None, (40_000.0, 60_000.0)):
        got = decimate_many(bad_x, [y], 700, xlim)[0]
        want = decimate_many(x[keep], [y[keep]], 700, xlim)[0]
        assert np.isfinite(got.x).all() and np.isfinite(got.col_x).all()
        assert np.array_equal(got.x, want.x) and np.array_equal(got.y, want.y)
        assert np.array_equal(got.col_min, want.col_min)
