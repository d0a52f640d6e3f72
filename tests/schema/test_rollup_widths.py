"""Rollup bucket widths are part of the schema: a store whose rollups were cut at other widths
(revisions 0002-0004: 64-step first-level buckets) is refused until `reslog upgrade` rebuilds
them from its points, on SQLite and on PostgreSQL, and nothing else in the store changes."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import select

import reslog
from reslog.tools.maintenance import check_store, upgrade_store
from schema.store import buckets, migrate, points_by_id
from schema.store.connect import make_engine, open_store, resolve_store
from schema.store.errors import StoreError
from schema.store.tables import rollups, series, takes
from tests.fixtures.legacy import as_rows
from tests.schema.test_rollups import all_problems

ASSET = Path(__file__).resolve().parents[1] / "assets" / "store_0004.db"


def dump(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def every_point(path: Path) -> list[tuple]:
    """(id, run, key, step, wall, value) of every point, rows and chunks alike, by id."""
    with sqlite3.connect(path) as conn:
        return [tuple(r) for r in points_by_id.points_after(conn.cursor(), "?", None, 0)]


def test_a_store_cut_at_64_step_buckets_is_refused_then_rebuilt_at_todays_widths(tmp_path):
    path = tmp_path / "reslog.db"
    shutil.copyfile(ASSET, path)
    old_points = dump(path, "SELECT * FROM points ORDER BY id")
    old_takes = dump(path, "SELECT * FROM takes ORDER BY run_id, key_id, since_id")
    # The asset's loss series kept two levels of 64-step buckets (its bucket 4 held steps
    # 256-319); read at today's widths those rows would mean other steps.
    assert dump(path, "SELECT DISTINCT level FROM rollups ORDER BY level") == [(1,), (2,)]
    with pytest.raises(StoreError, match="upgrade it with: reslog upgrade"):
        open_store(path)
    with pytest.raises(StoreError, match="upgrade it with: reslog upgrade"):
        reslog.open(path).runs()

    line = upgrade_store(str(path))
    assert f"schema 0004 → {migrate.head_revision()}" in line
    assert (tmp_path / "reslog.db.bak-0004").exists()
    # The points themselves are unchanged, rows or chunks (ids, steps, walls, values).
    assert every_point(path) == old_points
    # The restart is found again from the points: the same take.
    assert dump(path, "SELECT * FROM takes ORDER BY run_id, key_id, since_id") == old_takes
    engine = open_store(path)
    try:
        assert all_problems(engine) == []  # every level of every series equals the brute force
        with engine.connect() as conn:
            stored = conn.execute(
                select(rollups.c.level, rollups.c.bucket, rollups.c.step_lo, rollups.c.step_hi)
            ).all()
            levels = dict(conn.execute(select(series.c.key_id, series.c.levels)).all())
        for level, bucket, lo, hi in stored:
            assert buckets.bucket_of(lo, level) == bucket == buckets.bucket_of(hi, level)
        # 17,568 steps: one level at 128-step buckets (level 2 needs 64 of 512 steps).
        assert set(levels.values()) == {1}
    finally:
        engine.dispose()
    assert check_store(str(path)).problems == []
    with reslog.open(path) as st:
        loss = st.history("before-0005", "train/loss", samples=50)
    assert 50.0 in loss["max"].tolist()  # the one-point spike survives the rebuild


def test_an_upgraded_store_is_written_on_at_todays_widths(tmp_path):
    path = tmp_path / "reslog.db"
    shutil.copyfile(ASSET, path)
    upgrade_store(str(path), backup=False)
    with reslog.open(path) as st:
        uid = st.run("before-0005").ref.uid
    run = reslog.init(project="old", store=path, system=False, resume=uid)
    for step in range(14_000, 20_000, 8):
        run.log({"train/loss": 0.5, "sys/gpu0/throttle": 4.0}, step=step)
    run.finish()
    engine = open_store(path)
    try:
        assert all_problems(engine) == []
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgresql_downgraded_to_0004_and_upgraded_gets_the_same_rollups_back(pg_store):
    run = reslog.init(project="p", store=pg_store, system=False)
    for step in range(40_000):
        run.log({"loss": float("nan") if step == 7 else 1.0 / (step + 1), "lr": 1e-3}, step=step)
    run.finish()
    again = reslog.init(project="p", store=pg_store, system=False, resume=run.uid)
    for step in range(30_000, 30_500):
        again.log({"loss": 2.0}, step=step)
    again.finish()
    engine = make_engine(resolve_store(pg_store))
    try:

        def state() -> tuple:
            """Points, takes, level-1 buckets and series rows. Float sums are rounded (the
            writer summed them flush by flush, the rebuild in other batches: a series of 40,000
            times 0.001 came to 40.00000000000002 and ...03, as the flushes fell), and a
            series' level count left out: the writer keeps a level it grew before a restart
            shortened the series, the rebuild only those the series needs now."""
            columns = [c for c in series.c if c.name != "levels"]
            vsum = [c.name for c in columns].index("vsum")
            with engine.connect() as conn:
                level1 = conn.execute(select(rollups).where(rollups.c.level == 1)).all()
                series_rows = conn.execute(select(*columns)).all()
                cur = conn.connection.dbapi_connection.cursor()
                rows = [
                    points_by_id.points_after(cur, "%s", None, 0),
                    conn.execute(select(takes)).all(),
                    [(*r[:12], round(r[12], 6), *r[13:]) for r in level1],
                    [(*r[:vsum], round(r[vsum], 6), *r[vsum + 1 :]) for r in series_rows],
                ]
            return [sorted(map(tuple, r), key=repr) for r in rows]

        before = state()
        assert all_problems(engine) == []
        as_rows(engine)  # the points as rows, as reslog wrote them before 0006
        cfg = migrate.alembic_config(engine)
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0004")
        with engine.connect() as conn:
            assert conn.execute(select(rollups)).first() is None
            assert conn.execute(select(takes)).first() is not None  # width-free: kept
        migrate.upgrade(engine)
        assert all_problems(engine) == []
        for name, was, now in zip(
            ("points", "takes", "level 1", "series"), before, state(), strict=True
        ):
            assert len(was) == len(now), name
            assert [(a, b) for a, b in zip(was, now, strict=True) if a != b] == [], name
    finally:
        engine.dispose()
