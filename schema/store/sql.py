"""Statements compiled once to the driver's positional paramstyle, for many rows of tuples.

SQLAlchemy's executemany builds a dict per row; the writer's hot path hands plain tuples to the
DBAPI instead, with SQL compiled from schema.store.tables here (so no table is spelled twice).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import chain

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect

from schema.store.envelope import marker


def positional_dialect(dialect: Dialect) -> Dialect:
    """The dialect, or a copy of it compiling to "format" (%s) when its own style is named."""
    if dialect.paramstyle in ("qmark", "format"):
        return dialect
    return type(dialect)(paramstyle="format")


def placeholder(dialect: Dialect) -> str:
    return marker(positional_dialect(dialect).paramstyle)


def _compile(dialect: Dialect, stmt, columns: list[str]) -> str:
    compiled = stmt.compile(dialect=positional_dialect(dialect), column_keys=columns)
    order = list(compiled.positiontup or [])
    if order != columns:
        raise RuntimeError(f"unexpected parameter order {order} for {stmt.table.name}")
    return str(compiled)


def positional_insert(dialect: Dialect, table: Table, columns: list[str]) -> str:
    """INSERT SQL for `columns`, rows passed as plain tuples in that order."""
    return _compile(dialect, table.insert(), columns)


def positional_upsert(dialect: Dialect, table: Table, columns: list[str]) -> str:
    """INSERT ... ON CONFLICT (primary key) DO UPDATE SET every other column (SQLite 3.24+,
    PostgreSQL 9.5+): a row replaces the stored one with the same key."""
    if dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        raise NotImplementedError(f"no upsert for the {dialect.name} dialect")
    key = [c.name for c in table.primary_key.columns]
    stmt = insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=key, set_={c: stmt.excluded[c] for c in columns if c not in key}
    )
    return _compile(dialect, stmt, columns)


# PostgreSQL's binary COPY names each column's type; these are the ones the store's tables use.
_COPY_TYPES = {
    "BIGINT": "int8",
    "INTEGER": "int4",
    "SMALLINT": "int2",
    "FLOAT": "float8",
    "DOUBLE PRECISION": "float8",
    "TEXT": "text",
}
COPY_ROWS = 10_000  # rows a COPY statement: each one's end is progress the writer can see


def copy_statement(dialect: Dialect, table: Table, columns: list[str]) -> tuple[str, list[str]]:
    """(COPY ... FROM STDIN (FORMAT BINARY) for `columns` of `table`, their binary type names)."""
    types = []
    for name in columns:
        compiled = table.c[name].type.compile(dialect=dialect).split("(")[0]
        types.append(_COPY_TYPES.get(compiled, "text"))
    sql = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    return sql, types


def can_copy(dialect: Dialect) -> bool:
    """Whether rows can go in through COPY: PostgreSQL through psycopg 3 (`cursor.copy()`)."""
    return dialect.name == "postgresql" and dialect.driver == "psycopg"


def _raw_cursor(dialect: Dialect | None):
    """psycopg's RawCursor (psycopg 3.2+; server-side $n markers, no client-side parsing)
    where `dialect` is PostgreSQL through psycopg (None: whichever), else None."""
    if dialect is not None and not can_copy(dialect):
        return None
    try:
        from psycopg import RawCursor
    except ImportError:
        return None
    return RawCursor


def _numbered(group: str, row: int) -> str:
    """Row `row` of a multi-row VALUES for PostgreSQL's $n markers: the group's %s in order as
    $(row * markers + 1) on, each marker's cast kept."""
    marks = group[1:-1].split(", ")
    base = row * len(marks)
    return "(" + ", ".join(m.replace("%s", f"${base + j + 1}") for j, m in enumerate(marks)) + ")"


def _values_group(sql: str, ncols: int, sqlite: bool) -> tuple[str, str, str]:
    """(up to "VALUES ", the one row's group, the rest) of an INSERT of one row: the group is
    `ncols` markers, `?` on SQLite, `%s` on PostgreSQL (where SQLAlchemy may add a cast to
    each, `%s::BIGINT`)."""
    head, found, rest = sql.partition("VALUES (")
    group, closed, tail = rest.partition(")")
    marks = group.split(", ")
    ok = found and closed and len(marks) == ncols
    if ok and sqlite:
        ok = all(m == "?" for m in marks)
    elif ok:
        ok = all(m == "%s" or (m.startswith("%s::") and m[4:].isalpha()) for m in marks)
    if not ok:
        raise RuntimeError(f"no single VALUES group of {ncols} markers in {sql!r}")
    return head + "VALUES ", "(" + group + ")", tail


class BulkRows:
    """One INSERT (or upsert) run for many rows given as plain tuples.

    On SQLite the rows go in as multi-row `VALUES (...), (...)` statements of power-of-two
    sizes (at most `max_rows` rows, within SQLite's variable limit), not executemany: the
    sqlite3 module releases the GIL around every sqlite3_step, so executemany hands the GIL
    back once per row. A writer thread doing that beside a training loop that holds the GIL
    gets one row per switch interval (5 ms) and falls ever further behind (the "convoy"), and
    binding the rows of one statement costs ~35 % less CPU than stepping each row.
    Every statement of a size is the same SQL, so the sqlite3 module prepares each size once
    per connection.

    On PostgreSQL through psycopg 3, a plain insert given `copy` (the table and columns) goes in
    as binary COPY, COPY_ROWS rows a statement: ~0.3 µs of client CPU a row against ~15 µs for
    executemany, which on a machine shared with the server was CPU the server lacked
    (docs/benchmarks.md, "PostgreSQL ingest"). Upserts given `distinct=True` (no two rows of one
    run() share a conflict key, which PostgreSQL refuses within one statement) go in as the
    same multi-row statements as on SQLite (at most 65,535 parameters each): psycopg binds a
    statement's parameters in C where executemany spends ~15 µs of Python a row (the writer's
    rollup upserts, ~240 rows a flush: docs/benchmarks.md, "writer CPU"). Other upserts keep
    executemany (psycopg pipelines it; COPY cannot say ON CONFLICT). `progress`, when given, is
    called after each statement: the writer's watchdog tells a slow server from a dead one by
    it.
    """

    def __init__(
        self,
        dialect: Dialect,
        sql: str,
        ncols: int,
        max_rows: int = 1024,
        *,
        copy: tuple[Table, list[str]] | None = None,
        progress: Callable[[], None] | None = None,
        distinct: bool = False,
    ) -> None:
        self.sql = sql
        self.ncols = ncols
        self.sqlite = dialect.name == "sqlite"
        self.max_rows = max_rows
        self.progress = progress
        self._copy: tuple[str, list[str]] | None = None
        if copy is not None and can_copy(dialect):
            self._copy = copy_statement(dialect, *copy)
        self._by_size: dict[int, str] = {}
        self._top_rows = 0
        self._values = self.sqlite or (distinct and _raw_cursor(dialect) is not None)
        if self._values:
            self._head, self._group, self._tail = _values_group(sql, ncols, self.sqlite)

    def run(self, conn: Connection, rows: list[tuple]) -> None:
        """Insert `rows` inside the caller's transaction, in their order."""
        if not rows:
            return
        if self._copy is not None:
            self._run_copy(conn, rows)
            return
        if not self._values:
            conn.exec_driver_sql(self.sql, rows)
            if self.progress is not None:
                self.progress()
            return
        dbapi = conn.connection.dbapi_connection
        # PostgreSQL: a raw cursor takes $n markers as they are; psycopg's own cursor would
        # parse a statement of thousands of markers in Python at every execute (it caches
        # only short ones): 3x the CPU of the executemany it replaces.
        cur = dbapi.cursor() if self.sqlite else _raw_cursor(None)(dbapi)
        top = self._top_rows or self._top(dbapi if self.sqlite else None)
        i, n = 0, len(rows)
        while i < n:
            size = min(top, 1 << ((n - i).bit_length() - 1))  # the largest power of two that fits
            cur.execute(self._statement(size), list(chain.from_iterable(rows[i : i + size])))
            i += size
            if self.progress is not None:
                self.progress()

    def _run_copy(self, conn: Connection, rows: list[tuple]) -> None:
        assert self._copy is not None
        sql, types = self._copy
        cur = conn.connection.dbapi_connection.cursor()
        for i in range(0, len(rows), COPY_ROWS):
            with cur.copy(sql) as copy:
                copy.set_types(types)
                write = copy.write_row
                for row in rows[i : i + COPY_ROWS]:
                    write(row)
            if self.progress is not None:
                self.progress()

    def _top(self, dbapi) -> int:
        """The largest statement size: `max_rows` rounded down to a power of two, within the
        connection's variable limit (999 on SQLite before 3.32; PostgreSQL's protocol: 65,535
        parameters a statement)."""
        limit = 999
        getlimit = getattr(dbapi, "getlimit", None)  # Python 3.11+
        if dbapi is None:
            limit = 65535
        elif getlimit is not None:
            limit = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        elif sqlite3.sqlite_version_info >= (3, 32, 0):
            limit = 32766
        rows = max(1, min(self.max_rows, limit // self.ncols))
        self._top_rows = 1 << (rows.bit_length() - 1)
        return self._top_rows

    def _statement(self, size: int) -> str:
        sql = self._by_size.get(size)
        if sql is None:
            if self.sqlite:
                groups = ", ".join([self._group] * size)
            else:
                groups = ", ".join(_numbered(self._group, r) for r in range(size))
            sql = self._by_size[size] = self._head + groups + self._tail
        return sql
