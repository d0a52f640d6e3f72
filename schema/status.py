"""Run status as readers should show it: a "running" run whose heartbeat went stale crashed.

The writer refreshes `heartbeat_at` every flush; SIGKILL or an OOM kill leaves no exit path to
record a status, so readers derive it instead of trusting "running" forever.
"""

from __future__ import annotations

import time

STALE_AFTER_MIN_S = 30.0
STALE_AFTER_INTERVALS = 10


def stale_after(heartbeat_interval: float) -> float:
    """Seconds without a heartbeat after which a running run counts as crashed."""
    return max(STALE_AFTER_MIN_S, STALE_AFTER_INTERVALS * heartbeat_interval)


def effective_status(
    status: str, heartbeat_at: float, heartbeat_interval: float, now: float | None = None
) -> str:
    if status != "running":
        return status
    now = time.time() if now is None else now
    return "crashed" if now - heartbeat_at > stale_after(heartbeat_interval) else "running"
