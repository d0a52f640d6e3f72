"""`reslog.open().scan()` from chunk columns on real SQLite stores: a key of a keyset read
through SQLite's incremental blob I/O (only its streams read and verified), chunks of format
version 1 still read and verified whole, a flipped bit in a stream read being one clear error
naming the chunk (and `reslog check` catching a flipped bit in any stream), one read of a
series of exactly `batch` points, and no transaction left open."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from sqlalchemy import event

import reslog
from schema.store import chunk_codec, chunk_columns, chunk_read, points_by_id
from schema.store.chunk_check import check_chunks
from schema.store.envelope import marker
from schema.store.reader import StoreReader
from tests.fixtures.stores import key_id, make_run, new_store
from tests.schema.test_chunk_store import write_flushes

KEYS = [f"k{j}" for j in range(12)]
STEPS = 9_000


def bits(values) -> list:
    return [struct.unpack("<q", struct.pack("<d", v))[0] for v in values]


def nan_as_none(values) -> list:
    """The values' bit patterns, NaN as None (history() reads NaN as the rollups keep it)."""
    return [None if v != v else bits([v])[0] for v in values]


def value(j: int, step: int) -> float:
    special = [
        struct.unpack("<d", struct.pack("<q", 0x7FF8DEADBEEF0001))[0],
        -0.0,
        math.inf,
        -math.inf,
        5e-324,
    ]
    return special[step % 5] if j == 3 and step % 7 == 0 else step * 0.5 + j / 7


def logged(path) -> None:
    """One run "r": the 12 keys logged together every step, in flushes of 500 rows, sealed at
    4,500 and 9,000 rows (two chunks of one keyset), through the store's own writer."""
    engine = new_store(path)
    run = make_run(engine, name="r")
    keys = [key_id(engine, k) for k in KEYS]
    flushes = []
    for a in range(0, STEPS, 500):
        steps = list(range(a, a + 500))
        walls = [1.7e9 + 0.3 * s + (s % 13) * 1e-4 for s in steps]
        flushes.append(
            [(steps, walls, {k: [value(j, s) for s in steps] for j, k in enumerate(keys)})]
        )
    write_flushes(engine, run.id, flushes, seal=True)
    engine.dispose()


def reference(engine, key: str) -> tuple:
    """(steps, walls, values) by the row path: whole blobs decoded, a tuple a point."""
    kid = key_id(engine, key)
    with engine.connect() as conn:
        run_id = conn.exec_driver_sql("SELECT id FROM runs").scalar()
        cur = conn.connection.dbapi_connection.cursor()
        series = chunk_read.Series(cur, marker("qmark"), run_id, kid, False)
        rows = chunk_read.series_rows(series, -(2**63), 2**63 - 1)
    return (
        [r[1] for r in rows],
        [r[2] for r in rows],
        [None if r[3] is None else bits([r[3]])[0] for r in rows],  # the rows' NaN: None
    )


def scanned(path, key: str, batch: int = 100_000):
    with reslog.open(path) as store:
        return reslog_frame(list(store.scan("r", key, batch=batch)))


def reslog_frame(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def chunk_rows(engine) -> list:
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT id, run_id, keyset_id, data FROM chunks").all()


def rewrite(engine, cid: int, blob: bytes) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE chunks SET data = ? WHERE id = ?", (blob, cid))


def test_one_key_of_a_keyset_reads_to_the_bit_from_version_2_chunks(store_path):
    logged(store_path)
    engine = new_store(store_path)
    chunks = chunk_rows(engine)
    assert len(chunks) == 2 and {blob[0] for *_r, blob in chunks} == {2}
    assert {chunk_codec.describe(blob)["columns"] for *_r, blob in chunks} == {len(KEYS)}
    for key in ("k0", "k3", "k11"):
        frame = scanned(store_path, key)
        steps, walls, values = reference(engine, key)
        assert frame["step"].tolist() == steps == list(range(STEPS))
        assert bits(frame["wall"]) == bits(walls)
        assert [None if v != v else bits([v])[0] for v in frame["value"]] == values
        j = KEYS.index(key)
        assert bits(frame["value"]) == bits([value(j, s) for s in range(STEPS)])
        assert frame["key"].tolist() == [key] * STEPS and frame["key"].dtype == object
        assert str(frame["step"].dtype) == "int64" and str(frame["value"].dtype) == "float64"
    # in pages, the same points
    paged = scanned(store_path, "k3", batch=1000)
    assert bits(paged["value"]) == bits([value(3, s) for s in range(STEPS)])


def test_version_1_chunks_read_whole_and_verify_as_before(store_path):
    """Chunks written before format version 2 (users' stores): read whole, one CRC."""
    logged(store_path)
    engine = new_store(store_path)
    want = scanned(store_path, "k3")
    for cid, _run, _ks, blob in chunk_rows(engine):
        c = chunk_codec.decode(blob)
        rewrite(engine, cid, chunk_codec.encode(c.steps, c.walls, *c.values, ids=c.ids, version=1))
    assert {blob[0] for *_r, blob in chunk_rows(engine)} == {1}
    got = scanned(store_path, "k3")
    assert bits(got["value"]) == bits(want["value"]) and bits(got["wall"]) == bits(want["wall"])
    # A flipped bit in another key's stream of a version 1 chunk: its one CRC fails.
    cid, run_id, _ks, blob = chunk_rows(engine)[0]
    broken = bytearray(blob)
    broken[len(broken) - 100] ^= 0x04  # in the last value column's stream
    rewrite(engine, cid, bytes(broken))
    with pytest.raises(ValueError, match=rf"CRC-32 does not match.*chunk {cid} of run {run_id}"):
        scanned(store_path, "k0")


def _stream_at(blob: bytes, index: int) -> int:
    """The offset of the middle of stream `index` (directory order) of a version 2 blob."""
    d = chunk_codec.read_directory(blob[: chunk_codec.directory_size(blob[:7])], len(blob))
    _kind, at, length, _crc = d.entries[index]
    assert length > 16, "a compressed stream, not a linear one"
    return at + length // 2


def test_a_flipped_bit_in_a_stream_read_is_an_error_naming_the_chunk(store_path):
    logged(store_path)
    engine = new_store(store_path)
    cid, run_id, ks, blob = chunk_rows(engine)[1]
    # value column 4 (k3) is stream 3 + 3 (steps, walls, ids first)
    broken = bytearray(blob)
    broken[_stream_at(blob, 3 + 3)] ^= 0x10
    rewrite(engine, cid, bytes(broken))
    with pytest.raises(ValueError) as err:
        scanned(store_path, "k3")
    message = str(err.value)
    assert message.startswith("corrupt chunk: its CRC-32 does not match its bytes")
    assert "value column 4 stream" in message
    assert f"chunk {cid} of run {run_id}, keyset {ks}" in message
    # Another key of the chunk reads (its streams are whole and verified) ...
    assert bits(scanned(store_path, "k0")["value"]) == bits([value(0, s) for s in range(STEPS)])
    # ... and `reslog check` reads every stream: the chunk is named.
    with engine.connect() as conn:
        report = check_chunks(conn)
    assert len(report.problems) == 1 and f"chunk {cid} of run" in report.problems[0]
    assert "value column 4 stream" in report.problems[0]


def test_a_flipped_bit_in_the_shared_walls_or_the_directory_fails_every_key(store_path):
    logged(store_path)
    engine = new_store(store_path)
    cid, _run, _ks, blob = chunk_rows(engine)[0]
    broken = bytearray(blob)
    broken[_stream_at(blob, 1)] ^= 0x01  # the walls
    rewrite(engine, cid, bytes(broken))
    for key in ("k0", "k11"):
        with pytest.raises(ValueError, match=rf"its walls stream\) \(chunk {cid} of"):
            scanned(store_path, key)
    broken = bytearray(blob)
    broken[7 + 9 * 5 + 2] ^= 0x80  # a length in the directory (value column 3's entry)
    rewrite(engine, cid, bytes(broken))
    with pytest.raises(ValueError, match=rf"\(its directory\) \(chunk {cid} of"):
        scanned(store_path, "k0")
    with engine.connect() as conn:
        assert len(check_chunks(conn).problems) == 1


def test_a_series_of_exactly_batch_points_is_one_read_and_no_transaction_stays_open(
    store_path,
):
    logged(store_path)
    engine = new_store(store_path)
    engine.dispose()
    statements: list[str] = []
    connections: list = []

    @event.listens_for(engine, "connect")
    def _trace(dbapi_con, _record):
        connections.append(dbapi_con)
        dbapi_con.set_trace_callback(statements.append)

    reader = StoreReader(engine, store=str(store_path))
    row_id, _ = reader.find("r")
    pages = list(reader.scan(row_id, key_id(engine, "k5"), batch=STEPS, columns=True))
    assert [len(p[0]) for p in pages] == [STEPS]
    reads = [s for s in statements if "FROM chunks" in s]
    assert len(reads) == 1, reads  # one keyset, one read: no second, empty page
    assert connections and not any(c.in_transaction for c in connections)
    # One point fewer a page: two pages, the second of one point.
    pages = list(reader.scan(row_id, key_id(engine, "k5"), batch=STEPS - 1, columns=True))
    assert [len(p[0]) for p in pages] == [STEPS - 1, 1]
    steps = np.concatenate([p[0] for p in pages])
    assert steps.tolist() == list(range(STEPS))


def test_history_reads_first_values_and_raw_points_from_the_key_streams(store_path):
    """history(): rows of rollups with each row's first value (first_values: the chunks
    holding a wanted step, through numpy), and a narrow range point by point (level 0: the
    raw points, series_rows through series_columns); a flipped bit in the key's stream is an
    error naming the chunk there too."""
    logged(store_path)
    with reslog.open(store_path) as store:
        wide = store.history("r", "k3", samples=100)
        narrow = store.history("r", "k3", samples=1000, start=4000, stop=4900)
    assert wide.attrs["levels"]["k3"] != 0 and 50 <= len(wide) <= 100
    assert nan_as_none(wide["first"]) == nan_as_none([value(3, s) for s in wide["step"]])
    assert narrow.attrs["levels"]["k3"] == 0 and narrow["step"].tolist() == list(range(4000, 4900))
    assert nan_as_none(narrow["last"]) == nan_as_none([value(3, s) for s in range(4000, 4900)])
    engine = new_store(store_path)
    cid, run_id, ks, blob = chunk_rows(engine)[0]
    broken = bytearray(blob)
    broken[_stream_at(blob, 3 + 3)] ^= 0x02
    rewrite(engine, cid, bytes(broken))
    with reslog.open(store_path) as store, pytest.raises(ValueError) as err:
        store.history("r", "k3", samples=1000, start=100, stop=900)
    assert "CRC-32 does not match" in str(err.value)
    assert f"chunk {cid} of run {run_id}, keyset {ks}" in str(err.value)


@pytest.mark.parametrize("version", [1, 2])
def test_keys_read_in_one_snapshot_share_their_chunks_steps_walls_and_ids(
    store_path, monkeypatch, version
):
    """Inside chunk_columns.shared_chunks() (the agent's tiles of one reply) each chunk's steps,
    walls and ids are decoded once for all the keys read from it (a version 1 chunk read and
    verified once whole): every key's columns are the bits read without it, past the byte
    bound too; a damaged chunk still fails, naming it."""
    import sqlite3

    logged(store_path)
    engine = new_store(store_path)
    if version == 1:
        for cid, _run, _ks, blob in chunk_rows(engine):
            c = chunk_codec.decode(blob)
            blob = chunk_codec.encode(c.steps, c.walls, *c.values, ids=c.ids, version=1)
            rewrite(engine, cid, blob)
    assert {blob[0] for *_r, blob in chunk_rows(engine)} == {version}
    ids = {k: key_id(engine, k) for k in KEYS}
    run = chunk_rows(engine)[0][1]
    conn = sqlite3.connect(store_path)
    cur = conn.cursor()
    high = points_by_id.max_point_id(cur)

    def read(key: str, start: int = 0, stop: int = STEPS) -> list:
        series = chunk_read.Series(cur, "?", run, ids[key], False)
        cols = chunk_read.series_columns(series, start, stop, chunk_read.Page(before_id=high + 1))
        return [c.view(np.int64).tolist() for c in cols]

    keys = ["k0", "k3", "k11", "k3"]
    want = [read(k) for k in keys] + [read("k5", 100, 8_000)]
    for bound, kept in ((chunk_columns.SHARED_BYTES, 2), (0, 0)):  # 0: each decoded as it comes
        monkeypatch.setattr(chunk_columns, "SHARED_BYTES", bound)
        with chunk_columns.shared_chunks():
            got = [read(k) for k in keys] + [read("k5", 100, 8_000)]
            assert len(chunk_columns._shared) == kept  # both chunks, kept once
        assert got == want and chunk_columns._shared is None
    assert len(want[0][1]) == STEPS and want[1][3] != want[2][3]
    cid, run_id, _ks, blob = chunk_rows(engine)[0]
    broken = bytearray(blob)
    broken[len(broken) - 100] ^= 0x04  # in the last value column's stream
    rewrite(engine, cid, bytes(broken))
    with (
        chunk_columns.shared_chunks(),
        pytest.raises(ValueError, match=rf"CRC-32 does not match.*chunk {cid} of run {run_id}"),
    ):
        read("k11")
    conn.close()


def test_a_scan_decodes_no_id_stream_and_points_of_one_step_still_order_by_id(
    store_path, monkeypatch
):
    """A scan returns steps, walls and values: the chunks' id streams are decoded only where a
    read needs them (two points at one step, a page's end, series_columns' ids), and then
    every point is where the builtin reader (no numpy) puts it."""
    from schema.store import chunk_codec_numpy

    logged(store_path)
    engine = new_store(store_path)
    decoded: list[int] = []
    real = chunk_codec_numpy.decode_ids
    monkeypatch.setattr(
        chunk_codec_numpy, "decode_ids", lambda *a: decoded.append(a[2]) or real(*a)
    )
    whole = scanned(store_path, "k3")
    assert len(whole) == STEPS and decoded == []
    paged = scanned(store_path, "k3", batch=4_000)  # each page ends at a (step, id) cursor
    assert decoded and bits(paged["value"]) == bits(whole["value"])

    # The last step logged again, then 199 more (a step logged twice is no restart): two
    # points at step 8,999, in two chunks.
    run_id = chunk_rows(engine)[0][1]
    kid = {k: key_id(engine, k) for k in KEYS}
    again = list(range(STEPS - 1, STEPS + 199))
    walls = [1.8e9 + s for s in again]
    flush = [(again, walls, {kid[k]: [-s for s in again] for k in KEYS})]
    write_flushes(engine, run_id, [flush], seal=True)
    decoded.clear()
    frame = scanned(store_path, "k3")
    assert decoded  # the tie broken by id
    assert frame["step"].tolist() == sorted(list(range(STEPS)) + again)

    def rows(page: chunk_read.Page) -> list:
        with engine.connect() as conn:
            cur = conn.connection.dbapi_connection.cursor()
            series = chunk_read.Series(cur, "?", run_id, kid["k3"], False)
            return chunk_read.series_rows(series, STEPS - 100, STEPS + 300, page)

    pages = [chunk_read.Page(limit=100), chunk_read.Page(limit=150), chunk_read.EVERY]
    with_numpy = [rows(page) for page in pages]
    monkeypatch.setattr(chunk_read, "_numpy", (None, None))
    assert with_numpy == [rows(page) for page in pages]
    ids = [r[0] for r in with_numpy[-1]]
    assert len(with_numpy[-1]) == 300 and len(set(ids)) == len(ids)
    last = STEPS - 1
    at_last = [v for s, v in zip(frame["step"], frame["value"], strict=True) if s == last]
    assert at_last == [value(3, last), -last]  # the point logged first (the smaller id) first
