"""Decoded chunks of one series folded into the rollup aggregates the writer keeps for the same
points (schema/store/rollup.py's fold and merge, schema/store/buckets.py's levels): what sealing a
chunk, `reslog check` on a chunked store and the upgrade's backfill will each need.

Standard library only, Python 3.8 syntax, like the codec it reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from schema.store import buckets
from schema.store.chunk_codec import Chunk
from schema.store.rollup import fold, fold_buckets, merge


class Rollups(NamedTuple):
    """A series' summary aggregate (None: no point yet) and {(level, bucket): aggregate}."""

    series: tuple | None
    buckets: dict


EMPTY = Rollups(None, {})


def fold_chunk(rollups: Rollups, chunk: Chunk, column: int = 0, levels: int = 1) -> Rollups:
    """`rollups` with the points of one value column of `chunk` folded in at levels 1 to
    `levels`, the chunk's points being newer than those already folded (its `last` wins a
    tie on step). Every point of the chunk must stand: points a restart supersedes are left
    out first (schema.store.rollup.newest_take over the series), as the writer's takes do."""
    steps = chunk.steps.tolist()
    if not steps:
        return rollups
    walls = chunk.walls.tolist()
    values = chunk.values[column].tolist()
    series = fold(steps, walls, values)
    out = dict(rollups.buckets)
    for level in range(1, levels + 1):
        for b, agg in fold_buckets(steps, walls, values, buckets.shift(level)).items():
            old = out.get((level, b))
            out[(level, b)] = agg if old is None else merge(old, agg)
    if rollups.series is not None:
        series = merge(rollups.series, series)
    return Rollups(series, out)


def fold_chunks(chunks: Iterable[Chunk], column: int = 0, levels: int = 1) -> Rollups:
    """The rollups of a series' chunks, in the order they were written."""
    out = EMPTY
    for chunk in chunks:
        out = fold_chunk(out, chunk, column, levels)
    return out
