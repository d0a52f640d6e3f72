"""The CLI on stores that are damaged, foreign, or on a disk that fills up: one line naming the
file and what to do, and nothing left behind but the store as it was (issue 36, finding 5).
Real SQLite files, a real full tmpfs, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import reslog
from reslog.tools.cli import main
from schema import HEAD_REVISION
from tests.fixtures.disks import small_disk  # noqa: F401 - a fixture
from tests.fixtures.sshd import bulk_store
from tests.fixtures.stored_points import point_count
from tests.fixtures.stores import make_run, new_store, newer_code  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[3]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def wait_until(done, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(done())


def revision(store: Path) -> str:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


# ---- another program's SQLite database -------------------------------------------------------


def foreign_db(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["upgrade", "{db}"],
        ["check", "--fix", "{db}"],
        ["import", "csv", "{csv}", "--store", "{db}"],
    ],
)
def test_another_programs_database_is_left_as_it_was(tmp_path, capsys, argv):
    """Opening it to write switched it to WAL (a setting kept in the file) and made a -wal and
    a -shm beside it, before the store check refused it."""
    db = foreign_db(tmp_path / "other.db")
    table = tmp_path / "t.csv"
    table.write_text("step,loss\n1,0.5\n")
    before = db.read_bytes()
    code, _out, err = run_cli(capsys, *(a.format(db=db, csv=table) for a in argv))
    assert code == 2 and err == f"reslog: {db} is not a reslog store (tables: notes)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db", "t.csv"]
    assert db.read_bytes() == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_a_training_run_pointed_at_another_programs_database_changes_nothing(tmp_path):
    db = foreign_db(tmp_path / "other.db")
    before = db.read_bytes()
    with pytest.raises(Exception, match="not a reslog store"):
        reslog.init(store=db, system=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]
    assert db.read_bytes() == before


# ---- corrupt pages ---------------------------------------------------------------------------


def damaged_store(path: Path, *, blobs: bool = False) -> Path:
    """A store with garbage over the b-tree pages of its points and aggregates (SQLite finds
    them malformed), or (`blobs`) over every third page of the chunks' blobs (overflow pages:
    SQLite reads them back as they are, the chunks' CRCs catch it)."""
    engine = new_store(path)
    make_run(engine, name="r", points={"loss": [(s, 1.0 / (s + 1)) for s in range(20_000)]})
    engine.dispose()
    with sqlite3.connect(path) as conn:
        # Chunks are compact and sealing frees pages: the file's middle third, once all points
        # pages, may now be free pages. Take the pages by what they hold instead.
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        where = "pagetype = 'overflow'" if blobs else "pagetype != 'overflow'"
        pages = sorted(
            n
            for (n,) in conn.execute(
                f"SELECT pageno FROM dbstat WHERE name IN ('chunks', 'rollups', 'series')"
                f" AND {where}"
            )
        )
    assert len(pages) >= 3
    with open(path, "r+b") as f:
        for n in pages[::3] if blobs else pages:
            # Past a blob page's next-page pointer; past a b-tree page's header to its end
            # (its cells sit at its end, behind free space).
            f.seek((n - 1) * page + 100)
            f.write((bytes(range(256)) * (page // 256))[: 2048 if blobs else page - 100])
    return path


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["csv", "parquet", "csv-wide"])
def test_exporting_a_store_with_corrupt_pages_is_one_line_saying_what_to_do(tmp_path, fmt):
    """sqlite3's DatabaseError came from the read-only connection as a traceback."""
    store = damaged_store(tmp_path / "s.db")
    out = tmp_path / "out.x"
    code, err = _export(store, fmt, out)
    assert code == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: {store}: database disk image is malformed")
    assert f"`reslog check {store}` says where" in err
    assert not out.exists()


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_exporting_a_store_with_a_corrupt_chunk_is_one_line_saying_what_to_do(tmp_path, fmt):
    """A chunk's bytes damaged inside its blob: SQLite reads them, the chunk's CRC-32 fails."""
    store = damaged_store(tmp_path / "s.db", blobs=True)
    out = tmp_path / "out.x"
    code, err = _export(store, fmt, out)
    assert code == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: {store}: corrupt chunk: its CRC-32 does not match"), err
    assert f"`reslog check {store}` says where" in err
    assert not out.exists()


def _export(store: Path, fmt: str, out: Path) -> tuple[int, str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reslog.tools.cli",
            "export",
            str(store),
            "--format",
            fmt,
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return done.returncode, done.stderr


def test_check_of_a_store_with_corrupt_pages_reports_them_as_problems(tmp_path, capsys):
    store = damaged_store(tmp_path / "s.db")
    code, out, err = run_cli(capsys, "check", store)
    assert code == 1 and err == ""
    assert "PROBLEM  integrity: " in out
    assert "PROBLEM  rollups could not be compared with the points: database disk image" in out


# ---- reslog upgrade: a full disk, a kill ------------------------------------------------------


def test_an_upgrade_whose_backup_fills_the_disk_is_one_line_and_leaves_the_store(
    small_disk,  # noqa: F811 - the fixture
    capsys,
    newer_code,  # noqa: F811 - the fixture
):
    """sqlite3's "database or disk is full" from the backup was a traceback."""
    store = small_disk.root / "reslog.db"
    bulk_store(store, runs=1, keys=2, points=100_000)
    old = newer_code()  # this code is now one revision ahead of the store
    assert revision(store) == HEAD_REVISION != old
    before = sorted(p.name for p in small_disk.root.iterdir())
    small_disk.fill()
    small_disk.release(2)  # room for part of the copy only
    code, out, err = run_cli(capsys, "upgrade", store)
    assert code == 2 and out == "", (out, err)
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: cannot back up {store} before upgrading it: the disk is full")
    assert "the store is unchanged" in err and "--no-backup" in err
    assert revision(store) == HEAD_REVISION
    after = sorted(p.name for p in small_disk.root.iterdir() if not p.name.startswith("filler"))
    assert after == before
    small_disk.release(len(small_disk.fillers))
    code, out, _ = run_cli(capsys, "upgrade", store)
    assert code == 0 and out.startswith(f"upgraded {store}")


CHILD = """
import shutil, sys
from pathlib import Path
from schema.store import migrate, connect as store
from tests.fixtures.stores import _TEST_MIGRATION, _next_revision
head = store.HEAD_REVISION
rev = _next_revision(head)
dst = Path(sys.argv[2])
shutil.copytree(migrate.MIGRATIONS, dst, ignore=shutil.ignore_patterns("__pycache__"))
(dst / "versions" / f"{rev}_test_only.py").write_text(_TEST_MIGRATION.format(rev=rev, head=head))
migrate.MIGRATIONS = dst
store.HEAD_REVISION = rev
migrate.known_revisions.cache_clear()
from reslog.tools.cli import main
sys.exit(main(["upgrade", sys.argv[1]]))
"""


@pytest.mark.integration
def test_an_upgrade_killed_during_its_backup_leaves_only_the_store(tmp_path):
    """A SIGKILL during the backup left its part file (55 MB for a 55 MB store) for good."""
    folder = tmp_path / "runs"
    folder.mkdir()
    store = folder / "reslog.db"
    bulk_store(store, runs=1, keys=2, points=400_000)
    with sqlite3.connect(store) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = {p.name: p.stat().st_size for p in folder.iterdir()}
    content = store.read_bytes()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(tmp_path / "migrations")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def part_growing() -> bool:
            parts = [p for p in folder.iterdir() if ".part" in p.name]
            return any(p.stat().st_size > 0 for p in parts if p.exists())

        assert wait_until(lambda: part_growing() or child.poll() is not None)
        assert child.poll() is None, child.communicate()  # still copying when killed
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        child.kill()
        child.communicate()
    # The guard process removes what the killed one was writing.
    assert wait_until(lambda: not any(".part" in p.name for p in folder.iterdir()))
    after = {p.name: p.stat().st_size for p in folder.iterdir()}
    assert sorted(after) == sorted(before) and store.read_bytes() == content


def test_a_disk_that_fills_while_importing_is_one_line_saying_what_to_do(
    small_disk,  # noqa: F811 - the fixture
    capsys,
    tmp_path,
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = small_disk.root / "reslog.db"
    new_store(store).dispose()
    n = 400_000
    # Values that do not compress (chunks keep a constant column in 16 bytes): ~3 MB stored.
    values = np.random.default_rng(0).random(n)
    table = pa.table({"key": ["k"] * n, "step": range(n), "value": values})
    pq.write_table(table, tmp_path / "t.parquet")
    small_disk.fill()
    small_disk.release(1)  # room to open the store, not for 400,000 points
    code, _out, err = run_cli(capsys, "import", "parquet", tmp_path / "t.parquet", "--store", store)
    assert code == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: {store}: database or disk is full (free some room and run")
    small_disk.release(len(small_disk.fillers))
    with sqlite3.connect(store) as conn:
        assert point_count(conn) == 0
