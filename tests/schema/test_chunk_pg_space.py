"""PostgreSQL keeps a store of chunks bounded: the head chunks a sealing deletes are vacuumed
after it commits, so the next heads reuse their space instead of piling up until autovacuum
(docs/store.md, "PostgreSQL"; schema/store/chunk_write.py, reclaim)."""

from __future__ import annotations

import reslog
import schema.store.chunk_write
from schema.store import chunk_read
from schema.store.connect import open_store
from schema.store.envelope import marker
from schema.store.rollup_writer import RollupWriter
from tests.fixtures.stores import key_id, make_run, new_store

SEAL = 64  # rows a keyset's heads hold before they are sealed (4,096 in use): many sealings
PER_FLUSH = 4
KEYS = 20


def heap_bytes(engine) -> int:
    """The main relation of `chunks`: where heads live (sealed blobs go to its TOAST table)."""
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT pg_relation_size('chunks')").scalar())


def test_heads_deleted_by_sealing_are_reused_so_the_table_stays_bounded(pg_store, monkeypatch):
    monkeypatch.setattr(schema.store.chunk_write, "SEAL_ROWS", SEAL)
    engine = new_store(pg_store)
    run = make_run(engine)
    keys = [key_id(engine, f"k{i}") for i in range(KEYS)]
    writer = RollupWriter(engine.dialect, run.id)
    periods = 40
    flushes_per_period = SEAL // PER_FLUSH
    head_bytes = 0  # what the heads written take on disk, all of them together
    sizes = []
    vacuums = 0
    for f in range(periods * flushes_per_period):
        steps = list(range(f * PER_FLUSH, (f + 1) * PER_FLUSH))
        walls = [1.7e9 + 0.3 * s for s in steps]
        cols = {k: [s * 0.5 + k for s in steps] for k in keys}
        rows = [
            (run.id, k, s, w, v)
            for k, vs in cols.items()
            for s, w, v in zip(steps, walls, vs, strict=True)
        ]
        with engine.begin() as conn:
            pending = writer.insert(conn, rows, [(steps, walls, cols)])
            head_bytes += int(
                conn.exec_driver_sql(
                    "SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM chunks c"
                    " WHERE sealed = 0 AND id = (SELECT max(id) FROM chunks WHERE sealed = 0)"
                ).scalar()
            )
        writer.accept(pending)
        with engine.connect() as conn:  # what reslog's writer does after each flush
            vacuums += writer.chunks.reclaim(conn)
        if (f + 1) % flushes_per_period == 0:
            sizes.append(heap_bytes(engine))
    # after each transaction that sealed (every 16th here, before RECLAIM_FLUSHES comes due)
    assert vacuums == periods
    # Every head ever written would still be in the file without the vacuum (~360 kB here);
    # with it the heap holds about one sealing period's heads (~9 kB) and the sealed chunks'
    # rows, and grows by those alone.
    assert head_bytes > 300_000
    assert sizes[-1] < head_bytes / 4, (sizes, head_bytes)
    later = head_bytes * (periods - 10) / periods  # the heads of periods 11 to 40
    assert sizes[-1] - sizes[9] < later / 5, (sizes, head_bytes)
    with engine.connect() as conn:
        cur, p = conn.connection.dbapi_connection.cursor(), marker(conn.dialect.paramstyle)
        got = chunk_read.series_all(cur, p, run.id, keys[3])
    n = periods * SEAL
    assert [r[1] for r in got] == list(range(n))
    assert [r[3] for r in got] == [s * 0.5 + keys[3] for s in range(n)]


def test_a_postgres_writer_vacuums_chunks_after_a_sealing_and_loses_nothing(pg_store, monkeypatch):
    monkeypatch.setattr(schema.store.chunk_write, "SEAL_ROWS", 32)
    run = reslog.init(project="p", name="vac", store=pg_store, system=False, flush_interval=0.05)
    for step in range(400):
        run.log({"a": float(step), "b": step / 3}, step=step)
    assert run.finish(timeout=60)
    engine = open_store(pg_store, readonly=True)
    with engine.connect() as conn:
        # Counted by the server for VACUUMs a client ran (autovacuum has its own counter).
        vacuumed = conn.exec_driver_sql(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'chunks'"
        ).scalar()
        heads = conn.exec_driver_sql("SELECT count(*) FROM chunks WHERE sealed = 0").scalar()
        cur, p = conn.connection.dbapi_connection.cursor(), marker(conn.dialect.paramstyle)
        run_id = conn.exec_driver_sql("SELECT id FROM runs WHERE name = 'vac'").scalar()
        key = conn.exec_driver_sql("SELECT id FROM keys WHERE name = 'b'").scalar()
        got = chunk_read.series_all(cur, p, run_id, key)
    engine.dispose()
    assert vacuumed >= 1
    assert heads == 0
    assert [r[1] for r in got] == list(range(400))
    assert [r[3] for r in got] == [s / 3 for s in range(400)]


def test_reclaim_is_a_no_op_on_sqlite_and_before_any_sealing(store_path):
    engine = new_store(store_path)
    run = make_run(engine)
    writer = RollupWriter(engine.dialect, run.id)
    k = key_id(engine, "k")
    with engine.begin() as conn:
        pending = writer.insert(conn, [(run.id, k, 0, 1.7e9, 1.0)], [([0], [1.7e9], {k: [1.0]})])
    writer.accept(pending)
    with engine.begin() as conn:
        writer.seal_all(conn, alone=True)
    writer.accept(None)
    assert not writer.chunks.reclaim_due  # SQLite reuses freed pages at once: nothing to do
    with engine.connect() as conn:
        assert writer.chunks.reclaim(conn) is False


def test_rollups_are_vacuumed_every_reclaim_flushes_without_a_sealing(pg_store):
    engine = new_store(pg_store)
    run = make_run(engine)
    writer = RollupWriter(engine.dialect, run.id)
    k = key_id(engine, "k")
    due = []
    for step in range(2 * schema.store.chunk_write.RECLAIM_FLUSHES):
        wall = 1.7e9 + step
        with engine.begin() as conn:
            pending = writer.insert(
                conn, [(run.id, k, step, wall, 1.0)], [([step], [wall], {k: [1.0]})]
            )
        writer.accept(pending)
        due.append(writer.chunks.reclaim_due)
        with engine.connect() as conn:
            assert writer.chunks.reclaim(conn) is due[-1]
    n = schema.store.chunk_write.RECLAIM_FLUSHES
    assert [i for i, d in enumerate(due) if d] == [n - 1, 2 * n - 1]  # no sealing: heads kept
    with engine.connect() as conn:
        heads = conn.exec_driver_sql("SELECT count(*) FROM chunks WHERE sealed = 0").scalar()
    assert heads == 2 * n
