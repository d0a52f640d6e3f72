"""Writing points as chunks: a flush's head chunks, and sealing a keyset's heads into one.

One writer per run (a run is written by one process at a time), inside the caller's
transaction (docs/store.md, "Points as compressed columns"):

- `write(conn, groups)`: each group is the points of keys logged together in one flush
  (steps, walls, {key_id: values}); it becomes one head chunk of its keyset (the sorted key
  ids; a group of more than 255 keys is cut into keysets of 255) with fresh point ids. Returns,
  per group, the id of each row's first point, in column order of the group's sorted keys.
- A keyset whose heads hold SEAL_ROWS rows (or SEAL_HEADS chunks) is sealed in the same
  transaction: its heads decoded, concatenated in id order, written as one chunk with their
  ids, and deleted. Readers see the heads or the sealed chunk, never both, never neither.
- `seal_all(conn)` seals every head of the run (`finish()`, an upgrade, `reslog check --fix`).
- `reclaim(conn)` (PostgreSQL), once a transaction that sealed has committed (or every
  RECLAIM_FLUSHES transactions): a VACUUM of
  `chunks`, `rollups` and `series`, so that the next heads and rollup rows reuse the space of
  the deleted heads and of the rollup rows' old versions. PostgreSQL keeps a deleted or
  updated row's bytes until a vacuum marks them free, and its inserts fill only space a
  vacuum has recorded, so without it a store held every head ever written (~8-9 bytes a
  point, raw) and most old rollup versions until autovacuum came by (docs/store.md).

Ids: on SQLite the next id is kept in `point_ids` and taken inside the flush's transaction
(writers are serialized by BEGIN IMMEDIATE, so ids commit in order); on PostgreSQL each row
takes one value of the sequence `point_row_ids`, and its k points the ids
`value * 256 .. value * 256 + k - 1`, so no lock is held across writers. A sequence value is
taken before its transaction commits, so there ids may commit out of order, as `points.id`
did; readers of a PostgreSQL store keep the overlap window they kept for it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect

from schema.store import chunk_codec
from schema.store.chunk_read import decode, numpy_modules
from schema.store.points_by_id import max_point_id

SEAL_ROWS = 4096
SEAL_HEADS = 256  # a keyset logged rarely is sealed before its heads pile up
HEAD_KINDS = (chunk_codec.RAW, chunk_codec.RAW, chunk_codec.RAW)
# Vacuumed after a sealing: the deleted heads, and the rollups and series rows every flush
# updates (an update leaves the old row dead in PostgreSQL's files too).
RECLAIM_TABLES = "chunks, rollups, series"
# ... and every this many transactions besides: between two sealings (256 of them for a keyset
# logged once a flush) the rollups' old versions would pile up (bench_store.py --postgres:
# 10.6 bytes a point vacuuming after sealings only).
RECLAIM_FLUSHES = 32
PG_ROW_STRIDE = 256  # > chunk_codec.MAX_COLUMNS: a row's points fit in its stride
_NAN = float("nan")


def _floats(values) -> list:
    """A value column as floats (None: NaN), whatever numbers the caller logged."""
    return [_NAN if v is None else float(v) for v in values]


def chunk_row(run_id: int, keyset_id: int, ids, steps, k: int, sealed: int, data) -> tuple:
    """A `chunks` row (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi, sealed, data) of a
    chunk of k keys whose row i has steps[i] and the points ids[i] .. ids[i] + k - 1."""
    return (
        run_id,
        keyset_id,
        ids[0],
        ids[-1] + k - 1,
        len(ids),
        min(steps),
        max(steps),
        sealed,
        data,
    )


def head_row(run_id: int, keyset_id: int, steps, walls, values: list, ids) -> tuple:
    """chunk_row() of a head chunk (unsealed) of one value column a key, `values`, encoded as
    raw words through the standard library: a flush's few rows cost deflate's and numpy's
    fixed costs a column for nothing; sealing compresses."""
    blob = chunk_codec.encode(steps, walls, *values, ids=ids, kinds=HEAD_KINDS, decimal=False)
    return chunk_row(run_id, keyset_id, ids, steps, len(values), 0, blob)


class ChunkWriter:
    """The chunks of one run."""

    def __init__(
        self, dialect: Dialect, run_id: int, progress: Callable[[], None] | None = None
    ) -> None:
        self.run_id = int(run_id)
        self.postgres = dialect.name == "postgresql"
        self.p = "%s" if dialect.paramstyle in ("format", "pyformat") else "?"
        self.progress = progress
        # What committed transactions left (see accept()): "3,7,9" -> keyset id, and keyset
        # id -> [head rows, head chunks]; the open transaction's changes wait beside them.
        self.keysets: dict[str, int] = {}
        self.heads: dict[int, list[int]] = {}
        self._new_keysets: dict[str, int] = {}
        self._new_heads: dict[int, list[int]] = {}
        # Heads deleted by a committed sealing and not yet vacuumed (PostgreSQL: reclaim()).
        self.reclaim_due = False
        self._sealed = False
        self._since_reclaim = 0  # committed transactions since the last reclaim()

    # -- writing ----------------------------------------------------------------------------------

    def write(self, conn: Connection, groups: list) -> dict[int, tuple[list[int], int]]:
        """Head chunks of one transaction's groups (steps, walls, {key_id: values}), each key in
        one group; returns {key: (its group's row ids, its column)}: the id of the key's point
        in row i is ids[i] + column. Call accept() once the transaction commits."""
        self._new_keysets, self._new_heads = {}, {}
        self._sealed = False
        pieces = []  # (group index, keys, steps, walls, value columns)
        for g, (steps, walls, cols) in enumerate(groups):
            if not steps:
                continue
            keys = sorted(cols)
            for i in range(0, len(keys), chunk_codec.MAX_COLUMNS):
                part = keys[i : i + chunk_codec.MAX_COLUMNS]
                pieces.append((g, part, steps, walls, [_floats(cols[k]) for k in part]))
        ids_of: dict[int, tuple[list[int], int]] = {}
        if not pieces:
            return ids_of
        bases = self._reserve(conn, [(len(st), len(keys)) for _g, keys, st, _w, _v in pieces])
        rows = []
        touched = set()
        for (_g, keys, steps, walls, values), ids in zip(pieces, bases, strict=True):
            ks = self._keyset(conn, keys)
            rows.append(head_row(self.run_id, ks, steps, walls, values, ids))
            for col, key in enumerate(keys):
                ids_of[key] = (ids, col)
            head = self._head(conn, ks)
            head[0] += len(steps)
            head[1] += 1
            touched.add(ks)
        self._insert(conn, rows)
        for ks in sorted(touched):
            rows_held, chunks_held = self._new_heads[ks]
            if rows_held >= SEAL_ROWS or chunks_held >= SEAL_HEADS:
                self.seal(conn, ks)
        return ids_of

    def begin(self) -> None:
        """A transaction starts: forget what a failed one left pending."""
        self._new_keysets, self._new_heads = {}, {}
        self._sealed = False

    def accept(self) -> None:
        """The transaction of the last write() committed: its keysets and heads are known."""
        self.keysets.update(self._new_keysets)
        self.heads.update(self._new_heads)
        self._new_keysets, self._new_heads = {}, {}
        self._since_reclaim += 1
        if self.postgres and (self._sealed or self._since_reclaim >= RECLAIM_FLUSHES):
            self.reclaim_due = True
        self._sealed = False

    def reclaim(self, conn: Connection) -> bool:
        """PostgreSQL, outside any transaction, after accept() of a transaction that sealed
        (or of every RECLAIM_FLUSHES-th): VACUUM the tables a flush leaves dead rows in, so
        their space is reused (docs/benchmarks.md, the issue's workload: 16.1 bytes a point
        without it). SKIP_LOCKED: another writer's vacuum or autovacuum is doing it already;
        TRUNCATE false: giving trailing pages back takes a lock that would stall every writer
        of the store. Never raises (the writer's loop calls it once its points are
        committed); False when nothing ran."""
        if not self.reclaim_due:
            return False
        self.reclaim_due = False
        self._since_reclaim = 0
        try:
            raw = conn.connection.dbapi_connection
            if raw is None or raw.info.server_version < 120000:  # the options are PG 12's
                return False
            autocommit = raw.autocommit
            raw.autocommit = True  # VACUUM cannot run inside a transaction block
            try:
                raw.execute(f"VACUUM (SKIP_LOCKED, TRUNCATE false) {RECLAIM_TABLES}")
            finally:
                raw.autocommit = autocommit
        except Exception:  # a store we may not vacuum (not its owner warns only), a lost link
            return False
        return True

    def seal_all(self, conn: Connection) -> int:
        """Seal every head chunk of the run (in the caller's transaction; accept() after it);
        returns the keysets sealed."""
        found = conn.exec_driver_sql(
            f"SELECT DISTINCT keyset_id FROM chunks WHERE run_id = {self.p} AND sealed = 0",
            (self.run_id,),
        ).all()
        for (ks,) in found:
            self.seal(conn, int(ks))
        return len(found)

    def seal(self, conn: Connection, keyset_id: int) -> None:
        """The keyset's heads as one sealed chunk, keeping their ids; the heads deleted."""
        p = self.p
        heads = conn.exec_driver_sql(
            f"SELECT id, data FROM chunks WHERE keyset_id = {p} AND sealed = 0 ORDER BY id_lo",
            (keyset_id,),
        ).all()
        self._new_heads[keyset_id] = [0, 0]
        if not heads:
            return
        self._sealed = True
        decoded = [decode(blob) for _id, blob in heads]
        k = len(decoded[0].values)
        np, fast = numpy_modules()  # numpy where it imports: the standard library otherwise
        codec = fast if fast is not None else chunk_codec
        if np is not None:
            steps = np.concatenate([c.steps for c in decoded])
            walls = np.concatenate([c.walls for c in decoded])
            ids = np.concatenate([c.ids for c in decoded])
            values = [np.concatenate([c.values[j] for c in decoded]) for j in range(k)]
            lo, hi = int(steps.min()), int(steps.max())
            first, last = int(ids[0]), int(ids[-1])
        else:
            steps = [s for c in decoded for s in c.steps]
            walls = [w for c in decoded for w in c.walls]
            ids = [i for c in decoded for i in c.ids]
            values = [[v for c in decoded for v in c.values[j]] for j in range(k)]
            lo, hi, first, last = min(steps), max(steps), ids[0], ids[-1]
        blob = codec.encode(steps, walls, *values, ids=ids)
        self._insert(
            conn, [(self.run_id, keyset_id, first, last + k - 1, len(steps), lo, hi, 1, blob)]
        )
        marks = ", ".join([p] * len(heads))
        conn.exec_driver_sql(
            f"DELETE FROM chunks WHERE id IN ({marks})", tuple(int(i) for i, _b in heads)
        )
        if self.progress is not None:
            self.progress()

    # -- ids and keysets --------------------------------------------------------------------------

    def _reserve(self, conn: Connection, shapes: list[tuple[int, int]]) -> list[list[int]]:
        """Fresh ids for pieces of (rows, keys): each piece's row ids."""
        if self.postgres:
            total = sum(n for n, _k in shapes)
            found = conn.exec_driver_sql(
                "SELECT nextval('point_row_ids') FROM generate_series(1, %s)", (total,)
            ).all()
            values = sorted(int(r[0]) * PG_ROW_STRIDE for r in found)
            out, at = [], 0
            for n, _k in shapes:
                out.append(values[at : at + n])
                at += n
            return out
        total = sum(n * k for n, k in shapes)
        start = conn.exec_driver_sql("SELECT next_id FROM point_ids WHERE id = 1").scalar()
        if start is None:  # tables made from the metadata, not the migrations
            start = max_point_id(conn.connection.cursor()) + 1
            conn.exec_driver_sql("INSERT INTO point_ids (id, next_id) VALUES (1, ?)", (start,))
        conn.exec_driver_sql("UPDATE point_ids SET next_id = ? WHERE id = 1", (int(start) + total,))
        out, at = [], int(start)
        for n, k in shapes:
            out.append(list(range(at, at + n * k, k)))
            at += n * k
        return out

    def _keyset(self, conn: Connection, keys: list[int]) -> int:
        text = ",".join(map(str, keys))
        found = self.keysets.get(text) or self._new_keysets.get(text)
        if found is not None:
            return found
        p = self.p
        row = conn.exec_driver_sql(
            f"SELECT id FROM keysets WHERE run_id = {p} AND key_ids = {p}", (self.run_id, text)
        ).first()
        if row is None:
            conn.exec_driver_sql(
                f"INSERT INTO keysets (run_id, key_ids) VALUES ({p}, {p})", (self.run_id, text)
            )
            row = conn.exec_driver_sql(
                f"SELECT id FROM keysets WHERE run_id = {p} AND key_ids = {p}",
                (self.run_id, text),
            ).first()
        self._new_keysets[text] = int(row[0])
        return int(row[0])

    def _head(self, conn: Connection, keyset_id: int) -> list[int]:
        """[head rows, head chunks] of a keyset as the open transaction has them."""
        head = self._new_heads.get(keyset_id)
        if head is None:
            known = self.heads.get(keyset_id)
            head = list(known) if known is not None else self._load_heads(conn, keyset_id)
            self._new_heads[keyset_id] = head
        return head

    def _load_heads(self, conn: Connection, keyset_id: int) -> list[int]:
        row = conn.exec_driver_sql(
            f"SELECT coalesce(sum(n), 0), count(*) FROM chunks WHERE keyset_id = {self.p}"
            " AND sealed = 0",
            (keyset_id,),
        ).first()
        return [int(row[0]), int(row[1])]

    def _insert(self, conn: Connection, rows: list[tuple]) -> None:
        p = self.p
        conn.exec_driver_sql(
            "INSERT INTO chunks (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi, sealed,"
            f" data) VALUES ({', '.join([p] * 9)})",
            rows,
        )
        if self.progress is not None:
            self.progress()

    def forget(self) -> None:
        """Drop what is cached of the store (after a failed transaction, or a resume)."""
        self.keysets.clear()
        self.heads.clear()
        self._new_keysets, self._new_heads = {}, {}
        self._sealed = False
