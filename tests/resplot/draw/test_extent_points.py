"""A track's data limits (resplot/draw/limits.py, extent_points): what `Axes.relim` takes from
its points, the extents of the finite ones and each axis's smallest positive value (a log
axis's limit), on a fast path where every value is finite."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from resplot.draw.limits import extent_points

VALUES = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0, np.nan, np.inf, -np.inf, 1e308])


def _by_definition(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if not len(xs):
        return np.empty((0, 2))
    points = [(xs.min(), ys.min()), (xs.max(), ys.max())]
    px, py = xs[xs > 0], ys[ys > 0]
    if len(px) or len(py):
        points.append((px.min() if len(px) else xs.min(), py.min() if len(py) else ys.min()))
    return np.array(points)


def test_the_points_are_the_definitions_for_any_mix_of_values():
    rng = np.random.default_rng(31)
    for _ in range(5000):
        n = int(rng.integers(0, 9))
        xs, ys = rng.choice(VALUES, n), rng.choice(VALUES, n)  # 1e308 pairs overflow a sum
        want, got = _by_definition(xs, ys), extent_points(xs, ys)
        assert want.shape == got.shape and np.array_equal(want, got), (xs, ys)


def test_the_points_give_relims_limits_on_a_log_axis():
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    ys = np.array([0.0, 0.02, 5.0, -1.0])  # a log axis ignores 0 and below
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot(xs, ys)
    ax.set_yscale("log")
    ax.relim()
    ours = fig.add_subplot()
    ours.set_yscale("log")
    ours.update_datalim(extent_points(xs, ys))
    assert np.allclose(ours.dataLim.get_points(), ax.dataLim.get_points())
    assert ours.dataLim.minposy == ax.dataLim.minposy == 0.02
