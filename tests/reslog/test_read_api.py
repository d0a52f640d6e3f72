"""reslog.open: history() from the rollups with exact extremes and exact range ends, the raw
window at full resolution, streaming scans, and the same answers from PostgreSQL."""

from __future__ import annotations

import math
import random
import sys

import numpy as np
import pandas as pd
import pytest

import reslog
from schema.store.errors import StoreNotFound, UnknownKey, UnknownRun
from tests.fixtures.stores import make_run, new_store

N_STEPS = 60_000
SPIKE, DIP = 31_337, 45_678


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One run logged through reslog: a smooth loss with a one-step spike and a one-step dip,
    a NaN and an inf, an lr, and a sparse valid/loss; then a second, short run."""
    path = tmp_path_factory.mktemp("read") / "reslog.db"
    run = reslog.init(project="p", name="long", store=path, system=False)
    rng = random.Random(0)
    for step in range(N_STEPS):
        loss = 2.0 + math.sin(step / 1000) + rng.random() * 0.01
        loss = {SPIKE: 99.0, DIP: -7.0, 12_000: float("nan"), 13_000: math.inf}.get(step, loss)
        metrics = {"train/loss": loss, "train/lr": 1e-3 * (1 - step / N_STEPS)}
        if step % 1000 == 0:
            metrics["valid/loss"] = 2.5 - step / N_STEPS
        run.log(metrics, step=step)
    run.finish()
    short = reslog.init(project="p", name="short", store=path, system=False)
    short.log({"train/loss": 1.0}, step=0)
    short.finish()
    return path


def raw(store, key, start=None, stop=None):
    with reslog.open(store) as st:
        return st.points("long", key, start=start, stop=stop)


def test_history_is_long_sorted_and_at_most_samples_rows_per_key(store):
    with reslog.open(store) as st:
        df = st.history("long", ["train/loss", "train/lr", "valid/loss"], samples=500)
    assert list(df.columns) == [
        "key",
        "step",
        "first",
        "min",
        "max",
        "last",
        "count",
        "min_step",
        "max_step",
        "last_step",
        "wall",
    ]
    assert list(df.sort_values(["key", "step"]).index) == list(df.index)
    per_key = df.groupby("key")["count"].agg(["size", "sum"])
    assert (per_key["size"] <= 500).all() and per_key["size"]["train/loss"] > 250
    assert per_key["sum"].to_dict() == {
        "train/loss": N_STEPS,
        "train/lr": N_STEPS,
        "valid/loss": 60,
    }
    assert df.attrs["levels"]["valid/loss"] == 0  # 60 points: every one of them


@pytest.mark.parametrize("samples", [1, 7, 100, 1000, 5000])
def test_spike_and_dip_survive_at_every_sample_size(store, samples):
    with reslog.open(store) as st:
        df = st.history("long", "train/loss", samples=samples)
    assert df["max"].max() == math.inf and df["min"].min() == -7.0
    finite_max = df.loc[df["max"] < math.inf, "max"].max()
    assert finite_max == 99.0 or (df["max"] == math.inf).sum() == len(df)
    spike = df[(df.step <= SPIKE)].iloc[-1]
    assert spike["max"] in (99.0, math.inf)


@pytest.mark.parametrize(("start", "stop"), [(31_000, 32_000), (30_000, 40_000), (31_337, 31_338)])
def test_a_zoomed_range_has_exact_ends_and_keeps_the_spike(store, start, stop):
    with reslog.open(store) as st:
        df = st.history("long", "train/loss", samples=200, start=start, stop=stop)
    assert df.step.min() >= start and df.step.max() < stop
    assert df["count"].sum() == stop - start
    assert df["max"].max() == 99.0


def test_a_range_within_samples_is_the_raw_points(store):
    with reslog.open(store) as st:
        df = st.history("long", "train/loss", samples=1000, start=11_500, stop=13_500)
        # 2000 points > 1000 samples: rows of two steps, folded from the raw points
        assert df.attrs["levels"] == {"train/loss": 0} and df.attrs["widths"] == {"train/loss": 2}
        assert len(df) == 1000
        df = st.history("long", "train/loss", samples=2000, start=11_500, stop=13_500)
    assert df.attrs["levels"] == {"train/loss": 0} and df.attrs["widths"] == {"train/loss": 1}
    points = raw(store, "train/loss", 11_500, 13_500)
    assert (df["count"] == 1).all() and df.step.tolist() == points.step.tolist()
    for col in ("min", "max", "last"):
        assert df[col].equals(points["value"]) or all(
            (a == b) or (math.isnan(a) and math.isnan(b))
            for a, b in zip(df[col], points["value"], strict=True)
        )
    assert df.wall.tolist() == points.wall.tolist()
    at_nan = df[df.step == 12_000].iloc[0]
    assert math.isnan(at_nan["min"]) and math.isnan(at_nan["last"])
    assert df[df.step == 13_000].iloc[0]["max"] == math.inf


def test_every_row_summarises_exactly_its_raw_points(store):
    points = raw(store, "train/loss")
    with reslog.open(store) as st:
        df = st.history("long", "train/loss", samples=300, start=5_000, stop=50_000)
    bounds = [*df.step.tolist(), 50_000]
    for i, row in enumerate(df.itertuples()):
        inside = points[(points.step >= bounds[i]) & (points.step < bounds[i + 1])]
        finite = inside["value"].dropna()
        assert row.count == len(inside)
        assert row.max == finite.max() and row.min == finite.min()
        assert row.last == inside["value"].iloc[-1] or math.isnan(row.last)


def test_runs_keys_and_how_a_run_is_named(store):
    with reslog.open(store) as st:
        runs = st.runs()
        assert runs.name.tolist() == ["long", "short"] and runs.last_step.tolist() == [59_999, 0]
        uid = runs.uid[0]
        keys = st.keys("long").set_index("key")
        assert keys.loc["train/loss", "points"] == N_STEPS and keys.loc["train/loss", "nan"] == 1
        assert keys.loc["train/loss", "max"] == math.inf and keys.loc["train/loss", "min"] == -7
        for ident in (uid, uid[:6], "long"):
            assert len(st.history(ident, "valid/loss")) == 60
        with pytest.raises(UnknownRun):
            st.history("nope", "train/loss")
        with pytest.raises(UnknownKey, match=r"no key 'val/loss'; its keys: train/loss, train/lr"):
            st.history("long", ["train/loss", "val/loss"])
        with pytest.raises(ValueError, match="samples must be a positive int"):
            st.history("long", "train/loss", samples=0)
        with pytest.raises(ValueError, match="stop must be an int"):
            st.history("long", "train/loss", stop=1.5)


def test_scan_streams_every_point_in_bounded_chunks(store):
    with reslog.open(store) as st:
        chunks = list(st.scan("long", ["train/loss", "valid/loss"], batch=7_000))
    assert all(len(c) <= 8_000 for c in chunks) and len(chunks) >= 8
    assert sum(len(c) for c in chunks) == N_STEPS + 60
    assert chunks[0].key[0] == "train/loss" and chunks[-1].key.iloc[-1] == "valid/loss"


def test_short_keys_share_a_frame_of_at_most_batch_rows(store_path):
    """A frame a key cost ~0.3 ms of pandas: a run of many short keys reads as frames of
    several keys each, in key then step order, with the same points as one key at a time."""
    run = reslog.init(project="p", name="many", store=store_path, system=False)
    for step in range(300):
        run.log({f"k/{j:02d}": step * 100 + j + 0.5 for j in range(30)}, step=step)
    for step in range(300, 2_500):  # a long key among short ones: frames of its own
        run.log({"k/29": -float(step)}, step=step)
    assert run.finish()
    with reslog.open(store_path) as st:
        frames = list(st.scan("many", batch=1_000))
        alone = [st.points("many", f"k/{j:02d}") for j in range(30)]
    assert all(0 < len(f) <= 1_000 for f in frames)
    assert len(frames) == 10 + 3  # 29 keys of 300 three to a frame, then 2,500 points by 1,000
    assert {f.key.dtype for f in frames} == {np.dtype(object)}
    assert [len(set(f.key)) for f in frames[:9]] == [3] * 9
    got = pd.concat(frames, ignore_index=True)
    want = pd.concat(alone, ignore_index=True)
    pd.testing.assert_frame_equal(got, want)
    assert got.key.tolist() == sorted(got.key.tolist())


def test_a_resumed_run_reads_as_its_newer_take(store_path):
    run = reslog.init(project="p", name="r", store=store_path, system=False)
    for step in range(5_000):
        run.log({"loss": 5.0}, step=step)
    run.finish()
    again = reslog.init(project="p", store=store_path, system=False, resume=run.uid)
    for step in range(3_000, 4_000):
        again.log({"loss": 1.0}, step=step)
    again.finish()
    with reslog.open(store_path) as st:
        df = st.history("r", "loss", samples=100)
        assert df["count"].sum() == 4_000 and df["max"].max() == 5.0
        tail = st.history("r", "loss", start=2_990, stop=4_000, samples=2_000)
    assert tail["last"].tolist() == [5.0] * 10 + [1.0] * 1000


def test_open_is_read_only_and_says_what_is_missing(tmp_path, monkeypatch):
    with pytest.raises(StoreNotFound):
        reslog.open(tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    engine = new_store(tmp_path / "s.db")
    make_run(engine, name="r", points={"x": [(0, 1.0)]})
    monkeypatch.setitem(sys.modules, "pandas", None)
    with reslog.open(tmp_path / "s.db") as st, pytest.raises(ImportError, match="analysis"):
        st.history("r", "x")


@pytest.mark.postgres
def test_postgresql_answers_the_same(pg_store, store):
    engine = new_store(pg_store)
    try:
        run = make_run(engine, name="long")
        points = raw(store, ["train/loss"])
        rows = [
            (int(s), float(v), float(w))
            for s, w, v in zip(points.step, points.wall, points["value"], strict=True)
        ]
        from tests.fixtures.stores import add_points

        add_points(engine, run.id, {"train/loss": rows})
    finally:
        engine.dispose()
    with reslog.open(pg_store) as pg, reslog.open(store) as lite:
        for kw in ({"samples": 300}, {"samples": 50, "start": 30_000, "stop": 33_000}):
            a = pg.history("long", "train/loss", **kw)
            b = lite.history("long", "train/loss", **kw)
            assert a[["step", "count"]].equals(b[["step", "count"]])
            assert a["max"].equals(b["max"]) and a["min"].equals(b["min"])


def test_scan_columns_are_the_row_scans_points_over_legacy_rows_chunks_and_a_take(tmp_path):
    """scan() builds its frames from decoded chunk columns (StoreReader.scan(columns=True)): the
    same points, in the same order, as the row-by-row scan, at any batch size, over a run
    whose older points are legacy `points` rows (a store from before chunks), its newer ones
    chunks, with a restart (a take superseding part of the legacy rows) and NaNs."""
    import sqlite3

    from schema.store.reader import StoreReader
    from schema.store.rollup_repair import rebuild
    from tests.fixtures.stores import add_points, key_id

    path = tmp_path / "s.db"
    engine = new_store(path)
    run = make_run(engine, name="r")
    kid = key_id(engine, "loss")
    engine.dispose()
    with sqlite3.connect(path) as conn:  # the old store's rows, then ids past them, as 0006
        conn.executemany(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
            [(run.id, kid, s, 1e9 + s, None if s % 500 == 3 else s * 0.5) for s in range(3000)],
        )
        conn.execute("UPDATE point_ids SET next_id = (SELECT max(id) + 1 FROM points)")
    engine = new_store(path)
    with engine.begin() as conn:
        rebuild(conn, run.id)
    add_points(engine, run.id, {"loss": [(s, -s * 1.0, 2e9 + s) for s in range(2500, 6000)]})
    add_points(engine, run.id, {"loss": [(s, math.nan, 3e9 + s) for s in range(6000, 6010)]})
    reader = StoreReader(engine)
    # Whole scans, and small pages across where the legacy rows end and the take begins.
    for start, stop, batch, nans in (
        (None, None, 997, 5 + 10),
        (None, None, 10**6, 5 + 10),
        (2480, 2530, 1, 0),
        (2480, 2530, 7, 0),
    ):
        want_steps = list(range(start or 0, stop or 6010))
        rows = [p for page in reader.scan(run.id, kid, start, stop, batch) for p in page]
        pages = list(reader.scan(run.id, kid, start, stop, batch, columns=True))
        assert all(len(page[0]) <= batch for page in pages)
        cols = [
            (int(s), float(w), float(v)) for page in pages for s, w, v in zip(*page, strict=True)
        ]
        assert len(cols) == len(rows) == len(want_steps), batch
        assert [c[0] for c in cols] == [r[0] for r in rows] == want_steps
        assert [c[1] for c in cols] == [r[1] for r in rows]
        assert all(
            a[2] == b[2] or (math.isnan(a[2]) and math.isnan(b[2]))
            for a, b in zip(cols, rows, strict=True)
        )
        assert sum(math.isnan(c[2]) for c in cols) == nans  # legacy ones below 2500, new ones
    # A window inside both parts, through the public API.
    with reslog.open(path) as st:
        df = st.points("r", "loss", start=2400, stop=2600)
    assert df.step.tolist() == list(range(2400, 2600))
    assert df.value.tolist()[:100] == [s * 0.5 for s in range(2400, 2500)]
    assert df.value.tolist()[100:] == [-s * 1.0 for s in range(2500, 2600)]
    engine.dispose()


def test_point_count_counts_chunk_rows_times_their_keys_and_legacy_rows(tmp_path):
    """points_by_id.point_count (the benchmarks' and scripts' count) never decodes a chunk: it
    must agree with every point read back, per run and key, for keys logged together."""
    import sqlite3

    from schema.store import points_by_id

    path = tmp_path / "s.db"
    a = reslog.init(project="p", name="a", store=path, system=False)
    for s in range(300):
        a.log({"x": 1.0, "y": 2.0, **({"z": 3.0} if s % 3 == 0 else {})}, step=s)
    a.finish()
    engine = new_store(path)
    b = make_run(engine, name="b", points={"x": [(s, 1.0) for s in range(7)]})
    engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute(  # a legacy row (a store from before chunks: its id below the counter's)
            "INSERT INTO points (id, run_id, key_id, step, wall, value) VALUES (?, ?, 1, 99, 0, 1)",
            (points_by_id.max_point_id(conn.cursor()) + 1, b.id),
        )
        conn.execute("UPDATE point_ids SET next_id = next_id + 1")
        cur = conn.cursor()
        every = points_by_id.points_after(cur, "?", None, 0)
        assert points_by_id.point_count(cur, "?") == len(every) == 300 * 2 + 100 + 7 + 1
        for run_id in (1, b.id):
            for key_id in (1, 2, 3):
                want = sum(1 for r in every if r[1] == run_id and r[2] == key_id)
                assert points_by_id.point_count(cur, "?", run_id, key_id) == want
