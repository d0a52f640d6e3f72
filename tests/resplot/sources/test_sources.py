"""Sources against real stores: a local agent subprocess (the remote code path) and PostgreSQL."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from reslog.agent.wire import MAX_TILES
from resplot.data.cache import SeriesCache
from resplot.data.views import series_view
from resplot.sources import SpecError, open_source, parse_spec
from resplot.sources.agent import group_rows, split_tiles, tile_ranges
from resplot.sources.base import PollResult
from resplot.sources.client import AgentConnectionError
from resplot.sources.local import LocalSource
from resplot.sources.postgres import PostgresSource
from schema.store import buckets
from schema.store.errors import NotAStore, StoreNotFound
from tests.fixtures.compare import assert_cache_matches_store, want_every_tile
from tests.fixtures.stores import (
    add_points,
    heartbeat,
    make_run,
    make_sample_runs,
    new_store,
    set_status,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("runs/reslog.db", {"kind": "local", "path": "runs/reslog.db"}),
        ("runs/*.db", {"kind": "local", "path": "runs/*.db"}),
        (r"C:\runs\reslog.db", {"kind": "local", "path": r"C:\runs\reslog.db"}),
        ("gpu1:runs/reslog.db", {"kind": "ssh", "host": "gpu1", "path": "runs/reslog.db"}),
        ("me@gpu1:~/r/*.db", {"kind": "ssh", "user": "me", "host": "gpu1", "path": "~/r/*.db"}),
        ("ssh://me@gpu1:2222/data/r.db", {"host": "gpu1", "port": 2222, "path": "/data/r.db"}),
        ("ssh://gpu1/~/r.db", {"kind": "ssh", "host": "gpu1", "port": None, "path": "~/r.db"}),
        ("postgresql+psycopg://u:pw@db/x", {"kind": "postgres"}),
    ],
)
def test_specs_are_classified(spec, want):
    got = parse_spec(spec)
    assert {k: getattr(got, k) for k in want} == want


def test_an_existing_local_file_with_a_colon_stays_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("host:name.db").write_bytes(b"")
    assert parse_spec("host:name.db").kind == "local"
    with pytest.raises(SpecError, match="unsupported source scheme 'ftp'"):
        parse_spec("ftp://x/y")
    with pytest.raises(SpecError, match="empty source"):
        parse_spec("  ")


def test_local_source_reads_runs_summaries_and_events_then_the_tiles_asked_for(sample):
    path, engine, made = sample
    cache = SeriesCache()
    source = open_source(parse_spec(path))
    assert isinstance(source, LocalSource)
    try:
        result = source.poll(cache)
        assert result.runs_changed and result.rows == 0  # history: summaries, not points
        assert {r.uid for r in result.refs} == {m.uid for m in made}
        statuses = {r.name: r.status for r in cache.runs()}
        assert statuses == {"wsd-0.5": "finished", "cos_lr1e-3": "failed", "wsd_50%#": "crashed"}
        assert [e.title for e in result.events] == ["step 200", "step 400", "loss is NaN"]
        assert source.rtt_ms is not None
        assert cache.tile_bytes == 0
        want_every_tile(cache)
        assert cache.wanted_count() > 0
        tiles = source.poll(cache)
        assert (
            tiles.tiles
            == cache.wanted_count()
            + len(
                [
                    t
                    for r in cache.runs()
                    for k in cache.keys(r.ref)
                    for t in cache.tiles_of(r.ref, k)
                ]
            )
            and cache.wanted_count() == 0
        )
        assert assert_cache_matches_store(cache, engine, "local", path) == 10
        again = source.poll(cache)
        assert again == PollResult()  # nothing new: nothing applied twice
    finally:
        source.close()


WRITER = """
import math, sys, time
from tests.fixtures.stores import add_points, heartbeat, make_run, new_store, set_status
engine = new_store(sys.argv[1])
run = make_run(engine, name="live", status="running", heartbeat_at=time.time())
add_points(engine, run.id, {"train/loss": [(0, 9.0)]})
time.sleep(0.5)
for i in range(60):
    pts = [(i * 10 + j, math.nan if j == 3 else float(i * 10 + j)) for j in range(10)]
    add_points(engine, run.id, {"train/loss": pts, "train/lr": pts[:2]})
    heartbeat(engine, run.id)
    time.sleep(0.01)
add_points(engine, run.id, {"train/loss": [(5, 1.0)]})  # resumed from an older checkpoint
set_status(engine, run.id, "finished")
"""


@pytest.mark.integration
def test_live_points_keep_summaries_and_tiles_equal_to_the_store(tmp_path):
    path = tmp_path / "live.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT)
    source = LocalSource(parse_spec(str(path)))
    source.limit = 37  # many small batches: cursors are exercised hard
    cache = SeriesCache()
    polls_with_data = 0
    try:
        while writer.poll() is None:
            if path.exists():
                # Until the writer has created its tables the store is missing or empty.
                with contextlib.suppress(StoreNotFound, NotAStore):
                    polls_with_data += bool(source.poll(cache).rows)
                    want_every_tile(cache)  # tiles read mid-way, then kept current live
            time.sleep(0.02)
        assert writer.returncode == 0
        for _ in range(3):  # the restart at the end drops the series; it is read again
            source.poll(cache)
            want_every_tile(cache)
        engine = new_store(path)
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 2
        live = cache.live(cache.runs()[0].ref, "train/lr")
        assert live is not None and len(live[0]) >= 100  # points seen arriving, in the tail
        engine.dispose()
        assert polls_with_data > 1  # it was read while being written, not only at the end
        assert [r.status for r in cache.runs()] == ["finished"]
    finally:
        writer.kill()
        source.close()


@pytest.mark.slow
def test_killing_the_agent_mid_stream_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "big.db"
    engine = new_store(path)
    runs = [make_run(engine, name=f"r{r}").id for r in range(3)]
    source = LocalSource(parse_spec(str(path)))
    source.limit = 250
    cache = SeriesCache()
    source.poll(cache)  # the live cursor at the (empty) end
    for chunk in range(4):  # interleaved runs and keys, several inserts
        for run_id in runs:
            add_points(
                engine,
                run_id,
                {
                    f"k{k}": [
                        (s, math.nan if s % 97 == 0 else s * (k + 1.0))
                        for s in range(chunk * 100, chunk * 100 + 100)
                    ]
                    for k in range(3)
                },
            )
    batches = []
    first_pid = None

    def progress(step: PollResult) -> None:
        nonlocal first_pid
        batches.append(step.rows)
        if len(batches) == 3:
            first_pid = source.agent_pid
            os.kill(first_pid, signal.SIGKILL)

    try:
        with pytest.raises(AgentConnectionError, match="agent exited with -9"):
            source.poll(cache, progress)
        assert sum(batches) < 3600  # stopped part way
        rest = source.poll(cache)  # reconnects: a new agent, the same cursors
        assert source.agent_pid not in (None, first_pid)
        assert sum(batches) + rest.rows == 3600
        tails = sum(len(cache.live(r.ref, k)[0]) for r in cache.runs() for k in cache.keys(r.ref))
        assert tails == 3600  # every point applied exactly once
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 9
    finally:
        source.close()
        engine.dispose()


@pytest.mark.slow
def test_tiles_asked_for_during_a_long_backlog_wait_until_it_has_caught_up(tmp_path):
    """A reply whose live batch stops short of its snapshot would count points twice if its
    tiles were kept: they are asked for again and arrive once the stream has caught up."""
    path = tmp_path / "t.db"
    engine = new_store(path)
    run = make_run(engine, name="r", points={"x": [(s, float(s)) for s in range(3000)]})
    source = LocalSource(parse_spec(str(path)))
    source.limit = 100
    cache = SeriesCache()
    try:
        source.poll(cache)
        add_points(engine, run.id, {"x": [(s, -1.0) for s in range(3000, 3500)]})
        want_every_tile(cache)
        first = source.poll(cache)  # 5 pipelined replies: the first one carried the tiles
        assert first.rows == 500 and first.tiles == 0 and cache.wanted_count() > 0
        assert source.poll(cache).tiles > 0 and cache.wanted_count() == 0
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 1
    finally:
        source.close()
        engine.dispose()


@pytest.mark.slow
def test_more_tiles_than_one_request_holds_come_in_further_polls(tmp_path):
    """A sparse series drawn raw over a wide range wants a tile per 1024 steps: past the agent's
    per-request bound the source splits the ask over several polls and loses none."""
    path = tmp_path / "sparse.db"
    engine = new_store(path)
    far = (MAX_TILES + 600) * buckets.TILE_BUCKETS
    points = {"valid/loss": [(0, 3.0), (far // 2, 2.0), (far, 1.0)]}
    make_run(engine, name="sparse", points=points)
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        ref = next(r.ref for r in cache.runs())
        view = series_view(cache, ref, "valid/loss", -np.inf, np.inf, 800)
        assert view is None and cache.wanted_count() == MAX_TILES + 601
        result = source.poll(cache)
        assert result.tiles == MAX_TILES + 601 and cache.wanted_count() == 0
        view = series_view(cache, ref, "valid/loss", -np.inf, np.inf, 800)
        assert view.complete and view.level == 0
        assert view.steps.tolist() == [0, far // 2, far] and view.values.tolist() == [3, 2, 1]
    finally:
        source.close()


def test_split_tiles_keeps_every_tile_once_within_the_bound():
    ranges = [[1, 1, 0, 0, 5], [1, 2, 1, 3, 12], [2, 1, 0, 7, 1]]
    chunks = split_tiles(ranges, 4)
    assert all(sum(r[4] for r in c) <= 4 for c in chunks) and len(chunks) == 5
    tiles = [(r[0], r[1], r[2], r[3] + i) for c in chunks for r in c for i in range(r[4])]
    want = [(r[0], r[1], r[2], r[3] + i) for r in ranges for i in range(r[4])]
    assert tiles == want
    assert split_tiles([], 4) == [[]]  # a poll with no tiles still goes out


def test_tile_requests_group_into_ranges():
    wanted = [("u", "a", 1, 3), ("u", "a", 1, 4), ("u", "a", 1, 6), ("u", "b", 0, 0)]
    assert tile_ranges(wanted) == [("u", "a", 1, 3, 2), ("u", "a", 1, 6, 1), ("u", "b", 0, 0, 1)]


def _key(engine, name_index: int) -> int:
    from tests.fixtures.stores import key_id

    return key_id(engine, f"k{name_index}")


@pytest.mark.slow
def test_glob_source_reads_good_stores_and_reports_bad_ones(tmp_path):
    runs_dir = tmp_path / "runs"
    good = new_store(runs_dir / "a.db")
    make_run(good, name="a", points={"x": [(0, 1.0)]})
    newer = new_store(runs_dir / "b.db")
    with newer.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    source = LocalSource(parse_spec(str(runs_dir / "*.db")))
    cache = SeriesCache()
    try:
        result = source.poll(cache)
        assert [r.name for r in cache.runs()] == ["a"]
        assert len(result.errors) == 1 and "newer reslog" in result.errors[0]
        make_run(new_store(runs_dir / "c.db"), name="c")  # a new file: found on rediscovery
        source.rediscover_s = 0.0
        source.poll(cache)
        assert [r.name for r in cache.runs()] == ["a", "c"]
    finally:
        source.close()
        good.dispose()
        newer.dispose()
    with pytest.raises(StoreNotFound, match="no store matches"):
        LocalSource(parse_spec(str(tmp_path / "nothing" / "*.db"))).poll(SeriesCache())


def test_heartbeats_and_status_changes_reach_the_cache(tmp_path):
    path = tmp_path / "r.db"
    engine = new_store(path)
    run = make_run(engine, name="live", status="running", heartbeat_at=time.time())
    source = LocalSource(parse_spec(str(path)))
    cache = SeriesCache()
    try:
        source.poll(cache)
        assert cache.runs()[0].status == "running"
        beat = time.time() + 5
        heartbeat(engine, run.id, beat)
        assert source.poll(cache).runs_changed
        assert cache.runs()[0].heartbeat_at == beat
        set_status(engine, run.id, "killed")
        assert source.poll(cache).runs_changed
        assert cache.runs()[0].status == "killed"
        assert not source.poll(cache).runs_changed
    finally:
        source.close()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_source_reads_like_the_store(pg_store):
    engine = new_store(pg_store)
    made = make_sample_runs(engine)
    source = open_source(parse_spec(pg_store))
    assert isinstance(source, PostgresSource)
    cache = SeriesCache()
    try:
        result = source.poll(cache)
        assert result.rows == 0 and len(result.events) == 3
        label = parse_spec(pg_store).label
        want_every_tile(cache)
        assert source.poll(cache).tiles > 0
        assert assert_cache_matches_store(cache, engine, label, label) == 10
        assert source.poll(cache) == PollResult()
        add_points(engine, made[0].id, {"train/loss": [(450, 2.5), (460, math.inf)]})
        make_run(engine, name="late", points={"y": [(1, math.inf)]})
        assert source.poll(cache).rows == 3
        assert len(cache.runs()) == len(made) + 1
        assert assert_cache_matches_store(cache, engine, label, label) == 11
    finally:
        source.close()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_row_committed_after_a_higher_id_is_not_skipped(pg_store):
    from schema.store.rollup_writer import RollupWriter

    engine = new_store(pg_store)
    run = make_run(engine, name="r", points={"x": [(0, 0.0)]})
    key = _key(engine, 0)
    source = PostgresSource(parse_spec(pg_store))
    cache = SeriesCache()
    try:
        source.poll(cache)
        slow = engine.connect()
        slow_tx = slow.begin()
        RollupWriter(engine.dialect, run.id).insert(slow, [(run.id, key, 1, 1e9, 1.0)])
        fast_run = make_run(engine, name="fast")
        add_points(engine, fast_run.id, {"k0": [(2, 2.0)]})  # the higher id, committed first
        assert source.poll(cache).rows == 1  # only the committed, higher id
        slow_tx.commit()
        slow.close()
        assert source.poll(cache).rows == 1  # the late one, found in the overlap window
        assert source.poll(cache).rows == 0
        assert assert_cache_matches_store(cache, engine, source.label, source.store) == 3
    finally:
        source.close()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_overlap_window_counts_rows_not_point_ids(pg_store):
    """A point id is its row's sequence value times PG_ROW_STRIDE plus its column: a window of
    200 rows finds a row committed after 100 newer rows (20,000+ ids above it), and small
    batches page through the window and past it without loss or repeat."""
    from schema.store.rollup_writer import RollupWriter

    engine = new_store(pg_store)
    run = make_run(engine, name="r", points={"x": [(0, 0.0)]})
    key = _key(engine, 0)
    source = PostgresSource(parse_spec(pg_store), overlap=200)
    source.limit = 7
    cache = SeriesCache()
    try:
        source.poll(cache)
        slow = engine.connect()
        slow_tx = slow.begin()
        RollupWriter(engine.dialect, run.id).insert(slow, [(run.id, key, 1, 1e9, 1.0)])
        fast_run = make_run(engine, name="fast")
        for s in range(100):  # one transaction, one row each
            add_points(engine, fast_run.id, {"k0": [(s, float(s))]})
        assert source.poll(cache).rows == 100
        slow_tx.commit()
        slow.close()
        assert source.poll(cache).rows == 1  # the late row, 100 rows below the newest
        assert source.poll(cache).rows == 0
        assert assert_cache_matches_store(cache, engine, source.label, source.store) == 3
    finally:
        source.close()
        engine.dispose()


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_are_grouped_per_series_in_arrival_order(sparse):
    rng = np.random.default_rng(0)
    runs = rng.integers(1, 4, 5000) * (10**12 if sparse else 1)  # huge ids take np.unique
    keys = rng.integers(1, 300, 5000)
    groups = group_rows(runs, keys)
    seen = np.concatenate([idx for _, _, idx in groups])
    assert sorted(seen.tolist()) == list(range(5000))  # every row exactly once
    for run_id, key_id, idx in groups:
        assert np.all(np.diff(idx) > 0)  # arrival order kept inside a series
        assert set(runs[idx].tolist()) == {run_id} and set(keys[idx].tolist()) == {key_id}
    assert len(groups) == len(set(zip(runs.tolist(), keys.tolist(), strict=True)))
    assert group_rows(np.empty(0, np.int64), np.empty(0, np.int64)) == []


@pytest.mark.slow
def test_a_run_that_goes_silent_turns_crashed_without_any_store_change(tmp_path):
    from schema.store.status import STALE_AFTER_MIN_S

    engine = new_store(tmp_path / "r.db")
    beat = time.time() - STALE_AFTER_MIN_S + 3
    make_run(engine, name="quiet", status="running", heartbeat_at=beat, heartbeat_interval=0.1)
    source = LocalSource(parse_spec(str(tmp_path / "r.db")))
    cache = SeriesCache()
    try:
        source.poll(cache)
        before = cache.runs()[0]
        assert before.status == "running"
        while time.time() - beat <= STALE_AFTER_MIN_S + 0.1:
            time.sleep(0.2)
        assert source.poll(cache).runs_changed
        assert cache.runs()[0].status == "crashed" and before.status == "running"
    finally:
        source.close()
        engine.dispose()


def test_a_store_deleted_and_written_anew_at_the_same_path_is_read_from_the_start(tmp_path):
    """`rm runs/reslog.db` and a new training run while resplot watches: the new file's ids
    start again at 1, below the old cursor, and its runs must not inherit the old series."""
    path = tmp_path / "reslog.db"
    old = new_store(path)
    make_run(old, name="old", points={"x": [(i, float(i)) for i in range(50)]})
    old.dispose()
    source = LocalSource(parse_spec(str(path)))
    cache = SeriesCache()
    try:
        source.poll(cache)
        assert [r.name for r in cache.runs()] == ["old"]
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{path}{suffix}")
        new = new_store(path)
        make_run(new, name="new", points={"y": [(i, float(i)) for i in range(5)]})
        source.poll(cache)  # notices the new file
        source.poll(cache)
        assert [r.name for r in cache.runs()] == ["new"]
        assert assert_cache_matches_store(cache, new, "local", str(path)) == 1
        new.dispose()
    finally:
        source.close()
