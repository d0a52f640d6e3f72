"""The read-only commands' fast path: a SQLite store read with the standard library alone.

`reslog ls` is what people type while training runs. Through SQLAlchemy its process took 3.9 s
next to 16 busy writer processes on 2 cores, of which 0.08 s was the command: the rest was the
interpreter importing SQLAlchemy on a crowded machine. Here the store is read the way the agent
reads it (sqlite3, the plain column lists of schema/store/columns.py, schema/store/series_rows.py's
series rows), read-only (mode=ro), in one read transaction: a WAL snapshot that holds no lock a
writer waits for.

Only the plain case is taken: a path (not a URL) to a regular file on a local disk, holding a
store at this code's schema revision. Anything else (no file, a directory, a URL, a network file
system, another revision, an error of any kind) returns None, and the caller goes the
SQLAlchemy way, which says what is wrong in its own words: nothing printed differs.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

from schema.store.columns import RUN_COLUMNS
from schema.store.records import RunInfo, run_info
from schema.store.revision import HEAD_REVISION
from schema.store.series_rows import agg_of, marker, series_rows
from schema.store.sqlite_file import DEFAULT_STORE, NETWORK_FS, connect_readonly, filesystem_type

# as schema.store.connect's connect hook: only a WAL recovery can make it wait
BUSY_TIMEOUT_MS = 30_000


def store_file(store: str | os.PathLike[str] | None) -> Path | None:
    """The local SQLite file a store argument names, when the fast path can read it; else None.

    The path is built as schema.store.connect.resolve_store builds it, so the label (`str(path)`) is
    the one schema.store.connect.store_label gives."""
    if store is None or store == "":
        store = os.environ.get("RESLOG_STORE") or DEFAULT_STORE
    store = os.fspath(store)
    if "://" in store:
        return None
    path = Path(store).expanduser().absolute()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except (OSError, ValueError):
        return None
    if filesystem_type(path.parent) in NETWORK_FS:  # schema.store.connect warns about it
        return None
    return path


class Snapshot:
    """One read transaction on a store file (mode=ro); use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        self.conn = connect_readonly(path, isolation_level=None)
        self.cur = self.conn.cursor()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def is_current_store(self) -> bool:
        """Whether the file holds a store at HEAD_REVISION; reads it in a transaction that stays
        open, so everything read after this comes from one snapshot."""
        self.cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.cur.execute("BEGIN")
        names = {r[0] for r in self.cur.execute("SELECT name FROM sqlite_master")}
        if not {"alembic_version", "runs", "keys", "series"} <= names:
            return False
        revisions = self.cur.execute("SELECT version_num FROM alembic_version").fetchall()
        return revisions == [(head_revision(),)]

    def runs(self, project: str | None = None) -> list[tuple[int, RunInfo]]:
        """(row id, run) for every run, oldest first: schema.store.read.list_runs's answer."""
        sql = "SELECT " + ", ".join(RUN_COLUMNS) + " FROM runs"
        args: list[object] = []
        if project is not None:
            sql += " WHERE project = ?"
            args.append(project)
        rows = self.cur.execute(sql + " ORDER BY created_at, id", args).fetchall()
        return [
            (row[0], run_info(dict(zip(RUN_COLUMNS, row, strict=True)), "local", self.label))
            for row in rows
        ]

    def series_aggs(self, run_ids: list[int]) -> dict[int, dict[str, tuple]]:
        """{run id: {key name: aggregate}}: schema.store.reader.StoreReader.series_rows's rows
        through envelope.agg_of(row, 2)."""
        names = dict(self.cur.execute("SELECT id, name FROM keys").fetchall())
        out: dict[int, dict[str, tuple]] = {}
        for row in series_rows(self.cur, marker("qmark"), run_ids):
            out.setdefault(int(row[0]), {})[names[int(row[1])]] = agg_of(row, 2)
        return out


def head_revision() -> str:
    """The revision this code reads: schema.store.connect's, where that module is loaded (it is the
    one schema.store.connect.check_revision holds stores to, and a test may move it), else
    schema.store.revision's, the same value."""
    loaded = sys.modules.get("schema.store.connect")
    return getattr(loaded, "HEAD_REVISION", HEAD_REVISION)


def open_snapshot(store: str | os.PathLike[str] | None) -> Snapshot | None:
    """A snapshot of the store when the fast path can read it (see the module's docstring),
    else None."""
    path = store_file(store)
    if path is None:
        return None
    try:
        snap = Snapshot(path)
    except sqlite3.Error:
        return None
    try:
        if snap.is_current_store():
            return snap
    except sqlite3.Error:
        pass
    snap.conn.close()
    return None
