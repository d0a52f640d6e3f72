#!/usr/bin/env python3
"""reslog agent: serves reslog stores read-only over length-prefixed frames on stdin/stdout.

resplot uploads this one file to a remote host and runs it there under that host's `python3`
on one long-lived SSH exec channel (locally it runs as a subprocess), so it imports nothing but
the standard library and keeps to Python 3.8 syntax. The wire protocol is docs/protocol.md.

A frame is `>II` (header length, payload length), a UTF-8 JSON header, then the payload bytes.
Each request gets exactly one reply frame: `ok: true` with results, or `ok: false` with an
`error` {type, message}. A bad request or an unreadable store is an error frame, never a dead
agent; only a stream that cannot be re-synchronised (a broken frame prefix) ends it.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import os
import platform
import sqlite3
import struct
import subprocess
import sys
import threading
import traceback
import zlib

PROTOCOL = 1
AGENT_VERSION = "1.1"  # 1.1: overview first (poll `overview`, `overview_min`)
# Copy of schema.store.HEAD_REVISION (this file cannot import the schema package). A store at
# any other revision is refused: a newer schema could have moved the columns read below.
SCHEMA_REVISION = "0001"
OLDER_REVISIONS: tuple = ()

PREFIX = struct.Struct(">II")
# A runs list with big configs can pass 16 MiB. Below 512 MiB still, so a frame prefix made of
# text (a shell rc printing on the channel: bytes >= 0x20) is refused at once, not waited on.
MAX_HEADER = 256 << 20
MAX_PAYLOAD = (1 << 31) - 1
DEFAULT_LIMIT = 1_000_000
MAX_LIMIT = 4_000_000
EVENT_LIMIT = 10_000
MAX_JOBS = 8
PARALLEL_MIN_ROWS = 200_000
COMPRESS_MIN = 64 << 10
# Overview first (docs/protocol.md): a poll that asks for one and finds more than OVERVIEW_MIN
# rows after its cursor gets a sample of about `overview` rows instead of the oldest rows.
OVERVIEW_MIN = 500_000
OVERVIEW_MAX = 2_000_000
OVERVIEW_MIN_PER_SERIES = 64
OVERVIEW_SPARSE = (2_000, 20_000)  # bounds of "a series this small comes in full"
OVERVIEW_MAX_CANDIDATES = 20_000  # runs x keys pairs probed for small series
# Fibonacci hashing: the low 32 bits of id * 2**32/phi are equidistributed along any
# arithmetic progression of ids, so no key interleave (8 or 31 keys a step) aliases with the
# sample the way `id % stride` does (stride 50 over 8 interleaved keys sees only 4 of them).
# (The id is masked to 31 bits first so the product stays inside SQLite's int64.)
HASHED = "((id & 2147483647) * 2654435761) & 4294967295"
SQLITE_MAGIC = b"SQLite format 3\x00"

# Points travel as little-endian rows (run/key/NaN flag packed in one int64, step int64, wall
# float64, value float64): 32 bytes a point, and no id per row (the reply carries the cursor).
# struct packing straight off the cursor is the cheapest way the stdlib has to turn rows into
# bytes (no list of tuples is built). Stores with ids of 2**31 or more get the wide layout.
LAYOUT_PACKED = "rkn:q,step:q,wall:d,value:d"
LAYOUT_WIDE = "run:q,kn:q,step:q,wall:d,value:d"
ROW_PACKED = struct.Struct("<qqdd")
ROW_WIDE = struct.Struct("<qqqdd")
KEY_BITS = 31

RUN_COLUMNS = (
    "id",
    "uid",
    "project",
    "name",
    "status",
    "created_at",
    "heartbeat_at",
    "ended_at",
    "host",
    "pid",
    "rank",
    "world_size",
    "command",
    "git_commit",
    "config",
    "summary",
    "tags",
    "notes",
    "heartbeat_interval",
)
BEAT_COLUMNS = ("id", "status", "heartbeat_at", "ended_at")
EVENT_COLUMNS = ("id", "run_id", "wall", "step", "kind", "level", "title", "body")


class ProtocolError(Exception):
    """The byte stream is broken (closed mid-frame, bad lengths): it cannot be resynchronised."""


class AgentError(Exception):
    """A request failed; `kind` names the error class the client raises (see docs/protocol.md)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# -- framing (also imported by resplot.agent_client, so both ends share one implementation) --


def encode_frame(header: dict, payload: bytes = b"") -> list:
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(head) > MAX_HEADER:
        raise AgentError("StoreError", f"reply too large for a frame ({len(head)} bytes)")
    return [PREFIX.pack(len(head), len(payload)) + head, payload]


def write_frame(wfile, header: dict, payload: bytes = b"") -> int:
    """Write one frame and flush; returns the number of bytes written."""
    first, body = encode_frame(header, payload)
    wfile.write(first)
    if body:
        wfile.write(body)
    wfile.flush()
    return len(first) + len(body)


def _read_exact(rfile, n: int, what: str) -> bytes:
    data = rfile.read(n)
    if data is None:
        data = b""
    if len(data) == n:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = rfile.read(n - got)
        if not more:
            raise ProtocolError(f"stream closed after {got} of {n} bytes of a frame {what}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_frame(rfile):
    """(header, payload) of the next frame; None at a clean end of stream (EOF between frames)."""
    first = rfile.read(PREFIX.size)
    if not first:
        return None
    if len(first) < PREFIX.size:
        first += _read_exact(rfile, PREFIX.size - len(first), "prefix")
    head_len, body_len = PREFIX.unpack(first)
    if head_len == 0 or head_len > MAX_HEADER or body_len > MAX_PAYLOAD:
        raise ProtocolError(f"bad frame prefix (header {head_len} bytes, payload {body_len})")
    head = _read_exact(rfile, head_len, "header")
    body = _read_exact(rfile, body_len, "payload") if body_len else b""
    try:
        header = json.loads(head.decode("utf-8"))
    except ValueError as exc:
        raise AgentError("BadRequest", f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise AgentError("BadRequest", "frame header must be a JSON object")
    return header, body


# -- stores ---------------------------------------------------------------------------------


def _fingerprint(rows) -> str:
    return hashlib.blake2b(repr(rows).encode("utf-8"), digest_size=8).hexdigest()


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _row_layout(cur) -> tuple:
    """(layout name, struct, SELECT columns) for point rows of this store.

    Run and key ids share one packed integer with the NaN flag while they fit in KEY_BITS;
    stores with more runs or keys than that use the wide layout.
    """
    max_run = cur.execute("SELECT max(id) FROM runs").fetchone()[0] or 0
    max_key = cur.execute("SELECT max(id) FROM keys").fetchone()[0] or 0
    if max_run < (1 << KEY_BITS) and max_key < (1 << KEY_BITS):
        layout, row = LAYOUT_PACKED, ROW_PACKED
        cols = f"(run_id << {KEY_BITS + 1}) | (key_id << 1) | (value IS NULL)"
    else:
        layout, row = LAYOUT_WIDE, ROW_WIDE
        cols = "run_id, (key_id << 1) | (value IS NULL)"
    return layout, row, cols + ", step, wall, coalesce(value, 0.0)"


class Store:
    """One SQLite store opened read-only; every read is O(new rows) through an index."""

    def __init__(self, path: str) -> None:
        self.path = path
        if not os.path.exists(path):
            raise AgentError("StoreNotFound", f"no store at {path}")
        if os.path.isdir(path):
            raise AgentError("NotAStore", f"{path} is a directory, not a store file")
        st = os.stat(path)
        self.ident = (st.st_dev, st.st_ino)
        try:
            # mode=ro: the agent can never create, modify or lock out the training run's file.
            self.conn = sqlite3.connect(
                f"file:{_uri_path(path)}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            self.conn.execute("PRAGMA busy_timeout=30000")
            self._check_schema()
        except sqlite3.DatabaseError as exc:
            raise AgentError("NotAStore", f"{path} is not a SQLite database ({exc})") from None

    def _check_schema(self) -> None:
        names = {
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not names:
            raise AgentError("NotAStore", f"{self.path} is empty: no reslog store there")
        if "alembic_version" not in names or "runs" not in names:
            raise AgentError(
                "NotAStore",
                f"{self.path} is not a reslog store (tables: {', '.join(sorted(names))})",
            )
        self._check_revision(self.conn)

    def _check_revision(self, cur) -> None:
        row = cur.execute("SELECT version_num FROM alembic_version").fetchone()
        rev = row[0] if row else None
        if rev == SCHEMA_REVISION:
            return
        if rev is None:
            raise AgentError("NotAStore", f"{self.path} has no schema revision")
        if rev in OLDER_REVISIONS:
            raise AgentError(
                "SchemaTooOld",
                f"{self.path} uses store schema {rev}, this agent reads {SCHEMA_REVISION}; "
                f"upgrade it with: reslog upgrade {self.path}",
            )
        raise AgentError(
            "SchemaTooNew",
            f"{self.path} was written by a newer reslog (schema {rev}, this agent knows up to "
            f"{SCHEMA_REVISION}); upgrade resplot to read it",
        )

    def close(self) -> None:
        self.conn.close()

    # Each public read runs in one read transaction, so runs, keys and points of a poll reply
    # come from one snapshot (a point never references a run or key the same reply lacks).
    def _snapshot(self, fn, *args):
        cur = self.conn.cursor()
        cur.execute("BEGIN")
        try:
            # Every time: a newer reslog may migrate the store in place while it is open here.
            self._check_revision(cur)
            return fn(cur, *args)
        finally:
            cur.execute("COMMIT")

    def runs(self) -> dict:
        return self._snapshot(self._runs, None, None)

    def keys(self, after: int) -> dict:
        return self._snapshot(lambda cur: self._keys(cur, after))

    def points(self, req: dict) -> tuple:
        return self._snapshot(self._points, req)

    def events(self, req: dict) -> dict:
        return self._snapshot(self._events, req)

    def poll(self, req: dict) -> tuple:
        return self._snapshot(self._poll, req)

    def _runs(self, cur, runs_fp, beats_fp) -> dict:
        rows = cur.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY id").fetchall()
        # Heartbeats move every flush of a live run; the rest (config, summary...) rarely.
        # Two fingerprints let an unchanged poll say so in a few bytes, and a live one send only
        # the small beat rows.
        beats = [(r[0], r[4], r[6], r[7]) for r in rows]
        heavy = [r[:6] + r[7:] for r in rows]
        out = {"runs_fp": _fingerprint(heavy), "beats_fp": _fingerprint(beats)}
        if out["runs_fp"] != runs_fp:
            out["runs"] = [dict(zip(RUN_COLUMNS, r)) for r in rows]  # noqa: B905 (3.8)
        elif out["beats_fp"] != beats_fp:
            out["beats"] = [list(b) for b in beats]
        return out

    def _keys(self, cur, after: int) -> dict:
        rows = cur.execute(
            "SELECT id, name FROM keys WHERE id > ? ORDER BY id", (after,)
        ).fetchall()
        return {"keys": [list(r) for r in rows], "keys_cursor": rows[-1][0] if rows else after}

    def _points(self, cur, req: dict) -> tuple:
        after = _int(req, "after", 0)
        limit = max(1, min(_int(req, "limit", DEFAULT_LIMIT), MAX_LIMIT))
        run_ids = req.get("run_ids")
        where, params = "id > ?", [after]
        if run_ids is not None:
            if not isinstance(run_ids, list) or not all(isinstance(i, int) for i in run_ids):
                raise AgentError("BadRequest", "run_ids must be a list of integers")
            if not run_ids:
                return {"n": 0, "points_cursor": after, "more": False}, b""
            where += f" AND run_id IN ({','.join('?' * len(run_ids))})"
            params += run_ids
        # The batch's last id first (a cheap scan of ids in C), then the rows up to it: the
        # cursor comes without shipping an id per row.
        row = cur.execute(
            f"SELECT id FROM points WHERE {where} ORDER BY id LIMIT 1 OFFSET ?",
            [*params, limit - 1],
        ).fetchone()
        if row is not None:
            high, more = row[0], True
        else:
            high = cur.execute(f"SELECT max(id) FROM points WHERE {where}", params).fetchone()[0]
            more = False
        if high is None:
            return {"n": 0, "points_cursor": after, "more": False}, b""
        layout, row, cols = _row_layout(cur)
        sql = f"SELECT {cols} FROM points WHERE {where}"
        sql += " AND id <= ? ORDER BY id"
        jobs = max(1, min(_int(req, "jobs", 1), MAX_JOBS, os.cpu_count() or 1))
        data = None
        if jobs > 1 and high - after >= PARALLEL_MIN_ROWS:
            # ids are dense (rowids), so equal id spans hold about equal row counts.
            cuts = [after + (high - after) * i // jobs for i in range(jobs)] + [high]
            spans = [[cuts[i], *params[1:], cuts[i + 1]] for i in range(jobs)]
            data = _read_parallel(self.path, sql, spans, row, cur)
        if data is None:
            data = _pack(cur.execute(sql, [*params, high]), row)
        header = {"n": len(data) // row.size, "layout": layout, "points_cursor": high, "more": more}
        return header, data

    def _events(self, cur, req: dict) -> dict:
        after = _int(req, "events_after", _int(req, "after", 0))
        limit = max(1, min(_int(req, "events_limit", EVENT_LIMIT), EVENT_LIMIT))
        run_ids = req.get("run_ids")
        where, params = "id > ?", [after]
        if run_ids is not None:
            if not run_ids:
                return {"events": [], "events_cursor": after, "events_more": False}
            where += f" AND run_id IN ({','.join('?' * len(run_ids))})"
            params += list(run_ids)
        rows = cur.execute(
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE {where} ORDER BY id LIMIT ?",
            [*params, limit],
        ).fetchall()
        return {
            "events": [list(r) for r in rows],
            "events_cursor": rows[-1][0] if rows else after,
            "events_more": len(rows) == limit,
        }

    def _poll(self, cur, req: dict) -> tuple:
        out = self._runs(cur, req.get("runs_fp"), req.get("beats_fp"))
        # Which file answered: a store deleted and written anew at the same path restarts its
        # ids at 1, below the client's cursors, so the client must know to start over.
        out["store_id"] = f"{self.ident[0]}:{self.ident[1]}"
        out.update(self._keys(cur, _int(req, "keys_after", 0)))
        out.update(self._events(cur, req))
        after = _int(req, "points_after", 0)
        target = _int(req, "overview", 0)
        sample = None
        if target > 0 and req.get("run_ids") is None:
            least = max(_int(req, "overview_min", OVERVIEW_MIN), 2 * target)
            jobs = max(1, min(_int(req, "jobs", 1), MAX_JOBS, os.cpu_count() or 1))
            sample = self._overview(cur, after, min(target, OVERVIEW_MAX), least, jobs)
        if sample is None:
            head, payload = self._points(cur, dict(req, after=after))
        else:
            head, payload = sample
        out.update(head)
        return out, payload

    def _overview(self, cur, after: int, target: int, least: int, jobs: int):
        """A sample of the rows after `after` up to the current max id, or None when the
        backlog is at most `least` rows (small enough to read in full).

        Series of at most `sparse` rows (a validation loss every 1000 steps) come whole through
        the (run_id, key_id, step) index, so every series shows; the rest are sampled by a
        hash of the id, one pass over the ids in C. Each series' rows stay in id order. The
        points cursor does not move: the client reads every row again at full resolution."""
        high = cur.execute("SELECT max(id) FROM points").fetchone()[0]
        if high is None or high - after <= least:
            return None
        backlog = high - after  # ids are dense rowids: a row count up to deleted rows
        threshold = max(1, (target << 32) // backlog)
        stride = backlog // target
        sparse_cap = max(OVERVIEW_SPARSE[0], min(OVERVIEW_SPARSE[1], 64 * stride))
        layout, row, cols = _row_layout(cur)
        sparse = []
        run_list = [r[0] for r in cur.execute("SELECT id FROM runs ORDER BY id")]
        key_list = [k[0] for k in cur.execute("SELECT id FROM keys ORDER BY id")]
        if len(run_list) * len(key_list) <= OVERVIEW_MAX_CANDIDATES:
            probe = (
                "SELECT count(*) FROM (SELECT 1 FROM points WHERE run_id = ? AND key_id = ?"
                " AND id > ? AND id <= ? LIMIT ?)"
            )
            for run_id in run_list:
                for key_id in key_list:
                    n = cur.execute(probe, (run_id, key_id, after, high, sparse_cap + 1))
                    if 0 < n.fetchone()[0] <= sparse_cap:
                        sparse.append((run_id, key_id))
        where = f"id > {int(after)} AND id <= {int(high)}"
        sql = f"SELECT {cols} FROM points WHERE id > ? AND id <= ? AND {HASHED} < {threshold}"
        if sparse:
            pairs = ",".join(str((r << 32) | k) for r, k in sparse)
            sql += f" AND ((run_id << 32) | key_id) NOT IN ({pairs})"
        sql += " ORDER BY id"
        sample = None
        if jobs > 1:
            # The pass over all ids is the cost; on a host with idle cores, spans in parallel.
            cuts = [after + (high - after) * i // jobs for i in range(jobs)] + [high]
            spans = [[cuts[i], cuts[i + 1]] for i in range(jobs)]
            sample = _read_parallel(self.path, sql, spans, row, cur)
        if sample is None:
            sample = _pack(cur.execute(sql, (after, high)), row)
        parts = [sample]
        for run_id, key_id in sparse:
            parts.append(
                _pack(
                    cur.execute(
                        f"SELECT {cols} FROM points WHERE run_id = ? AND key_id = ? AND {where}"
                        " ORDER BY id",
                        (run_id, key_id),
                    ),
                    row,
                )
            )
        data = b"".join(parts)
        header = {
            "n": len(data) // row.size,
            "layout": layout,
            "points_cursor": after,
            "more": True,
            "overview": high,
        }
        return header, data


def _pack(rows, row: struct.Struct) -> bytes:
    return b"".join(itertools.starmap(row.pack, rows))


def _read_parallel(path: str, sql: str, spans: list, row: struct.Struct, cur):
    """Read id spans in helper processes, the first one here; None if a helper failed.

    sqlite3 hands over rows at ~0.5 us each under the GIL, so a first view of millions of points
    is CPU-bound in this process: fresh interpreters (not fork: SQLite's locks do not survive
    one) read the other spans. Every span ends at or below the cursor taken in the caller's
    read transaction, and ids commit in order, so the helpers see exactly those rows."""
    procs = []
    try:
        for params in spans[1:]:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), "--read-span"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            job = {"path": path, "sql": sql, "params": params, "row": row.format}
            proc.stdin.write(json.dumps(job).encode("utf-8"))
            proc.stdin.close()
            procs.append(proc)
    except OSError:
        for proc in procs:
            proc.kill()
            proc.wait()
        return None
    results = [b""] * len(procs)

    def drain(i: int) -> None:
        results[i] = procs[i].stdout.read()

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(procs))]
    for t in threads:
        t.start()
    first = _pack(cur.execute(sql, spans[0]), row)
    for t in threads:
        t.join()
    ok = True
    for proc in procs:
        proc.stdout.close()
        ok = proc.wait() == 0 and ok
    return b"".join([first, *results]) if ok else None


def _read_span_main() -> int:
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    uri = f"file:{_uri_path(job['path'])}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=30000")
    sys.stdout.buffer.write(
        _pack(conn.execute(job["sql"], job["params"]), struct.Struct(job["row"]))
    )
    sys.stdout.buffer.flush()
    return 0


def _uri_path(path: str) -> str:
    from urllib.parse import quote

    return quote(os.path.abspath(path), safe="/")


def _int(req: dict, name: str, default: int) -> int:
    value = req.get(name, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise AgentError("BadRequest", f"{name} must be an integer, got {value!r}")
    return value


# -- requests -------------------------------------------------------------------------------


def discover(patterns) -> dict:
    """Store paths for paths, directories (their *.db) and globs; `~` expands on this host."""
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise AgentError("BadRequest", "patterns must be a list of strings")
    found, missing = [], []
    for pattern in patterns:
        expanded = os.path.abspath(os.path.expanduser(pattern))
        # A path that exists is taken as written, even with glob characters in its name
        # ("runs/[ablation]/reslog.db"); only a path that does not exist is a pattern.
        if os.path.isdir(expanded):
            inside = os.path.join(glob.escape(expanded), "*.db")
            hits = [p for p in glob.glob(inside) if _is_sqlite(p)]
        elif os.path.exists(expanded):
            hits = [expanded]  # named explicitly: opening it reports what is wrong with it
        elif glob.has_magic(expanded):
            hits = [
                p
                for p in glob.glob(expanded, recursive=True)
                if os.path.isfile(p) and _is_sqlite(p) and not p.endswith(("-wal", "-shm"))
            ]
        else:
            hits = []
        if not hits:
            missing.append(pattern)
        for hit in hits:
            if hit not in found:
                found.append(hit)
    return {"stores": sorted(found), "missing": missing}


class Agent:
    def __init__(self) -> None:
        self.stores: dict = {}

    def store(self, req: dict) -> Store:
        path = req.get("store")
        if not isinstance(path, str) or not path:
            raise AgentError("BadRequest", "request needs a 'store' path")
        path = os.path.abspath(os.path.expanduser(path))
        store = self.stores.get(path)
        if store is not None:
            try:
                st = os.stat(path)
                same = (st.st_dev, st.st_ino) == store.ident
            except OSError:
                same = False
            if same:
                return store
            # Replaced or deleted since it was opened: read the file now at that path.
            store.close()
            del self.stores[path]
        store = self.stores[path] = Store(path)
        return store

    def handle(self, req: dict) -> tuple:
        op = req.get("op")
        if op == "hello":
            return {
                "agent": AGENT_VERSION,
                "protocol": PROTOCOL,
                "schema": SCHEMA_REVISION,
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
                "pid": os.getpid(),
                "host": platform.node(),
            }, b""
        if op == "discover":
            return discover(req.get("patterns")), b""
        if op == "runs":
            return self.store(req).runs(), b""
        if op == "keys":
            return self.store(req).keys(_int(req, "after", 0)), b""
        if op == "points":
            return self.store(req).points(req)
        if op == "events":
            return self.store(req).events(req), b""
        if op == "poll":
            return self.store(req).poll(req)
        raise AgentError("BadRequest", f"unknown op {op!r}")

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()


def serve(rfile, wfile) -> int:
    """Answer frames until EOF or a `bye`; returns the process exit status."""
    agent = Agent()
    try:
        while True:
            try:
                frame = read_frame(rfile)
            except AgentError as exc:  # a whole frame with a bad header: the stream is in sync
                write_frame(wfile, _error(None, exc.kind, str(exc)))
                continue
            except ProtocolError as exc:
                write_frame(wfile, _error(None, "ProtocolError", str(exc)))
                return 2
            if frame is None:
                return 0
            req, _payload = frame
            rid = req.get("id")
            if req.get("op") == "bye":
                write_frame(wfile, {"id": rid, "ok": True})
                return 0
            try:
                reply, payload = agent.handle(req)
            except AgentError as exc:
                reply, payload = _error(rid, exc.kind, str(exc)), b""
            except sqlite3.Error as exc:
                reply, payload = _error(rid, "StoreError", f"cannot read store: {exc}"), b""
            except Exception as exc:  # a bug here must not kill the agent mid-session
                tb = traceback.format_exc(limit=3).strip().splitlines()[-3:]
                msg = f"agent failed on {req.get('op')!r}: {exc} ({' | '.join(tb)})"
                reply, payload = _error(rid, "AgentBug", msg), b""
            else:
                reply["id"] = rid
                reply["ok"] = True
                if req.get("compress") and len(payload) >= COMPRESS_MIN:
                    payload = zlib.compress(payload, 1)
                    reply["z"] = True
            try:
                write_frame(wfile, reply, payload)
            except AgentError as exc:  # raised before a byte was written: still in step
                write_frame(wfile, _error(rid, exc.kind, str(exc)))
    finally:
        agent.close()


def _error(rid, kind: str, message: str) -> dict:
    return {"id": rid, "ok": False, "error": {"type": kind, "message": message}}


def main() -> int:
    rfile, wfile = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must never corrupt the frame stream
    try:
        return serve(rfile, wfile)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(_read_span_main() if sys.argv[1:] == ["--read-span"] else main())
