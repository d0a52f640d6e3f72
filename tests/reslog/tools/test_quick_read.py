"""`reslog ls` without SQLAlchemy (issue 36: `reslog ls` within a second while 16 writers are
busy): a local SQLite store is read with the standard library from one snapshot that holds no
lock a writer waits for, and says exactly what the SQLAlchemy path says.

Counts and modules, not times: how fast is scripts/bench/bench_sqlite_writers.py's business.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reslog.tools import cli, cli_store
from reslog.tools.quick_read import open_snapshot
from schema.store import read
from schema.store.connect import open_store, store_label
from schema.store.envelope import agg_of
from schema.store.reader import StoreReader
from tests.fixtures.stores import make_run, make_sample_runs, new_store

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("sqlalchemy", "alembic", "numpy", "pandas", "pyarrow", "torch")


@pytest.fixture
def sample(store_path):
    engine = new_store(store_path)
    make_sample_runs(engine)
    engine.dispose()
    return store_path


def loaded_by(code: str, *argv: str) -> tuple[list[str], str]:
    """(the HEAVY packages a fresh interpreter has loaded after `code`, what it printed)."""
    script = code + f"\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY})))"
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    *printed, modules = done.stdout.strip().splitlines()
    return eval(modules), "\n".join(printed)  # a list literal printed by the child


@pytest.mark.integration
def test_reslog_ls_imports_neither_sqlalchemy_nor_numpy(sample):
    modules, printed = loaded_by(
        "from reslog.tools.cli import main\nassert main(['ls', sys.argv[1]]) == 0", str(sample)
    )
    assert "wsd-0.5" in printed and "aaaa0001" in printed
    assert modules == []


@pytest.mark.integration
def test_importing_reslog_loads_sqlalchemy_only_when_a_run_or_reader_needs_it():
    modules, _ = loaded_by("import reslog")
    assert modules == []
    modules, _ = loaded_by("import reslog\nreslog.init")
    assert modules == ["sqlalchemy"]


def test_a_postgresql_url_or_an_odd_store_goes_the_sqlalchemy_way(tmp_path, sample):
    assert open_snapshot("postgresql+psycopg://me@127.0.0.1:1/runs") is None
    assert open_snapshot(tmp_path / "missing.db") is None
    assert open_snapshot(tmp_path) is None
    other = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE t (x)")
    assert open_snapshot(other) is None
    snap = open_snapshot(sample)
    assert snap is not None
    snap.conn.close()


def test_the_snapshot_reads_what_the_sqlalchemy_reader_reads(sample):
    engine = open_store(sample, readonly=True)
    try:
        reader = StoreReader(engine, store=store_label(sample))
        with engine.connect() as conn:
            expected = read.list_runs(conn, store=store_label(sample))
        series = reader.series_rows([i for i, _ in expected])
    finally:
        engine.dispose()
    snap = open_snapshot(sample)
    assert snap is not None
    with snap:
        assert snap.label == store_label(sample)
        runs = snap.runs()
        aggs = snap.series_aggs([i for i, _ in runs])
        assert snap.runs(project="z2all") == [r for r in expected if r[1].project == "z2all"]
    assert runs == expected and len(runs) > 2
    assert aggs == {r: {k: agg_of(row, 2) for k, row in per.items()} for r, per in series.items()}
    assert aggs  # the sample has points


def test_ls_prints_the_same_either_way(capsys, sample, monkeypatch):
    engine = new_store(sample)  # more runs: a group, a key with a control character
    make_run(engine, name="g", group="grp", points={"a\x1bb": [(3, 1.0)]})
    engine.dispose()
    for argv in (["ls"], ["ls", "--full"], ["ls", "--group", "grp"], ["ls", "--project", "no"]):
        # One clock for both (time.time itself: the statuses read it too), so that the ages
        # and statuses printed are the same.
        monkeypatch.setattr(time, "time", lambda: 1.9e9)
        assert cli.main([*argv, str(sample)]) == 0
        quick = capsys.readouterr()
        monkeypatch.setattr(cli_store, "open_snapshot", lambda store: None)
        assert cli.main([*argv, str(sample)]) == 0
        full = capsys.readouterr()
        monkeypatch.undo()
        assert quick == full and quick.out


def test_the_snapshot_holds_no_lock_a_writer_waits_for_and_sees_one_moment(sample):
    snap = open_snapshot(sample)
    assert snap is not None
    with snap:
        before = snap.runs()
        with contextlib.closing(sqlite3.connect(sample, timeout=0, isolation_level=None)) as w:
            w.execute("BEGIN IMMEDIATE")  # timeout=0: "database is locked" if a reader blocked
            w.execute("DELETE FROM events")
            w.execute("UPDATE runs SET name = 'renamed'")
            w.execute("COMMIT")
        assert snap.runs() == before  # the snapshot's moment, not the commit after it
    after = open_snapshot(sample)
    assert after is not None
    with after:
        assert {r.name for _, r in after.runs()} == {"renamed"}


def test_ls_falls_back_when_the_snapshot_stumbles(capsys, sample, monkeypatch):
    """A store the fast path cannot read (here: a read that fails halfway) is read again the
    SQLAlchemy way, which says what is wrong or, as here, lists it."""
    from reslog.tools import quick_read

    def broken(self, run_ids):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(quick_read.Snapshot, "series_aggs", broken)
    assert cli.main(["ls", str(sample)]) == 0
    out = capsys.readouterr().out
    assert "wsd-0.5" in out and "400" in out
