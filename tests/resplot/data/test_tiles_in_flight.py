"""Tiles a poll has taken are waited for until they are put or that poll ends. A page refreshed
while they were read counted none waiting and drew itself as empty axes, and a hover right after
found nothing (resplot/ui/tile_wait.py; 4 of 10 runs of test_scale's first fine view under load)."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.data.tiles import Tile
from resplot.data.views import series_view
from resplot.sources import parse_spec
from resplot.sources.local import LocalSource
from tests.fixtures.stores import make_run, new_store


def raw_tile(index: int) -> Tile:
    steps = np.arange(index * 1024, index * 1024 + 10, dtype=np.int64)
    return Tile(0, index, {"step": steps, "wall": steps * 1.0, "value": steps * 0.5}, 0)


def test_taken_tiles_count_as_waited_for_until_put_or_their_poll_ends():
    cache, ref = SeriesCache(), RunRef("host", "a.db", "u1")
    cache.want_tiles(ref, "loss", 0, [0, 1, 2])
    with cache.fetching("host"):
        assert cache.take_wanted("host", "a.db") == [("u1", "loss", 0, i) for i in range(3)]
        assert cache.wanted_count() == 3  # being read: still waited for
        cache.put_tile(ref, "loss", raw_tile(0))
        assert cache.wanted_count() == 2
        cache.want_tiles(ref, "loss", 0, [1])  # asked again while read: one tile, not two
        assert cache.wanted_count() == 2
    # The poll ended without tiles 1 and 2: 2 is no longer waited for, 1 was asked again.
    assert cache.wanted_count() == 1
    assert cache.take_wanted("host", "a.db") == [("u1", "loss", 0, 1)]


def test_a_poll_that_fails_leaves_no_tile_waited_for_and_they_can_be_asked_again():
    cache, ref = SeriesCache(), RunRef("host", "a.db", "u1")
    other = RunRef("other", "b.db", "u2")
    cache.want_tiles(ref, "loss", 0, [0, 1])
    cache.want_tiles(other, "loss", 0, [0])
    with pytest.raises(OSError), cache.fetching("host"):
        cache.take_wanted("host", "a.db")
        cache.take_wanted("other", "b.db")  # another source's poll, still running
        raise OSError("connection reset")
    assert cache.wanted_count() == 1  # only the other source's tile
    cache.want_tiles(ref, "loss", 0, [0, 1])
    assert cache.wanted_count() == 3


def fine_run(tmp_path):
    """A run of 20,000 steps: a 600-pixel chart of it wants level 1 and fine tiles."""
    path = tmp_path / "r.db"
    engine = new_store(path)
    make_run(engine, name="r", points={"loss": [(s, 3.0 - s * 1e-4) for s in range(20_000)]})
    return path, engine


def wanted_by_a_chart(cache: SeriesCache) -> int:
    """Draws the run's chart from the cache (asking for the tiles it lacks): how many it wants."""
    series_view(cache, cache.runs()[0].ref, "loss", -np.inf, np.inf, 600)
    return cache.wanted_count()


@pytest.mark.integration  # the local source runs the agent as a child process
def test_a_local_poll_counts_its_tiles_as_waited_for_until_each_is_put(tmp_path):
    path, engine = fine_run(tmp_path)
    cache, source = SeriesCache(), LocalSource(parse_spec(str(path)))
    try:
        source.poll(cache)
        asked = wanted_by_a_chart(cache)
        seen: list[int] = []  # what a page refreshed at each put would have found waiting
        put = cache.put_tile

        def put_tile(ref, key, tile) -> None:
            seen.append(cache.wanted_count())
            put(ref, key, tile)

        cache.put_tile = put_tile  # type: ignore[method-assign]
        source.poll(cache)
        assert asked > 1 and seen == list(range(asked, 0, -1))
        assert cache.wanted_count() == 0
    finally:
        source.close()
        engine.dispose()


@pytest.mark.integration
def test_a_poll_stopped_between_its_replies_leaves_no_tile_waited_for(tmp_path):
    """The coarse tiles come in a reply of their own; a poller stopping then (its progress
    callback raises) ends the poll with the fine ones taken and never read."""
    path, engine = fine_run(tmp_path)
    cache, source = SeriesCache(), LocalSource(parse_spec(str(path)))
    waiting_at_stop = []

    def stop(step) -> None:
        if step.refs:
            waiting_at_stop.append(cache.wanted_count())
            raise RuntimeError("stopping")

    try:
        source.poll(cache)
        wanted_by_a_chart(cache)
        with pytest.raises(RuntimeError):
            source.poll(cache, stop)
        assert waiting_at_stop and waiting_at_stop[0] > 0  # the fine tiles, being read
        assert cache.wanted_count() == 0
        assert wanted_by_a_chart(cache) == waiting_at_stop[0]  # the fine ones, asked again
    finally:
        source.close()
        engine.dispose()
