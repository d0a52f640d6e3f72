"""Statements compiled once to the driver's positional paramstyle, for executemany of tuples.

SQLAlchemy's executemany builds a dict per row; the writer's hot path hands plain tuples to the
DBAPI instead, with SQL compiled from schema.tables here (so no table is spelled twice).
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlalchemy.engine import Dialect

from schema.envelope import marker


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
