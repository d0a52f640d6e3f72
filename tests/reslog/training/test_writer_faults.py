"""The writer under real faults: a locked store, a read-only store, a full disk, a full buffer.

Faults are real: another SQLite connection holding the write lock, file modes the writing
process cannot override (root's CAP_DAC_OVERRIDE is dropped with setpriv), and a file size
limit (RLIMIT_FSIZE) that makes writes fail with "database or disk is full".
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from pathlib import Path

import pytest

import reslog
from schema.store.sqlite_file import readonly_uri
from tests.fixtures.disks import small_disk  # noqa: F401 - a fixture
from tests.fixtures.logging_child import Child
from tests.fixtures.stored_points import point_count
from tests.reslog.test_reslog_api import read_run


def count_points(store: Path) -> int:
    with contextlib.closing(sqlite3.connect(readonly_uri(store), uri=True)) as conn:
        return point_count(conn)


def wait_for_points(store: Path, n: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    got = count_points(store)
    while got < n and time.monotonic() < deadline:
        time.sleep(0.05)
        got = count_points(store)
    return got


@contextlib.contextmanager
def write_lock(store: Path):
    """Another connection holding the store's write lock (as a second writer process would)."""
    conn = sqlite3.connect(store, isolation_level=None, timeout=30)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")
        conn.close()


def test_locked_store_keeps_data_in_memory_and_writes_it_after_release(store_path, recwarn):
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.1)
    run.log({"x": 0.0})
    assert wait_for_points(store_path, 1) == 1
    with write_lock(store_path):
        for i in range(1, 200):
            run.log({"x": float(i)})  # returns at once although the store is locked
        time.sleep(1.5)  # longer than the writer's busy timeout: it fails and retries
        assert count_points(store_path) == 1
    assert wait_for_points(store_path, 200) == 200
    assert run.finish() is True
    assert not [w for w in recwarn if "reslog" in str(w.message)]
    _, series, _ = read_run(store_path)
    assert series["x"] == [(i, float(i)) for i in range(200)]


@pytest.mark.slow
def test_a_store_locked_by_another_writer_is_queued_for_not_shrunk_or_warned(store_path, recwarn):
    """A lock another process holds past the writer's busy timeout is contention between
    writers, not a fault: the writer asks again at once (it used to back off exponentially, up
    to 30 s, losing its turn under 16 writers until it warned "database is locked"), and keeps
    its transaction size (halving is for a disk too full for a big one)."""
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.1)
    writer = run._writer
    run.log({"x": 0.0})
    assert wait_for_points(store_path, 1) == 1
    size = writer.chunk_points
    with write_lock(store_path):
        for i in range(1, 200):
            run.log({"x": float(i)})
        deadline = time.monotonic() + 60
        while writer.lock_waits < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer.lock_waits >= 4
        assert writer.chunk_points == size
        assert count_points(store_path) == 1
    assert wait_for_points(store_path, 200) == 200
    assert run.finish() is True
    assert not [w for w in recwarn if "reslog" in str(w.message)]


def test_finish_gives_up_at_its_time_limit_and_the_data_still_lands_later(store_path):
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.1)
    with write_lock(store_path):
        run.log({"x": 1.0})
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="gave up after 1 s; 1 points"):
            assert run.finish(timeout=1.0) is False
        assert time.monotonic() - t0 < 20  # bounded; generous for a loaded machine
    # the writer keeps trying while the process lives: once the lock is gone, it all arrives
    assert wait_for_points(store_path, 1) == 1
    deadline = time.monotonic() + 30
    while read_run(store_path)[0].status != "finished" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_run(store_path)[0].status == "finished"


def test_buffer_overflow_drops_are_counted_and_recorded_as_an_event(store_path):
    run = reslog.init(
        project="p", store=store_path, system=False, flush_interval=0.1, max_buffer_points=100
    )
    with write_lock(store_path):
        for i in range(50):
            run.log({"a": 1.0, "b": 2.0, "c": 3.0, "d": float(i)})
        assert run._writer.dropped == 100
    run.finish()
    _, series, events = read_run(store_path)
    assert sum(len(v) for v in series.values()) == 100
    assert series["d"] == [(i, float(i)) for i in range(25)]
    [drop] = [e for e in events if e.kind == "drop"]
    assert drop.level == "warning" and drop.title.startswith("100 points dropped")


@pytest.mark.slow
def test_read_only_store_warns_once_and_recovers_when_writable_again(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    store = folder / "reslog.db"
    child = Child(store, obey_file_modes=True)
    try:
        child.send("log 100")
        assert wait_for_points(store, 200) == 200
        with write_lock(store):
            child.send("log 100")
            files = [store, *folder.glob("reslog.db-*")]
            for f in files:
                f.chmod(0o444)
            folder.chmod(0o555)
            # Past the writer's busy timeout (1 s) plus backoff: the connection it had open
            # before the chmod fails on the lock and is dropped; its next one is read-only.
            time.sleep(3.0)
        time.sleep(1.5)
        assert count_points(store) == 200
        folder.chmod(0o755)
        for f in files:
            f.chmod(0o644)
        assert wait_for_points(store, 400) == 400
        last, stderr = child.finish()
    finally:
        folder.chmod(0o755)
        if child.proc.poll() is None:
            child.proc.kill()
    assert last.split()[1] == "True"
    warnings = [line for line in stderr.splitlines() if "reslog: cannot write" in line]
    assert len(warnings) == 1, stderr
    assert read_run(store)[0].status == "finished"


@pytest.mark.slow
def test_full_disk_warns_once_and_recovers_when_space_returns(tmp_path):
    store = tmp_path / "reslog.db"
    child = Child(store, obey_file_modes=True)
    try:
        child.send("log 10")
        assert wait_for_points(store, 20) == 20
        biggest = max(f.stat().st_size for f in tmp_path.glob("reslog.db*"))
        child.send(f"limit {biggest}")  # no file may grow any more: "disk full" for SQLite
        child.send("log 20000")
        time.sleep(1.0)
        assert count_points(store) < 40020
        child.send("unlimit")
        assert wait_for_points(store, 40020) == 40020
        last, stderr = child.finish()
    finally:
        if child.proc.poll() is None:
            child.proc.kill()
    assert last.split()[1] == "True"
    warnings = [line for line in stderr.splitlines() if "reslog: cannot write" in line]
    assert len(warnings) == 1, stderr
    assert "full" in warnings[0] or "I/O" in warnings[0]


def test_a_full_disk_is_retried_on_its_backoff_and_the_backlog_lands_in_what_is_freed(
    small_disk,  # noqa: F811 - the fixture
):
    """A full tmpfs: with more than wake_points waiting, every log() used to wake the writer
    (18 tries a second, a core); and 100,000-point transactions never fitted into the few MiB
    freed later, so nothing landed and the run read `crashed`."""
    store = small_disk.root / "reslog.db"
    run = reslog.init(project="p", store=store, system=False, flush_interval=0.1)
    writer = run._writer
    run.log({"a": 0.0, "b": 0.0})
    assert wait_for_points(store, 2) == 2
    small_disk.fill()
    for i in range(60_000):  # 120,000 points waiting: more than wake_points
        run.log({"a": float(i), "b": 1.0})
    deadline = time.monotonic() + 30
    while writer.failures == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    before, t0 = writer.failures, time.monotonic()
    while time.monotonic() - t0 < 3.0:  # a training loop going on: each log() asks for a flush
        run.log({"a": 1.0, "b": 2.0})
        time.sleep(0.001)
    tries, spent = writer.failures - before, time.monotonic() - t0
    # Backoff from 0.2 s doubling: 4 tries in 3 s; never more than log2(spent / 0.1) + 2.
    assert tries <= math.log2(spent / 0.1) + 2, (tries, spent)
    landed = writer.committed
    small_disk.release(4)
    deadline = time.monotonic() + 120
    while writer.committed < landed + 20_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writer.committed >= landed + 20_000  # in pieces the freed space could take
    ok = run.finish(timeout=5)
    meta, _series, events = read_run(store)
    assert meta.status == "finished"  # not left "running", to be read as crashed
    if not ok:
        [lost] = [e for e in events if "not yet written when the run ended" in e.title]
        assert int(lost.title.split()[0]) == writer.pending_points()
    # The writer goes on trying while the process lives: let it end here, before the disk is
    # unmounted, instead of restoring the store into the bare folder during a later test.
    small_disk.release(len(small_disk.fillers))
    writer._thread.join(60)
    assert not writer._thread.is_alive()
