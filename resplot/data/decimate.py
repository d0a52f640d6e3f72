"""Per-pixel min/max decimation (M4: first, min, max, last of each pixel column).

A line drawn from the result is visually identical to the raw one at that width: every pixel
column keeps its extremes, so a single-step loss spike survives any zoom level. NaN and ±inf
are not drawable; their positions are returned separately (so the chart marks them) and the line
is broken in the pixel column that held them, instead of silently bridging the gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Decimated:
    x: np.ndarray
    y: np.ndarray  # NaN entries break the line where the raw data had NaN/inf
    nan_x: np.ndarray  # x of NaN points in range
    posinf_x: np.ndarray
    neginf_x: np.ndarray
    # Per pixel column (only when the data was decimated): centre x, min and max. Dense data
    # is drawn as this envelope, a filled polygon: Agg fills it ~20x faster than it strokes
    # the equivalent zig-zag line, and it covers the same pixels.
    col_x: np.ndarray | None = None
    col_min: np.ndarray | None = None
    col_max: np.ndarray | None = None

    @property
    def nonfinite_x(self) -> np.ndarray:
        return np.concatenate((self.nan_x, self.posinf_x, self.neginf_x))


def _nonfinite(
    x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # A finite sum proves every value finite (NaN and ±inf propagate) without allocating a
    # mask; a sum that overflows only sends finite data down the exact path below.
    with np.errstate(over="ignore", invalid="ignore"):
        all_finite = bool(np.isfinite(np.add.reduce(y)))
    bad = np.zeros(len(y), dtype=bool) if all_finite else ~np.isfinite(y)
    if all_finite or not bad.any():
        empty = np.empty(0)
        return bad, empty, empty, empty
    yb = y[bad]
    xb = x[bad]
    return bad, xb[np.isnan(yb)], xb[yb == np.inf], xb[yb == -np.inf]


def decimate(
    x: np.ndarray,
    y: np.ndarray,
    pixels: int,
    xlim: tuple[float, float] | None = None,
) -> Decimated:
    """Reduce (x, y) to at most ~4 points per pixel column over `xlim` (default: all data).

    `x` should be non-decreasing (steps, wall times, tokens); otherwise it is sorted first.
    One point on each side of `xlim` is kept so the line runs to the axes' edges.
    """
    return decimate_many(x, [y], pixels, xlim)[0]


def decimate_many(
    x: np.ndarray,
    ys: list[np.ndarray],
    pixels: int,
    xlim: tuple[float, float] | None = None,
    assume_sorted: bool = False,
    line_max: float = 4,
) -> list[Decimated]:
    """decimate() for several series on the same x (a raw series and its smoothed curve):
    the sort check, the range cut and the column bounds are computed once. At most `line_max`
    points a pixel column are kept as they are (a line); more are cut into columns."""
    x = np.asarray(x, dtype=np.float64)
    ys = [np.asarray(y, dtype=np.float64) for y in ys]
    for y in ys:
        if len(x) != len(y):
            raise ValueError(f"x and y differ in length ({len(x)} != {len(y)})")
    if not assume_sorted and len(x) > 1 and not np.all(x[1:] >= x[:-1]):
        order = np.argsort(x, kind="stable")
        x, ys = x[order], [y[order] for y in ys]
    pixels = max(int(pixels), 1)
    if xlim is not None and len(x):
        lo = max(int(np.searchsorted(x, xlim[0], side="left")) - 1, 0)
        hi = min(int(np.searchsorted(x, xlim[1], side="right")) + 1, len(x))
        x, ys = x[lo:hi], [y[lo:hi] for y in ys]
    n = len(x)
    if n <= line_max * pixels:
        out = []
        for y in ys:
            bad, nan_x, pinf_x, ninf_x = _nonfinite(x, y)
            out_y = np.where(bad, np.nan, y) if len(nan_x) + len(pinf_x) + len(ninf_x) else y.copy()
            out.append(Decimated(x.copy(), out_y, nan_x, pinf_x, ninf_x))
        return out

    x0, x1 = float(x[0]), float(x[-1])
    if xlim is not None:
        x0, x1 = max(x0, xlim[0]), min(x1, xlim[1])
    if not x1 > x0:
        x1 = x0 + 1.0
    edges = np.linspace(x0, x1, pixels + 1)
    edges[-1] = np.inf
    edges[0] = -np.inf  # the point kept left of xlim joins the first column
    bounds = np.searchsorted(x, edges, side="left")
    starts, ends = bounds[:-1], bounds[1:]
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    last = ends - 1
    mid_x = 0.5 * (x[starts] + x[last])
    return [_columns(x, y, starts, last, mid_x) for y in ys]


def _columns(
    x: np.ndarray, y: np.ndarray, starts: np.ndarray, last: np.ndarray, mid_x: np.ndarray
) -> Decimated:
    bad, nan_x, pinf_x, ninf_x = _nonfinite(x, y)
    has_bad = len(nan_x) + len(pinf_x) + len(ninf_x) > 0
    yv = np.where(bad, np.nan, y) if has_bad else y
    # fmin/fmax skip NaN; a column of NaN only gives NaN, which breaks the line as it should.
    mins = np.fmin.reduceat(yv, starts)
    maxs = np.fmax.reduceat(yv, starts)
    first_y, last_y = yv[starts], yv[last]
    cols = np.stack(
        [
            np.stack([x[starts], mid_x, mid_x, x[last]], axis=1),
            np.stack([first_y, mins, maxs, last_y], axis=1),
        ]
    )
    if has_bad:
        # Break the line after each column that held a non-finite value.
        bad_cols = np.add.reduceat(bad.astype(np.int64), starts) > 0
        extra = np.full((2, len(starts), 1), np.nan)
        extra[0, :, 0] = x[last]
        cols = np.concatenate([cols, extra], axis=2)
        flat_keep = np.ones(cols.shape[1:], dtype=bool)
        flat_keep[~bad_cols, 4] = False
        out_x, out_y = cols[0][flat_keep], cols[1][flat_keep]
    else:
        out_x, out_y = cols[0].ravel(), cols[1].ravel()
    return Decimated(out_x, out_y, nan_x, pinf_x, ninf_x, mid_x, mins, maxs)


def bucket_mean(
    x: np.ndarray, ys: list[np.ndarray], pixels: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Mean per pixel column of several aligned series (for stacked areas, where min/max of
    each layer would not add up). NaN entries are ignored within a column."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) <= 2 * max(pixels, 1):
        return x, [np.asarray(y, dtype=np.float64) for y in ys]
    edges = np.linspace(x[0], x[-1], pixels + 1)
    edges[-1] = np.inf
    starts = np.unique(np.searchsorted(x, edges[:-1], side="left"))
    starts = starts[starts < len(x)]
    counts = np.diff(np.append(starts, len(x)))
    out_x = np.add.reduceat(x, starts) / counts
    out = []
    for y in ys:
        y = np.asarray(y, dtype=np.float64)
        ok = np.isfinite(y)
        total = np.add.reduceat(np.where(ok, y, 0.0), starts)
        n = np.add.reduceat(ok.astype(np.int64), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(n > 0, total / np.maximum(n, 1), np.nan))
    return out_x, out
