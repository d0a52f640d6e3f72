"""A series' view (SeriesView) worked out from the concatenated columns of its tiles: raw points
as they are, buckets as the line through each one's extremes and last point (resplot/data/views.py
says why). No Qt here, no cache: views.py gathers the tiles, whole_level.py keeps a settled
series' whole level worked out once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from resplot.data.tiles import empty_columns
from schema.store import buckets


@dataclass
class SeriesView:
    """One series over a step range. Level 0: `steps`, `walls`, `values` are its points.
    Other levels: they are the buckets' extremes and last points (up to three a bucket, by
    step), and the per-bucket arrays below hold what smoothing and markers need."""

    level: int
    steps: np.ndarray
    walls: np.ndarray
    values: np.ndarray
    mid_steps: np.ndarray  # per bucket (level != 0): the middle of its steps
    mid_walls: np.ndarray
    means: np.ndarray  # mean of the finite values (NaN: none)
    lasts: np.ndarray  # value at the bucket's last step
    last_steps: np.ndarray
    bits: np.ndarray  # OR of flag values (-1: not flags)
    # Which of the per-bucket entries (the points at level 0) hold a NaN, +inf or -inf.
    nan: np.ndarray
    posinf: np.ndarray
    neginf: np.ndarray
    wanted_level: int  # the level the view asked for (differs while its tiles load)
    first_steps: np.ndarray | None = None  # per bucket: its first step (level 0: None)
    # A tile past an edge that may hold the neighbouring point is still to come.
    edges_pending: bool = False
    # A slice of a series' whole level (resplot/data/whole_level.py): (WholeLevel, a, b), its
    # buckets (points) a to b; its smoothed curve is the same slice of the whole's.
    origin: tuple | None = None

    @property
    def complete(self) -> bool:
        return self.level == self.wanted_level and not self.edges_pending

    @property
    def width(self) -> int:
        """Steps a bucket (1 for raw points)."""
        return buckets.width(self.level)


def concat_tiles(tiles, level: int) -> dict[str, np.ndarray]:
    cols = [t.cols for t in tiles] or [empty_columns(level)]
    return {name: np.concatenate([c[name] for c in cols]) for name in cols[0]}


# A view's arrays of points (up to three a bucket); every other array is one a bucket.
POINT_FIELDS = ("steps", "walls", "values")


def raw_cut(steps: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """The points [a, b) a view of [lo, hi] draws: one past each end, lines reach the edges."""
    a, b = np.searchsorted(steps, [lo, hi], side="left")
    return max(0, int(a) - 1), min(len(steps), int(b) + 1)


def raw_view(cols, lo: int, hi: int, wanted: int) -> SeriesView:
    steps = cols["step"]
    a, b = raw_cut(steps, lo, hi)
    s, w, v = steps[a:b], cols["wall"][a:b], cols["value"][a:b]
    return SeriesView(
        0,
        s,
        w,
        v,
        s,
        w,
        v,
        v,
        s,
        np.full(len(s), -1, np.int64),
        np.isnan(v),
        v == np.inf,
        v == -np.inf,
        wanted,
    )


def bucket_cut(cols, lo: int, hi: int) -> tuple[int, int]:
    """The buckets [a, b) a view of [lo, hi] draws: one past each end, lines reach the edges."""
    first, last = cols["step_lo"], cols["step_hi"]
    a = max(0, int(np.searchsorted(last, lo, side="left")) - 1)
    b = min(len(first), int(np.searchsorted(first, hi, side="right")) + 1)
    return a, b


def bucket_view(cols, level: int, lo: int, hi: int, wanted: int) -> SeriesView:
    a, b = bucket_cut(cols, lo, hi)
    if (a, b) != (0, len(cols["n"])):
        cols = {name: arr[a:b] for name, arr in cols.items()}
    return every_bucket(cols, level, wanted)


def every_bucket(c, level: int, wanted: int) -> SeriesView:
    """The view of every bucket of columns `c`."""
    n = len(c["n"])
    s_lo, s_hi = c["step_lo"], c["step_hi"]
    w_lo, w_hi = c["wall_lo"], c["wall_hi"]
    finite_n = c["n"] - c["nan"] - c["posinf"] - c["neginf"]
    has = np.isfinite(c["vmin"])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(finite_n > 0, c["vsum"] / np.maximum(finite_n, 1), np.nan)
        # A float sum can round a mean past the extremes, or off a constant: keep it exact.
        means = np.where(c["vmin"] == c["vmax"], c["vmin"], np.clip(means, c["vmin"], c["vmax"]))
    span = np.maximum(s_hi - s_lo, 1).astype(np.float64)

    def wall_at(step, i):
        """Wall time at steps inside buckets i, by the bucket's first and last point."""
        return w_lo[i] + (step - s_lo[i]) / span[i] * (w_hi[i] - w_lo[i])

    # The extremes in step order (min first where it came first, one point where they
    # coincide), then the bucket's last point where it is another one: the line runs through
    # each bucket's min, max and last, as through the raw points. From the later extreme it
    # drops straight to the last value, then runs to the last step: the raw line leaves an
    # extreme at the next step, and a slant across the bucket to its last point lit pixels
    # the raw line does not (a one-step spike's whole neighbouring column).
    min_first = c["min_at"] <= c["max_at"]
    one = c["min_at"] == c["max_at"]
    s1 = np.where(min_first, c["min_at"], c["max_at"])
    v1 = np.where(min_first, c["vmin"], c["vmax"])
    s2 = np.where(min_first, c["max_at"], c["min_at"])
    v2 = np.where(min_first, c["vmax"], c["vmin"])
    keep2 = has & ~one
    keep3 = np.isfinite(c["last"]) & (~has | (s_hi > s2))
    drop = keep3 & has
    steps = np.stack([s1, s2, s2, s_hi], axis=1).ravel()
    values = np.stack([v1, v2, c["last"], c["last"]], axis=1).ravel()
    mask = np.stack([has, keep2, drop, keep3], axis=1).ravel()
    steps, values = steps[mask], values[mask]
    owner = np.repeat(np.arange(n), 4)[mask]  # the bucket of each point
    mid = (s_lo + s_hi) // 2
    every = np.arange(n)
    return SeriesView(
        level,
        steps,
        wall_at(steps.astype(np.float64), owner),
        values,
        mid,
        wall_at(mid.astype(np.float64), every),
        means,
        c["last"],
        s_hi,
        c["bits"],
        c["nan"] > 0,
        c["posinf"] > 0,
        c["neginf"] > 0,
        wanted,
        s_lo,
    )


def view_of_tiles(tiles, level: int, lo: int, hi: int, wanted: int) -> SeriesView:
    cols = concat_tiles(tiles, level)
    if level == 0:
        return raw_view(cols, lo, hi, wanted)
    return bucket_view(cols, level, lo, hi, wanted)
