"""schema/store/chunk_rollup.py: a series' points, as chunks through the codec and back, folded
chunk by chunk, give the rollups the writer stored for the same points row by row (real SQLite
stores: one written by the RollupWriter flush by flush with restarts, gaps and out-of-order points,
one through reslog.init)."""

from __future__ import annotations

import ast
import math
import random
import sys
from pathlib import Path

import pytest

import reslog
from schema.store import chunk_codec, chunk_codec_numpy, chunk_read
from schema.store.chunk_rollup import EMPTY, fold_chunk, fold_chunks
from schema.store.connect import open_store
from schema.store.envelope import SERIES_COLUMNS, agg_of, bucket_rows
from schema.store.rollup import AGG_COLUMNS, VSUM, newest_take
from schema.store.sql import placeholder
from tests.fixtures.stores import new_store
from tests.schema.test_rollups import store_random_run

NAN = float("nan")


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def differences(where: str, want: tuple, got: tuple) -> list[str]:
    out = []
    for i, name in enumerate(AGG_COLUMNS):
        if i == VSUM:  # a float sum: another grouping differs in the last bits
            ok = math.isclose(want[i], got[i], rel_tol=1e-9, abs_tol=1e-9) or (
                math.isnan(want[i]) and math.isnan(got[i])
            )
        else:
            ok = same(want[i], got[i])
        if not ok:
            out.append(f"{where} {name}: stored {want[i]!r}, from chunks {got[i]!r}")
    return out


def stored_rollups(engine, run_id: int, key_id: int) -> tuple[tuple, dict, int]:
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        p = placeholder(conn.dialect)
        cur.execute(
            f"SELECT {', '.join(SERIES_COLUMNS)} FROM series WHERE run_id = {p} AND key_id = {p}",
            (run_id, key_id),
        )
        row = cur.fetchone()
        levels = int(row[SERIES_COLUMNS.index("levels")])
        found = {}
        for level in range(1, levels + 1):
            for r in bucket_rows(cur, p, run_id, key_id, level, -(2**62), 2**62):
                found[(level, int(r[0]))] = agg_of(r, 1)
    return agg_of(row, 2), found, levels


def stored_points(engine, run_id: int, key_id: int) -> list[tuple]:
    """The series' points in arrival (id) order, those a restart superseded left out."""
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        found = chunk_read.series_all(cur, placeholder(conn.dialect), run_id, key_id)
        rows = [r[1:] for r in found]
    keep = newest_take([r[0] for r in rows], [r[1] for r in rows])
    return [(s, w, NAN if v is None else v) for (s, w, v), k in zip(rows, keep, strict=True) if k]


def as_chunks(rows: list[tuple], rng: random.Random) -> list:
    """Cut anywhere (not at bucket bounds), encoded and decoded by either codec."""
    out, i = [], 0
    while i < len(rows):
        part = rows[i : i + rng.choice([1, 7, 300, 4096])]
        i += len(part)
        steps, walls, values = ([r[j] for r in part] for j in range(3))
        codec = rng.choice([chunk_codec, chunk_codec_numpy])
        out.append(
            rng.choice([chunk_codec, chunk_codec_numpy]).decode(codec.encode(steps, walls, values))
        )
    return out


def check_series(engine, run_id: int, key_id: int, rng: random.Random) -> int:
    want_series, want, levels = stored_rollups(engine, run_id, key_id)
    rows = stored_points(engine, run_id, key_id)
    got = fold_chunks(as_chunks(rows, rng), levels=levels)
    problems = differences("series", want_series, got.series)
    assert set(got.buckets) == set(want)
    for k in sorted(want):
        problems += differences(f"level {k[0]} bucket {k[1]}", want[k], got.buckets[k])
    assert problems == []
    return len(rows)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_chunks_fold_to_the_rollups_the_writer_stored_flush_by_flush(store_path, seed):
    engine = new_store(store_path)
    rng = random.Random(seed)
    run_id = store_random_run(engine, rng, keys=3, points=3000, flush_max=400)
    with engine.connect() as conn:
        keys = [
            r[0]
            for r in conn.exec_driver_sql("SELECT key_id FROM series WHERE run_id = ?", (run_id,))
        ]
    assert len(keys) == 3
    for key in keys:
        assert check_series(engine, run_id, key, rng) > 500  # restarts supersede the rest


def test_chunks_of_a_run_logged_through_reslog_fold_to_its_rollups(store_path):
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.02)
    rng = random.Random(4)
    for step in range(12_000):
        loss = rng.choice([2.0 + rng.gauss(0, 0.1)] * 50 + [NAN, math.inf, -math.inf, -0.0])
        run.log(
            {"train/loss": loss, "train/lr": 3e-4, "gpu/power_w": rng.randrange(9000) / 10},
            step=step,
        )
    run.finish()
    engine = open_store(store_path)
    with engine.connect() as conn:
        pairs = conn.exec_driver_sql("SELECT run_id, key_id FROM series").all()
    assert len(pairs) == 3
    for run_id, key in pairs:
        assert check_series(engine, run_id, key, rng) == 12_000
        # The store's own chunks (one per logging group, sealed, and the heads of the last
        # flushes), folded in id order as they are: the same rollups.
        want_series, want, levels = stored_rollups(engine, run_id, key)
        with engine.connect() as conn:
            cur = conn.connection.dbapi_connection.cursor()
            placed = chunk_read.keyset_columns(cur, "?", run_id, key)
            assert len(placed) == 1
            keyset, col, _k = placed[0]
            cur.execute("SELECT data FROM chunks WHERE keyset_id = ? ORDER BY id_lo", (keyset,))
            own = [chunk_read.decode(blob, [col]) for (blob,) in cur.fetchall()]
        got = fold_chunks(own, levels=levels)
        assert differences("series", want_series, got.series) == []
        assert set(got.buckets) == set(want)
        assert [d for b in want for d in differences(str(b), want[b], got.buckets[b])] == []


def test_an_empty_chunk_changes_nothing_and_order_decides_last():
    blob = chunk_codec.encode([], [], [])
    assert fold_chunk(EMPTY, chunk_codec.decode(blob), levels=3) == EMPTY
    a = chunk_codec.decode(chunk_codec.encode([5, 6], [1.0, 2.0], [1.0, 2.0]))
    b = chunk_codec.decode(chunk_codec.encode([6], [3.0], [9.0]))
    got = fold_chunks([a, b], levels=1)
    assert got.series[AGG_COLUMNS.index("last")] == 9.0  # the newer point at step 6
    assert got.buckets[(1, 0)] == got.series


def test_the_module_is_stdlib_only_python38_like_the_codec_it_reads():
    source = Path(sys.modules[fold_chunk.__module__].__file__).read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    tops = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    tops |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert tops <= set(sys.stdlib_module_names) | {"__future__", "schema"}
    # `from a.b import c` is a.b.c: a module imported from its package counts as itself
    imported = {
        f"{n.module}.{a.name}"
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module
        for a in n.names
    }
    allowed = ("schema.store.buckets", "schema.store.chunk_codec", "schema.store.rollup")
    ours = {m for m in imported if m.startswith("schema.")}
    assert ours and all(m.startswith(tuple(a + "." for a in allowed)) or m in allowed for m in ours)
