"""A job's ranks read back from real stores (reslog/tools/jobs.py, `reslog watch`, `reslog show`):
two "hosts" as two SQLite files written by real reslog runs, joined by job id."""

from __future__ import annotations

import contextlib
import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

import reslog
from reslog.tools.jobs import JobWatch, Store, last_step
from reslog.tools.watch import StoresWatcher, Watcher, watch
from reslog.training import hostinfo
from schema.store import read
from schema.store.connect import open_store
from schema.store.tables import events, runs
from tests.fixtures.logging_child import ROOT
from tests.reslog.training.test_run_health import wait_until
from tests.schema.test_rank_rules import (
    WAITING_IN_BACKWARD,
    blocked_here,
    stack_of_a_thread_blocked_in,
)

HOSTS = {0: "gpu-a", 1: "gpu-a", 2: "gpu-b", 3: "gpu-b"}


def phases(rng: random.Random, slow: float = 0.0) -> dict[str, float]:
    own = {
        "time/data": rng.uniform(0.001, 0.003) + slow,
        "time/forward": rng.gauss(0.03, 0.002),
        "time/backward": rng.gauss(0.05, 0.003),
        "time/optimizer": rng.gauss(0.01, 0.001),
    }
    return own


def open_job(tmp_path: Path, monkeypatch, group: str = "job-1") -> dict[int, reslog.Run]:
    """Ranks 0, 1 logging into host a's store, ranks 2, 3 into host b's, as four real runs."""
    out = {}
    for rank, host in HOSTS.items():
        monkeypatch.setattr(hostinfo, "host", lambda host=host: host)
        out[rank] = reslog.init(
            project="p",
            name=f"j-rank{rank}",
            store=tmp_path / f"{host}.db",
            rank=rank,
            world_size=4,
            group=group,
            system=False,
            flush_interval=0.1,
        )
    return out


def log_steps(job: dict[int, reslog.Run], first: int, last: int, slow=None, seed=0) -> None:
    """Steps first..last on every rank, lockstep: the others wait out a slow rank in comm."""
    rng = random.Random(seed)
    for step in range(first, last + 1):
        own = {
            r: phases(rng, slow[1] if slow and r == slow[0] and slow[2] <= step <= slow[3] else 0)
            for r in job
        }
        done = max(sum(p.values()) for p in own.values())
        for r, run in job.items():
            row = dict(own[r], **{"time/comm": done - sum(own[r].values())})
            row["time/step"] = sum(row.values())
            run.log(row, step=step)


@contextlib.contextmanager
def stores(tmp_path: Path):
    engines = {h: open_store(str(tmp_path / f"{h}.db"), readonly=True) for h in ("gpu-a", "gpu-b")}
    try:
        yield engines
    finally:
        for e in engines.values():
            e.dispose()


def poll(watch: JobWatch, engines) -> list:
    with contextlib.ExitStack() as stack:
        got = []
        for label, engine in engines.items():
            conn = stack.enter_context(engine.connect())
            got.append(Store(conn, label, dict(read.list_runs(conn, store=label))))
        return watch.poll(got)


def stored_to(engines) -> set[int]:
    """The newest step of each rank's run stored in the engines' stores."""
    newest = set()
    for engine in engines.values():
        with engine.connect() as conn:
            for run_id, _ in read.list_runs(conn):
                newest.add(last_step(conn, run_id))
    return newest


def test_a_straggler_is_named_across_two_stores_joined_by_job_id(tmp_path, monkeypatch):
    job = open_job(tmp_path, monkeypatch)
    watch = JobWatch()
    try:
        log_steps(job, 1, 30)
        with stores(tmp_path) as engines:
            # The baseline, once every rank's step 30 is stored: a healthy start, nothing said.
            assert wait_until(lambda: stored_to(engines) == {30}, timeout=60)
            assert poll(watch, engines) == []
        log_steps(job, 31, 160, slow=(2, 0.2, 60, 109))
    finally:
        for run in job.values():
            run.finish()
    with stores(tmp_path) as engines:
        notices = poll(watch, engines)
    said = [(n.kind, n.run.rank, n.run.host, n.message) for n in notices]
    assert [s[:3] for s in said] == [("straggler", 2, "gpu-b"), ("straggler_end", 2, "gpu-b")]
    assert said[0][3].startswith("rank 2 on gpu-b: data +")
    assert "from step 60" in said[0][3] and "the other ranks wait" in said[0][3]
    assert (
        said[1][3].startswith("recovered: rank 2 on gpu-b: data +") and "to step 10" in said[1][3]
    )


def stall(engine_path: Path, run_uid: str, body: str, wall: float = 1000.0) -> None:
    """The stall a rank's writer records (reslog/training/stall.py): the stalled flag on its run
    row and a warning event with its threads' stacks."""
    engine = open_store(str(engine_path))
    try:
        with engine.begin() as conn:
            run_id = conn.execute(runs.select().where(runs.c.uid == run_uid)).first().id
            conn.execute(update(runs).where(runs.c.id == run_id).values(stalled_since=wall))
            conn.execute(
                events.insert().values(
                    run_id=run_id,
                    wall=wall,
                    kind="stall",
                    level="warning",
                    title="stalled: no step logged for 3 s (stall_after 3 s)",
                    body=body,
                )
            )
    finally:
        engine.dispose()


def test_a_hang_is_joined_across_two_stores_and_said_once_by_reslog_watch(tmp_path, monkeypatch):
    job = open_job(tmp_path, monkeypatch, group="job-2")
    log_steps(job, 1, 41)
    # Host b's telemetry as NVML reports a GPU spinning in NCCL (a stand-in: no GPU here).
    job[2].log({"sys/gpu0/util": 100.0, "sys/gpu0/power_w": 82.0, "sys/gpu0/power_limit_w": 700.0})
    with stores(tmp_path) as engines:
        assert wait_until(lambda: stored_to(engines) == {41, 42}, timeout=60)
    watcher = StoresWatcher(
        [
            Watcher(open_store(str(tmp_path / f"{h}.db"), readonly=True), h)
            for h in ("gpu-a", "gpu-b")
        ]
    )
    try:
        watcher.poll()
        blocked = stack_of_a_thread_blocked_in(blocked_here)
        for rank in (0, 2, 3):
            stall(tmp_path / f"{HOSTS[rank]}.db", job[rank].uid, WAITING_IN_BACKWARD)
        assert [n for n in watcher.poll() if n.status == "hang"] == []  # rank 1: not yet
        stall(tmp_path / "gpu-a.db", job[1].uid, blocked)
        hang = [n for n in watcher.poll() if n.status == "hang"]
        assert len(hang) == 1 and hang[0].run.rank == 1 and hang[0].run.host == "gpu-a"
        line = hang[0].line()
        assert "HANG" in line and "ranks 0, 2, 3 wait in backward" in line
        assert "rank 1 on gpu-a never entered it: stuck at" in line and "blocked_here" in line
        assert "gpu-b GPU 0: 100 % busy at 82 W of 700 W, the signature of a GPU spinning" in line
        assert [n for n in watcher.poll() if n.status == "hang"] == []  # said once
        # A watch started while the job hangs says so in its first poll, and only that.
        late = StoresWatcher([Watcher(w.engine, w.label) for w in watcher.watchers])
        assert [(n.status, n.run.rank) for n in late.poll()] == [("hang", 1)]
        assert late.poll() == []
    finally:
        for w in watcher.watchers:
            w.engine.dispose()
        for run in job.values():
            run.finish()


@pytest.mark.integration
def test_reslog_show_names_the_job_ranks_stragglers_and_hang(tmp_path, monkeypatch):
    job = open_job(tmp_path, monkeypatch, group="job-3")
    try:
        log_steps(job, 1, 120, slow=(3, 0.15, 30, 120))
    finally:
        for run in job.values():
            run.finish()
    out = subprocess.run(
        [sys.executable, "-m", "reslog.tools.cli", "show", str(tmp_path / "gpu-b.db"), "j-rank3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "job       job-3: 2 of 4 ranks in this store (ranks 0, 1 elsewhere)" in text
    assert "rank 3 on gpu-b: data +" in text and "from step 30" in text
    # The ranks table: both of this store's ranks, with their mean phases.
    table = [ln.split() for ln in text.splitlines() if "gpu-b  finished" in ln]
    assert [row[:4] for row in table] == [
        ["2", "gpu-b", "finished", "120"],
        ["3", "gpu-b", "finished", "120"],
    ]
    assert "stragglers:" in text and "hang" not in text


@pytest.fixture(autouse=True)
def _no_current_run():
    yield
    with contextlib.suppress(Exception):
        reslog.finish()


def test_under_torchrun_a_new_run_joins_its_job_and_a_resume_keeps_its_group(tmp_path, monkeypatch):
    store = tmp_path / "r.db"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun without --rdzv-id: no job id
    first = reslog.init(store=store, name="a", system=False)
    first.finish()
    assert first.group == ""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "5f1c2e")
    run = reslog.init(store=store, name="b", rank=1, world_size=2, system=False)
    assert run.group == "5f1c2e"
    run.finish()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "a-later-launch")
    again = reslog.init(store=store, resume=run.uid, system=False)
    assert again.group == "5f1c2e"  # the job it was part of
    again.finish()
    own = reslog.init(store=store, name="c", group="mine", system=False)
    own.finish()
    assert own.group == "mine"


def test_a_watch_started_mid_slowdown_names_the_straggler_first(tmp_path, monkeypatch):
    # Rank 2 is slow in data from step 40 to 129; the watch starts at step 80, mid-slowdown.
    job = open_job(tmp_path, monkeypatch, group="job-3")
    slow = (2, 0.2, 40, 129)
    try:
        log_steps(job, 1, 80, slow=slow)
        with stores(tmp_path) as engines:
            assert wait_until(lambda: stored_to(engines) == {80}, timeout=60)
            out = io.StringIO()
            watch(
                engines["gpu-a"],
                "gpu-a",
                out=out,
                should_stop=lambda: True,
                more=[(engines["gpu-b"], "gpu-b")],
            )
            lines = out.getvalue().splitlines()
            assert lines[0].startswith("watching gpu-a, gpu-b: 4 runs, 4 live")
            assert len(lines) == 2 and "j-rank2" in lines[1] and "  STRAGGLER  " in lines[1]
            assert "ongoing when the watch started: rank 2 on gpu-b: data +" in lines[1]
            # The same through JobWatch, then the recovery: STRAGGLER before STRAGGLER_END.
            watch_ = JobWatch()
            first = poll(watch_, engines)
        log_steps(job, 81, 200, slow=slow, seed=1)
    finally:
        for run in job.values():
            run.finish()
    with stores(tmp_path) as engines:
        later = poll(watch_, engines)
    assert [(n.kind, n.run.rank) for n in first] == [("straggler", 2)]
    assert [(n.kind, n.run.rank) for n in later] == [("straggler_end", 2)]
    assert "to step 129" in later[0].message


def test_phase_rows_page_by_whole_steps_and_the_baseline_counts_back(tmp_path):
    """Phase points come from the run's chunks, a step at a time: a page cut by `limit` leaves
    the cut step for the next read, and the cursors walk every step exactly once."""
    from reslog.tools.jobs import baseline_cursor, phase_rows

    run = reslog.init(project="p", store=tmp_path / "r.db", system=False)
    for s in range(50):
        run.log({"time/step": 0.1 + s, "time/forward": 0.01 * s, "train/loss": 1.0}, step=s)
    run.finish()
    engine = open_store(tmp_path / "r.db")
    with engine.connect() as conn:
        run_id = read.find_run(conn, run.uid)[0]
        phase_keys = Store(conn, "s", {}).phase_keys
        assert sorted(phase_keys.values()) == ["forward", "step"]
        seen, after = [], -1
        while True:
            page, after = phase_rows(conn, run_id, phase_keys, after, limit=7)
            if not page:
                break
            assert len(page) <= 3  # 7 points: 3 whole steps, the 4th is cut
            seen += page
        assert [s for s, _ in seen] == list(range(50))
        assert all(p == {"step": 0.1 + s, "forward": 0.01 * s} for s, p in seen)
        assert baseline_cursor(conn, run_id, phase_keys, 10) == 39
        assert baseline_cursor(conn, run_id, phase_keys, 50) == -1
    engine.dispose()
