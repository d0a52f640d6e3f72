"""A y range over values a few ULPs apart (an EMA of a constant) is a flat one: padded by 5 %
of the value, not by 5 % of the rounding (resplot/data/yrange.py)."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.smoothing import smooth
from resplot.data.yrange import padded, robust_limits, visible_limits


def _smoothed_constant() -> np.ndarray:
    steps = np.arange(500, dtype=np.int64)
    values = smooth(steps, np.full(500, 0.2), 0.6, 1.0)
    assert np.ptp(values) > 0  # the rounding this is about (not all exactly 0.2)
    return values


def test_a_zoomed_charts_range_over_rounding_is_flat():
    limits, clipped = visible_limits(_smoothed_constant())
    assert not clipped
    assert limits == pytest.approx((0.19, 0.21), abs=1e-9)


def test_a_charts_range_over_rounding_is_flat():
    assert padded(_smoothed_constant()) == pytest.approx((0.19, 0.21), abs=1e-9)
    assert robust_limits(np.concatenate([_smoothed_constant()] * 2)) is None


def test_a_small_real_range_is_still_fitted():
    values = 1e6 + np.array([0.0, 1e-3, 2e-3])  # 1e-9 of the value: data, not rounding
    lo, hi = visible_limits(values)[0]
    assert hi - lo == pytest.approx(2e-3 * 1.1)
