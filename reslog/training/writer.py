"""The background writer: drains the run's in-memory buffer into the store, one transaction a flush.

The training thread only calls `Writer.put` (an append to a deque, atomic, and counters it alone
writes); `put` holds the back-pressure policy (`on_full`: drop and say so once, or block). This
thread wakes on an Event, every `interval` seconds (every 0.1 s until the first points are in, so a
run killed in its first second keeps them) or when the buffer passes `wake_points`, turns records
into row tuples (reslog/training/rows.py) and hands them to the store
(schema/store/rollup_writer.py), at most `chunk_points` points a transaction: a transaction that
took longer than COMMIT_TARGET_S sets the next one's size to what the store took in that time, so a
backlog (after an outage, or a server slower than the loops feeding it) lands piece by piece, each
piece committed with its rollups, and no transaction holds a lock or a server's attention for long.
Errors stay here: the data is kept (bounded), a warning is given once, and the flush is retried with
backoff until the store takes it. While it backs off only finish() cuts a wait short (a training
loop's wakes would make it retry as fast as it logs), and each failure halves the transaction's
size, down to MIN_CHUNK_POINTS, so a backlog fits into the little space a nearly full disk has; each
quick commit doubles it back. Each tick also checks that the store file is still the one
opened (reslog/training/store_file.py) and whether the run stalled (reslog/training/stall.py).

The watchdog on a server, the stall check and the store-file check live in
reslog/training/writer_watch.py.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3
import threading
import time
import warnings
from collections import deque
from itertools import repeat
from typing import Any

from sqlalchemy import Connection, Engine

from reslog.redact import redact_text
from reslog.text import duration
from reslog.training.rows import chunk_end, point_rows
from reslog.training.server_health import is_lock_error
from reslog.training.stall import StallWatch
from reslog.training.store_file import StoreFile
from reslog.training.summary import Summary, summary_json
from reslog.training.values import to_floats
from reslog.training.writer_watch import check_file, watch_stall, watch_writes
from schema.store.gc_pause import gc_paused
from schema.store.rollup_writer import Pending, RollupWriter
from schema.store.sql import positional_insert
from schema.store.status import FINISHED
from schema.store.tables import events, runs
from schema.store.writes import resolve_keys

log = logging.getLogger("reslog")

MAX_BACKOFF_S = 30.0
# "database is locked" is normal contention between processes sharing a file; only a lock that
# outlasts this many seconds of retries with no other writer committing meanwhile (a process
# holding a transaction open, not a queue of writers taking turns) is worth a warning.
LOCK_WARN_AFTER_S = 30.0
LOCK_RETRY_S = 0.1  # a locked flush tries again within this (random, so writers spread out)
CHUNK_POINTS = 100_000  # points per transaction: a backlog lands in pieces the store can take
# A transaction that takes longer than this makes the next ones smaller (points the store took
# per second × this): short transactions keep progress visible and locks short.
COMMIT_TARGET_S = 0.5
# The smallest piece a failing store is offered: ~100 KB of rows and rollups on SQLite.
MIN_CHUNK_POINTS = 2_000
FIRST_FLUSH_S = 0.1
ON_FULL = ("drop", "block")
# An outage at least this long is recorded as an event once writing works again (`reslog watch`).
OUTAGE_EVENT_S = 10.0


class DeviceRecord(tuple):
    """A buffered (step, wall, metrics) record holding device tensors, converted at flush."""

    __slots__ = ()


class SideRecord(tuple):
    """A (step, wall, metrics) record from the system sampler, not from the training thread."""

    __slots__ = ()


class Writer:
    def __init__(
        self,
        engine: Engine,
        run_id: int,
        summary: Summary,
        *,
        interval: float = 1.0,
        max_points: int = 2_000_000,
        wake_points: int = 100_000,
        label: str = "",
        known: set[str] | None = None,
        on_full: str = "drop",
        store_file: StoreFile | None = None,
        uid: str = "",
        stall_after: float | None = None,
        owner: threading.Thread | None = None,
        write_timeout: float | None = None,
    ) -> None:
        if on_full not in ON_FULL:
            raise ValueError(f"reslog: on_full must be one of {ON_FULL}, got {on_full!r}")
        self.engine = engine
        self.run_id = run_id
        self.summary = summary
        self.known: set[str] = set() if known is None else known  # keys validated by the run
        self.interval = float(interval)
        self.max_points = int(max_points)
        self.wake_points = int(wake_points)
        self.label = label or engine.url.render_as_string()
        self.is_sqlite = engine.dialect.name == "sqlite"
        self.buffer: deque = deque()
        self.events: deque = deque()
        # Each counter has one writing thread: logged/dropped the training thread, side_* the
        # system sampler's thread, committed this one. Pending = logged + side_logged - committed.
        self.logged = 0
        self.dropped = 0
        self.side_logged = 0
        self.side_dropped = 0
        self.committed = 0
        self.drops_recorded = 0
        self.flushes = 0
        self.failures = 0  # flushes that failed (each one a connection or write attempt)
        self.chunk_points = CHUNK_POINTS  # halved by each failure, doubled by each commit
        self.on_full = on_full
        self.wake = threading.Event()
        self.closing = threading.Event()  # close(): the one thing that cuts a backoff short
        self.status_only = threading.Event()  # close()'s deadline is near: write the end alone
        self.room = threading.Event()  # set after each commit: a blocked put() looks again
        self._warned_drop = False
        self.file = store_file
        self.uid = uid
        self.stall = StallWatch(stall_after)
        self.owner = owner
        self._stall_written: float | None = None
        self._last_side: dict[str, Any] = {}
        # A server that stops answering mid-write (no FIN, no RST) would block this thread
        # forever: the watchdog breaks the connection after `write_timeout` s (servers only).
        self.write_timeout = None if self.is_sqlite else write_timeout
        self._busy_since: float | None = None
        self._progress_at = 0.0  # monotonic: a statement that wrote rows ended, or a flush began
        self._backend_pid: int | None = None  # the server process of our connection
        self.commits = 0  # transactions committed
        self.lock_waits = 0  # flushes that found the store locked by another writer past the wait
        self._locked = False  # the last failure was a lock held by another writer
        self._store_version: int | None = None  # the SQLite file's data_version, last looked at
        self._others_at = -LOCK_WARN_AFTER_S  # monotonic: another connection was seen committing
        self._others_said = False
        self.slow_checks = 0  # watchdog checks that found the server working on a slow write
        self._watchdog = threading.Thread(
            target=watch_writes, args=(self,), name="reslog-watchdog", daemon=True
        )
        self._held: list[tuple[int, float, dict[str, Any]]] = []
        self._held_events: list[tuple] = []
        self._held_points = 0
        self._ids: dict[str, int] = {}
        self._summary_written = summary.version - 1  # write it (and the heartbeat) once at start
        self.config: Any = None  # reslog.training.config.Config, set by init; written when changed
        self._config_written = 0
        self._conn: Connection | None = None
        self._final: tuple[str, float] | None = None
        self._final_written = threading.Event()
        self._status_written = False
        self._failing_since: float | None = None
        self._warned: set[str] = set()
        self.last_error: str | None = None
        # Points go in through the rollup writer, which keeps the run's rollups in step with
        # them in the same transaction (docs/store.md, "Rollups").
        self.rollups = RollupWriter(engine.dialect, run_id, progress=self._progressed)
        self._events_sql = positional_insert(
            engine.dialect, events, ["run_id", "wall", "step", "kind", "level", "title", "body"]
        )
        self._thread = threading.Thread(target=self._loop, name="reslog-writer", daemon=True)

    # -- called from other threads ------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if self.write_timeout:
            self._watchdog.start()

    def pending_points(self) -> int:
        return self.logged + self.side_logged - self.committed

    def put(self, record: tuple, n: int) -> None:
        """The training thread's append of a record of `n` points, under the on_full policy."""
        if self.logged + self.side_logged - self.committed + n > self.max_points and (
            self.logged + self.side_logged > self.committed  # an empty buffer takes any record
        ):
            if self.on_full == "drop":
                self._drop(n)
                return
            self._wait_for_room(n)
        self.buffer.append(record)
        self.logged += n
        if self.logged - self.committed > self.wake_points and not self.wake.is_set():
            self.wake.set()

    def put_side(self, record: tuple, n: int) -> None:
        """The system sampler's append: never blocks; dropped when the buffer is full."""
        if self.logged + self.side_logged - self.committed + n > self.max_points:
            self.side_dropped += n
            return
        self.buffer.append(SideRecord(record))
        self.side_logged += n

    def _drop(self, n: int) -> None:
        self.dropped += n
        if not self._warned_drop:
            self._warned_drop = True
            why = self.last_error or "none, the store is slower than the loop"
            warnings.warn(
                f"reslog: the in-memory buffer is full ({self.max_points} points waiting for "
                f"{self.label}; last error: {why}); dropping points, {n} so far. Raise "
                "init(max_buffer_points=...) or use init(on_full='block') to wait instead; the "
                "total is reported at finish() and stored as a 'drop' event",
                RuntimeWarning,
                stacklevel=4,
            )

    def _wait_for_room(self, n: int) -> None:
        while (
            self.logged + self.side_logged - self.committed + n > self.max_points
            and self.logged + self.side_logged > self.committed
            and self._final is None
            and self._thread.is_alive()
        ):
            self.room.clear()
            self.wake.set()
            self.room.wait(0.5)

    def close(self, status: str, ended_at: float, timeout: float) -> bool:
        """Final flush with the run's end status; True when it reached the store in time.

        When the store has not taken everything near the deadline (a full disk, a server
        down), the end status goes in alone, with an event counting what was still waiting,
        so that a run whose process ends is not read as crashed; the full flush goes on being
        tried while the process lives."""
        self._final = (status, ended_at)
        self.closing.set()
        self.wake.set()
        deadline = time.monotonic() + timeout
        margin = min(2.0, timeout / 4)  # for the end status alone
        if self._thread.is_alive():
            self._thread.join(max(0.0, timeout - margin))
            if not self._final_written.is_set() and self._thread.is_alive():
                self.status_only.set()
                self._thread.join(max(0.0, deadline - time.monotonic()))
        elif not self._final_written.is_set():
            self._run_final(deadline - margin)
            if not self._final_written.is_set():
                self._write_status_only()
        return self._final_written.is_set()

    def abandon(self) -> None:
        """After fork: the child owns a copy of this object but no writer thread."""
        self._final = (FINISHED, 0.0)
        self._final_written.set()
        self.closing.set()

    # -- the writer thread ----------------------------------------------------------------------

    def _loop(self) -> None:
        first = min(FIRST_FLUSH_S, self.interval)
        delay, last = first, time.monotonic()
        while self._final is None:
            if self._failing_since is None:
                self.wake.wait(delay)
            else:  # backing off: a put() past wake_points must not start the next try early
                self.closing.wait(delay)
            self.wake.clear()
            if self._final is not None:
                break
            watch_stall(self, time.time())
            if not self.committed and not self.buffer and time.monotonic() - last < self.interval:
                continue  # quick ticks only until the first points are in
            if self._flush():
                delay, last = (self.interval if self.committed else first), time.monotonic()
            elif self._locked:
                # Another process is writing: queue again at once (the busy timeout is the
                # wait), a little apart from the others. Backing off exponentially here lost
                # the turn for up to 30 s under 16 writers, and warned "database is locked".
                delay = random.uniform(0.0, LOCK_RETRY_S)
            else:
                delay = self._backoff(delay)
        self._run_final(None)

    def _run_final(self, deadline: float | None) -> None:
        delay = min(0.05, self.interval)
        while not self._flush():
            if self.status_only.is_set() and not self._status_written:
                self._write_status_only()
            if deadline is not None and time.monotonic() > deadline:
                return
            self.status_only.wait(delay)
            delay = min(delay * 2, 1.0)
        if self.events:  # the outage event of a recovery inside this very flush
            self._flush()
        self._final_written.set()
        self._close_conn()
        if self.file is not None:
            self.file.close()

    def _write_status_only(self) -> None:
        """The run's end status, heartbeat and one event saying what has not reached the store,
        in a transaction of their own (a few hundred bytes)."""
        assert self._final is not None
        status, ended_at = self._final
        now = time.time()
        waiting = self.pending_points()
        title = f"{waiting} points not yet written when the run ended"
        body = (
            f"finish() reached its time limit while the store could not take the points "
            f"logged last (last error: {self.last_error or 'none'}). They were still being "
            "retried; unless a later event or the points themselves say otherwise, they were "
            "lost when the process ended."
        )
        try:
            if self._conn is None:
                self._conn = self._connect()
            with self._conn.begin():
                self._conn.exec_driver_sql(
                    self._events_sql, [(self.run_id, now, None, "writer", "warning", title, body)]
                )
                values = {"status": status, "ended_at": ended_at, "heartbeat_at": now}
                self._conn.execute(runs.update().where(runs.c.id == self.run_id).values(**values))
        except Exception as exc:
            self._failed(exc, time.monotonic())
            return
        self._status_written = True

    def _backoff(self, delay: float) -> float:
        return min(max(delay, self.interval) * 2, MAX_BACKOFF_S)

    def _drain(self) -> None:
        buf = self.buffer
        n = len(buf)
        if n:
            recs = [buf.popleft() for _ in repeat(None, n)]
            types = set(map(type, recs))
            if SideRecord in types:
                own = [r[1] for r in recs if type(r) is not SideRecord]
                self._last_side = next(r[2] for r in reversed(recs) if type(r) is SideRecord)
            else:
                own = [r[1] for r in recs]
            self.stall.saw_records(own)
            if DeviceRecord in types:
                recs = self._materialize(recs)
            self._held.extend(recs)
        evs = self.events
        n = len(evs)
        if n:
            self._held_events.extend([evs.popleft() for _ in repeat(None, n)])

    @staticmethod
    def _materialize(recs: list) -> list:
        """Device tensors → floats, all tensors of this flush in one copy per device/dtype."""
        flat = [v for _s, _w, m in recs for v in m.values()]
        floats = iter(to_floats(flat, nan_as_none=False))
        return [(s, w, {k: next(floats) for k in m}) for s, w, m in recs]

    def _flush(self) -> bool:
        """Everything held, in transactions of at most `chunk_points` points; events, summary
        and run row with the last. False (the rest kept) when one failed.

        The cyclic collector is held off while records are drained and while each piece is
        committed (not between pieces: a backlog can take minutes, and the training process's
        own garbage must still be collected): a piece makes a tuple or more a point (no cycles:
        reference counting frees them when it is done), and each 700 of them started a
        collection pass in this thread. A pass holds the GIL from start to end, over the whole
        process's heap, so the training thread's log() waited for it (issue 36: 50 ms to
        1.5 s with 16 writers on 2 cores)."""
        final = self._final  # before draining: everything logged before close() is in this flush
        started = self._progress_at = time.monotonic()
        self._busy_since = started
        try:
            with gc_paused():
                self._drain()
            if self.file is not None:
                check_file(self)
            if self._conn is None:
                self._conn = self._connect()
            conn = self._conn
            # Every buffered key is in `known` before its record is appended (run.log), so the
            # set difference (in C, atomic under the GIL) covers all of them.
            missing = self.known.difference(self._ids)
            if missing:
                self._resolve_keys(conn, sorted(missing))
            while True:
                cut = chunk_end(self._held, self.chunk_points)
                t0 = time.monotonic()
                with gc_paused():
                    n = self._commit(conn, self._held[:cut], final, last=cut == len(self._held))
                self._fit_chunk(n, time.monotonic() - t0)
                if cut == len(self._held):
                    break
                del self._held[:cut]  # committed: never written again
            # PostgreSQL: the heads a sealing deleted become free space for the next ones
            # (never raises: the points are committed).
            self.rollups.chunks.reclaim(conn)
        except Exception as exc:  # never into training: keep the data, say so once, retry
            self._busy_since = None
            self._failed(exc, started)
            return False
        self._busy_since = None
        self._held = []
        self.flushes += 1
        if self._failing_since is not None:
            self._recovered()
        return True

    def _progressed(self) -> None:
        self._progress_at = time.monotonic()

    def _fit_chunk(self, points: int, took: float) -> None:
        """The next transaction's size: what the store took in COMMIT_TARGET_S when this one
        took longer, else twice this size (up to CHUNK_POINTS)."""
        if took > COMMIT_TARGET_S and points:
            fitted = int(points * COMMIT_TARGET_S / took)
            self.chunk_points = max(MIN_CHUNK_POINTS, min(self.chunk_points, fitted))
        else:
            self.chunk_points = min(CHUNK_POINTS, self.chunk_points * 2)

    def _commit(self, conn: Connection, held: list, final, *, last: bool) -> int:
        rows, groups = (
            point_rows(held, self.run_id, self._ids, self.is_sqlite) if held else ([], None)
        )
        now = time.time()
        pending: Pending | None = None
        values: dict[str, Any] = {"heartbeat_at": now}
        with conn.begin():
            self._others_committed()  # the lock is ours: what others committed while we waited
            if rows:
                pending = self.rollups.insert(conn, rows, groups)
            if final is not None:  # a finished run's points are all sealed chunks
                self.rollups.seal_all(conn, alone=not rows)
            if last:
                # Every event passes here (alerts, tracebacks, logged strings, config changes):
                # the one place its text is redacted before it is stored.
                event_rows = [
                    (self.run_id, wall, step, kind, level, redact_text(title), redact_text(body))
                    for wall, step, kind, level, title, body in self._held_events
                ]
                dropped = self.dropped + self.side_dropped
                if dropped > self.drops_recorded:
                    event_rows.append(self._drop_event(dropped - self.drops_recorded, now))
                if event_rows:
                    conn.exec_driver_sql(self._events_sql, event_rows)
                version = self.summary.version
                if version != self._summary_written:
                    values["summary"] = summary_json(self.summary)
                stalled = None if final is not None else self.stall.stalled_since
                if stalled != self._stall_written:
                    values["stalled_since"] = stalled
                config = self.config
                config_version = self._config_written if config is None else config._version
                if config_version != self._config_written:
                    values["config"] = config._stored
                if final is not None:
                    values["status"], values["ended_at"] = final
            conn.execute(runs.update().where(runs.c.id == self.run_id).values(**values))
        self._progress_at = time.monotonic()
        self._others_committed(mark=False)  # our own commit moved the version, not another's
        self.rollups.accept(pending)
        self.committed += len(rows)
        self.commits += 1
        self.room.set()
        if last:
            self._summary_written = version
            self._config_written = config_version
            self._stall_written = values.get("stalled_since", self._stall_written)
            self.drops_recorded = dropped
            self._held_events = []
        return len(rows)

    def _recovered(self) -> None:
        down = time.monotonic() - (self._failing_since or time.monotonic())
        self._failing_since = None
        if self._warned:
            log.warning("reslog: writing to %s works again", self.label)
        if down >= OUTAGE_EVENT_S:
            title = f"the store could not be written for {duration(down)}; writing works again"
            body = f"Last error: {self.last_error}. No point was lost: they waited in memory."
            self.events.append((time.time(), None, "writer", "warning", title, body))

    def _drop_event(self, count: int, now: float) -> tuple:
        title = f"{count} points dropped: the in-memory buffer was full ({self.max_points} points)"
        body = (
            "The store could not be written for a while and the buffer reached its bound "
            f"(max_buffer_points={self.max_points}); points logged meanwhile were dropped. "
            f"Last error: {self.last_error or 'none'}"
        )
        return (self.run_id, now, None, "drop", "warning", title, body)

    def _connect(self) -> Connection:
        conn = self.engine.connect()
        self._backend_pid = None
        info = getattr(conn.connection.dbapi_connection, "info", None)  # psycopg 3
        if not self.is_sqlite and info is not None:
            self._backend_pid = getattr(info, "backend_pid", None)
        if self.is_sqlite:
            # Short waits inside SQLite, retries out here: finish() keeps its deadline and the
            # buffer keeps draining while another process holds the lock for long.
            ms = int(min(30.0, max(1.0, 2 * self.interval)) * 1000)
            conn.connection.dbapi_connection.execute(f"PRAGMA busy_timeout={ms}")
        return conn

    def _resolve_keys(self, conn: Connection, names: list[str]) -> None:
        """Ids of key names into the writer's cache, inserting the new ones (other processes
        may insert the same names)."""
        with conn.begin():
            self._ids.update(resolve_keys(conn, names))

    def _failed(self, exc: Exception, started: float) -> None:
        """A flush that began at `started` (monotonic) failed: the outage began then, not when a
        hung write was broken or a connect timed out."""
        self.last_error = f"{type(exc).__name__}: {getattr(exc, 'orig', None) or exc}"
        self.failures += 1
        self._locked = is_lock_error(exc)
        if self._locked:
            self.lock_waits += 1
        else:  # a smaller transaction may fit where this one did not (a nearly full disk)
            self.chunk_points = max(MIN_CHUNK_POINTS, self.chunk_points // 2)
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = started
        # A fresh driver connection per retry (invalidate: not back into the pool): cheap next to
        # the backoff, and it sees the store as it is now (permissions, a restarted server).
        self._close_conn(invalidate=True)
        if self._locked and self._others_committed():
            # A queue of writers taking turns, not a lock held open: the points wait their
            # turn in memory (bounded; a full buffer says so), which is no fault to warn of.
            if not self._others_said:
                self._others_said = True
                log.info("reslog: %s is busy with other writers; waiting for a turn", self.label)
            return
        if self._locked and now - max(self._failing_since, self._others_at) < LOCK_WARN_AFTER_S:
            return
        kind = "lock" if self._locked else self.last_error.split(":", 1)[0]
        if kind in self._warned:
            return
        self._warned.add(kind)
        warnings.warn(
            f"reslog: cannot write to {self.label} ({self.last_error}); keeping "
            f"{self.pending_points()} points in memory (at most {self.max_points}) and retrying",
            RuntimeWarning,
            stacklevel=2,
        )

    def _others_committed(self, mark: bool = True) -> bool:
        """Whether another connection committed to the SQLite file since the last look (the
        store-file guard's read-only connection's PRAGMA data_version, which moves on every
        commit but its own); marks when in `_others_at`."""
        anchor = None if self.file is None else self.file.anchor
        if anchor is None:
            return False
        try:
            version = anchor.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return False
        moved = self._store_version is not None and version != self._store_version
        self._store_version = version
        if moved and mark:
            self._others_at = time.monotonic()
        return moved and mark

    def _close_conn(self, invalidate: bool = False) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                if invalidate:
                    conn.invalidate()
                conn.close()
