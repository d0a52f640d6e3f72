"""Buffered records into point rows, grouped for the rollups and cut into transactions.

A record is `(step, wall, {key: value})` as `run.log` buffered it. The writer
(reslog/training/writer.py) takes the records of one flush, cuts them into transactions of at
most its current chunk size (`chunk_end`), and turns each piece into rows (`point_rows`).
"""

from __future__ import annotations

from itertools import accumulate, chain, repeat
from operator import itemgetter

from reslog.training.values import PLAIN, to_floats


def records_by_keys(held: list) -> list[tuple[list, list]]:
    """(key names, the records holding them, in arrival order) with each key in one group: the
    keys that appear in exactly the same records. Records of one key set are one group; when
    a key is logged in several key sets (GPU keys in the same dict as the loss on some steps
    only), its group is the records of all those sets, merged back into arrival order."""
    by_set: dict[tuple, list[int]] = {}
    for i, rec in enumerate(held):
        by_set.setdefault(tuple(rec[2]), []).append(i)
    sets = list(by_set)
    where: dict[str, list[int]] = {}
    for g, names in enumerate(sets):
        for k in names:
            where.setdefault(k, []).append(g)
    by_where: dict[tuple, list[str]] = {}
    for k, gs in where.items():
        by_where.setdefault(tuple(gs), []).append(k)
    out = []
    for gs, names in by_where.items():
        at = (
            by_set[sets[gs[0]]]
            if len(gs) == 1
            else sorted(chain.from_iterable(by_set[sets[g]] for g in gs))
        )
        out.append((names, [held[i] for i in at]))
    return out


def chunk_end(held: list, limit: int) -> int:
    """How many of the held records make the next transaction of at most `limit` points (at
    least one record)."""
    sizes = list(map(len, map(itemgetter(2), held)))
    if sum(sizes) <= limit:  # the usual flush: one transaction
        return len(held)
    for i, total in enumerate(accumulate(sizes)):
        if total >= limit:
            return i + 1
    return len(held)


def ints_fit(held: list) -> bool:
    """Whether every int fits SQLite's 64-bit INTEGER (a bigger one makes executemany raise)."""
    return all(-(2**63) <= v < 2**63 for _s, _w, m in held for v in m.values() if type(v) is int)


def point_rows(
    held: list, run_id: int, ids: dict[str, int], is_sqlite: bool
) -> tuple[list[tuple], list]:
    """Point rows (run_id, key_id, step, wall, value), and the same points grouped by the
    records that hold them (RollupWriter.insert's `groups`): keys logged in the same records
    share one list of steps and walls, so the rollups work out bucket bounds once per group,
    not once per key. `ids` maps every key name to its id.

    The rows are built from the groups, series by series (each series' points in arrival
    order, which is all ids must keep): one C-level zip a series instead of a Python step a
    point, and the (run, key, step) index then takes each series' points together."""
    types = set(map(type, chain.from_iterable(map(dict.values, [r[2] for r in held]))))
    plain = is_sqlite and types <= PLAIN and (int not in types or ints_fit(held))
    groups = []
    rows: list[tuple] = []
    for names, recs in records_by_keys(held):
        dicts = [r[2] for r in recs]
        steps, walls = [r[0] for r in recs], [r[1] for r in recs]
        cols = {}
        for k in names:
            column = list(map(itemgetter(k), dicts))
            # SQLite stores NaN as NULL by itself and ints in a REAL column as reals.
            kid = ids[k]
            cols[kid] = column if plain else to_floats(column)
            rows.extend(zip(repeat(run_id), repeat(kid), steps, walls, cols[kid]))
        groups.append((steps, walls, cols))
    return rows, groups
