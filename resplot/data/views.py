"""What a chart draws of one series over a step range, gathered from cached tiles. No Qt here.

`series_view()` picks the level for the view (raw points once the range holds at most
RAW_PER_PIXEL points per pixel, else the coarsest level that still gives a bucket per pixel: a
stored rollup level, or where none is that fine, a fine level of 2 to 64 steps that the host
folds from the raw points), asks the cache for the tiles it lacks, and returns what is cached:
the wanted level, or while its tiles load, the nearest level whose tiles are all there
(coarser ones first: they cost less), so the chart always shows the whole shape. Buckets are
drawn through their exact extremes and last point: (min_at, vmin), (max_at, vmax), then
straight down (or up) at the later extreme to the last value and on to (step_hi, last), so the
per-pixel M4 of data/decimate.py keeps a one-step spike or dip visible at every zoom and the
line runs from bucket to bucket as the raw line does. Smoothing on an envelope runs over bucket
means. A view holds the series' neighbouring point (bucket) past each end, read from the tiles
beyond the view's where those hold it (a sparse key; EDGE_TILES), so lines reach both edges.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.data.tiles import empty_columns
from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO, N

# Where no stored level gives a bucket per pixel, the host reads every raw point of the view
# whatever it sends. It sends them as they are while that is no more bytes than the fine
# buckets would be (a bucket row is the size of ~5 raw points, so up to RAW_PER_PIXEL * k points
# a pixel against k buckets a pixel), at a third of the host's CPU (packing rows against
# folding them), and exact. Past that, fine buckets, FINE_PER_PIXEL a pixel: four a pixel keep
# a bucket's line from its extreme to its last point (what a bucket cannot say of the points
# between) under a quarter pixel; at one a pixel the line beside a one-step spike lit a whole
# extra pixel column (201 pixels off the raw line on a 600-pixel chart of 10,000 steps, against
# 24 at four a pixel and 27 for exact M4 of every point: scripts/bench/fidelity.py). Pages of
# many series ask for one a pixel (they fill them as bands).
FINE_PER_PIXEL = 4
# Fine levels make the host read every raw point of a view: a page asks for them while its
# fine views hold at most a budget of points on each host, else it draws those views from level
# 1, fewer buckets than pixels, as its notes say (zoomed in, it has fine levels again). The
# budget is what the host's fold gets through in about a second or two, by what the source said
# it folds with (SeriesCache.fold: the agent's `hello`, numpy in resplot's own process for
# PostgreSQL). numpy, ~0.36 µs a point read and folded from the chunks
# (schema/store/folding_numpy.py; up to 4 processes on the host): 20M points, a 60-run x 20,000-step
# sweep's training page (6M at 5 keys) or the system page of 8 runs x 66 keys (2.6M). The builtins,
# ~4 µs a point (an agent on a host without numpy, or an old agent that does not say): 1M, the
# training page of 8 runs (0.96M).
FINE_POINTS_PER_PAGE = {"numpy": 20_000_000, "builtins": 1_000_000}
# A view reaches past each end to the series' neighbouring point (the line runs to the chart's
# edge). Where a series is sparse that point can lie in a tile before (after) those covering
# the view: the view then reads up to EDGE_TILES more tiles on that side, asking for 1, 2, 4 ...
# at a time as the ones before come empty (a point up to 16 tiles off: 16,384 steps at the raw
# level, 5 round trips at most). A neighbour further off is not looked for: the line stops at
# the view's last point on that side, as it did before neighbours were looked for at all.
EDGE_TILES = 16
# A series with fewer points than this a tile (on average over its steps) is sparse: its
# neighbouring points past a view's edges often lie in the tiles just outside those covering
# the view, so those two are asked for with the view's own (one round trip, not two).
SPARSE_PER_TILE = 64


def fine_budget(cache: SeriesCache, source: str) -> int:
    """Raw points a page may have `source`'s host read for its fine views."""
    builtins = FINE_POINTS_PER_PAGE["builtins"]
    return FINE_POINTS_PER_PAGE.get(cache.fold(source) or "builtins", builtins)


def over_budget(cache: SeriesCache, points: dict[str, float]) -> bool:
    """Whether a page's fine views ({source: raw points}) ask more of any host than its
    budget: then the page draws them from level 1."""
    return any(n > fine_budget(cache, source) for source, n in points.items())


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

    @property
    def complete(self) -> bool:
        return self.level == self.wanted_level and not self.edges_pending

    @property
    def width(self) -> int:
        """Steps a bucket (1 for raw points)."""
        return buckets.width(self.level)


def choose_level(
    summary, lo: int, hi: int, pixels: int, fine_per_pixel: int = FINE_PER_PIXEL
) -> int:
    """0 (raw) when [lo, hi] should hold at most RAW_PER_PIXEL points per pixel (assuming the
    series' points are spread evenly), else the coarsest stored level with a bucket per pixel,
    or where none is that fine, the raw points again while they are at most RAW_PER_PIXEL *
    `fine_per_pixel` a pixel, else the coarsest fine level with `fine_per_pixel` buckets a
    pixel (`fine_per_pixel` 0: level 1 instead)."""
    agg = summary.agg
    total = max(1, agg[STEP_HI] - agg[STEP_LO] + 1)
    span = max(0, hi - lo)
    estimate = agg[N] * min(1.0, (span + 1) / total)
    pixels = max(1, pixels)
    if estimate <= buckets.RAW_PER_PIXEL * pixels:
        return 0
    level = buckets.level_for(span, pixels, summary.levels)
    if not buckets.is_fine(level):
        return level
    if fine_per_pixel <= 0:
        return 1  # no fine levels (a page past its budget): level 1, fewer buckets than pixels
    if estimate <= buckets.RAW_PER_PIXEL * fine_per_pixel * pixels:
        return 0  # no more bytes than the fine buckets, less work for the host, exact
    return buckets.level_for(span, fine_per_pixel * pixels, summary.levels)


def _clamp(summary, lo: float, hi: float) -> tuple[int, int]:
    """[lo, hi] in steps within the series (infinite: its ends)."""
    agg = summary.agg
    lo = agg[STEP_LO] if lo == -np.inf else max(int(lo), agg[STEP_LO])
    hi = agg[STEP_HI] if hi == np.inf else min(int(hi), agg[STEP_HI])
    return (lo, hi) if hi >= lo else (agg[STEP_HI], agg[STEP_HI])


def fine_points(
    summary, lo: float, hi: float, pixels: int, fine_per_pixel: int = FINE_PER_PIXEL
) -> float:
    """The raw points the host reads for this view if it is drawn from a fine level (all of
    them, about), else 0: what a page adds up against its budget."""
    lo, hi = _clamp(summary, lo, hi)
    if not buckets.is_fine(choose_level(summary, lo, hi, pixels, fine_per_pixel)):
        return 0.0
    agg = summary.agg
    return agg[N] * min(1.0, (hi - lo + 1) / max(1, agg[STEP_HI] - agg[STEP_LO] + 1))


def _tiles(
    cache: SeriesCache,
    ref: RunRef,
    key: str,
    level: int,
    lo: int,
    hi: int,
    every_missing: bool = True,
):
    """The cached tiles covering [lo, hi] at `level`, and the missing ones' indices (only the
    first without `every_missing`: enough to know a stand-in level will not do, where looking
    up all of them cost 100 lookups a series for raw tiles over a long run)."""
    return cache.tiles(ref, key, level, buckets.tiles_for(level, lo, hi), every_missing)


def _edges(
    cache: SeriesCache, ref: RunRef, key: str, summary, level: int, lo: int, hi: int, tiles: list
) -> tuple[list, bool]:
    """`tiles` (those covering [lo, hi], all cached) with the tiles before and after them up to
    the ones holding the series' neighbouring points past lo and hi, where `tiles` hold none;
    and whether such a tile is still to come (it is asked for, EDGE_TILES says how far)."""
    agg = summary.agg
    span = buckets.tiles_for(level, lo, hi)
    ends = buckets.tiles_for(level, agg[STEP_LO], agg[STEP_HI])
    # The first point's (bucket's last) step and the last point's (bucket's first) step, of
    # the tiles that hold any (no copy of their columns: this runs every frame).
    held = [t.cols for t in tiles if len(t.cols["step" if level == 0 else "n"])]
    first = held[0]["step" if level == 0 else "step_hi"][:1] if held else ()
    last = held[-1]["step" if level == 0 else "step_lo"][-1:] if held else ()
    before: list = []
    after: list = []
    pending = False
    # Walk out from the view on each side (way -1: before lo, +1: after hi) unless that side is
    # done: the series has no point past that edge, or the view's tiles hold one at or past it
    # (a point at the edge reaches it).
    done_before = lo <= agg[STEP_LO] or (len(first) > 0 and first[0] <= lo)
    done_after = hi >= agg[STEP_HI] or (len(last) > 0 and last[-1] >= hi)
    sides = (
        (-1, done_before, span.start - 1, ends.start - 1, before),
        (1, done_after, span.stop, ends.stop, after),
    )
    for way, done, start, stop, out in sides:
        if done:
            continue
        for d in range(EDGE_TILES):
            index = start + way * d
            if (index - stop) * way >= 0:
                break  # past the series' own tiles
            tile = cache.tile(ref, key, level, index)
            if tile is None:
                # Ask for this one and as many more as were found empty (1, 2, 4 ...).
                far = [start + way * e for e in range(d, min(2 * d + 1, EDGE_TILES))]
                cache.want_tiles(ref, key, level, [i for i in far if (i - stop) * way < 0])
                pending = True
                break
            out.append(tile)
            if len(tile.cols["step" if level == 0 else "n"]):
                break  # it holds the neighbour
    return [*before[::-1], *tiles, *after], pending


def _edge_tiles_ahead(summary, level: int, lo: int, hi: int) -> list[int]:
    """For a sparse series (SPARSE_PER_TILE), the tile before and the tile after those covering
    [lo, hi], on each side where the series has points past that edge."""
    agg = summary.agg
    ends = buckets.tiles_for(level, agg[STEP_LO], agg[STEP_HI])
    if agg[N] >= SPARSE_PER_TILE * len(ends):
        return []
    span = buckets.tiles_for(level, lo, hi)
    out = []
    if lo > agg[STEP_LO] and span.start > ends.start:
        out.append(span.start - 1)
    if hi < agg[STEP_HI] and span.stop < ends.stop:
        out.append(span.stop)
    return out


def _concat(tiles, level: int) -> dict[str, np.ndarray]:
    cols = [t.cols for t in tiles] or [empty_columns(level)]
    return {name: np.concatenate([c[name] for c in cols]) for name in cols[0]}


def _raw_view(cols, lo: int, hi: int, wanted: int) -> SeriesView:
    steps = cols["step"]
    a, b = np.searchsorted(steps, [lo, hi], side="left")
    a, b = max(0, a - 1), min(len(steps), b + 1)  # one point past each end: lines reach edges
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


def _bucket_cut(cols, lo: int, hi: int) -> tuple[int, int]:
    """The buckets [a, b) a view of [lo, hi] draws: one past each end, lines reach the edges."""
    first, last = cols["step_lo"], cols["step_hi"]
    a = max(0, int(np.searchsorted(last, lo, side="left")) - 1)
    b = min(len(first), int(np.searchsorted(first, hi, side="right")) + 1)
    return a, b


def _bucket_view(cols, level: int, lo: int, hi: int, wanted: int) -> SeriesView:
    a, b = _bucket_cut(cols, lo, hi)
    if (a, b) != (0, len(cols["n"])):
        cols = {name: arr[a:b] for name, arr in cols.items()}
    return _buckets(cols, level, wanted)


def _buckets(c, level: int, wanted: int) -> SeriesView:
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


@dataclass
class ViewMemo:
    """The last view one caller (a chart's track) built, and what it was built from: the same
    level, step range and tiles (their columns, replaced when a live point folds in) give the
    same view object back, so a series without new points costs its caller nothing more; a
    view of every bucket whose newest buckets changed (a live run's poll) is the last view's
    unchanged buckets with the changed ones worked out again."""

    stamp: tuple = ()
    view: SeriesView | None = None
    cols: dict | None = None  # the columns of a view of every bucket (None: another view)
    # The question the view answers, with the series' change count then (SeriesCache.changes),
    # and the tiles it read: the same question of a series that has not changed since gets
    # the view without a tile looked up (a poll's settled runs: ~40 lookups a series), its
    # tiles counted in view again (SeriesCache.tile_keys). Empty while the view waits for an
    # edge's tile. A frozenset: a set updated from one takes its stored hashes (4,400 keys a
    # poll).
    asked: tuple = ()
    tiles: frozenset = frozenset()


def series_view(
    cache: SeriesCache,
    ref: RunRef,
    key: str,
    lo: float,
    hi: float,
    pixels: int,
    level: int | None = None,
    fine_per_pixel: int = FINE_PER_PIXEL,
    memo: ViewMemo | None = None,
) -> SeriesView | None:
    """The view of [lo, hi] (steps, both included; infinite: the series' ends) for a chart
    `pixels` wide, at `level` if given; None when the series is unknown or nothing covering
    the range is cached yet (its tiles are asked for). A page of many series asks for fewer
    fine buckets a pixel (`fine_per_pixel`): it fills them as bands anyway. With a `memo`, the
    view it holds when nothing it was built from changed."""
    asked = ()
    if memo is not None:
        asked = (cache.changes(ref, key), lo, hi, pixels, level, fine_per_pixel)
        if memo.view is not None and asked == memo.asked:
            cache.keep_tiles(memo.tiles)
            return memo.view
    summary = cache.summary(ref, key)
    if summary is None:
        return None
    lo, hi = _clamp(summary, lo, hi)
    wanted = (
        choose_level(summary, lo, hi, pixels, fine_per_pixel)
        if level is None
        else min(level, summary.levels)
    )
    tiles, missing = _tiles(cache, ref, key, wanted, lo, hi)
    if missing:
        missing += _edge_tiles_ahead(summary, wanted, lo, hi)
        # Meanwhile: the nearest level whose tiles are all cached (coarser ones first).
        ladder = buckets.by_width(summary.levels)
        at = ladder.index(wanted)
        for level in [*ladder[at + 1 :], *ladder[at - 1 :: -1]]:
            stand_in, gap = _tiles(cache, ref, key, level, lo, hi, every_missing=False)
            if not gap:
                cache.want_tiles(ref, key, wanted, missing)
                return _view(stand_in, level, lo, hi, wanted)
        if buckets.is_fine(wanted):
            # Nothing to show yet: level 1 as well (a few stored rows). Sources fetch it ahead
            # of the fine tiles (the host reads every raw point of the view for those), so a
            # chart appears as soon as it did before fine levels, and sharpens without a
            # second round trip.
            cache.want_tiles(ref, key, 1, list(buckets.tiles_for(1, lo, hi)))
        cache.want_tiles(ref, key, wanted, missing)
        return None
    tiles, pending = _edges(cache, ref, key, summary, wanted, lo, hi, tiles)
    if memo is None:
        view = _view(tiles, wanted, lo, hi, wanted)
        view.edges_pending = pending
        return view
    memo.asked = () if pending else asked
    memo.tiles = cache.tile_keys(ref, key, [(t.level, t.index) for t in tiles])
    stamp = (wanted, lo, hi, pending, *(t.cols for t in tiles))
    if same_stamp(stamp, memo.stamp):
        return memo.view
    if wanted == 0:
        view = _view(tiles, wanted, lo, hi, wanted)
        view.edges_pending = pending
        memo.stamp, memo.view, memo.cols = stamp, view, None
        return view
    cols = _concat(tiles, wanted)
    a, b = _bucket_cut(cols, lo, hi)
    whole = (a, b) == (0, len(cols["n"]))
    view = _appended(memo, cols, wanted) if whole else None
    if view is None:
        view = _bucket_view(cols, wanted, lo, hi, wanted)
    view.edges_pending = pending
    memo.stamp, memo.view, memo.cols = stamp, view, cols if whole else None
    return view


_POINT_FIELDS = ("steps", "walls", "values")  # up to three a bucket, joined at a point


def _appended(memo: ViewMemo, cols: dict, level: int) -> SeriesView | None:
    """The view of every bucket of `cols` from the memo's view of every bucket of the columns
    before: its buckets before the first one that changed (a different first step or count),
    the rest worked out again; the same arrays a whole rebuild gives. None: no such view."""
    old, was = memo.cols, memo.view
    if old is None or was is None or was.level != level or was.first_steps is None:
        return None
    n0 = min(len(old["n"]), len(cols["n"]))
    differ = (old["n"][:n0] != cols["n"][:n0]) | (old["step_lo"][:n0] != cols["step_lo"][:n0])
    k = int(np.argmax(differ)) if differ.any() else n0
    if k == 0 or k == len(cols["n"]) or len(was.first_steps) != len(old["n"]):
        return None  # nothing kept, nothing new (tiles evicted or fetched again): rebuild
    new = _buckets({name: arr[k:] for name, arr in cols.items()}, level, level)
    p = int(np.searchsorted(was.steps, cols["step_lo"][k], side="left"))

    def join(name: str):
        before, after = getattr(was, name), getattr(new, name)
        if not isinstance(before, np.ndarray):
            return after  # the levels: `level` both
        at = p if name in _POINT_FIELDS else k  # the points, or the per-bucket arrays
        return np.concatenate([before[:at], after])

    return SeriesView(**{f.name: join(f.name) for f in dataclasses.fields(SeriesView)})


def same_stamp(a: tuple, b: tuple) -> bool:
    """Stamps alike: their first four entries equal, the rest (columns, arrays) the same
    objects."""
    return (
        len(a) == len(b)
        and a[:4] == b[:4]
        and all(x is y for x, y in zip(a[4:], b[4:], strict=True))
    )


def _view(tiles, level: int, lo: int, hi: int, wanted: int) -> SeriesView:
    cols = _concat(tiles, level)
    if level == 0:
        return _raw_view(cols, lo, hi, wanted)
    return _bucket_view(cols, level, lo, hi, wanted)
