"""A slow PostgreSQL is not a dead one: the writer waits for a server that works, commits a
backlog in pieces as it goes, and loses nothing (issue 36, finding 2).

Real server on loopback, real processes. No timed asserts: the facts checked are structural (no
hang warning, no failed write, every point stored once, commits made while the loops logged).
How fast it goes is scripts/bench/bench_pg_writers.py's business.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url

import reslog
from tests.fixtures.stored_points import all_points
from tests.reslog.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.postgres


def wait_until(done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done()


def test_a_write_waiting_on_a_lock_past_write_timeout_is_slow_not_dead(pg_store):
    """Another session holds a lock the writer's insert needs for longer than write_timeout:
    the server is alive and the statement waits in it, so the watchdog must not break it."""
    url = make_url(pg_store).update_query_dict({"write_timeout": "2"}).render_as_string(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = reslog.init(project="p", store=url, system=False, flush_interval=0.1)
        writer = run._writer
        run.log({"x": 0.0})
        wait_until(lambda: writer.committed >= 1)
        locker = create_engine(pg_store)
        with locker.connect() as conn, conn.begin():
            conn.exec_driver_sql("LOCK TABLE chunks IN EXCLUSIVE MODE")  # where points go
            for i in range(1, 100):
                run.log({"x": float(i)})
            # Two checks on a second connection found the insert waiting for the lock.
            wait_until(lambda: writer.slow_checks >= 2)
            assert writer.committed == 1
        locker.dispose()
        assert run.finish(timeout=60) is True
    said = [str(w.message) for w in caught if "reslog" in str(w.message)]
    assert said == []  # no "hung", no "cannot write"
    assert writer.failures == 0
    _, series, _ = read_run(pg_store, run.uid)
    assert series["x"] == [(i, float(i)) for i in range(100)]


CHILD = r"""
import json, sys, time, reslog
url, index, rate, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
keys = [f"train/k{j}" for j in range(20)]
run = reslog.init(project="load", name=f"w{index}", store=url, system=False)
writer = run._writer
steps = int(rate * seconds) // len(keys)
t0 = time.monotonic()
for step in range(steps):
    run.log({k: index * 1e6 + step + j / 100 for j, k in enumerate(keys)}, step=step)
    ahead = t0 + (step + 1) * len(keys) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
during = writer.committed  # before finish(): what the store took while the loop logged
ok = run.finish(timeout=300)
print(json.dumps({"uid": run.uid, "logged": writer.logged, "during": during, "ok": ok,
                  "commits": writer.commits, "failures": writer.failures,
                  "dropped": writer.dropped}))
"""


def test_writers_faster_than_the_server_commit_as_they_go_without_a_false_hang(pg_store):
    """Eight processes log more points a second than this machine's server takes, with a short
    write_timeout: the backlog lands in pieces while they log, the watchdog never mistakes the
    busy server for a dead one, and every point is stored exactly once."""
    url = make_url(pg_store).update_query_dict({"write_timeout": "3"}).render_as_string(False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url, str(i), "4000", "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(8)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert "hung" not in err and "cannot write" not in err, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    engine = create_engine(pg_store)
    with engine.connect() as conn:
        uids = dict(conn.exec_driver_sql("SELECT id, uid FROM runs").all())
        every = all_points(conn)
        stored = dict(Counter(uids[r[1]] for r in every))
        # Each piece committed its rollups with it: the series rows count every stored point.
        counted = dict(
            conn.exec_driver_sql(
                "SELECT r.uid, sum(s.n) FROM series s JOIN runs r ON r.id = s.run_id GROUP BY r.uid"
            ).all()
        )
        duplicated = sum(n > 1 for n in Counter(r[1:4] for r in every).values())
    engine.dispose()
    assert duplicated == 0
    for r in results:
        assert r["ok"] is True and r["failures"] == 0 and r["dropped"] == 0
        assert stored[r["uid"]] == r["logged"] == 20 * (4000 * 6 // 20)  # 0 lost
        assert counted[r["uid"]] == r["logged"]
        assert r["during"] > 0  # commits while the loop logged, not only at finish()
