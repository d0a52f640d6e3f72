"""Eight processes write one SQLite store at once: everything lands, nobody sees a lock error."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures.stored_points import all_points

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
PROCS, STEPS, KEYS = 8, 5000, 8

CHILD = r"""
import sys, reslog
store, index, steps, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
run = reslog.init(project="mp", name=f"proc{index}", store=store, system=False,
                  flush_interval=0.2, rank=index, world_size=8)
names = [f"train/k{j}" for j in range(keys)]
for step in range(steps):
    run.log({name: index * 1e6 + step + j / 10 for j, name in enumerate(names)})
    if step % 500 == 0:
        run.log({f"time/rank{index}/step": 0.1}, step=step)
print("finished", run.finish(timeout=120))
"""


def test_eight_processes_share_one_store_without_lock_errors(tmp_path):
    store = tmp_path / "shared.db"  # not created yet: the processes race to create it too
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), str(i), str(STEPS), str(KEYS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for i in range(PROCS)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "finished True", err
        assert "locked" not in err and "reslog" not in err, err
    conn = sqlite3.connect(store)
    runs = conn.execute("SELECT id, name, status, rank FROM runs ORDER BY rank").fetchall()
    assert [(r[1], r[2], r[3]) for r in runs] == [(f"proc{i}", "finished", i) for i in range(PROCS)]
    per_run = STEPS * KEYS + STEPS // 500
    stored = all_points(conn)
    counts = Counter(r[1] for r in stored)
    assert sorted(counts.values()) == [per_run] * PROCS
    # every point is where its process put it: value encodes (process, step, key)
    rank_of = {r[0]: r[3] for r in runs}
    key_of = dict(conn.execute("SELECT id, name FROM keys").fetchall())
    checked = bad = 0
    for _id, run_id, key_id, step, _wall, value in stored:
        name = key_of[key_id]
        if name.startswith("train/k"):
            checked += 1
            bad += abs(value - (rank_of[run_id] * 1e6 + step + float(name[7:]) / 10)) > 1e-6
    assert checked == PROCS * STEPS * KEYS and bad == 0
    names = [n for (n,) in conn.execute("SELECT name FROM keys")]
    assert len(names) == len(set(names)) == KEYS + PROCS
