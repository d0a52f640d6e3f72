"""The series cache: what the poller writes (worker thread) and the charts read (GUI thread).

Data arrives in batches; each batch is applied under one lock and bumps `version`, so a reader
takes a consistent snapshot without copying the arrays (they only ever grow).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from resplot.model import Event, RunInfo, RunRef, Series


class SeriesCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[RunRef, RunInfo] = {}
        self._series: dict[RunRef, dict[str, Series]] = defaultdict(dict)
        self._events: dict[RunRef, list[Event]] = defaultdict(list)
        self.version = 0

    # -- writer side (poller) -------------------------------------------------------------
    def set_runs(self, runs: Iterable[RunInfo]) -> None:
        with self._lock:
            for run in runs:
                self._runs[run.ref] = run
            self.version += 1

    def add_points(
        self,
        ref: RunRef,
        key: str,
        steps: np.ndarray,
        walls: np.ndarray,
        values: np.ndarray,
    ) -> None:
        """Append points of one key (already in arrival order) to a run's series."""
        if len(steps) == 0:
            return
        with self._lock:
            series = self._series[ref].get(key)
            if series is None:
                series = self._series[ref][key] = Series()
            series.extend(steps, walls, values)
            self.version += 1

    def add_events(self, new: Iterable[Event]) -> None:
        with self._lock:
            for ev in new:
                self._events[ev.run].append(ev)
            self.version += 1

    def drop_source(self, source: str) -> None:
        with self._lock:
            for table in (self._runs, self._series, self._events):
                for ref in [r for r in table if r.source == source]:
                    del table[ref]
            self.version += 1

    # -- reader side (charts, tables, export) ---------------------------------------------
    def runs(self) -> list[RunInfo]:
        with self._lock:
            return sorted(self._runs.values(), key=lambda r: (r.created_at, r.ref))

    def run(self, ref: RunRef) -> RunInfo | None:
        with self._lock:
            return self._runs.get(ref)

    def keys(self, ref: RunRef) -> list[str]:
        with self._lock:
            return sorted(self._series.get(ref, {}))

    def all_keys(self) -> list[str]:
        with self._lock:
            return sorted({k for per_run in self._series.values() for k in per_run})

    def series(self, ref: RunRef, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(steps, walls, values) views at full resolution, or None when the key is absent."""
        with self._lock:
            s = self._series.get(ref, {}).get(key)
            return s.view() if s is not None else None

    def events(self, ref: RunRef) -> list[Event]:
        with self._lock:
            return list(self._events.get(ref, ()))
