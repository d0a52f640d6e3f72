"""schema.store.writes: a run row and key ids, as the writer, the importers and the mirror sync
write them, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from schema.store.tables import keys, runs
from schema.store.writes import IN_CHUNK, insert_run, resolve_keys
from tests.fixtures.stores import new_store

ROW = {
    "uid": "u1",
    "project": "p",
    "name": "n",
    "status": "running",
    "created_at": 1.0,
    "heartbeat_at": 1.0,
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path):
    url = (
        tmp_path / "reslog.db" if request.param == "sqlite" else request.getfixturevalue("pg_store")
    )
    engine = new_store(url)
    yield engine
    engine.dispose()


def test_a_run_row_comes_back_with_its_id(engine):
    with engine.begin() as conn:
        first = insert_run(conn, ROW)
        second = insert_run(conn, {**ROW, "uid": "u2"})
    assert isinstance(first, int) and second > first
    with engine.connect() as conn:
        assert conn.execute(select(runs.c.uid).where(runs.c.id == second)).scalar() == "u2"


def test_keys_are_created_once_and_known_ones_keep_their_ids(engine):
    with engine.begin() as conn:
        ids = resolve_keys(conn, ["b", "a", "b"])
    assert sorted(ids) == ["a", "b"] and len(set(ids.values())) == 2
    many = [f"k{i:04d}" for i in range(IN_CHUNK * 2 + 3)]  # more than one IN (...) chunk
    with engine.begin() as conn:
        again = resolve_keys(conn, ["a", *many])
        assert resolve_keys(conn, []) == {}
    assert again["a"] == ids["a"] and len(again) == len(many) + 1
    with engine.connect() as conn:
        stored = dict(conn.execute(select(keys.c.name, keys.c.id)).all())
    assert stored == {**ids, **again}
