"""The viewer's data: what the sources write (worker threads) and the charts read (GUI thread).

- runs and events, as the store has them;
- one summary per series (schema.store.rollup aggregate and rollup levels, from the store's `series`
  rows, then kept current by folding live points in): key lists, latest values, the run table,
  alerts and the comparison table read these, O(series);
- a live tail per series: the raw points that arrived since the source connected, the newest
  LIVE_POINTS of them (alerts that look at the last minute read these);
- tiles (resplot/data/tiles.py) that the charts asked for, in an LRU cache bounded by bytes, with
  live points folded in as they arrive;
- the tiles charts want and nobody has fetched yet, for each store, which its source's worker
  takes with the next poll.

Every change happens under one lock and bumps `version`; a change to what a series' views are
built from (its summary, its tiles put, folded into, evicted or dropped) also moves that
series' `changes` count, so a chart holding a view of a series that did not change keeps it
without looking at its tiles (resplot/data/views.py, ViewMemo). Nothing is swapped in place:
arrays a reader holds stay valid (live tails only grow or are copied when trimmed, tiles replace
their columns when a live point is folded in).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from resplot.data.model import Event, RunInfo, RunRef, Series
from resplot.data.tiles import DEFAULT_LIMIT_BYTES, Tile, TileCache, folded
from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO, fold, is_restart, merge

LIVE_POINTS = 20_000  # raw points kept per series (the newest)
# A zoom's detail tiles no chart has read for this long go (expire_detail): a 30-minute soak of
# random zooms grew the cache by 117 MB inside its 256 MB bound (docs/benchmarks/viewer.md),
# with tiles of views left long ago. Zooming back there shows level 1 while they load again.
DETAIL_IDLE_S = 300.0


class Summary(NamedTuple):
    """A series as its summary row says: the aggregate of all its points, the rollup levels the
    store keeps for it (1..levels), and the step and wall of its newest point (a lower step
    logged later starts the series over)."""

    agg: tuple
    levels: int
    tail: tuple[int, float]


# A tile's key: its series' number (SeriesCache._number), its level, its index. Ints only: a
# view looks up ~20 tiles a series and each lookup hashes its key ~4 times (the view's keep
# set, the cache's dict, its recency order and times), where a RunRef in the key made each hash
# a Python call (~14,000 a zoom of the 12-run Training page).
TileKey = tuple[int, int, int]


class SeriesCache:
    def __init__(self, tile_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self._lock = threading.Lock()
        self._runs: dict[RunRef, RunInfo] = {}
        self._summaries: dict[RunRef, dict[str, Summary]] = defaultdict(dict)
        self._live: dict[RunRef, dict[str, Series]] = defaultdict(dict)
        self._events: dict[RunRef, list[Event]] = defaultdict(list)
        # The same events by kind: a run logging a checkpoint a second holds thousands, which
        # the alerts, the x axis's step metric and the table each scanned at every poll.
        self._by_kind: dict[RunRef, dict[str, list[Event]]] = defaultdict(dict)
        self._event_changes: dict[RunRef, int] = {}  # per run, the tick of its last event
        self._tiles = TileCache(tile_bytes, on_gone=lambda k: self._changed(*self._series[k[0]]))
        # Each series' number in tile keys, and back (numbers are never reused).
        self._numbers: dict[tuple[RunRef, str], int] = {}
        self._series: list[tuple[RunRef, str]] = []
        # Per series, the tick of its last change (ticks only grow: a series forgotten and read
        # again never repeats a count a view was stamped with).
        self._changes: dict[tuple[RunRef, str], int] = {}
        self._tick = itertools.count(1)
        self._wanted: dict[tuple[str, str], set[tuple[str, str, int, int]]] = defaultdict(set)
        # Taken by a source's poll and not yet put (or the poll ended without them): still
        # waited for, so a page refreshed meanwhile does not draw itself empty.
        self._taken: dict[tuple[str, str], set[tuple[str, str, int, int]]] = defaultdict(set)
        self._folds: dict[str, str] = {}  # source label -> what its host folds fine tiles with
        self.version = 0
        self.tiles_put = 0  # every tile put so far: a view that read this many has them all

    def _number(self, ref: RunRef, key: str) -> int:
        """The series' number in its tiles' keys (lock held)."""
        number = self._numbers.get((ref, key))
        if number is None:
            number = self._numbers[(ref, key)] = len(self._series)
            self._series.append((ref, key))
        return number

    def tile_keys(self, ref: RunRef, key: str, places: Iterable[tuple[int, int]]) -> frozenset:
        """The keys of the series' tiles at these (level, index) places, for keep_tiles()."""
        with self._lock:
            number = self._number(ref, key)
        return frozenset((number, level, index) for level, index in places)

    def _changed(self, ref: RunRef, key: str) -> None:
        self._changes[(ref, key)] = next(self._tick)

    def changes(self, ref: RunRef, key: str) -> int:
        """A count that moves whenever what the series' views are built from changes (0: never
        changed, or forgotten)."""
        with self._lock:
            return self._changes.get((ref, key), 0)

    def event_changes(self, ref: RunRef) -> int:
        """A count that moves whenever the run's events change (0: none, or forgotten)."""
        with self._lock:
            return self._event_changes.get(ref, 0)

    def keep_tiles(self, keys: Iterable[TileKey]) -> None:
        """Count these tiles part of the view since begin_view(), as reading them would (a view
        kept whole reads none)."""
        with self._lock:
            self._tiles.keep.update(keys)

    # -- writer side (sources) ------------------------------------------------------------------
    def set_runs(self, runs: Iterable[RunInfo]) -> None:
        with self._lock:
            for run in runs:
                self._runs[run.ref] = run
            self.version += 1

    def add_events(self, new: Iterable[Event]) -> None:
        with self._lock:
            for ev in new:
                # Each poll's records bring their own RunRef: an event keeps the run's first
                # one, not its poll's (a run logging events all day kept one RunRef a poll).
                held = self._events.get(ev.run)
                if held and held[0].run is not ev.run:
                    ev = replace(ev, run=held[0].run)
                self._events[ev.run].append(ev)
                self._by_kind[ev.run].setdefault(ev.kind, []).append(ev)
                self._event_changes[ev.run] = next(self._tick)
            self.version += 1

    def set_summaries(self, ref: RunRef, summaries: dict[str, Summary]) -> None:
        """Series rows as the store has them (the points up to the reply that carried them)."""
        with self._lock:
            self._summaries[ref].update(summaries)
            for key in summaries:
                self._changed(ref, key)
            self.version += 1

    def add_live(
        self,
        ref: RunRef,
        key: str,
        steps: np.ndarray,
        walls: np.ndarray,
        values: np.ndarray,
        epoch: int,
    ) -> bool:
        """Points of one series that arrived live (arrival order), from the source's reply
        number `epoch`: appended to the live tail and folded into the summary and into the
        tiles read before that reply. True when they restart the series (a lower step logged
        later: a run resumed from an older checkpoint); its summary and tiles are then dropped,
        to be read again from the store, which has rebuilt them for the newer take."""
        if len(steps) == 0:
            return False
        # The new points' aggregate and their folds into the cached tiles depend on them and
        # on what this source's worker (the one thread that writes this run) put there before:
        # worked out before the lock, which the GUI thread asks for hundreds of times a refresh
        # (a poll of two live runs folds thousands of points; under the lock the GUI thread
        # waited out 100-250 ms polls, docs/benchmarks/viewer.md).
        vals = [None if v != v else v for v in values.tolist()]
        new = fold(steps.tolist(), walls.tolist(), vals)
        with self._lock:
            old = self._summaries[ref].get(key)
            levels = self._levels(old, merge(old.agg, new) if old is not None else new)
            targets = self._tiles_to_fold(ref, key, levels, steps, epoch)
        # New columns for them; the cached ones stay as readers see them. Only this thread
        # folds into or puts this run's tiles: in between, the GUI thread can only let one go.
        done = [
            (tile_key, tile, folded(tile.level, tile.cols, steps[at], walls[at], values[at]))
            for tile_key, tile, at in targets
        ]
        with self._lock:
            old = self._summaries[ref].get(key)
            tail = self._live[ref].get(key)
            if tail is None:
                tail = self._live[ref][key] = Series()
            restart = tail.extend(steps, walls, values)
            if old is not None and is_restart(old.tail[0], old.tail[1], steps[0], walls[0]):
                restart = True  # against the stored history, before any live point
            if len(tail) > 2 * LIVE_POINTS:
                self._live[ref][key] = tail.newest(LIVE_POINTS)
            self.version += 1
            self._changed(ref, key)  # its summary, and the tiles folded into below
            if restart:
                self._forget_series(ref, key)
                return True
            agg = merge(old.agg, new) if old is not None else new
            newest = (int(steps[-1]), float(walls[-1]))
            self._summaries[ref][key] = Summary(agg, self._levels(old, agg), newest)
            for tile_key, tile, cols in done:
                if self._tiles.peek(tile_key) is tile:  # not evicted or dropped meanwhile
                    before = tile.nbytes
                    tile.cols = cols
                    self._tiles.resized(tile, before)
            return False

    @staticmethod
    def _levels(old: Summary | None, agg: tuple) -> int:
        """The levels the writer keeps for a series of this span (it adds them in the same
        transaction as the points)."""
        return max(old.levels if old else 1, buckets.needed_levels(agg[STEP_HI] - agg[STEP_LO]))

    def _tiles_to_fold(self, ref, key, levels: int, steps, epoch) -> list:
        """(tile key, tile, which points) of the cached tiles live points fall in and were not
        read with (lock held)."""
        # Only the tiles these steps fall in (a level or two of the newest, mostly): this
        # runs for every series of every poll, so never a walk over the whole cache.
        first, last = int(steps.min()), int(steps.max())
        number = self._number(ref, key)
        out = []
        for level in buckets.by_width(levels):  # raw, fine and stored tiles alike
            for index in buckets.tiles_for(level, first, last):
                tile_key = (number, level, index)
                tile = self._tiles.peek(tile_key)
                if tile is None or tile.epoch >= epoch:
                    continue  # not cached, or read in this reply's snapshot (has them)
                lo, hi = tile.span
                inside = (steps >= lo) & (steps < hi)
                if inside.any():
                    out.append((tile_key, tile, inside))
        return out

    def put_tile(self, ref: RunRef, key: str, tile: Tile) -> None:
        with self._lock:
            self._tiles.put((self._number(ref, key), tile.level, tile.index), tile)
            self._changed(ref, key)
            place, which = (ref.source, ref.store), (ref.uid, key, tile.level, tile.index)
            self._wanted[place].discard(which)
            self._taken[place].discard(which)
            self.tiles_put += 1
            self.version += 1

    def forget_series(self, ref: RunRef, key: str) -> None:
        with self._lock:
            self._forget_series(ref, key)
            self.version += 1

    def _forget_series(self, ref: RunRef, key: str) -> None:
        self._summaries[ref].pop(key, None)
        number = self._number(ref, key)
        self._tiles.drop(lambda k: k[0] == number)
        self._changed(ref, key)

    def set_fold(self, source: str, fold: str) -> None:
        """What `source`'s host folds fine tiles with ("numpy" or "builtins"): a page's budget
        of fine points there (resplot/data/views.py)."""
        with self._lock:
            if self._folds.get(source) != fold:
                self._folds[source] = fold
                self.version += 1

    def fold(self, source: str) -> str | None:
        return self._folds.get(source)

    def drop_source(self, source: str) -> None:
        self._drop(lambda r: r.source == source)

    def drop_store(self, source: str, store: str) -> None:
        """Forget every run of one store (its file was replaced: it is read again from scratch)."""
        self._drop(lambda r: r.source == source and r.store == store)

    def _drop(self, which) -> None:
        with self._lock:
            for table in (
                self._runs,
                self._summaries,
                self._live,
                self._events,
                self._by_kind,
                self._event_changes,
            ):
                for ref in [r for r in table if which(r)]:
                    del table[ref]
            self._tiles.drop(lambda k: which(self._series[k[0]][0]))
            # Forgotten after their tiles' drop (which counts as a change): back to 0.
            for series in [s for s in self._changes if which(s[0])]:
                del self._changes[series]
            for table in (self._wanted, self._taken):
                for place in [p for p in table if which(RunRef(p[0], p[1], ""))]:
                    del table[place]
            self.version += 1

    # -- tiles the charts want -------------------------------------------------------------------
    def want_tiles(self, ref: RunRef, key: str, level: int, indices: Iterable[int]) -> bool:
        """Ask for tiles not in the cache; True when something new was asked for."""
        with self._lock:
            wanted = self._wanted[(ref.source, ref.store)]
            before = len(wanted)
            number = self._number(ref, key)
            for index in indices:
                self._tiles.keep.add((number, level, index))
                if self._tiles.get((number, level, index)) is None:
                    wanted.add((ref.uid, key, level, index))
            return len(wanted) > before

    def begin_view(self) -> None:
        """A page is about to read its tiles: the tiles it reads or asks for from now on stay
        cached even past the bound (`tiles_over` says by how much); the previous view's go
        back to plain least-recently-used."""
        with self._lock:
            self._tiles.keep = set()

    @property
    def tiles_over(self) -> int:
        """Bytes of tiles the view in use holds above `tile_limit` (0: within it)."""
        with self._lock:
            return self._tiles.over

    def take_wanted(
        self, source: str, store: str, *, coarse_first: bool = False
    ) -> list[tuple[str, str, int, int]]:
        """The wanted tiles of one store, handed to its source: no longer wanted, but waited
        for (`wanted_count`) until put or until the poll that took them ends (`fetching`).
        With `coarse_first`, fine tiles stay wanted while any other is: a source that replies
        to a poll all at once then shows the stand-ins before the host folds the fine ones."""
        with self._lock:
            wanted = self._wanted.pop((source, store), set())
            if coarse_first:
                fine = {w for w in wanted if buckets.is_fine(w[2])}
                if fine and len(fine) < len(wanted):
                    self._wanted[(source, store)] = fine
                    wanted -= fine
            self._taken[(source, store)] |= wanted
            return sorted(wanted)

    @contextmanager
    def fetching(self, source: str) -> Iterator[None]:
        """Around one poll of `source`: the tiles it takes and does not put (a failed read, a
        series gone) are no longer waited for once it ends, however it ends."""
        try:
            yield
        finally:
            with self._lock:
                for place in [p for p in self._taken if p[0] == source]:
                    del self._taken[place]

    def wanted_count(self) -> int:
        """Tiles the charts asked for that are not in the cache yet: still to be taken by
        a poll, or taken by one that is reading them."""
        with self._lock:
            places = self._wanted.keys() | self._taken.keys()
            return sum(len(self._wanted.get(p, set()) | self._taken.get(p, set())) for p in places)

    def expire_detail(self, idle_s: float = DETAIL_IDLE_S) -> int:
        """Drop the detail tiles (raw and fine levels, what a zoom reads) no chart has read
        for `idle_s` seconds, out of the view in use; the bytes dropped. The overview tiles
        (stored levels) every page is drawn from stay until the bound evicts them."""
        with self._lock:
            freed = self._tiles.expire(idle_s, lambda k: k[1] <= 0)
            if freed:
                self.version += 1
            return freed

    def set_tile_limit(self, limit_bytes: int) -> None:
        with self._lock:
            self._tiles.set_limit(limit_bytes)

    @property
    def tile_bytes(self) -> int:
        return self._tiles.bytes

    @property
    def tile_limit(self) -> int:
        return self._tiles.limit_bytes

    # -- reader side (charts, tables, export) -------------------------------------------------
    def runs(self) -> list[RunInfo]:
        with self._lock:
            return sorted(self._runs.values(), key=lambda r: (r.created_at, r.ref))

    def run(self, ref: RunRef) -> RunInfo | None:
        with self._lock:
            return self._runs.get(ref)

    def keys(self, ref: RunRef) -> list[str]:
        with self._lock:
            return sorted(self._summaries.get(ref, {}))

    def all_keys(self) -> list[str]:
        with self._lock:
            return sorted({k for per_run in self._summaries.values() for k in per_run})

    def summary(self, ref: RunRef, key: str) -> Summary | None:
        with self._lock:
            return self._summaries.get(ref, {}).get(key)

    def summaries(self, ref: RunRef) -> dict[str, Summary]:
        with self._lock:
            return dict(self._summaries.get(ref, {}))

    def live(self, ref: RunRef, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(steps, walls, values) of the points seen live (the newest LIVE_POINTS at least)."""
        with self._lock:
            s = self._live.get(ref, {}).get(key)
            return s.view() if s is not None else None

    def tile(self, ref: RunRef, key: str, level: int, index: int) -> Tile | None:
        """A cached tile (None: not cached); it is part of the view since begin_view()."""
        found, _missing = self.tiles(ref, key, level, (index,))
        return found[0] if found else None

    def tiles(
        self, ref: RunRef, key: str, level: int, indices: Iterable[int], every_missing: bool = True
    ) -> tuple[list[Tile], list[int]]:
        """tile() of each index under one hold of the lock (a view reads ~40 a series, and the
        poller's thread takes the lock between them): the cached tiles in order, and the
        missing indices (only the first without `every_missing`: the rest are not read)."""
        found: list[Tile] = []
        missing: list[int] = []
        with self._lock:
            keep, get = self._tiles.keep, self._tiles.get
            number = self._number(ref, key)
            for index in indices:
                tile_key = (number, level, index)
                keep.add(tile_key)
                tile = get(tile_key)
                if tile is not None:
                    found.append(tile)
                    continue
                missing.append(index)
                if not every_missing:
                    break
        return found, missing

    def tiles_of(self, ref: RunRef, key: str) -> list[Tile]:
        """Every cached tile of one series (without touching their recency)."""
        with self._lock:
            number = self._number(ref, key)
            found = self._tiles.items(lambda k: k[0] == number)
            return [t for _k, t in sorted(found, key=lambda kt: (kt[0][1], kt[0][2]))]

    def events(self, ref: RunRef, kind: str | None = None) -> list[Event]:
        """The run's events in the order they came, all or those of one kind."""
        with self._lock:
            if kind is None:
                return list(self._events.get(ref, ()))
            return list(self._by_kind.get(ref, {}).get(kind, ()))

    def event_kinds(self, ref: RunRef) -> set[str]:
        """The kinds of event the run has logged."""
        with self._lock:
            return set(self._by_kind.get(ref, ()))
