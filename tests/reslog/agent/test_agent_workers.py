"""The agent's tile workers (reslog/agent/tile_workers.py): forked processes read settled tiles
beside the agent's own snapshot, and the reply is byte for byte what one process sends.

Real forks, real SQLite files, the agent's own Store class in this process."""

from __future__ import annotations

import sqlite3

import pytest

from reslog.agent import tile_workers
from reslog.agent.store import Store
from schema.store import buckets, points_by_id
from tests.fixtures.stores import add_points, make_run, new_store

STEPS = 40 * 1024  # 40 raw tiles a series


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "w.db"
    engine = new_store(path)
    for r in range(2):
        points = {k: [(s, s * 0.5 + r + j) for s in range(STEPS)] for j, k in enumerate("ab")}
        make_run(engine, name=f"r{r}", points=points)
    engine.dispose()
    return path


def _reply(path, monkeypatch, workers: str, ranges):
    monkeypatch.setenv("RESLOG_AGENT_WORKERS", workers)
    store = Store(str(path))
    try:
        header, sections = store.read("tiles", {"tiles": ranges})
    finally:
        store.close()
    return header, sections.described, sections.parts


def _ranges(path) -> list[list[int]]:
    with sqlite3.connect(path) as conn:
        ids = conn.execute("SELECT run_id, key_id FROM series ORDER BY 1, 2").fetchall()
    # Every raw tile of each series, and its level-1 tiles.
    return [[r, k, 0, 0, STEPS // buckets.TILE_BUCKETS] for r, k in ids] + [
        [r, k, 1, 0, 1] for r, k in ids
    ]


def test_workers_send_exactly_what_one_process_sends(store_path, monkeypatch):
    ranges = _ranges(store_path)
    one = _reply(store_path, monkeypatch, "0", ranges)
    many = _reply(store_path, monkeypatch, "2", ranges)
    assert one[0]["high"] == many[0]["high"]
    assert one[1] == many[1]  # sections, tile lists and row counts
    assert one[2] == many[2]  # the packed bytes
    raw = next(s for s in one[1] if s["name"] == "raw")
    assert raw["rows"] == 4 * STEPS and len(raw["tiles"]) == 4 * 40


def test_settled_tiles_only_go_to_workers(store_path):
    """The tile holding a series' last step can still change: it is read in the reply's own
    snapshot, never by a worker (whose snapshot may be newer)."""
    seen = []

    def read(cur, job):
        seen.append((cur is None, job))
        return b""

    jobs = list(range(40))
    settled = [j != 39 for j in jobs]
    out = tile_workers.read_all(jobs, read, lambda: sqlite3.connect(":memory:"), settled, 1)
    assert out == [b""] * 40
    here = {job for parent, job in seen if parent}
    # What this process read itself: its share of the settled tiles, and the unsettled one.
    assert 39 in here and 0 < len(here) < 40
    # The workers' reads happened in the forked children, so they are not in `seen` here.
    assert len(seen) == len(here)


def test_a_failed_worker_is_read_again_here_and_said_once(store_path, capfd):
    def read(cur, job):
        return bytes([job]) * job

    def connect():
        raise sqlite3.OperationalError("disk I/O error")  # in the worker only

    jobs = list(range(48))
    out = tile_workers.read_all(jobs, read, connect, [True] * 48, 2)
    assert out == [bytes([j]) * j for j in jobs]
    err = capfd.readouterr().err
    assert err.count("a tile worker failed") == 2  # one line per failed worker
    assert "read its 16 tiles here" in err


def test_worker_count_from_the_environment(monkeypatch, capfd):
    monkeypatch.setenv("RESLOG_AGENT_WORKERS", "0")
    assert tile_workers.worker_count() == 0
    monkeypatch.setenv("RESLOG_AGENT_WORKERS", "5")
    assert tile_workers.worker_count() == 5
    monkeypatch.setenv("RESLOG_AGENT_WORKERS", "many")
    assert tile_workers.worker_count() == 0
    assert "RESLOG_AGENT_WORKERS='many' is not a number" in capfd.readouterr().err
    monkeypatch.delenv("RESLOG_AGENT_WORKERS")
    assert 0 <= tile_workers.worker_count() <= tile_workers.MAX_WORKERS


def test_a_groups_jobs_go_to_one_process_and_groups_are_dealt_in_turn():
    """The agent groups a reply's tiles by run (the keys of a run share chunks, decoded once a
    process): every group's jobs in one share, the groups dealt out in turn, so that the
    shares hold as many groups each; without groups, the jobs themselves are dealt."""
    jobs = [(run, key) for run in (5, 1, 7, 2, 9) for key in range(4)] + [(1, 9)]
    spread = list(range(len(jobs)))
    shares = tile_workers._shares(jobs, spread, 2, lambda job: job[0])
    assert sorted(i for share in shares for i in share) == spread
    runs = [{jobs[i][0] for i in share} for share in shares]
    assert runs == [{5, 7, 9}, {1, 2}] and 20 in shares[1]  # run 1's late job with its run
    assert tile_workers._shares(jobs, spread, 2, None) == [spread[0::2], spread[1::2]]


def test_small_requests_are_not_forked(monkeypatch):
    calls = []
    jobs = list(range(tile_workers.MIN_JOBS - 1))
    out = tile_workers.read_all(
        jobs, lambda cur, j: calls.append(cur) or b"x", None, [True] * len(jobs), 3
    )
    assert out == [b"x"] * len(jobs) and calls == [None] * len(jobs)


def test_the_tile_holding_a_series_last_step_is_left_to_the_reply(store_path, monkeypatch):
    """What the agent counts as settled: every stored-bucket tile ending at or before its
    series' last step in the reply's snapshot (a level-1 tile of 65,536 steps holds the whole
    series: not settled), and every tile read from raw points, which reads only the points up
    to the reply's `high` (the newest raw tile too)."""
    calls = []
    real = tile_workers.read_all

    def spy(jobs, read, connect, settled, workers, group=None):
        calls.append((list(jobs), list(settled)))
        return real(jobs, read, connect, settled, workers, group)

    monkeypatch.setattr(tile_workers, "read_all", spy)
    engine = new_store(store_path)
    add_points(engine, 1, {"a": [(STEPS + i, 1.0) for i in range(10)]})  # into raw tile 40
    engine.dispose()
    ranges = [*_ranges(store_path), [1, 1, 0, 40, 1]]
    one = _reply(store_path, monkeypatch, "0", ranges)
    many = _reply(store_path, monkeypatch, "2", ranges)
    assert one[2] == many[2]
    jobs, settled = calls[-1]
    unsettled = {(j[0], j[1], j[2], j[3]) for j, ok in zip(jobs, settled, strict=True) if not ok}
    ids = {(j[0], j[1]) for j in jobs}
    assert unsettled == {(r, k, 1, 0) for r, k in ids}


def test_raw_and_fine_tiles_read_only_the_points_up_to_the_replys_high(store_path):
    """A worker's later snapshot may hold points committed after the reply's: the id bound
    leaves them out, so its raw and fine tiles are the reply's own."""
    import sqlite3

    from reslog.agent.tile_read import read_tile
    from reslog.agent.wire import BUCKET_ROW, RAW_TILE_ROW

    conn = sqlite3.connect(store_path)
    high = points_by_id.max_point_id(conn.cursor())
    before = [
        read_tile(conn.cursor(), (1, 1, lv, 39 >> sh, False, high)) for lv, sh in ((0, 0), (-2, 2))
    ]
    engine = new_store(store_path)
    add_points(engine, 1, {"a": [(39 * 1024 + i, 99.0) for i in range(5)]})  # inside tile 39
    engine.dispose()
    after = [
        read_tile(conn.cursor(), (1, 1, lv, 39 >> sh, False, high)) for lv, sh in ((0, 0), (-2, 2))
    ]
    newest = read_tile(conn.cursor(), (1, 1, 0, 39, False, high + 5))
    # Fine tiles read several at once (the last one holding the new points) are bounded alike.
    runs = [read_tile(conn.cursor(), (1, 1, -2, 6, False, h, 4)) for h in (high, high + 5)]
    conn.close()
    assert after == before and len(before[0]) % RAW_TILE_ROW.size == 0
    assert len(before[1]) % BUCKET_ROW.size == 0 and len(newest) > len(before[0])
    assert runs[0].endswith(before[1]) and len(before[1]) > 0
    assert runs[1] != runs[0] and len(runs[1]) == len(runs[0])  # the same buckets, new points
