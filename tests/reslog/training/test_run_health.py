"""Run health: crashed at once on the run's host, stalls caught with where they hang, no silent
loss (store deleted or replaced mid-run, a backlog after an outage, a full buffer, a kill in the
first second). Every fault is real: a real child process, real signals, real files."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
import warnings
from pathlib import Path

import pytest

import reslog
from reslog.agent.store import Store
from reslog.training.stall import DEFAULT_MIN_STALL_S, StallWatch, check_stall_after
from reslog.training.writer_watch import stall_event
from schema.store import liveness
from schema.store.status import effective_status, row_status
from tests.fixtures.logging_child import ROOT, Child
from tests.reslog.test_reslog_api import read_run
from tests.reslog.training.test_writer_faults import count_points, wait_for_points, write_lock


@pytest.fixture
def child_factory():
    made: list[Child] = []

    def make(*args, **kw) -> Child:
        made.append(Child(*args, **kw))
        return made[-1]

    yield make
    for c in made:
        c.kill()


def wait_until(predicate, timeout: float = 30.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


def agent_runs(store: Path) -> list[dict]:
    agent = Store(str(store))
    try:
        header, _ = agent.read("poll", {})
        return header["runs"]
    finally:
        agent.close()


# ---- liveness -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_process_identity_tells_a_live_process_from_a_dead_or_reused_pid():
    here = liveness.host_identity()
    assert here and "/pid:[" in here
    me = liveness.process_identity(os.getpid())
    assert me is not None and me == liveness.process_identity(os.getpid())
    assert liveness.is_alive(here, os.getpid(), me) is True
    # Same pid, another start time: the pid was reused by another process.
    assert liveness.is_alive(here, os.getpid(), str(int(me) + 1)) is False
    # A zombie (exited, not reaped yet) is dead; so is a reaped one.
    proc = subprocess.Popen(["true"])
    assert wait_until(lambda: liveness.process_identity(proc.pid) is None, timeout=10)
    proc.wait()
    # Another host, container or boot: nothing can be told from here.
    assert liveness.is_alive("another-boot/pid:[1]", os.getpid(), me) is None
    assert liveness.is_alive(None, os.getpid(), me) is None


def test_effective_status_rules():
    now = 1000.0
    fresh, old = now - 1, now - 100
    assert effective_status("running", fresh, 1.0, now, alive=None) == "running"
    assert effective_status("running", old, 1.0, now, alive=None) == "crashed"
    assert effective_status("running", fresh, 1.0, now, alive=False) == "crashed"
    # Alive but no heartbeat: the process is wedged or cannot write; it did not crash.
    assert effective_status("running", old, 1.0, now, alive=True) == "stalled"
    assert effective_status("running", fresh, 1.0, now, alive=True, stalled_since=5) == "stalled"
    assert effective_status("running", fresh, 1.0, now, stalled_since=5.0) == "stalled"
    assert effective_status("finished", old, 1.0, now, alive=False) == "finished"


def test_a_killed_run_reads_crashed_at_once_in_the_cli_and_through_the_agent(
    store_path, child_factory
):
    child = child_factory(store_path)
    child.send("log 10")
    assert wait_for_points(store_path, 20) == 20
    assert read_run(store_path)[0].status == "running"
    [row] = agent_runs(store_path)
    assert row["alive"] is True and row_status(row) == "running"
    os.kill(child.pid, signal.SIGKILL)
    child.proc.wait()
    # No waiting for a heartbeat to go stale: the process is gone, and this host can see it.
    assert read_run(store_path)[0].status == "crashed"
    [row] = agent_runs(store_path)
    assert row["alive"] is False and row_status(row) == "crashed"


# ---- stalls -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_hung_run_is_flagged_stalled_with_the_hanging_frame_then_recovers(
    store_path, child_factory
):
    child = child_factory(store_path, interval=0.1, stall_after=1.0)
    child.send("log 5")
    child.send("hang 4", wait=False)  # the child sleeps inside wait_for_allreduce()

    def stall_events():
        return [e for e in read_run(store_path)[2] if e.kind == "stall"]

    assert wait_until(lambda: read_run(store_path)[0].status == "stalled", timeout=30)
    [event] = wait_until(stall_events)
    assert event.level == "warning" and event.title.startswith("stalled: no step logged for")
    assert "(the thread that called reslog.init)" in event.body
    assert "in wait_for_allreduce" in event.body  # where it hangs, innermost frame
    child.read()  # the hang is over
    child.send("log 5")
    assert wait_until(lambda: read_run(store_path)[0].status == "running", timeout=30)
    resumed = wait_until(lambda: len(stall_events()) == 2 and stall_events()[1])
    assert resumed.level == "info" and resumed.title.startswith("steps resumed after a stall of")
    last, _ = child.finish()
    assert last.split()[1] == "True" and read_run(store_path)[0].status == "finished"


def test_the_stall_event_says_each_gpus_utilisation_by_ordinal():
    """The hint reads the GPU keys as every reader does (schema.rules.alerts.gpu_key): gpu10 after
    gpu2, and a key that only ends in /util is not a GPU."""
    side = {"sys/gpu10/util": 5.0, "sys/gpu2/util": 97.0, "sys/gpu2/temp_c": 61.0}
    side["train/util"] = 1.0
    writer = types.SimpleNamespace(
        _last_side=side,
        stall=types.SimpleNamespace(threshold=lambda: 3.0),
        owner=threading.current_thread(),
    )
    _at, _step, kind, level, title, body = stall_event(writer, 4.0, time.time())
    assert (kind, level) == ("stall", "warning") and title.startswith("stalled: no step logged")
    assert body.startswith("GPU utilisation now: gpu2 97%, gpu10 5%. Idle GPUs"), body
    assert "in test_the_stall_event_says_each_gpus_utilisation_by_ordinal" in body


@pytest.mark.slow
def test_pauses_shorter_than_stall_after_never_flag(store_path, child_factory):
    child = child_factory(store_path, interval=0.1, stall_after=2.5)
    for _ in range(3):
        child.send("log 5")
        child.send("hang 1")  # an evaluation or a checkpoint: shorter than stall_after
    child.finish()
    info, _, events = read_run(store_path)
    assert info.status == "finished"
    assert [e for e in events if e.kind == "stall"] == []


def test_the_default_stall_threshold_follows_the_step_time():
    watch = StallWatch(None)
    assert watch.threshold() == DEFAULT_MIN_STALL_S  # nothing seen yet
    # Steps of 60 s: 20 of them (20 min) before a stall is declared, not 5 minutes.
    for i in range(10):
        watch.saw_records([60.0 * i])
    assert watch.threshold() == pytest.approx(20 * 60.0)
    assert watch.tick(1, now=0.0) is None
    assert watch.tick(1, now=19 * 60.0) is None
    assert watch.tick(1, now=21 * 60.0) == "stalled"
    fast = StallWatch(None)
    for i in range(10):
        fast.saw_records([0.1 * i])
    assert fast.threshold() == DEFAULT_MIN_STALL_S  # never below 5 minutes
    off = StallWatch(0.0)
    off.tick(1, 0.0)
    assert off.tick(1, 1e9) is None


@pytest.mark.parametrize("bad", [-1, "5m", True, float("nan")])
def test_bad_stall_after_is_refused_at_init(bad):
    with pytest.raises(ValueError, match="stall_after"):
        check_stall_after(bad)


# ---- no silent loss -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_store_deleted_mid_run_is_restored_with_every_point(store_path, child_factory):
    child = child_factory(store_path)
    child.send("log 1000")
    assert wait_for_points(store_path, 2000) == 2000
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{store_path}{suffix}")
    child.send("log 1000")
    last, stderr = child.finish()
    assert last.split()[1] == "True"
    assert "was deleted while the run was writing; restored it at" in stderr
    assert count_points(store_path) == 4000
    info, series, events = read_run(store_path)
    assert info.status == "finished" and len(series["a"]) == 2000
    assert any(e.kind == "writer" and "deleted" in e.title for e in events)


@pytest.mark.slow
def test_a_store_replaced_mid_run_is_kept_beside_it_untouched(store_path, child_factory):
    child = child_factory(store_path)
    child.send("log 500")
    assert wait_for_points(store_path, 1000) == 1000
    other = store_path.with_name("other.db")
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE mine (x)")
        conn.commit()
    os.replace(other, store_path)
    child.send("log 500")
    last, stderr = child.finish()
    assert last.split()[1] == "True"
    rescued = store_path.with_name(f"reslog.restored-{child.uid[:8]}.db")
    assert f"was replaced while the run was writing; restored it at {rescued}" in stderr
    with contextlib.closing(sqlite3.connect(store_path)) as conn:  # the user's file, as it was
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["mine"]
    assert count_points(rescued) == 2000
    assert read_run(rescued)[0].status == "finished"


@pytest.mark.slow
def test_a_backlog_larger_than_the_freed_space_lands_chunk_by_chunk(tmp_path, child_factory):
    store = tmp_path / "reslog.db"
    child = child_factory(store, chunk=2000)
    child.send("log 10")
    assert wait_for_points(store, 20) == 20
    biggest = max(f.stat().st_size for f in tmp_path.glob("reslog.db*"))
    child.send(f"limit {biggest}")  # the disk is full
    child.send("log 20000")  # a 40,000-point backlog
    time.sleep(1.0)
    assert count_points(store) < 40020
    # Some room comes back, far less than the whole backlog needs: it lands in pieces.
    child.send(f"limit {biggest + 600_000}")
    assert wait_until(lambda: count_points(store) > 2020, timeout=30)
    child.send("unlimit")
    assert wait_for_points(store, 40020) == 40020
    last, _ = child.finish()
    assert last.split()[1] == "True"
    assert read_run(store)[0].status == "finished"


@pytest.mark.slow
def test_a_run_killed_in_its_first_second_keeps_its_points(store_path, child_factory):
    child = child_factory(store_path, interval=5.0)  # a long flush interval
    child.send("log 3")
    assert wait_for_points(store_path, 6, timeout=2.0) == 6  # well before the first interval
    os.kill(child.pid, signal.SIGKILL)
    child.proc.wait()
    assert count_points(store_path) == 6


def test_buffer_full_drops_warn_once_with_the_count_and_the_setting(store_path):
    run = reslog.init(store=store_path, system=False, max_buffer_points=100)
    with write_lock(store_path), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(200):
            run.log({"a": 1.0, "b": float(i)})
    drops = [w for w in caught if "buffer is full" in str(w.message)]
    assert len(drops) == 1
    message = str(drops[0].message)
    assert "max_buffer_points" in message and "on_full='block'" in message
    with pytest.warns(RuntimeWarning, match="dropped 300 points in all"):
        assert run.finish(timeout=30)
    assert run._writer.dropped == 300  # 400 logged, 100 kept


def test_on_full_block_waits_for_room_and_loses_nothing(store_path):
    run = reslog.init(
        store=store_path, system=False, max_buffer_points=100, on_full="block", flush_interval=0.05
    )
    locked = threading.Event()

    def hold_the_lock_for_a_second() -> None:
        with write_lock(store_path):
            locked.set()
            time.sleep(1.0)

    holder = threading.Thread(target=hold_the_lock_for_a_second)
    holder.start()
    assert locked.wait(10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(2000):
            run.log({"a": 1.0, "b": float(i)})
    holder.join()
    assert run.finish(timeout=30)
    assert not [w for w in caught if "buffer is full" in str(w.message)]
    assert run._writer.dropped == 0 and count_points(store_path) == 4000


def test_a_bool_is_refused_as_a_step(store_path):
    run = reslog.init(store=store_path, system=False)
    with pytest.raises(TypeError, match="step must be an int, got bool True"):
        run.log({"a": 1.0}, step=True)
    run.log({"a": 1.0}, step=5)
    run.finish()
    assert read_run(store_path)[1]["a"] == [(5, 1.0)]


def test_steps_logged_backwards_give_one_last_step_in_show_ls_and_export(store_path, capsys):
    from reslog.tools.cli import main

    run = reslog.init(store=store_path, name="back", system=False)
    for step in range(0, 1001, 10):
        run.log({"train/loss": 1.0}, step=step)
    run.finish()
    again = reslog.init(store=store_path, resume=run.uid, system=False)
    again.log({"train/loss": 0.5}, step=900)  # a restart from an earlier checkpoint
    again.finish()
    assert main(["show", str(store_path), "back"]) == 0
    show = capsys.readouterr().out
    [row] = [line.split() for line in show.splitlines() if line.startswith("train/loss")]
    assert row[3] == "900" and row[4] == "0.5"
    assert main(["ls", str(store_path)]) == 0
    [row] = [line.split() for line in capsys.readouterr().out.splitlines() if "back" in line]
    assert row[4] == "900"
    assert main(["export", str(store_path), "--format", "csv"]) == 0
    rows = [line.split(",") for line in capsys.readouterr().out.splitlines()[1:]]
    assert max(int(r[3]) for r in rows) == 900 and rows[-1][3:6:2] == ["900", "0.5"]


@pytest.mark.integration
def test_store_open_failures_are_store_errors_with_the_right_verb(tmp_path):
    message = r"cannot create /etc/passwd/x\.db: /etc/passwd is a file, not a folder"
    with pytest.raises(reslog.StoreError, match=message):
        reslog.init(store="/etc/passwd/x.db", system=False)
    with pytest.raises(reslog.StoreError, match=r"cannot create /proc/x\.db"):
        reslog.init(store="/proc/x.db", system=False)
    # A store the process may read but not write: the run cannot be written (not "cannot read").
    store = tmp_path / "ro.db"
    reslog.init(store=store, system=False).finish()
    store.chmod(0o444)
    caps = "-dac_override,-dac_read_search"  # root ignores file modes unless these are dropped
    script = (
        "import reslog\n"
        "try:\n"
        f"    reslog.init(store={str(store)!r}, system=False)\n"
        "except reslog.StoreError as exc:\n"
        "    print(exc)\n"
    )
    prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]
    out = subprocess.run(
        [*(prefix if os.geteuid() == 0 else []), sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "cannot write a run into" in out.stdout and "readonly database" in out.stdout, out


def test_credentials_in_urls_and_key_names_never_reach_the_store(store_path):
    from reslog.training.hostinfo import command_line

    config = {
        "db": "postgresql+psycopg://trainer:hunter2@db.internal:5432/runs",
        "mirrors": ["https://bot:s3cret@hub.example/x", "https://hub.example/y"],
        "wandb_key": "0123abcd",
        "openai_key": "sk-xyz",
        "sort_key": "loss",  # a lookup key, not a credential
        "num_key_value_heads": 8,
    }
    run = reslog.init(store=store_path, system=False, config=config)
    run.finish()
    stored = read_run(store_path)[0].config
    assert stored == {
        "db": "postgresql+psycopg://trainer:<redacted>@db.internal:5432/runs",
        "mirrors": ["https://bot:<redacted>@hub.example/x", "https://hub.example/y"],
        "wandb_key": "<redacted>",
        "openai_key": "<redacted>",
        "sort_key": "loss",
        "num_key_value_heads": 8,
    }
    line = command_line(["train.py", "--store", "postgresql://me:pw@h/db", "--wandb-key", "k1"])
    assert line == "train.py --store 'postgresql://me:<redacted>@h/db' --wandb-key '<redacted>'"
