"""TensorBoard's debiased EMA, defined in steps: the same weight gives the same curve at every
zoom and every run length.

TensorBoard (vz_line_chart2) smooths point by point:

    last = last * w + (1 - w) * y;  n += 1;  smoothed = last / (1 - w ** n)

The debias divides by the total weight the EMA has accumulated, so the first points are not
pulled toward zero. Here the decay between two points is `w ** (Δstep / unit)`, where `unit` is
the series' logged step spacing (unit_of: from its summary, so it is the same whatever part of
it a chart shows): on evenly logged raw points that is exactly TensorBoard's result, a series
with gaps (a resume, a sparse validation key) is not smoothed across them as if they were one
point apart, and a zoomed-out chart smoothing bucket means (each the exact mean of its points,
from the rollups' sums) decays by the steps between them, not by one sample: weight 0.6 smooths
over ~2.5 logged steps whether the chart shows 2,000 raw points or 782 buckets of 128 steps
(where it then leaves each bucket's mean as it is). NaN and ±inf are passed through at their
positions and never enter the EMA, so one bad value does not poison everything after it.

Not every series is smoothed: learning rates, system telemetry and validation metrics are
drawn as logged on every page (`smoothable`).

Computed without a Python loop: within a block where the accumulated log-decay stays inside the
float64 exponent range, the recurrence `y_i = a_i y_(i-1) + (1 - a_i) x_i` is a scaled cumsum.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from itertools import pairwise

import numpy as np

from resplot.data.key_roles import ROLES
from schema.store.rollup import STEP_HI, STEP_LO, N

# exp(±600) stays far from float64 overflow (~exp(709)); blocks are cut so exponents stay inside.
_BLOCK_LOG = 600.0
# A point whose decay since the previous one is below exp(-40) (4e-18, under half an ulp of 1)
# forgets the past: 1 - a rounds to 1 and a * y_prev is lost against x, so y = x there. A
# zoomed-out chart smoothing 128-step bucket means at weight 0.6 decays by exp(-65) a point:
# through the blocks below that was one block per 9 points (19 ms a series of 1,500 buckets).
_FORGET_LOG = -40.0


def _ema(log_a: np.ndarray, x: np.ndarray, prev: float = 0.0) -> np.ndarray:
    """y_i = a_i * y_(i-1) + (1 - a_i) * x_i with y_(-1) = prev, where a_i = exp(log_a[i])."""
    n = len(x)
    out = np.empty(n, dtype=np.float64)
    forget = log_a < _FORGET_LOG
    if n and not forget.any():  # raw points, fine buckets: one run (a zoom smooths ~50 series)
        _ema_run(log_a, x, prev, out)
        return out
    out[forget] = x[forget]
    # Runs of points that remember: [lo, hi) between forgetting ones, each run's prev the point
    # before it.
    flags = np.ones(n + 2, dtype=bool)
    flags[1:-1] = forget
    edges = np.flatnonzero(flags[1:] != flags[:-1])
    for lo, hi in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        _ema_run(log_a[lo:hi], x[lo:hi], prev if lo == 0 else float(out[lo - 1]), out[lo:hi])
    return out


def _ema_run(log_a: np.ndarray, x: np.ndarray, prev: float, out: np.ndarray) -> None:
    """_ema of a run of points with a_i >= exp(_FORGET_LOG), into `out`."""
    n = len(x)
    gain = -np.expm1(log_a)  # 1 - a_i, accurate when a_i is close to 1
    cum = np.cumsum(log_a)  # non-increasing
    if -cum[-1] < _BLOCK_LOG:
        bounds = [0, n]  # one block
    else:
        # Block boundaries: every time the accumulated decay passes another _BLOCK_LOG.
        cuts = np.searchsorted(-cum, np.arange(_BLOCK_LOG, -cum[-1] + _BLOCK_LOG, _BLOCK_LOG))
        bounds = np.unique(np.concatenate(([0], cuts, [n]))).tolist()
    for lo, hi in pairwise(bounds):
        rel = cum[lo:hi] - (cum[lo - 1] if lo > 0 else 0.0)  # log of decay since block start
        y = np.exp(rel) * (prev + np.cumsum(gain[lo:hi] * x[lo:hi] * np.exp(-rel)))
        out[lo:hi] = y
        prev = y[-1]


def _check(weight: float) -> None:
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")


# Validation and evaluation series (their own names: a validation loss every 1,000 steps is a
# handful of points that smoothing would drag toward each other).
_HELD_OUT = ("valid", "val", "validation", "eval", "evaluation", "test")
_NEVER = tuple(ROLES["lr"]) + tuple(ROLES["valid_loss"]) + tuple(ROLES["valid_ppl"])
WARMUP_LEFT = 1e-4  # the weight the points before a zoomed view's warm-up may still have had


@functools.lru_cache(maxsize=4096)
def smoothable(key: str) -> bool:
    """Whether a chart smooths `key`: never a learning rate, system telemetry (sys/...) or a
    validation / evaluation metric, on any page. (Kept by key: a live poll asked it of each
    live series through ~30 glob matches.)"""
    if key.startswith("sys/") or any(fnmatch.fnmatchcase(key, name) for name in _NEVER):
        return False
    parts = key.lower().replace("-", "_").split("/")
    return not any(p in _HELD_OUT or p.split("_")[0] in _HELD_OUT for p in parts)


def unit_of(agg: tuple) -> float:
    """The logged step spacing of a series (its summary aggregate): the steps one weight of
    decay spans (1 for a key logged every step, 4 for telemetry every 4th)."""
    if agg[N] < 2 or agg[STEP_HI] <= agg[STEP_LO]:
        return 1.0
    return max(1.0, (agg[STEP_HI] - agg[STEP_LO]) / (agg[N] - 1))


def warmup_steps(weight: float, unit: float) -> int:
    """How far before a zoomed view the EMA must start for the points left out to weigh less
    than WARMUP_LEFT (0 without smoothing)."""
    _check(weight)
    if weight == 0.0:
        return 0
    return math.ceil(math.log(WARMUP_LEFT) / math.log(weight) * unit)


def smooth(
    steps: np.ndarray, values: np.ndarray, weight: float, unit: float | None = None
) -> np.ndarray:
    """Debiased EMA of `values` (a new array, same length); `weight` in [0, 1), decaying by
    weight ** (Δstep / unit) (unit None: the median spacing of `steps`)."""
    return Smoother(weight, unit).update(steps, values)


class Smoother:
    """Smooths a series that only grows (the cache appends): each update() costs O(new points).

    The EMA state (un-debiased value, accumulated log-decay, last finite step) carries over, so
    the result equals smoothing the whole series at once.
    """

    MIN_BASE_POINTS = 16  # below this the step spacing is re-estimated from scratch

    def __init__(self, weight: float, unit: float | None = None) -> None:
        _check(weight)
        self.weight = weight
        self.unit = unit  # steps a weight of decay spans (None: the median spacing seen)
        self._reset()

    def _reset(self) -> None:
        self.n = 0
        self._buf = np.empty(0)
        self.out = self._buf
        self._y = 0.0  # EMA without debias
        self._log_decay = 0.0  # sum of log a over finite points so far
        self._last_step: float | None = None
        self._base: float | None = self.unit
        self._base_points = 0 if self.unit is None else self.MIN_BASE_POINTS

    def update(self, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The smoothed series (a view, valid until the next update)."""
        values = np.asarray(values, dtype=np.float64)
        if len(values) < self.n:
            self._reset()
        if self._base_points < self.MIN_BASE_POINTS and len(values) > self._base_points:
            self._reset()  # too few points so far to trust the spacing estimate: start over
        new_v = values[self.n :]
        new_out = new_v.copy()
        if self.weight > 0.0 and len(new_v):
            finite = np.isfinite(new_v)
            x = new_v[finite]
            if len(x):
                s = np.asarray(steps[self.n :], dtype=np.float64)[finite]
                new_out[finite] = self._advance(s, x)
        n = len(values)
        if n > len(self._buf):  # capacity doubling: appends cost O(new points)
            buf = np.empty(max(1024, 2 * n))
            buf[: self.n] = self._buf[: self.n]
            self._buf = buf
        self._buf[self.n : n] = new_out
        self.n = n
        self.out = self._buf[:n]
        return self.out

    def _advance(self, s: np.ndarray, x: np.ndarray) -> np.ndarray:
        prev_step = s[0] if self._last_step is None else self._last_step
        delta = np.empty_like(s)
        delta[0] = s[0] - prev_step
        np.subtract(s[1:], s[:-1], out=delta[1:])
        if self._base is None:
            positive = delta[delta > 0]
            self._base = float(np.median(positive)) if len(positive) else 1.0
            self._base_points = len(x)
        # A step that goes backwards or repeats (a resume re-logging steps) counts as one
        # spacing, which is what TensorBoard does for every point.
        units = np.where(delta > 0, delta / self._base, 1.0)
        if self._last_step is None:
            units[0] = 1.0
        log_a = np.maximum(units * np.log(self.weight), -_BLOCK_LOG)
        y = _ema(log_a, x, self._y)
        # The debias term is the EMA of ones, which has the closed form 1 - prod(a).
        cum = self._log_decay + np.cumsum(log_a)
        smoothed = y / -np.expm1(cum)
        self._y, self._log_decay, self._last_step = float(y[-1]), float(cum[-1]), float(s[-1])
        return smoothed


def smooth_buckets(
    first: np.ndarray, last: np.ndarray, means: np.ndarray, weight: float, unit: float = 1.0
) -> np.ndarray:
    """The EMA of a zoomed-out series, defined in steps as smooth() is on its points, one value
    a bucket: the mean over the bucket of what smooth() gives its points, each point taken as
    its bucket's mean (a bucket [first, last] of mean m holds (last - first) / unit + 1 points
    `unit` steps apart). Drawn at the bucket's middle it is the curve the raw points give,
    averaged over the bucket: the same curve at every zoom within that averaging. (Smoothing
    the means as points and drawing the state at each bucket's end put the curve half a
    bucket late: 0.32 of the noise off at weight 0.99 and 128-step buckets, against 0.02.)

    Over a bucket of n points from state y0 (the EMA one spacing before its first point), the
    points' EMA is y_k = m + (y0 - m) a^k: its mean m + (y0 - m) c with c = a (1 - a^n) /
    (n (1 - a)), its end m + (y0 - m) a^n. A gap of g spacings before a bucket (a resume, a
    sparse key) decays y0 by a^(g - 1) toward m, as smooth() weighs the first point after a
    gap. The debias divides by the same of a series of ones. NaN buckets pass through."""
    _check(weight)
    means = np.asarray(means, dtype=np.float64)
    out = means.copy()
    ok = np.isfinite(means)
    if weight == 0.0 or not ok.any():
        return out
    lo = np.asarray(first, dtype=np.float64)[ok]
    hi = np.asarray(last, dtype=np.float64)[ok]
    m = means[ok]
    log_a = math.log(weight)
    n = np.maximum((hi - lo) / unit + 1.0, 1.0)
    gap = np.ones(len(m))  # spacings from the previous bucket's last point to this first one
    gap[1:] = np.maximum((lo[1:] - hi[:-1]) / unit, 1.0)
    log_start = (gap - 1.0) * log_a  # y0 from the previous bucket's end
    log_end = np.maximum(log_start + n * log_a, -_BLOCK_LOG)  # the bucket's end from its y0
    c = weight * -np.expm1(n * log_a) / (n * -np.expm1(log_a))
    ends = _ema(log_end, m)  # the EMA at each bucket's last point (no debias)
    before = np.concatenate(([0.0], ends[:-1]))
    mean = m + (before - m) * np.exp(log_start) * c
    ones_end = -np.expm1(np.cumsum(log_end))  # the same of a series of ones: 1 - prod
    ones_before = np.concatenate(([0.0], ones_end[:-1]))
    ones_mean = 1.0 + (ones_before - 1.0) * np.exp(log_start) * c
    out[ok] = mean / ones_mean
    return out


def tensorboard_reference(values: list[float], weight: float) -> list[float]:
    """TensorBoard's loop, kept literal for tests and documentation (index-spaced points)."""
    last, num_accum, result = 0.0, 0, []
    for y in values:
        if not np.isfinite(y):
            result.append(y)
            continue
        last = last * weight + (1 - weight) * y
        num_accum += 1
        result.append(last / (1 - weight**num_accum))
    return result
