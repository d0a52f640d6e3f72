"""Chunks copied from another store as they are (`resplot sync`): checked, stored with this
store's point ids, and their rollups kept in the same transaction (docs/store.md, "Mirrors").

Ids. A mirror holds runs of many stores, each with its own ids from 1, and its readers page
by "id > C" store-wide (`points_by_id.points_after` keeps a point once per id), so a copied
point takes an id of the mirror: a batch of the source's points with after < id <= upto
becomes one block of the mirror's ids, `id + delta` with `delta = next_id - (after + 1)`, in
the source's order. A mirror fed by one store gets delta 0 for good, and its chunks' bytes
are the source's to the byte; otherwise only the ids stream of a chunk is written again (its
steps, walls and values streams are kept byte for byte, the CRC computed anew).

A chunk the batch holds whole is stored whole (sealed or head, as in the source). One that
crosses `after` or `upto` (a head the mirror copied, then sealed by its writer into a larger
chunk; a cut forced by the reply's bound) gives only its rows in (after, upto], as a head
chunk of the mirror (raw words, as the writer's heads), which the mirror seals with the
run's other heads once the run ends. A row the cursor cuts (the source compacted per-key
chunks into rows after the mirror copied some of a row's keys) gives its keys in range as a
one-row chunk of their own. So a point is copied exactly once whatever the source sealed or
compacted between two syncs.

Standard library (numpy where it imports, through `chunk_read.numpy_modules`).
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

from sqlalchemy import Connection

from schema.store import chunk_codec
from schema.store.chunk_read import decode, numpy_modules
from schema.store.chunk_write import HEAD_KINDS, SEAL_HEADS, SEAL_ROWS, chunk_row, head_row
from schema.store.points_by_id import max_point_id
from schema.store.rollup_writer import Pending, RollupWriter


class Copied(NamedTuple):
    """One chunk as the source sent it, its run and keys already the mirror's."""

    run_id: int
    key_ids: list  # the mirror's key ids, in the blob's column order
    id_lo: int
    id_hi: int
    n: int
    sealed: int
    data: bytes


def verify(blob: bytes, n: int, k: int, id_lo: int, id_hi: int) -> None:
    """Raise ValueError unless `blob` is a whole chunk of n rows and k columns with ids (its
    CRC-32 and every length checked; nothing inflated)."""
    s = chunk_codec.unpack(blob)
    if s.n != n or len(s.values) != k or s.ids is None:
        raise ValueError(
            f"corrupt chunk: {s.n} rows and {len(s.values)} columns"
            f"{'' if s.ids is not None else ' without ids'}, where {n} rows and {k} columns"
            " were announced"
        )
    if id_hi < id_lo:
        raise ValueError(f"corrupt chunk: ids {id_lo}..{id_hi}")


def _list(column) -> list:
    return column.tolist() if hasattr(column, "tolist") else list(column)


def _shifted(blob: bytes, delta: int) -> bytes:
    """The blob with every id + delta: the ids stream encoded again, the others as they are."""
    if delta == 0:
        return blob
    s = chunk_codec.unpack(blob)
    codec = numpy_modules()[1] or chunk_codec
    kind, payload = s.ids
    words = codec.decode_words(kind, payload, s.n)
    words = words + delta if hasattr(words, "dtype") else array("q", [w + delta for w in words])
    ids = codec.encode_words(words, chunk_codec.DELTA if kind == chunk_codec.LINEAR else kind)
    return chunk_codec.pack(s.n, s.steps, s.walls, ids, s.values)


def _split_rows(chunks: list[Copied], after: int, upto: int) -> list[Copied]:
    """`chunks` with, after each, a one-row chunk for every row of it that a cursor cuts: the
    keys of that row with ids in (after, upto], as a keyset of their own (ids in a row go key
    by key, so those keys' ids stay consecutive). A mirror's cursor falls inside a row when
    the source regrouped per-key chunks into rows (compaction) after the mirror copied some of
    a row's keys; the row's other keys are copied then, each point once."""
    out: list[Copied] = []
    for c in chunks:
        out.append(c)
        k = len(c.key_ids)
        if k == 1 or (c.id_lo > after and c.id_hi <= upto):
            continue
        d = decode(c.data)
        for i, base in enumerate(_list(d.ids)):
            lo, hi = max(0, after + 1 - base), min(k - 1, upto - base)
            if (lo == 0 and hi == k - 1) or lo > hi:
                continue  # a whole row (copied with its chunk) or none of it in range
            row = [_list(column[i : i + 1]) for column in (d.steps, d.walls, *d.values)]
            blob = chunk_codec.encode(
                row[0],
                row[1],
                *row[2 + lo : 3 + hi],
                ids=[base + lo],
                kinds=HEAD_KINDS,
                decimal=False,
            )
            out.append(Copied(c.run_id, c.key_ids[lo : hi + 1], base + lo, base + hi, 1, 0, blob))
    return out


class ChunkCopier:
    """Copies one batch of a source's chunks into the caller's transaction."""

    def __init__(self, conn: Connection, writers: dict[int, RollupWriter]) -> None:
        self.conn = conn
        self.writers = writers
        self.p = "%s" if conn.dialect.paramstyle in ("format", "pyformat") else "?"
        self.keysets: dict[tuple[int, str], int] = {}
        self.points = 0  # copied by copy()
        self.whole = 0  # chunks stored as they came (the others: their rows in range)

    def copy(self, chunks: list[Copied], after: int, upto: int) -> dict[int, Pending]:
        """Store the points of `chunks` with after < id <= upto (source ids), their rollups
        folded; returns the writers' pendings (accept them once the transaction commits).
        The mirror's next id moves past the batch's block."""
        conn = self.conn
        start = conn.exec_driver_sql("SELECT next_id FROM point_ids WHERE id = 1").scalar()
        if start is None:
            start = max_point_id(conn.connection.cursor()) + 1
            conn.exec_driver_sql(
                f"INSERT INTO point_ids (id, next_id) VALUES (1, {self.p})", (start,)
            )
        delta = int(start) - (after + 1)
        # Per mirror run, per keyset: [steps, walls, [values a column], row ids], the rows in
        # range of the batch's chunks of that keyset, in id order.
        held: dict[int, dict[tuple, list]] = {}
        rows = []
        for c in _split_rows(chunks, after, upto):
            k = len(c.key_ids)
            whole = c.id_lo > after and c.id_hi <= upto
            d = decode(c.data)
            ids, steps, walls = _list(d.ids), _list(d.steps), _list(d.walls)
            values = [_list(v) for v in d.values]
            if whole:
                keep = None
            else:
                keep = [i for i, base in enumerate(ids) if after < base and base + k - 1 <= upto]
                if not keep:
                    continue
                ids, steps, walls = (
                    [ids[i] for i in keep],
                    [steps[i] for i in keep],
                    [walls[i] for i in keep],
                )
                values = [[v[i] for i in keep] for v in values]
            ks = self._keyset(c.run_id, c.key_ids)
            ids = [i + delta for i in ids]
            if whole:
                self.whole += 1
                rows.append(
                    chunk_row(c.run_id, ks, ids, steps, k, c.sealed, _shifted(c.data, delta))
                )
            else:
                rows.append(head_row(c.run_id, ks, steps, walls, values, ids))
            group = held.setdefault(c.run_id, {}).get(tuple(c.key_ids))
            if group is None:
                held[c.run_id][tuple(c.key_ids)] = [steps, walls, values, ids]
            else:  # the keyset's next chunk: later ids
                group[0] += steps
                group[1] += walls
                for column, more in zip(group[2], values, strict=True):
                    column += more
                group[3] += ids
            self.points += len(ids) * k
        if rows:
            p = self.p
            conn.exec_driver_sql(
                "INSERT INTO chunks (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi,"
                f" sealed, data) VALUES ({', '.join([p] * 9)})",
                rows,
            )
        conn.exec_driver_sql(
            f"UPDATE point_ids SET next_id = {self.p} WHERE id = 1",
            (max(int(start), upto + delta + 1),),
        )
        self._seal_piles(rows)
        pendings = {}
        for run_id, keysets in held.items():
            writer = self.writers.get(run_id)
            if writer is None:
                writer = self.writers[run_id] = RollupWriter(conn.dialect, run_id)
            writer.chunks.forget()  # heads it counted may have been added here
            pendings[run_id] = self._account(writer, run_id, keysets)
        return pendings

    def _account(self, writer: RollupWriter, run_id: int, keysets: dict) -> Pending:
        """The writer's rollups of one run's copied points. Keys logged together share one
        group (the writer's quick fold); a key held by two keysets of the batch (logged with
        other companions meanwhile) needs its points in id order: then point by point."""
        if sum(map(len, keysets)) == len({key for keys in keysets for key in keys}):
            groups, ids_of = [], {}
            for keys, (steps, walls, values, ids) in keysets.items():
                groups.append((steps, walls, dict(zip(keys, values, strict=True))))
                for column, key in enumerate(keys):
                    ids_of[key] = (ids, column)
            return writer.account_groups(self.conn, groups, ids_of)
        points = []
        for keys, (steps, walls, values, ids) in keysets.items():
            for column, key in enumerate(keys):
                col = values[column]
                points += [
                    (base + column, key, steps[i], walls[i], col[i]) for i, base in enumerate(ids)
                ]
        points.sort()
        return writer.account(self.conn, [(run_id, *p[1:]) for p in points], [p[0] for p in points])

    def _seal_piles(self, rows: list) -> None:
        """Seal a keyset whose heads pile up as the run's writer would (copies of a live
        run's heads, synced often, would otherwise grow without end until it finishes)."""
        for run_id, ks in sorted({(r[0], r[1]) for r in rows if not r[7]}):
            held, count = self.conn.exec_driver_sql(
                f"SELECT coalesce(sum(n), 0), count(*) FROM chunks WHERE keyset_id = {self.p}"
                " AND sealed = 0",
                (ks,),
            ).first()
            if held >= SEAL_ROWS or count >= SEAL_HEADS:
                writer = self.writers.get(run_id)
                if writer is None:
                    writer = self.writers[run_id] = RollupWriter(self.conn.dialect, run_id)
                writer.chunks.seal(self.conn, ks)

    def _keyset(self, run_id: int, keys: list) -> int:
        text = ",".join(map(str, keys))
        found = self.keysets.get((run_id, text))
        if found is not None:
            return found
        p = self.p
        sql = f"SELECT id FROM keysets WHERE run_id = {p} AND key_ids = {p}"
        row = self.conn.exec_driver_sql(sql, (run_id, text)).first()
        if row is None:
            self.conn.exec_driver_sql(
                f"INSERT INTO keysets (run_id, key_ids) VALUES ({p}, {p})", (run_id, text)
            )
            row = self.conn.exec_driver_sql(sql, (run_id, text)).first()
        self.keysets[(run_id, text)] = int(row[0])
        return int(row[0])
