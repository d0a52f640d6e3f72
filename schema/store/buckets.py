"""Rollup levels and bucket widths: the one definition, shared by the writer, the agent, the
viewer and the read API. Standard library only, Python 3.8 syntax (it ships inside the agent).

Level 0 is the raw points. Level l >= 1 cuts a series' steps into buckets of WIDTHS[l]
consecutive steps, aligned at multiples of the width: bucket b of level l holds the steps
[b * w, (b + 1) * w). Widths are powers of two, so the bucket of a step is a shift, in Python
and in SQL alike, and negative steps fall into negative buckets the same way.

Why these numbers (docs/store.md has the measurements): the first level is 128 steps wide and
each level is 4 times wider than the one below. The writer's rollup cost is per bucket far more
than per point, and the keys that fill a store are GPU telemetry logged every few steps: logged
every 4th step, a 32-step bucket holds 8 points and the writer spent 1.33x the CPU of the bare
inserts, 64 steps 1.23x; once the bare inserts got faster (multi-row statements), 64 steps cost
1.31-1.35x and 128 steps 1.12-1.21x. A factor of 4 keeps the rows a chart reads between 1 and 4
per pixel at the level it picks (with 8, the system page of a 34M-point store read 2.25M bucket
rows and took 15 s); the levels above the first cost a third of the first's rows. The price of
128: a view holding more than RAW_PER_PIXEL points per pixel but spanning fewer than 128 steps
per pixel (3,200 to 102,400 steps at 800 pixels, for a key logged every step) is drawn from
level-1 buckets, fewer than its pixels (each exact). Changing a width is a schema revision:
stored rollups cut at other widths are rebuilt (0005).

Fine levels (negative: level -s holds buckets of 2**s steps, s = 1..FINE_SHIFT) are never
stored: the host folds them from raw points when asked (schema/store/envelope.py), for views holding
more than RAW_PER_PIXEL points a pixel that level 1 would cut into fewer buckets than pixels.
They close that gap at the price of reading the view's raw points on the host, bounded by
the view (a fine tile covers 1,024 buckets); docs/store.md has the measurements that chose this
over storing finer levels. Widths in order: raw (0), -1 .. -FINE_SHIFT, 1 .. MAX_LEVEL
(`by_width`).

Levels above 1 are written only once a series spans enough steps to need them (`needed_levels`):
a level whose buckets hold more than 1/MIN_BUCKETS of the series is never the one a chart picks,
and skipping it spares a slow run the update of its newest bucket on every flush; the coarsest
level kept never holds more than MIN_BUCKETS * 4 buckets of a series.
"""

from __future__ import annotations

FIRST_SHIFT = 7  # level 1: 128 steps a bucket
LEVEL_SHIFT = 2  # each level 4x wider than the one below
MAX_LEVEL = 26  # 128 * 4**25 = 2**57 steps a bucket: 128 of them span every 64-bit step
MIN_BUCKETS = 64  # a level l >= 2 is kept once the series spans MIN_BUCKETS of its buckets
TILE_BUCKETS = 1024  # buckets (level 0: steps) per tile, the unit the viewer fetches and caches
RAW_PER_PIXEL = 4  # a view holding at most this many points per pixel is drawn from raw points
FINE_SHIFT = 6  # fine levels -1 .. -6: 2 .. 64 steps a bucket, folded from raw points on the host


def shift(level: int) -> int:
    """log2 of the bucket width of `level` (0 for the raw level, -level for a fine level)."""
    if level == 0:
        return 0
    if -FINE_SHIFT <= level < 0:
        return -level
    if not 1 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be in {-FINE_SHIFT}..{MAX_LEVEL}, got {level!r}")
    return FIRST_SHIFT + LEVEL_SHIFT * (level - 1)


def is_level(level) -> bool:
    """Whether `level` names a level (raw, fine or stored)."""
    return isinstance(level, int) and -FINE_SHIFT <= level <= MAX_LEVEL


def is_fine(level: int) -> bool:
    """A fine level: folded from raw points on the host, never stored."""
    return level < 0


def by_width(levels: int) -> list:
    """Every level a series with `levels` stored levels can be read at, finest first: raw,
    the fine levels, then the stored ones."""
    return [0, *range(-1, -FINE_SHIFT - 1, -1), *range(1, levels + 1)]


def width(level: int) -> int:
    """Steps per bucket of `level` (1 for the raw level)."""
    return 1 << shift(level)


def bucket_of(step: int, level: int) -> int:
    return step >> shift(level)


def bucket_start(bucket: int, level: int) -> int:
    """The first step of a bucket."""
    return bucket << shift(level)


def parent(bucket: int) -> int:
    """The bucket one level up that holds `bucket` (levels >= 1)."""
    return bucket >> LEVEL_SHIFT


def needed_levels(span: int) -> int:
    """How many levels a series whose steps span `span` (last - first) keeps: level 1 always,
    level l >= 2 once the series covers MIN_BUCKETS of its buckets."""
    levels = 1
    while levels < MAX_LEVEL and span >= MIN_BUCKETS * width(levels + 1):
        levels += 1
    return levels


def level_for(span: int, buckets: int, levels: int) -> int:
    """The coarsest level (of the fine levels and the `levels` stored) giving at least
    `buckets` buckets over a step range of `span` steps; the finest fine level (-1) when none
    does (a range narrower than 2 * `buckets` steps that still holds too many points to read
    raw)."""
    best = -1
    for level in by_width(levels)[2:]:
        if span // width(level) + 1 >= buckets:
            best = level
        else:
            break
    return best


def tile_of(bucket: int) -> int:
    """The tile holding `bucket` (a step, at level 0)."""
    return bucket // TILE_BUCKETS


def tile_range(level: int, index: int):
    """(first step, last step + 1) a tile covers."""
    first = index * TILE_BUCKETS
    return bucket_start(first, level), bucket_start(first + TILE_BUCKETS, level)


def tiles_for(level: int, start: int, stop: int):
    """Indices of the tiles of `level` covering steps [start, stop] (stop inclusive)."""
    lo = tile_of(bucket_of(start, level))
    hi = tile_of(bucket_of(stop, level))
    return range(lo, hi + 1)
