"""Plain data shared by resplot's sources, poller, cache, charts and export (no Qt here)."""

from __future__ import annotations

import numpy as np

from schema.records import Event, RunInfo, RunRef

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

    def extend(self, steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> None:
        n, m = self._n, len(steps)
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

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, walls, values) without copying; valid until the next extend()."""
        n = self._n
        return self.steps[:n], self.walls[:n], self.values[:n]
