"""Stall detection: a live process that stopped logging steps, and where every thread stands.

The writer thread calls `StallWatch.tick()` once per flush with the training thread's counters.
Nothing here runs on the training thread. A stall is declared when no `log()` call arrived for
`threshold()` seconds after the first one: by default max(5 min, 20 × the recent median time
between logged records), so an evaluation or checkpoint pause (minutes at most, and usually far
fewer step intervals than 20 × a long step) never flags. The stack of every thread is captured at
that moment: a hung NCCL collective, a dataloader deadlock or a blocking disk write shows up as
the training thread's innermost frame.
"""

from __future__ import annotations

import statistics
import sys
import threading
import traceback
from collections import deque

from schema.store.status import STALLED

DEFAULT_MIN_STALL_S = 300.0
STALL_INTERVALS = 20
INTERVAL_SAMPLES = 64


def check_stall_after(value: float | None) -> float | None:
    """init(stall_after=...): None (the default rule), 0 (off) or a positive number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(
            f"reslog: stall_after must be None (default), 0 (off) or seconds > 0, got {value!r}"
        )
    return float(value)


class StallWatch:
    """Tracks when the training thread last logged, and decides when that is a stall."""

    def __init__(self, stall_after: float | None) -> None:
        self.stall_after = stall_after
        self.last_active: float | None = None  # wall time the activity counter last moved
        self.stalled_since: float | None = None
        self._seen = 0
        self._last_wall: float | None = None
        self._intervals: deque[float] = deque(maxlen=INTERVAL_SAMPLES)

    @property
    def enabled(self) -> bool:
        return self.stall_after != 0

    def threshold(self) -> float:
        if self.stall_after is not None:
            return self.stall_after
        if not self._intervals:
            return DEFAULT_MIN_STALL_S
        return max(DEFAULT_MIN_STALL_S, STALL_INTERVALS * statistics.median(self._intervals))

    def saw_records(self, walls: list[float]) -> None:
        """Walls of the training thread's records drained in one flush, in order."""
        if not walls:
            return
        if self._last_wall is not None and walls[-1] > self._last_wall:
            self._intervals.append((walls[-1] - self._last_wall) / len(walls))
        self._last_wall = walls[-1]

    def tick(self, activity: int, now: float) -> str | None:
        """`activity`: a counter the training thread bumps on every log(). Returns "stalled" when
        a stall starts, "resumed" when logging comes back after one, else None."""
        if activity != self._seen:
            self._seen = activity
            self.last_active = now
            if self.stalled_since is not None:
                return "resumed"
            return None
        if (
            self.enabled
            and self.stalled_since is None
            and self.last_active is not None
            and now - self.last_active > self.threshold()
        ):
            return STALLED
        return None


def thread_stacks(first: threading.Thread | None = None) -> str:
    """Every thread's Python stack, innermost frame last; `first` (the training thread) on top."""
    frames = sys._current_frames()
    threads = sorted(
        threading.enumerate(), key=lambda t: (t is not first, t is not threading.main_thread())
    )
    parts = []
    for thread in threads:
        frame = frames.get(thread.ident) if thread.ident is not None else None
        if frame is None:
            continue
        role = " (the thread that called reslog.init)" if thread is first else ""
        stack = "".join(traceback.format_stack(frame))
        parts.append(f'Thread "{thread.name}"{role}, daemon={thread.daemon}:\n{stack}')
    return "\n".join(parts)
