"""Per-pixel M4 decimation: the first, min, max and last point of each pixel column (Jugel et
al., "M4: A Visualization-Oriented Time Series Data Aggregation", VLDB 2014), each at its own
x, in the order they came.

A line drawn through them lights the pixels the line through every point lights: within a
column it runs first → min → max → last (or max before min), between columns from one column's
last point to the next one's first, as the raw line does. So a single-step loss spike survives
any zoom level. The columns are the chart's own pixel columns when a `Grid` is given (one for
every series of a chart, so runs compare column by column), else `pixels` equal slices of the
x range. NaN and ±inf are not drawable; their positions are returned separately (so the chart
marks them) and the line is broken in the pixel column that held them, instead of silently
bridging the gap.

A live series changes at its end only: with a `Reuse` (one a series, kept by its caller) a
decimation into the same grid keeps the last one's columns before the first point that changed
and cuts only the rest again. Each column is cut from its own points alone, so the result is
the array a whole decimation gives, element for element
(tests/resplot/data/test_decimate_reuse.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Grid:
    """A chart's pixel columns in x: column k holds x0 + k * dx <= x < x0 + (k + 1) * dx."""

    x0: float
    dx: float
    n: int

    @classmethod
    def of(cls, xlim: tuple[float, float], left_px: float, width_px: float) -> Grid:
        """The canvas pixel columns an axes spans: `xlim` drawn from display x `left_px` over
        `width_px` pixels (fractional: a figure's axes rarely start on a pixel edge)."""
        lo, hi = float(xlim[0]), float(xlim[1])
        width_px = max(float(width_px), 1e-9)
        dx = (hi - lo) / width_px if hi != lo else 1.0
        first = np.floor(left_px)
        n = int(np.ceil(left_px + width_px) - first)
        return cls(lo + (first - left_px) * dx, dx, max(n, 1))

    def edges(self) -> np.ndarray:
        return self.x0 + np.arange(self.n + 1) * self.dx


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
    grid: Grid | None = None,
) -> Decimated:
    """Reduce (x, y) to at most 4 points per pixel column over `xlim` (default: all data).

    `x` should be non-decreasing (steps, wall times, tokens); otherwise it is sorted first.
    One point on each side of `xlim` is kept so the line runs to the axes' edges.
    """
    return decimate_many(x, [y], pixels, xlim, grid=grid)[0]


def in_order(x: np.ndarray, *ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """`x` and each of `ys` by `x` (a stable sort), or as they are where `x` already rises, as a
    view's steps and most x axes do: then nothing is copied (a hover asks on every move)."""
    if len(x) > 1 and not np.all(x[1:] >= x[:-1]):
        order = np.argsort(x, kind="stable")
        return (x[order], *(y[order] for y in ys))
    return (x, *ys)


class Reuse:
    """What one series' last decimation into a grid worked from and gave (decimate_many's
    `reuse`): the next one cuts again only the columns from the first point that changed."""

    def __init__(self) -> None:
        self.grid: Grid | None = None  # None: nothing kept (the last one cut no grid's columns)
        self.x: np.ndarray | None = None  # the points as cut to the x range (sorted)
        self.ys: list[np.ndarray] = []
        self.out: list[Decimated] = []
        self.tails = 0  # decimations that cut the tail only (the tests read it)

    def keep(self, grid: Grid | None, x, ys: list, out: list[Decimated]) -> list[Decimated]:
        self.grid, self.x, self.ys, self.out = grid, x, ys, out
        return out

    def forget(self) -> None:
        self.keep(None, None, [], [])

    def first_column(self, x: np.ndarray, ys: list[np.ndarray], edges: np.ndarray) -> int:
        """The first column of `edges` (the kept grid's) whose points differ from the last
        decimation's (0: every column; past the last: none)."""
        old_x = self.x
        if old_x is None or len(ys) != len(self.ys) or np.may_share_memory(x, old_x):
            return 0  # (an array changed in place could not be told from the one kept)
        n = min(len(x), len(old_x))
        differ = x[:n] != old_x[:n]
        for y, old in zip(ys, self.ys, strict=True):
            if np.may_share_memory(y, old):
                return 0
            a, b = y[:n], old[:n]
            differ |= (a != b) & ~(np.isnan(a) & np.isnan(b))  # NaN where NaN was: the same
        k = int(np.argmax(differ)) if differ.any() else n
        if k == len(x) == len(old_x):
            return len(edges)  # nothing changed
        # Every point from k on lies in this column or a later one, before and now.
        at = min(float(v[k]) for v in (x, old_x) if k < len(v))
        if not np.isfinite(at):
            return 0  # (NaN orders before nothing: no column to start from)
        return int(np.searchsorted(edges, at, side="right")) - 1


def _joined(old: Decimated, new: Decimated, edge: float) -> Decimated:
    """`old`'s points and columns left of `edge`, then `new`'s (which has none left of it)."""

    def left(v: np.ndarray) -> int:
        return int(np.searchsorted(v, edge, side="left"))

    p, c = left(old.x), left(old.col_x)
    return Decimated(
        np.concatenate([old.x[:p], new.x]),
        np.concatenate([old.y[:p], new.y]),
        np.concatenate([old.nan_x[: left(old.nan_x)], new.nan_x]),
        np.concatenate([old.posinf_x[: left(old.posinf_x)], new.posinf_x]),
        np.concatenate([old.neginf_x[: left(old.neginf_x)], new.neginf_x]),
        np.concatenate([old.col_x[:c], new.col_x]),
        np.concatenate([old.col_min[:c], new.col_min]),
        np.concatenate([old.col_max[:c], new.col_max]),
    )


def decimate_many(
    x: np.ndarray,
    ys: list[np.ndarray],
    pixels: int,
    xlim: tuple[float, float] | None = None,
    assume_sorted: bool = False,
    line_max: float = 4,
    grid: Grid | None = None,
    reuse: Reuse | None = None,
) -> list[Decimated]:
    """decimate() for several series on the same x (a raw series and its smoothed curve):
    the sort check, the range cut and the column bounds are computed once. At most `line_max`
    points a pixel column are kept as they are (a line); more are cut into columns, those of
    `grid` when given; with `reuse` (the same series' last decimation into that grid), only
    the columns from the first point that changed are cut again."""
    x = np.asarray(x, dtype=np.float64)
    ys = [np.asarray(y, dtype=np.float64) for y in ys]
    for y in ys:
        if len(x) != len(y):
            raise ValueError(f"x and y differ in length ({len(x)} != {len(y)})")
    if not assume_sorted:
        x, *ys = in_order(x, *ys)
    pixels = max(int(pixels), 1)
    if xlim is not None and len(x):
        lo = max(int(np.searchsorted(x, xlim[0], side="left")) - 1, 0)
        hi = min(int(np.searchsorted(x, xlim[1], side="right")) + 1, len(x))
        x, ys = x[lo:hi], [y[lo:hi] for y in ys]
    placed = np.isfinite(x)
    if not placed.all():
        # No column holds a point without a finite x (sorted last, NaN broke the cut); the
        # x axes never give one (xaxis.x_values: a run it cannot place is its track's note).
        x, ys = x[placed], [y[placed] for y in ys]
    n = len(x)
    if n <= line_max * pixels:
        if reuse is not None:
            reuse.forget()
        out = []
        for y in ys:
            bad, nan_x, pinf_x, ninf_x = _nonfinite(x, y)
            out_y = np.where(bad, np.nan, y) if len(nan_x) + len(pinf_x) + len(ninf_x) else y.copy()
            out.append(Decimated(x.copy(), out_y, nan_x, pinf_x, ninf_x))
        return out

    if grid is not None:
        edges = grid.edges()
    else:
        x0, x1 = float(x[0]), float(x[-1])
        if xlim is not None:
            x0, x1 = max(x0, xlim[0]), min(x1, xlim[1])
        if not x1 > x0:
            x1 = x0 + 1.0
        edges = np.linspace(x0, x1, pixels + 1)
    edges[-1] = np.inf
    edges[0] = -np.inf  # the point kept left of xlim joins the first column
    if reuse is not None and grid is not None:
        return _decimate_reusing(reuse, x, ys, edges, grid)
    if reuse is not None:
        reuse.forget()  # (columns of no grid: nothing to cut again from)
    return _cut(x, ys, edges)


def _cut(x: np.ndarray, ys: list[np.ndarray], edges: np.ndarray) -> list[Decimated]:
    """Each of `ys` cut into the columns of `edges` (the first and last open-ended)."""
    bounds = np.searchsorted(x, edges, side="left")
    starts, ends = bounds[:-1], bounds[1:]
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    return [_columns(x, y, starts, ends) for y in ys]


def _decimate_reusing(
    reuse: Reuse, x: np.ndarray, ys: list[np.ndarray], edges: np.ndarray, grid: Grid
) -> list[Decimated]:
    """decimate_many's cut into `grid` (`edges`), from `reuse`'s last one where it holds (a
    cut into columns depends on the points and the columns alone)."""
    c0 = reuse.first_column(x, ys, edges) if reuse.grid == grid else 0
    if c0 >= len(edges) - 1:
        out = reuse.out  # the same points: the same columns
    elif c0 <= 0:
        out = _cut(x, ys, edges)
    else:
        edge = float(edges[c0])
        a = int(np.searchsorted(x, edge, side="left"))
        tail = _cut(x[a:], [y[a:] for y in ys], edges)
        out = [_joined(old, new, edge) for old, new in zip(reuse.out, tail, strict=True)]
        reuse.tails += 1
    return reuse.keep(grid, x, ys, out)


def _columns(x: np.ndarray, y: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Decimated:
    """M4 of the columns [starts[k], ends[k]) (contiguous, covering x): each column's first,
    min, max and last point at their own x, in x order, a point once."""
    bad, nan_x, pinf_x, ninf_x = _nonfinite(x, y)
    has_bad = len(nan_x) + len(pinf_x) + len(ninf_x) > 0
    yv = np.where(bad, np.nan, y) if has_bad else y
    n, last = len(x), ends - 1
    # fmin/fmax skip NaN; a column of NaN only gives NaN, which breaks the line as it should.
    mins = np.fmin.reduceat(yv, starts)
    maxs = np.fmax.reduceat(yv, starts)
    column = np.repeat(np.arange(len(starts)), ends - starts)
    at = np.arange(n)
    # The first point holding each column's extreme (its own x: a spike stays where it was).
    min_at = np.minimum.reduceat(np.where(yv == mins[column], at, n), starts)
    max_at = np.minimum.reduceat(np.where(yv == maxs[column], at, n), starts)
    min_at = np.where(min_at < n, min_at, starts)
    max_at = np.where(max_at < n, max_at, starts)
    pos = np.stack([starts, np.minimum(min_at, max_at), np.maximum(min_at, max_at), last], axis=1)
    mid_x = 0.5 * (x[starts] + x[last])
    if has_bad:
        # Break the line after each column that held a non-finite value.
        bad_cols = np.add.reduceat(bad.astype(np.int64), starts) > 0
        pos = np.concatenate([pos, np.full((len(starts), 1), -1)], axis=1)
        pos[~bad_cols, 4] = last[~bad_cols]  # a repeat, dropped below
    flat = pos.ravel()
    keep = np.ones(len(flat), dtype=bool)
    keep[1:] = flat[1:] != flat[:-1]  # a point once (first = min, max = last, ...)
    flat = flat[keep]
    if not has_bad:  # no breaks (np.roll alone is ~10 us of Python)
        return Decimated(x[flat], yv[flat], nan_x, pinf_x, ninf_x, mid_x, mins, maxs)
    breaks = flat < 0
    out_x = x[np.where(breaks, np.maximum(np.roll(flat, 1), 0), flat)]
    out_y = np.where(breaks, np.nan, yv[np.maximum(flat, 0)])
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
