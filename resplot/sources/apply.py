"""What one read of a store brought, decoded and named for the cache (a Reply), whichever source
read it (an agent over a pipe or SSH, or PostgreSQL), and the one way it goes into the cache.

The order is the cache's contract: runs first, so every event, summary, point and tile below
lands on a run the cache knows; live points before tiles, so a tile of this reply's snapshot
finds the points it covers already there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from resplot.data.cache import SeriesCache, Summary
from resplot.data.model import Event, RunInfo, RunRef
from resplot.data.tiles import Tile
from resplot.sources.base import PollResult


@dataclass
class Points:
    """Live points of one series, in arrival order."""

    series: tuple[int, int]  # (run id, key id) in the store: what a re-read of its row names
    ref: RunRef
    key: str
    steps: np.ndarray
    walls: np.ndarray
    values: np.ndarray


@dataclass
class Reply:
    """One decoded reply; `epoch` is the one its tiles and live points are stamped with."""

    epoch: int
    runs: list[RunInfo] = field(default_factory=list)  # new or changed since the last reply
    events: list[Event] = field(default_factory=list)
    summaries: dict[RunRef, dict[str, Summary]] = field(default_factory=dict)
    points: list[Points] = field(default_factory=list)
    tiles: list[tuple[RunRef, str, Tile]] = field(default_factory=list)
    # The live points stop short of the tiles' snapshot: points between would be counted twice,
    # so the tiles are asked for again (once the stream has caught up) instead of kept.
    tiles_again: bool = False


def apply_reply(cache: SeriesCache, reply: Reply) -> tuple[PollResult, set[tuple[int, int]]]:
    """Put a reply into the cache: what changed, and the series (run id, key id) whose live
    points started over (restarted from a lower step), to be read again."""
    result = PollResult()
    if reply.runs:
        cache.set_runs(reply.runs)
        result.runs_changed = True
    if reply.events:
        result.events = list(reply.events)
        cache.add_events(result.events)
    for ref, summaries in reply.summaries.items():
        cache.set_summaries(ref, summaries)
        result.refs.add(ref)
    if reply.summaries:
        result.runs_changed = True  # key lists and the run table changed
    restarted: set[tuple[int, int]] = set()
    for p in reply.points:
        if cache.add_live(p.ref, p.key, p.steps, p.walls, p.values, reply.epoch):
            restarted.add(p.series)
        result.refs.add(p.ref)
        result.rows += len(p.steps)
    for ref, key, tile in reply.tiles:
        if reply.tiles_again:
            cache.want_tiles(ref, key, tile.level, [tile.index])
        else:
            cache.put_tile(ref, key, tile)
            result.refs.add(ref)
            result.tiles += 1
    return result, restarted


__all__ = ["Points", "Reply", "apply_reply"]
