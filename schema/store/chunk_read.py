"""Reading points back from chunks and from the rows written before them: the one iterator.

Points live in two places (docs/store.md, "Points as compressed columns"): chunks, each the
points of one keyset (keys logged together) as compressed columns with their ids, and the
`points` rows of stores written before revision 0006 that `reslog upgrade` has not converted
yet. Every reader of raw points (schema/store/envelope.py, schema/store/read.py, the agent,
resplot's PostgreSQL source, `reslog check`) takes both through these functions (and, by id,
schema/store/points_by_id.py's), so the rules below exist once:

- A point's id: row i of a chunk with k value columns holds k points, with ids
  `ids[i] .. ids[i] + k - 1` in column order. Ids are unique in the store and only grow, as
  `points.id` did, so "what is new since cursor C" is "ids > C" whatever sealing or a
  conversion did in between: they move points into other chunks with the same ids, in one
  transaction.
- Superseded points (a row in `takes`: from point id `since_id` on, the series restarted at
  `step`) are left out by id and step, as the row store's NOT EXISTS probe did.
- Values come out as floats with NaN as None (the row store's convention, which every caller
  of these row functions keeps); `series_columns` gives the columns as they are stored (its
  arrays and the chunks shared within one snapshot: schema/store/chunk_columns.py).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive. Where
numpy imports (and schema/store/chunk_codec_numpy.py is there), chunks decode through it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from schema.store import chunk_codec, chunk_columns

_numpy: tuple | None = None  # (numpy, schema.store.chunk_codec_numpy) or (None, None), once tried


def numpy_modules() -> tuple:
    """(numpy, schema.store.chunk_codec_numpy), or (None, None) where numpy does not import (the
    agent's host may have none): imported on first use, so `reslog ls` and `import reslog`
    never pay for numpy."""
    global _numpy
    if _numpy is None:
        try:
            import numpy

            from schema.store import chunk_codec_numpy
        except ImportError:  # pragma: no cover - exercised by the agent's Python 3.8 test
            _numpy = (None, None)
        else:
            _numpy = (numpy, chunk_codec_numpy)
    return _numpy


def numpy_if_imported():
    """numpy if numpy_modules() has imported it, else None: never imports, nor waits on an
    import in flight on another thread (the agent's `hello` starts one)."""
    mods = _numpy
    return mods[0] if mods is not None else None


def has_numpy() -> bool:
    return numpy_modules()[0] is not None


def numpy_fold():
    """schema.store.folding_numpy where numpy imports, else None."""
    if not has_numpy():
        return None
    try:
        from schema.store import folding_numpy
    except ImportError:  # pragma: no cover - numpy imported a moment ago
        return None
    return folding_numpy


# Points per step read a caller's `limit` may pull in before an early stop is considered.
_TAKES_SQL = "SELECT since_id, step FROM takes WHERE run_id = {p} AND key_id = {p}"


def decode(blob, columns=None) -> chunk_codec.Chunk:
    """A chunk's columns (numpy arrays where numpy imports, else arrays)."""
    data = bytes(blob)  # sqlite3 gives bytes, psycopg memoryview
    fast = numpy_modules()[1]
    return fast.decode(data, columns) if fast is not None else chunk_codec.decode(data, columns)


def key_list(text: str) -> list:
    return [int(x) for x in text.split(",")] if text else []


# -- where a key's points are ----------------------------------------------------------------------


def keyset_columns(cur, p: str, run_id: int, key_id: int) -> list:
    """[(keyset id, column, k)] of the run's keysets holding the key."""
    cur.execute(f"SELECT id, key_ids FROM keysets WHERE run_id = {p}", (run_id,))
    out = []
    for ks, text in cur.fetchall():
        keys = key_list(text)
        if key_id in keys:
            out.append((int(ks), keys.index(key_id), len(keys)))
    return out


def takes_of(cur, p: str, run_id: int, key_id: int) -> list:
    """[(since_id, step)] of the series' takes."""
    cur.execute(_TAKES_SQL.format(p=p), (run_id, key_id))
    return [(int(a), int(b)) for a, b in cur.fetchall()]


class Series(NamedTuple):
    """One series read through one DBAPI cursor: `p` is the cursor's placeholder
    (schema.store.series_rows.marker), `has_takes` whether the series ever started over (only
    then are its superseded points looked for: an ordinary series pays nothing). What every
    read of a series' points here and in schema/store/envelope.py takes first."""

    cur: Any
    p: str
    run_id: int
    key_id: int
    has_takes: bool

    def keysets(self) -> list:
        """keyset_columns() of the series."""
        return keyset_columns(self.cur, self.p, self.run_id, self.key_id)

    def takes(self) -> list:
        """takes_of() the series where it has takes, else [] (not read)."""
        return takes_of(self.cur, self.p, self.run_id, self.key_id) if self.has_takes else []


class Page(NamedTuple):
    """Which of a step range's points a read gives (each None: no bound): with `after_id`, only
    those after (start, after_id) by step then id (paging: the last row's step as `start`, its
    id as `after_id`); with `before_id`, only points with a smaller id (a snapshot's points,
    read in a later one); at most `limit` of them."""

    after_id: int | None = None
    before_id: int | None = None
    limit: int | None = None


EVERY = Page()  # every current point of the range


def _current(takes: list, point_id: int, step: int) -> bool:
    return not any(at <= step and since > point_id for since, at in takes)


# -- one series by step ------------------------------------------------------------------------


def _legacy_rows(s: Series, start, stop, before_id, after) -> list:
    cur, p = s.cur, s.p
    sql = (
        f"SELECT id, step, wall, value FROM points WHERE run_id = {p} AND key_id = {p}"
        f" AND step >= {p} AND step < {p}"
    )
    params = [s.run_id, s.key_id, start, stop]
    if before_id is not None:
        sql += f" AND id < {p}"
        params.append(before_id)
    if after is not None:
        sql += f" AND (step > {p} OR id > {p})"
        params += list(after)
    cur.execute(sql, params)
    return cur.fetchall()


def _chunk_rows(blob, col: int, k: int, start, stop, before_id, after) -> list:
    """(id, step, wall, value) of one chunk's column with start <= step < stop."""
    return _column_rows(decode(blob, [col]), col, start, stop, before_id, after)


def _column_rows(c, col: int, start, stop, before_id, after) -> list:
    """(id, step, wall, value) of a decoded chunk's column with start <= step < stop."""
    np = numpy_modules()[0]
    if np is not None:
        steps, walls, values = c.steps, c.walls, c.values[0]
        ids = c.ids + col
        keep = (steps >= start) & (steps < stop)
        if before_id is not None:
            keep &= ids < before_id
        if after is not None:
            keep &= (steps > after[0]) | (ids > after[1])
        if not keep.all():
            ids, steps, walls, values = ids[keep], steps[keep], walls[keep], values[keep]
        vals = [None if v != v else v for v in values.tolist()]
        return list(zip(ids.tolist(), steps.tolist(), walls.tolist(), vals))
    out = []
    for i, s in enumerate(c.steps):
        if not start <= s < stop:
            continue
        pid = c.ids[i] + col
        if before_id is not None and pid >= before_id:
            continue
        if after is not None and not (s > after[0] or pid > after[1]):
            continue
        v = c.values[0][i]
        out.append((pid, s, c.walls[i], None if v != v else v))
    return out


def series_rows(s: Series, start: int, stop: int, page: Page = EVERY) -> list:
    """(id, step, wall, value) of the series' current points with start <= step < stop, by
    step then id (value None = NaN), at most `page.limit` of them; with `page.after_id`, only
    those after (start, after_id) in that order (paging: the last row's step as `start`, its id
    as `after_id`). `page.before_id`: only points with a smaller id. Where numpy imports, these
    are series_columns' points (filtered and ordered by numpy, then a tuple made once a point,
    instead of a tuple a point sorted by a Python key function)."""
    if has_numpy():
        ids, steps, walls, values = series_columns(s, start, stop, page)
        vals = [None if v != v else v for v in values.tolist()]
        return list(zip(ids.tolist(), steps.tolist(), walls.tolist(), vals))
    cur, p = s.cur, s.p
    before_id, limit = page.before_id, page.limit
    after = None if page.after_id is None else (start, page.after_id)
    rows = _legacy_rows(s, start, stop, before_id, after)
    converting = bool(rows)
    for ks, col, k in s.keysets():
        cur.execute(
            f"SELECT data FROM chunks WHERE keyset_id = {p} AND step_lo < {p} AND step_hi >= {p}"
            " ORDER BY step_lo, id_lo",
            (ks, stop, start),
        )
        for (blob,) in cur.fetchall():
            rows.extend(_chunk_rows(blob, col, k, start, stop, before_id, after))
    takes = s.takes()
    if takes:
        rows = [r for r in rows if _current(takes, r[0], r[1])]
    rows.sort(key=_step_id)
    if converting:
        rows = each_once(rows)
    return rows if limit is None else rows[:limit]


def each_once(rows: list) -> list:
    """Sorted rows (id first or (step, id) first) with a point read twice kept once: rows and
    chunks are two statements, and an upgrade converting the run between them (one
    transaction: the rows gone, the chunks there) shows its points in both."""
    out = rows[:1]
    for row in rows[1:]:
        if row[0] != out[-1][0]:
            out.append(row)
    return out


def _step_id(row) -> tuple:
    return (row[1], row[0])


def blob_reader(cur):
    """The sqlite3 connection behind `cur` where it has incremental blob I/O (Python 3.11+'s
    `blobopen`), else None (PostgreSQL, an older Python: blobs are fetched whole)."""
    con = getattr(cur, "connection", None)
    return con if hasattr(con, "blobopen") else None


def read_chunk(con, chunk_id: int, columns) -> chunk_codec.Streams:
    """The verified streams of one chunk's steps, walls, ids and value columns `columns`,
    read straight from SQLite: a version 2 chunk's header and directory, then only those
    streams' bytes (a key of a 20-key keyset reads a tenth of the blob); a version 1 chunk
    whole, as its one CRC needs."""
    with con.blobopen("chunks", "data", chunk_id, readonly=True) as blob:
        return chunk_codec.read_streams(lambda at, size: blob[at : at + size], len(blob), columns)


class _Snapshot:
    """`with _Snapshot(cur) as con:` the sqlite3 connection with blob I/O, inside one read
    transaction (begun here unless one is open, rolled back at the end: a reader holds no
    snapshot after it), or None where blobs are fetched whole by the listing statement."""

    def __init__(self, cur) -> None:
        self.cur, self.con = cur, blob_reader(cur)
        self.own = self.con is not None and not self.con.in_transaction

    def __enter__(self):
        if self.own:
            self.cur.execute("BEGIN")
        return self.con

    def __exit__(self, *exc) -> None:
        if self.own and self.con.in_transaction:
            self.con.execute("ROLLBACK")


def _streams(con, chunk_id: int, col: int, data: tuple) -> chunk_codec.Streams:
    """A chunk's steps, walls, ids and column `col`, verified: through blob I/O where `con`
    is given, else from the blob its listing fetched (`data`: (blob,))."""
    if con is not None:
        return read_chunk(con, chunk_id, [col])
    return chunk_codec.picked_streams(data[0], [col])


def _decoded(con, chunk_id: int, col: int, data: tuple, keyset_id: int, run_id: int):
    """_streams() decoded (numpy where it imports), a failure naming the chunk."""
    fast = numpy_modules()[1]
    try:
        s = _streams(con, chunk_id, col, data)
        return (fast or chunk_codec).decode_streams(s)
    except ValueError as exc:
        raise _named(exc, chunk_id, keyset_id, run_id) from None


def _named(exc: ValueError, chunk_id: int, keyset_id: int, run_id: int) -> ValueError:
    return ValueError(f"{exc} (chunk {chunk_id} of run {run_id}, keyset {keyset_id})")


def _chunks_over(cur, p: str, keyset_id: int, first: int, last: int, con) -> list:
    """(id, step_lo, step_hi, n, data, id_hi) of the keyset's chunks holding steps in [first,
    last], by first step then first id; `data` is (blob,) where `con` is None (no blob I/O:
    the blobs come whole with the listing), else ()."""
    blob_sql = "" if con is not None else ", data"
    cur.execute(
        f"SELECT id, step_lo, step_hi, n, id_hi{blob_sql} FROM chunks WHERE keyset_id = {p}"
        f" AND step_lo <= {p} AND step_hi >= {p} ORDER BY step_lo, id_lo",
        (keyset_id, last, first),
    )
    return [
        (int(r[0]), int(r[1]), int(r[2]), int(r[3]), tuple(r[5:]), int(r[4]))
        for r in cur.fetchall()
    ]


def series_columns(s: Series, start: int, stop: int, page: Page = EVERY) -> tuple:
    """series_rows as numpy columns (ids, steps, walls, values), straight from the decoded
    chunks without a Python object a point: the same points in the same order (by step, then
    id), NaN as NaN. Paging as series_rows (`page.after_id`, `page.limit`); chunks are read by
    step and reading stops once `limit` points lie below the next chunk's first step;
    `page.before_id`: only points with a smaller id (the agent's snapshot). Needs numpy.

    On SQLite with incremental blob I/O every statement and blob read is in one read
    transaction (one snapshot, as the single statement that fetched the blobs was), and of
    each chunk only the streams decoded are read and verified; a chunk that fails its CRC
    raises ValueError naming it."""
    p = series_points(s, start, stop, page)
    return p.ids(), p.steps, p.walls, p.values


def series_points(s: Series, start: int, stop: int, page: Page = EVERY) -> chunk_columns.Points:
    """series_columns' points, their ids decoded only if `ids()` is called (a reader of steps,
    walls and values alone decodes no id stream). Needs numpy."""
    np, fast = numpy_modules()
    if np is None:
        raise RuntimeError("series_columns needs numpy")
    with _Snapshot(s.cur) as con:
        return _series_points(s, start, stop, page, np, fast, con)


def _series_points(s: Series, start, stop, page: Page, np, fast, con) -> chunk_columns.Points:
    cur, p, run_id = s.cur, s.p, s.run_id
    before_id, limit = page.before_id, page.limit
    after = None if page.after_id is None else (start, page.after_id)
    takes = s.takes()
    legacy = _legacy_rows(s, start, stop, before_id, after)
    chunks = []
    for ks, col, _k in s.keysets():
        chunks += [
            (lo, hi, cid, n, ks, col, data, id_hi)
            for cid, lo, hi, n, data, id_hi in _chunks_over(cur, p, ks, start, stop - 1, con)
        ]
    chunks.sort(key=lambda c: c[0])
    # The columns are decoded straight into arrays of every point the chunks hold: no array
    # a chunk to concatenate (a chunk cut by the range, a cursor or a take is filtered first).
    out = chunk_columns.Columns(np, len(legacy) + sum(c[3] for c in chunks), fast)
    if legacy:
        ids, steps, walls, values = zip(*legacy)
        part = (
            np.array(ids, dtype=np.int64),
            np.array(steps, dtype=np.int64),
            np.array(walls, dtype=np.float64),
            np.array([np.nan if v is None else v for v in values], dtype=np.float64),
        )
        out.add(chunk_columns.kept_columns(part, start, stop, None, takes))
    for lo, hi, chunk_id, _n, ks, col, data, id_hi in chunks:
        # Every point of this chunk and the later ones has a step >= lo.
        if limit is not None and out.at >= limit and chunk_columns.nth_step(np, out, limit) < lo:
            break
        whole_chunk = start <= lo and hi < stop and after is None and not takes
        below = before_id is None or id_hi < before_id
        try:
            shared = chunk_columns.shared_cache()
            if shared is not None and whole_chunk and below:
                if chunk_columns.shared_into(fast, con, chunk_id, col, data, shared, out):
                    continue
                raise ValueError("corrupt chunk: a stored chunk without its ids stream")
            if con is not None:
                streams = read_chunk(con, chunk_id, [col])
            else:
                streams = chunk_codec.picked_streams(data[0], [col])
            if streams.ids is None:
                raise ValueError("corrupt chunk: a stored chunk without its ids stream")
            # Every point of the chunk kept: decoded straight into the columns. A snapshot's
            # bound (`before_id`, the agent's tiles) cuts only a chunk written after it.
            if below and whole_chunk:
                out.reserve(streams.n)
                fast.decode_into(streams, out.columns, out.at)
                out.defer_ids(streams.n, streams.ids, col)
                out.at += streams.n
                continue
            c = fast.decode_streams(streams)
        except ValueError as exc:
            raise _named(exc, chunk_id, ks, run_id) from None
        part = (c.ids + col if col else c.ids, c.steps, c.walls, c.values[0])
        if not below:
            keep = part[0] < before_id
            part = tuple(column[keep] for column in part)
        out.add(chunk_columns.kept_columns(part, start, stop, after, takes))
    steps, walls, values = (column[: out.at] for column in out.columns)
    points = chunk_columns.Points(steps, walls, values, out.ids)
    if not chunk_columns.in_step_order(np, steps, points.ids):
        ids = points.ids()
        order = np.lexsort((ids, steps))
        points = chunk_columns.Points(steps[order], walls[order], values[order], ids[order])
    if legacy and len(points.steps) > 1:  # a run converted between the two reads: each point once
        ids = points.ids()
        first = np.concatenate(([True], ids[1:] != ids[:-1]))
        points = chunk_columns.Points(
            points.steps[first], points.walls[first], points.values[first], ids[first]
        )
    if limit is not None and len(points.steps) > limit:
        whole = points
        points = chunk_columns.Points(
            whole.steps[:limit],
            whole.walls[:limit],
            whole.values[:limit],
            lambda: whole.ids()[:limit],
        )
    return points


def count_rows(s: Series, start: int, stop: int, limit: int) -> int:
    """The series' current points with start <= step < stop, counted up to `limit`: chunks
    wholly inside the range count by their row count, the others are decoded."""
    cur, p, run_id = s.cur, s.p, s.run_id
    cur.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM points WHERE run_id = {p} AND key_id = {p}"
        f" AND step >= {p} AND step < {p} LIMIT {p}) AS c",
        (run_id, s.key_id, start, stop, limit),
    )
    total = int(cur.fetchone()[0])
    takes = s.takes()
    with _Snapshot(cur) as con:
        for ks, col, _k in s.keysets():
            if total >= limit:
                break
            for chunk_id, lo, hi, n, data, _id_hi in _chunks_over(cur, p, ks, start, stop - 1, con):
                if not takes and lo >= start and hi < stop:
                    total += int(n)  # counted by its row: not read
                else:
                    c = _decoded(con, chunk_id, col, data, ks, run_id)
                    found = _column_rows(c, col, start, stop, None, None)
                    if takes:
                        found = [r for r in found if _current(takes, r[0], r[1])]
                    total += len(found)
                if total >= limit:
                    break
    return min(total, limit)


def first_values(s: Series, steps: list) -> dict:
    """{step: value of the first current point there (by id)} for each of `steps` that has one
    (value None = NaN); reads only the chunks whose step range holds one of them."""
    cur, p, run_id = s.cur, s.p, s.run_id
    out: dict = {}
    if not steps:
        return out
    wanted = set(steps)
    for i in range(0, len(steps), 500):
        part = steps[i : i + 500]
        marks = ", ".join([p] * len(part))
        cur.execute(
            f"SELECT step, id, value FROM points WHERE run_id = {p} AND key_id = {p}"
            f" AND step IN ({marks})",
            [run_id, s.key_id, *part],
        )
        found = cur.fetchall()
        if found:
            _keep_first(out, found, s.takes())
    lo, hi = min(steps), max(steps)
    ordered = sorted(wanted)
    takes = s.takes()
    np = numpy_modules()[0]
    wanted_array = None if np is None else np.array(ordered, dtype=np.int64)
    with _Snapshot(cur) as con:
        for ks, col, _k in s.keysets():
            for chunk_id, s_lo, s_hi, _n, data, _hi in _chunks_over(cur, p, ks, lo, hi, con):
                if not _any_between(ordered, s_lo, s_hi):
                    continue
                c = _decoded(con, chunk_id, col, data, ks, run_id)
                if wanted_array is not None:  # the chunk's rows at wanted steps, by numpy
                    at = np.flatnonzero(np.isin(c.steps, wanted_array))
                    found = zip(
                        c.steps[at].tolist(),
                        (c.ids[at] + col).tolist(),
                        c.values[0][at].tolist(),
                    )
                else:
                    found = [
                        (s, c.ids[i] + col, c.values[0][i])
                        for i, s in enumerate(c.steps)
                        if s in wanted
                    ]
                _keep_first(out, [(s, int(pid), float(v)) for s, pid, v in found], takes)
    return {s: v for s, (_pid, v) in out.items()}


def _any_between(ordered: list, lo: int, hi: int) -> bool:
    from bisect import bisect_left

    i = bisect_left(ordered, lo)
    return i < len(ordered) and ordered[i] <= hi


def _keep_first(out: dict, found: list, takes) -> None:
    """Fold (step, id, value) rows into out[step] = (id, value) keeping the smallest id."""
    for step, pid, value in found:
        if takes and not _current(takes, pid, step):
            continue
        if value is not None and value != value:
            value = None
        have = out.get(step)
        if have is None or pid < have[0]:
            out[step] = (pid, value)


# -- whole series and runs -----------------------------------------------------------------------


def series_all(cur, p: str, run_id: int, key_id: int) -> list:
    """(id, step, wall, value) of every point of one series, superseded ones included, in id
    (arrival) order (value None = NaN)."""
    rows = series_rows(Series(cur, p, run_id, key_id, False), -(2**63), 2**63 - 1)
    rows.sort()
    return rows


def run_keys(cur, p: str, run_id: int) -> set:
    """The keys that have points in one run."""
    found = set()
    cur.execute(f"SELECT key_ids FROM keysets WHERE run_id = {p}", (run_id,))
    for (text,) in cur.fetchall():
        found.update(key_list(text))
    cur.execute(f"SELECT DISTINCT key_id FROM points WHERE run_id = {p}", (run_id,))
    found.update(int(k) for (k,) in cur.fetchall())
    return found


def chunked_series(cur) -> set:
    """Every (run, key) that has points in chunks."""
    cur.execute(
        "SELECT k.run_id, k.key_ids FROM keysets k WHERE EXISTS"
        " (SELECT 1 FROM chunks c WHERE c.keyset_id = k.id)"
    )
    return {(int(r), key) for r, text in cur.fetchall() for key in key_list(text)}
