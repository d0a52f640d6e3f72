"""A store the code before chunks wrote itself (tests/assets/store_0005.db, made by
tests/assets/make_store_0005.py at commit b57fe1f: a row a point) upgraded to chunks: every point
comes out as it went in (ids, steps, walls, values to the bit; the rows kept NaN as NULL and
-0.0 as 0.0), through schema.store.read and schema.store.chunk_read, half converted and converted,
and the rollups the old writer kept still agree with the points."""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import pytest

from reslog.tools.maintenance import check_store, upgrade_store
from schema.store import chunk_convert, points_by_id, read
from schema.store.connect import open_store
from tests.schema.test_chunk_convert import chunk_problems, rows_left
from tests.schema.test_rollups import all_problems

ASSET = Path(__file__).resolve().parents[1] / "assets" / "store_0005.db"


def dump(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return [tuple(r) for r in conn.execute(sql)]


def bits(rows: list[tuple]) -> list[tuple]:
    """Rows with their last field (a value, None = NaN) as its 8 bytes."""
    return [(*r[:-1], None if r[-1] is None else struct.pack("<d", r[-1])) for r in rows]


def wanted_series(points: list[tuple], takes: list[tuple]) -> dict:
    """{(run, key): (steps, walls, values)} as a reader must give them: superseded points (a
    take from since_id on, at step or later) left out, by step then id, NaN as None."""
    out: dict = {}
    for pid, run, key, step, wall, value in points:
        if any(r == run and k == key and since > pid and at <= step for r, k, since, at in takes):
            continue
        out.setdefault((run, key), []).append((step, pid, wall, value))
    return {
        s: ([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows])
        for s, rows in ((s, sorted(rows)) for s, rows in out.items())
    }


def read_back(engine, wanted: dict) -> tuple[list[tuple], dict]:
    """Every point through chunk_read, and every series through schema.store.read."""
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        points = [tuple(r) for r in points_by_id.points_after(cur, "?", None, 0)]
    series = {}
    for run, key in wanted:
        steps, walls, values = read.series(engine, run, key)
        series[(run, key)] = (steps, walls, [None if v != v else v for v in values])
    return points, series


def same(got: dict, want: dict) -> bool:
    def b(x):
        return {k: (s, w, bits([(v,) for v in vs])) for k, (s, w, vs) in x.items()}

    return b(got) == b(want)


def test_the_kept_0005_store_is_what_the_code_before_chunks_wrote():
    assert ASSET.stat().st_size < 300 * 1024
    assert dump(ASSET, "SELECT version_num FROM alembic_version") == [("0005",)]
    tables = {r[0] for r in dump(ASSET, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "chunks" not in tables and "points" in tables
    assert len(dump(ASSET, "SELECT * FROM runs")) == 3
    assert dump(ASSET, "SELECT count(*) FROM takes") == [(2,)]
    assert dump(ASSET, "SELECT count(*) FROM points WHERE value IS NULL")[0][0] > 0  # NaN
    assert dump(ASSET, "SELECT count(*) FROM points WHERE value IN (1e999, -1e999)") == [(2,)]


@pytest.mark.parametrize("halfway", [False, True])
def test_every_point_of_the_kept_0005_store_comes_out_of_its_chunks(tmp_path, monkeypatch, halfway):
    path = tmp_path / "reslog.db"
    shutil.copyfile(ASSET, path)
    points = dump(path, "SELECT id, run_id, key_id, step, wall, value FROM points ORDER BY id")
    takes = dump(path, "SELECT run_id, key_id, since_id, step FROM takes")
    events = dump(path, "SELECT * FROM events ORDER BY id")
    rollups = dump(path, "SELECT * FROM rollups ORDER BY run_id, key_id, level, bucket")
    wanted = wanted_series(points, takes)
    assert len(wanted) == 8 and len(points) == 3840
    if halfway:  # the first run converted, then the upgrade dies: reads whole meanwhile
        real = chunk_convert.convert_run

        def once(conn, run_id, tick=None):
            if rows_left_now(conn) < len(points):
                raise KeyboardInterrupt
            return real(conn, run_id, tick)

        monkeypatch.setattr(chunk_convert, "convert_run", once)
        with pytest.raises(KeyboardInterrupt):
            upgrade_store(str(path))
        engine = open_store(path)
        try:
            assert 0 < rows_left(engine) < len(points)
            got_points, got_series = read_back(engine, wanted)
            assert bits(got_points) == bits(points)
            assert same(got_series, wanted)
            assert all_problems(engine) == []
        finally:
            engine.dispose()
        monkeypatch.setattr(chunk_convert, "convert_run", real)
    line = upgrade_store(str(path))
    assert ("conversion resumed" if halfway else "schema 0005 → 0006") in line, line
    engine = open_store(path)
    try:
        assert rows_left(engine) == 0 and chunk_problems(engine) == []
        got_points, got_series = read_back(engine, wanted)
        assert bits(got_points) == bits(points)
        assert same(got_series, wanted)
        assert all_problems(engine) == []
    finally:
        engine.dispose()
    assert dump(path, "SELECT * FROM events ORDER BY id") == events
    assert dump(path, "SELECT * FROM rollups ORDER BY run_id, key_id, level, bucket") == rollups
    assert dump(path, "SELECT run_id, key_id, since_id, step FROM takes") == takes
    assert check_store(str(path)).problems == []


def rows_left_now(conn) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM points").scalar())
