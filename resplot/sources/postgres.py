"""A PostgreSQL store (many hosts logging into one server), read through schema.read.

PostgreSQL hands out ids from a sequence at insert time, not at commit: a writer can commit id
100 after another writer's id 105 is already visible. A plain "id > cursor" would skip 100
forever, so each poll re-reads an overlap window of `overlap` ids below the cursor and drops the
ids it has already applied. A row is only missed if more than `overlap` newer ids were committed
while its transaction stayed open (reslog's writer commits one flush at a time, far below that).
"""

from __future__ import annotations

import time

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.exc import DBAPIError, OperationalError

from resplot.cache import SeriesCache
from resplot.model import Event, RunInfo, RunRef
from resplot.sources.base import PollResult, Progress, Source, group_rows
from schema.errors import StoreError
from schema.read import fetch_points, key_names, list_runs
from schema.store import open_store
from schema.tables import events


def public_url(url: str) -> str:
    """The URL without its password: how runs from this server are labelled."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


class _Window:
    """An id cursor with an overlap window and the ids already applied inside it."""

    def __init__(self, overlap: int) -> None:
        self.overlap = overlap
        self.high = 0  # largest id applied
        self.seen: set[int] = set()  # applied ids in (high - overlap, high]

    @property
    def low(self) -> int:
        return max(0, self.high - self.overlap)

    def fresh(self, ids: np.ndarray) -> np.ndarray:
        """Mask of ids not applied yet."""
        if not self.seen:
            return np.ones(len(ids), dtype=bool)
        return ~np.isin(ids, np.fromiter(self.seen, dtype=np.int64, count=len(self.seen)))

    def advance(self, ids: np.ndarray) -> None:
        if len(ids):
            self.high = max(self.high, int(ids.max()))
            self.seen.update(int(i) for i in ids)
        low = self.low
        self.seen = {i for i in self.seen if i > low}


class PostgresSource(Source):
    limit = 200_000

    def __init__(self, url: str, label: str | None = None, *, overlap: int = 10_000) -> None:
        self.url = url
        super().__init__(url, label or public_url(url))
        self.store = public_url(url)
        self.overlap = overlap
        self.limit = max(self.limit, 4 * overlap)  # a batch must reach past the re-read window
        self.engine: Engine | None = None
        self.points = _Window(overlap)
        self.events = _Window(overlap)
        self.runs: dict[int, RunInfo] = {}
        self.keys: dict[int, str] = {}
        self._rtt_ms: float | None = None

    @property
    def rtt_ms(self) -> float | None:
        return self._rtt_ms

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.dispose()

    def poll(self, cache: SeriesCache, progress: Progress | None = None) -> PollResult:
        started = time.perf_counter()
        if self.engine is None:
            self.engine = open_store(self.url, readonly=True)
        try:
            result = self._poll(self.engine, cache, progress)
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

        # One snapshot for runs, events and points, so a point never names a run read later.
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            runs = {
                rid: info
                for rid, info in list_runs(conn, source=self.label, store=self.store)
                if info is not None
            }
            changed = [info for rid, info in runs.items() if self.runs.get(rid) != info]
            self.runs = runs
            if changed:
                cache.set_runs(changed)
                emit(PollResult(runs_changed=True))
            if not runs:
                return total
            emit(self._events(conn, cache))
            while True:
                batch = fetch_points(conn, list(runs), after=self.points.low, limit=self.limit)
                ids = np.asarray(batch.ids, dtype=np.int64)
                fresh = self.points.fresh(ids)
                step = self._apply_points(conn, cache, batch, fresh)
                self.points.advance(ids)
                emit(step)
                # A full batch of only-seen ids would loop forever: step past it.
                if len(batch) < self.limit:
                    break
                if not fresh.any():
                    self.points.high = int(ids.max())
        return total

    def _apply_points(self, conn, cache: SeriesCache, batch, fresh: np.ndarray) -> PollResult:
        result = PollResult()
        if not fresh.any():
            return result
        run_ids = np.asarray(batch.run_ids, dtype=np.int64)[fresh]
        key_ids = np.asarray(batch.key_ids, dtype=np.int64)[fresh]
        if any(int(k) not in self.keys for k in np.unique(key_ids)):
            self.keys = key_names(conn)
        steps = np.asarray(batch.steps, dtype=np.int64)[fresh]
        walls = np.asarray(batch.walls, dtype=np.float64)[fresh]
        values = np.asarray(batch.values, dtype=np.float64)[fresh]
        for run_id, key_id, idx in group_rows(run_ids, key_ids):
            ref = self.runs[run_id].ref
            cache.add_points(ref, self.keys[key_id], steps[idx], walls[idx], values[idx])
            result.refs.add(ref)
        result.rows = int(fresh.sum())
        return result

    def _events(self, conn, cache: SeriesCache) -> PollResult:
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
        if new:
            cache.add_events(new)
        return PollResult(events=new)

    def _ref(self, run_id: int) -> RunRef:
        return self.runs[run_id].ref
