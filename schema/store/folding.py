"""Raw points folded into buckets of any width: the aggregates of a fine level, and of the rows
of `history(samples=N)` where no stored level is fine enough.

Both read every raw point of a range (a fine view of a training page: 0.8M; a history range:
up to 64 * N), so this is a hot loop. A series logged at a fixed stride (nearly every one) has
the same number of points in every whole bucket; where that is a few (MAX_CHUNK), its finite
buckets are folded column-wise by the builtins over equal chunks (`map(min, ...)`,
`tuple.index`), with no Python code run per bucket. The buckets at the ends, the irregular
series and the buckets holding NaN or inf take `schema.store.rollup.fold`, the writer's own fold,
bucket by bucket: both ways give the same aggregates (tests/resplot/sources/test_fine_levels.py
compares them over every shape of series).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import getitem
from typing import Any

from schema.store.rollup import BITS, LAST, MAX_BITS, NOT_FLAGS, VMIN, VSUM, fold

# Points a bucket up to which the column-wise fold pays. It saves fold()'s cost a bucket (~3 µs)
# and adds ~0.3 µs a point of its own (the columns, the chunks, the stride check): 63,000
# points of a key logged every step fold in 22 ms against 27 ms bucket by bucket at 8 points a
# bucket, the same at 16, 20 against 14 ms at 63.
MAX_CHUNK = 8


def fold_width(rows: list, start: int, width: int) -> list:
    """Aggregates of raw `rows` (step, wall, value; value None = NaN; by step then id) cut into
    rows of `width` steps from `start` (any width, not only a power of two), by step."""
    return _folded(rows, start, width, None, _tuples, lambda aggs: aggs)


def pack_folded(rows: list, start: int, width: int, row: struct.Struct) -> bytes:
    """fold_width(rows, start, width) packed in envelope.BUCKET_LAYOUT: the agent's fine tiles,
    packed straight from the columns (no tuple a bucket)."""

    def pack_middle(columns: list) -> list:
        return [b"".join(map(row.pack, *columns, repeat(0)))]  # the last: `nulls`, none here

    return b"".join(
        _folded(rows, start, width, 0, pack_middle, lambda aggs: [pack_each(aggs, row)])
    )


def pack_each(aggs: list, row: struct.Struct) -> bytes:
    """Aggregates packed in BUCKET_LAYOUT one by one (_packable() each)."""
    return b"".join([row.pack(*_packable(agg)) for agg in aggs])


def fold_each(rows: list, start: int, width: int) -> list:
    """fold_width() bucket by bucket through fold(): the reference, and the way for what the
    column-wise fold cannot take."""
    if not rows:
        return []
    steps = [r[0] for r in rows]
    walls = [r[1] for r in rows]
    values = [r[2] for r in rows]
    out, i, n = [], 0, len(steps)
    while i < n:
        row_end = start + ((steps[i] - start) // width + 1) * width
        j = bisect_left(steps, row_end, i)
        out.append(fold(steps[i:j], walls[i:j], values[i:j], ordered=True))
        i = j
    return out


def _packable(agg: tuple) -> tuple:
    """An aggregate as a BUCKET_LAYOUT row: None cannot be packed (envelope's
    _PACKED_BUCKET_COLUMNS does the same in SQL for stored buckets)."""
    vsum, last = agg[VSUM], agg[LAST]
    nulls = (vsum != vsum) + 2 * (last is None)
    out = [0 if v is None else v for v in agg]
    if vsum != vsum:
        out[VSUM] = 0.0
    if last is None:
        out[LAST] = 0.0
    if agg[VMIN] is None:
        out[VMIN] = out[VMIN + 1] = 0.0
    return (*out, nulls)


def _tuples(columns: list) -> list:
    return list(zip(*columns))


def _folded(
    rows: list,
    start: int,
    width: int,
    missing: Any,
    middle: Callable[[list], list],
    each: Callable[[list], list],
) -> list:
    """The pieces of a fold, in step order: the ends (and all of an irregular series) by
    fold_each() given to `each`, the whole equal buckets between as columns given to `middle`
    (`missing` fills the columns a finite bucket has no value for)."""

    def ends(part: list) -> list:
        return each(fold_each(part, start, width))

    stride = rows[1][0] - rows[0][0] if len(rows) > 1 else 0
    if 0 < stride <= width and width % stride == 0 and width // stride <= MAX_CHUNK:
        steps, walls, values = zip(*rows)
        cut = _equal_run(steps, start, width, stride)
        if cut is not None:
            a, b, k = cut
            columns = _chunk_columns(steps[a:b], walls[a:b], values[a:b], k, missing)
            if columns is not None:
                return ends(rows[:a]) + middle(columns) + ends(rows[b:])
    return ends(rows)


def _equal_run(steps: tuple, start: int, width: int, stride: int) -> tuple[int, int, int] | None:
    """(a, b, k): steps[a:b] fill whole buckets of `width` steps with exactly k points each;
    None when the series is not at a fixed `stride` or holds fewer than two such buckets."""
    n, first = len(steps), steps[0]
    if steps != tuple(range(first, first + n * stride, stride)):
        return None
    k = width // stride  # points in every whole bucket
    a = bisect_left(steps, start + ((first - start) // width + 1) * width)
    b = a + (n - a) // k * k
    return (a, b, k) if b - a >= 2 * k else None


def _chunk_columns(steps: tuple, walls: tuple, values: tuple, k: int, missing: Any) -> list | None:
    """The aggregate's columns (schema.store.rollup.AGG_COLUMNS order) of whole buckets of exactly
    `k` points each, as fold() makes them; None when a value is NaN or infinite (fold() says how:
    the caller uses it). `missing`: the first-non-finite column (no bucket here has one)."""
    vs = _chunks(values, k)
    try:
        sums = list(map(float, map(sum, vs)))  # fold() keeps vsum a float
    except TypeError:  # a None: NaN as the store keeps it
        return None
    total = sum(sums)
    if total - total != 0.0:  # NaN and inf propagate through the sum
        return None
    ss, ws = _chunks(steps, k), _chunks(walls, k)
    wall_lo: Iterable[float]
    wall_hi: Iterable[float]
    wall_sum = sum(walls)
    # As logged (a linear pass), each bucket's ends; a NaN wall (a PostgreSQL store can hold
    # one) can pass for sorted, so it takes fold()'s min and max
    if wall_sum == wall_sum and sorted(walls) == list(walls):
        wall_lo, wall_hi = walls[::k], walls[k - 1 :: k]
    else:
        wall_lo, wall_hi = map(min, ws), map(max, ws)
    vmins, vmaxs = list(map(min, vs)), list(map(max, vs))
    bits = [NOT_FLAGS] * len(vs)
    for i in compress(range(len(vs)), map(float.is_integer, sums)):  # rare among floats
        if vmins[i] >= 0 and vmaxs[i] < MAX_BITS:
            bits[i] = fold(list(ss[i]), list(ws[i]), list(vs[i]), ordered=True)[BITS]
    zeros = repeat(0)
    return [
        repeat(k, len(vs)),
        zeros,
        zeros,
        zeros,
        vmins,
        vmaxs,
        map(getitem, ss, map(tuple.index, vs, vmins)),
        map(getitem, ss, map(tuple.index, vs, vmaxs)),
        sums,
        steps[::k],
        steps[k - 1 :: k],
        values[k - 1 :: k],
        wall_lo,
        wall_hi,
        bits,
        repeat(missing),
    ]


def _chunks(seq: tuple, k: int) -> list:
    """`seq` cut into tuples of `k` (its length a multiple of `k`)."""
    return list(zip(*[iter(seq)] * k))
