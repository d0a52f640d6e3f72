"""Raw points folded into fixed-width buckets with numpy: schema/store/folding.py's fine tiles from
decoded chunk columns, with no Python object a point.

The same aggregates as `schema.store.rollup.fold` bucket by bucket
(tests/schema/test_folding_numpy.py compares every field over random series with NaN, infinities,
ties and flags), packed in envelope.BUCKET_LAYOUT as `folding.pack_folded` packs them. One
difference: `vsum` adds a bucket's values in numpy's order (pairwise within long buckets) where the
builtin `sum` adds them one by one, so the two can differ in the last bits, as two groupings of the
same points already do (`reslog check` compares vsum with a relative tolerance of 1e-9).

Imported only where numpy is (the agent falls back to schema/store/folding.py without it).
"""

from __future__ import annotations

import numpy as np

from schema.store.rollup import AGG_COLUMNS, AGG_FLOATS, MAX_BITS, NOT_FLAGS

# envelope.BUCKET_LAYOUT as a structured dtype, from the same definition (an aggregate's
# fields in AGG_COLUMNS order, float where AGG_FLOATS says, then the NULL flags): little-endian,
# no padding, the same bytes as struct.pack("<" + ...) of each row.
BUCKET_DTYPE = np.dtype(
    [(c, "<f8" if c in AGG_FLOATS else "<i8") for c in AGG_COLUMNS] + [("nulls", "<i8")]
)


def fold_columns(
    steps: np.ndarray, walls: np.ndarray, values: np.ndarray, start: int, width: int
) -> np.ndarray:
    """The buckets of `width` steps from `start` holding points (steps sorted, then by id), as
    a BUCKET_DTYPE array by step: what `folding.fold_width` gives, packed."""
    n = len(steps)
    out = np.zeros(0, dtype=BUCKET_DTYPE)
    if n == 0:
        return out
    bucket = (steps - start) // width
    starts = np.flatnonzero(np.concatenate(([True], bucket[1:] != bucket[:-1])))
    ends = np.concatenate((starts[1:], [n]))
    out = np.zeros(len(starts), dtype=BUCKET_DTYPE)
    finite = np.isfinite(values)
    if finite.all():
        return _fold_finite(out, steps, walls, values, starts, ends)
    return _fold_any(out, steps, walls, values, starts, ends, finite)


def _fold_finite(out, steps, walls, values, starts, ends) -> np.ndarray:
    """_fold_any() where every value is finite (a training metric's usual tile): no NaN or
    infinity to count, mask or leave out, so a third of the passes over the points go (the
    same bytes: tests/schema/test_folding_numpy.py)."""
    n = len(values)
    out["n"] = ends - starts
    low = np.minimum.reduceat(values, starts)
    high = np.maximum.reduceat(values, starts)
    per_point = np.repeat(np.arange(len(starts)), ends - starts)
    index = np.arange(n)
    big = np.int64(n)
    first_min = np.minimum.reduceat(np.where(values == low[per_point], index, big), starts)
    first_max = np.minimum.reduceat(np.where(values == high[per_point], index, big), starts)
    out["vmin"] = values[first_min]
    out["vmax"] = values[first_max]
    out["min_at"] = steps[first_min]
    out["max_at"] = steps[first_max]
    with np.errstate(over="ignore", invalid="ignore"):  # huge values: +inf, -inf, then NaN
        vsum = np.add.reduceat(values, starts)
    sum_nan = np.isnan(vsum)
    out["vsum"] = np.where(sum_nan, 0.0, vsum)
    out["step_lo"] = steps[starts]
    out["step_hi"] = steps[ends - 1]
    out["last"] = values[ends - 1]
    out["wall_lo"] = np.minimum.reduceat(walls, starts)
    out["wall_hi"] = np.maximum.reduceat(walls, starts)
    has_finite = np.ones(len(starts), dtype=bool)
    out["bits"] = _bits(values, np.ones(n, dtype=bool), starts, has_finite, low, high)
    out["nulls"] = sum_nan.astype(np.int64)  # nan, posinf, neginf, nonfinite_at: 0 as zeroed
    return out


def _fold_any(out, steps, walls, values, starts, ends, finite) -> np.ndarray:
    """fold_columns() of points with NaN or infinities among them."""
    n = len(values)
    index = np.arange(n)
    is_nan = np.isnan(values)
    out["n"] = ends - starts
    out["nan"] = np.add.reduceat(is_nan.astype(np.int64), starts)
    out["posinf"] = np.add.reduceat((values == np.inf).astype(np.int64), starts)
    out["neginf"] = np.add.reduceat((values == -np.inf).astype(np.int64), starts)
    has_finite = np.logical_or.reduceat(finite, starts)
    low = np.minimum.reduceat(np.where(finite, values, np.inf), starts)
    high = np.maximum.reduceat(np.where(finite, values, -np.inf), starts)
    per_point = np.repeat(np.arange(len(starts)), ends - starts)
    big = np.int64(n)
    # The first point equal to the extreme: its step is the smallest (points by step), and its
    # value is the one the builtin min() keeps (the first of equals: -0.0 or 0.0 as logged).
    first_min = np.minimum.reduceat(
        np.where(finite & (values == low[per_point]), index, big), starts
    )
    first_max = np.minimum.reduceat(
        np.where(finite & (values == high[per_point]), index, big), starts
    )
    safe_min = np.minimum(first_min, n - 1)
    safe_max = np.minimum(first_max, n - 1)
    out["vmin"] = np.where(has_finite, values[safe_min], 0.0)
    out["vmax"] = np.where(has_finite, values[safe_max], 0.0)
    out["min_at"] = np.where(has_finite, steps[safe_min], 0)
    out["max_at"] = np.where(has_finite, steps[safe_max], 0)
    with np.errstate(over="ignore", invalid="ignore"):
        vsum = np.add.reduceat(np.where(finite, values, 0.0), starts)
    sum_nan = np.isnan(vsum)
    out["vsum"] = np.where(sum_nan, 0.0, vsum)
    out["step_lo"] = steps[starts]
    out["step_hi"] = steps[ends - 1]
    last = values[ends - 1]  # the newest point of the last step: points are by step then id
    last_nan = np.isnan(last)
    out["last"] = np.where(last_nan, 0.0, last)
    out["wall_lo"] = np.minimum.reduceat(walls, starts)
    out["wall_hi"] = np.maximum.reduceat(walls, starts)
    out["bits"] = _bits(values, finite, starts, has_finite, low, high)
    bad = np.minimum.reduceat(np.where(finite, big, index), starts)
    out["nonfinite_at"] = np.where(bad < big, steps[np.minimum(bad, n - 1)], 0)
    out["nulls"] = sum_nan.astype(np.int64) + 2 * last_nan.astype(np.int64)
    return out


def _bits(values, finite, starts, has_finite, low, high) -> np.ndarray:
    """schema.store.rollup._bits a bucket: 0 without a finite value, the OR of the values where
    every finite one is an integer in [0, MAX_BITS), else NOT_FLAGS."""
    not_flags = np.where(has_finite, NOT_FLAGS, 0)
    flags = has_finite & (low >= 0) & (high < MAX_BITS)
    if not flags.any():  # an ordinary float metric (negative values): no bucket holds flags
        return not_flags
    with np.errstate(invalid="ignore"):
        integral = ~finite | (values == np.floor(values))
    flags &= np.logical_and.reduceat(integral, starts)
    if not flags.any():  # a loss, a learning rate: not integers
        return not_flags
    ints = np.where(finite & (values >= 0) & (values < MAX_BITS), values, 0.0).astype(np.int64)
    ored = np.bitwise_or.reduceat(ints, starts)
    return np.where(flags, ored, not_flags)


def packed(
    steps: np.ndarray, walls: np.ndarray, values: np.ndarray, start: int, width: int
) -> bytes:
    """fold_columns() as the bytes of BUCKET_LAYOUT rows (the agent's fine tiles)."""
    return fold_columns(steps, walls, values, start, width).tobytes()
