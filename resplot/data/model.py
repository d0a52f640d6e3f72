"""Plain data shared by resplot's sources, poller, cache, charts and export (no Qt here)."""

from __future__ import annotations

import numpy as np

from schema.store.records import Event, RunInfo, RunRef
from schema.store.rollup import is_restart

__all__ = ["Event", "RunInfo", "RunRef", "Series"]


class Series:
    """One key of one run at full resolution; appends amortise by capacity doubling."""

    __slots__ = ("_n", "steps", "values", "walls")

    def __init__(self) -> None:
        self._n = 0
        self.steps = np.empty(0, dtype=np.int64)
        self.walls = np.empty(0, dtype=np.float64)
        self.values = np.empty(0, dtype=np.float64)

    def __len__(self) -> int:
        return self._n

    def extend(self, steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> bool:
        """Append points in arrival order; True when a restart dropped superseded points.

        A step lower than the one before it, logged later, is a restart (a resume from an older
        checkpoint; schema.store.rollup.is_restart): every earlier point at that step or later is
        dropped, as TensorBoard purges orphaned data, so the chart shows the newer take."""
        n, m = self._n, len(steps)
        if m == 0:
            return False
        restart = len(restarts(steps, walls)) > 0 or (
            n > 0 and bool(is_restart(self.steps[n - 1], self.walls[n - 1], steps[0], walls[0]))
        )
        if n + m > len(self.steps):
            cap = max(1024, 2 * (n + m))
            for name in ("steps", "walls", "values"):
                old = getattr(self, name)
                new = np.empty(cap, dtype=old.dtype)
                new[:n] = old[:n]
                setattr(self, name, new)
        self.steps[n : n + m] = steps
        self.walls[n : n + m] = walls
        self.values[n : n + m] = values
        self._n = n + m
        if not restart:
            return False
        keep = newest_take(self.steps[: self._n], self.walls[: self._n])
        kept = int(keep.sum())
        for name in ("steps", "walls", "values"):
            arr = getattr(self, name)
            arr[:kept] = arr[: self._n][keep]
        self._n = kept
        return True

    def newest(self, n: int) -> Series:
        """A new series holding copies of the newest `n` points."""
        out = Series()
        out.extend(*(a[-n:].copy() for a in self.view()))
        return out

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, walls, values) without copying; valid until the next extend()."""
        n = self._n
        return self.steps[:n], self.walls[:n], self.values[:n]


def restarts(steps: np.ndarray, walls: np.ndarray) -> np.ndarray:
    """Positions (>= 1, arrival order) of the points that start the series over after the point
    before them: schema.store.rollup.is_restart over whole arrays."""
    return np.flatnonzero((steps[1:] < steps[:-1]) & (walls[1:] > walls[:-1])) + 1


def newest_take(steps: np.ndarray, walls: np.ndarray) -> np.ndarray:
    """Boolean mask of the points (in arrival order) that stand after restarts; the numpy twin
    of schema.store.rollup.newest_take (a restart step supersedes earlier points at or after it),
    held to it on random sequences by tests/resplot/data/test_restart_rule.py."""
    n = len(steps)
    big = np.iinfo(np.int64).max
    floors = np.full(n, big, dtype=np.int64)
    down = restarts(steps, walls)
    floors[down] = steps[down]
    # floor[i] = the lowest restart step after point i
    floor = np.full(n, big, dtype=np.int64)
    floor[:-1] = np.minimum.accumulate(floors[::-1])[::-1][1:]
    return steps < floor
