"""Keeping one run's rollups, series rows and takes in step with its points, in the transaction
that inserts them (docs/store.md, "Rollups").

`RollupWriter.insert(conn, rows)` inserts a flush's points and updates, in the same transaction,
every bucket they fall into at each kept level, and the series' summary row; `accept()` after
the commit makes that the writer's new in-memory state (a failed transaction leaves it as it
was, and the retried flush folds the same points again). `account()` does the same for points
already stored (the upgrade backfill and `reslog check --fix`).

The writer keeps, per key, the series aggregate, its tail (the newest point's step and wall)
and the newest bucket of each level, so an ordinary flush reads nothing back: a bucket past the
newest cannot exist yet, and the newest is in memory. Older buckets (points logged out of order)
and state after a resume in another process are read back by primary key.

A point with a lower step than the one before it, logged later, starts the series over (a run
resumed from an older checkpoint; schema.store.rollup.is_restart). Its take is recorded in
`takes`, every bucket past the restart step is deleted, and the buckets holding it are rebuilt
from what lies before it: level 1 from raw points (at most 15 steps of them), each level above
from its children (at most 4 rows). Restarts are rare; this path reads a few dozen rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, delete
from sqlalchemy.engine import Dialect

from schema.store import buckets
from schema.store.chunk_read import Page, Series
from schema.store.chunk_write import ChunkWriter
from schema.store.envelope import (
    SERIES_COLUMNS,
    agg_of,
    bucket_rows,
    raw_points,
)
from schema.store.rollup import (
    AGG_COLUMNS,
    STEP_HI,
    STEP_LO,
    VSUM,
    fold,
    fold_buckets,
    fold_group,
    fold_up,
    is_restart,
    merge,
    merge_all,
)
from schema.store.sql import BulkRows, placeholder, positional_insert, positional_upsert
from schema.store.tables import rollups, series, takes

ROLLUP_COLUMNS = ["run_id", "key_id", "level", "bucket", *AGG_COLUMNS]
IN_CHUNK = 400  # ids per "IN (...)" (SQLite's variable limit is 999 or more)
_NAN = float("nan")


@dataclass
class KeyState:
    """What the writer knows of one series: its aggregate (None: no point yet), levels kept,
    the newest point's (step, wall), and stored rows it holds in memory by (level, bucket)."""

    agg: tuple | None = None
    levels: int = 1
    tail: tuple[int, float] | None = None
    known: dict[tuple[int, int], tuple | None] = field(default_factory=dict)

    def copy(self) -> KeyState:
        return KeyState(self.agg, self.levels, self.tail, dict(self.known))

    def newest(self, level: int) -> int | None:
        """The bucket of `level` holding the series' last step (None: empty series)."""
        return None if self.agg is None else buckets.bucket_of(self.agg[STEP_HI], level)


@dataclass
class Pending:
    """One transaction's changes: rows to upsert, and the states to keep once it commits."""

    states: dict[int, KeyState] = field(default_factory=dict)
    rows: dict[tuple[int, int, int], tuple] = field(default_factory=dict)  # (key, level, bucket)
    series: set[int] = field(default_factory=set)  # keys whose series row changed


def _stored(agg: tuple) -> tuple:
    """An aggregate as stored: a NaN sum as NULL (SQLite would do it; PostgreSQL would not)."""
    vsum = agg[VSUM]
    return agg if vsum == vsum else (*agg[:VSUM], None, *agg[VSUM + 1 :])


class RollupWriter:
    """Rollups of one run; one instance per writer (a run is written by one process at a time)."""

    def __init__(
        self, dialect: Dialect, run_id: int, progress: Callable[[], None] | None = None
    ) -> None:
        """`progress`: called after each statement that writes rows (the writer's watchdog)."""
        self.run_id = int(run_id)
        self.p = placeholder(dialect)
        self.chunks = ChunkWriter(dialect, run_id, progress)
        self._rollups = BulkRows(
            dialect,
            positional_upsert(dialect, rollups, ROLLUP_COLUMNS),
            len(ROLLUP_COLUMNS),
            progress=progress,
            distinct=True,  # _write(): one row a (key, level, bucket) of a pending dict
        )
        self._series = BulkRows(
            dialect,
            positional_upsert(dialect, series, list(SERIES_COLUMNS)),
            len(SERIES_COLUMNS),
            progress=progress,
            distinct=True,  # one row a key of a pending set
        )
        self._takes_sql = positional_insert(
            dialect, takes, ["run_id", "key_id", "since_id", "step"]
        )
        self.states: dict[int, KeyState] = {}

    # -- entry points -----------------------------------------------------------------------------

    def insert(self, conn: Connection, rows: list[tuple], groups: list | None = None) -> Pending:
        """Insert points (run_id, key_id, step, wall, value) in arrival order and keep the
        rollups in step; inside the caller's transaction. Call accept() after the commit.

        `groups`, when the caller has them: the same points as (steps, walls, {key_id: values})
        of series logged together, each key in one group only; their steps and walls are
        shared, so bucket bounds are worked out once per group instead of once per key."""
        columns = self._columns(conn, rows, groups)
        chunked = groups
        if chunked is None:
            chunked = [(st, wa, {key: vs}) for key, (st, wa, vs) in columns.items()]
        ids = self.chunks.write(conn, chunked)
        return self._keep_written(conn, columns, groups, ids)

    def seal_all(self, conn: Connection, *, alone: bool = False) -> int:
        """Seal the run's head chunks in the caller's transaction (`alone`: one that inserts
        no points), so a finished run is all sealed chunks; accept() after it commits."""
        if alone:
            self.chunks.begin()
        return self.chunks.seal_all(conn)

    def account(self, conn: Connection, rows: list[tuple], ids: list[int]) -> Pending:
        """Keep the rollups of points already stored (with these ids), in id order."""
        columns = self._columns(conn, rows, None)
        restarts = self._restarts(columns)
        since = {}
        if restarts:
            index = self._global_index(rows, columns)
            for key, positions in restarts.items():
                for pos in positions:
                    since[(key, pos)] = ids[index[key][pos]]
        pending = Pending()
        self._keep(conn, pending, columns, None, restarts, since)
        return pending

    def account_groups(self, conn: Connection, groups: list, ids: dict) -> Pending:
        """As account(), for points already stored given as insert()'s groups (steps, walls,
        {key_id: values}, each key in one group, in id order) and their ids as ChunkWriter.write
        returns them ({key: (row ids, column)}): chunks copied as they are (resplot sync)."""
        return self._keep_written(conn, self._columns(conn, [], groups), groups, ids)

    def _keep_written(self, conn: Connection, columns, groups, ids: dict) -> Pending:
        """The rollups, series rows and takes of points written as chunks with these ids
        ({key: (row ids, column)}, as ChunkWriter.write returns them)."""
        pending = Pending()
        restarts = self._restarts(columns)
        if not restarts:
            self._keep(conn, pending, columns, groups, {}, {})
        else:
            # A take holds from the restarting point's own id: the points logged before it
            # have smaller ids, those after it larger ones.
            since = {
                (key, pos): ids[key][0][pos] + ids[key][1]
                for key, positions in restarts.items()
                for pos in positions
            }
            self._keep(conn, pending, columns, None, restarts, since)
        return pending

    def accept(self, pending: Pending | None = None) -> None:
        """The transaction of `pending` committed: its states are now the writer's."""
        self.chunks.accept()
        if pending is None:
            return
        for key, state in pending.states.items():
            # Keep only the newest bucket of each level in memory: enough for in-order points.
            state.known = {
                (level, b): agg
                for (level, b), agg in state.known.items()
                if b == state.newest(level)
            }
            self.states[key] = state

    def forget(self) -> None:
        """Drop the in-memory state (it is read back from the store when needed)."""
        self.states.clear()
        self.chunks.forget()

    # -- grouping and restarts ----------------------------------------------------------------

    def _columns(self, conn: Connection, rows: list[tuple], groups) -> dict[int, tuple]:
        """{key: (steps, walls, values)} in arrival order."""
        if groups is not None:
            columns = {k: (st, wa, vs) for st, wa, cols in groups for k, vs in cols.items()}
        else:
            per_key: dict[int, list[tuple]] = {}
            for row in rows:
                group = per_key.get(row[1])
                if group is None:
                    per_key[row[1]] = [row]
                else:
                    group.append(row)
            columns = {
                k: ([r[2] for r in kr], [r[3] for r in kr], [r[4] for r in kr])
                for k, kr in per_key.items()
            }
        missing = [k for k in columns if k not in self.states]
        if missing:
            self._load(conn, missing)
        return columns

    def _load(self, conn: Connection, keys: list[int]) -> None:
        """States of series this writer has not seen (a new one, or a resumed run's)."""
        cols = ", ".join(SERIES_COLUMNS)
        for i in range(0, len(keys), IN_CHUNK):
            chunk = keys[i : i + IN_CHUNK]
            marks = ", ".join([self.p] * len(chunk))
            found = conn.exec_driver_sql(
                f"SELECT {cols} FROM series WHERE run_id = {self.p} AND key_id IN ({marks})",
                (self.run_id, *chunk),
            ).all()
            for row in found:
                levels = row[SERIES_COLUMNS.index("levels")]
                tail = (row[-2], row[-1])
                self.states[int(row[1])] = KeyState(agg_of(row, 2), int(levels), tail)
        for key in keys:
            self.states.setdefault(key, KeyState())

    def _restarts(self, columns: dict[int, tuple]) -> dict[int, list[int]]:
        """{key: positions in its points where the series starts over}; empty nearly always."""
        out: dict[int, list[int]] = {}
        ascending: dict[int, bool] = {}  # by id() of a steps list shared by a group
        for key, (steps, walls, _values) in columns.items():
            tail = self.states[key].tail
            up = ascending.get(id(steps))
            if up is None:
                up = ascending[id(steps)] = steps == sorted(steps)
            if up and (tail is None or steps[0] >= tail[0]):
                continue  # no step goes down: no restart
            prev = tail
            found = []
            for pos, (step, wall) in enumerate(zip(steps, walls, strict=True)):
                if prev is not None and is_restart(prev[0], prev[1], step, wall):
                    found.append(pos)
                prev = (step, wall)
            if found:
                out[key] = found
        return out

    @staticmethod
    def _global_index(rows: list[tuple], columns: dict) -> dict[int, list[int]]:
        index: dict[int, list[int]] = {k: [] for k in columns}
        for i, row in enumerate(rows):
            index[row[1]].append(i)
        return index

    # -- folding ------------------------------------------------------------------------------

    def _keep(self, conn, pending: Pending, columns, groups, restarts, since) -> None:
        shift = buckets.shift(1)
        if groups is not None and not restarts:
            for steps, walls, cols in groups:
                for key, deltas in fold_group(steps, walls, cols, shift).items():
                    self._fold(conn, pending, key, deltas, (steps[-1], walls[-1]))
        else:
            for key, (steps, walls, values) in columns.items():
                bounds = [0, *restarts.get(key, []), len(steps)]
                for i in range(len(bounds) - 1):
                    a, b = bounds[i], bounds[i + 1]
                    if i > 0:
                        self._restart(conn, pending, key, steps[a], since[(key, a)])
                    if b > a:
                        deltas = fold_buckets(steps[a:b], walls[a:b], values[a:b], shift)
                        self._fold(conn, pending, key, deltas, (steps[b - 1], walls[b - 1]))
        self._write(conn, pending)
        for key in list(pending.states):
            self._grow_levels(conn, pending, key)

    def _state(self, pending: Pending, key: int) -> KeyState:
        state = pending.states.get(key)
        if state is None:
            state = pending.states[key] = self.states[key].copy()
        return state

    def _get(self, conn, pending: Pending, state: KeyState, key: int, level: int, b: int):
        """The stored aggregate of a bucket, as this transaction has it (None: no such row)."""
        row = pending.rows.get((key, level, b))
        if row is not None:
            return row
        if (level, b) in state.known:
            return state.known[(level, b)]
        newest = state.newest(level)
        if newest is None or b > newest:
            return None  # past the last step: nothing stored there
        found = bucket_rows(_cursor(conn), self.p, self.run_id, key, level, b, b)
        agg = agg_of(found[0], 1) if found else None
        state.known[(level, b)] = agg
        return agg

    def _fold(self, conn, pending: Pending, key: int, deltas: dict, tail: tuple) -> None:
        """Fold level-1 aggregates of new points (`tail`: the newest one's step and wall) into
        the series' buckets at every kept level and into its series row."""
        state = self._state(pending, key)
        rows = pending.rows
        for level in range(1, state.levels + 1):
            if level > 1:
                deltas = fold_up(deltas, buckets.LEVEL_SHIFT)
            newest = state.newest(level)
            for b, delta in deltas.items():
                # Past the newest bucket nothing is stored yet, nor pending (state.agg covers
                # every row this transaction folded): most buckets of a flush are new.
                if newest is not None and b <= newest:
                    old = self._get(conn, pending, state, key, level, b)
                    if old is not None:
                        delta = merge(old, delta)
                rows[(key, level, b)] = delta
        segment = merge_all(deltas.values())  # the top level's: the fewest to combine
        state.agg = segment if state.agg is None else merge(state.agg, segment)
        state.tail = tail
        for level in range(1, state.levels + 1):
            b = state.newest(level)
            if (key, level, b) in pending.rows:
                state.known[(level, b)] = pending.rows[(key, level, b)]
        pending.series.add(key)

    def _write(self, conn, pending: Pending, only: int | None = None) -> None:
        """Upsert the pending rows and series rows (of one key with `only`)."""
        rows = pending.rows
        chosen = (
            list(rows.items()) if only is None else [r for r in rows.items() if r[0][0] == only]
        )
        if chosen:
            rid = self.run_id
            # (run, key, level, bucket) + aggregate; a NaN sum (rare) stored as NULL.
            self._rollups.run(
                conn,
                [
                    (rid, *k) + (agg if agg[VSUM] == agg[VSUM] else _stored(agg))
                    for k, agg in chosen
                ],
            )
            for k, _agg in chosen:
                del rows[k]
        keys_s = pending.series if only is None else pending.series & {only}
        rows = []
        for k in keys_s:
            state = pending.states[k]
            if state.agg is None:
                conn.execute(
                    delete(series).where(series.c.run_id == self.run_id, series.c.key_id == k)
                )
                continue
            rows.append((self.run_id, k, *_stored(state.agg), state.levels, *state.tail))
        if rows:
            self._series.run(conn, rows)
        pending.series -= set(keys_s)

    def _restart(self, conn, pending: Pending, key: int, step: int, since_id: int) -> None:
        """The series starts over at `step` (from point id `since_id`): record the take and
        rebuild the buckets holding `step` from what lies before it; drop those past it."""
        self._write(conn, pending, only=key)  # the rebuild reads the stored rows
        state = self._state(pending, key)
        rid, p = self.run_id, self.p
        conn.exec_driver_sql(self._takes_sql, [(rid, key, since_id, step)])
        for level in range(1, state.levels + 1):
            conn.exec_driver_sql(
                f"DELETE FROM rollups WHERE run_id = {p} AND key_id = {p} AND level = {p}"
                f" AND bucket > {p}",
                (rid, key, level, buckets.bucket_of(step, level)),
            )
        cur = _cursor(conn)
        child = None
        for level in range(1, state.levels + 1):
            b = buckets.bucket_of(step, level)
            if level == 1:
                found = raw_points(
                    Series(cur, p, rid, key, True),
                    buckets.bucket_start(b, 1),
                    step,
                    Page(before_id=since_id),
                )
                parts = (
                    [fold([r[1] for r in found], [r[2] for r in found], [r[3] for r in found])]
                    if found
                    else []
                )
            else:
                below = buckets.bucket_of(step, level - 1)
                rows = bucket_rows(cur, p, rid, key, level - 1, b << buckets.LEVEL_SHIFT, below - 1)
                parts = [agg_of(r, 1) for r in rows] + ([child] if child is not None else [])
            child = merge_all(parts) if parts else None
            if child is None:
                conn.exec_driver_sql(
                    f"DELETE FROM rollups WHERE run_id = {p} AND key_id = {p} AND level = {p}"
                    f" AND bucket = {p}",
                    (rid, key, level, b),
                )
            else:
                self._rollups.run(conn, [(rid, key, level, b, *_stored(child))])
        top = bucket_rows(cur, p, rid, key, state.levels, -(2**62), 2**62)
        state.agg = merge_all(agg_of(r, 1) for r in top) if top else None
        state.known = {}
        pending.series.add(key)

    def _grow_levels(self, conn, pending: Pending, key: int) -> None:
        """Add the levels a series needs now that it spans more steps (from the level below,
        all of whose rows are stored by now: at most MIN_BUCKETS * 4 of them)."""
        state = pending.states[key]
        if state.agg is None:
            return
        need = buckets.needed_levels(state.agg[STEP_HI] - state.agg[STEP_LO])
        if need <= state.levels:
            return
        cur = _cursor(conn)
        rid = self.run_id
        for level in range(state.levels + 1, need + 1):
            rows = bucket_rows(cur, self.p, rid, key, level - 1, -(2**62), 2**62)
            children = {int(r[0]): agg_of(r, 1) for r in rows}
            parents = fold_up(children, buckets.LEVEL_SHIFT)
            self._rollups.run(
                conn, [(rid, key, level, b, *_stored(agg)) for b, agg in sorted(parents.items())]
            )
            newest = state.newest(level)
            if newest in parents:
                state.known[(level, newest)] = parents[newest]
        state.levels = need
        pending.series.add(key)
        self._write(conn, pending, only=key)


def _cursor(conn: Connection):
    """The DBAPI cursor of the connection's current transaction."""
    return conn.connection.dbapi_connection.cursor()


def brute_force(steps: list[int], walls: list[float], values: list, levels: int):
    """(series aggregate, {(level, bucket): aggregate}) of a series' current points computed
    from scratch (the reference `reslog check` and the tests compare stored rollups with)."""
    if not steps:
        return None, {}
    out = {}
    for level in range(1, levels + 1):
        for b, agg in fold_buckets(steps, walls, values, buckets.shift(level)).items():
            out[(level, b)] = agg
    return fold(steps, walls, values), out
