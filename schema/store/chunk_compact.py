"""Compaction: a run's sealed chunks rewritten into fewer, every point keeping its id
(docs/store.md, "Compaction").

Two rewrites, each lossless to the bit (columns decoded and encoded again, never computed with):

- *Regrouping.* Chunks of different keysets of one run whose rows coincide (the same steps and
  walls, bit for bit) and whose ids already follow the store's id rule side by side (row i of
  the second holds ids[i] + k1, where k1 is the first's columns, and so on) become one chunk of
  their columns together: one steps stream and one walls stream for them all. Rows written
  one key at a time in step order (an import, a conversion of rows logged step by step) are
  like that; points whose ids do not line up stay where they are (below).
- *Merging.* Sealed chunks of one keyset smaller than CHUNK_ROWS, next to each other by id and
  apart, are joined up to CHUNK_ROWS rows (the last chunk of a key, a run resumed, a key logged
  rarely and sealed at 256 heads).

Ids are kept, so "what is new since cursor C" is `id > C` before, during and after: a reader
polling by cursor neither loses nor repeats a point, as across a sealing (the same move: the
old chunks deleted and the new one inserted in one transaction). Points whose ids do not line
up are never renumbered: a new id would be seen again by a reader past the old one, and a
reader part way through the old ids would lose or repeat points whatever new ids they got.

Each unit of work (one new chunk) is one transaction that reads its input chunks again, checks
them, writes the new chunk and deletes them: a kill at any moment rolls back at most that unit,
and running it again plans from what is stored. Only runs whose writer is gone are compacted
(not stored as running, or running with a stale heartbeat: the rule `reslog check --fix` seals
a run's heads by), and only sealed chunks: a live run's chunks are its writer's. Rollups,
series rows and takes are about points and ids, which do not change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import Connection, Engine

from schema.store import chunk_codec
from schema.store.chunk_read import decode, key_list, numpy_modules
from schema.store.chunk_write import SEAL_ROWS
from schema.store.progress import Ticker
from schema.store.sql import placeholder
from schema.store.status import CRASHED, RUNNING, row_status
from schema.store.tables import runs

CHUNK_ROWS = SEAL_ROWS  # merged chunks grow up to the writer's sealed size
COMPACT_LOCK = 0x72736C63  # PostgreSQL: two compactions of one run take turns (with the run id)

Progress = Callable[[int, int], None]  # (points rewritten, points to rewrite)


class Compacted(NamedTuple):
    runs: int
    chunks_before: int
    chunks_after: int
    bytes_before: int
    bytes_after: int
    points: int  # points of the runs that changed
    rewritten: int  # points written again (a point regrouped and then merged counts twice)
    seconds: float

    def line(self) -> str:
        """What it did, in one line."""
        if not self.points:
            return f"nothing to compact: {self.chunks_before:,} chunks ({_size(self.bytes_before)})"
        return (
            f"{self.points:,} points of {self.runs} run{'s' * (self.runs != 1)} compacted: "
            f"{self.chunks_before:,} → {self.chunks_after:,} chunks, "
            f"{_size(self.bytes_before)} → {_size(self.bytes_after)} ({self.seconds:.1f} s)"
        )


def _size(n: int) -> str:
    if n < 2**10:
        return f"{n:,} bytes"
    return f"{n / 2**10:,.1f} KiB" if n < 2**20 else f"{n / 2**20:,.1f} MiB"


class _Chunk(NamedTuple):
    id: int
    keyset: int
    keys: tuple
    id_lo: int
    id_hi: int
    n: int
    step_lo: int
    step_hi: int


# -- which runs ------------------------------------------------------------------------------------


def writer_gone(conn: Connection, run_id: int, now: float | None = None) -> bool:
    """Whether no writer holds the run: stored as ended, or running with a stale heartbeat or a
    process that is gone (crashed). A run without a row is nobody's either."""
    row = conn.execute(runs.select().where(runs.c.id == run_id)).first()
    return row is None or row_status(row._mapping, now) == CRASHED or row.status != RUNNING


def compactable_runs(conn: Connection, run_ids=None) -> list[int]:
    """The runs (of `run_ids`; None: all) that have sealed chunks and no live writer."""
    sql = "SELECT DISTINCT run_id FROM chunks WHERE sealed = 1"
    found = sorted(int(r) for (r,) in conn.exec_driver_sql(sql).all())
    if run_ids is not None:
        wanted = {int(r) for r in run_ids}
        found = [r for r in found if r in wanted]
    now = time.time()
    return [r for r in found if writer_gone(conn, r, now)]


def _sealed(conn: Connection, run_id: int) -> list[_Chunk]:
    p = placeholder(conn.dialect)
    rows = conn.exec_driver_sql(
        "SELECT c.id, c.keyset_id, k.key_ids, c.id_lo, c.id_hi, c.n, c.step_lo, c.step_hi"
        f" FROM chunks c JOIN keysets k ON k.id = c.keyset_id WHERE c.run_id = {p}"
        " AND c.sealed = 1 ORDER BY c.id_lo",
        (run_id,),
    ).all()
    return [
        _Chunk(int(i), int(ks), tuple(key_list(t)), int(lo), int(hi), int(n), int(s0), int(s1))
        for i, ks, t, lo, hi, n, s0, s1 in rows
    ]


def run_points(conn: Connection, run_ids) -> int:
    """Points in the chunks of these runs."""
    p = placeholder(conn.dialect)
    total = 0
    for run_id in run_ids:
        rows = conn.exec_driver_sql(
            "SELECT k.key_ids, sum(c.n) FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
            f" WHERE c.run_id = {p} GROUP BY k.key_ids",
            (run_id,),
        ).all()
        total += sum(len(key_list(text)) * int(n) for text, n in rows)
    return total


def run_totals(conn: Connection, run_ids) -> tuple[int, int]:
    """(chunks, blob bytes) of these runs."""
    chunks = size = 0
    p = placeholder(conn.dialect)
    for run_id in run_ids:
        c, b = conn.exec_driver_sql(
            f"SELECT count(*), coalesce(sum(length(data)), 0) FROM chunks WHERE run_id = {p}",
            (run_id,),
        ).one()
        chunks += int(c)
        size += int(b)
    return chunks, size


# -- planning --------------------------------------------------------------------------------------


def plan_regroups(chunks: list[_Chunk]) -> list[list[_Chunk]]:
    """Chains of chunks whose bounds say their rows may coincide and their ids line up: each
    next one starts where the ids of the one before leave off (id_lo + its columns), with the
    same rows and steps; at most MAX_COLUMNS columns a chain. Checked on the columns later."""
    by_lo = {c.id_lo: c for c in chunks}
    taken: set[int] = set()
    chains = []
    for c in chunks:
        if c.id in taken:
            continue
        chain, cols = [c], len(c.keys)
        while True:
            last = chain[-1]
            nxt = by_lo.get(last.id_lo + len(last.keys))
            if (
                nxt is None
                or nxt.id in taken
                or nxt.keyset == last.keyset
                or (nxt.n, nxt.step_lo, nxt.step_hi) != (c.n, c.step_lo, c.step_hi)
                or nxt.id_hi != last.id_hi + len(nxt.keys)
                or cols + len(nxt.keys) > chunk_codec.MAX_COLUMNS
                or set(nxt.keys) & {k for x in chain for k in x.keys}
            ):
                break
            chain.append(nxt)
            cols += len(nxt.keys)
        if len(chain) > 1:
            chains.append(chain)
            taken.update(x.id for x in chain)
    return chains


def plan_merges(chunks: list[_Chunk]) -> list[list[_Chunk]]:
    """Runs of a keyset's small chunks, apart and next to each other by id, of at most
    CHUNK_ROWS rows together."""
    by_keyset: dict[int, list[_Chunk]] = {}
    for c in chunks:
        by_keyset.setdefault(c.keyset, []).append(c)
    out = []
    for held in by_keyset.values():
        batch: list[_Chunk] = []
        rows = 0
        for c in held:  # in id_lo order
            fits = (
                c.n < CHUNK_ROWS
                and rows + c.n <= CHUNK_ROWS
                and (not batch or c.id_lo > batch[-1].id_hi)
            )
            if not fits:
                if len(batch) > 1:
                    out.append(batch)
                batch, rows = ([c], c.n) if c.n < CHUNK_ROWS else ([], 0)
                continue
            batch.append(c)
            rows += c.n
        if len(batch) > 1:
            out.append(batch)
    return out


# -- columns ---------------------------------------------------------------------------------------


def _same_bits(a, b) -> bool:
    """Two columns equal to the bit (numpy arrays or arrays alike)."""
    return len(a) == len(b) and a.tobytes() == b.tobytes()


def _shifted(a, b, offset: int) -> bool:
    """b == a + offset, element by element."""
    if len(a) != len(b):
        return False
    if hasattr(a, "dtype"):
        return bool(((b - a) == offset).all())
    return all(y - x == offset for x, y in zip(a, b))  # noqa: B905 (lengths checked)


def _concat(parts: list):
    np = numpy_modules()[0]
    if np is not None and hasattr(parts[0], "dtype"):
        return np.concatenate(parts)
    out = type(parts[0])(parts[0].typecode) if hasattr(parts[0], "typecode") else []
    for part in parts:
        out.extend(part)
    return out


def _encode(steps, walls, values: list, ids) -> bytes:
    fast = numpy_modules()[1]
    codec = fast if fast is not None else chunk_codec
    return codec.encode(steps, walls, *values, ids=ids)


# -- units of work ---------------------------------------------------------------------------------


class _Unit:
    """One new chunk: its inputs read again and checked inside the caller's transaction."""

    def __init__(self, conn: Connection, run_id: int, chunks: list[_Chunk]) -> None:
        self.conn = conn
        self.run_id = run_id
        self.p = placeholder(conn.dialect)
        self.chunks = chunks

    def blobs(self) -> list | None:
        """The inputs' blobs, or None where one is gone or changed (done by another compaction:
        planned again next time)."""
        p = self.p
        ids = [c.id for c in self.chunks]
        lock = " FOR UPDATE" if self.conn.dialect.name == "postgresql" else ""
        rows = self.conn.exec_driver_sql(
            f"SELECT id, keyset_id, id_lo, id_hi, n, sealed, data FROM chunks WHERE id IN"
            f" ({', '.join([p] * len(ids))}){lock}",
            tuple(ids),
        ).all()
        found = {int(r[0]): r for r in rows}
        out = []
        for c in self.chunks:
            r = found.get(c.id)
            if r is None or (int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5])) != (
                c.keyset,
                c.id_lo,
                c.id_hi,
                c.n,
                1,
            ):
                return None
            out.append(r[6])
        return out

    def keyset(self, keys: list[int]) -> int:
        p, text = self.p, ",".join(map(str, keys))
        sql = f"SELECT id FROM keysets WHERE run_id = {p} AND key_ids = {p}"
        found = self.conn.exec_driver_sql(sql, (self.run_id, text)).scalar()
        if found is None:
            self.conn.exec_driver_sql(
                f"INSERT INTO keysets (run_id, key_ids) VALUES ({p}, {p})", (self.run_id, text)
            )
            found = self.conn.exec_driver_sql(sql, (self.run_id, text)).scalar()
        return int(found)

    def replace(self, keyset: int, steps, walls, values: list, ids) -> None:
        """The new chunk in, the inputs out."""
        p = self.p
        k = len(values)
        blob = _encode(steps, walls, values, ids)
        if hasattr(steps, "dtype"):
            lo, hi = int(steps.min()), int(steps.max())
        else:
            lo, hi = min(steps), max(steps)
        self.conn.exec_driver_sql(
            "INSERT INTO chunks (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi, sealed,"
            f" data) VALUES ({', '.join([p] * 9)})",
            (self.run_id, keyset, int(ids[0]), int(ids[-1]) + k - 1, len(steps), lo, hi, 1, blob),
        )
        marks = ", ".join([p] * len(self.chunks))
        self.conn.exec_driver_sql(
            f"DELETE FROM chunks WHERE id IN ({marks})", tuple(c.id for c in self.chunks)
        )
        # A keyset left without chunks stays: a writer that knows its id (resplot sync's
        # copier, a run resumed later) may still put chunks in it, and readers list a key's
        # keysets afresh each time (an empty one costs a lookup).


def regroup(conn: Connection, run_id: int, chain: list[_Chunk]) -> int:
    """One chain into one chunk, in the caller's transaction, as far as its columns really line
    up (the longest such prefix, if two or more); returns the points rewritten."""
    unit = _Unit(conn, run_id, chain)
    blobs = unit.blobs()
    if blobs is None:
        return 0
    first = decode(blobs[0])
    if first.ids is None:
        return 0
    parts = [first]
    offset = len(chain[0].keys)
    for c, blob in zip(chain[1:], blobs[1:]):  # noqa: B905 (same length)
        d = decode(blob)
        if not (
            d.ids is not None
            and _same_bits(first.steps, d.steps)
            and _same_bits(first.walls, d.walls)
            and _shifted(first.ids, d.ids, offset)
        ):
            break
        parts.append(d)
        offset += len(c.keys)
    if len(parts) < 2:
        return 0
    unit.chunks = chain[: len(parts)]
    keys = [k for c in unit.chunks for k in c.keys]
    values = [col for d in parts for col in d.values]
    unit.replace(unit.keyset(keys), first.steps, first.walls, values, first.ids)
    return len(first.steps) * len(keys)


def merge(conn: Connection, run_id: int, batch: list[_Chunk]) -> int:
    """A keyset's chunks (apart, in id order) into one, in the caller's transaction; returns
    the points rewritten."""
    unit = _Unit(conn, run_id, batch)
    blobs = unit.blobs()
    if blobs is None:
        return 0
    decoded = [decode(b) for b in blobs]
    if any(d.ids is None for d in decoded):
        return 0
    k = len(batch[0].keys)
    steps = _concat([d.steps for d in decoded])
    walls = _concat([d.walls for d in decoded])
    ids = _concat([d.ids for d in decoded])
    values = [_concat([d.values[j] for d in decoded]) for j in range(k)]
    unit.replace(batch[0].keyset, steps, walls, values, ids)
    return len(steps) * k


def _unit(engine: Engine, run_id: int, work, chunks: list[_Chunk]) -> int:
    """One unit in a transaction of its own, if the run's writer is still gone."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "SELECT pg_advisory_xact_lock(%s, %s)", (COMPACT_LOCK, run_id % 2**31)
            )
        if not writer_gone(conn, run_id):
            return -1
        return work(conn, run_id, chunks)


def compact_run(engine: Engine, run_id: int, tick: Callable[[int], None] | None = None) -> int:
    """Regroup, then merge, one run's sealed chunks, a transaction a new chunk; returns the
    points rewritten. Stops (at a unit's bounds) if a writer takes the run meanwhile."""
    done = 0
    for planner, work in ((plan_regroups, regroup), (plan_merges, merge)):
        with engine.connect() as conn:
            plans = planner(_sealed(conn, run_id))
        for chunks in plans:
            n = _unit(engine, run_id, work, chunks)
            if n < 0:
                return done
            done += n
            if tick is not None:
                tick(sum(c.n * len(c.keys) for c in chunks))
    return done


def pending_points(engine: Engine, run_ids: list[int]) -> int:
    """Points in the chunks a compaction of these runs would rewrite, as planned now."""
    total = 0
    with engine.connect() as conn:
        for run_id in run_ids:
            chunks = _sealed(conn, run_id)
            total += sum(c.n * len(c.keys) for chain in plan_regroups(chunks) for c in chain)
            total += sum(c.n * len(c.keys) for batch in plan_merges(chunks) for c in batch)
    return total


def compact(engine: Engine, run_ids=None, progress: Progress | None = None) -> Compacted:
    """Compact every run (of `run_ids`; None: all) whose writer is gone."""
    started = time.perf_counter()
    with engine.connect() as conn:
        todo = compactable_runs(conn, run_ids)
        chunks_before, bytes_before = run_totals(conn, todo)
    total = pending_points(engine, todo) if progress is not None else 0
    tick = Ticker(progress, total)
    if progress is not None and total:
        progress(0, total)
    rewritten = 0
    changed = []
    for run_id in todo:
        n = compact_run(engine, run_id, tick)
        rewritten += n
        if n:
            changed.append(run_id)
    with engine.connect() as conn:
        chunks_after, bytes_after = run_totals(conn, todo)
        points = run_points(conn, changed)
    tick.finish()
    return Compacted(
        len(changed),
        chunks_before,
        chunks_after,
        bytes_before,
        bytes_after,
        points,
        rewritten,
        time.perf_counter() - started,
    )
