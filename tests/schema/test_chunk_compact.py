"""Compaction (schema/store/chunk_compact.py): a finished run's per-series chunks regrouped and
small chunks merged, every point keeping its bits and its id; a kill at any moment leaves a store
that checks and holds every point; a reader polling by cursor neither loses nor repeats a point
across compactions; an upgraded old store reads out the same (docs/store.md, "Compaction")."""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

import reslog
from reslog.tools.maintenance import check_store, upgrade_store
from schema.store import chunk_compact, chunk_convert, chunk_read, migrate, points_by_id
from schema.store.connect import make_engine, open_store, resolve_store
from schema.store.read import dbapi_cursor, fetch_points
from schema.store.rollup_writer import RollupWriter
from schema.store.writes import resolve_keys
from tests.fixtures.legacy import as_rows
from tests.fixtures.stores import make_run, new_store

ROOT = Path(__file__).resolve().parents[2]
ASSET = ROOT / "tests" / "assets" / "store_0005.db"
KEYS = 5


def random_bits(rng: random.Random) -> float:
    """A float64 of any bit pattern now and then (NaN payloads, subnormals), else ±inf, −0.0
    or a plain value."""
    pick = rng.random()
    if pick < 0.3:
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if pick < 0.35:
        return rng.choice([float("inf"), -float("inf"), -0.0, 0.0])
    if pick < 0.4:  # a quiet NaN with a payload, and a signalling one
        return struct.unpack(
            "<d", struct.pack("<Q", rng.choice([0x7FF8_0000_0000_1234, 0x7FF0_0000_0000_0001]))
        )[0]
    return rng.gauss(0.0, 1.0)


def per_series_run(engine: Engine, steps: int, seed: int = 3) -> int:
    """A finished run written as the importers and conversions wrote it: each key its own
    group, a flush a step (so each key's chunks hold its points alone), through the writer's
    own code; returns its id."""
    rng = random.Random(seed)
    run = make_run(engine, name=f"s{seed}", points={})
    writer = RollupWriter(engine.dialect, run.id)
    keys = [f"k{j}" for j in range(KEYS)]
    with engine.begin() as conn:
        ids = resolve_keys(conn, keys)
    wall = 1.7e9
    for step in range(steps):
        wall += 0.25 + rng.random() * 1e-3
        rows, groups = [], []
        for key in keys:
            v = random_bits(rng)
            rows.append((run.id, ids[key], step, wall, v))
            groups.append(([step], [wall], {ids[key]: [v]}))
        with engine.begin() as conn:
            pending = writer.insert(conn, rows, groups)
        writer.accept(pending)
    with engine.begin() as conn:
        writer.seal_all(conn, alone=True)
    writer.accept()
    return run.id


def bits_by_id(engine: Engine) -> dict[int, tuple]:
    """{point id: (run, key, step, wall bits, value bits)} read straight from every chunk."""
    out = {}
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT c.run_id, k.key_ids, c.data FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
        ).all()
    for run_id, text, blob in rows:
        c = chunk_read.decode(blob)
        keys = chunk_read.key_list(text)
        for j, key in enumerate(keys):
            for i, base in enumerate(c.ids.tolist()):
                pid = base + j
                assert pid not in out, pid
                out[pid] = (
                    run_id,
                    key,
                    int(c.steps[i]),
                    c.walls[i : i + 1].tobytes(),
                    c.values[j][i : i + 1].tobytes(),
                )
    return out


def chunk_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM chunks").scalar())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request) -> str:
    if request.param == "sqlite":
        return str(request.getfixturevalue("store_path"))
    return request.getfixturevalue("pg_store")


@pytest.mark.slow
def test_compaction_keeps_every_point_to_the_bit_and_checks(any_store):
    engine = new_store(any_store)
    try:
        run_id = per_series_run(engine, 1_300)
        before = bits_by_id(engine)
        chunks = chunk_count(engine)
        done = chunk_compact.compact(engine)
        assert bits_by_id(engine) == before
        assert done.points > 0 and done.chunks_after < done.chunks_before == chunks
        assert chunk_count(engine) == done.chunks_after
        if engine.dialect.name == "sqlite":
            # A flush a step through one writer: each step's keys took consecutive ids, so the
            # keys regroup into one chunk (their ids as they were) and those merge to 4,096 rows.
            assert done.chunks_after == 1 and done.bytes_after < done.bytes_before
            with engine.connect() as conn:
                text = conn.exec_driver_sql(
                    "SELECT k.key_ids FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
                ).scalar()
            assert len(chunk_read.key_list(text)) == KEYS
        else:
            # PostgreSQL gives each row of points its own stride of 256 ids: nothing lines up
            # across keys, so only merging happens (the 256-head chunks of each key).
            assert done.chunks_after == KEYS
        again = chunk_compact.compact(engine, [run_id])
        assert again.points == 0 and again.chunks_after == done.chunks_after
    finally:
        engine.dispose()
    report = check_store(any_store, full=True)
    assert report.problems == [], report.problems


@pytest.mark.slow
def test_a_live_run_is_left_to_its_writer(store_path, capsys):
    engine = new_store(store_path)
    try:
        run_id = per_series_run(engine, 600)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE runs SET status = 'running', heartbeat_at = ? WHERE id = ?",
                (time.time() + 3600, run_id),
            )
            conn.exec_driver_sql(
                "UPDATE runs SET pid = ?, proc_host = NULL WHERE id = ?", (os.getpid(), run_id)
            )
        before = chunk_count(engine)
        assert chunk_compact.compact(engine).points == 0 and chunk_count(engine) == before
    finally:
        engine.dispose()
    from reslog.tools.cli import main

    assert main(["compact", str(store_path), "--run", "s3"]) == 0
    assert "is still being written: its chunks are its writer's" in capsys.readouterr().out


def old_and_upgraded(tmp_path: Path) -> tuple[Path, Path]:
    """The kept old store upgraded twice: rows converted only, and by `reslog upgrade` (which
    compacts)."""
    plain, full = tmp_path / "plain.db", tmp_path / "full.db"
    shutil.copyfile(ASSET, plain)
    shutil.copyfile(ASSET, full)
    engine = make_engine(resolve_store(plain))
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    line = upgrade_store(str(full), backup=False)
    assert "schema 0005 → 0006" in line, line
    return plain, full


def test_the_kept_old_store_upgraded_and_compacted_reads_every_point_as_before(tmp_path):
    plain, full = old_and_upgraded(tmp_path)
    a, b = open_store(plain, readonly=True), open_store(full, readonly=True)
    try:
        assert bits_by_id(b) == bits_by_id(a)
        for engine in (a, b):
            with engine.connect() as conn:
                cur, p = dbapi_cursor(conn)
                got = points_by_id.points_after(cur, p, None, 0)
            if engine is a:
                expected = got
        assert got == expected and len(got) == 3_840
    finally:
        a.dispose()
        b.dispose()
    assert check_store(str(full), full=True).problems == []


def row_major_store(path: str, steps: int, chunk_rows: int | None = None) -> Engine:
    """A store whose rows were logged step by step (every key of a step, then the next step),
    converted to chunks by the upgrade without compaction: the per-series chunks an upgrade
    makes, whose ids line up across keys (`chunk_rows`: converted into chunks that small, so a
    compaction has many units of work)."""
    run = reslog.init(project="p", name="rows", store=path, system=False, flush_interval=0.05)
    rng = random.Random(5)
    for step in range(steps):
        m = {f"train/k{j}": round(rng.gauss(0, 1), 3) for j in range(8)}
        if step % 4 == 0:
            m.update({f"sys/gpu{g}/power": 250.0 + rng.randrange(100) / 10 for g in range(4)})
        run.log(m, step=step)
    run.finish()
    engine = make_engine(resolve_store(path))
    as_rows(engine)
    size = chunk_convert.CHUNK_POINTS
    chunk_convert.CHUNK_POINTS = chunk_rows or size
    try:
        migrate.upgrade(engine)
    finally:
        chunk_convert.CHUNK_POINTS = size
        engine.dispose()
    return open_store(path)


@pytest.mark.slow
def test_bytes_a_point_of_an_upgraded_store_before_and_after(any_store):
    engine = row_major_store(any_store, 9_000)
    try:
        before = bits_by_id(engine)
        done = chunk_compact.compact(engine)
        assert bits_by_id(engine) == before
        n = len(before)
        print(
            f"{engine.dialect.name}: {n:,} points, {done.bytes_before / n:.2f} → "
            f"{done.bytes_after / n:.2f} blob bytes a point, {done.chunks_before} → "
            f"{done.chunks_after} chunks"
        )
        # 8 keys every step and 4 every 4th, each a chunk of its own: regrouped, their steps
        # and walls are stored once a group instead of once a key.
        assert done.bytes_after < 0.9 * done.bytes_before
    finally:
        engine.dispose()
    assert check_store(any_store, full=True).problems == []


# -- a reader's cursor ----------------------------------------------------------------------------


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_a_reader_polling_by_cursor_neither_loses_nor_repeats_across_compactions(any_store):
    engine = row_major_store(any_store, 5_000)
    try:
        everything = bits_by_id(engine)
        with engine.connect() as conn:
            run_id = int(conn.exec_driver_sql("SELECT min(id) FROM runs").scalar())
            plans = chunk_compact.plan_regroups(chunk_compact._sealed(conn, run_id))
        assert len(plans) >= 3
        work = [(chunk_compact.regroup, chain) for chain in plans]
        merged = False
        seen_tail: list[int] = []
        seen_live: list[int] = []
        tail_cursor = live_cursor = 0
        with engine.connect() as conn:
            high = points_by_id.max_point_id(dbapi_cursor(conn)[0])
        rng = random.Random(11)
        while True:
            # `reslog tail`'s read, and the agent's live poll (points after C up to its
            # snapshot, a page at a time; resplot's PostgreSQL source reads the same way).
            with engine.connect() as conn:
                page = fetch_points(conn, [run_id], after=tail_cursor, limit=rng.randrange(50, 900))
                cur, p = dbapi_cursor(conn)
                live = points_by_id.points_after(
                    cur, p, None, live_cursor, upto=high, limit=rng.randrange(50, 900)
                )
            seen_tail += page.ids
            tail_cursor = page.cursor
            seen_live += [r[0] for r in live]
            live_cursor = live[-1][0] if live else live_cursor
            if not work and not merged:  # the regroups done: the merges, planned now
                merged = True
                with engine.connect() as conn:
                    batches = chunk_compact.plan_merges(chunk_compact._sealed(conn, run_id))
                work = [(chunk_compact.merge, batch) for batch in batches]
            if work and rng.random() < 0.3:  # a unit of compaction between two polls
                how, chunks = work.pop(0)
                assert chunk_compact._unit(engine, run_id, how, chunks) > 0
            elif not work and not page.ids and not live:
                break
        # Then merging, and a poll that finds nothing new.
        chunk_compact.compact(engine)
        with engine.connect() as conn:
            assert fetch_points(conn, [run_id], after=tail_cursor).ids == []
        assert sorted(seen_tail) == seen_tail == sorted(everything)
        assert sorted(seen_live) == seen_live == sorted(everything)
        assert bits_by_id(engine) == everything
    finally:
        engine.dispose()


# -- SIGKILL ---------------------------------------------------------------------------------------

CHILD = r"""
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
from schema.store import chunk_compact
from schema.store.connect import open_store
engine = open_store(sys.argv[1])
with engine.connect() as conn:
    todo = chunk_compact.compactable_runs(conn)
for run_id in todo:
    chunk_compact.compact_run(engine, run_id, lambda n: print(n, flush=True))
print("done", flush=True)
"""


@pytest.mark.integration
def test_sigkill_at_random_points_of_a_compaction_loses_nothing(any_store):
    # Chunks of 64 rows: a compaction of ~250 units (regroups, then merges up to 4,096 rows),
    # so the kills land inside units' transactions as well as between them.
    engine = row_major_store(any_store, 2_000, chunk_rows=64)
    try:
        everything = bits_by_id(engine)
        chunks = chunk_count(engine)
    finally:
        engine.dispose()
    rng = random.Random(17)
    kills = 0
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, any_store],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        first = proc.stdout.readline().strip()  # a unit committed (or nothing left to do)
        if first == "done":
            proc.wait(timeout=30)
            break
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kills += 1
        engine = open_store(any_store)
        try:
            assert bits_by_id(engine) == everything
            left = chunk_count(engine)
        finally:
            engine.dispose()
        report = check_store(any_store)
        assert report.problems == [], report.problems
    assert kills >= 1 and left < chunks  # killed part way, some units done
    engine = open_store(any_store)
    try:
        rest = chunk_compact.compact(engine)  # what the kills left: resumed
        assert bits_by_id(engine) == everything
        assert chunk_count(engine) < left or rest.points == 0
        assert chunk_compact.compact(engine).points == 0  # nothing more to do
    finally:
        engine.dispose()
    assert check_store(any_store, full=True).problems == []


@pytest.mark.slow
def test_reslog_compact_says_what_it_did_in_one_line(store_path, capsys):
    from reslog.tools.cli import main

    engine = row_major_store(str(store_path), 1_000)
    try:
        before = bits_by_id(engine)
        with engine.connect() as conn:
            uid = conn.exec_driver_sql("SELECT uid FROM runs").scalar()
    finally:
        engine.dispose()
    assert main(["compact", str(store_path), "--run", uid[:8]]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "points of 1 run compacted: 12 → 2 chunks" in out[0], out
    assert main(["compact", str(store_path)]) == 0
    assert "nothing to compact: 2 chunks" in capsys.readouterr().out
    engine = open_store(store_path)
    try:
        assert bits_by_id(engine) == before
    finally:
        engine.dispose()


def test_an_import_stores_series_logged_together_as_one_chunk(tmp_path, capsys):
    from reslog.tools.cli import main

    path = tmp_path / "hist.csv"
    lines = ["step,loss,lr,acc"]
    for step in range(300):
        acc = f"{step / 300:.3f}" if step % 10 == 0 else ""
        lines.append(f"{step},{4.0 / (step + 1):.6f},{3e-4 * min(1, step / 100):.3e},{acc}")
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.db"
    assert main(["import", "csv", str(path), "--store", str(store), "--name", "w"]) == 0
    capsys.readouterr()
    engine = open_store(store)
    try:
        with engine.connect() as conn:
            found = sorted(
                (len(chunk_read.key_list(text)), n)
                for text, n in conn.exec_driver_sql(
                    "SELECT k.key_ids, c.n FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
                ).all()
            )
        # loss and lr share every step (and wall): one chunk of 2 columns; acc apart.
        assert found == [(1, 30), (2, 300)], found
        assert len(bits_by_id(engine)) == 300 * 2 + 30
    finally:
        engine.dispose()
    assert check_store(str(store), full=True).problems == []


@pytest.mark.integration
def test_reslog_upgrade_compacts_with_its_progress_bar(tmp_path, capfd):
    from reslog.tools.cli import main

    path = tmp_path / "old.db"
    run = reslog.init(project="p", name="rows", store=path, system=False, flush_interval=0.05)
    for step in range(2_000):
        run.log({f"k{j}": step * 0.5 + j for j in range(4)}, step=step)
    run.finish()
    engine = make_engine(resolve_store(path))
    try:
        points = len(bits_by_id(engine))
        as_rows(engine)  # a 0005 store whose rows were logged step by step
    finally:
        engine.dispose()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reslog.tools.cli",
            "upgrade",
            str(path),
            "--no-backup",
            "--progress",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    out, err = done.stdout, done.stderr
    assert f"compacting: {points:,} / {points:,} points (100%)" in err, err
    assert "schema 0005 → 0006" in out and "compacted: 4 → 1 chunks" in out, out
    assert main(["upgrade", str(path)]) == 0
    assert "nothing to do" in capfd.readouterr().out
    assert check_store(str(path), full=True).problems == []


@pytest.mark.slow
def test_two_compactions_of_one_store_at_once_take_turns(any_store):
    import threading

    engine = row_major_store(any_store, 1_500, chunk_rows=64)
    try:
        everything = bits_by_id(engine)
        before = chunk_count(engine)
    finally:
        engine.dispose()
    results: list = []

    def one() -> None:
        e = open_store(any_store)
        try:
            results.append(chunk_compact.compact(e))
        except BaseException as exc:  # reported below
            results.append(exc)
        finally:
            e.dispose()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert all(isinstance(r, chunk_compact.Compacted) for r in results), results
    engine = open_store(any_store)
    try:
        assert bits_by_id(engine) == everything
        assert chunk_count(engine) < before
        assert chunk_compact.compact(engine).points == 0
    finally:
        engine.dispose()
    assert check_store(any_store, full=True).problems == []


@pytest.mark.slow
def test_compaction_without_numpy_writes_what_it_read(store_path, monkeypatch):
    """reslog on a host without numpy: arrays and the standard-library codec, the same points
    to the bit."""
    engine = new_store(store_path)
    try:
        per_series_run(engine, 700, seed=4)
        before = bits_by_id(engine)
        monkeypatch.setattr(chunk_read, "_numpy", (None, None))
        done = chunk_compact.compact(engine)
        assert done.chunks_after == 1 and done.points == 700 * KEYS
        assert done.rewritten == 2 * 700 * KEYS  # regrouped, then merged
        monkeypatch.undo()
        assert bits_by_id(engine) == before
    finally:
        engine.dispose()
    assert check_store(str(store_path), full=True).problems == []


def test_an_import_appending_to_a_run_merges_its_chunks_with_the_earlier_ones(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    from reslog.tools.cli import main

    logdir, store = tmp_path / "tb", tmp_path / "runs.db"
    w = SummaryWriter(str(logdir / "live"))
    for step in range(100):
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
    w.flush()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    for step in range(100, 250):  # the run goes on, its file grows
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
    w.close()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert "updated 'live': 150 new points in 1 keys" in capsys.readouterr().out
    engine = open_store(store)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT n, sealed FROM chunks").all()
        assert [tuple(r) for r in rows] == [(250, 1)]  # 100 and 150 rows, merged
        got = sorted(v[2] for v in bits_by_id(engine).values())
        assert got == list(range(250))
    finally:
        engine.dispose()
    assert check_store(str(store), full=True).problems == []
