"""How a run ends with its process: kill -9, SIGTERM, Ctrl+C, an exception, plain exit, fork."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schema.store.status import effective_status, stale_after
from tests.fixtures.signals import restore_ctrl_c
from tests.fixtures.stored_points import all_points
from tests.reslog.test_reslog_api import read_run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import os, sys, threading, time, reslog
store, mode, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
if mode == "thread":  # training in a worker thread that dies of an exception
    def train():
        run = reslog.init(project="crash", name=mode, store=store, system=False)
        run.log({"k0": 1.0})
        raise RuntimeError("worker died")
    t = threading.Thread(target=train)
    t.start()
    t.join()
    print("main thread done", flush=True)
    sys.exit(0)
run = reslog.init(project="crash", name=mode, store=store, system=False, flush_interval=interval)
print("uid", run.uid, flush=True)
keys = [f"k{j}" for j in range(8)]
step = 0
def log_some(n):
    global step
    for _ in range(n):
        run.log({k: float(step) for k in keys}, step=step)
        step += 1
if mode == "forever":  # report progress until killed
    while True:
        log_some(20)
        print("logged", time.time(), step, flush=True)
        time.sleep(0.02)
log_some(100)
if mode == "raise":
    raise ValueError("boom at step 100")
if mode == "exit":
    sys.exit(0)  # no finish(): the atexit hook finishes the run
if mode == "exit3":
    sys.exit(3)  # a script reporting failure through its exit status
if mode == "fork":
    pid = os.fork()
    if pid == 0:
        run.log({"from_child": 1.0})  # the child's copy is inert: ignored, nothing written
        sys.exit(0)  # runs the child's atexit: must not finish the parent's run
    os.waitpid(pid, 0)
    log_some(100)
    sys.exit(0)
"""


def start(store: Path, mode: str, interval: float = 0.2) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), mode, str(interval)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=restore_ctrl_c,  # the Ctrl+C test stops it with SIGINT
    )
    return proc


def stored_steps(store: Path) -> list[int]:
    conn = sqlite3.connect(store)
    try:
        return [s for s, _k in sorted((r[3], r[2]) for r in all_points(conn))]
    finally:
        conn.close()


def run_until_logging(store: Path, mode: str, interval: float) -> tuple[subprocess.Popen, list]:
    proc = start(store, mode, interval)
    assert proc.stdout.readline().startswith("uid")
    reports = []
    t_end = time.monotonic() + 3.0
    while time.monotonic() < t_end:
        _, t, step = proc.stdout.readline().split()
        reports.append((float(t), int(step)))
    return proc, reports


def test_sigkill_loses_at_most_one_flush_interval_and_reads_as_crashed(store_path):
    interval = 1.0
    proc, reports = run_until_logging(store_path, "forever", interval)
    killed_at = time.time()
    proc.kill()
    proc.wait(timeout=30)
    # Everything logged more than one flush interval before the kill is stored. The 0.5 s on top
    # is the flush itself on a busy machine (commit, scheduler), not a second interval.
    safe = [step for t, step in reports if t <= killed_at - interval - 0.5]
    assert safe, "the child reported too little before the kill"
    steps = stored_steps(store_path)
    assert len(steps) >= safe[-1] * 8
    assert steps == sorted(steps) and len(steps) % 8 == 0  # whole log() calls only
    info, _, _ = read_run(store_path)
    # A reader on the run's own host sees at once that the process is gone
    # (schema/store/liveness.py)
    assert info.status == "crashed"
    assert killed_at - info.heartbeat_at <= 2 * interval + 1.0
    # Elsewhere (cannot tell whether the process lives) the heartbeat rule decides, later.
    beat, every = info.heartbeat_at, info.heartbeat_interval
    assert effective_status("running", beat, every, beat + 1, alive=None) == "running"
    later = beat + stale_after(every) + 1
    assert effective_status("running", beat, every, later, alive=None) == "crashed"


def test_sigterm_marks_the_run_killed_after_writing_everything(store_path):
    proc, reports = run_until_logging(store_path, "forever", 0.2)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # then the default action: died of the signal
    info, series, events = read_run(store_path)
    assert info.status == "killed" and info.ended_at is not None
    assert len(series["k0"]) >= reports[-1][1]
    assert any("SIGTERM" in e.title for e in events)


def test_ctrl_c_exits_cleanly_and_marks_the_run_killed(store_path):
    proc, reports = run_until_logging(store_path, "forever", 0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in (-signal.SIGINT, 1, 130)
    assert "KeyboardInterrupt" in err and "reslog" not in err.replace("reslog/", "")
    info, series, _ = read_run(store_path)
    assert info.status == "killed"
    assert len(series["k0"]) >= reports[-1][1]


def test_uncaught_exception_marks_the_run_failed_with_the_error(store_path):
    proc = start(store_path, "raise")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "ValueError: boom at step 100" in err
    info, series, events = read_run(store_path)
    assert info.status == "failed"
    assert len(series["k0"]) == 100
    assert events[-1].kind == "alert" and events[-1].level == "error"
    assert "ValueError: boom at step 100" in events[-1].title
    assert "Traceback" in events[-1].body


def test_plain_exit_without_finish_marks_the_run_finished(store_path):
    proc = start(store_path, "exit")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    info, series, _ = read_run(store_path)
    assert info.status == "finished"
    assert [s for s, _ in series["k7"]] == list(range(100))


def test_a_nonzero_sys_exit_marks_the_run_failed_with_the_status(store_path):
    proc = start(store_path, "exit3")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    info, series, events = read_run(store_path)
    assert info.status == "failed"
    assert len(series["k0"]) == 100
    assert [e.title for e in events] == ["run failed: sys.exit(3): exit status 3"]


def test_a_forked_child_neither_writes_nor_finishes_the_parents_run(store_path):
    proc = start(store_path, "fork")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    info, series, _ = read_run(store_path)
    assert info.status == "finished"
    assert "from_child" not in series
    assert [s for s, _ in series["k0"]] == list(range(200))


def test_an_exception_in_the_thread_that_started_the_run_marks_it_failed(store_path):
    proc = start(store_path, "thread")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "main thread done" in out, err
    assert "RuntimeError: worker died" in err  # the previous threading.excepthook still ran
    info, series, events = read_run(store_path)
    assert info.status == "failed"
    assert series["k0"] == [(0, 1.0)]
    assert "RuntimeError: worker died" in events[-1].title
