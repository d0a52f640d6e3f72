"""One live writer per run: resuming a run whose process still logs is refused with an error
naming its host and pid (same host: /proc says whether it lives; elsewhere: a fresh
heartbeat), so a second process can never leave the run's rollups wrong. A run whose process
is gone (finished, killed, or silent past its heartbeat limit) resumes as before."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import update

import reslog
from reslog.tools.maintenance import check_store
from schema import open_store
from schema.store.errors import RunInUse
from schema.store.tables import runs
from tests.reslog.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[3]

# A process that logs `steps` steps into run `id` (resume="allow"), says "ok", and finishes
# when its stdin closes.
CHILD = r"""
import sys, reslog
store, uid, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = reslog.init(project="p", id=uid, resume="allow", store=store, system=False,
                  flush_interval=0.05)
for _ in range(steps):
    run.log({"a": 1.0, "b": 2.0})
print("ok", run.step, flush=True)
sys.stdin.read()
run.finish()
print("finished", flush=True)
"""


def start_child(store: Path, uid: str, steps: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), uid, str(steps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    line = proc.stdout.readline()
    assert line.startswith("ok"), proc.stderr.read()
    return proc


def end_child(proc: subprocess.Popen) -> str:
    out, err = proc.communicate("", timeout=60)
    assert proc.returncode == 0, err
    return out


@pytest.mark.integration
def test_a_second_process_resuming_a_live_run_is_refused_and_the_run_stays_whole(store_path):
    first = start_child(store_path, "shared-id", 2000)
    try:
        second = subprocess.run(
            [sys.executable, "-c", CHILD, str(store_path), "shared-id", "2000"],
            input="",
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        assert second.returncode == 1
        line = second.stderr.splitlines()[-1]
        assert line.startswith("schema.store.errors.RunInUse: "), second.stderr
        host = socket.gethostname()
        assert f"run shared-id is being logged by pid {first.pid} on {host} (alive)" in line
        # In this process as well: the same error, and nothing written.
        with pytest.raises(RunInUse, match=f"pid {first.pid} on {host}"):
            reslog.init(project="p", id="shared-id", resume="allow", store=store_path)
    finally:
        end_child(first)
    report = check_store(str(store_path))
    assert report.problems == []
    info, series, _ = read_run(store_path)
    assert info.status == "finished" and len(series["a"]) == len(series["b"]) == 2000
    # Once that process has finished, the run resumes: 4,000 points, counted exactly.
    end_child(start_child(store_path, "shared-id", 2000))
    assert check_store(str(store_path)).problems == []
    with reslog.open(store_path) as r:
        keys = r.keys("shared-id").set_index("key")
    assert keys.loc["a", "points"] == 4000 and keys.loc["a", "last_step"] == 3999
    assert len(read_run(store_path)[1]["a"]) == 4000


@pytest.mark.integration
def test_a_killed_process_frees_its_run_at_once_on_its_host(store_path):
    child = start_child(store_path, "killed", 10)
    deadline = time.monotonic() + 60
    while len(read_run(store_path)[1].get("a", [])) < 10:  # flushed: the points are in
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    run = reslog.init(project="p", id="killed", resume="allow", store=store_path, system=False)
    assert run.step == 10
    run.finish()


def test_the_same_process_cannot_open_a_run_it_still_logs(store_path):
    run = reslog.init(project="p", id="mine", store=store_path, system=False)
    with pytest.raises(RunInUse, match="still being logged by this process; finish"):
        reslog.init(project="p", id="mine", resume="allow", store=store_path, system=False)
    again = reslog.init(
        project="p",
        id="mine",
        resume="allow",
        store=store_path,
        system=False,
        reinit="finish_previous",
    )
    assert run._status == "finished" and again.uid == "mine"
    again.finish()


def test_elsewhere_a_fresh_heartbeat_refuses_and_a_stale_one_lets_the_run_resume(store_path):
    """Another host's process cannot be looked up here: its row is made to say it runs on
    another boot and pid namespace (no second machine here), so only its heartbeat counts."""
    run = reslog.init(project="p", id="far", store=store_path, system=False)
    run.log({"a": 1.0})
    run.finish()
    engine = open_store(store_path)
    now = time.time()
    with engine.begin() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.uid == "far")
            .values(
                status="running",
                host="gpu-7",
                pid=4242,
                proc_host="other-boot/pid:[1]",
                proc_start="123",
                heartbeat_at=now - 3.0,
                heartbeat_interval=1.0,
            )
        )
    with pytest.raises(RunInUse) as err:
        reslog.init(project="p", id="far", resume="allow", store=store_path, system=False)
    assert "by pid 4242 on gpu-7 (its heartbeat is 3s old)" in str(err.value)
    assert "goes stale after 15s: retry then" in str(err.value)
    with engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.uid == "far").values(heartbeat_at=now - 60.0))
    engine.dispose()
    again = reslog.init(project="p", id="far", resume="allow", store=store_path, system=False)
    assert again.step == 1
    again.finish()


def test_wandbs_shared_mode_says_once_that_each_process_logs_its_own_run(store_path):
    with pytest.warns(UserWarning, match=r"mode='shared'\) logs this process's own run"):
        run = reslog.init(project="p", store=store_path, system=False, mode="shared")
    run.log({"a": 1.0})
    run.finish()
    assert read_run(store_path)[1]["a"] == [(0, 1.0)]
    assert reslog.RunInUse is RunInUse
