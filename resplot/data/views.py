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

from resplot.data import whole_level
from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.data.smoothing import unit_of
from resplot.data.view_columns import (
    POINT_FIELDS,
    SeriesView,
    bucket_cut,
    bucket_view,
    concat_tiles,
    every_bucket,
    view_of_tiles,
)
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
    # The series' whole level once it has settled (resplot/data/whole_level.py): a view of
    # another range at that level is a slice of it. `seen`: the change count at the last ask
    # (settled: the same twice); `unbuilt`: (level, change count) where a tile was missing.
    whole: whole_level.WholeLevel | None = None
    seen: int = -1
    unbuilt: tuple = ()


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
    if memo is not None:
        view = _whole_view(cache, ref, key, summary, memo, wanted, lo, hi, asked)
        if view is not None:
            return view
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
                return view_of_tiles(stand_in, level, lo, hi, wanted)
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
        view = view_of_tiles(tiles, wanted, lo, hi, wanted)
        view.edges_pending = pending
        return view
    memo.asked = () if pending else asked
    memo.tiles = cache.tile_keys(ref, key, [(t.level, t.index) for t in tiles])
    stamp = (wanted, lo, hi, pending, *(t.cols for t in tiles))
    if same_stamp(stamp, memo.stamp):
        return memo.view
    if wanted == 0:
        view = view_of_tiles(tiles, wanted, lo, hi, wanted)
        view.edges_pending = pending
        memo.stamp, memo.view, memo.cols = stamp, view, None
        return view
    cols = concat_tiles(tiles, wanted)
    a, b = bucket_cut(cols, lo, hi)
    whole = (a, b) == (0, len(cols["n"]))
    view = _appended(memo, cols, wanted) if whole else None
    if view is None:
        view = bucket_view(cols, wanted, lo, hi, wanted)
    view.edges_pending = pending
    memo.stamp, memo.view, memo.cols = stamp, view, cols if whole else None
    return view


def _whole_view(
    cache: SeriesCache, ref: RunRef, key: str, summary, memo: ViewMemo, level, lo, hi, asked
) -> SeriesView | None:
    """The view as a slice of the series' whole level (kept in the memo, built once the series
    has settled and where it is small enough); None: gather it from the tiles."""
    changes = asked[0]
    settled, memo.seen = memo.seen == changes, changes
    whole = memo.whole
    if whole is None or whole.level != level or whole.changes != changes:
        if (
            not settled
            or (level, changes) == memo.unbuilt
            or whole_level.rows_at(summary, level) > whole_level.WHOLE_ROWS
        ):
            return None
        whole = whole_level.build(cache, ref, key, summary, level, changes, unit_of(summary.agg))
        if whole is None:
            memo.unbuilt = (level, changes)
            return None
        memo.whole = whole
    view = whole_level.cut(whole, lo, hi, EDGE_TILES)
    cache.keep_tiles(whole.tiles)
    memo.asked, memo.view, memo.tiles = asked, view, whole.tiles
    memo.stamp, memo.cols = (), None  # (a view gathered from tiles next is built afresh)
    return view


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
    new = every_bucket({name: arr[k:] for name, arr in cols.items()}, level, level)
    p = int(np.searchsorted(was.steps, cols["step_lo"][k], side="left"))

    def join(name: str):
        before, after = getattr(was, name), getattr(new, name)
        if not isinstance(before, np.ndarray):
            return after  # the levels: `level` both
        at = p if name in POINT_FIELDS else k  # the points, or the per-bucket arrays
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
