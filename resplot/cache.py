"""The series cache: what the poller writes (worker thread) and the charts read (GUI thread).

Data arrives in batches; each batch is applied under one lock and bumps `version`, so a reader
takes a consistent snapshot without copying the arrays (they only ever grow).

The one exception is a first view of a large store (docs/protocol.md, "Overview first"): the
source shows a sampled overview of each run, marked partial, then swaps in the full-resolution
series with replace_run_series(). A swap bumps the run's `generation`, so a reader that keeps
per-series state computed incrementally (x values, smoothing) knows to start over.
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
        self._partial: set[RunRef] = set()
        self._generation: dict[RunRef, int] = defaultdict(int)
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
            if series.extend(steps, walls, values):
                # Points were dropped (a restart): readers' incremental state starts over.
                self._generation[ref] += 1
            self.version += 1

    def replace_run_series(
        self, ref: RunRef, series: dict[str, Series], *, partial: bool = False
    ) -> None:
        """Swap all series of a run at once (overview in, or full resolution over an overview).

        `partial` marks the run as showing an overview (is_partial); readers see either the old
        series or the new ones, never a mix, and the run's generation moves on."""
        with self._lock:
            self._series[ref] = dict(series)
            if partial:
                self._partial.add(ref)
            else:
                self._partial.discard(ref)
            self._generation[ref] += 1
            self.version += 1

    def add_events(self, new: Iterable[Event]) -> None:
        with self._lock:
            for ev in new:
                self._events[ev.run].append(ev)
            self.version += 1

    def drop_source(self, source: str) -> None:
        with self._lock:
            for table in (self._runs, self._series, self._events, self._generation):
                for ref in [r for r in table if r.source == source]:
                    del table[ref]
            self._partial = {r for r in self._partial if r.source != source}
            self.version += 1

    def drop_store(self, source: str, store: str) -> None:
        """Forget every run of one store (its file was replaced: it is read again from scratch)."""
        with self._lock:
            for table in (self._runs, self._series, self._events, self._generation):
                for ref in [r for r in table if r.source == source and r.store == store]:
                    del table[ref]
            self._partial = {r for r in self._partial if (r.source, r.store) != (source, store)}
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

    def is_partial(self, ref: RunRef) -> bool:
        """True while the run's series are a sampled overview (full resolution is loading)."""
        with self._lock:
            return ref in self._partial

    def partial_refs(self) -> set[RunRef]:
        with self._lock:
            return set(self._partial)

    def generation(self, ref: RunRef) -> int:
        """Moves on whenever the run's series are replaced rather than appended to."""
        with self._lock:
            return self._generation.get(ref, 0)

    def events(self, ref: RunRef) -> list[Event]:
        with self._lock:
            return list(self._events.get(ref, ()))
