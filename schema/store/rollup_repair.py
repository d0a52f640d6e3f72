"""Rollups from points already stored: the upgrade backfill, `reslog check`'s comparison with
the raw points, and the rebuild `reslog check --fix` does.

All three stream: the backfill and the rebuild read points by id in batches through the same
RollupWriter the writer uses (so a restart is handled by the same code), and the check reads
one sampled series at a time. Memory stays bounded by the batch and the largest sampled series.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from itertools import pairwise

from sqlalchemy import Connection, bindparam, delete, func, inspect, select

from schema.store import buckets, chunk_read, points_by_id
from schema.store.chunk_rollup import fold_chunks
from schema.store.envelope import SERIES_COLUMNS, agg_of, bucket_rows
from schema.store.read import series_points
from schema.store.rollup import AGG_COLUMNS, VSUM, newest_take
from schema.store.rollup_writer import RollupWriter, _cursor, brute_force
from schema.store.sql import placeholder
from schema.store.tables import points, rollups, series, takes

Progress = Callable[[int, int], None]  # (points done, points in all)
BATCH = 200_000
SAMPLE_POINTS = 2_000_000  # points `reslog check` reads back to compare with the rollups


def _stream(
    conn: Connection,
    writers: dict[int, RollupWriter],
    run_ids: list | None,
    progress: Progress | None,
    total: int,
) -> int:
    """Account every point (of `run_ids`; None: all), in id order and batches; returns how
    many."""
    cur, p = _cursor(conn), placeholder(conn.dialect)
    done, last = 0, 0
    while True:
        rows = points_by_id.points_after(cur, p, run_ids, last, limit=BATCH)
        if not rows:
            return done
        by_run: dict[int, tuple[list, list]] = {}
        for r in rows:
            group = by_run.get(r[1])
            if group is None:
                group = by_run[r[1]] = ([], [])
            group[0].append((r[1], r[2], r[3], r[4], r[5]))
            group[1].append(r[0])
        for run_id, (run_rows, ids) in by_run.items():
            writer = writers.get(run_id)
            if writer is None:
                writer = writers[run_id] = RollupWriter(conn.dialect, run_id)
            writer.accept(writer.account(conn, run_rows, ids))
        last = rows[-1][0]
        done += len(rows)
        if progress is not None:
            progress(done, total)


def backfill(conn: Connection, progress: Progress | None = None) -> int:
    """Rollups, series rows and takes of every stored point (a store from before revision
    0005, whose migrations left these tables empty); one pass over the points by id. Returns
    the number of points."""
    total = conn.execute(select(func.count()).select_from(points)).scalar() or 0
    if progress is not None:
        progress(0, total)
    return _stream(conn, {}, None, progress, total)


def rebuild(conn: Connection, run_id: int) -> int:
    """Throw away one run's rollups, series rows and takes and compute them again from its
    points. Returns the number of points."""
    for table in (rollups, series, takes):
        conn.execute(delete(table).where(table.c.run_id == run_id))
    return _stream(conn, {}, [run_id], None, 0)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b
    return a == b


def _agg_problems(where: str, want: tuple, got: tuple) -> list[str]:
    out = []
    for i, name in enumerate(AGG_COLUMNS):
        a, b = want[i], got[i]
        if i == VSUM:
            ok = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        else:
            ok = _same(a, b)
        if not ok:
            out.append(f"{where}: {name} is {b!r}, the points give {a!r}")
    return out


def folded_from_chunks(conn: Connection, run_id: int, key_id: int, levels: int):
    """(series aggregate, {(level, bucket): aggregate}) of a series folded straight from its
    decoded chunks (schema/store/chunk_rollup.py), when that gives what its points do: no rows of
    the series left unconverted, its chunks' id ranges apart, and its steps never going down in id
    order (so no restart: every point stands). None otherwise: the caller reads the points."""
    cur, p = _cursor(conn), placeholder(conn.dialect)
    cur.execute(
        f"SELECT 1 FROM points WHERE run_id = {p} AND key_id = {p} LIMIT 1", (run_id, key_id)
    )
    if cur.fetchone() is not None:
        return None
    found = []
    for ks, col, _k in chunk_read.keyset_columns(cur, p, run_id, key_id):
        cur.execute(f"SELECT id_lo, id_hi, data FROM chunks WHERE keyset_id = {p}", (ks,))
        found += [(int(lo), int(hi), col, blob) for lo, hi, blob in cur.fetchall()]
    if not found:
        return None
    found.sort(key=lambda c: c[0])
    chunks, high, last_step = [], None, None
    for lo, hi, col, blob in found:
        if high is not None and lo <= high:
            return None  # two keysets' chunks interleave: their order is not the points'
        high = hi
        c = chunk_read.decode(blob, [col])
        steps = c.steps.tolist() if chunk_read.numpy_modules()[0] is None else c.steps
        if len(steps) == 0:
            continue
        if chunk_read.numpy_modules()[0] is not None:
            if len(steps) > 1 and bool((chunk_read.numpy_modules()[0].diff(steps) < 0).any()):
                return None
        elif any(b < a for a, b in pairwise(steps)):
            return None
        if last_step is not None and int(steps[0]) < last_step:
            return None
        last_step = int(steps[-1])
        chunks.append(c)
    if not chunks:
        return None
    folded = fold_chunks(chunks, levels=levels)
    return folded.series, folded.buckets


def check_series(conn: Connection, run_id: int, key_id: int) -> list[str]:
    """Differences between one series' stored rollups and a recomputation from its points
    (O(series): the check samples series): folded from its chunks where they stand as they
    are (folded_from_chunks), else from its points read back and their newest take."""
    p = placeholder(conn.dialect)
    cur = _cursor(conn)
    cur.execute(
        "SELECT " + ", ".join(SERIES_COLUMNS) + f" FROM series WHERE run_id = {p} AND key_id = {p}",
        (run_id, key_id),
    )
    stored = cur.fetchone()
    where = f"run {run_id} key {key_id}"
    levels = 1 if stored is None else int(stored[SERIES_COLUMNS.index("levels")])
    folded = None if stored is None else folded_from_chunks(conn, run_id, key_id, levels)
    if folded is not None:
        want_series, want = folded
    else:
        rows = series_points(conn, run_id, key_id)
        keep = newest_take([r[0] for r in rows], [r[1] for r in rows])
        kept = [r for r, k in zip(rows, keep, strict=True) if k]
        if not kept:
            return [f"{where}: a series row for a series with no points"] if stored else []
        if stored is None:
            return [f"{where}: {len(kept)} points but no rollups"]
        want_series, want = brute_force(
            [r[0] for r in kept], [r[1] for r in kept], [r[2] for r in kept], levels
        )
    problems = _agg_problems(f"{where} series", want_series, agg_of(stored, 2))
    need = buckets.needed_levels(want_series[10] - want_series[9])
    if levels < need:
        problems.append(f"{where}: keeps {levels} levels, its span needs {need}")
    got = {}
    for level in range(1, levels + 1):
        for row in bucket_rows(cur, p, run_id, key_id, level, -(2**62), 2**62):
            got[(level, int(row[0]))] = agg_of(row, 1)
    for k in sorted(set(want) | set(got)):
        if k not in got:
            problems.append(f"{where} level {k[0]} bucket {k[1]}: missing")
        elif k not in want:
            problems.append(f"{where} level {k[0]} bucket {k[1]}: holds no current point")
        else:
            problems += _agg_problems(f"{where} level {k[0]} bucket {k[1]}", want[k], got[k])
    return problems


def point_series(conn: Connection) -> list[tuple[int, int]]:
    """Every (run, key) that has points: the chunks' keysets, and the rows not converted yet
    found by skipping along the (run_id, key_id, step) index (two index seeks a series,
    however many points each holds)."""
    found: set[tuple[int, int]] = set()
    if inspect(conn).has_table("keysets"):  # a store from before 0006 has rows only
        found = chunk_read.chunked_series(_cursor(conn))
    run, key = points.c.run_id, points.c.key_id
    next_key = select(key).where(run == bindparam("r"), key > bindparam("k")).order_by(key).limit(1)
    next_run = select(run).where(run > bindparam("r")).order_by(run).limit(1)
    run_id = conn.execute(next_run, {"r": -(2**63)}).scalar()
    while run_id is not None:
        key_id = conn.execute(next_key, {"r": run_id, "k": -(2**63)}).scalar()
        while key_id is not None:
            found.add((int(run_id), int(key_id)))
            key_id = conn.execute(next_key, {"r": run_id, "k": key_id}).scalar()
        run_id = conn.execute(next_run, {"r": run_id}).scalar()
    return sorted(found)


def sample_series(
    conn: Connection,
    count: int,
    seed: int | None = None,
    present: list | None = None,
    points_budget: int = SAMPLE_POINTS,
) -> list[tuple[int, int]]:
    """The series `reslog check` compares with their points: every one whose points have no
    series row (a writer that bypassed rollups: always listed, never left to chance), and up to
    `count` others picked at random whose points fit in `points_budget` together (the first
    one whatever its size): reading points back costs ~2.5 s a million on a large store (a
    table lookup a point), and the check's time should not grow with the store. `present`:
    point_series(conn), when the caller has it."""
    sizes = {
        (int(r), int(k)): int(n)
        for r, k, n in conn.execute(select(series.c.run_id, series.c.key_id, series.c.n)).all()
    }
    if present is None:
        present = point_series(conn)
    missing = [s for s in present if s not in sizes]
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    chosen, total = [], 0
    for s in order:
        if len(chosen) == count:
            break
        if chosen and total + sizes[s] > points_budget:
            continue  # a smaller series may still fit
        chosen.append(s)
        total += sizes[s]
    return sorted(set(missing) | set(chosen))
