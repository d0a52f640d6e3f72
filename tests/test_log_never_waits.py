"""log() never waits on the store (issue 36, finding 8): the writer thread starts no cyclic
collection pass (a pass holds the GIL from the training thread for its whole length), and
sixteen processes writing one SQLite file queue for its lock without a warning while
`reslog ls` reads it.

Counts, not times: how fast is scripts/bench/bench_sqlite_writers.py's business.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import reslog

ROOT = Path(__file__).resolve().parents[1]


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
    import sqlite3

    conn = sqlite3.connect(store)
    from tests.fixtures.stored_points import points_per_run

    counts = points_per_run(conn)
    conn.close()
    assert sorted(counts.values()) == [steps * 50] * 16  # 0 lost
