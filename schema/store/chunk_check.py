"""`reslog check` over the chunks: every chunk's bytes against its CRC and its row, and the head
chunks a writer left unsealed (docs/store.md, "Integrity").

A chunk is read as it lies: its header, streams and CRC-32 (schema.store.chunk_codec.unpack, no
inflating: about a second for 150 MB of chunks, the points of a 34M-point store), its column
count against its keyset's keys and its row count against the `chunks` row; `full` also
decodes every column and checks the row's id and step bounds. A problem is one line naming the
chunk, its run and its keyset: what a restore or `reslog check --fix` needs to know.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection

from schema.store.chunk_codec import unpack
from schema.store.chunk_read import decode, key_list
from schema.store.sql import placeholder

PAGE = 512  # chunks read at a time


class ChunkReport(NamedTuple):
    chunks: int
    points: int
    blob_bytes: int
    heads: dict  # run id -> its head (unsealed) chunks
    problems: list


def _where(cid: int, run: str, keyset: int, names: list) -> str:
    shown = ", ".join(names[:4]) + (f", … {len(names) - 4} more" if len(names) > 4 else "")
    return f"chunk {cid} of run {run}, keyset {keyset} ({shown})"


def _bounds(blob, k: int, row: tuple) -> str | None:
    """What a decoded chunk says against its row's bounds (None: they agree)."""
    id_lo, id_hi, step_lo, step_hi = row
    c = decode(blob)
    steps, ids = c.steps.tolist(), (c.ids.tolist() if c.ids is not None else None)
    if steps and (min(steps), max(steps)) != (step_lo, step_hi):
        return f"its steps run {min(steps)}-{max(steps)}, its row says {step_lo}-{step_hi}"
    if ids and (min(ids), max(ids) + k - 1) != (id_lo, id_hi):
        return f"its ids run {min(ids)}-{max(ids) + k - 1}, its row says {id_lo}-{id_hi}"
    return None


def check_chunks(conn: Connection, full: bool = False) -> ChunkReport:
    """Every chunk read and checked, in pages by id (memory: one page of blobs)."""
    p = placeholder(conn.dialect)
    names = dict(conn.exec_driver_sql("SELECT id, name FROM keys").all())
    runs = {
        int(i): f"{i} ({uid[:8]} {name})"
        for i, uid, name in conn.exec_driver_sql("SELECT id, uid, name FROM runs").all()
    }
    sql = (
        "SELECT c.id, c.run_id, c.keyset_id, k.key_ids, c.n, c.sealed, c.id_lo, c.id_hi,"
        " c.step_lo, c.step_hi, c.data FROM chunks c LEFT JOIN keysets k ON k.id = c.keyset_id"
        f" WHERE c.id > {p} ORDER BY c.id LIMIT {PAGE}"
    )
    count = points = size = 0
    heads: dict[int, int] = {}
    problems: list[str] = []
    last = -(2**63)
    while True:
        rows = conn.exec_driver_sql(sql, (last,)).all()
        if not rows:
            break
        last = rows[-1][0]
        for cid, run_id, ks, key_text, n, sealed, *bounds, blob in rows:
            count += 1
            size += len(blob)
            keys = key_list(key_text or "")
            where = _where(
                cid,
                runs.get(run_id, f"{run_id} (missing)"),
                ks,
                [names.get(k, f"key {k} (missing)") for k in keys],
            )
            if not sealed:
                heads[run_id] = heads.get(run_id, 0) + 1
            try:
                s = unpack(blob)
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
                continue
            points += s.n * len(s.values)
            if key_text is None:
                problems.append(f"{where}: its keyset is missing")
            elif len(s.values) != len(keys):
                problems.append(f"{where}: {len(s.values)} value columns for {len(keys)} keys")
            elif s.n != n:
                problems.append(f"{where}: {s.n} rows, its row says {n}")
            elif full:
                try:
                    found = _bounds(blob, len(keys), tuple(bounds))
                except ValueError as exc:
                    found = str(exc)
                if found:
                    problems.append(f"{where}: {found}")
    return ChunkReport(count, points, size, heads, problems)
