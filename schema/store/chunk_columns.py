"""The columns series_columns (schema/store/chunk_read.py) decodes chunks into, and the cache
of the chunks that the keys of one keyset share within one snapshot (shared_chunks: the agent's
tiles of one reply).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive. Used only
where numpy imports: the numpy modules come in as arguments.
"""

from __future__ import annotations

from contextlib import contextmanager

from schema.store import chunk_codec

# Inside shared_chunks(): chunk id -> (its version 1 streams of every column or None, its
# decoded steps, walls and ids), so the keys of a keyset read in one snapshot (a page's tiles)
# decode those once; and the bytes it holds, bounded by SHARED_BYTES.
_shared: dict | None = None
_shared_bytes = [0]
SHARED_BYTES = 64 << 20


@contextmanager
def shared_chunks():
    """Within: series_columns() reads a chunk's steps, walls and ids (and a version 1 chunk,
    verified whole) once for every key of its keyset it reads, up to SHARED_BYTES. Only for
    reads in one snapshot (the agent's tiles of one reply, in one process): a chunk id names
    the same bytes there. A page's series are keys of a few keysets: the 6.8M store's 40 fine
    series read each of their runs' chunks 5 times, each whole (version 1, 20 or 90 keys)."""
    global _shared
    before, _shared = _shared, {}
    _shared_bytes[0] = 0
    try:
        yield
    finally:
        _shared = before


def shared_cache() -> dict | None:
    """The cache shared_chunks() holds open, or None outside it."""
    return _shared


def shared_into(fast, con, chunk_id: int, col: int, data: tuple, shared: dict, out) -> bool:
    """Column `col` of a chunk decoded into `out` (whole), its steps, walls and ids taken from
    `shared` or kept there; False (nothing done) where the chunk has no ids stream. `fast`:
    schema.store.chunk_codec_numpy."""
    kept = shared.get(chunk_id)
    streams = kept[0] if kept is not None else None
    if streams is None:
        if con is not None:
            with con.blobopen("chunks", "data", chunk_id, readonly=True) as blob:
                whole = blob[0:1] == b"\x01"  # version 1: read and verified whole anyway
                streams = chunk_codec.read_streams(
                    lambda at, size: blob[at : at + size], len(blob), None if whole else [col]
                )
        else:
            whole = bytes(data[0][:1]) == b"\x01"
            streams = chunk_codec.picked_streams(data[0], None if whole else [col])
    if streams.ids is None:
        return False
    if streams.version == 1 and not 0 <= col < len(streams.values):
        raise ValueError(f"the chunk has {len(streams.values)} value columns, not a column {col}")
    n = streams.n
    out.reserve(n)
    steps, walls, values = (c[out.at : out.at + n] for c in out.columns)
    if kept is None:
        fast.decode_words(*streams.steps, n, steps)
        fast.decode_floats(*streams.walls, n, walls)
        ids = fast.decode_words(*streams.ids, n)
        v1 = streams.version == 1
        size = 24 * n + (sum(len(v[1]) for v in streams.values) if v1 else 0)
        if _shared_bytes[0] + size <= SHARED_BYTES:
            shared[chunk_id] = (streams if v1 else None, steps.copy(), walls.copy(), ids)
            _shared_bytes[0] += size
    else:
        steps[:], walls[:], ids = kept[1], kept[2], kept[3]
    out.defer_ids(n, ids, col)
    fast.decode_floats(*streams.values[col if streams.version == 1 else 0], n, values)
    out.at += n
    return True


def nth_step(np, out, limit: int) -> int:
    """The `limit`-th smallest step held."""
    return int(np.partition(out.columns[0][: out.at], limit - 1)[limit - 1])


class Columns:
    """(steps, walls, values) arrays filled from the front (`at`: the points held), and the
    points' ids, put together only when asked for (`ids()`): a scan returns no ids, and a read
    needs them only to order points of one step or to end a page. Deferred, a 100k-point
    scan writes a quarter less fresh memory (each new page faulted in costs ~4 us on this
    VM) and decodes no id stream (docs/benchmarks/store.md, "ids when asked for")."""

    def __init__(self, np, size: int, fast) -> None:
        self.np, self.fast, self.at = np, fast, 0
        # One allocation for the three: freed, it raises glibc's mmap and trim thresholds past
        # a scan's size, so the next scan's columns come from the heap instead of fresh pages
        # (each column mapped and faulted in anew: ~20 ns a point here).
        block = np.empty(3 * size, dtype=np.int64)
        self.columns = (
            block[:size],
            block[size : 2 * size].view(np.float64),
            block[2 * size :].view(np.float64),
        )
        # (at, n, ids, offset): rows at..at+n hold ids `ids` + offset, where `ids` is an
        # array or an id stream (kind, payload) not yet decoded.
        self._ids: list = []

    def reserve(self, n: int) -> None:
        """Room for n more points (a chunk whose row undercounts its points: grown, not cut;
        `reslog check` reports the row)."""
        if self.at + n > len(self.columns[0]):
            grown = self.at + n
            self.columns = tuple(
                self.np.concatenate((c[: self.at], self.np.empty(grown - self.at, c.dtype)))
                for c in self.columns
            )

    def defer_ids(self, n: int, ids, offset: int = 0) -> None:
        """The ids of the next n points (from `at`): an array or an id stream (kind, payload)."""
        self._ids.append((self.at, n, ids, offset))

    def add(self, part: tuple) -> None:
        """Points (ids, steps, walls, values) after those held."""
        m = len(part[0])
        self.reserve(m)
        self.defer_ids(m, part[0])
        for column, values in zip(self.columns, part[1:]):
            column[self.at : self.at + m] = values
        self.at += m

    def ids(self):
        """The ids of the points held, in their order (decoded now)."""
        out = self.np.empty(self.at, dtype=self.np.int64)
        for at, n, ids, offset in self._ids:
            into = out[at : at + n]
            if isinstance(ids, tuple):
                self.fast.decode_ids(*ids, n, into, offset)
                continue
            into[:] = ids
            if offset:
                into += offset
        self._ids = [(0, self.at, out, 0)]
        return out


class Points:
    """A read's steps, walls and values, and its ids (`ids()`): an array, or made on first use
    by the zero-argument function given instead."""

    __slots__ = ("_ids", "steps", "values", "walls")

    def __init__(self, steps, walls, values, ids) -> None:
        self.steps, self.walls, self.values, self._ids = steps, walls, values, ids

    def ids(self):
        if callable(self._ids):
            self._ids = self._ids()
        return self._ids


def in_step_order(np, steps, ids) -> bool:
    """Whether the points are already by step, then id (a run's chunks almost always are:
    sorting 100,000 points costs more than decoding them); `ids()` gives the ids, asked for
    only where two points share a step."""
    if len(steps) < 2:
        return True
    rising = steps[1:] > steps[:-1]
    if rising.all():
        return True
    ids = ids()
    return bool((rising | ((steps[1:] == steps[:-1]) & (ids[1:] > ids[:-1]))).all())


def kept_columns(part: tuple, start: int, stop: int, after, takes: list) -> tuple:
    """The (ids, steps, walls, values) columns of `part` in [start, stop), after `after`
    (step, id) and not superseded by `takes`."""
    ids, steps, walls, values = part
    keep = (steps >= start) & (steps < stop)
    if after is not None:
        keep &= (steps > after[0]) | (ids > after[1])
    for since, at in takes:
        keep &= ~((steps >= at) & (ids < since))
    if keep.all():
        return part
    return ids[keep], steps[keep], walls[keep], values[keep]
