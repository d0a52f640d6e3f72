"""One SQLite store opened read-only by the agent; every read is one read transaction.

What a poll costs the host is what it returns: runs and keys through their primary keys (with
fingerprints, so an unchanged runs table costs a few bytes), events and live points by id
cursor, series rows once per connection, and tiles through one primary-key range of `rollups`
each (schema.store.envelope). Nothing here is O(points in the store).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat

from reslog.agent import tile_read, tile_workers
from reslog.agent.wire import (
    BUCKET_LAYOUT,
    BUCKET_ROW,
    DEFAULT_LIMIT,
    EVENT_LIMIT,
    KEY_BITS,
    LAYOUT_PACKED,
    LAYOUT_WIDE,
    MAX_LIMIT,
    MAX_TILES,
    RAW_LAYOUT,
    RAW_LIMIT,
    RAW_ROW,
    RAW_TILE_LAYOUT,
    RAW_TILE_ROW,
    ROW_PACKED,
    ROW_WIDE,
    SERIES_WIRE,
    AgentError,
    Sections,
)
from schema.store import buckets, chunk_columns, chunk_read, points_by_id
from schema.store.chunk_read import Page, Series
from schema.store.columns import EVENT_COLUMNS, RUN_COLUMNS
from schema.store.envelope import (
    has_takes,
    packed_raw,
    series_row,
    series_rows,
    series_with_takes,
)
from schema.store.liveness import is_alive
from schema.store.revision import HEAD_REVISION, OLDER_REVISIONS
from schema.store.sqlite_file import connect_readonly, readonly_uri
from schema.store.status import RUNNING

SQLITE_MAGIC = b"SQLite format 3\x00"
CHUNK_BYTES = 64 << 20  # blob bytes a `chunks` reply aims at (it may reach twice that)

# Indexes into a RUN_COLUMNS row.
_STATUS, _BEAT, _ENDED, _PID, _PROC_HOST, _PROC_START, _STALLED = map(
    RUN_COLUMNS.index,
    ("status", "heartbeat_at", "ended_at", "pid", "proc_host", "proc_start", "stalled_since"),
)


def _alive(row: tuple) -> bool | None:
    if row[_STATUS] != RUNNING:
        return None
    return is_alive(row[_PROC_HOST], row[_PID], row[_PROC_START])


def _fingerprint(rows) -> str:
    return hashlib.blake2b(repr(rows).encode("utf-8"), digest_size=8).hexdigest()


def is_regular(path: str) -> bool:
    """Whether `path` is a regular file (following links): the only kind the agent opens. A
    FIFO named *.db hung the agent in open() for good, and /dev/zero would be read forever."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def is_sqlite(path: str) -> bool:
    """Whether `path` is a regular file that starts like a SQLite database. Opened without
    blocking (O_NONBLOCK), and checked again on the open descriptor: what the path names can
    change between a stat and an open."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, 16) == SQLITE_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # what SQLite's INTEGER holds


def _is_int64(value: object) -> bool:
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def req_int(req: dict, name: str, default: int) -> int:
    """An integer field of a request (JSON ints are unbounded; SQLite's are 64-bit, and
    2**70 reached it as an OverflowError, answered as an agent bug)."""
    value = req.get(name, default)
    if value is None:
        return default
    if not _is_int64(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
        raise AgentError("BadRequest", f"{name} must be a 64-bit integer, got {shown}")
    return value  # type: ignore[return-value]


def _int_list(req: dict, name: str, width: int, limit: int) -> list:
    """A request field holding a list of `width`-long lists of integers."""
    value = req.get(name)
    if not isinstance(value, list) or len(value) > limit:
        raise AgentError("BadRequest", f"{name} must be a list of at most {limit} entries")
    for item in value:
        if not isinstance(item, list) or len(item) != width or not all(_is_int64(v) for v in item):
            raise AgentError(
                "BadRequest", f"{name} entries must be lists of {width} 64-bit integers"
            )
    return value


def _high(cur) -> int:
    """The newest point id of the snapshot (0: no point yet), chunks and legacy rows alike."""
    return points_by_id.max_point_id(cur)


def _pack_live(cur, rows: list) -> tuple:
    """(layout name, packed bytes) of live point rows (id, run_id, key_id, step, wall, value);
    the packed layout where run and key ids fit in KEY_BITS."""
    max_run = cur.execute("SELECT max(id) FROM runs").fetchone()[0] or 0
    max_key = cur.execute("SELECT max(id) FROM keys").fetchone()[0] or 0
    if max_run < (1 << KEY_BITS) and max_key < (1 << KEY_BITS):
        pack, shift = ROW_PACKED.pack, KEY_BITS + 1
        packed = [
            pack((r << shift) | (k << 1) | (v is None), s, w, 0.0 if v is None else v)
            for _i, r, k, s, w, v in rows
        ]
        return LAYOUT_PACKED, b"".join(packed)
    pack = ROW_WIDE.pack
    wide = [
        pack(r, (k << 1) | (v is None), s, w, 0.0 if v is None else v) for _i, r, k, s, w, v in rows
    ]
    return LAYOUT_WIDE, b"".join(wide)


class Store:
    """One store opened read-only (mode=ro: the agent can never create, modify or lock out
    the training run's file)."""

    def __init__(self, path: str) -> None:
        self.path = path
        if not os.path.exists(path):
            raise AgentError("StoreNotFound", f"no store at {path}")
        if os.path.isdir(path):
            raise AgentError("NotAStore", f"{path} is a directory, not a store file")
        if not is_regular(path):
            raise AgentError("NotAStore", f"{path} is not a regular file (a FIFO, a device...)")
        if not is_sqlite(path):
            # Opening it would leave -wal/-shm files beside a file that is not ours.
            raise AgentError("NotAStore", f"{path} is not a SQLite database")
        st = os.stat(path)
        self.ident = (st.st_dev, st.st_ino)
        if not os.path.exists(path + "-wal"):
            # Not a live WAL database: look first without opening it for real, so a file that
            # turns out not to be a store gets no -wal/-shm files beside it.
            self._probe()
        try:
            self.conn = self._connect()
            self._check_schema()
        except sqlite3.OperationalError as exc:  # a store that cannot be read here, and why
            raise AgentError("StoreError", f"cannot read {path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise AgentError("NotAStore", f"{path} is not a SQLite database ({exc})") from None

    def _connect(self) -> sqlite3.Connection:
        """A read-only connection (the agent's own, and each tile worker's)."""
        conn = connect_readonly(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    def _probe(self) -> None:
        try:
            probe = sqlite3.connect(readonly_uri(self.path, immutable=True), uri=True)
        except sqlite3.Error as exc:
            raise AgentError("NotAStore", f"{self.path} is not a SQLite database ({exc})") from None
        try:
            self._check_tables(probe)
        except sqlite3.DatabaseError as exc:
            raise AgentError("NotAStore", f"{self.path} is not a SQLite database ({exc})") from None
        finally:
            probe.close()

    def _check_schema(self) -> None:
        self._check_tables(self.conn)
        self._check_revision(self.conn)

    def _check_tables(self, conn) -> None:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not names:
            raise AgentError("NotAStore", f"{self.path} is empty: no reslog store there")
        if "alembic_version" not in names or "runs" not in names:
            raise AgentError(
                "NotAStore",
                f"{self.path} is not a reslog store (tables: {', '.join(sorted(names))})",
            )

    def _check_revision(self, cur) -> None:
        row = cur.execute("SELECT version_num FROM alembic_version").fetchone()
        rev = row[0] if row else None
        if rev == HEAD_REVISION:
            return
        if rev is None:
            raise AgentError("NotAStore", f"{self.path} has no schema revision")
        if rev in OLDER_REVISIONS:
            raise AgentError(
                "SchemaTooOld",
                f"{self.path} uses store schema {rev}, this agent reads {HEAD_REVISION}; "
                f"upgrade it with: reslog upgrade {self.path}",
            )
        raise AgentError(
            "SchemaTooNew",
            f"{self.path} was written by a newer reslog (schema {rev}, this agent knows up to "
            f"{HEAD_REVISION}); upgrade resplot to read it",
        )

    def close(self) -> None:
        self.conn.close()

    # Each public read runs in one read transaction, so the runs, keys, points, series rows and
    # tiles of one reply come from one snapshot (a point never names a run the reply lacks, a
    # tile holds exactly the points up to the reply's `high`).
    def _snapshot(self, fn, *args):
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        try:
            # Every time: a newer reslog may migrate the store in place while it is open here.
            self._check_revision(cur)
            return fn(cur, *args)
        finally:
            cur.execute("COMMIT")

    def read(self, op: str, req: dict) -> tuple:
        """(header, Sections) of one request against this store."""
        fn = {
            "poll": self._poll,
            "points": self._points_op,
            "raw": self._raw_op,
            "tiles": self._tiles_op,
            "chunks": self._chunks_op,
        }[op]
        return self._snapshot(fn, req)

    # -- parts of a reply --------------------------------------------------------------------

    def _runs(self, cur, runs_fp, beats_fp) -> dict:
        # Whether each running run's process still exists is known here, on its host, and only
        # here (schema/store/liveness.py): it travels with the heartbeat, as a last column "alive".
        rows = [
            (*r, _alive(r))
            for r in cur.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY id")
        ]
        # Heartbeats move every flush of a live run; the rest (config, summary...) rarely.
        # Two fingerprints let an unchanged poll say so in a few bytes, and a live one send only
        # the small beat rows.
        beats = [(r[0], r[_STATUS], r[_BEAT], r[_ENDED], r[-1], r[_STALLED]) for r in rows]
        heavy = [r[:6] + r[7:-1] for r in rows]
        out = {"runs_fp": _fingerprint(heavy), "beats_fp": _fingerprint(beats)}
        if out["runs_fp"] != runs_fp:
            out["runs"] = [dict(zip((*RUN_COLUMNS, "alive"), r)) for r in rows]
        elif out["beats_fp"] != beats_fp:
            out["beats"] = [list(b) for b in beats]
        return out

    def _keys(self, cur, after: int) -> dict:
        rows = cur.execute(
            "SELECT id, name FROM keys WHERE id > ? ORDER BY id", (after,)
        ).fetchall()
        return {"keys": [list(r) for r in rows], "keys_cursor": rows[-1][0] if rows else after}

    def _events(self, cur, after: int, limit: int) -> dict:
        rows = cur.execute(
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE id > ? ORDER BY id LIMIT ?",
            (after, limit),
        ).fetchall()
        return {
            "events": [list(r) for r in rows],
            "events_cursor": rows[-1][0] if rows else after,
            "events_more": len(rows) == limit,
        }

    def _live(self, cur, after: int, limit: int, high: int, out: Sections) -> dict:
        """Points with after < id <= high, at most `limit` of them, as packed rows."""
        if high <= after:
            return {"points_cursor": after, "more": False}
        rows = points_by_id.points_after(cur, "?", None, after, upto=high, limit=limit)
        if len(rows) == limit:
            last, more = rows[-1][0], rows[-1][0] < high
        else:
            last, more = high, False
        layout, data = _pack_live(cur, rows)
        fmt = ROW_PACKED if layout == LAYOUT_PACKED else ROW_WIDE
        out.add("points", len(data) // fmt.size, data, layout=layout)
        return {"points_cursor": last, "more": more}

    def _series(self, cur, wanted, out: Sections) -> None:
        """Series rows: every one (wanted is True) or those of [run_id, key_id] pairs."""
        if wanted is True:
            rows = series_rows(cur, "?")
        else:
            found = (series_row(cur, "?", run_id, key_id) for run_id, key_id in wanted)
            rows = [r for r in found if r is not None]
        out.add_columns("series", SERIES_WIRE, rows)

    def _tiles(self, cur, ranges: list, out: Sections, high: int) -> None:
        """Tile ranges [run_id, key_id, level, first index, count]: rollup rows of levels >= 1
        and fine buckets (levels < 0, folded here from the raw points) as section "buckets",
        raw points of level 0 as section "raw", packed rows (one query a
        tile, packed straight off the cursor); each section's `tiles` lists [run_id, key_id,
        level, index, rows] in the order of its rows, every tile of a range included (an empty
        one has 0 rows). Many settled tiles are read by worker processes as well
        (reslog/agent/tile_workers.py): stored buckets that end at or before their series' last
        step, and every tile read from raw points (raw and fine), which reads only the points
        up to `high` whatever snapshot it is read in."""
        if sum(r[4] for r in ranges) > MAX_TILES:
            raise AgentError("BadRequest", f"at most {MAX_TILES} tiles a request")
        takes = series_with_takes(cur)
        jobs = []  # (run_id, key_id, level, index, has_takes, high, tiles read at once)
        for run_id, key_id, level, first, count in ranges:
            if not buckets.is_level(level) or count < 1:
                raise AgentError("BadRequest", f"bad tile range (level {level}, count {count})")
            has = level <= 0 and (run_id, key_id) in takes  # read from raw points
            run = tile_read.tiles_a_read(level)
            jobs += [
                (run_id, key_id, level, index, has, high, min(run, first + count - index))
                for index in range(first, first + count, run)
            ]
        last = {}  # (run_id, key_id) -> the series' last step in this snapshot
        for run_id, key_id, *_job in jobs:
            if (run_id, key_id) not in last:
                row = cur.execute(
                    "SELECT step_hi FROM series WHERE run_id = ? AND key_id = ?", (run_id, key_id)
                ).fetchone()
                last[(run_id, key_id)] = None if row is None else row[0]
        settled = [
            j[2] <= 0  # raw points up to `high`: the same in any later snapshot
            or (
                last[(j[0], j[1])] is not None
                and buckets.tile_range(j[2], j[3])[1] <= last[(j[0], j[1])]
            )
            for j in jobs
        ]

        def read(worker_cur, job):
            return tile_read.read_tile(cur if worker_cur is None else worker_cur, job)

        workers = tile_workers.worker_count() if len(jobs) >= tile_workers.MIN_JOBS else 0
        if workers:
            # numpy imported (or its import on `hello`'s thread waited for) before the fork: a
            # worker forked mid-import would wait for good on a lock no thread of it holds.
            chunk_read.numpy_fold()
        # A run's series in one process: keys of its keysets, whose chunks' steps, walls and
        # ids that process decodes once (chunk_columns.shared_chunks); runs dealt out in turn.
        with chunk_columns.shared_chunks():
            packed = tile_workers.read_all(
                jobs, read, self._connect, settled, workers, tile_read.run_of
            )
        parts = {"buckets": ([], []), "raw": ([], [])}
        for job, data in zip(jobs, packed):
            run_id, key_id, level, index, _has, _high, count = job
            row = RAW_TILE_ROW if level == 0 else BUCKET_ROW
            chunks, about = parts["raw" if level == 0 else "buckets"]
            for i, piece in enumerate(tile_read.per_tile(data, level, index, count)):
                chunks.append(piece)
                about.append([run_id, key_id, level, index + i, len(piece) // row.size])
        for name, layout in (("buckets", BUCKET_LAYOUT), ("raw", RAW_TILE_LAYOUT)):
            chunks, about = parts[name]
            if about:
                rows = sum(a[4] for a in about)
                out.add(name, rows, b"".join(chunks), layout=layout, tiles=about)

    # -- requests ---------------------------------------------------------------------------------

    def _poll(self, cur, req: dict) -> tuple:
        """Everything new after the client's cursors, plus series rows and tiles asked for."""
        out = self._runs(cur, req.get("runs_fp"), req.get("beats_fp"))
        # Which file answered: a store deleted and written anew at the same path restarts its
        # ids at 1, below the client's cursors, so the client must know to start over.
        out["store_id"] = f"{self.ident[0]}:{self.ident[1]}"
        out.update(self._keys(cur, req_int(req, "keys_after", 0)))
        limit = max(1, min(req_int(req, "events_limit", EVENT_LIMIT), EVENT_LIMIT))
        out.update(self._events(cur, req_int(req, "events_after", 0), limit))
        high = _high(cur)
        out["high"] = high  # the snapshot: tiles and series rows hold the points up to here
        sections = Sections()
        after = req_int(req, "points_after", 0)
        if after < 0:  # from the current end: history comes from series rows and tiles
            out.update({"points_cursor": high, "more": False})
        else:
            limit = max(1, min(req_int(req, "limit", DEFAULT_LIMIT), MAX_LIMIT))
            out.update(self._live(cur, after, limit, high, sections))
        wanted = req.get("series")
        if wanted is True:
            self._series(cur, True, sections)
        elif wanted:
            self._series(cur, _int_list(req, "series", 2, 100_000), sections)
        if req.get("tiles"):
            self._tiles(cur, _int_list(req, "tiles", 5, MAX_TILES), sections, high)
        out["sections"] = sections.described
        return out, sections

    def _points_op(self, cur, req: dict) -> tuple:
        """Points by id cursor (what a poll's live part reads), without the rest of a poll."""
        high = _high(cur)
        limit = max(1, min(req_int(req, "limit", DEFAULT_LIMIT), MAX_LIMIT))
        sections = Sections()
        out = self._live(cur, req_int(req, "after", 0), limit, high, sections)
        out["sections"] = sections.described
        return out, sections

    def _tiles_op(self, cur, req: dict) -> tuple:
        sections = Sections()
        high = _high(cur)
        self._tiles(cur, _int_list(req, "tiles", 5, MAX_TILES), sections, high)
        return {"high": high, "sections": sections.described}, sections

    def _raw_op(self, cur, req: dict) -> tuple:
        """One page of a series' current raw points with start <= step < stop (an export)."""
        run_id, key_id = req_int(req, "run_id", 0), req_int(req, "key_id", 0)
        start, stop = req_int(req, "start", -(2**63)), req_int(req, "stop", 2**63 - 1)
        after = req.get("after_id")
        if after is not None:
            after = req_int(req, "after_id", 0)
        limit = max(1, min(req_int(req, "limit", RAW_LIMIT), RAW_LIMIT))
        series = Series(cur, "?", run_id, key_id, has_takes(cur, "?", run_id, key_id))
        packed = packed_raw(series, start, stop, RAW_ROW, Page(after_id=after, limit=limit))
        rows = len(packed) // RAW_ROW.size
        sections = Sections()
        sections.add("raw", rows, packed, layout=RAW_LAYOUT)
        out = {"more": rows == limit, "sections": sections.described}
        if rows:
            last = RAW_ROW.unpack_from(packed, (rows - 1) * RAW_ROW.size)
            out["last"] = [last[0], last[4]]  # (step, id): where the next page starts
        return out, sections

    def _chunks_op(self, cur, req: dict) -> tuple:
        """What `resplot sync` copies, its chunks as they are stored (docs/protocol.md,
        "Chunks for a mirror"): every chunk (sealed or head) holding a point after
        `points_after`, its blob in section "chunks" byte for byte and its run, keys (in column
        order), ids, rows, steps and sealed flag in the header's `chunks`; with the runs, keys
        and events a poll gives. The chunks end at a cursor no chunk crosses where one is found
        within twice the bounds (`limit` points, CHUNK_BYTES), else at the first id of the
        chunk that would pass them (the chunks crossing it are sent whole; the mirror keeps
        their points up to the cursor, and the next reply sends them again). A store that
        still holds legacy point rows after the cursor answers `rows: true`, `rows_upto` (their
        highest id) and no chunks: those rows come by `poll` (they precede every chunk's
        ids)."""
        out = self._runs(cur, None, None)
        out["store_id"] = f"{self.ident[0]}:{self.ident[1]}"
        out.update(self._keys(cur, 0))
        out.update(self._events(cur, req_int(req, "events_after", 0), EVENT_LIMIT))
        high = _high(cur)
        out["high"] = high
        after = req_int(req, "points_after", 0)
        limit = max(1, min(req_int(req, "limit", DEFAULT_LIMIT), MAX_LIMIT))
        max_bytes = max(1, min(req_int(req, "max_bytes", CHUNK_BYTES), CHUNK_BYTES))
        sections = Sections()
        out.update({"chunks": [], "points_cursor": after, "more": False})
        legacy = points_by_id.legacy_max_id(cur)
        if legacy > after:
            out["rows"] = True
            out["rows_upto"] = legacy
            out["sections"] = sections.described
            return out, sections
        found = cur.execute(
            "SELECT c.id, c.run_id, k.key_ids, c.id_lo, c.id_hi, c.n, c.step_lo, c.step_hi,"
            " c.sealed, length(c.data) FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
            " WHERE c.id_hi > ? ORDER BY c.id_lo",
            (after,),
        ).fetchall()
        taken: list = []
        upto, points, size = after, 0, 0
        for row in found:
            id_lo = row[3]
            full = points >= limit or size >= max_bytes
            if full and id_lo > upto:
                break  # no chunk taken crosses upto: a clean cut
            if (points >= 2 * limit or size >= 2 * max_bytes) and id_lo - 1 > after:
                upto = id_lo - 1  # a forced cut: what crosses it is sent again next time
                break
            taken.append(row)
            points += row[5] * len(chunk_read.key_list(row[2]))
            size += row[9]
            upto = max(upto, row[4])
        blobs = []
        for chunk_id, run_id, key_text, id_lo, id_hi, n, step_lo, step_hi, sealed, _s in taken:
            data = cur.execute("SELECT data FROM chunks WHERE id = ?", (chunk_id,)).fetchone()[0]
            blobs.append(bytes(data))
            out["chunks"].append(
                [
                    run_id,
                    chunk_read.key_list(key_text),
                    id_lo,
                    id_hi,
                    n,
                    step_lo,
                    step_hi,
                    sealed,
                    len(data),
                ]
            )
        sections.add("chunks", len(blobs), b"".join(blobs))
        out["points_cursor"] = upto
        out["more"] = upto < high
        out["sections"] = sections.described
        return out, sections
