"""Reading a store through SQLAlchemy (SQLite or PostgreSQL): runs, keys, points, events.

Used by the reslog CLI, export, and resplot's PostgreSQL source. The stdlib-only agent
(reslog/agent.py) answers the same questions for SQLite files on remote hosts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from sqlalchemy import Connection, Engine, select

from schema.store import chunk_read, points_by_id
from schema.store.envelope import marker
from schema.store.errors import AmbiguousRun, UnknownRun
from schema.store.records import Event, RunInfo, RunRef, run_info
from schema.store.rollup import newest_take
from schema.store.tables import events, keys, runs

NAN = math.nan


@dataclass
class PointRows:
    """Columns of a batch of points, in id order. `cursor` is the last id (pass it back)."""

    ids: list[int]
    run_ids: list[int]
    key_ids: list[int]
    steps: list[int]
    walls: list[float]
    values: list[float]
    cursor: int

    def __len__(self) -> int:
        return len(self.ids)


def raw_rows(conn: Connection, query) -> list[tuple]:
    """Run a SELECT through the DBAPI cursor: plain tuples, no Row objects.

    Reading series is the hot path of export and the CLI; SQLAlchemy's Row construction costs
    several times the query itself there. The statement is still built from schema.store.tables.
    """
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.params
    args = tuple(params[name] for name in compiled.positiontup) if compiled.positional else params
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        return cursor.fetchall()
    finally:
        cursor.close()


def run_from_row(row, source: str, store: str, now: float | None = None) -> RunInfo:
    return run_info(row._mapping, source, store, now)


def list_runs(
    conn: Connection, *, source: str = "local", store: str = "", project: str | None = None
) -> list[tuple[int, RunInfo]]:
    """(row id, run) for every run, oldest first."""
    query = select(runs).order_by(runs.c.created_at, runs.c.id)
    if project is not None:
        query = query.where(runs.c.project == project)
    return [(row.id, run_from_row(row, source, store)) for row in conn.execute(query)]


def find_run(conn: Connection, ident: str, **kw) -> tuple[int, RunInfo]:
    """A run by uid, unique uid prefix, or unique name; UnknownRun otherwise, AmbiguousRun
    (listing each match's uid, start and status) when several runs match: none is picked."""
    all_runs = list_runs(conn, **kw)
    for exact, what in (
        ([r for r in all_runs if r[1].ref.uid == ident], "uid"),
        ([r for r in all_runs if r[1].name == ident], "name"),
        ([r for r in all_runs if r[1].ref.uid.startswith(ident)], "uid prefix"),
    ):
        if len(exact) == 1:
            return exact[0]
        if len(exact) > 1:
            listed = ", ".join(
                f"{r.ref.uid[:8]} (started {_clock(r.created_at)}, {r.status})" for _, r in exact
            )
            raise AmbiguousRun(
                f"'{ident}' is the {what} of {len(exact)} runs: {listed}; give a uid or a "
                "unique uid prefix",
                [r for _, r in exact],
            )
    raise UnknownRun(f"no run '{ident}' in this store (see `reslog ls`)")


def _clock(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall))


def run_by_id(conn: Connection, run_id: int, source: str, store: str) -> RunInfo | None:
    """One run by row id (None: deleted meanwhile)."""
    row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
    return None if row is None else run_from_row(row, source, store)


def tail_cursor(conn: Connection, run_id: int, lines: int) -> int:
    """The point id to follow a run from so that its `lines` newest points come first (0: all
    of them). Ids are shared by every run in the store: this counts the run's points, not ids."""
    newest = points_by_id.newest_ids(*_cur(conn), run_id, max(0, lines) + 1)
    return newest[-1] if len(newest) > max(0, lines) else 0


def dbapi_cursor(conn: Connection) -> tuple:
    """The DBAPI cursor of the connection's transaction, and its placeholder: the (cur, p)
    that schema/store/chunk_read.py's functions take."""
    return conn.connection.dbapi_connection.cursor(), marker(conn.dialect.paramstyle)


_cur = dbapi_cursor


def key_names(conn: Connection) -> dict[int, str]:
    return dict(conn.execute(select(keys.c.id, keys.c.name)).all())


def run_key_ids(conn: Connection, run_id: int) -> list[int]:
    """Keys that have points in one run."""
    return sorted(chunk_read.run_keys(*_cur(conn), run_id))


def fetch_points(
    conn: Connection,
    run_ids: Iterable[int],
    *,
    after: int = 0,
    key_ids: Iterable[int] | None = None,
    limit: int | None = None,
) -> PointRows:
    """Points with id > after, for these runs (and keys), in id order. NULL value → NaN."""
    rows = points_by_id.points_after(
        *_cur(conn),
        list(run_ids),
        after,
        key_ids=None if key_ids is None else list(key_ids),
        limit=limit,
    )
    cols = list(zip(*rows, strict=True)) if rows else [()] * 6
    values = [NAN if v is None else v for v in cols[5]]
    return PointRows(
        list(cols[0]),
        list(cols[1]),
        list(cols[2]),
        list(cols[3]),
        list(cols[4]),
        values,
        cursor=cols[0][-1] if rows else after,
    )


def fetch_events(conn: Connection, run_id: int, ref: RunRef, *, after: int = 0) -> list[Event]:
    query = (
        select(events).where(events.c.run_id == run_id, events.c.id > after).order_by(events.c.id)
    )
    return [
        Event(ref, r.id, r.wall, r.step, r.kind, r.level, r.title, r.body)
        for r in conn.execute(query)
    ]


def series_points(conn: Connection, run_id: int, key_id: int) -> list[tuple]:
    """Every point of one series as (step, wall, value), in id (arrival) order."""
    return [r[1:] for r in chunk_read.series_all(*_cur(conn), run_id, key_id)]


def series(engine: Engine, run_id: int, key_id: int) -> tuple[list[int], list[float], list[float]]:
    """(steps, walls, values) of one key of one run by step (full resolution), the newer take
    where a resumed run logged steps again (schema.store.rollup.newest_take)."""
    with engine.connect() as conn:
        rows = series_points(conn, run_id, key_id)
    if not rows:
        return [], [], []
    steps, walls, values = zip(*rows, strict=True)
    if any(b < a for a, b in pairwise(steps)):  # rare: a restart or out-of-order steps
        keep = newest_take(steps, walls)
        rows = sorted((r for r, k in zip(rows, keep, strict=True) if k), key=lambda r: r[0])
        steps, walls, values = zip(*rows, strict=True)
    return list(steps), list(walls), [NAN if v is None else v for v in values]
