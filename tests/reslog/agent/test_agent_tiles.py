"""The agent's tiles and raw pages, over real stores: the rows they hold, reads of many tiles
at once against one at a time, packed nulls, compressed replies."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest

from resplot.sources.client import (
    decode_columns,
    decode_rows,
)
from schema.store import buckets, envelope
from schema.store.chunk_read import Series
from schema.store.reader import StoreReader
from schema.store.rollup import AGG_COLUMNS
from tests.fixtures.stores import add_points, make_run, new_store
from tests.reslog.agent.test_agent import agent_process, long_store, poll

pytestmark = pytest.mark.integration


def test_tiles_hold_exactly_the_stored_rows_and_raw_tiles_leave_superseded_points_out(tmp_path):
    path = long_store(tmp_path)
    engine = new_store(path)
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        want2 = envelope.bucket_rows(cur, "?", 1, 1, 2, 0, 1023)
        want1 = envelope.bucket_rows(cur, "?", 1, 1, 1, 0, 1023)
        raw = envelope.raw_points(Series(cur, "?", 1, 1, True), 39 * 1024, 40 * 1024)
    with agent_process() as (client, _):
        ranges = [[1, 1, 2, 0, 1], [1, 1, 1, 0, 2], [1, 1, 0, 39, 1]]
        _header, sections = poll(client, str(path), series=True, tiles=ranges)
    about = sections["buckets"][0]["tiles"]
    assert len(want1) > 300 and len(want2) > 75  # 40,100 steps: 314 and 79 buckets
    assert about == [[1, 1, 2, 0, len(want2)], [1, 1, 1, 0, len(want1)], [1, 1, 1, 1, 0]]
    cols = decode_rows(sections["buckets"])
    assert_rows_equal(cols, [r[1:] for r in want2 + want1], AGG_COLUMNS)
    assert cols["vmax"][: len(want2)].max() == 10.0  # the one-step spike, at level 2
    raw_cols = decode_rows(sections["raw"])
    assert sections["raw"][0]["tiles"] == [[1, 1, 0, 39, len(raw)]]
    assert_rows_equal(raw_cols, raw, (None, "step", "wall", "value"))
    assert set(raw_cols) == {"step", "wall", "value"}  # a tile needs no ids
    assert set(raw_cols["value"][raw_cols["step"] >= 39_500].tolist()) == {2.0}  # newer take


def assert_rows_equal(cols: dict, rows: list, names) -> None:
    """Decoded packed rows against the store's rows (NULL there is NaN here, or 0 for an int)."""
    assert all(len(c) == len(rows) for c in cols.values())
    for i, name in enumerate(names):
        if name is None:  # a column the section does not carry
            continue
        want = [
            math.nan
            if r[i] is None and name in cols and cols[name].dtype.kind == "f"
            else (0 if r[i] is None else r[i])
            for r in rows
        ]
        assert np.array_equal(cols[name], np.array(want, dtype=cols[name].dtype), equal_nan=True)


def test_raw_tiles_read_in_runs_are_the_tiles_read_one_by_one(tmp_path, monkeypatch):
    """Consecutive raw tiles are read 64 at a time and cut by step: the same reply, byte for
    byte, as a read a tile, across a restart (superseded points left out), NaN, a sparse
    series of 100 tiles (empty tiles kept) and ranges longer than a run."""
    from reslog.agent import serve as agent_serve
    from reslog.agent import tile_read

    long = long_store(tmp_path, n=40_000)
    sparse = tmp_path / "sparse.db"
    values = [(s, math.nan if s == 37_500 else s / 1e3) for s in range(0, 102_400, 1_500)]
    make_run(new_store(sparse), name="eval", points={"valid/loss": values})
    cases = [(long, [[1, 1, 0, 0, 40], [1, 2, 0, 3, 30]]), (sparse, [[1, 1, 0, 0, 100]])]
    for path, ranges in cases:
        replies = []
        for run in (1, tile_read.RAW_TILES_A_READ):
            # tiles_a_read counts raw tiles by the steps they span (STEPS_A_READ)
            monkeypatch.setattr(tile_read, "STEPS_A_READ", run * buckets.tile_range(0, 1)[0])
            assert tile_read.tiles_a_read(0) == run
            agent = agent_serve.Agent()
            req = {"op": "poll", "store": str(path), "points_after": -1, "tiles": ranges}
            header, payload = agent.handle(req)
            agent.close()
            replies.append((header["sections"], payload))
        assert replies[0] == replies[1]
        about = replies[0][0][0]
        assert [t[3] for t in about["tiles"]] == [
            i for r in ranges for i in range(r[3], r[3] + r[4])
        ]
    tiles = about["tiles"]
    assert sum(t[4] for t in tiles) == len(values) and any(t[4] == 0 for t in tiles)


def test_fine_tiles_read_in_runs_are_the_tiles_read_one_by_one(tmp_path, monkeypatch):
    """Consecutive fine tiles are read up to 65,536 steps at a time, folded once and cut by
    bucket: the same reply, byte for byte, as a read a tile, at every fine level, across a
    restart (superseded points left out), NaN, a sparse series (empty tiles kept) and ranges
    longer than a read."""
    from reslog.agent import serve as agent_serve
    from reslog.agent import tile_read

    long = long_store(tmp_path, n=40_000)
    sparse = tmp_path / "sparse.db"
    values = [(s, math.nan if s == 37_500 else s / 1e3) for s in range(0, 102_400, 1_500)]
    make_run(new_store(sparse), name="eval", points={"valid/loss": values})
    for level in range(-1, -buckets.FINE_SHIFT - 1, -1):
        tiles = 102_400 // buckets.tile_range(level, 1)[0] + 2  # the last one past the points
        cases = [
            (long, [[1, 1, level, 0, tiles // 2 + 1], [1, 2, level, 1, tiles]]),
            (sparse, [[1, 1, level, 0, tiles]]),
        ]
        for path, ranges in cases:
            replies = []
            for steps in (1, tile_read.STEPS_A_READ):
                monkeypatch.setattr(tile_read, "STEPS_A_READ", steps)
                agent = agent_serve.Agent()
                req = {"op": "poll", "store": str(path), "points_after": -1, "tiles": ranges}
                header, payload = agent.handle(req)
                agent.close()
                replies.append((header["sections"], payload))
            assert replies[0] == replies[1], (level, path.name)
            about = replies[0][0][0]
            assert [t[3] for t in about["tiles"]] == [
                i for r in ranges for i in range(r[3], r[3] + r[4])
            ]
            assert sum(t[4] for t in about["tiles"]) > 0
            if path == sparse:
                assert about["tiles"][-1][4] == 0  # empty tiles kept


def test_packed_rows_bring_back_the_stores_nulls(tmp_path):
    """Buckets with no finite value (NULL vmin/vmax), a NaN newest point (NULL last), no NaN or
    inf (NULL nonfinite_at), a sum that overflows both ways (NULL vsum) and raw NaN points (NULL
    value) decode as the store has them."""
    path = tmp_path / "nulls.db"
    engine = new_store(path)
    nan, inf, big = math.nan, math.inf, 1e308
    w = buckets.width(1)
    values = [nan] * w + [inf, -inf] * (w // 2) + [1.0] * (w - 1) + [nan] + [2.0] * w
    run = make_run(engine, name="nulls")
    add_points(engine, run.id, {"x": list(enumerate(values))})
    # Bucket 4's sum overflows to +inf in one flush and to -inf in the next: NaN, kept as NULL.
    add_points(engine, run.id, {"x": [(s, big) for s in range(4 * w, 4 * w + w // 2)]})
    add_points(engine, run.id, {"x": [(s, -big) for s in range(4 * w + w // 2, 5 * w)]})
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        want1 = envelope.bucket_rows(cur, "?", run.id, 1, 1, 0, 1023)
        raw = envelope.raw_points(Series(cur, "?", run.id, 1, False), 0, 1024)
    column = {name: i + 1 for i, name in enumerate(AGG_COLUMNS)}
    assert [r[column["vmin"]] is None for r in want1[:3]] == [True, True, False]
    assert [r[column["last"]] is None for r in want1[:3]] == [True, False, True]
    assert want1[3][column["nonfinite_at"]] is None and want1[4][column["vsum"]] is None
    ranges = [[run.id, 1, 1, 0, 1], [run.id, 1, 0, 0, 1]]
    with agent_process() as (client, _):
        _header, sections = poll(client, str(path), tiles=ranges)
    got = decode_rows(sections["buckets"])
    assert_rows_equal(got, [r[1:] for r in want1], AGG_COLUMNS)
    assert math.isnan(got["vsum"][4]) and math.isnan(got["vmin"][0]) and got["vmax"][4] == big
    assert_rows_equal(decode_rows(sections["raw"]), raw, (None, "step", "wall", "value"))


def test_raw_pages_stream_a_series_like_the_store_reader(tmp_path):
    path = long_store(tmp_path)
    engine = new_store(path)
    want = [p for chunk in StoreReader(engine).scan(1, 1) for p in chunk]
    got, lo, after = [], -(2**63), None
    with agent_process() as (client, _):
        while True:
            cols, last, more = client.raw(
                str(path), 1, 1, lo, 2**63 - 1, after_id=after, limit=7_777
            )
            got += list(
                zip(
                    cols["step"].tolist(),
                    cols["wall"].tolist(),
                    cols["value"].tolist(),
                    strict=True,
                )
            )
            if not more:
                break
            lo, after = last
    assert got == want and len(got) == 40_100


def test_compressed_replies_decode_the_same(tmp_path):
    path = long_store(tmp_path, n=20_000)
    ranges = [[1, 1, 0, 0, 20], [1, 2, 1, 0, 1]]
    with agent_process() as (client, _):
        _header, plain = poll(client, str(path), series=True, tiles=ranges)
        client.compress = True
        before = client.bytes_received
        _, packed = poll(client, str(path), series=True, tiles=ranges)
        size = client.bytes_received - before
    assert size < sum(len(d) for _a, d in plain.values()) / 4
    # Packed rows come byte-shuffled when compressed (zlib then finds the columns' runs).
    assert packed["raw"][0]["shuffled"] and packed["buckets"][0]["shuffled"]
    assert not any(about.get("shuffled") for about, _d in plain.values())
    for name in ("series", "buckets", "raw"):
        decode = decode_columns if name == "series" else decode_rows
        a, b = decode(plain[name]), decode(packed[name])
        assert set(a) == set(b) and all(np.array_equal(a[c], b[c], equal_nan=True) for c in a)
    with agent_process() as (client, _):  # a raw page (ids, for paging) shuffled too
        client.compress = True
        cols, last, more = client.raw(str(path), 1, 1, 0, 2**62, limit=15_000)
    assert more and last == (int(cols["step"][-1]), int(cols["id"][-1]))
    assert cols["step"].tolist() == sorted(cols["step"].tolist()) and len(cols["id"]) == 15_000


def test_tile_indices_cover_a_series_without_gaps():
    for level in (0, 1, 2, 5):
        tiles = list(buckets.tiles_for(level, -1, 10**7))
        spans = [buckets.tile_range(level, i) for i in tiles]
        assert spans[0][0] <= -1 and spans[-1][1] > 10**7
        assert all(a[1] == b[0] for a, b in pairwise(spans))
