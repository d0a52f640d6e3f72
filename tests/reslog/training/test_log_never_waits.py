"""log() never waits on the store (issue 36, finding 8): the writer thread starts no cyclic
collection pass (a pass holds the GIL from the training thread for its whole length), and
sixteen processes writing one SQLite file queue for its lock without a warning while
`reslog ls` reads it.

Counts, not times: how fast is scripts/bench/bench_sqlite_writers.py's business.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import reslog

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_the_writer_thread_starts_no_collection_pass_while_it_flushes(store_path):
    passes: list[tuple[str, int]] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            passes.append((threading.current_thread().name, info["generation"]))

    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.1)
    writer = run._writer
    gc.callbacks.append(on_gc)
    try:
        for step in range(20_000):  # 200,000 points: about 300 passes' worth of row tuples
            run.log({f"k{j}": step + j / 10 for j in range(10)}, step=step)
        deadline = time.monotonic() + 120
        while writer.committed < 200_000 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        gc.callbacks.remove(on_gc)
    assert writer.committed == 200_000
    assert passes  # the training thread's own records still start passes, in its own thread
    by_writer = [gen for name, gen in passes if name == "reslog-writer"]
    # Only where the pause ends (after draining, after each piece) can the count the training
    # thread left start a pass in the writer thread: the old code started one each 700 rows
    # (287 here), a full one among them.
    assert len(by_writer) <= 2 * (writer.flushes + writer.commits), by_writer
    assert run.finish() is True


CHILD = r"""
import sys, time, reslog
store, index, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
run = reslog.init(project="many", name=f"w{index}", store=store, system=False)
names = [f"train/k{j}" for j in range(50)]
t0 = time.monotonic()
for step in range(steps):
    run.log({k: index * 1e6 + step + j / 100 for j, k in enumerate(names)}, step=step)
    ahead = t0 + (step + 1) / 100 - time.monotonic()  # 100 steps/s, 5,000 points/s
    if ahead > 0:
        time.sleep(ahead)
print("finished", run.finish(timeout=300), run._writer.lock_waits)
"""


def test_sixteen_processes_queue_for_one_file_without_a_warning_while_ls_reads(tmp_path):
    store = tmp_path / "shared.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import reslog, sys; reslog.init(store=sys.argv[1], system=False).finish()",
            str(store),
        ],
        check=True,
        env=env,
    )
    steps = 500
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), str(i), str(steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for i in range(16)
    ]
    listed = []
    while any(p.poll() is None for p in procs):
        done = subprocess.run(
            [sys.executable, "-m", "reslog.tools.cli", "ls", str(store)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert "locked" not in done.stderr and "warning" not in done.stderr, done.stderr
        listed.append(done.stdout)
    assert listed  # ls ran while they wrote
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.split()[:2] == ["finished", "True"], err
        assert "locked" not in err and "reslog" not in err, err
    conn = sqlite3.connect(store)
    from tests.fixtures.stored_points import points_per_run

    counts = points_per_run(conn)
    conn.close()
    assert sorted(counts.values()) == [steps * 50] * 16  # 0 lost


# Another writer of the same file, as a raw SQLite connection in its own process: "turns" takes
# the write lock over and over, committing each time (a busy writer, or several); "held" takes
# it once and keeps its transaction open until told to stop (a process stuck mid-write).
OTHER = r"""
import os, sqlite3, sys, time
store, run_id, mode, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
conn = sqlite3.connect(store, isolation_level=None, timeout=30)
commits = 0
print("ready", flush=True)
if mode == "held":
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ?", (time.time(), run_id))
    while not os.path.exists(stop):
        time.sleep(0.02)
    conn.execute("COMMIT")
    commits += 1
else:
    while not os.path.exists(stop):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ?", (time.time(), run_id))
        time.sleep(0.05)
        conn.execute("COMMIT")
        commits += 1
print(commits, flush=True)
"""


def locked_out(store: Path, mode: str, monkeypatch) -> tuple[reslog.Run, int, list[str]]:
    """A run that logs 200 points while another process holds the store's write lock as `mode`
    says, until the run's writer has failed to get the lock 4 times (over 4 s: longer than the
    2 s LOCK_WARN_AFTER_S set here); then the other process stops. (run, the other process's
    commits, reslog's warnings)."""
    from reslog.training import writer as writer_module

    monkeypatch.setattr(writer_module, "LOCK_WARN_AFTER_S", 2.0)
    other = reslog.init(project="p", name="other", store=store, system=False)
    other.finish()
    with contextlib.closing(sqlite3.connect(store)) as conn:
        [(other_id,)] = conn.execute("SELECT id FROM runs WHERE name = 'other'").fetchall()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = reslog.init(project="p", name="me", store=store, system=False, flush_interval=0.5)
        writer = run._writer
        run.log({"x": 0.0}, step=0)
        deadline = time.monotonic() + 60
        while writer.committed < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        stop = store.with_name("stop")
        proc = subprocess.Popen(
            [sys.executable, "-c", OTHER, str(store), str(other_id), mode, str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            for step in range(1, 200):
                run.log({"x": float(step)}, step=step)  # returns at once: the buffer takes it
            while writer.lock_waits < 4 and time.monotonic() < deadline + 60:
                time.sleep(0.05)
        finally:
            stop.touch()
            out, _ = proc.communicate(timeout=60)
        assert writer.lock_waits >= 4
        assert run.finish(timeout=60) is True
    said = [str(w.message) for w in caught if "reslog" in str(w.message)]
    return run, int(out.split()[-1]), said


def test_writers_taking_turns_are_a_queue_not_a_locked_store(store_path, monkeypatch):
    """16 writers of one file on 2 cores made some wait over 30 s for a turn (SQLite's busy
    handler is no queue) and warn "database is locked" although the others kept committing.
    Others committing is a busy store, not a locked one: the points wait in memory, unsaid."""
    run, commits, said = locked_out(store_path, "turns", monkeypatch)
    assert commits > 4  # the other writer took turn after turn meanwhile
    assert run._writer.committed == 200  # then all of them landed
    assert said == []


def test_a_transaction_held_open_is_still_warned_of_as_a_locked_store(store_path, monkeypatch):
    """The warning is kept for what it means: no writer committing for LOCK_WARN_AFTER_S."""
    run, commits, said = locked_out(store_path, "held", monkeypatch)
    assert commits == 1
    assert run._writer.committed == 200
    assert len(said) == 1 and "database is locked" in said[0], said
