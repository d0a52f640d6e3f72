"""The two writes every producer of runs makes: a run row, and the ids of its key names.

The writer (reslog.init), the importers and resplot's mirror sync all write through these,
inside the caller's transaction, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, select

from schema.store.tables import keys, runs

IN_CHUNK = 400  # names per "IN (...)" (SQLite's variable limit is 999 or more)


def insert_run(conn: Connection, values: Mapping[str, Any]) -> int:
    """Insert one run row (columns of schema.store.tables.runs) and return its id."""
    return int(conn.execute(runs.insert().values(**values)).inserted_primary_key[0])


def resolve_keys(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    """{name: key id} of these key names, inserting the ones the store lacks. Other processes
    may insert the same names meanwhile: a name already there is left as it is (ON CONFLICT DO
    NOTHING) and every id is read back."""
    names = sorted(set(names))
    if not names:
        return {}
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        from sqlalchemy.dialects.postgresql import insert
    conn.execute(
        insert(keys).on_conflict_do_nothing(index_elements=["name"]), [{"name": n} for n in names]
    )
    ids: dict[str, int] = {}
    for i in range(0, len(names), IN_CHUNK):
        chunk = names[i : i + IN_CHUNK]
        query = select(keys.c.name, keys.c.id).where(keys.c.name.in_(chunk))
        ids.update((name, int(kid)) for name, kid in conn.execute(query))
    return ids
