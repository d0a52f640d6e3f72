"""Tiles: a fixed range of one series at one rollup level, the unit the viewer fetches and keeps.

Tile (level l, index i) covers the buckets [i * TILE_BUCKETS, (i + 1) * TILE_BUCKETS) of level l
(schema.store.buckets), at level 0 the raw points of those steps. A chart asks for the tiles its
view needs at the level its width wants; tiles arrive through the source's worker thread and
live in an LRU cache bounded by bytes (default 256 MB); a zoom's detail tiles idle for minutes
leave it earlier (SeriesCache.expire_detail). Points that arrive live after a tile was read are
folded into it with schema.store.rollup, the writer's own fold, so a cached tile stays equal to
what the store holds without being read again.

No Qt here. Not thread-safe by itself: SeriesCache calls it under its lock. A tile's columns are
replaced, never changed in place, so a reader holding them keeps a consistent snapshot.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from schema.store import buckets
from schema.store.rollup import AGG_COLUMNS, AGG_FLOATS, fold_buckets, merge

RAW_COLUMNS = ("step", "wall", "value")
DEFAULT_LIMIT_BYTES = 256 << 20
FLOATS = AGG_FLOATS | {"wall", "value"}  # the float columns of tiles; the rest are int64
_AGG_INDEX = {c: i for i, c in enumerate(AGG_COLUMNS)}


def empty_columns(level: int) -> dict[str, np.ndarray]:
    names = RAW_COLUMNS if level == 0 else AGG_COLUMNS
    return {c: np.empty(0, np.float64 if c in FLOATS else np.int64) for c in names}


def agg_at(cols: dict, i: int) -> tuple:
    """Row i of aggregate columns (a tile's, or a series section's) as a schema.store.rollup
    aggregate: the wire's NaN back to None where it stands for "no finite value" or a NaN last
    value, and its 0 back to None in steps that are not there."""
    out = []
    for name in AGG_COLUMNS:
        v = cols[name][i]
        v = v.item() if hasattr(v, "item") else v
        if name in ("vmin", "vmax", "last") and v is not None and v != v:
            v = None
        elif name == "vsum" and v is None:
            v = float("nan")
        out.append(v)
    if out[_AGG_INDEX["vmin"]] is None:
        out[_AGG_INDEX["min_at"]] = out[_AGG_INDEX["max_at"]] = None
    if not (out[_AGG_INDEX["nan"]] or out[_AGG_INDEX["posinf"]] or out[_AGG_INDEX["neginf"]]):
        out[_AGG_INDEX["nonfinite_at"]] = None
    return tuple(out)


def _agg_values(agg: tuple) -> dict[str, float]:
    return {
        c: (np.nan if agg[i] is None and c in FLOATS else 0 if agg[i] is None else agg[i])
        for i, c in enumerate(AGG_COLUMNS)
    }


class Tile:
    """One tile's columns (bucket aggregates, or raw step/wall/value), in step order."""

    __slots__ = ("cols", "epoch", "index", "level")

    def __init__(self, level: int, index: int, cols: dict[str, np.ndarray], epoch: int) -> None:
        self.level, self.index, self.epoch = level, index, epoch
        self.cols = cols

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.cols.values()) + 200

    @property
    def span(self) -> tuple[int, int]:
        """[first step, last step + 1) this tile covers."""
        return buckets.tile_range(self.level, self.index)


def folded(
    level: int,
    cols: dict[str, np.ndarray],
    steps: np.ndarray,
    walls: np.ndarray,
    values: np.ndarray,
) -> dict[str, np.ndarray]:
    """A tile's columns at `level` with live points (arrival order, all inside its span) added:
    new arrays, `cols` left as they are (SeriesCache folds outside its lock, readers keep their
    snapshot)."""
    if len(steps) == 0:
        return cols
    if level == 0:
        # After any stored point of the same step: the newer point comes last.
        at = np.searchsorted(cols["step"], steps, side="right")
        order = np.argsort(at, kind="stable")
        return {
            "step": np.insert(cols["step"], at[order], steps[order]),
            "wall": np.insert(cols["wall"], at[order], walls[order]),
            "value": np.insert(cols["value"], at[order], values[order]),
        }
    shift = buckets.shift(level)
    vals = [None if v != v else v for v in values.tolist()]
    deltas = fold_buckets(steps.tolist(), walls.tolist(), vals, shift)
    have = cols["step_lo"] >> shift  # each row's bucket
    order = sorted(deltas)
    at = np.searchsorted(have, order).tolist()
    merged: dict[int, tuple] = {}
    added: list[tuple[int, tuple]] = []  # (row it goes before, aggregate)
    for b, i in zip(order, at, strict=True):
        if i < len(have) and have[i] == b:
            merged[i] = merge(agg_at(cols, i), deltas[b])
        else:
            added.append((i, deltas[b]))
    new = {name: arr.copy() for name, arr in cols.items()} if merged else dict(cols)
    for i, agg in merged.items():
        for name, v in _agg_values(agg).items():
            new[name][i] = v
    if added:
        # One insert a column for every new bucket (a fine level's poll adds dozens: one
        # np.insert each cost ~8 ms a tile at level -1). Positions are rows of the columns
        # before, ascending: np.insert keeps their order.
        rows = [i for i, _agg in added]
        values_of = [_agg_values(agg) for _i, agg in added]
        for name in new:
            new[name] = np.insert(new[name], rows, [v[name] for v in values_of])
    return new


class TileCache:
    """Tiles by key (any hashable; SeriesCache uses (run, key name, level, index)), least
    recently used first out once their bytes pass `limit_bytes`.

    Tiles in `keep` (those the charts in view use or wait for) are never evicted: a page whose
    tiles need more than the limit holds them all, and `over` says by how much (SeriesCache
    reports it), instead of evicting tiles as fast as they arrive and never drawing them."""

    def __init__(
        self,
        limit_bytes: int = DEFAULT_LIMIT_BYTES,
        on_gone: Callable[[Hashable], None] | None = None,
    ) -> None:
        """`on_gone`: told the key of every tile evicted or dropped."""
        self.limit_bytes = int(limit_bytes)
        self._tiles: OrderedDict[Hashable, Tile] = OrderedDict()
        self._used: dict[Hashable, float] = {}  # key: time.monotonic() of its last put or get
        self.bytes = 0
        self.evicted = 0
        self.expired = 0
        self.keep: set[Hashable] = set()
        self._all_kept: set[Hashable] | None = None  # the `keep` every cached tile was in
        self._on_gone = on_gone

    def __len__(self) -> int:
        return len(self._tiles)

    @property
    def over(self) -> int:
        """Bytes held above the limit because the charts in view use them."""
        return max(0, self.bytes - self.limit_bytes)

    def get(self, key: Hashable) -> Tile | None:
        tile = self._tiles.get(key)
        if tile is not None:
            self._tiles.move_to_end(key)
            self._used[key] = time.monotonic()
        return tile

    def put(self, key: Hashable, tile: Tile) -> None:
        old = self._tiles.pop(key, None)
        if old is not None:
            self.bytes -= old.nbytes
        self._tiles[key] = tile
        self._used[key] = time.monotonic()
        self.bytes += tile.nbytes
        if key not in self.keep:
            self._all_kept = None
        self._shrink(spare=key)

    def set_limit(self, limit_bytes: int) -> None:
        self.limit_bytes = int(limit_bytes)
        self._all_kept = None
        self._shrink()

    def _shrink(self, spare: Hashable = None) -> None:
        """Evict least recently used tiles until under the limit, never one the view keeps.
        A view kept whole between polls keeps its tiles without reading them (ViewMemo), so a
        kept tile can lie at the old end: it goes to the recent end (it is in use) and the scan
        goes on, until only kept tiles are left. Then, until a tile the view does not keep is
        put or the view changes, there is nothing to scan for: a page held over the bound
        loads thousands of tiles, and each would have scanned all the others."""
        if self._all_kept is self.keep:
            return
        passed = 0  # kept tiles moved to the recent end by this scan
        while self.bytes > self.limit_bytes and passed < len(self._tiles):
            key = next(iter(self._tiles))
            if key in self.keep or key == spare:
                self._tiles.move_to_end(key)
                passed += 1
                continue
            self._remove(key)
            self.evicted += 1
        if self.bytes > self.limit_bytes and (spare is None or spare in self.keep):
            self._all_kept = self.keep

    def expire(self, idle_s: float, which: Callable[[Hashable], bool]) -> int:
        """Drop the tiles `which` matches that no one has read for `idle_s` seconds and the
        charts in view do not keep; the bytes dropped. Run now and then (each minute): a view
        kept whole between polls reads no tile (resplot/data/views.py, ViewMemo), so the tiles
        in view now are stamped as read here, and a tile that leaves the view counts as idle
        from the last run at the latest. (Stamped at every view change instead, the 4,000
        tiles of a 12-run page cost a live poll 3.7 ms.)"""
        now = time.monotonic()
        for key in self.keep:
            if key in self._used:
                self._used[key] = now
        before = now - idle_s
        gone = [
            key
            for key, used in self._used.items()
            if used <= before and key not in self.keep and which(key)
        ]
        freed = 0
        for key in gone:
            freed += self._remove(key)
        self.expired += len(gone)
        return freed

    def drop(self, which: Callable[[Hashable], bool]) -> None:
        for key in [k for k in self._tiles if which(k)]:
            self._remove(key)

    def _remove(self, key: Hashable) -> int:
        nbytes = self._tiles.pop(key).nbytes
        del self._used[key]
        self.bytes -= nbytes
        if self._on_gone is not None:
            self._on_gone(key)
        return nbytes

    def items(self, which: Callable[[Hashable], bool]) -> list[tuple[Hashable, Tile]]:
        """Tiles whose key matches, without touching their recency."""
        return [(k, t) for k, t in self._tiles.items() if which(k)]

    def peek(self, key: Hashable) -> Tile | None:
        """A tile without touching its recency (live folding is not a use)."""
        return self._tiles.get(key)

    def resized(self, tile: Tile, before: int) -> None:
        """Account for a tile whose columns grew from `before` bytes (live points folded in)."""
        self.bytes += tile.nbytes - before
        self._shrink()
