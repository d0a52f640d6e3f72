"""Rollups kept by the writer: always equal to a recomputation from the raw points.

The reference (schema.store.rollup_writer.brute_force through
schema.store.rollup_repair.check_series) reads a series' points in id order, applies the newest-take
rule and folds every level from scratch; the writer instead folds flush by flush, merges into stored
buckets, rebuilds after restarts and grows levels as a series gets longer. Any difference is a
reported problem.
"""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

import reslog
from reslog.tools.maintenance import check_store, upgrade_store
from schema.store import buckets, migrate
from schema.store.connect import make_engine, open_store, resolve_store
from schema.store.read import series as read_series
from schema.store.rollup import AGG_COLUMNS, fold, merge, merge_all
from schema.store.rollup_repair import check_series, sample_series
from schema.store.rollup_writer import RollupWriter
from schema.store.tables import series, takes
from tests.fixtures.legacy import as_rows
from tests.fixtures.stores import key_id, make_run, new_store

ROOT = Path(__file__).resolve().parents[2]
INF, NAN = math.inf, math.nan


def all_problems(engine) -> list[str]:
    with engine.connect() as conn:
        pairs = conn.execute(select(series.c.run_id, series.c.key_id)).all()
        out = []
        for run_id, key in pairs:
            out += check_series(conn, run_id, key)
    return out


def agg(**fields):
    return tuple(fields[c] for c in AGG_COLUMNS)


# ---- the aggregate itself ------------------------------------------------------------------


def test_fold_keeps_exact_extremes_their_steps_nan_and_inf_apart():
    a = fold([10, 11, 12, 13, 14], [1.0, 2.0, 3.0, 4.0, 5.0], [3.0, None, INF, -2.5, 7.0])
    assert a == agg(
        n=5,
        nan=1,
        posinf=1,
        neginf=0,
        vmin=-2.5,
        vmax=7.0,
        min_at=13,
        max_at=14,
        vsum=7.5,
        step_lo=10,
        step_hi=14,
        last=7.0,
        wall_lo=1.0,
        wall_hi=5.0,
        bits=-1,
        nonfinite_at=11,
    )


def test_ties_pick_the_smallest_step_and_last_is_the_newest_point_of_the_last_step():
    a = fold([5, 3, 3, 9, 9], [0.0] * 5, [1.0, 1.0, 4.0, 4.0, 2.0])
    assert (a[4], a[6], a[5], a[7]) == (1.0, 3, 4.0, 3)  # vmin at 3 (not 5), vmax at 3
    assert a[11] == 2.0  # two points at step 9: the newer one


def test_flags_or_together_and_ordinary_floats_are_not_flags():
    bits = AGG_COLUMNS.index("bits")
    assert fold([0, 1, 2], [0.0] * 3, [4, 0, 32.0])[bits] == 36
    assert fold([0, 1], [0.0] * 2, [0.5, 0.5])[bits] == -1
    assert fold([0, 1], [0.0] * 2, [NAN, 4])[bits] == 4  # NaN does not spoil the flags
    a, b = fold([0], [0.0], [4]), fold([1], [0.0], [8])
    assert merge(a, b)[bits] == 12
    assert merge(a, fold([1], [0.0], [0.25]))[bits] == -1


def test_the_first_nonfinite_step_combines_as_a_minimum():
    at = AGG_COLUMNS.index("nonfinite_at")
    assert fold([3, 4], [0.0] * 2, [1.0, 2.0])[at] is None
    a, b = fold([5, 6], [0.0] * 2, [1.0, INF]), fold([7, 8], [0.0] * 2, [None, 1.0])
    assert merge(a, b)[at] == 6 and merge(b, a)[at] == 6
    assert merge(fold([1], [0.0], [1.0]), b)[at] == 7


def test_merge_in_any_grouping_equals_one_fold():
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(2, 40)
        steps = sorted(rng.randint(0, 60) for _ in range(n))
        walls = [float(i) for i in range(n)]
        values = [
            rng.choice([NAN, INF, -INF, 1.0, 2.0, rng.random(), rng.randint(0, 9)])
            for _ in range(n)
        ]
        cut = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(1, 4))))
        parts = [slice(a, b) for a, b in zip([0, *cut], [*cut, n], strict=True)]
        merged = merge_all(fold(steps[p], walls[p], values[p]) for p in parts)
        whole = fold(steps, walls, values)
        vsum = AGG_COLUMNS.index("vsum")
        assert merged[:vsum] == whole[:vsum] and merged[vsum + 1 :] == whole[vsum + 1 :]
        assert math.isclose(merged[vsum], whole[vsum], rel_tol=1e-12, abs_tol=1e-12) or (
            math.isnan(merged[vsum]) and math.isnan(whole[vsum])
        )


def test_levels_appear_as_a_series_gets_longer():
    assert buckets.width(1) == 128 and buckets.width(2) == 512 and buckets.width(3) == 2048
    assert buckets.needed_levels(0) == 1
    assert buckets.needed_levels(64 * 512 - 1) == 1  # level 2 once the span holds 64 of its buckets
    assert buckets.needed_levels(64 * 512) == 2
    assert buckets.needed_levels(2**63) == buckets.MAX_LEVEL
    # 100,000 steps: 782 buckets of 128 steps, 196 of 512, 49 of 2048, 13 of 8192.
    assert buckets.level_for(100_000, 700, 4) == 1
    assert buckets.level_for(100_000, 150, 4) == 2
    assert buckets.level_for(100_000, 40, 4) == 3
    assert buckets.level_for(100_000, 10, 4) == 4
    assert buckets.level_for(100_000, 10, 2) == 2  # only the levels kept


# ---- the writer against the reference --------------------------------------------------------


def random_series(rng: random.Random, n: int):
    """Steps mostly ascending with repeats, jumps, out-of-order points logged at an earlier wall
    (not a restart) and restarts (a lower step logged later)."""
    out, step, wall = [], rng.randint(-50, 50), 1000.0
    for _ in range(n):
        roll = rng.random()
        if roll < 0.02:
            step = max(-60, step - rng.randint(1, 3000))  # restart
        elif roll < 0.04:
            out.append((step - rng.randint(1, 40), wall - 5.0, rng.random()))  # out of order
            continue
        elif roll < 0.06:
            step += rng.randint(100, 40_000)
        elif roll > 0.15:
            step += 1  # else: the same step again
        wall += rng.random()
        value = rng.choice(
            [rng.gauss(0, 1)] * 12 + [NAN, INF, -INF, float(rng.randint(0, 64)), 1e308]
        )
        out.append((step, wall, value))
    return out


def store_random_run(engine, rng, keys: int, points: int, flush_max: int) -> int:
    run = make_run(engine, name="random")
    ids = [key_id(engine, f"k{i}") for i in range(keys)]
    streams = {k: random_series(rng, points) for k in ids}
    merged = []
    cursor = dict.fromkeys(ids, 0)
    while any(cursor[k] < len(streams[k]) for k in ids):
        k = rng.choice([k for k in ids if cursor[k] < len(streams[k])])
        take = rng.randint(1, 20)
        for s, w, v in streams[k][cursor[k] : cursor[k] + take]:
            merged.append((run.id, k, s, w, None if v != v else v))
        cursor[k] += take
    i = 0
    writer = RollupWriter(engine.dialect, run.id)
    while i < len(merged):
        n = rng.randint(1, flush_max)
        if rng.random() < 0.2:  # a new process takes over the run: state read back
            writer = RollupWriter(engine.dialect, run.id)
        with engine.begin() as conn:
            pending = writer.insert(conn, merged[i : i + n])
        writer.accept(pending)
        i += n
    return run.id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_flushes_restarts_and_gaps_equal_the_reference(store_path, seed):
    engine = new_store(store_path)
    rng = random.Random(seed)
    run_id = store_random_run(engine, rng, keys=3, points=1500, flush_max=400)
    assert all_problems(engine) == []
    with engine.connect() as conn:
        levels = conn.execute(select(series.c.levels).where(series.c.run_id == run_id)).scalars()
        assert max(levels) >= 2  # the jumps made some series long enough for level 2
        assert conn.execute(select(takes)).first() is not None  # and restarts happened


def test_a_failed_transaction_leaves_the_writer_as_it_was(store_path):
    engine = new_store(store_path)
    run = make_run(engine, name="r")
    k = key_id(engine, "loss")
    writer = RollupWriter(engine.dialect, run.id)
    rows = [(run.id, k, s, 100.0 + s, float(s)) for s in range(100)]
    with pytest.raises(RuntimeError), engine.begin() as conn:
        writer.insert(conn, rows)
        raise RuntimeError("the commit never happens")
    with engine.begin() as conn:  # the retry folds the same points again: counted once
        pending = writer.insert(conn, rows)
    writer.accept(pending)
    assert all_problems(engine) == []
    with engine.connect() as conn:
        assert conn.execute(select(series.c.n)).scalar() == 100


def test_logging_through_reslog_with_two_key_sets_and_a_shared_key(store_path):
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.05)
    for step in range(20_000):
        run.log({"train/loss": 1.0 / (step + 1), "train/lr": 1e-3}, step=step)
        if step % 500 == 0:  # another key set, with a key of the first: grouped by records
            run.log({"valid/loss": 0.5, "train/lr": 2e-3}, step=step)
        if step == 7_777:
            run.log({"train/loss": float("nan")}, step=step)
    run.finish()
    engine = open_store(store_path)
    assert all_problems(engine) == []


def test_logging_random_overlapping_key_sets_keeps_every_series_exact(store_path):
    rng = random.Random(11)
    names = [f"k{i}" for i in range(7)]
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.01)
    logged = 0
    for step in range(6_000):
        for _ in range(rng.choice([1, 1, 2])):
            chosen = rng.sample(names, rng.randint(1, 4))
            run.log({k: rng.choice([rng.random(), math.nan, 3]) for k in chosen}, step=step)
            logged += len(chosen)
    run.finish()
    engine = open_store(store_path)
    with engine.connect() as conn:
        assert conn.execute(select(func.sum(series.c.n))).scalar() == logged
    assert all_problems(engine) == []


@pytest.mark.slow
def test_a_run_resumed_from_an_older_checkpoint_shows_the_newer_take(store_path):
    first = reslog.init(project="p", store=store_path, system=False)
    for step in range(30_000):
        first.log({"loss": 10.0}, step=step)
    first.finish()
    again = reslog.init(project="p", store=store_path, system=False, resume=first.uid)
    for step in range(20_000, 25_000):
        again.log({"loss": 1.0}, step=step)
    again.finish()
    engine = open_store(store_path)
    assert all_problems(engine) == []
    with engine.connect() as conn:
        row = conn.execute(select(series)).one()._mapping
        taken = conn.execute(select(takes.c.step)).scalars().all()
    assert taken == [20_000]
    assert (row["n"], row["step_hi"], row["vmin"], row["last"]) == (25_000, 24_999, 1.0, 1.0)
    steps, _walls, values = read_series(engine, 1, 1)
    assert steps == list(range(25_000)) and values[19_999] == 10.0 and values[20_000] == 1.0


# ---- crashes, upgrades, check ------------------------------------------------------------------

KILLED = r"""
import random, sys, time, reslog
store, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
uid = sys.argv[3] if len(sys.argv) > 3 else None
run = reslog.init(project="kill", store=store, system=False, flush_interval=0.05, resume=uid)
print(run.uid, flush=True)
step = max(0, run.step - rng.randint(0, 3000))  # resumed from an older checkpoint
while True:
    run.log({"loss": rng.random(), "lr": 1e-3, "gn": rng.choice([1.0, float("nan")])}, step=step)
    step += 1
    if step % 50 == 0:
        time.sleep(0.001)
"""


@pytest.mark.integration
@pytest.mark.slow
def test_rollups_agree_with_the_points_after_random_sigkills(store_path):
    rng = random.Random(7)
    uid = None
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(5):
        args = [sys.executable, "-c", KILLED, str(store_path), str(round_)]
        proc = subprocess.Popen(
            [*args, *([uid] if uid else [])], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
        )
        uid = proc.stdout.readline().strip()
        time.sleep(rng.uniform(0.5, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    engine = open_store(store_path)
    with engine.connect() as conn:
        assert conn.execute(select(takes)).first() is not None
    assert all_problems(engine) == []
    report = check_store(str(store_path), sample=50)
    # The killed run itself is reported (crashed); its rollups are not.
    assert [p for p in report.problems if not p.startswith("run ")] == []
    assert any("crashed" in p for p in report.problems), report.problems


def make_old_store(path: Path, rng: random.Random) -> None:
    """A store at revision 0001 (before rollups) holding points with restarts and NaN."""
    engine = new_store(path)
    run_id = store_random_run(engine, rng, keys=2, points=3000, flush_max=2000)
    engine.dispose()
    engine = make_engine(resolve_store(path))
    as_rows(engine)  # a row a point, as reslog wrote before 0006
    cfg = migrate.alembic_config(engine)
    from alembic import command

    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0001")
    engine.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
        assert conn.execute("SELECT count(*) FROM points WHERE run_id = ?", (run_id,)).fetchone()


@pytest.mark.slow
def test_upgrade_fills_in_the_rollups_of_an_older_store(store_path, monkeypatch):
    make_old_store(store_path, random.Random(11))
    with pytest.raises(Exception, match="upgrade it with: reslog upgrade"):
        open_store(store_path)
    from schema.store import rollup_repair

    monkeypatch.setattr(rollup_repair, "BATCH", 700)  # many batches: the streaming path
    seen = []
    line = upgrade_store(str(store_path), progress=lambda done, total: seen.append((done, total)))
    assert f"schema 0001 → {migrate.head_revision()}" in line
    total = seen[0][1]
    assert seen[0] == (0, total) and seen[-1] == (total, total) and len(seen) > 5
    engine = open_store(store_path)
    assert all_problems(engine) == []


def test_check_finds_rollups_out_of_step_and_fix_rebuilds_them(store_path):
    engine = new_store(store_path)
    store_random_run(engine, random.Random(5), keys=2, points=800, flush_max=300)
    assert check_store(str(store_path), sample=10).problems == []
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE rollups SET vmax = 1e9 WHERE level = 1")
    report = check_store(str(store_path), sample=10)
    assert any("vmax is 1000000000.0" in p for p in report.problems), report.problems
    assert any("reslog check --fix" in p for p in report.problems)
    fixed = check_store(str(store_path), fix=True, sample=10)
    assert any("rollups of run" in line for line in fixed.info)
    assert check_store(str(store_path), sample=10).problems == []
    assert all_problems(engine) == []


def test_check_finds_points_that_have_no_rollups(store_path):
    engine = new_store(store_path)
    run = make_run(engine, name="r", points={"loss": [(s, 1.0) for s in range(50)]})
    bypassed = key_id(engine, "bypassed")
    with engine.begin() as conn:  # a writer that does not keep rollups
        conn.exec_driver_sql(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, 1, 0, 1)",
            (run.id, bypassed),
        )
    report = check_store(str(store_path), sample=30)
    assert any("no rollups" in p for p in report.problems), report.problems


def test_the_check_samples_series_within_a_points_budget_and_always_those_without_rollups(
    store_path,
):
    engine = new_store(store_path)
    sizes = {"big": 400, "mid": 120, "small1": 30, "small2": 30, "tiny": 5}
    run = make_run(
        engine, name="r", points={k: [(s, 1.0) for s in range(n)] for k, n in sizes.items()}
    )
    bypassed = key_id(engine, "bypassed")
    with engine.begin() as conn:  # a writer that does not keep rollups
        conn.exec_driver_sql(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, 1, 0, 1)",
            (run.id, bypassed),
        )
    n_of = {key_id(engine, k): n for k, n in sizes.items()}
    alone = 0  # draws that picked the 400-point series first: it alone is checked
    with engine.connect() as conn:
        for seed in range(40):
            chosen = sample_series(conn, 10, seed=seed, points_budget=200)
            assert (run.id, bypassed) in chosen  # never left to the draw
            picked = [n_of[k] for _r, k in chosen if k != bypassed]
            left = [n for k, n in n_of.items() if (run.id, k) not in chosen]
            # the first pick whatever its size, then every other that still fits
            assert len(picked) == 1 or sum(picked) <= 200, picked
            assert all(sum(picked) + n > 200 for n in left), (picked, left)
            alone += picked == [400]
        assert alone > 0
        everything = sample_series(conn, 10, seed=0, points_budget=10_000)
        assert len(everything) == len(sizes) + 1
        assert len(sample_series(conn, 2, seed=0, points_budget=10_000)) == 3


def test_the_check_reads_a_series_by_its_own_index_and_in_arrival_order(store_path):
    """check_series and read.series read one series through (run_id, key_id, step), not the run's
    (run_id, id) index (which walked every point of the run), and still in id order: a restart
    is found from arrival order."""
    engine = new_store(store_path)
    run = make_run(engine, name="r", points={"other": [(s, 2.0) for s in range(300)]})
    k = key_id(engine, "loss")
    with engine.begin() as conn:  # steps 0-9, then a restart at 5 logged later
        for i, (step, wall) in enumerate(
            [*[(s, float(s)) for s in range(10)], *[(s, 20.0 + s) for s in range(5, 8)]]
        ):
            conn.exec_driver_sql(
                "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
                (run.id, k, step, wall, float(i)),
            )
    steps, _walls, values = read_series(engine, run.id, k)
    assert steps == [0, 1, 2, 3, 4, 5, 6, 7]
    assert values == [0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 12.0]
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN SELECT points.id, points.step, points.wall, points.value "
            "FROM points WHERE points.run_id = ? AND points.key_id = ?",
            (run.id, k),
        ).all()
    assert "run_id=? AND key_id=?" in " ".join(str(r[-1]) for r in plan), plan


# ---- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgresql_keeps_the_same_rollups(pg_store):
    engine = new_store(pg_store)
    try:
        store_random_run(engine, random.Random(9), keys=2, points=1200, flush_max=300)
        assert all_problems(engine) == []
        run = reslog.init(project="p", store=pg_store, system=False)
        for step in range(3000):
            run.log({"loss": float("nan") if step == 5 else 1.0 / (step + 1)}, step=step)
        run.finish()
        again = reslog.init(project="p", store=pg_store, system=False, resume=run.uid)
        for step in range(1000, 1500):
            again.log({"loss": 2.0}, step=step)
        again.finish()
        assert all_problems(engine) == []
    finally:
        engine.dispose()
