"""schema.store.sql.BulkRows: many rows in few statements, in order, within SQLite's variable limit.

The statement count matters beyond speed: the sqlite3 module releases the GIL once per statement
step, and a writer thread that releases it once per row starves beside a training loop that
holds it (docs/store.md, "Writing"). The counts come from SQLite's own trace callback.
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import Column, Float, Integer, MetaData, Table, create_engine

from schema.store.sql import BulkRows, positional_insert, positional_upsert
from tests.fixtures.stored_points import all_points

meta = MetaData()
# Shaped as the store's points and rollups tables: an id in arrival order, a composite key.
pts = Table(
    "pts",
    meta,
    Column("id", Integer, primary_key=True),
    Column("key_id", Integer),
    Column("step", Integer),
    Column("wall", Float),
    Column("value", Float),
)
agg = Table(
    "agg",
    meta,
    Column("key_id", Integer, primary_key=True),
    Column("bucket", Integer, primary_key=True),
    Column("n", Integer),
)


@pytest.fixture
def engine(tmp_path):
    eng = create_engine(f"sqlite:///{tmp_path / 's.db'}")
    meta.create_all(eng)
    yield eng
    eng.dispose()


def _traced(conn) -> list[str]:
    seen: list[str] = []
    conn.connection.dbapi_connection.set_trace_callback(seen.append)
    return seen


@pytest.mark.parametrize("n", [1, 2, 1023, 1024, 1025, 3000])
def test_rows_go_in_whole_and_in_order_in_few_statements(engine, n):
    cols = ["key_id", "step", "wall", "value"]
    bulk = BulkRows(engine.dialect, positional_insert(engine.dialect, pts, cols), len(cols))
    rows = [(7, i, 1000.0 + i, i * 0.5) for i in range(n)]
    with engine.connect() as conn, conn.begin():
        seen = _traced(conn)
        bulk.run(conn, rows)
        inserts = [s for s in seen if s.lstrip().upper().startswith("INSERT")]
        got = conn.exec_driver_sql("SELECT key_id, step, wall, value FROM pts ORDER BY id").all()
    assert [tuple(r) for r in got] == rows
    # Powers of two up to 1024 rows a statement: n = 3000 is 1024 + 1024 + 512 + 256 + ... + 8.
    full, rest = divmod(n, 1024)
    assert len(inserts) == full + bin(rest).count("1")


def test_an_upsert_of_one_key_twice_keeps_the_later_row(engine):
    cols = ["key_id", "bucket", "n"]
    bulk = BulkRows(engine.dialect, positional_upsert(engine.dialect, agg, cols), len(cols))
    with engine.connect() as conn, conn.begin():
        bulk.run(conn, [(1, 0, 1), (2, 0, 5), (1, 0, 9), (1, 1, 3)])
        got = conn.exec_driver_sql("SELECT key_id, bucket, n FROM agg ORDER BY 1, 2").all()
    assert [tuple(r) for r in got] == [(1, 0, 9), (1, 1, 3), (2, 0, 5)]


def test_statements_stay_within_the_connections_variable_limit(tmp_path):
    if not hasattr(sqlite3.Connection, "setlimit"):
        pytest.skip("sqlite3.Connection.setlimit needs Python 3.11")
    eng = create_engine(f"sqlite:///{tmp_path / 'limit.db'}")
    with eng.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)")
        conn.commit()
        dbapi = conn.connection.dbapi_connection
        dbapi.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 50)  # as an old SQLite would
        bulk = BulkRows(eng.dialect, "INSERT INTO t (a, b, c) VALUES (?, ?, ?)", 3)
        with conn.begin():
            seen = _traced(conn)
            bulk.run(conn, [(i, i, i) for i in range(100)])
        assert conn.exec_driver_sql("SELECT count(*), sum(a) FROM t").one() == (100, 4950)
    # 50 variables hold 16 rows of 3: 100 = 6 x 16 + 4.
    assert len([s for s in seen if s.startswith("INSERT")]) == 7
    eng.dispose()


def test_sql_without_a_single_values_group_is_refused(engine):
    with pytest.raises(RuntimeError, match="VALUES group"):
        BulkRows(engine.dialect, "INSERT INTO t (a, b) SELECT 1, 2", 2)


def test_the_writer_keeps_each_series_in_arrival_order(tmp_path):
    """The writer inserts series by series (docs/store.md, "How the writer inserts"): across
    series the ids may interleave differently from the calls, but within one series they
    follow the calls, repeated steps included (the later point of a step is the newer one)."""
    import reslog

    run = reslog.init(project="p", store=tmp_path / "o.db", system=False)
    logged: dict[str, list[tuple[int, float]]] = {"a": [], "b": [], "c": []}
    for i in range(3000):
        step = i // 3  # every step three times
        m = {"a": float(i)}
        if i % 2:
            m["b"] = -float(i)
        if i % 7 == 0:
            m["c"] = i * 0.5
        run.log(m, step=step)
        for k, v in m.items():
            logged[k].append((step, v))
    run.finish()
    conn = sqlite3.connect(tmp_path / "o.db")
    ids = dict(conn.execute("SELECT name, id FROM keys").fetchall())
    stored = all_points(conn)
    for key, expected in logged.items():
        got = [(step, value) for _i, _r, k, step, _w, value in stored if k == ids[key]]
        assert got == expected, key
    conn.close()


@pytest.mark.postgres
def test_distinct_upserts_go_in_whole_on_postgresql_in_few_statements(pg_store):
    """PostgreSQL, distinct=True (the writer's rollup and series upserts): multi-row statements
    with $n markers, powers of two up to 1,024 rows, typed as SQLAlchemy casts them; an upsert
    replaces stored rows; NULLs, NaN and ints in a float column go in as they would one by
    one."""
    from sqlalchemy import BigInteger

    pg_meta = MetaData()
    table = Table(
        "agg",
        pg_meta,
        Column("key_id", BigInteger, primary_key=True),
        Column("bucket", BigInteger, primary_key=True),
        Column("n", BigInteger),
        Column("v", Float),
    )
    eng = create_engine(pg_store)
    pg_meta.create_all(eng)
    cols = ["key_id", "bucket", "n", "v"]
    bulk = BulkRows(
        eng.dialect, positional_upsert(eng.dialect, table, cols), len(cols), distinct=True
    )
    rows = [(k % 7, k, k * 3, float(k) / 4) for k in range(3000)]
    rows[5] = (5, 5, None, None)
    rows[6] = (6, 6, 18, 6)  # an int where a float belongs
    again = [(k % 7, k, -k, float("nan") if k == 9 else -1.5) for k in range(0, 3000, 2)]
    statements = []
    real_statement = bulk._statement

    def counted(size: int) -> str:  # the statements run, by size (libpq has no trace hook)
        statements.append(size)
        return real_statement(size)

    bulk._statement = counted
    with eng.connect() as conn:
        with conn.begin():
            bulk.run(conn, rows)
            bulk.run(conn, again)
        got = conn.exec_driver_sql("SELECT key_id, bucket, n, v FROM agg ORDER BY bucket").all()
    eng.dispose()
    want = {r[1]: r for r in rows}
    want.update({r[1]: r for r in again})
    assert len(got) == 3000
    for row in got:
        expected = want[row[1]]
        assert row[:3] == expected[:3]
        if expected[3] is None or expected[3] == expected[3]:
            assert row[3] == expected[3]
        else:
            assert row[3] != row[3]  # NaN stays NaN
    # 3000 = 1024 + 1024 + 512 + 256 + 128 + 32 + 16 + 8; 1500 = 1024 + 256 + 128 + 64 + 16 + 8 + 4
    assert statements == [1024, 1024, 512, 256, 128, 32, 16, 8, 1024, 256, 128, 64, 16, 8, 4]
