"""Rollup levels and bucket widths: the one definition, shared by the writer, the agent, the
viewer and the read API. Standard library only, Python 3.8 syntax (it ships inside the agent).

Level 0 is the raw points. Level l >= 1 cuts a series' steps into buckets of WIDTHS[l]
consecutive steps, aligned at multiples of the width: bucket b of level l holds the steps
[b * w, (b + 1) * w). Widths are powers of two, so the bucket of a step is a shift, in Python
and in SQL alike, and negative steps fall into negative buckets the same way.

Why these numbers (docs/store.md has the measurements): the first level is 32 steps wide and
each level is 8 times wider than the one below. A factor of 8 keeps the rows a chart reads
between 1 and 8 per pixel at the level it picks (a factor of 16 would send up to 16 per pixel
over SSH); a first width of 32 keeps the writer's extra work at 0.036 rollup rows and one
Python fold per 32 points (a first width of 8 cost the writer 1.35x its CPU per point, 16 about
1.28x, 32 about 1.15x). Views finer than 32 steps a bucket read raw points.

Levels above 1 are written only once a series spans enough steps to need them (`needed_levels`):
a level whose buckets hold more than 1/MIN_BUCKETS of the series is never the one a chart picks,
and skipping it spares a slow run the update of its newest bucket on every flush.
"""

from __future__ import annotations

FIRST_SHIFT = 5  # level 1: 32 steps a bucket
LEVEL_SHIFT = 3  # each level 8x wider than the one below
MAX_LEVEL = 18  # 32 * 8**17 = 2**56 steps a bucket: 256 of them span every 64-bit step
MIN_BUCKETS = 64  # a level l >= 2 is kept once the series spans MIN_BUCKETS of its buckets
TILE_BUCKETS = 1024  # buckets (level 0: steps) per tile, the unit the viewer fetches and caches
RAW_PER_PIXEL = 4  # a view holding at most this many points per pixel is drawn from raw points


def shift(level: int) -> int:
    """log2 of the bucket width of `level` (0 for the raw level)."""
    if level == 0:
        return 0
    if not 1 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be in 0..{MAX_LEVEL}, got {level!r}")
    return FIRST_SHIFT + LEVEL_SHIFT * (level - 1)


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
    """The coarsest level (of the `levels` kept) giving at least `buckets` buckets over a step
    range of `span` steps; level 1 when none does (a range narrower than `buckets` * 32 steps
    that still holds too many points to read raw)."""
    best = 1
    for level in range(2, levels + 1):
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
