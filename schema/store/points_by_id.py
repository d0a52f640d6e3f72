"""Reading points by id, chunks and legacy rows alike: the cursor of everything so far, the
points after a cursor, the newest ids, and the points stored, counted without decoding.

A point's id is unique in the store and only grows (schema/store/chunk_read.py: row i of a
chunk with k value columns holds ids `ids[i] .. ids[i] + k - 1`), so "what is new since cursor
C" is "ids > C" whatever sealing or a conversion did in between.

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive.
"""

from __future__ import annotations

from heapq import merge as heap_merge

from schema.store.chunk_read import decode, each_once, key_list


def max_point_id(cur) -> int:
    """The highest point id stored (0: none): the cursor of "everything so far"."""
    cur.execute("SELECT max(id_hi) FROM chunks")
    high = cur.fetchone()[0] or 0
    cur.execute("SELECT max(id) FROM points")
    return max(int(high), int(cur.fetchone()[0] or 0))


def legacy_max_id(cur) -> int:
    """The highest id of the legacy `points` rows (0: none). Nothing writes such rows any more
    and revision 0006 starts chunk ids past them, so a reader's overlap window for ids that
    commit out of order (PostgreSQL) need not reach below it."""
    cur.execute("SELECT max(id) FROM points")
    return int(cur.fetchone()[0] or 0)


def point_count(cur, p: str, run_id: int | None = None, key_id: int | None = None) -> int:
    """The points stored, superseded ones included, of one run (None: all) and key (None: all):
    chunks are counted by their rows, never decoded."""
    where_c, where_l, params = [], [], []
    if run_id is not None:
        where_c.append(f"c.run_id = {p}")
        where_l.append(f"run_id = {p}")
        params.append(run_id)
    cur.execute(
        "SELECT k.key_ids, sum(c.n) FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
        + (" WHERE " + " AND ".join(where_c) if where_c else "")
        + " GROUP BY k.id, k.key_ids",
        params,
    )
    total = 0
    for text, rows in cur.fetchall():
        keys = key_list(text)
        total += int(rows) * (len(keys) if key_id is None else keys.count(key_id))
    if key_id is not None:
        where_l.append(f"key_id = {p}")
        params.append(key_id)
    cur.execute(
        "SELECT count(*) FROM points" + (" WHERE " + " AND ".join(where_l) if where_l else ""),
        params,
    )
    return total + int(cur.fetchone()[0])


def points_after(
    cur,
    p: str,
    run_ids,
    after: int,
    *,
    key_ids=None,
    upto: int | None = None,
    limit: int | None = None,
) -> list:
    """(id, run_id, key_id, step, wall, value) of the points with after < id (<= upto), of the
    runs `run_ids` (None: every run) and keys `key_ids` (None: all), in id order, the first
    `limit` of them (value None = NaN). Chunks are read in id order and reading stops once
    `limit` points are in hand below the next chunk's first id."""
    wanted = None if key_ids is None else {int(k) for k in key_ids}
    where_l, params_l = [f"id > {p}"], [after]
    where_c, params_c = [f"c.id_hi > {p}"], [after]
    if upto is not None:
        where_l.append(f"id <= {p}")
        params_l.append(upto)
        where_c.append(f"c.id_lo <= {p}")
        params_c.append(upto)
    if run_ids is not None:
        runs = [int(r) for r in run_ids]
        if not runs:
            return []
        marks = ", ".join([p] * len(runs))
        where_l.append(f"run_id IN ({marks})")
        params_l += runs
        where_c.append(f"c.run_id IN ({marks})")
        params_c += runs
    if wanted is not None:
        if not wanted:
            return []
        marks = ", ".join([p] * len(wanted))
        where_l.append(f"key_id IN ({marks})")
        params_l += sorted(wanted)
    sql = f"SELECT id, run_id, key_id, step, wall, value FROM points WHERE {' AND '.join(where_l)}"
    sql += " ORDER BY id"
    if limit is not None:
        sql += f" LIMIT {p}"
        params_l.append(limit)
    cur.execute(sql, params_l)
    legacy = cur.fetchall()
    # The chunks' bounds first, their blobs one by one as they are needed: a page of a long
    # catch-up (resplot sync of a large store) reads only the chunks it returns.
    cur.execute(
        "SELECT c.id, c.id_lo, c.run_id, k.key_ids FROM chunks c"
        f" JOIN keysets k ON k.id = c.keyset_id WHERE {' AND '.join(where_c)} ORDER BY c.id_lo",
        params_c,
    )
    parts: list = []
    held = 0
    for chunk_id, id_lo, run_id, key_text in cur.fetchall():
        if limit is not None and held >= limit:
            # Every point of this chunk and the later ones has an id >= id_lo: stop once the
            # `limit` smallest in hand lie below it.
            everything = sorted(heap_merge(*parts))
            if everything[limit - 1][0] < id_lo:
                parts, held = [everything[:limit]], limit
                break
            parts, held = [everything[:limit]], limit
        cur.execute(f"SELECT data FROM chunks WHERE id = {p}", (chunk_id,))
        found = cur.fetchone()
        if found is None:
            # Sealed meanwhile (a reader outside a transaction sees each statement's own
            # snapshot): its points are in the sealed chunk now, with the same ids; read again.
            return points_after(cur, p, run_ids, after, key_ids=key_ids, upto=upto, limit=limit)
        rows = _chunk_points(found[0], int(run_id), key_list(key_text), wanted, after, upto)
        if rows:
            parts.append(rows)
            held += len(rows)
    merged = each_once(list(heap_merge(legacy, *parts))) if parts else list(legacy)
    return merged if limit is None else merged[:limit]


def _chunk_points(blob, run_id: int, keys: list, wanted, after: int, upto) -> list:
    """(id, run_id, key_id, step, wall, value) of a chunk's points in (after, upto], by id."""
    cols = [i for i, k in enumerate(keys) if wanted is None or k in wanted]
    if not cols:
        return []
    c = decode(blob, cols)
    steps, walls, ids = _as_list(c.steps), _as_list(c.walls), _as_list(c.ids)
    out = []
    for j, col in enumerate(cols):
        key = keys[col]
        values = _as_list(c.values[j])
        for i, base in enumerate(ids):
            pid = base + col
            if pid <= after or (upto is not None and pid > upto):
                continue
            v = values[i]
            out.append((pid, run_id, key, steps[i], walls[i], None if v != v else v))
    out.sort()
    return out


def newest_ids(cur, p: str, run_id: int, count: int) -> list:
    """The ids of the run's `count` newest points, newest first."""
    cur.execute(
        f"SELECT id FROM points WHERE run_id = {p} ORDER BY id DESC LIMIT {p}", (run_id, count)
    )
    ids = [int(i) for (i,) in cur.fetchall()]
    cur.execute(
        f"SELECT id_lo, id_hi, data FROM chunks WHERE run_id = {p} ORDER BY id_hi DESC", (run_id,)
    )
    for _lo, id_hi, blob in cur.fetchall():
        ids.sort(reverse=True)
        if len(ids) >= count and ids[count - 1] > int(id_hi):
            break
        c = decode(blob, [])
        k = _columns_of(blob)
        ids.extend(base + j for base in _as_list(c.ids) for j in range(k))
    ids.sort(reverse=True)
    return ids[:count]


def _columns_of(blob) -> int:
    return int(bytes(blob[1:2])[0])


def _as_list(column) -> list:
    return column.tolist()
