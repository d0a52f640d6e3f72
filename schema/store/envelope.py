"""Reading one series by step range, from its rollups or its raw points: the one implementation.

The agent (remote SQLite, standard library only), `reslog.open` (SQLite or PostgreSQL), the CLI
and the writer's restart handling all call these functions on a DBAPI cursor, so the rules
below exist once:

- Superseded points: where a series started over (a row in `takes`: from point id `since_id`
  on it restarted at `step`), its older points at that step or later are not part of it.
  Raw reads leave them out with one NOT EXISTS probe per point, and only for series that have
  takes at all (`has_takes`), so an ordinary series pays nothing.
- Fine levels (schema/store/buckets.py: 2 to 64 steps a bucket) are never stored: they are folded
  here from the raw points of the buckets asked for, with the writer's own fold, so a fine
  bucket is the aggregate a stored one of that width would be. Their reads are bounded by the
  buckets asked for (a fine tile: 1,024 buckets, at most 65,536 steps).
- A sample of [start, stop) in at most `samples` rows (`SeriesReader.sample`): the raw points
  when the range holds at most `samples`; otherwise the coarsest level (fine or stored) that
  has a bucket in at least `samples` slots of the range, each row a run of consecutive buckets,
  the two ends refined down to raw points, so that every row lies inside [start, stop) and
  every row is exact: between samples/2 and `samples` rows. It reads O(samples + levels)
  stored rows, or the range's raw points where only a fine level is fine enough (a range
  narrower than 128 * `samples` steps).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from itertools import starmap

from schema.store import buckets, chunk_read
from schema.store.chunk_read import EVERY, Page, Series
from schema.store.folding import fold_width, pack_folded
from schema.store.rollup import (
    AGG_COLUMNS,
    AGG_FLOATS,
    LAST,
    STEP_LO,
    N,
    fold,
    merge,
    merge_all,
)
from schema.store.series_rows import SERIES_COLUMNS, agg_of, marker, series_rows  # noqa: F401

# The Agg fields of a series row, and of a bucket row after its first column (bucket).
SERIES_AGG = slice(2, 2 + len(AGG_COLUMNS))
LEVELS_AT = SERIES_COLUMNS.index("levels")
STEP_LO_AT = SERIES_COLUMNS.index("step_lo")
STEP_HI_AT = SERIES_COLUMNS.index("step_hi")


# -- raw points ---------------------------------------------------------------------------------


# (id, step, wall, value) of a series' current points with start <= step < stop, by step then
# id (value None = NaN), paged by `after_id`: the envelope's raw rows are chunk_read's.
raw_points = chunk_read.series_rows


def _raw_rows(s: Series, start: int, stop: int, page: Page = EVERY) -> list:
    """(step, wall, value) of the series' current points with start <= step < stop, by step
    then id."""
    return [r[1:] for r in chunk_read.series_rows(s, start, stop, page)]


def count_raw(s: Series, start: int, stop: int, limit: int) -> int:
    """Current points with start <= step < stop, counted up to `limit`."""
    return chunk_read.count_rows(s, start, stop, limit)


# -- rollups ------------------------------------------------------------------------------------


def _bucket_range(cur, p: str, columns: str, run_id, key_id, level, lo, hi) -> None:
    """Execute a read of `columns` of one level's rows with lo <= bucket <= hi, by bucket: one
    range of the rollups primary key."""
    cur.execute(
        f"SELECT {columns} FROM rollups WHERE run_id = {p} AND key_id = {p} AND level = {p}"
        f" AND bucket >= {p} AND bucket <= {p} ORDER BY bucket",
        [run_id, key_id, level, lo, hi],
    )


def bucket_rows(cur, p: str, run_id: int, key_id: int, level: int, lo: int, hi: int) -> list:
    """Stored rows (bucket, *AGG_COLUMNS) of one level with lo <= bucket <= hi, by bucket."""
    _bucket_range(cur, p, "bucket, " + ", ".join(AGG_COLUMNS), run_id, key_id, level, lo, hi)
    return cur.fetchall()


def fine_rows(s: Series, level: int, lo: int, hi: int, before_id: int | None = None) -> list:
    """bucket_rows() of a fine level (lo <= bucket <= hi), folded from the raw points (those
    with an id below `before_id` when given: a snapshot's points, read in a later one)."""
    rows, start, width = _fine_raw(s, level, lo, hi, before_id)
    sh = buckets.shift(level)
    return [(agg[STEP_LO] >> sh, *agg) for agg in fold_width(rows, start, width)]


def _fine_raw(s: Series, level: int, lo: int, hi: int, before_id: int | None) -> tuple:
    """(_raw_rows() of the steps that buckets lo..hi of a fine `level` cover, the first of those
    steps, the level's width): what a fold of them into its buckets takes."""
    sh = buckets.shift(level)
    rows = _raw_rows(s, lo << sh, (hi + 1) << sh, Page(before_id=before_id))
    return rows, lo << sh, 1 << sh


def tile_rows(s: Series, level: int, first: int, count: int) -> list:
    """[(tile index, rows)] of `count` tiles from `first` (schema.store.buckets.TILE_BUCKETS buckets
    each; level 0: steps), read with one query: level 0 rows are raw (step, wall, value),
    others buckets (AGG_COLUMNS), stored or (fine levels) folded from raw points. Every tile of
    the range is listed, empty ones too."""
    lo = first * buckets.TILE_BUCKETS
    hi = (first + count) * buckets.TILE_BUCKETS  # exclusive, in buckets (level 0: steps)
    if level == 0:
        found = _raw_rows(s, lo, hi)
        where = [r[0] for r in found]  # steps
    else:
        if buckets.is_fine(level):
            rows = fine_rows(s, level, lo, hi - 1)
        else:
            rows = bucket_rows(s.cur, s.p, s.run_id, s.key_id, level, lo, hi - 1)
        found = [r[1:] for r in rows]
        where = [r[0] for r in rows]  # buckets
    out, start = [], 0
    for index in range(first, first + count):
        end = bisect_left(where, (index + 1) * buckets.TILE_BUCKETS, start)
        out.append((index, found[start:end]))
        start = end
    return out


# -- packed rows for the wire (the agent) -----------------------------------------------------
# None cannot be packed: NULLs are coalesced in SQL, and a `nulls` column flags those the counts
# cannot tell (vsum: bit 0, last: bit 1; vmin/vmax/min_at/max_at are NULL exactly when a bucket
# has no finite value, nonfinite_at when it has no NaN or inf). docs/protocol.md, "Sections".
BUCKET_LAYOUT = ",".join(
    [f"{c}:{'d' if c in AGG_FLOATS else 'q'}" for c in AGG_COLUMNS] + ["nulls:q"]
)
RAW_LAYOUT = "step:q,wall:d,value:d,null:B,id:q"  # a raw page: ids to page on
RAW_TILE_LAYOUT = "step:q,wall:d,value:d,null:B"  # a raw tile
_PACKED_BUCKET_COLUMNS = (
    "n, nan, posinf, neginf, coalesce(vmin, 0.0), coalesce(vmax, 0.0),"
    " coalesce(min_at, 0), coalesce(max_at, 0), coalesce(vsum, 0.0), step_lo, step_hi,"
    " coalesce(last, 0.0), wall_lo, wall_hi, bits, coalesce(nonfinite_at, 0),"
    " (vsum IS NULL) + 2 * (last IS NULL)"
)


def packed_buckets(
    cur, p: str, run_id: int, key_id: int, level: int, lo: int, hi: int, row: struct.Struct
) -> bytes:
    """bucket_rows() packed in BUCKET_LAYOUT, straight off the cursor (no list of tuples)."""
    _bucket_range(cur, p, _PACKED_BUCKET_COLUMNS, run_id, key_id, level, lo, hi)
    return b"".join(starmap(row.pack, cur))


def packed_fine(
    s: Series, level: int, lo: int, hi: int, row: struct.Struct, before_id: int | None = None
) -> bytes:
    """fine_rows() packed in BUCKET_LAYOUT, as packed_buckets() packs stored ones: from the
    chunks' decoded columns through numpy where it imports (~10x quicker a point), else from
    rows through the builtins."""
    folding_numpy = chunk_read.numpy_fold()
    if folding_numpy is not None:
        sh = buckets.shift(level)
        start, stop = lo << sh, (hi + 1) << sh
        page = Page(before_id=before_id)
        p = chunk_read.series_points(s, start, stop, page)
        return folding_numpy.packed(p.steps, p.walls, p.values, start, 1 << sh)
    rows, start, width = _fine_raw(s, level, lo, hi, before_id)
    return pack_folded(rows, start, width, row)


def packed_raw(
    s: Series, start: int, stop: int, row: struct.Struct, page: Page = EVERY, *, ids: bool = True
) -> bytes:
    """raw_points() packed in RAW_LAYOUT, or RAW_TILE_LAYOUT without `ids`."""
    found = raw_points(s, start, stop, page)
    if ids:
        packed = [(st, w, 0.0 if v is None else v, v is None, i) for i, st, w, v in found]
    else:
        packed = [(st, w, 0.0 if v is None else v, v is None) for _i, st, w, v in found]
    return b"".join(starmap(row.pack, packed))


def series_row(cur, p: str, run_id: int, key_id: int):
    cur.execute(
        "SELECT " + ", ".join(SERIES_COLUMNS) + f" FROM series WHERE run_id = {p} AND key_id = {p}",
        [run_id, key_id],
    )
    return cur.fetchone()


def has_takes(cur, p: str, run_id: int, key_id: int) -> bool:
    """Whether one series ever started over (its raw reads must leave superseded points out)."""
    cur.execute(
        f"SELECT 1 FROM takes WHERE run_id = {p} AND key_id = {p} LIMIT 1", [run_id, key_id]
    )
    return cur.fetchone() is not None


def series_with_takes(cur) -> set:
    """(run_id, key_id) of every series that ever started over (a small table)."""
    cur.execute("SELECT DISTINCT run_id, key_id FROM takes")
    return {(int(r), int(k)) for r, k in cur.fetchall()}


# -- the envelope -------------------------------------------------------------------------------


def point_agg(step: int, wall: float, value) -> tuple:
    """The aggregate of one raw point (a row of count 1)."""
    return fold([step], [wall], [value])


class SeriesReader:
    """The envelope reads of one series on one cursor."""

    def __init__(self, cur, paramstyle: str, run_id: int, key_id: int, *, has_takes: bool):
        self.series = Series(cur, marker(paramstyle), run_id, key_id, has_takes)

    def count(self, start: int, stop: int, limit: int) -> int:
        return count_raw(self.series, start, stop, limit)

    def buckets(self, level: int, lo: int, hi: int) -> list:
        s = self.series
        return bucket_rows(s.cur, s.p, s.run_id, s.key_id, level, lo, hi)

    def part(self, level: int, start: int, stop: int) -> list:
        """Aggregates exactly covering [start, stop), by step: whole buckets of a stored
        `level` in the middle, the ends refined one level down, raw points at level 0."""
        if stop <= start:
            return []
        if level == 0:
            rows = _raw_rows(self.series, start, stop)
            return [point_agg(*row) for row in rows]
        sh = buckets.shift(level)
        lo = -((-start) >> sh)  # first bucket starting at or after `start`
        hi = stop >> sh  # one past the last bucket ending at or before `stop`
        if lo >= hi:
            return self.part(level - 1, start, stop)
        middle = [agg_of(row, 1) for row in self.buckets(level, lo, hi - 1)]
        return self.part(level - 1, start, lo << sh) + middle + self.part(level - 1, hi << sh, stop)

    def slots(self, level: int, start: int, stop: int) -> list:
        """One aggregate per bucket of a stored `level` holding points in [start, stop) (those
        at the ends cut at the range), by step."""
        sh = buckets.shift(level)
        out, at = [], None
        for agg in self.part(level, start, stop):
            b = agg[STEP_LO] >> sh
            if b == at:
                out[-1] = merge(out[-1], agg)
            else:
                out.append(agg)
                at = b
        return out

    def sample(self, series, start, stop, samples: int) -> tuple:
        """(level, width, rows, firsts): the current points with start <= step < stop (None:
        no bound) in at most `samples` exact aggregates, by step; `firsts` maps each row's
        first step to the value of its first point there (None: NaN).

        At most `samples` points: one row a point (level 0, width 1). More: between
        samples/2 and `samples` rows (fewer only where the range holds fewer distinct steps:
        a row never splits a step), each `width` steps of a gapless series. From the coarsest
        stored level with a bucket in at least samples/2 slots of the range, each row a run
        of consecutive buckets (a sparse range goes finer); where no stored level is fine
        enough (a range of fewer than 64 * `samples` steps), level 0: the range's raw points
        folded into rows of `width` steps."""
        if series is None:
            return 0, 1, [], {}
        first, last = series[STEP_LO_AT], series[STEP_HI_AT]
        lo = first if start is None else max(int(start), first)
        hi = last + 1 if stop is None else min(int(stop), last + 1)
        if hi <= lo:
            return 0, 1, [], {}
        if self.count(lo, hi, samples + 1) <= samples:
            rows = self.part(0, lo, hi)
            return 0, 1, rows, {r[STEP_LO]: r[LAST] for r in rows}
        need = -(-samples // 2)
        top = max(1, buckets.level_for(hi - 1 - lo, samples, series[LEVELS_AT]))
        for level in range(top, 0, -1):
            if (hi - 1 - lo) // buckets.width(level) + 1 < need:
                continue
            rows = self.slots(level, lo, hi)
            if len(rows) >= need:
                k = -(-len(rows) // samples)
                rows = merge_to(rows, samples)
                return level, k * buckets.width(level), rows, self.firsts(rows)
        raw = _raw_rows(self.series, lo, hi)
        width = -(-(hi - lo) // samples)
        rows = fold_width(raw, lo, width)
        if len(rows) < need and width > 1:  # clustered points: rows of whole steps, merged
            rows = merge_to(fold_width(raw, lo, 1), samples)
            width = 1
        firsts, at = {}, 0
        for row in rows:  # the raw rows are in step order: each row's first point is there
            at = bisect_left(raw, (row[STEP_LO],), at)
            firsts[row[STEP_LO]] = raw[at][2]
        return 0, width, rows, firsts

    def firsts(self, rows: list) -> dict:
        """{first step: value of the first current point there} of aggregates (value None =
        NaN): a row of one point is its own; the others cost one index probe each, a few
        hundred to a query."""
        out = {r[STEP_LO]: r[LAST] for r in rows if r[N] == 1}
        steps = [r[STEP_LO] for r in rows if r[N] != 1]
        out.update(chunk_read.first_values(self.series, steps))
        return out


def merge_to(aggs: list, rows: int) -> list:
    """Consecutive aggregates (by step) combined in equal runs so that at most `rows` remain;
    exact, since aggregates combine exactly (vsum aside)."""
    if len(aggs) <= rows:
        return aggs
    k = -(-len(aggs) // rows)
    return [merge_all(aggs[i : i + k]) for i in range(0, len(aggs), k)]
