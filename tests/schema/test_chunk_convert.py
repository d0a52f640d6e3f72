"""`reslog upgrade` to 0006: the rows of `points` become sealed one-series chunks run by run,
keeping their ids; a store half converted (an error, a SIGKILL of the real command) reads
whole and the next `reslog upgrade` finishes the job; every point comes out exactly."""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

import reslog
from reslog.tools.maintenance import check_store, upgrade_store
from schema.store import chunk_codec, chunk_convert, chunk_read, points_by_id
from schema.store.chunk_write import SEAL_ROWS
from schema.store.connect import make_engine, open_store, resolve_store
from schema.store.read import series as read_series
from schema.store.sql import placeholder
from tests.fixtures.legacy import as_rows
from tests.fixtures.stores import make_run, new_store
from tests.schema.test_rollups import all_problems

ROOT = Path(__file__).resolve().parents[2]
NAN, INF = math.nan, math.inf


def every_point(engine: Engine, rows_only: bool = False) -> list[tuple]:
    """(id, run, key, step, wall, value bits) of every stored point, superseded ones included,
    by id: rows and chunks alike (`rows_only`: a 0005 store's rows). NaN reads as None."""
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        if rows_only:
            cur.execute("SELECT id, run_id, key_id, step, wall, value FROM points ORDER BY id")
            rows = cur.fetchall()
        else:
            rows = points_by_id.points_after(cur, placeholder(conn.dialect), None, 0)
    return [(*r[:5], None if r[5] is None else struct.pack("<d", r[5])) for r in rows]


def rows_left(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM points").scalar())


def chunk_problems(engine: Engine) -> list[str]:
    """How the converted chunks break the conversion's rules (empty: none)."""
    out = []
    with engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT c.id, c.run_id, k.key_ids, c.id_lo, c.id_hi, c.n, c.step_lo, c.step_hi,"
            " c.sealed, c.data FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
        ).all()
    for cid, _run, key_ids, id_lo, id_hi, n, step_lo, step_hi, sealed, blob in found:
        c = chunk_read.decode(blob)
        ids, steps = c.ids.tolist(), c.steps.tolist()
        # One series a chunk as converted; keys whose rows line up share one once `reslog
        # upgrade` has compacted them (schema/store/chunk_compact.py).
        k = len(chunk_read.key_list(key_ids))
        if sealed != 1 or not 1 <= n <= SEAL_ROWS or len(ids) != n:
            out.append(f"chunk {cid}: sealed {sealed}, keys {key_ids}, n {n}")
        if ids != sorted(set(ids)) or (ids[0], ids[-1] + k - 1) != (id_lo, id_hi):
            out.append(f"chunk {cid}: ids not sorted or bounds {id_lo}-{id_hi} wrong")
        if (min(steps), max(steps)) != (step_lo, step_hi):
            out.append(f"chunk {cid}: steps {step_lo}-{step_hi} wrong")
    return out


def old_store(path: Path) -> tuple[list[tuple], dict]:
    """A 0005 store (a row a point) of three runs: a restart, NaN, ±inf, -0.0, keys logged
    together and alone, a series longer than one chunk; returns its points and its series as
    schema.store.read gives them."""
    run = reslog.init(project="p", name="a", store=path, system=False, flush_interval=0.05)
    for step in range(9_000):
        m = {"loss": 1.0 / (step + 1), "lr": 3e-4 * (step % 50)}
        m["gn"] = {7: NAN, 8: INF, 9: -INF, 10: -0.0}.get(step, 0.5 * step)
        if step % 4 == 0:
            m["gpu/util"] = float(step % 100)
        run.log(m, step=step)
    run.finish()
    again = reslog.init(project="p", store=path, system=False, resume=run.uid)
    for step in range(6_000, 6_500):  # from an older checkpoint: a take
        again.log({"loss": 2.0, "lr": NAN}, step=step)
    again.finish()
    engine = make_engine(resolve_store(path))
    make_run(engine, name="b", points={"x": [(s, s * 0.25) for s in range(300)]})
    make_run(
        engine, name="c", points={"y": [(s, -s) for s in range(0, 50_000, 7)], "z": [(3, INF)]}
    )
    try:
        pairs = {(r[1], r[2]) for r in every_point(engine)}
        series = {(run_id, key): read_series(engine, run_id, key) for run_id, key in pairs}
        as_rows(engine)
    finally:
        engine.dispose()
    engine = make_engine(resolve_store(path))
    try:
        return every_point(engine, rows_only=True), series
    finally:
        engine.dispose()


def same_series(a: dict, b: dict) -> bool:
    """Equal to the bit, but for -0.0, which the rows of a 0005 store hold as 0.0."""

    def bits(x):
        return {
            k: (s, w, [None if v != v else struct.pack("<d", v + 0.0) for v in vs])
            for k, (s, w, vs) in x.items()
        }

    return bits(a) == bits(b)


@pytest.mark.slow
@pytest.mark.parametrize("with_numpy", [True, False])
def test_upgrade_converts_rows_into_sealed_chunks_keeping_every_point(
    store_path, monkeypatch, with_numpy
):
    if not with_numpy:  # reslog on a host without numpy: lists and the stdlib encoder
        monkeypatch.setattr(chunk_convert, "np", None)
        monkeypatch.setattr(chunk_convert, "_codec", chunk_codec)
    points, series = old_store(store_path)
    assert len(points) > SEAL_ROWS * 3
    with pytest.raises(Exception, match="upgrade it with: reslog upgrade"):
        open_store(store_path)
    size = store_path.stat().st_size
    seen = []
    line = upgrade_store(str(store_path), converting=lambda d, t: seen.append((d, t)))
    assert "schema 0005 → 0006" in line, line
    assert f"{len(points):,} points of 3 runs converted" in line, line
    assert seen[0] == (0, len(points)) and seen[-1] == (len(points), len(points))
    assert store_path.stat().st_size < size / 3  # the rows' pages given back (VACUUM)
    engine = open_store(store_path)
    try:
        assert rows_left(engine) == 0
        assert chunk_problems(engine) == []
        assert every_point(engine) == points
        now = {k: read_series(engine, *k) for k in series}
        assert same_series(now, series)
        assert all_problems(engine) == []
    finally:
        engine.dispose()
    assert check_store(str(store_path)).problems == []
    # Nothing left to do; the store is written on with new ids past the old ones.
    assert "nothing to do" in upgrade_store(str(store_path))
    with reslog.open(store_path) as st:
        uid = st.run("a").ref.uid
    run = reslog.init(project="p", store=store_path, system=False, resume=uid)
    run.log({"loss": 0.125}, step=9_000)
    run.finish()
    engine = open_store(store_path)
    try:
        after = every_point(engine)
        assert after[: len(points)] == points and after[-1][0] > points[-1][0]
        assert all_problems(engine) == []
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_conversion_stopped_halfway_reads_whole_and_the_next_upgrade_finishes(
    store_path, monkeypatch
):
    points, series = old_store(store_path)
    real = chunk_convert.convert_run
    calls = []

    def second_fails(conn, run_id, tick=None):
        calls.append(run_id)
        out = real(conn, run_id, tick)
        if len(calls) == 2:
            raise OSError("disk full (the test's)")
        return out

    monkeypatch.setattr(chunk_convert, "convert_run", second_fails)
    with pytest.raises(OSError, match="the test's"):
        upgrade_store(str(store_path), backup=False)
    engine = open_store(store_path)  # at 0006: opens, reads rows and chunks together
    try:
        left = rows_left(engine)
        assert 0 < left < len(points)
        assert every_point(engine) == points
        assert same_series({k: read_series(engine, *k) for k in series}, series)
        assert all_problems(engine) == []
    finally:
        engine.dispose()
    report = check_store(str(store_path))
    assert report.problems == [], report.problems
    assert any(f"reslog upgrade {store_path}` finishes it" in x for x in report.info), report
    monkeypatch.setattr(chunk_convert, "convert_run", real)
    line = upgrade_store(str(store_path))
    assert f"conversion resumed; {left:,} points of 2 runs converted" in line, line
    engine = open_store(store_path)
    try:
        assert rows_left(engine) == 0 and chunk_problems(engine) == []
        assert every_point(engine) == points
        assert same_series({k: read_series(engine, *k) for k in series}, series)
    finally:
        engine.dispose()


def big_old_store(path: Path, runs: int, per_run: int) -> list[tuple]:
    """A 0005 store of `runs` runs of 4 keys, `per_run` points each, written fast (rows straight
    into a fresh 0005 store, rollups left to `reslog check --fix`)."""
    engine = new_store(path)
    ids = [make_run(engine, name=f"r{i}").id for i in range(runs)]
    engine.dispose()
    engine = make_engine(resolve_store(path))
    as_rows(engine)  # no points yet: only the downgrade
    engine.dispose()
    rng = random.Random(3)
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO keys (name) VALUES (?)", [(f"k{j}",) for j in range(4)])
        keys = [r[0] for r in conn.execute("SELECT id FROM keys ORDER BY id")]
        for run_id in ids:
            conn.executemany(
                "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
                (
                    (
                        run_id,
                        keys[i % 4],
                        i // 4,
                        1.7e9 + i * 0.01,
                        None if i % 1000 == 3 else rng.random(),
                    )
                    for i in range(per_run)
                ),
            )
    engine = make_engine(resolve_store(path))
    try:
        return every_point(engine, rows_only=True)
    finally:
        engine.dispose()


@pytest.mark.integration
@pytest.mark.slow
def test_sigkill_of_reslog_upgrade_mid_conversion_loses_nothing(store_path):
    points = big_old_store(store_path, runs=6, per_run=40_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(5)
    cmd = [sys.executable, "-m", "reslog.tools.cli", "upgrade", str(store_path), "--no-backup"]
    kills = halves = 0
    for _round in range(6):
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        # Killed once the conversion has committed a run (or the process ended by itself),
        # then a random moment later: inside another run's transaction, or between two.
        while proc.poll() is None and not converted_some(store_path):
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        engine = open_store(store_path)
        try:
            assert every_point(engine) == points
            left = rows_left(engine)
        finally:
            engine.dispose()
        halves += 0 < left < len(points)
        if left == 0:
            break
    assert kills >= 1 and halves >= 1  # killed with some runs converted and others not
    line = upgrade_store(str(store_path))
    assert "nothing to do" in line or "converted" in line or "MiB" in line, line
    engine = open_store(store_path)
    try:
        assert rows_left(engine) == 0 and chunk_problems(engine) == []
        assert every_point(engine) == points
    finally:
        engine.dispose()
    fixed = check_store(str(store_path), fix=True)  # the fast store has no rollups yet
    assert not [p for p in fixed.problems if "rollups" not in p], fixed.problems
    assert check_store(str(store_path)).problems == []


def converted_some(path: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return bool(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    except sqlite3.Error:  # the tables are not there yet
        return False


@pytest.mark.postgres
def test_postgresql_rows_become_chunks_with_their_ids_and_new_ids_follow(pg_store):
    engine = new_store(pg_store)
    try:
        loss = [(s, 1.0 / (s + 1)) for s in range(9000)]
        gn = [(1, NAN), (2, INF), (3, -INF)]
        run = make_run(engine, name="a", points={"loss": loss, "gn": gn})
        as_rows(engine)
    finally:
        engine.dispose()
    engine = make_engine(resolve_store(pg_store))
    try:
        points = every_point(engine, rows_only=True)
    finally:
        engine.dispose()
    line = upgrade_store(pg_store)
    assert "schema 0005 → 0006" in line and f"{len(points):,} points of 1 run" in line, line
    engine = open_store(pg_store)
    try:
        assert rows_left(engine) == 0 and chunk_problems(engine) == []
        assert every_point(engine) == points
        assert all_problems(engine) == []
    finally:
        engine.dispose()
    again = reslog.init(project="proj", store=pg_store, system=False, resume=run.uid)
    again.log({"loss": 0.5}, step=9000)
    again.finish()
    engine = open_store(pg_store)
    try:
        after = every_point(engine)
        assert after[: len(points)] == points and after[-1][0] > points[-1][0]
    finally:
        engine.dispose()
    report = check_store(pg_store, full=True)
    assert report.problems == [], report.problems
    assert any(line.startswith("chunks    ") for line in report.info), report.info
