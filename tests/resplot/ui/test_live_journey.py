"""The live journey end to end: the real window and Poller watch a real logging process that is
killed with SIGKILL, turns "crashed", is resumed from an earlier step and finishes.

Every collaborator is real: the training process is a Python subprocess logging through reslog
into a SQLite file, the window reads it through the Poller's agent subprocess, Qt is offscreen.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PyQt5.QtCore import Qt

from reslog.tools.export import load_runs, write_points
from resplot.data.cache import SeriesCache
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow, make_poller
from schema import open_store
from schema.store import status
from schema.store.reader import StoreReader
from tests.fixtures.stored_points import all_points

pytestmark = pytest.mark.integration

FLUSH_S = 0.2  # also the run's heartbeat interval (runs.heartbeat_interval)
POLL_S = 0.2
WAIT_MS = 30_000

# A training loop in miniature: one loss value per step, uid on stdout once the run exists.
# The resumed process starts over at `start` (as a trainer resuming from an older checkpoint
# does), so it re-logs steps the crashed process had already logged, with different values.
CHILD = textwrap.dedent(
    """
    import sys, time, reslog
    store, resume, start, steps, offset = sys.argv[1:6]
    run = reslog.init(project="journey", name="live", store=store, system=False,
                      flush_interval=FLUSH, resume=resume or None)
    print(run.uid, flush=True)
    step = int(start) if start else run.step
    end = step + int(steps) if int(steps) else None
    while end is None or step < end:
        run.log({"train/loss": float(offset) + step}, step=step)
        step += 1
        time.sleep(0.01)
    run.finish()
    """
).replace("FLUSH", repr(FLUSH_S))


def start_child(store, resume="", start="", steps=0, offset=0.0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), resume, str(start), str(steps), str(offset)],
        stdout=subprocess.PIPE,
        text=True,
    )
    uid = proc.stdout.readline().strip()
    assert uid, f"the logging process exited early (rc {proc.poll()})"
    return proc, uid


def stored_loss(store) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of train/loss straight from the store, in arrival (id) order."""
    engine = open_store(store, readonly=True)
    with engine.connect() as conn:
        rows = [(r[3], r[5]) for r in all_points(conn)]
    engine.dispose()
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


@pytest.fixture
def live_window(qtbot, tmp_path, monkeypatch):
    # A run turns "crashed" after max(30 s, 10 heartbeat intervals) without a heartbeat; the
    # 30 s floor guards real runs against slow flushes. Lowered here so the journey takes
    # seconds: 10 x 0.2 s = 2 s. The reader derives the status in this process.
    monkeypatch.setattr(status, "STALE_AFTER_MIN_S", 0.5)
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.state.set_poll_interval(POLL_S)
    win.show()
    win.attach_poller(make_poller(cache, POLL_S, win.ask_host_key))
    yield win
    win.close()


def test_watch_crash_resume_and_finish(qtbot, live_window, store_path, tmp_path):
    win = live_window
    store_path.parent.mkdir(parents=True)
    proc, uid = start_child(store_path)
    try:
        win.add_source(str(store_path))

        # (3) The run appears, "running", and its line grows.
        qtbot.waitUntil(lambda: [r.ref.uid for r in win.cache.runs()] == [uid], timeout=WAIT_MS)
        ref = win.cache.runs()[0].ref
        win.tick(ref, True)

        def loss_line():
            return win.current_page().lines().get(("Loss", ref, "train/loss"))

        def loss_x():  # empty while there is no loss line: a restart drops it until re-read
            line = loss_line()
            return [] if line is None else line.get_xdata()

        def loss_view():  # what the chart drew: raw points here (a short run)
            page = win.current_page()
            for tracks in page.tracks:
                for item, track in tracks.items():
                    if item.ref == ref and item.key == "train/loss":
                        return track.view
            return None

        def row_status() -> str:
            return win.model.data(
                win.model.index_of(ref, win.model.headers.index("status")), Qt.DisplayRole
            )

        def tree_status() -> str:
            return win.tree.run_item(ref).text(1)

        qtbot.waitUntil(lambda: loss_line() is not None, timeout=WAIT_MS)
        assert row_status() == "running" and tree_status() == "running"
        first = len(loss_line().get_xdata())
        qtbot.waitUntil(lambda: len(loss_line().get_xdata()) > first + 20, timeout=WAIT_MS)

        # (4) SIGKILL: no exit path runs, the heartbeat goes stale.
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    qtbot.waitUntil(lambda: row_status() == "crashed", timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tree_status() == "crashed", timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: any(a.kind == "crashed" for a in win.alerts.get(ref, [])), timeout=WAIT_MS
    )
    assert "live" in win.alert_label.text()  # the status bar names the run
    # Nothing flushed before the kill is lost: the window holds exactly what the store holds.
    crashed_steps, crashed_values = stored_loss(store_path)
    assert len(crashed_steps) > 20
    assert crashed_steps.tolist() == list(range(len(crashed_steps)))
    qtbot.waitUntil(
        lambda: (
            win.cache.summary(ref, "train/loss").agg[0] == len(crashed_steps)
            and loss_view() is not None
            and loss_view().steps.tolist() == crashed_steps.tolist()
        ),
        timeout=WAIT_MS,
    )
    last = int(crashed_steps[-1])

    # (5) Resume from an older "checkpoint": steps last-9 .. last are logged a second time.
    restart = last - 9
    proc, uid2 = start_child(store_path, resume=uid, start=restart, steps=40, offset=1000.0)
    try:
        assert uid2 == uid
        qtbot.waitUntil(lambda: row_status() == "running", timeout=WAIT_MS)
        assert tree_status() == "running"
        qtbot.waitUntil(
            lambda: any(ev.kind == "resume" for ev in win.cache.events(ref)), timeout=WAIT_MS
        )
        # (6) The process finishes by itself.
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    qtbot.waitUntil(lambda: row_status() == "finished", timeout=WAIT_MS)
    assert tree_status() == "finished"
    end = restart + 40
    # The restart drops the series' summary and tiles; they are read again, the newer take.
    qtbot.waitUntil(
        lambda: len(loss_x()) > 0 and int(loss_x()[-1]) == end - 1,
        timeout=WAIT_MS,
    )
    assert not win.alerts.get(ref)  # the crashed alert is gone with the finished status

    # The store keeps both takes of the overlapping steps (nothing is ever deleted) ...
    all_steps, _ = stored_loss(store_path)
    assert len(all_steps) == len(crashed_steps) + 40
    # ... and the window shows the newer take: one point per step, the resumed values from
    # the restart on, no line running back over the abandoned steps.
    qtbot.waitUntil(lambda: loss_view().steps.tolist() == list(range(end)), timeout=WAIT_MS)
    view = loss_view()
    assert view.level == 0 and view.complete
    steps, values = view.steps, view.values
    assert steps.tolist() == list(range(end))
    assert values[:restart].tolist() == crashed_values[:restart].tolist()
    assert values[restart:].tolist() == [1000.0 + s for s in range(restart, end)]
    x = loss_line().get_xdata()
    assert np.all(np.diff(x) > 0)
    resume_events = [ev for ev in win.cache.events(ref) if ev.kind == "resume"]
    assert len(resume_events) == 1 and resume_events[0].step == last + 1
    markers = win.current_page()._events  # each chart's event lines
    assert any(c.xs("resume").tolist() == [last + 1] for c in markers)

    # Exports agree with the chart: from the window's cache and from the raw store.
    win.export_points(tmp_path / "window.csv", "csv").wait()
    engine = open_store(store_path, readonly=True)
    (data,) = load_runs(StoreReader(engine), [uid])
    write_points([data], tmp_path / "store.csv", "csv")
    engine.dispose()
    for name in ("window.csv", "store.csv"):
        with open(tmp_path / name, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["key"] == "train/loss"]
        assert [int(r["step"]) for r in rows] == list(range(end)), name
        assert [float(r["value"]) for r in rows] == values.tolist(), name
