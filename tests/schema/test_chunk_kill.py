"""SIGKILL of a writer at random moments while it writes head chunks and seals them (SQLite and
PostgreSQL): the store checks out, and every run holds whole log() calls, a prefix of what it
logged, each point once (docs/store.md, "Points as compressed columns")."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reslog.tools.maintenance import check_store
from schema.store import chunk_read, points_by_id
from schema.store.connect import open_store
from schema.store.envelope import marker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# Sealing every 32 rows makes a kill land inside a sealing transaction often.
CHILD = r"""
import sys, time
import schema.store.chunk_write
schema.store.chunk_write.SEAL_ROWS = 32
import reslog
store, name = sys.argv[1], sys.argv[2]
run = reslog.init(project="kill", name=name, store=store, system=False, flush_interval=0.02)
keys = [f"k{j}" for j in range(6)]
step = 0
while True:
    run.log({k: float(step) + j / 10 for j, k in enumerate(keys)}, step=step)
    step += 1
    if step % 50 == 0:
        if run._writer.committed:  # the parent kills after a first commit, however loaded
            print(step, flush=True)
        time.sleep(0.005)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def kill_store(request) -> str:
    """The store the killed writers share: a SQLite file, or a PostgreSQL database (there a
    sealing is followed by a VACUUM on the writer's connection, which a kill may land in)."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("store_path"))
    return request.getfixturevalue("pg_store")


def test_sigkill_while_sealing_leaves_whole_log_calls_and_a_store_that_checks(kill_store):
    store_path = kill_store
    rng = random.Random(7)
    names = [f"r{i}" for i in range(4)]
    for name in names:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store_path), name],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout.readline().strip()  # logging, and some of it committed
        time.sleep(rng.uniform(0.5, 2.5))
        proc.kill()
        proc.wait(timeout=30)
    engine = open_store(store_path, readonly=True)
    with engine.connect() as conn:
        cur = conn.connection.dbapi_connection.cursor()
        p = marker(conn.dialect.paramstyle)
        runs = dict(cur.execute("SELECT name, id FROM runs").fetchall())
        keys = dict(cur.execute("SELECT name, id FROM keys").fetchall())
        sealed = cur.execute("SELECT count(*) FROM chunks WHERE sealed = 1").fetchone()[0]
        assert sealed > 0  # the kills came after sealings, and maybe inside one
        for name in names:
            counts = set()
            for j in range(6):
                rows = chunk_read.series_all(cur, p, runs[name], keys[f"k{j}"])
                steps = [r[1] for r in rows]
                assert steps == list(range(len(steps))), name  # a prefix, each step once
                assert [r[3] for r in rows] == [s + j / 10 for s in steps]
                counts.add(len(steps))
            assert len(counts) == 1 and counts.pop() > 0  # whole log() calls
        everything = points_by_id.points_after(cur, p, None, 0)
        assert len({r[0] for r in everything}) == len(everything)
    engine.dispose()
    report = check_store(str(store_path))
    # The killed runs read as crashed, and that is all the check finds: no chunk, point or
    # rollup out of step; `--fix` writes the status down and the store then checks clean.
    assert len(report.problems) == len(names), report.problems
    assert all("it crashed" in line for line in report.problems), report.problems
    check_store(str(store_path), fix=True)
    assert check_store(str(store_path)).problems == []
