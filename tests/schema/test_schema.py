"""The store's schema: golden dumps, migrations vs metadata, version checks, opening rules, NaN.

Regenerate the golden dumps after an intended schema change (with a new Alembic revision):
    RESLOG_UPDATE_GOLDEN=1 .venv/bin/pytest tests/schema/test_schema.py -q
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import struct
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, insert, inspect, select, text

from schema.store import chunk_read, migrate, read
from schema.store import connect as store
from schema.store.columns import EVENT_COLUMNS, RUN_COLUMNS
from schema.store.connect import HEAD_REVISION, create_all_for_test, make_engine, open_store
from schema.store.errors import NotAStore, SchemaTooNew, SchemaTooOld, StoreNotFound
from schema.store.rollup_writer import RollupWriter
from schema.store.tables import chunks, events, keys, metadata, points, runs
from tests.fixtures import stores
from tests.fixtures.stores import make_run, new_store

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
newer_code = stores.newer_code  # fixture: this code one schema revision ahead


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RESLOG_UPDATE_GOLDEN") == "1":
        path.write_text(actual)
    expected = path.read_text() if path.exists() else "<missing>\n"
    assert actual == expected, (
        f"The store's schema no longer matches {path}.\n"
        "A schema change needs a new Alembic revision in schema/store/migrations/versions/ (and "
        "HEAD_REVISION in schema/store/connect.py and reslog/agent.py). If the change is intended, "
        "regenerate the dump with:\n"
        "  RESLOG_UPDATE_GOLDEN=1 .venv/bin/pytest tests/schema/test_schema.py -q\n"
        f"and commit the diff.\n--- actual ---\n{actual}"
    )


def sqlite_dump(engine: Engine) -> str:
    """CREATE statements from sqlite_master, by name, tabs and trailing blanks normalised."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name, type"
        ).all()
    parts = []
    for _type, _name, sql in rows:
        lines = [line.replace("\t", "    ").rstrip() for line in sql.splitlines()]
        parts.append("\n".join(lines) + ";")
    return "\n\n".join(parts) + "\n"


def ddl_lines(dump: str) -> dict[str, set[str]]:
    """Each statement as a set of lines (constraint order may differ between builders). SQLite's
    ALTER TABLE ADD COLUMN appends the column to the last column's line: split such lines on
    the commas outside parentheses."""
    out = {}
    for stmt in dump.split(";\n"):
        lines = [line.strip() for line in stmt.strip().splitlines()]
        if lines and lines[0]:
            out[lines[0]] = {part for line in lines[1:] for part in _top_level_parts(line)}
    return out


def _top_level_parts(line: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(line[start:i].strip())
            start = i + 1
    parts.append(line[start:].strip())
    return [p for p in parts if p]


def metadata_diff(engine: Engine) -> list:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(ctx, metadata)


# ---- SQLite schema ------------------------------------------------------------------------------


def test_fresh_sqlite_store_matches_the_golden_dump(store_path):
    engine = open_store(store_path, create=True)
    check_golden("schema_sqlite.sql", sqlite_dump(engine))


def test_migrations_build_what_the_metadata_declares(store_path, tmp_path):
    migrated = open_store(store_path, create=True)
    assert metadata_diff(migrated) == []
    # compare_metadata does not see CHECK constraints on SQLite: compare the DDL too.
    direct = make_engine("sqlite:///" + str(tmp_path / "direct.db"))
    create_all_for_test(direct)
    from_alembic = ddl_lines(sqlite_dump(migrated))
    from_alembic.pop("CREATE TABLE alembic_version (")
    assert from_alembic == ddl_lines(sqlite_dump(direct))


def test_the_plain_column_lists_are_the_tables_columns():
    # The agent reads runs and events by these names (it cannot import SQLAlchemy).
    assert tuple(runs.c.keys()) == RUN_COLUMNS
    assert tuple(events.c.keys()) == EVENT_COLUMNS


def test_head_revision_constant_matches_alembic():
    assert migrate.head_revision() == HEAD_REVISION
    assert HEAD_REVISION in migrate.known_revisions()


def test_sqlite_connect_hook_settings(store_path):
    engine = open_store(store_path, create=True)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == store.BUSY_TIMEOUT_MS


# ---- versions -----------------------------------------------------------------------------------


def test_a_newer_store_is_refused(store_path):
    new_store(store_path).dispose()
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff'")
    for readonly in (False, True):
        with pytest.raises(SchemaTooNew, match=r"newer reslog \(schema ffff"):
            open_store(store_path, readonly=readonly)


def test_an_older_store_is_refused_with_the_upgrade_command(store_path, newer_code):
    # "Older" is made by running this code one revision ahead (a copy of the migrations plus
    # a test-only 0003; see tests/fixtures/stores.py).
    new_store(store_path).dispose()
    head = newer_code()
    assert migrate.head_revision() == head
    with pytest.raises(SchemaTooOld, match=f"upgrade it with: reslog upgrade {store_path}$"):
        open_store(store_path, readonly=True)
    engine = make_engine(store.resolve_store(store_path))
    migrate.upgrade(engine)
    assert store.stored_revision(engine) == head
    engine.dispose()
    open_store(store_path, readonly=True).dispose()


# ---- opening rules ------------------------------------------------------------------------------


def test_read_open_never_creates_anything(tmp_path):
    target = tmp_path / "sub" / "reslog.db"
    for readonly in (False, True):
        with pytest.raises(StoreNotFound, match=f"no store at {target}"):
            open_store(target, readonly=readonly)
    assert list(tmp_path.iterdir()) == []


def test_readonly_open_does_not_modify_the_store(store_path):
    engine = new_store(store_path)
    make_run(engine, name="r", points={"x": [(0, 1.0)]})
    engine.dispose()  # last connection closed: SQLite checkpoints and removes the WAL
    before = store_path.read_bytes()
    reader = open_store(store_path, readonly=True)
    with reader.connect() as conn:
        assert [r.name for _, r in read.list_runs(conn)] == ["r"]
        with pytest.raises(Exception, match="readonly"):
            conn.execute(insert(keys).values(name="y"))
    reader.dispose()
    assert store_path.read_bytes() == before


def test_things_that_are_not_stores(tmp_path):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello " * 200)
    with pytest.raises(NotAStore, match=f"{text_file} is not a SQLite database"):
        open_store(text_file)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(NotAStore, match=r"is not a reslog store \(tables: t\)"):
        open_store(other)
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(NotAStore, match="is empty"):
        open_store(empty, readonly=True)
    with pytest.raises(NotAStore, match="is a directory"):
        open_store(tmp_path)


def test_network_file_system_warning(store_path, monkeypatch):
    # /proc/mounts here has no NFS: the lookup is replaced, the rest of open_store is real.
    monkeypatch.setattr(store, "filesystem_type", lambda path: "nfs4")
    with pytest.warns(RuntimeWarning, match=r"network file system \(nfs4\)"):
        open_store(store_path, create=True).dispose()


def test_filesystem_type_reads_the_real_mount_table(tmp_path):
    fstype = store.filesystem_type(tmp_path)
    assert fstype is None or re.fullmatch(r"[\w.]+", fstype)
    if Path("/proc/mounts").exists():
        assert fstype is not None


# ---- NaN and infinities -------------------------------------------------------------------------

# Every float comes back to the bit from the chunks, -0.0 and a NaN's payload included (the rows
# of a store from before 0006 kept NaN as NULL and read -0.0 back as 0.0).
NAN_PAYLOAD = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0123))[0]
SPECIAL = [
    1.5,
    math.nan,
    math.inf,
    -math.inf,
    5e-324,
    1.7976931348623157e308,
    0.1 + 0.2,
    -0.0,
    NAN_PAYLOAD,
]


def bits(values) -> list[bytes]:
    return [struct.pack("<d", v) for v in values]


def round_trip(engine: Engine) -> list[float]:
    run = make_run(engine, name="nan")
    key_id = stores.key_id(engine, "x")
    with engine.begin() as conn:  # the writer's own path, the floats as they are
        writer = RollupWriter(engine.dialect, run.id)
        writer.insert(conn, [(run.id, key_id, i, 1.0 + i, v) for i, v in enumerate(SPECIAL)])
    with engine.connect() as conn:
        blobs = conn.execute(select(chunks.c.data).where(chunks.c.run_id == run.id)).scalars()
        stored = [v for blob in blobs for v in chunk_read.decode(blob).values[0].tolist()]
        assert conn.execute(select(points)).first() is None  # no rows: chunks only
        batch = read.fetch_points(conn, [run.id])
    assert bits(stored) == bits(SPECIAL)  # in the store, to the bit
    assert batch.values[0] == 1.5 and math.isnan(batch.values[1])
    steps, _walls, values = read.series(engine, run.id, key_id)
    assert steps == list(range(len(SPECIAL)))
    return values


def assert_same_floats(got: list[float], want: list[float]) -> None:
    """Equal to the bit (-0.0 is not 0.0), NaN to any NaN (readers give NaN as NaN)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or bits([g]) == bits([w]), (got, want)


def test_nan_and_infinities_round_trip_on_sqlite(store_path):
    assert_same_floats(round_trip(new_store(store_path)), SPECIAL)


def test_sqlite_itself_turns_a_nan_into_null(store_path):
    engine = new_store(store_path)
    run = make_run(engine)
    with engine.begin() as conn:
        conn.execute(insert(keys).values(id=1, name="x"))
        conn.execute(insert(points).values(run_id=run.id, key_id=1, step=0, wall=0, value=math.nan))
        assert conn.execute(select(points.c.value)).scalar() is None
    assert math.isnan(read.series(engine, run.id, 1)[2][0])


# ---- PostgreSQL ---------------------------------------------------------------------------------


def postgres_dump(engine: Engine) -> str:
    """Tables, columns, constraints and indexes from the catalog: stable across pg_dump versions."""
    out = []
    with engine.connect() as conn:
        cols = conn.execute(
            text(
                "SELECT table_name, column_name, data_type, character_maximum_length, "
                "is_nullable, column_default FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
            )
        ).all()
        cons = conn.execute(
            text(
                "SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid) "
                "FROM pg_constraint con JOIN pg_class rel ON rel.oid = con.conrelid "
                "JOIN pg_namespace ns ON ns.oid = rel.relnamespace "
                "WHERE ns.nspname = 'public' ORDER BY rel.relname, con.conname"
            )
        ).all()
        idx = conn.execute(
            text(
                "SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "ORDER BY tablename, indexname"
            )
        ).all()
    for table, column, dtype, length, nullable, default in cols:
        size = f"({length})" if length else ""
        null = "" if nullable == "YES" else " NOT NULL"
        dflt = "" if default is None else f" DEFAULT {default}"
        out.append(f"COLUMN {table}.{column} {dtype}{size}{null}{dflt}")
    out += [f"CONSTRAINT {table}.{name} {definition}" for table, name, definition in cons]
    out += [f"{definition}" for _table, definition in idx]
    return "\n".join(out) + "\n"


@pytest.mark.postgres
def test_postgres_store_has_the_same_schema(pg_store):
    engine = open_store(pg_store, create=True)
    try:
        assert store.stored_revision(engine) == HEAD_REVISION
        assert metadata_diff(engine) == []
        checks = {
            (t, c["name"])
            for t in ("runs", "events")
            for c in inspect(engine).get_check_constraints(t)
        }
        assert checks == {("runs", "ck_runs_status"), ("events", "ck_events_level")}
        check_golden("schema_postgres.sql", postgres_dump(engine))
    finally:
        engine.dispose()
    open_store(pg_store, readonly=True).dispose()  # opening again: same revision, accepted


@pytest.mark.postgres
def test_nan_and_infinities_round_trip_on_postgres(pg_store):
    engine = new_store(pg_store)
    try:
        assert_same_floats(round_trip(engine), SPECIAL)
        # A NaN written as a float (not NULL) also comes back as NaN.
        run = make_run(engine, name="raw")
        with engine.begin() as conn:
            key_id = conn.execute(insert(keys).values(name="raw")).inserted_primary_key[0]
            conn.execute(
                insert(points).values(run_id=run.id, key_id=key_id, step=0, wall=0, value=math.nan)
            )
        assert math.isnan(read.series(engine, run.id, key_id)[2][0])
    finally:
        engine.dispose()


def test_the_runs_table_refuses_an_unknown_status(store_path):
    engine = new_store(store_path)
    with pytest.raises(Exception, match="ck_runs_status"), engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                uid="x", project="p", name="n", status="zombie", created_at=0, heartbeat_at=0
            )
        )


def test_processes_creating_one_postgres_store_at_once_all_succeed(pg_store):
    # Several ranks start together on an empty database: the advisory lock in
    # schema.store.migrate.upgrade makes all but one find the schema already at head.
    from concurrent.futures import ThreadPoolExecutor

    def create(_):
        engine = open_store(pg_store, create=True)
        try:
            return store.stored_revision(engine)
        finally:
            engine.dispose()

    with ThreadPoolExecutor(6) as pool:
        revisions = list(pool.map(create, range(6)))
    assert revisions == [HEAD_REVISION] * 6


def test_a_store_path_with_percent_signs_is_created_and_opened(tmp_path):
    # Alembic's config is a ConfigParser: an unescaped "%" in the URL broke store creation.
    path = tmp_path / "100% done=yes" / "reslog.db"
    engine = open_store(path, create=True)
    engine.dispose()
    engine = open_store(path, readonly=True)
    try:
        assert store.stored_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", ["q?mark", "hash#tag", "pct%41", "sp ace", "uni-é✓", "a&b=1"])
def test_paths_with_url_characters_open_exactly_that_file(tmp_path, name):
    # "?", "#" and "%" mean something in URLs: a path holding them must still name its file,
    # never a shorter one ("q" for "q?mark") nor a decoded one ("pctA" for "pct%41").
    path = tmp_path / name / "reslog.db"
    open_store(path, create=True).dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert path.exists()
    engine = open_store(path, readonly=True)
    try:
        assert store.stored_revision(engine) == HEAD_REVISION
    finally:
        engine.dispose()
    with pytest.raises(StoreNotFound):
        open_store(tmp_path / name / "other.db", readonly=True)
    assert not (tmp_path / name / "other.db").exists()
