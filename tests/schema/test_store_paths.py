"""A store whose path holds "#", "?", spaces and non-ASCII, through every real code path that opens
it by name: the read-only engine, the agent, the writer's file check, `reslog check` and
`reslog upgrade` with its backup. Each opens it through schema.store.sqlite_file.readonly_uri (or a
URL built by schema.store.connect); a path pasted into "file:...?mode=ro" unquoted would name the
file "ab " (SQLite ends the path at "?" and "#")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reslog.agent.store import Store
from reslog.tools.cli import main
from reslog.training.store_file import holds_run
from schema import HEAD_REVISION
from schema.store import read
from schema.store.connect import engine_label, open_store, store_label
from schema.store.sqlite_file import readonly_uri
from tests.fixtures import stores
from tests.fixtures.stored_points import point_count
from tests.fixtures.stores import make_run, new_store

newer_code = stores.newer_code  # fixture: this code one schema revision ahead

ODD = "ab #1 ?x ünï 数据"


@pytest.fixture
def odd_store(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / ODD / "reslog.db"
    engine = new_store(path)
    run = make_run(engine, name="odd", points={"train/loss": [(0, 1.0), (1, 0.5)]})
    engine.dispose()
    return path, run.uid


def test_the_uri_names_that_file_and_no_other(odd_store):
    path, _uid = odd_store
    uri = readonly_uri(path)
    assert uri.startswith("file:/") and uri.endswith("?mode=ro") and uri.count("?") == 1
    assert "#" not in uri and " " not in uri
    with sqlite3.connect(uri, uri=True) as conn:
        assert conn.execute("SELECT name FROM runs").fetchall() == [("odd",)]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM runs")
    assert readonly_uri(path, immutable=True) == uri + "&immutable=1"


def test_readers_open_it_read_only_and_name_it_by_its_path(odd_store, tmp_path):
    path, uid = odd_store
    engine = open_store(path, readonly=True)
    try:
        with engine.connect() as conn:
            assert [run.name for _id, run in read.list_runs(conn)] == ["odd"]
        assert engine_label(engine) == str(path)
    finally:
        engine.dispose()
    assert store_label(path) == str(path)
    assert holds_run(path, uid)  # the writer's check before it rescues a replaced file
    agent = Store(str(path))
    try:
        header, _sections = agent.read("poll", {})
    finally:
        agent.close()
    assert [run["name"] for run in header["runs"]] == ["odd"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [ODD]  # nothing beside it


def test_check_and_upgrade_with_its_backup(odd_store, capsys, newer_code):
    path, _uid = odd_store
    assert main(["check", str(path)]) == 0
    out, _err = capsys.readouterr()
    assert str(path) in out
    head = newer_code()
    assert main(["upgrade", str(path)]) == 0
    out, _err = capsys.readouterr()
    backup = Path(f"{path}.bak-{HEAD_REVISION}")
    assert out.strip() == f"upgraded {path}: schema {HEAD_REVISION} → {head} (backup: {backup})"
    with sqlite3.connect(backup) as conn:  # the backup is the untouched old store
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
        assert point_count(conn) == 2
    assert sorted(
        p.name for p in path.parent.iterdir() if not p.name.endswith(("-wal", "-shm"))
    ) == [
        "reslog.db",
        backup.name,
    ]
