"""A PostgreSQL store (many hosts logging into one server), read through SQLAlchemy with the
same schema.store.envelope reads the agent does for SQLite: series rows on the first poll, then live
points and the tiles the charts want, each poll in one REPEATABLE READ snapshot.

PostgreSQL hands out ids from a sequence at insert time, not at commit: a writer can commit
row 100 after another writer's row 105 is already visible. A plain "id > cursor" would skip 100
forever, so each poll re-reads an overlap window of `overlap` rows below the cursor and drops
the points it has already applied. A point's id is its row's sequence value times
PG_ROW_STRIDE plus its column (schema/store/chunk_write.py), so the window is `overlap` strides of
ids. A row is only missed if more than `overlap` newer rows were committed while its
transaction stayed open (reslog's writer commits one flush at a time, far below that). Points
stored before chunks (legacy rows, schema/store/chunk_read.py) are never written late: the window
stops at the newest of them.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError, OperationalError

from resplot.data.cache import SeriesCache, Summary
from resplot.data.model import Event, RunInfo, RunRef
from resplot.data.tiles import FLOATS, RAW_COLUMNS, Tile
from resplot.sources.agent import group_rows, summaries_from, tile_ranges
from resplot.sources.apply import Points, Reply, apply_reply
from resplot.sources.base import PollResult, Progress, Source
from resplot.sources.client import table_columns
from resplot.sources.spec import PostgresSpec
from schema.store import buckets, chunk_read, envelope, folding_numpy, points_by_id
from schema.store.chunk_write import PG_ROW_STRIDE
from schema.store.connect import open_store
from schema.store.errors import StoreError
from schema.store.gc_pause import gc_paused
from schema.store.read import fetch_points, key_names, list_runs
from schema.store.reader import StoreReader
from schema.store.rollup import AGG_COLUMNS
from schema.store.tables import events


class _Window:
    """An id cursor with an overlap window and the ids already applied inside it."""

    def __init__(self, overlap: int, stride: int = 1) -> None:
        self.overlap = overlap  # in strides of ids: rows, for points
        self.stride = stride
        self.floor = 0  # no id at or below it commits late
        self.high = 0  # largest id applied
        self.seen = np.empty(0, dtype=np.int64)  # applied ids in (low, high]

    @property
    def low(self) -> int:
        return max(0, self.floor, (self.high // self.stride - self.overlap) * self.stride)

    def fresh(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ids not applied yet."""
        if not len(self.seen):
            return np.ones(len(ids), dtype=bool)
        return ~np.isin(ids, self.seen)

    def advance(self, ids: np.ndarray) -> None:
        if len(ids):
            self.high = max(self.high, int(ids.max()))
            self.seen = np.union1d(self.seen, ids)
        self.seen = self.seen[self.seen > self.low]


class PostgresSource(Source):
    limit = 200_000

    def __init__(
        self, spec: PostgresSpec, label: str | None = None, *, overlap: int = 10_000
    ) -> None:
        self.url = spec.url
        super().__init__(spec, label or spec.label)
        self.store = spec.label
        self.overlap = overlap
        self.engine: Engine | None = None
        self.points = _Window(overlap, PG_ROW_STRIDE)
        self.events = _Window(overlap)
        self.runs: dict[int, RunInfo] = {}
        self.keys: dict[int, str] = {}
        self.started = False  # the live cursor is placed and every series row was read
        self.refetch: set[tuple[int, int]] = set()  # series that restarted: read their rows
        self.epoch = 0
        self._lock = threading.RLock()
        self._rtt_ms: float | None = None

    @property
    def rtt_ms(self) -> float | None:
        return self._rtt_ms

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.dispose()

    def _engine(self) -> Engine:
        if self.engine is None:
            self.engine = open_store(self.url, readonly=True)
        return self.engine

    def reader(self, ref: RunRef):
        run_id = next((i for i, info in self.runs.items() if info.ref.uid == ref.uid), None)
        if run_id is None:
            raise StoreError(f"{self.label}: no run {ref.uid[:8]} here any more")
        return _PostgresRunReader(StoreReader(self._engine(), source=self.label), run_id)

    def poll(self, cache: SeriesCache, progress: Progress | None = None) -> PollResult:
        started = time.perf_counter()
        with self._lock, cache.fetching(self.label):
            try:
                result = self._poll(self._engine(), cache, progress)
            except (OperationalError, DBAPIError) as exc:
                self.close()
                raise StoreError(f"{self.label}: {exc.orig}") from None
        self._rtt_ms = (time.perf_counter() - started) * 1000.0
        return result

    def _poll(self, engine: Engine, cache: SeriesCache, progress: Progress | None) -> PollResult:
        total = PollResult()

        def emit(step: PollResult) -> None:
            total.merge(step)
            if progress is not None:
                progress(step)

        # One snapshot for runs, events, series rows, tiles and points, so a point never names
        # a run read later and a tile holds exactly the points visible with this poll's batch.
        # Fine tiles fold here, in resplot's own process, with numpy: a page's budget of them.
        cache.set_fold(self.label, "numpy")
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            runs = dict(list_runs(conn, source=self.label, store=self.store))
            changed = [info for rid, info in runs.items() if self.runs.get(rid) != info]
            self.runs = runs
            if not runs:
                return total
            self.epoch += 1
            cur = conn.connection.dbapi_connection.cursor()
            reply = Reply(self.epoch, changed, self._events(conn))
            if not self.started:
                self._start_at_the_end(conn, cur)
                reply.summaries = self._series(conn, cur, None)
                self.started = True
            elif self.refetch:
                pairs = sorted(self.refetch)
                reply.summaries = self._series(conn, cur, pairs)
                self.refetch -= set(pairs)
            # Someone watching the poll's progress (the window) gets the stand-ins first; a
            # headless read (a snapshot) takes everything in one go.
            reply.tiles = self._tiles(conn, cur, cache, coarse_first=progress is not None)
            emit(self._apply(cache, reply))
            after = self.points.low  # the window, then page on through this snapshot
            while True:
                batch = fetch_points(conn, list(runs), after=after, limit=self.limit)
                ids = np.asarray(batch.ids, dtype=np.int64)
                fresh = self.points.fresh(ids)
                step = self._apply(
                    cache, Reply(self.epoch, points=self._points(conn, batch, fresh))
                )
                self.points.advance(ids)
                emit(step)
                if len(batch) < self.limit:
                    break
                after = int(ids.max())
        return total

    def _apply(self, cache: SeriesCache, reply: Reply) -> PollResult:
        result, restarted = apply_reply(cache, reply)
        self.refetch |= restarted  # the series restarted: read its row again
        return result

    def _start_at_the_end(self, conn, cur) -> None:
        """The live cursor at the newest id, every id of the overlap window below it counted as
        applied (the series rows read in this snapshot hold them)."""
        self.points.floor = points_by_id.legacy_max_id(cur)
        self.points.high = points_by_id.max_point_id(cur)
        inside = points_by_id.points_after(cur, "%s", None, self.points.low, upto=self.points.high)
        self.points.advance(np.asarray([r[0] for r in inside], dtype=np.int64))

    def _names(self, conn, key_ids) -> dict[int, str]:
        if any(int(k) not in self.keys for k in key_ids):
            self.keys = key_names(conn)
        return self.keys

    def _series(self, conn, cur, pairs) -> dict[RunRef, dict[str, Summary]]:
        if pairs is None:
            rows = envelope.series_rows(cur, "%s")
        else:
            found = (envelope.series_row(cur, "%s", run, key) for run, key in pairs)
            rows = [r for r in found if r is not None]
        columns = {
            name: np.asarray([r[i] for r in rows]) for i, name in enumerate(envelope.SERIES_COLUMNS)
        }
        if not rows:
            columns = {name: np.empty(0) for name in envelope.SERIES_COLUMNS}
        names = self._names(conn, [r[1] for r in rows])
        out: dict[RunRef, dict[str, Summary]] = {}
        for (run_id, key_id), summary in summaries_from(columns).items():
            if run_id in self.runs:
                out.setdefault(self._ref(run_id), {})[names[key_id]] = summary
        return out

    def _tiles(
        self, conn, cur, cache: SeriesCache, *, coarse_first: bool
    ) -> list[tuple[RunRef, str, Tile]]:
        wanted = cache.take_wanted(self.label, self.store, coarse_first=coarse_first)
        if not wanted:
            return []
        by_uid = {info.ref.uid: rid for rid, info in self.runs.items()}
        self.keys = key_names(conn)
        by_name = {name: kid for kid, name in self.keys.items()}
        takes = envelope.series_with_takes(cur)
        out = []
        with gc_paused():  # the fine tiles' raw rows (schema/store/gc_pause.py)
            for uid, key, level, first, count in tile_ranges(wanted):
                run_id, key_id = by_uid.get(uid), by_name.get(key)
                if run_id is None or key_id is None:
                    continue
                if buckets.is_fine(level):
                    has = (run_id, key_id) in takes
                    for index, cols in fine_tiles(cur, run_id, key_id, level, first, count, has):
                        out.append((self._ref(run_id), key, Tile(level, index, cols, self.epoch)))
                    continue
                series = chunk_read.Series(cur, "%s", run_id, key_id, (run_id, key_id) in takes)
                for index, rows in envelope.tile_rows(series, level, first, count):
                    cols = tile_columns(rows, RAW_COLUMNS if level == 0 else AGG_COLUMNS)
                    out.append((self._ref(run_id), key, Tile(level, index, cols, self.epoch)))
        return out

    def _points(self, conn, batch, fresh: np.ndarray) -> list[Points]:
        if not fresh.any():
            return []
        run_ids = np.asarray(batch.run_ids, dtype=np.int64)[fresh]
        key_ids = np.asarray(batch.key_ids, dtype=np.int64)[fresh]
        names = self._names(conn, np.unique(key_ids).tolist())
        steps = np.asarray(batch.steps, dtype=np.int64)[fresh]
        walls = np.asarray(batch.walls, dtype=np.float64)[fresh]
        values = np.asarray(batch.values, dtype=np.float64)[fresh]
        return [
            Points(
                (run_id, key_id),
                self._ref(run_id),
                names[key_id],
                steps[idx],
                walls[idx],
                values[idx],
            )
            for run_id, key_id, idx in group_rows(run_ids, key_ids)
        ]

    def _events(self, conn) -> list[Event]:
        query = (
            select(events)
            .where(events.c.id > self.events.low, events.c.run_id.in_(list(self.runs)))
            .order_by(events.c.id)
        )
        rows = conn.execute(query).all()
        ids = np.asarray([r.id for r in rows], dtype=np.int64)
        fresh = self.events.fresh(ids)
        new = [
            Event(self._ref(r.run_id), r.id, r.wall, r.step, r.kind, r.level, r.title, r.body)
            for r, ok in zip(rows, fresh, strict=True)
            if ok
        ]
        self.events.advance(ids)
        return new

    def _ref(self, run_id: int) -> RunRef:
        return self.runs[run_id].ref


class _PostgresRunReader:
    """scan(key, start, stop) over one run's raw points (exports)."""

    def __init__(self, reader: StoreReader, run_id: int) -> None:
        self.reader, self.run_id = reader, run_id

    def scan(self, key: str, start: int | None = None, stop: int | None = None):
        ids = {name: kid for kid, name in self.reader.key_names().items()}
        if key in ids:
            yield from self.reader.scan(self.run_id, ids[key], start, stop)


def fine_tiles(
    cur, run_id: int, key_id: int, level: int, first: int, count: int, has_takes: bool
) -> list[tuple[int, dict[str, np.ndarray]]]:
    """(index, columns) of `count` fine tiles from `first`, every one listed (empty ones too):
    the range's points read as decoded chunk columns and folded with numpy in one go
    (schema/store/folding_numpy.py, ~10x quicker a point than rows through the builtins), the same
    buckets the agent sends."""
    sh, per = buckets.shift(level), buckets.TILE_BUCKETS
    start, stop = (first * per) << sh, ((first + count) * per) << sh
    series = chunk_read.Series(cur, "%s", run_id, key_id, has_takes)
    p = chunk_read.series_points(series, start, stop)
    cols = table_columns(folding_numpy.fold_columns(p.steps, p.walls, p.values, start, 1 << sh))
    edges = np.searchsorted(cols["step_lo"] >> sh, (first + np.arange(count + 1)) * per)
    return [
        (first + k, {name: a[edges[k] : edges[k + 1]].copy() for name, a in cols.items()})
        for k in range(count)
    ]


def tile_columns(rows: list, names) -> dict[str, np.ndarray]:
    """Stored rows (`names` order: raw step, wall, value, or AGG_COLUMNS) as tile columns,
    NULLs as the agent's client decodes them: NaN in a float column, 0 in an int one."""
    out = {}
    for i, name in enumerate(names):
        if name in FLOATS:
            out[name] = np.asarray([np.nan if r[i] is None else r[i] for r in rows], np.float64)
        else:
            out[name] = np.asarray([0 if r[i] is None else r[i] for r in rows], np.int64)
    return out
