"""What the background writer (reslog/training/writer.py) watches besides its flushes: a write
to a server that makes no progress, a run that stopped logging steps, and a store file
deleted or replaced under it.

On a server, a watchdog thread tells a slow store from a dead one by progress, not by a clock:
every statement that writes rows marks progress, and only a write with none for `write_timeout`
seconds is looked at, from a second connection (pg_stat_activity): a server still working on it
(running it, or waiting for a lock) is slow and waited for; one that cannot be reached, no longer
has the session, or sits waiting for this process while this process waits for it, is dead to
this connection, which is broken and reopened. Committed pieces are never written again.

A stall (reslog/training/stall.py) is looked for at each of the writer's ticks: an event when
steps stop for longer than `stall_after`, with the GPUs' utilisation and the training thread's
stack, and one when they resume.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import TYPE_CHECKING

from reslog.text import duration
from reslog.training.server_health import (
    break_connection,
    server_verdict,
    socket_bytes,
    thread_cpu,
)
from reslog.training.stall import thread_stacks
from schema.rules.alerts import gpu_key
from schema.store.status import STALLED

if TYPE_CHECKING:
    from reslog.training.writer import Writer

log = logging.getLogger("reslog")

# How long the watchdog's check on a second connection may take before the server counts as
# unreachable (connect_timeout, from the URL, bounds the connect itself).
PROBE_TIMEOUT_S = 15.0
BUSY_CPU_S = 0.05  # writer-thread CPU seconds that count as the client working on a write


def watch_writes(w: Writer) -> None:
    """Progress is a statement ending, bytes moving on the connection's socket, or the
    writer thread using CPU (a client slow to send, on a crowded machine); a write with
    none of them for `write_timeout` s is checked on a second connection."""
    limit = w.write_timeout or 0.0
    moved = time.monotonic()
    sent = cpu = None
    while not w._final_written.wait(1.0):
        now = time.monotonic()
        seen = socket_bytes(w._conn)
        if seen != sent:
            sent, moved = seen, now
        # Waiting on a socket costs a few µs a wake (psycopg wakes every 0.1 s): work is
        # more than that.
        used = thread_cpu(w._thread)
        if used is not None and (cpu is None or used - cpu >= BUSY_CPU_S):
            cpu, moved = used, now
        if w._busy_since is None or now - max(w._progress_at, moved) < limit:
            continue
        verdict = server_verdict(w.engine, w._backend_pid, PROBE_TIMEOUT_S)
        if verdict is None:  # alive and on it: slow, not dead; look again after `limit`
            w.slow_checks += 1
            w._progress_at = time.monotonic()
            if w.slow_checks == 1:
                log.info("reslog: %s is slow (a write ran %.0f s); waiting", w.label, limit)
            continue
        conn = w._conn
        if w._busy_since is None or conn is None or not break_connection(conn):
            continue
        if "hung" not in w._warned:
            w._warned.add("hung")
            warnings.warn(
                f"reslog: a write to {w.label} hung for {limit:.0f} s with no progress "
                f"({verdict}); broke the connection, keeping the points in memory and "
                "reconnecting",
                RuntimeWarning,
                stacklevel=2,
            )
        w._busy_since = None


def watch_stall(w: Writer, now: float) -> None:
    change = w.stall.tick(w.logged + w.dropped, now)
    if change == STALLED:
        since = w.stall.last_active or now
        w.stall.stalled_since = since
        w.events.append(stall_event(w, now - since, now))
    elif change == "resumed":
        since = w.stall.stalled_since or now
        w.stall.stalled_since = None
        title = f"steps resumed after a stall of {duration(now - since)}"
        w.events.append((now, None, "stall", "info", title, ""))


def stall_event(w: Writer, quiet: float, now: float) -> tuple:
    side = w._last_side
    util = {gpu[0]: v for k, v in side.items() if (gpu := gpu_key(k)) and gpu[1] == "util"}
    gpus = ", ".join(f"gpu{i} {v:.0f}%" for i, v in sorted(util.items()))
    hint = (
        f"GPU utilisation now: {gpus}. Idle GPUs point at the data loader or a collective "
        "waiting for another rank; busy ones at a long step.\n\n"
        if gpus
        else ""
    )
    title = (
        f"stalled: no step logged for {duration(quiet)} "
        f"(stall_after {duration(w.stall.threshold())})"
    )
    return (now, None, "stall", "warning", title, hint + thread_stacks(w.owner))


def check_file(w: Writer) -> None:
    """A store file deleted or replaced under the writer is rescued
    (reslog/training/store_file.py)."""
    assert w.file is not None
    what = w.file.changed()
    if what is None:
        return
    conn = w._conn
    old = w.file.path
    tmp = w.file.snapshot(None if conn is None else conn.connection.dbapi_connection)
    w._close_conn()
    w.engine.dispose()
    where, ours = w.file.place(tmp, w.uid)
    if where != old:
        from schema.store.connect import make_engine

        w.engine = make_engine(f"sqlite:///{where}")
        w.label = str(where)
    detail = (
        f"restored it at {where} from the still-open file; nothing was lost"
        if ours
        else f"another writer restored it first; writing into {where} again (points this "
        "process committed after that writer's copy may be missing there)"
    )
    warnings.warn(
        f"reslog: the store {old} was {what} while the run was writing; {detail}",
        RuntimeWarning,
        stacklevel=2,
    )
    w._held_events.append(
        (time.time(), None, "writer", "warning", f"store file {what} during the run", detail)
    )
