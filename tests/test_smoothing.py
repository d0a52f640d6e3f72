"""Debiased EMA smoothing (TensorBoard's formula, weighted by step distance); no Qt."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.smoothing import Smoother, smooth, tensorboard_reference


def test_matches_a_hand_computed_tensorboard_example():
    # w = 0.5, values 1, 2, 3 at steps 0, 1, 2:
    #   last = 0.5 → debias 1 - 0.5   = 0.5  → 1.0
    #   last = 1.25 → debias 1 - 0.25 = 0.75 → 1.6667
    #   last = 2.125 → debias 1 - 0.125 = 0.875 → 2.4286
    out = smooth(np.array([0, 1, 2]), np.array([1.0, 2.0, 3.0]), 0.5)
    np.testing.assert_allclose(out, [1.0, 1.25 / 0.75, 2.125 / 0.875])


@pytest.mark.parametrize("weight", [0.0, 0.1, 0.6, 0.9, 0.99, 0.999])
def test_evenly_spaced_steps_equal_tensorboard_loop(weight):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(3000).cumsum()
    steps = np.arange(3000) * 10  # logged every 10 steps: spacing is the unit
    expected = tensorboard_reference(list(values), weight)
    np.testing.assert_allclose(smooth(steps, values, weight), expected, rtol=1e-9, atol=1e-9)


def test_long_series_with_strong_decay_stays_finite():
    values = np.random.default_rng(1).standard_normal(200_000)
    out = smooth(np.arange(len(values)), values, 0.05)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[:500], tensorboard_reference(list(values[:500]), 0.05))


def test_first_point_is_not_pulled_toward_zero():
    out = smooth(np.arange(3), np.array([100.0, 100.0, 100.0]), 0.99)
    np.testing.assert_allclose(out, [100.0, 100.0, 100.0])


def test_step_gap_decays_by_the_distance():
    # Logged every step, then a gap of 10 steps: across the gap the history weighs 0.5**10
    # instead of 0.5, so the new value dominates. Hand loop with a_i = w ** (Δstep / 1):
    steps = np.array([*range(10), 19])
    values = np.array([0.0] * 10 + [1.0])
    last = total = 0.0
    prev = 0
    for s, v in zip(steps, values, strict=True):
        a = 0.5 ** max(s - prev, 1)
        last, total, prev = a * last + (1 - a) * v, a * total + (1 - a), s
    out = smooth(steps, values, 0.5)
    assert out[-1] == pytest.approx(last / total)
    assert out[-1] > 0.99  # TensorBoard's index EMA gives 0.5 here


def test_nan_and_inf_pass_through_and_do_not_poison_the_ema():
    values = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, 3.0])
    steps = np.array([0, 1, 2, 3, 4, 5])
    out = smooth(steps, values, 0.6)
    assert np.isnan(out[2]) and out[3] == np.inf and out[4] == -np.inf
    assert np.isfinite(out[[0, 1, 5]]).all()
    clean = smooth(np.array([0, 1, 5]), np.array([1.0, 2.0, 3.0]), 0.6)
    np.testing.assert_allclose(out[[0, 1, 5]], clean)


def test_incremental_updates_equal_one_pass():
    rng = np.random.default_rng(2)
    values = rng.standard_normal(5000)
    values[[7, 700]] = np.nan
    steps = np.arange(5000) * 3
    smoother = Smoother(0.8)
    for n in (1, 2, 15, 16, 17, 999, 1000, 4999, 5000):
        out = smoother.update(steps[:n], values[:n])
        assert len(out) == n
    np.testing.assert_allclose(out, smooth(steps, values, 0.8), rtol=1e-9, equal_nan=True)


def test_bad_weight_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        smooth(np.arange(3), np.ones(3), 1.0)
