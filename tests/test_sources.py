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
from sqlalchemy import insert

from resplot.agent_client import AgentConnectionError
from resplot.cache import SeriesCache
from resplot.sources import SpecError, open_source, parse_spec
from resplot.sources.base import PollResult, group_rows
from resplot.sources.local import LocalSource
from resplot.sources.postgres import PostgresSource, public_url
from schema.errors import NotAStore, StoreNotFound
from schema.read import key_names, list_runs, run_key_ids, series
from schema.tables import points
from tests.fixtures.stores import (
    add_points,
    heartbeat,
    make_run,
    make_sample_runs,
    new_store,
    set_status,
)

ROOT = Path(__file__).resolve().parents[1]


def assert_cache_matches_store(cache: SeriesCache, engine, source: str, store: str) -> int:
    """Every point of every run, row by row (NaN == NaN); returns the number compared."""
    total = 0
    with engine.connect() as conn:
        names = key_names(conn)
        stored = list_runs(conn, source=source, store=store)
        run_keys = {run_id: run_key_ids(conn, run_id) for run_id, _ in stored}
    for run_id, info in stored:
        assert cache.run(info.ref) is not None, info.ref
        assert sorted(cache.keys(info.ref)) == sorted(names[k] for k in run_keys[run_id])
        for key_id in run_keys[run_id]:
            steps, walls, values = series(engine, run_id, key_id)
            got = cache.series(info.ref, names[key_id])
            assert got is not None
            order = np.argsort(got[0], kind="stable")  # cache: id order; store query: by step
            assert got[0][order].tolist() == steps
            assert got[1][order].tolist() == walls
            assert np.array_equal(got[2][order], np.array(values, dtype=float), equal_nan=True)
            total += len(steps)
    return total


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
    assert {k: got[k] for k in want} == want


def test_an_existing_local_file_with_a_colon_stays_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("host:name.db").write_bytes(b"")
    assert parse_spec("host:name.db")["kind"] == "local"
    with pytest.raises(SpecError, match="unsupported source scheme 'ftp'"):
        open_source("ftp://x/y")
    with pytest.raises(SpecError, match="empty source"):
        parse_spec("  ")


def test_local_source_reads_runs_points_and_events_like_the_store(sample):
    path, engine, made = sample
    cache = SeriesCache()
    source = open_source(path)
    assert isinstance(source, LocalSource)
    try:
        result = source.poll(cache)
        assert result.runs_changed and result.rows == 26
        assert {r.uid for r in result.refs} == {m.uid for m in made}
        assert assert_cache_matches_store(cache, engine, "local", path) == 26
        statuses = {r.name: r.status for r in cache.runs()}
        assert statuses == {"wsd-0.5": "finished", "cos_lr1e-3": "failed", "wsd_50%#": "crashed"}
        assert [e.title for e in result.events] == ["step 200", "step 400", "loss is NaN"]
        assert source.rtt_ms is not None
        again = source.poll(cache)
        assert again == PollResult()  # nothing new: nothing applied twice
    finally:
        source.close()


WRITER = """
import math, sys, time
from tests.fixtures.stores import add_points, heartbeat, make_run, new_store, set_status
engine = new_store(sys.argv[1])
run = make_run(engine, name="live", status="running", heartbeat_at=time.time())
for i in range(60):
    pts = [(i * 10 + j, math.nan if j == 3 else float(i * 10 + j)) for j in range(10)]
    add_points(engine, run.id, {"train/loss": pts, "train/lr": pts[:2]})
    heartbeat(engine, run.id)
    time.sleep(0.01)
set_status(engine, run.id, "finished")
"""


def test_incremental_fetch_while_another_process_writes(tmp_path):
    path = tmp_path / "live.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT)
    source = LocalSource(str(path))
    source.limit = 37  # many small batches: cursors are exercised hard
    cache = SeriesCache()
    polls_with_data = 0
    try:
        while writer.poll() is None:
            if path.exists():
                # Until the writer has created its tables the store is missing or empty.
                with contextlib.suppress(StoreNotFound, NotAStore):
                    polls_with_data += bool(source.poll(cache).rows)
            time.sleep(0.02)
        assert writer.returncode == 0
        source.poll(cache)
        engine = new_store(path)
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 60 * 12
        engine.dispose()
        assert polls_with_data > 1  # it was read while being written, not only at the end
        assert [r.status for r in cache.runs()] == ["finished"]
    finally:
        writer.kill()
        source.close()


def test_killing_the_agent_mid_stream_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "big.db"
    engine = new_store(path)
    keys = [_key(engine, k) for k in range(3)]
    for r in range(3):
        run = make_run(engine, name=f"r{r}")
        for chunk in range(4):  # interleaved runs and keys, several inserts
            steps = range(chunk * 100, chunk * 100 + 100)
            with engine.begin() as conn:
                conn.execute(
                    insert(points),
                    [
                        {
                            "run_id": run.id,
                            "key_id": keys[k],
                            "step": s,
                            "wall": 1e9 + s,
                            "value": None if s % 97 == 0 else s * (k + 1.0),
                        }
                        for s in steps
                        for k in range(3)
                    ],
                )
    source = LocalSource(str(path))
    source.limit = 250
    cache = SeriesCache()
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
        source.poll(cache)  # reconnects: a new agent, the same cursors
        assert source.agent_pid not in (None, first_pid)
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 3600
    finally:
        source.close()
        engine.dispose()


def _key(engine, name_index: int) -> int:
    from tests.fixtures.stores import key_id

    return key_id(engine, f"k{name_index}")


def test_glob_source_reads_good_stores_and_reports_bad_ones(tmp_path):
    runs_dir = tmp_path / "runs"
    good = new_store(runs_dir / "a.db")
    make_run(good, name="a", points={"x": [(0, 1.0)]})
    newer = new_store(runs_dir / "b.db")
    with newer.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    source = LocalSource(str(runs_dir / "*.db"))
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
        LocalSource(str(tmp_path / "nothing" / "*.db")).poll(SeriesCache())


def test_heartbeats_and_status_changes_reach_the_cache(tmp_path):
    path = tmp_path / "r.db"
    engine = new_store(path)
    run = make_run(engine, name="live", status="running", heartbeat_at=time.time())
    source = LocalSource(str(path))
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
    source = open_source(pg_store)
    assert isinstance(source, PostgresSource)
    cache = SeriesCache()
    try:
        result = source.poll(cache)
        assert result.rows == 26 and len(result.events) == 3
        label = public_url(pg_store)
        assert assert_cache_matches_store(cache, engine, label, label) == 26
        assert source.poll(cache) == PollResult()
        make_run(engine, name="late", points={"y": [(1, math.inf)]})
        assert source.poll(cache).rows == 1
        assert len(cache.runs()) == len(made) + 1
    finally:
        source.close()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_row_committed_after_a_higher_id_is_not_skipped(pg_store):
    engine = new_store(pg_store)
    run = make_run(engine, name="r", points={"x": [(0, 0.0)]})
    key = _key(engine, 0)
    source = PostgresSource(pg_store)
    cache = SeriesCache()
    row = {"run_id": run.id, "key_id": key, "wall": 1e9}
    try:
        source.poll(cache)
        slow = engine.connect()
        slow_tx = slow.begin()
        slow.execute(insert(points), [{**row, "step": 1, "value": 1.0}])  # takes the lower id
        with engine.begin() as fast:
            fast.execute(insert(points), [{**row, "step": 2, "value": 2.0}])
        assert source.poll(cache).rows == 1  # only the committed, higher id
        slow_tx.commit()
        slow.close()
        assert source.poll(cache).rows == 1  # the late one, found in the overlap window
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


def test_a_run_that_goes_silent_turns_crashed_without_any_store_change(tmp_path):
    from schema.status import STALE_AFTER_MIN_S

    engine = new_store(tmp_path / "r.db")
    beat = time.time() - STALE_AFTER_MIN_S + 3
    make_run(engine, name="quiet", status="running", heartbeat_at=beat, heartbeat_interval=0.1)
    source = LocalSource(str(tmp_path / "r.db"))
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


# -- overview first, full resolution behind it (docs/protocol.md) -----------------------------

OVERVIEW_STEPS = 3000


def overview_store(path: Path, runs: int = 3, keys: int = 4) -> int:
    """Dense keys interleaved per step (as reslog writes them) plus a sparse `valid/loss`
    every 100 steps, written fast through sqlite3; returns the number of points."""
    import sqlite3

    engine = new_store(path)
    run_ids = [make_run(engine, name=f"r{r}", status="finished").id for r in range(runs)]
    engine.dispose()
    con = sqlite3.connect(path)
    key_ids = [
        con.execute("INSERT INTO keys (name) VALUES (?)", (f"train/k{k}",)).lastrowid
        for k in range(keys)
    ]
    valid = con.execute("INSERT INTO keys (name) VALUES ('valid/loss')").lastrowid
    rows = []
    for run_id in run_ids:
        for s in range(OVERVIEW_STEPS):
            for i, k in enumerate(key_ids):
                rows.append((run_id, k, s, 1e9 + s, None if s % 997 == 5 else s * 0.5 + i))
            if s % 100 == 99:
                rows.append((run_id, valid, s, 1e9 + s, 1.0 / (s + 1)))
    con.executemany(
        "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)", rows
    )
    con.commit()
    con.close()
    return len(rows)


def overview_source(path: Path, limit: int = 4000) -> LocalSource:
    source = LocalSource(str(path))
    source.overview_points, source.overview_min = 1000, 5000  # the defaults need 500k points
    source.limit = limit
    return source


def test_an_overview_shows_every_series_then_full_resolution_equals_the_store(tmp_path):
    path = tmp_path / "big.db"
    total = overview_store(path)
    engine = new_store(path)
    source = overview_source(path)
    cache = SeriesCache()
    seen: list[dict] = []

    def progress(step: PollResult) -> None:
        if step.refs and not seen:  # the first change that shows anything: the overview
            runs = cache.runs()
            seen.append(
                {
                    "rows": step.rows,
                    "partial": all(cache.is_partial(r.ref) for r in runs),
                    "keys": {r.name: cache.keys(r.ref) for r in runs},
                    "series": {
                        (r.name, k): [a.copy() for a in cache.series(r.ref, k)]
                        for r in runs
                        for k in cache.keys(r.ref)
                    },
                }
            )

    try:
        result = source.poll(cache, progress)
        assert result.rows == total  # the sample is not counted; every row read once
        first = seen[0]
        assert first["rows"] == 0 and first["partial"]
        want_keys = ["train/k0", "train/k1", "train/k2", "train/k3", "valid/loss"]
        assert first["keys"] == {f"r{r}": want_keys for r in range(3)}
        sampled = sum(len(s[0]) for s in first["series"].values())
        assert 3 * 30 + 500 < sampled < 3 * 30 + 2000  # ~1000 dense + the sparse key whole
        for (_name, key), (steps, walls, values) in first["series"].items():
            if key == "valid/loss":
                assert steps.tolist() == list(range(99, OVERVIEW_STEPS, 100))
                continue
            # The whole shape, not the oldest part: the sample spans the run's steps.
            assert steps.min() < 0.1 * OVERVIEW_STEPS and steps.max() > 0.9 * OVERVIEW_STEPS
            assert np.all(np.diff(steps) > 0)
            k = int(key[-1])
            want = np.where(steps % 997 == 5, np.nan, steps * 0.5 + k)
            assert np.array_equal(values, want, equal_nan=True)
            assert walls.tolist() == (1e9 + steps).tolist()
        assert cache.partial_refs() == set()
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == total
        assert source.poll(cache) == PollResult()  # caught up: the idle path
    finally:
        source.close()
        engine.dispose()


def test_killing_the_agent_during_the_backfill_still_ends_equal(tmp_path):
    path = tmp_path / "big.db"
    total = overview_store(path)
    engine = new_store(path)
    source = overview_source(path, limit=3000)
    cache = SeriesCache()
    steps: list[PollResult] = []

    def progress(step: PollResult) -> None:
        steps.append(step)
        if len(steps) == 4:  # the overview, then a few staged batches
            os.kill(source.agent_pid, signal.SIGKILL)

    try:
        with pytest.raises(AgentConnectionError, match="agent exited with -9"):
            source.poll(cache, progress)
        staged = sum(s.rows for s in steps)
        assert 0 < staged < total
        view = next(iter(source.views.values()))
        assert view.backfilling and view.cursor.points > 0
        assert all(cache.is_partial(r.ref) for r in cache.runs())  # still the overview
        # The reconnect goes on from the backfill's own cursor: no second overview, and the
        # rows of both polls add up to the store exactly.
        rest = source.poll(cache)
        assert staged + rest.rows == total
        assert not view.backfilling and cache.partial_refs() == set()
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == total
    finally:
        source.close()
        engine.dispose()


def test_points_logged_during_the_backfill_arrive_exactly_once(tmp_path):
    path = tmp_path / "big.db"
    total = overview_store(path)
    engine = new_store(path)
    with engine.connect() as conn:
        old_run = list_runs(conn, source="local", store=str(path))[0][0]
    source = overview_source(path, limit=5000)
    cache = SeriesCache()
    calls = 0
    logged = 0

    def progress(step: PollResult) -> None:
        nonlocal calls, logged
        calls += 1
        if calls in (2, 4, 6):  # between staged batches, after the overview's max id
            base = OVERVIEW_STEPS + 10 * calls
            pts = [(base + i, float(i)) for i in range(10)]
            add_points(engine, old_run, {"train/k0": pts, "train/new": pts[:3]})
            make_run(engine, name=f"late{calls}", points={"train/k1": pts[:4]})
            logged += 10 + 3 + 4

    try:
        result = source.poll(cache, progress)
        assert calls > 6 and logged == 51
        assert result.rows == total + logged
        assert cache.partial_refs() == set()
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == total + logged
        assert source.poll(cache).rows == 0
    finally:
        source.close()
        engine.dispose()


def test_the_window_hints_at_the_overview_and_redraws_from_scratch_after_the_swap(qtbot, tmp_path):
    from resplot import settings as settings_mod
    from resplot.window import MainWindow

    path = tmp_path / "big.db"
    total = overview_store(path, runs=2, keys=2)
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.set_page("custom")
    win.set_custom_keys("train/k*")
    win.set_smoothing(0.0)
    source = overview_source(path)
    during: list[tuple[str, int]] = []

    def progress(step: PollResult) -> None:
        if step.runs_changed:
            win.on_runs_changed()
        if step.refs and not during:  # the overview: drawn while full resolution loads
            win.redraw_now()
            lines = win.current_page().lines()
            during.append(
                (win.partial_label.text(), sum(len(ln.get_xdata()) for ln in lines.values()))
            )
            with pytest.raises(ValueError, match="still loading"):
                win.export_points(tmp_path / "sample.csv", "csv")

    try:
        assert source.poll(cache, progress).rows == total
    finally:
        source.close()
    win.redraw_now()
    assert during and during[0][0] == "loading full resolution…" and during[0][1] > 0
    assert win.partial_label.text() == ""
    lines = win.current_page().lines()
    assert len(lines) == 4  # 2 runs x train/k0, train/k1
    # A window that never saw the overview draws exactly the same lines: a track that kept
    # the overview's x values for its first points would pair them with other points' values.
    fresh = MainWindow(cache, settings_mod.Settings(), tmp_path / "fresh.json")
    qtbot.addWidget(fresh)
    fresh.set_page("custom")
    fresh.set_custom_keys("train/k*")
    fresh.set_smoothing(0.0)
    for run in cache.runs():
        fresh.tick(run.ref)
    fresh.redraw_now()
    want = fresh.current_page().lines()
    assert set(want) == set(lines)
    for name, line in lines.items():
        assert np.array_equal(line.get_xdata(), want[name].get_xdata())
        assert np.array_equal(line.get_ydata(), want[name].get_ydata(), equal_nan=True)
        assert max(line.get_xdata()) == OVERVIEW_STEPS - 1
    fresh.close()
    win.close()


def test_a_store_deleted_and_written_anew_at_the_same_path_is_read_from_the_start(tmp_path):
    """`rm runs/reslog.db` and a new training run while resplot watches: the new file's ids
    start again at 1, below the old cursor, and its runs must not inherit the old series."""
    path = tmp_path / "reslog.db"
    old = new_store(path)
    make_run(old, name="old", points={"x": [(i, float(i)) for i in range(50)]})
    old.dispose()
    source = LocalSource(str(path))
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
        assert assert_cache_matches_store(cache, new, "local", str(path)) == 5
        new.dispose()
    finally:
        source.close()
