"""A store's series rows as plain tuples: their columns, the DBAPI placeholder, and a row's
aggregate. What `reslog ls` needs of a store, apart from schema/store/envelope.py's readers of
points and buckets (which pull in the chunk codecs and folds: ~0.1 s of a CLI process's start).

Standard library only, Python 3.8 syntax: the agent's archive ships it (reslog/agent/bundle.py).
"""

from __future__ import annotations

from schema.store.rollup import AGG_COLUMNS, VSUM

SERIES_COLUMNS = ("run_id", "key_id", *AGG_COLUMNS, "levels", "tail_step", "tail_wall")

_NAN = float("nan")


def marker(paramstyle: str) -> str:
    """The DBAPI placeholder: "?" (sqlite3) or "%s" (psycopg, pg8000)."""
    return "?" if paramstyle == "qmark" else "%s"


def agg_of(row, offset: int = 0) -> tuple:
    """An Agg tuple from a stored row (vsum NULL means NaN: inf - inf)."""
    agg = tuple(row[offset : offset + len(AGG_COLUMNS)])
    if agg[VSUM] is None:
        agg = (*agg[:VSUM], _NAN, *agg[VSUM + 1 :])
    return agg


def series_rows(cur, p: str, run_ids=None) -> list:
    """Stored `series` rows in SERIES_COLUMNS order (every run's, or those of `run_ids`)."""
    sql = "SELECT " + ", ".join(SERIES_COLUMNS) + " FROM series"
    if run_ids is None:
        cur.execute(sql + " ORDER BY run_id, key_id")
    else:
        run_ids = list(run_ids)
        if not run_ids:
            return []
        marks = ", ".join([p] * len(run_ids))
        cur.execute(sql + f" WHERE run_id IN ({marks}) ORDER BY run_id, key_id", run_ids)
    return cur.fetchall()
