"""One tile's rows, read and packed for the agent's reply: raw points (level 0), fine buckets
folded from them (levels < 0), or stored buckets; consecutive raw and fine tiles read at once
where numpy folds and packs them, then cut by step (reslog/agent/store.py's `tiles`; the tile
workers of reslog/agent/tile_workers.py run read_tile too).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive; numpy
where it imports (schema.store.chunk_read.numpy_modules).
"""

from __future__ import annotations

from reslog.agent.wire import BUCKET_LAYOUT, BUCKET_ROW, RAW_TILE_LAYOUT, RAW_TILE_ROW
from schema.store import buckets, chunk_read
from schema.store.chunk_read import Page, Series
from schema.store.envelope import packed_buckets, packed_fine, packed_raw


def _packed_raw_numpy(series: Series, start: int, stop: int, page: Page) -> bytes:
    """packed_raw(..., RAW_TILE_ROW, ids=False) byte for byte, packed by numpy from the decoded
    columns: a tuple and a struct.pack a point cost ~1 us, 0.8 s of the 34M store's first view
    (8 series drawn raw, 800k points)."""
    np = chunk_read.numpy_modules()[0]
    p = chunk_read.series_points(series, start, stop, page)
    steps, walls, values = p.steps, p.walls, p.values
    null = np.isnan(values)
    rows = np.empty(len(steps), dtype=_raw_tile_dtype(np))
    rows["step"], rows["wall"], rows["null"] = steps, walls, null
    rows["value"] = np.where(null, 0.0, values)  # NaN travels as 0 and the flag
    return rows.tobytes()


def _raw_tile_dtype(np, layout: str = RAW_TILE_LAYOUT):
    """A layout (RAW_TILE_LAYOUT) as a packed numpy record (little-endian, no padding: the
    bytes of its struct row, RAW_TILE_ROW)."""
    codes = {"q": "<i8", "d": "<f8", "B": "u1"}
    fields = [field.split(":") for field in layout.split(",")]
    return np.dtype([(name, codes[code]) for name, code in fields])


# Consecutive raw tiles of a series read with one query and one decode of the chunks under
# them (at most 64: 65,536 steps, 1.6 MB of rows a read), then cut into tiles by step. A
# sparse series drawn raw (an eval key: a point in 1,000 steps) had a read a tile, each
# decoding a whole chunk for a point or none: the 34M store's 776 raw tiles took 900 ms so,
# 20 ms in runs of 64.
RAW_TILES_A_READ = 64
# Consecutive fine tiles of a series likewise, up to the same 65,536 steps a read (a tile of
# 8-step buckets covers 8,192): one decode of each chunk under them and one fold, instead of a
# decode of every chunk a tile touches and a fold a tile (the 6.8M page's 120 tiles of level -3
# decoded 320 chunks of 40 series for 240). The buckets are the same: none spans two tiles.
STEPS_A_READ = RAW_TILES_A_READ * buckets.TILE_BUCKETS


def tiles_a_read(level: int) -> int:
    """Consecutive tiles of `level` read at once where numpy folds and packs them (else 1):
    RAW_TILES_A_READ raw ones, fine ones up to STEPS_A_READ steps, stored ones 1."""
    if level > 0 or not chunk_read.has_numpy():
        return 1
    return max(1, STEPS_A_READ // buckets.tile_range(level, 1)[0])


def per_tile(data: bytes, level: int, index: int, count: int) -> list:
    """The rows of `count` raw or fine tiles from `index` on, read at once, cut at the tiles'
    first steps (rows come by step: a raw point's, a bucket's first); one tile: as it is."""
    if count == 1:
        return [data]
    np = chunk_read.numpy_modules()[0]
    if level == 0:
        row, steps = RAW_TILE_ROW, np.frombuffer(data, dtype=_raw_tile_dtype(np))["step"]
    else:
        table = np.frombuffer(data, dtype=_raw_tile_dtype(np, BUCKET_LAYOUT))
        row, steps = BUCKET_ROW, table["step_lo"]
    firsts = [buckets.tile_range(level, index + i)[0] for i in range(1, count)]
    bounds = [0, *np.searchsorted(steps, firsts).tolist(), len(steps)]
    view = memoryview(data)  # slices without a copy: the reply joins them once
    return [view[bounds[i] * row.size : bounds[i + 1] * row.size] for i in range(count)]


def read_tile(cur, job) -> bytes:
    """One tile's rows, packed: raw points (level 0), buckets of a fine level folded from them
    (levels < 0), or stored buckets. Raw points are read up to the reply's `high`, so any
    snapshot from the reply's on reads them alike."""
    run_id, key_id, level, index, has, high, *more = job
    count = more[0] if more else 1  # raw or fine tiles read at once (tiles_a_read)
    size = buckets.TILE_BUCKETS
    lo = index * size
    series = Series(cur, "?", run_id, key_id, has)
    if level == 0:
        page = Page(before_id=high + 1)
        if chunk_read.has_numpy():  # `count` consecutive raw tiles at once (RAW_TILES_A_READ)
            return _packed_raw_numpy(series, lo, lo + count * size, page)
        return packed_raw(series, lo, lo + size, RAW_TILE_ROW, page, ids=False)
    if buckets.is_fine(level):
        hi = lo + count * size - 1
        return packed_fine(series, level, lo, hi, BUCKET_ROW, before_id=high + 1)
    return packed_buckets(cur, "?", run_id, key_id, level, lo, lo + size - 1, BUCKET_ROW)


def run_of(job) -> int:
    return job[0]
