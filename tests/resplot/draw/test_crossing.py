"""Where a line's segments cross a zoomed range's edges (resplot/draw/limits.py, _crossing):
the y a zoom between two points of a sparse series fits, each segment found checked to cross."""

from __future__ import annotations

import numpy as np

from resplot.draw.limits import _crossing


def test_a_segment_across_each_edge_gives_its_y_there():
    x, y = np.array([0.0, 10.0, 20.0]), np.array([0.0, 10.0, 40.0])
    assert np.allclose(_crossing(x, y, (5.0, 15.0)), [5.0, 25.0])


def test_an_edge_on_a_point_or_outside_the_line_is_no_crossing():
    x, y = np.array([0.0, 10.0, 20.0]), np.array([0.0, 10.0, 40.0])
    assert len(_crossing(x, y, (10.0, 30.0))) == 0  # on a point: the point is in view
    assert len(_crossing(x, y, (-5.0, 25.0))) == 0
    assert len(_crossing(x[:1], y[:1], (-5.0, 5.0))) == 0


def test_a_segment_to_a_non_finite_point_crosses_nothing():
    x, y = np.array([0.0, 10.0, 20.0]), np.array([0.0, np.nan, 40.0])
    assert len(_crossing(x, y, (5.0, 15.0))) == 0


def test_out_of_order_a_segment_found_still_crosses():
    """x out of order: what the binary search lands on is kept only where that segment does
    cross the edge."""
    rng = np.random.default_rng(31)
    for _ in range(500):
        x = rng.uniform(0.0, 100.0, int(rng.integers(2, 12)))
        y = rng.uniform(-1.0, 1.0, len(x))
        edges = tuple(sorted(rng.uniform(0.0, 100.0, 2)))
        segments = [(x[k], x[k + 1], y[k], y[k + 1]) for k in range(len(x) - 1) if x[k] < x[k + 1]]
        for value in _crossing(x, y, edges):
            assert any(
                x0 < e < x1 and np.isclose(value, y0 + (y1 - y0) * (e - x0) / (x1 - x0))
                for x0, x1, y0, y1 in segments
                for e in edges
            )
