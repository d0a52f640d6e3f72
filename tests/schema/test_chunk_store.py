"""Points as compressed chunks in a real store (docs/store.md, "Points as compressed columns"):
head chunks a flush, sealing at 4,096 rows keeping ids, a live cursor across sealing, takes,
bit-exact columns, and the same on PostgreSQL."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

import reslog
from schema.store import chunk_read, points_by_id
from schema.store.chunk_write import SEAL_ROWS
from schema.store.envelope import marker
from schema.store.reader import StoreReader
from schema.store.rollup_writer import RollupWriter
from tests.fixtures.stores import key_id, make_run, new_store


def _cur(conn):
    """The DBAPI cursor and placeholder the chunk reader takes."""
    return conn.connection.dbapi_connection.cursor(), marker(conn.dialect.paramstyle)


def bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def write_flushes(engine, run_id, flushes, *, seal: bool = False) -> RollupWriter:
    """Each flush: a list of groups (steps, walls, {key_id: values}), one transaction each."""
    writer = RollupWriter(engine.dialect, run_id)
    for groups in flushes:
        rows = [
            (run_id, k, s, w, v)
            for steps, walls, cols in groups
            for k, vs in cols.items()
            for s, w, v in zip(steps, walls, vs, strict=True)
        ]
        with engine.begin() as conn:
            pending = writer.insert(conn, rows, groups)
        writer.accept(pending)
    if seal:
        with engine.begin() as conn:
            writer.seal_all(conn, alone=True)
        writer.accept(None)
    return writer


def training_flushes(keys: list[int], steps: int, per_flush: int, seed: int = 1) -> list:
    rng = random.Random(seed)
    out = []
    for a in range(0, steps, per_flush):
        st = list(range(a, min(steps, a + per_flush)))
        wa = [1.7e9 + 0.3 * s + rng.random() * 1e-3 for s in st]
        out.append([(st, wa, {k: [rng.gauss(0, 1) + k for _ in st] for k in keys})])
    return out


def chunk_counts(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        heads = conn.exec_driver_sql("SELECT count(*) FROM chunks WHERE sealed = 0").scalar()
        sealed = conn.exec_driver_sql("SELECT count(*) FROM chunks WHERE sealed = 1").scalar()
    return int(heads), int(sealed)


def test_a_flush_is_one_head_chunk_a_group_and_4096_rows_are_sealed_keeping_ids(store_path):
    engine = new_store(store_path)
    run = make_run(engine)
    keys = [key_id(engine, f"k{i}") for i in range(3)]
    flushes = training_flushes(keys, 5000, 100)
    writer = write_flushes(engine, run.id, flushes[:10])
    assert chunk_counts(engine) == (10, 0)  # 10 flushes of one group: 10 heads
    with engine.connect() as conn:
        before = points_by_id.points_after(*_cur(conn), [run.id], 0)
    assert len(before) == 1000 * 3
    assert len({r[0] for r in before}) == len(before)  # a point id each
    write_flushes(engine, run.id, flushes[10:41])  # 4,100 rows: sealed on the 41st flush
    heads, sealed = chunk_counts(engine)
    assert sealed == 1 and heads == 0
    with engine.connect() as conn:
        after = points_by_id.points_after(*_cur(conn), [run.id], 0)
    assert after[: len(before)] == before  # same ids, same points, after sealing
    assert len(after) == 4100 * 3
    del writer


def test_a_live_cursor_across_sealing_sees_every_point_once(store_path):
    engine = new_store(store_path)
    run = make_run(engine)
    keys = [key_id(engine, f"k{i}") for i in range(4)]
    flushes = training_flushes(keys, SEAL_ROWS * 2 + 500, 337, seed=3)
    writer = RollupWriter(engine.dialect, run.id)
    seen: list[tuple] = []
    cursor = 0
    for groups in flushes:
        rows = [
            (run.id, k, s, w, v)
            for st, wa, cols in groups
            for k, vs in cols.items()
            for s, w, v in zip(st, wa, vs, strict=True)
        ]
        with engine.begin() as conn:
            pending = writer.insert(conn, rows, groups)
        writer.accept(pending)
        with engine.connect() as conn:  # a poll, limited as the agent pages
            while True:
                got = points_by_id.points_after(*_cur(conn), None, cursor, limit=500)
                if not got:
                    break
                seen += got
                cursor = got[-1][0]
    assert chunk_counts(engine)[1] == 2  # sealed twice meanwhile
    want = sorted((s, k) for groups in flushes for st, _w, cols in groups for k in cols for s in st)
    assert sorted((r[3], r[2]) for r in seen) == want
    assert len({r[0] for r in seen}) == len(seen)
    assert [r[0] for r in seen] == sorted(r[0] for r in seen)


def test_columns_come_back_to_the_bit_through_reslog_and_in_batches(store_path):
    payload = struct.unpack("<d", struct.pack("<q", 0x7FF8DEADBEEF0001))[0]
    special = [payload, -0.0, math.inf, -math.inf, 5e-324, 1.5]
    run = reslog.init("p", name="bits", store=store_path, system=False)
    for step in range(9000):
        run.log({"x": special[step % len(special)], "y": float(step)}, step=step)
    run.finish()
    engine = new_store(store_path)
    assert chunk_counts(engine)[0] == 0  # finish() sealed every head
    reader = StoreReader(engine, store=str(store_path))
    row_id, _ = reader.find("bits")
    kid = key_id(engine, "x")
    parts = list(reader.scan(row_id, kid, batch=1000, columns=True))
    assert len(parts) >= 2
    steps = np.concatenate([p[0] for p in parts])
    values = np.concatenate([p[2] for p in parts])
    assert steps.tolist() == list(range(9000))
    assert [bits(v) for v in values[:6]] == [bits(v) for v in special]
    assert (np.diff(values.view(np.int64)[::6]) == 0).all()
    frame = reslog.open(store_path).points("bits", "y")
    assert frame["value"].tolist() == [float(s) for s in range(9000)]


def test_a_restart_supersedes_by_id_and_step_in_rows_and_columns(store_path):
    engine = new_store(store_path)
    run = make_run(engine)
    k = key_id(engine, "loss")
    first = [(list(range(0, 100)), [1.0e9 + s for s in range(100)], {k: [1.0] * 100})]
    # Resumed from step 60: steps 60..99 again, logged later, with other values.
    second = [(list(range(60, 120)), [2.0e9 + s for s in range(60)], {k: [2.0] * 60})]
    write_flushes(engine, run.id, [first, second], seal=True)
    with engine.connect() as conn:
        cur, p = _cur(conn)
        series = chunk_read.Series(cur, p, run.id, k, True)
        rows = chunk_read.series_rows(series, 0, 1000)
        _ids, steps, _walls, values = chunk_read.series_columns(series, 0, 1000)
        everything = chunk_read.series_all(cur, p, run.id, k)
    assert [r[1] for r in rows] == list(range(120))
    assert [r[3] for r in rows] == [1.0] * 60 + [2.0] * 60
    assert steps.tolist() == list(range(120)) and values.tolist() == [1.0] * 60 + [2.0] * 60
    assert len(everything) == 160  # the superseded points are kept


def test_legacy_rows_and_chunks_read_as_one_series(store_path):
    """Rows of a store written before 0006 (not yet converted) and new chunks, merged."""
    engine = new_store(store_path)
    run = make_run(engine)
    k = key_id(engine, "loss")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
            [(run.id, k, s, 1e9 + s, None if s == 3 else float(s)) for s in range(10)],
        )
        conn.exec_driver_sql("UPDATE point_ids SET next_id = 1000")
    write_flushes(
        engine,
        run.id,
        [
            [
                (
                    list(range(10, 20)),
                    [1e9 + s for s in range(10, 20)],
                    {k: [float(s) for s in range(10, 20)]},
                )
            ]
        ],
    )
    with engine.connect() as conn:
        cur, p = _cur(conn)
        rows = chunk_read.series_rows(chunk_read.Series(cur, p, run.id, k, False), 0, 100)
        after = points_by_id.points_after(cur, p, [run.id], 5)
        assert points_by_id.max_point_id(cur) == 1009
    assert [r[1] for r in rows] == list(range(20)) and rows[3][3] is None
    assert [r[0] for r in after] == [6, 7, 8, 9, 10, *range(1000, 1010)]


def test_postgres_stores_the_same_chunks_with_strided_ids(pg_store):
    engine = new_store(pg_store)
    run = make_run(engine)
    keys = [key_id(engine, f"k{i}") for i in range(3)]
    flushes = training_flushes(keys, 4300, 200, seed=5)  # sealed at 4,200, then by seal_all
    write_flushes(engine, run.id, flushes, seal=True)
    heads, sealed = chunk_counts(engine)
    assert heads == 0 and sealed == 2
    with engine.connect() as conn:
        cur, p = _cur(conn)
        got = points_by_id.points_after(cur, p, [run.id], 0)
        rows = chunk_read.series_rows(chunk_read.Series(cur, p, run.id, keys[1], False), 0, 10_000)
    assert len(got) == 4300 * 3 and len({r[0] for r in got}) == len(got)
    assert {r[0] % 256 for r in got} == {0, 1, 2}  # a row's points: v * 256 + column
    want = [v for groups in flushes for _s, _w, cols in groups for v in cols[keys[1]]]
    assert [r[3] for r in rows] == want


@pytest.mark.parametrize("seed", [1, 2])
def test_random_groups_flushes_and_restarts_read_back_as_the_reference(store_path, seed):
    engine = new_store(store_path)
    run = make_run(engine)
    rng = random.Random(seed)
    keys = [key_id(engine, f"k{i}") for i in range(5)]
    logged: dict[int, list[tuple]] = {k: [] for k in keys}  # (order, step, value)
    order = 0
    step = 0
    flushes = []
    for _ in range(60):
        groups = []
        pool = keys[:]
        rng.shuffle(pool)
        while pool:
            m = rng.randint(1, 3)
            part, pool = pool[:m], pool[m:]
            n = rng.randint(1, 150)
            if rng.random() < 0.05:
                step = max(0, step - rng.randint(1, 50))  # a restart
            st = list(range(step, step + n))
            step += n
            cols = {k: [rng.random() for _ in st] for k in part}
            groups.append((st, [1e9 + order + i for i in range(n)], cols))
            for k in part:
                logged[k] += [
                    (order + i, s, v) for i, (s, v) in enumerate(zip(st, cols[k], strict=True))
                ]
            order += n
        flushes.append(groups)
    write_flushes(engine, run.id, flushes, seal=rng.random() < 0.5)
    with engine.connect() as conn:
        cur, p = _cur(conn)
        for k in keys:
            got = chunk_read.series_all(cur, p, run.id, k)
            want = sorted(logged[k])
            assert [(r[1], r[3]) for r in got] == [(s, v) for _o, s, v in want]


def test_a_point_seen_as_a_row_and_in_a_chunk_is_read_once(store_path):
    """Rows and chunks are read by two statements; an upgrade converting the run between them
    shows its points in both. Stood in for here by a store holding both copies."""
    from schema.store import chunk_codec

    engine = new_store(store_path)
    run = make_run(engine)
    k = key_id(engine, "loss")
    steps = list(range(10))
    walls = [1e9 + s for s in steps]
    values = [float(s) for s in steps]
    ids = list(range(1, 11))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO points (id, run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?, ?)",
            [(i, run.id, k, s, w, v) for i, s, w, v in zip(ids, steps, walls, values, strict=True)],
        )
        conn.exec_driver_sql(
            "INSERT INTO keysets (run_id, key_ids) VALUES (?, ?)", (run.id, str(k))
        )
        ks = conn.exec_driver_sql("SELECT max(id) FROM keysets").scalar()
        blob = chunk_codec.encode(steps, walls, values, ids=ids)
        conn.exec_driver_sql(
            "INSERT INTO chunks (run_id, keyset_id, id_lo, id_hi, n, step_lo, step_hi, sealed,"
            " data) VALUES (?, ?, 1, 10, 10, 0, 9, 1, ?)",
            (run.id, ks, blob),
        )
    with engine.connect() as conn:
        cur, p = _cur(conn)
        series = chunk_read.Series(cur, p, run.id, k, False)
        rows = chunk_read.series_rows(series, 0, 100)
        after = points_by_id.points_after(cur, p, [run.id], 0)
        got_ids, got_steps, _w, _v = chunk_read.series_columns(series, 0, 100)
    assert [r[0] for r in rows] == ids
    assert [r[0] for r in after] == ids
    assert got_ids.tolist() == ids and got_steps.tolist() == steps
