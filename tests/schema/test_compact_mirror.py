"""A mirror (`resplot sync`, its cursor in the mirror) across compactions of its source: each
point copied once, whatever the source regrouped or merged between two syncs."""

from __future__ import annotations

import pytest

from schema.store import chunk_compact
from tests.schema.test_chunk_compact import row_major_store


@pytest.mark.slow
def test_a_mirror_synced_a_batch_at_a_time_across_compactions_gets_every_point_once(
    tmp_path, monkeypatch
):
    """`resplot sync` (the agent's chunks op, its cursor in the mirror) a batch at a time while
    the source is compacted a unit at a time between batches: the mirror ends up with every
    point once, as the source holds them."""
    import resplot.sources.sync as sync_mod
    from resplot.sources.spec import parse_spec
    from resplot.sources.sync import Mirror

    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    source.parent.mkdir()
    engine = row_major_store(str(source), 1_500, chunk_rows=64)
    try:
        with engine.connect() as conn:
            run_id = int(conn.exec_driver_sql("SELECT min(id) FROM runs").scalar())
            work = [
                (chunk_compact.regroup, chain)
                for chain in chunk_compact.plan_regroups(chunk_compact._sealed(conn, run_id))
            ]
        assert len(work) > 10
        monkeypatch.setattr(sync_mod, "BATCH_POINTS", 700)
        with Mirror(mirror) as m:
            while work:
                m.sync(parse_spec(str(source)), max_batches=1)
                for _ in range(3):
                    if work:
                        how, chunks = work.pop(0)
                        assert chunk_compact._unit(engine, run_id, how, chunks) > 0
            chunk_compact.compact(engine)  # the merges too
            m.sync(parse_spec(str(source)))
    finally:
        engine.dispose()
    assert_copied(mirror, source)


@pytest.mark.slow
def test_a_mirror_whose_cursor_fell_inside_a_row_copies_the_rest_of_it_once(tmp_path, monkeypatch):
    """A mirror synced one per-key chunk (its cursor then sits inside a row of the store's ids:
    key 0 of a step copied, keys 1-7 not), then the source compacted those chunks into rows:
    the next sync copies the rest of that row, each point once."""
    import resplot.sources.sync as sync_mod
    from resplot.sources.spec import parse_spec
    from resplot.sources.sync import Mirror

    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    source.parent.mkdir()
    engine = row_major_store(str(source), 1_500, chunk_rows=64)
    monkeypatch.setattr(sync_mod, "BATCH_POINTS", 64)
    try:
        with Mirror(mirror) as m:
            m.sync(parse_spec(str(source)), max_batches=1)
            with m.engine.connect() as conn:
                cursor = conn.exec_driver_sql("SELECT max(id_hi) FROM chunks").scalar()
            assert cursor is not None
            chunk_compact.compact(engine)
            monkeypatch.setattr(sync_mod, "BATCH_POINTS", 700)
            m.sync(parse_spec(str(source)))
    finally:
        engine.dispose()
    assert_copied(mirror, source)


def assert_copied(mirror, source) -> None:
    """The mirror holds every point of the row-major source (1,500 steps x 8 keys and 375 x 4),
    each once."""
    from tests.resplot.test_sync import contents

    got, want = contents(mirror), contents(source)
    assert len(want["points"]) == 1_500 * 8 + 375 * 4
    assert got["points"] == want["points"]
