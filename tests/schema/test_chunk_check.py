"""`reslog check` over chunks: a chunk whose bytes no longer match its CRC is one line naming
its run, keyset and chunk (exit 1); the rollup comparison reads the chunks; `--fix` rebuilds
rollups from chunks and seals the head chunks a killed writer left. Real SQLite files, a real
SIGKILL of a real writer."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reslog
from reslog.tools.cli import main
from reslog.tools.maintenance import check_store
from schema.store.connect import open_store
from schema.store.read import series_points
from schema.store.rollup_repair import _agg_problems, check_series, folded_from_chunks
from schema.store.rollup_writer import brute_force
from tests.schema.test_chunk_convert import every_point
from tests.schema.test_rollups import all_problems

ROOT = Path(__file__).resolve().parents[2]


def logged(path: Path, steps: int = 10_000) -> str:
    run = reslog.init(project="p", name="r", store=path, system=False)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1), "lr": 3e-4}, step=step)
        if step % 10 == 0:
            run.log({"gpu": float(step % 7)}, step=step)
    run.finish()
    return run.uid


def test_a_chunk_with_a_flipped_bit_is_one_line_naming_run_keyset_and_chunk(store_path, capsys):
    uid = logged(store_path)
    assert main(["check", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "chunks    " in out and "CRC-32 and header checked" in out, out
    engine = open_store(store_path)
    try:
        with engine.begin() as conn:
            cid, run_id, ks, blob = conn.exec_driver_sql(
                "SELECT id, run_id, keyset_id, data FROM chunks ORDER BY n DESC LIMIT 1"
            ).one()
            broken = bytearray(blob)
            broken[len(broken) // 2] ^= 0x10  # one bit, inside a compressed stream
            conn.exec_driver_sql("UPDATE chunks SET data = ? WHERE id = ?", (bytes(broken), cid))
    finally:
        engine.dispose()
    code = main(["check", str(store_path)])
    out = capsys.readouterr().out
    assert code == 1
    lines = [line for line in out.splitlines() if f"chunk {cid} of run" in line]
    assert len(lines) == 1, out
    assert f"chunk {cid} of run {run_id} ({uid[:8]} r), keyset {ks} (loss, lr)" in lines[0]
    assert "CRC-32 does not match" in lines[0]
    assert "restore the store from a backup" in out
    # --full decodes every chunk: the same one line; --fix cannot mend it and says so.
    assert main(["check", "--full", str(store_path)]) == 1
    assert f"chunk {cid} of run" in capsys.readouterr().out
    assert main(["check", "--fix", str(store_path)]) == 1
    assert "restore the store from a backup" in capsys.readouterr().out


def test_full_check_compares_each_chunk_with_its_row(store_path):
    logged(store_path, steps=3000)
    engine = open_store(store_path)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE chunks SET step_hi = step_hi + 1 WHERE id = (SELECT min(id) FROM chunks)"
            )
    finally:
        engine.dispose()
    assert check_store(str(store_path)).problems == []  # the bytes are whole
    found = check_store(str(store_path), full=True).problems
    assert any("its row says" in p and "steps run" in p for p in found), found


def test_rollups_out_of_step_with_chunks_are_found_and_rebuilt_from_them(store_path):
    logged(store_path)
    engine = open_store(store_path)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE rollups SET vmin = -5 WHERE level = 1")
            conn.exec_driver_sql("DELETE FROM series WHERE key_id = (SELECT min(id) FROM keys)")
        report = check_store(str(store_path), sample=50)
        assert any("vmin is -5.0" in p for p in report.problems), report.problems
        assert any("but no rollups" in p for p in report.problems), report.problems
        fixed = check_store(str(store_path), fix=True, sample=50)
        assert any("rollups of run" in line for line in fixed.info), fixed.info
        assert check_store(str(store_path), sample=50).problems == []
        assert all_problems(engine) == []
    finally:
        engine.dispose()


WRITER = r"""
import sys, time, reslog
run = reslog.init(project="p", name="killed", store=sys.argv[1], system=False,
                  flush_interval=0.02)
print(run.uid, flush=True)
step = 0
while True:
    run.log({"loss": 1.0 / (step + 1), "lr": 1e-3}, step=step)
    step += 1
    if step % 20 == 0:
        time.sleep(0.002)
"""


def heads(path: Path) -> int:
    engine = open_store(path)
    try:
        with engine.connect() as conn:
            return int(
                conn.exec_driver_sql("SELECT count(*) FROM chunks WHERE sealed = 0").scalar()
            )
    finally:
        engine.dispose()


@pytest.mark.integration
def test_head_chunks_a_killed_writer_left_are_sealed_by_fix(store_path):
    store_path.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    try:
        child.stdout.readline()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not store_path.exists() or heads(store_path) < 3):
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    left = heads(store_path)
    assert left >= 3
    engine = open_store(store_path)
    try:
        points = every_point(engine)
        with engine.begin() as conn:  # an hour later: the heartbeat tells the run crashed
            conn.exec_driver_sql("UPDATE runs SET heartbeat_at = heartbeat_at - 3600")
    finally:
        engine.dispose()
    report = check_store(str(store_path))
    assert any(f"heads     {left} unsealed chunk(s) of 1 run(s)" in x for x in report.info), report
    fixed = check_store(str(store_path), fix=True)
    assert any("head chunk(s) of run" in x and "sealed into" in x for x in fixed.info), fixed.info
    assert heads(store_path) == 0
    assert check_store(str(store_path)).problems == []
    engine = open_store(store_path)
    try:
        assert every_point(engine) == points  # the same points, the same ids
        assert all_problems(engine) == []
    finally:
        engine.dispose()


def test_the_check_folds_chunks_where_every_point_stands_and_reads_points_elsewhere(store_path):
    uid = logged(store_path, steps=5000)
    again = reslog.init(project="p", store=store_path, system=False, resume=uid)
    for step in range(4000, 4300):  # from an older checkpoint: loss and lr restart
        again.log({"loss": 2.0, "lr": 1e-4}, step=step)
    again.finish()
    engine = open_store(store_path)
    try:
        with engine.connect() as conn:
            names = dict(conn.exec_driver_sql("SELECT name, id FROM keys").all())
            run_id = conn.exec_driver_sql("SELECT id FROM runs").scalar()
            for name, restarted in (("loss", True), ("lr", True), ("gpu", False)):
                key = names[name]
                levels = conn.exec_driver_sql(
                    "SELECT levels FROM series WHERE key_id = ?", (key,)
                ).scalar()
                folded = folded_from_chunks(conn, run_id, key, levels)
                if restarted:  # steps go down in id order: the points are read instead
                    assert folded is None
                    continue
                rows = series_points(conn, run_id, key)
                want = brute_force(*(list(c) for c in zip(*rows, strict=True)), levels)
                assert folded is not None
                assert _agg_problems("series", want[0], folded[0]) == []
                assert sorted(folded[1]) == sorted(want[1])
                for b in want[1]:
                    assert _agg_problems(str(b), want[1][b], folded[1][b]) == []
            # A series whose rollups differ is found by either path.
            conn.exec_driver_sql("UPDATE rollups SET n = n + 1 WHERE level = 1")
            conn.commit()
            found = [p for key in names.values() for p in check_series(conn, run_id, key)]
        assert {p.split(" level")[0] for p in found} == {
            f"run {run_id} key {names[k]}" for k in ("loss", "lr", "gpu")
        }, found
    finally:
        engine.dispose()


def test_points_in_chunks_of_a_missing_run_or_key_are_reported(store_path, capsys):
    logged(store_path, steps=500)
    other = reslog.init(project="p", name="gone", store=store_path, system=False)
    for step in range(100):
        other.log({"z": 1.0}, step=step)
    other.finish()
    with sqlite3.connect(store_path) as conn:  # foreign keys are off in a plain connection
        conn.execute("DELETE FROM runs WHERE name = 'gone'")
        conn.execute("DELETE FROM keys WHERE name = 'gpu'")
    code = main(["check", str(store_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "PROBLEM  100 points in chunks of a missing run" in out, out
    assert "PROBLEM  50 points in chunks of a missing key" in out, out
