"""The series cache's events: kept in the order they came, by kind, one RunRef a run."""

from __future__ import annotations

from resplot.data.cache import SeriesCache
from schema.store.records import Event, RunRef


def test_a_runs_events_keep_its_first_ref_not_each_polls():
    """Each poll's records bring their own RunRef (equal, another object): the events a run
    logs all day keep one, not one a poll."""
    cache = SeriesCache()
    for poll in range(3):
        ref = RunRef("local", "s.db", "r1")  # as a poll's reply decodes it
        cache.add_events(
            [
                Event(ref, poll * 2 + k, 1e9 + poll, poll, "checkpoint", "info", "ckpt")
                for k in range(2)
            ]
        )
    events = cache.events(RunRef("local", "s.db", "r1"))
    assert [e.id for e in events] == list(range(6))
    assert len({id(e.run) for e in events}) == 1
    assert [e.id for e in cache.events(events[0].run, "checkpoint")] == list(range(6))
