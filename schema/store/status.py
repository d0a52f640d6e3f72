"""Run status as readers should show it, derived from what the writer stored and what the host says.

A writer stores "running" until it records an end; SIGKILL or an OOM kill leaves no exit path to
record one, so readers derive the status instead of trusting "running" forever:

- on the run's own host (schema/store/liveness.py can see its process): `crashed` as soon as the
  process is gone; a live process whose writer stopped refreshing the heartbeat is `stalled`
  (wedged, or its store unwritable);
- elsewhere (a shared PostgreSQL store read from another machine, an older run without liveness
  columns): `crashed` once the heartbeat is older than `stale_after(heartbeat_interval)`;
- a running run whose writer flagged a stall (`stalled_since`, reslog/training/stall.py) is
  `stalled`.

`stalled` is never stored as a status: it is "running, but no step lately".
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from schema.store import liveness

# The run statuses, each spelled here once. Stores on disk hold these strings in runs.status
# (and the CHECK constraint lists them): never change one.
RUNNING = "running"
FINISHED = "finished"
FAILED = "failed"
KILLED = "killed"
CRASHED = "crashed"
STALLED = "stalled"  # derived by readers, never stored

RUN_STATUSES = (RUNNING, FINISHED, FAILED, KILLED, CRASHED)  # what runs.status may hold
STATUSES = (*RUN_STATUSES, STALLED)  # what a reader may show
LIVE_STATUSES = (RUNNING, STALLED)
END_STATUSES = (FINISHED, FAILED, KILLED)  # what a writer records at its end
ENDED_BADLY = (CRASHED, FAILED, KILLED)

STALE_AFTER_MIN_S = 15.0
STALE_AFTER_INTERVALS = 10


def stale_after(heartbeat_interval: float) -> float:
    """Seconds without a heartbeat after which a running run counts as crashed (other hosts)."""
    return max(STALE_AFTER_MIN_S, STALE_AFTER_INTERVALS * heartbeat_interval)


def effective_status(
    status: str,
    heartbeat_at: float,
    heartbeat_interval: float,
    now: float | None = None,
    *,
    alive: bool | None = None,
    stalled_since: float | None = None,
) -> str:
    """`alive`: whether the run's process exists (None: cannot tell from here)."""
    if status != RUNNING:
        return status
    if alive is False:
        return CRASHED
    now = time.time() if now is None else now
    stale = now - heartbeat_at > stale_after(heartbeat_interval)
    if alive is None and stale:
        return CRASHED
    return STALLED if stale or stalled_since is not None else RUNNING


def process_alive(row: Mapping[str, Any]) -> bool | None:
    """Liveness of a run row's process, seen from this host (None: cannot tell). A row read
    through the agent carries the answer of the run's own host as `alive`."""
    if row.get("status") != RUNNING:
        return None
    if "alive" in row:
        return row["alive"]
    return liveness.is_alive(row.get("proc_host"), row.get("pid"), row.get("proc_start"))


def row_status(row: Mapping[str, Any], now: float | None = None) -> str:
    """The effective status of a run row read on this host."""
    return effective_status(
        row["status"],
        row["heartbeat_at"],
        row["heartbeat_interval"],
        now,
        alive=process_alive(row),
        stalled_since=row.get("stalled_since"),
    )
