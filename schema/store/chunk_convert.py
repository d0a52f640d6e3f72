"""Converting the `points` rows of a store written before revision 0006 into sealed chunks: the
second half of `reslog upgrade` to 0006 (schema.store.migrate.upgrade calls it once the tables
exist).

Run by run, each run in one transaction: its points read in id order, each series cut into
sealed one-column chunks of up to CHUNK_POINTS points (sorted by id, KEEPING their ids, so
cursors, takes and the rollups stay valid as they are), then the run's rows deleted. A kill at
any moment rolls back at most the run being converted: readers take the rows of the runs not
converted yet (schema/store/chunk_read.py), and `reslog upgrade` again carries on with them.

Memory: one page of rows and, per series of the run, its points not yet in a chunk (at most
CHUNK_POINTS each).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import Connection, Engine

from schema.store.chunk_write import SEAL_ROWS
from schema.store.progress import Ticker
from schema.store.sql import placeholder

try:
    import numpy as np

    from schema.store import chunk_codec_numpy as _codec
except ImportError:  # reslog without numpy: the standard-library encoder writes the same bytes
    from schema.store import chunk_codec as _codec  # type: ignore[no-redef]

    np = None  # type: ignore[assignment]

CHUNK_POINTS = SEAL_ROWS  # as many as the writer's sealed chunks
PAGE = 50_000  # rows read at a time, by id
_NAN = float("nan")

Progress = Callable[[int, int], None]  # (points converted, points to convert)


class Converted(NamedTuple):
    runs: int
    points: int
    chunks: int
    seconds: float


def pending_runs(conn: Connection) -> list[int]:
    """The runs that still have rows in `points`: a skip along ix_points_run_id_id (one index
    seek a run, however many points each holds)."""
    p = placeholder(conn.dialect)
    sql = f"SELECT run_id FROM points WHERE run_id > {p} ORDER BY run_id LIMIT 1"
    out: list[int] = []
    found = conn.exec_driver_sql(sql, (-(2**63),)).scalar()
    while found is not None:
        out.append(int(found))
        found = conn.exec_driver_sql(sql, (int(found),)).scalar()
    return out


def legacy_points(conn: Connection) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM points").scalar() or 0)


def _keyset(conn: Connection, p: str, run_id: int, key_id: int) -> int:
    """The run's one-column keyset of `key_id` (the writer's own when it logged the key alone
    after an upgrade: its readers merge chunks by id, whichever wrote them)."""
    sql = f"SELECT id FROM keysets WHERE run_id = {p} AND key_ids = {p}"
    found = conn.exec_driver_sql(sql, (run_id, str(key_id))).scalar()
    if found is None:
        conn.exec_driver_sql(
            f"INSERT INTO keysets (run_id, key_ids) VALUES ({p}, {p})", (run_id, str(key_id))
        )
        found = conn.exec_driver_sql(sql, (run_id, str(key_id))).scalar()
    return int(found)


class _Series:
    """Points of one series waiting for their chunk: lists, or with numpy a list of arrays."""

    __slots__ = ("ids", "n", "steps", "values", "walls")

    def __init__(self) -> None:
        self.ids: list = []
        self.steps: list = []
        self.walls: list = []
        self.values: list = []
        self.n = 0


def _split_page(rows: list, waiting: dict, full: list) -> None:
    """A page of (id, key, step, wall, value) rows in id order added to each key's waiting
    points; keys holding CHUNK_POINTS or more are listed in `full`."""
    if np is None:
        for pid, key, step, wall, value in rows:
            s = waiting.get(key)
            if s is None:
                s = waiting[key] = _Series()
            s.ids.append(pid)
            s.steps.append(step)
            s.walls.append(wall)
            # NaN is stored as NULL (docs/store.md, "NaN and infinities").
            s.values.append(_NAN if value is None else value)
            s.n += 1
            if s.n == CHUNK_POINTS:
                full.append(key)
        return
    ids, keys, steps, walls, values = zip(*rows)  # noqa: B905 (equal by construction)
    keys = np.array(keys, dtype=np.int64)
    order = np.argsort(keys, kind="stable")  # by key, each key's points still in id order
    keys = keys[order]
    cut = np.flatnonzero(np.diff(keys)) + 1
    starts = [0, *cut.tolist()]
    ends = [*cut.tolist(), len(keys)]
    columns = (
        np.array(ids, dtype=np.int64)[order],
        np.array(steps, dtype=np.int64)[order],
        np.array(walls, dtype=np.float64)[order],
        np.array(values, dtype=np.float64)[order],  # None (NaN's NULL) becomes NaN
    )
    for a, b in zip(starts, ends):  # noqa: B905
        key = int(keys[a])
        s = waiting.get(key)
        if s is None:
            s = waiting[key] = _Series()
        for held, col in zip((s.ids, s.steps, s.walls, s.values), columns):  # noqa: B905
            held.append(col[a:b])
        before = s.n
        s.n += b - a
        if before < CHUNK_POINTS <= s.n:
            full.append(key)


def _take(s: _Series, count: int) -> tuple:
    """The first `count` waiting points of a series as (ids, steps, walls, values), removed."""
    if np is None:
        out = (s.ids[:count], s.steps[:count], s.walls[:count], s.values[:count])
        del s.ids[:count], s.steps[:count], s.walls[:count], s.values[:count]
    else:
        whole = [np.concatenate(held) for held in (s.ids, s.steps, s.walls, s.values)]
        out = tuple(col[:count] for col in whole)
        s.ids, s.steps, s.walls, s.values = ([col[count:]] for col in whole)
    s.n -= count
    return out


def convert_run(conn: Connection, run_id: int, tick: Callable[[int], None] | None = None) -> tuple:
    """Convert one run's rows into sealed chunks and delete them, in the caller's transaction;
    returns (points, chunks). `tick(n)`: n more rows read."""
    p = placeholder(conn.dialect)
    if conn.dialect.name == "postgresql":
        # Two `reslog upgrade`s at once: the second waits here, then finds the run converted
        # (READ COMMITTED: the statements below see what the first committed).
        from schema.store.revision import MIGRATION_LOCK_KEY

        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
    cur = conn.connection.dbapi_connection.cursor()  # rows as the driver gives them: quicker
    keysets: dict[int, int] = {}
    waiting: dict[int, _Series] = {}
    rows_out: list[tuple] = []
    insert = (
        "INSERT INTO chunks (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi, sealed, data)"
        f" VALUES ({', '.join([p] * 9)})"
    )
    page = (
        f"SELECT id, key_id, step, wall, value FROM points WHERE run_id = {p} AND id > {p}"
        f" ORDER BY id LIMIT {PAGE}"
    )
    total = chunks = 0

    def seal(key: int, count: int) -> None:
        nonlocal chunks
        chunks += 1
        ks = keysets.get(key)
        if ks is None:
            ks = keysets[key] = _keyset(conn, p, run_id, key)
        ids, steps, walls, values = _take(waiting[key], count)
        blob = _codec.encode(steps, walls, values, ids=ids)
        rows_out.append(
            (
                run_id,
                ks,
                int(ids[0]),
                int(ids[-1]),
                len(ids),
                int(min(steps)),
                int(max(steps)),
                1,
                blob,
            )
        )

    last = -(2**63)
    while True:
        cur.execute(page, (run_id, last))
        rows = cur.fetchall()
        if not rows:
            break
        full: list[int] = []
        _split_page(rows, waiting, full)
        for key in full:
            while waiting[key].n >= CHUNK_POINTS:
                seal(key, CHUNK_POINTS)
        if rows_out:
            conn.exec_driver_sql(insert, rows_out)
            rows_out.clear()
        last = rows[-1][0]
        total += len(rows)
        if tick is not None:
            tick(len(rows))
    for key, s in waiting.items():
        if s.n:
            seal(key, s.n)
    if rows_out:
        conn.exec_driver_sql(insert, rows_out)
    conn.exec_driver_sql(f"DELETE FROM points WHERE run_id = {p}", (run_id,))
    return total, chunks


def convert(engine: Engine, progress: Progress | None = None) -> Converted:
    """Convert every run that still has rows, each in a transaction of its own."""
    started = time.perf_counter()
    with engine.connect() as conn:
        runs = pending_runs(conn)
        total = legacy_points(conn) if runs else 0
    tick = Ticker(progress, total)
    if runs and progress is not None:
        progress(0, total)
    points = chunks = 0
    for run_id in runs:
        with engine.begin() as conn:
            n, c = convert_run(conn, run_id, tick)
        points += n
        chunks += c
    tick.finish()  # rows deleted meanwhile (a run removed during the upgrade)
    return Converted(len(runs), points, chunks, time.perf_counter() - started)


# -- giving the space back (SQLite) -------------------------------------------------------------


def free_share(engine: Engine) -> float:
    """The share of a SQLite file's pages that are free (0 elsewhere)."""
    if engine.dialect.name != "sqlite":
        return 0.0
    with engine.connect() as conn:
        free = conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar() or 0
    return free / pages if pages else 0.0


def vacuum(engine: Engine) -> None:
    """Rewrite a SQLite file without its free pages, and empty its WAL. VACUUM is one
    transaction (a kill leaves the file as it was) and needs room for a copy of what is left,
    a few percent of the rows' size once they are chunks; it cannot run inside a transaction,
    hence the raw connection (the connect hook leaves it in autocommit)."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("VACUUM")
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.close()
    finally:
        raw.close()
