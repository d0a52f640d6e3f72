"""Desktop notifications: once per onset, muted per run and kind, said in the status bar where
there is no system tray (offscreen Qt has none, so that is the path exercised here)."""

from __future__ import annotations

from PyQt5.QtWidgets import QWidget

from resplot.data.alerts import Alert
from resplot.data.model import RunInfo, RunRef
from resplot.ui.notify import ALL_KINDS, Notifier

A = RunRef("local", "/tmp/reslog.db", "a" * 32)
B = RunRef("local", "/tmp/reslog.db", "b" * 32)


def info(ref: RunRef, name: str, status: str) -> RunInfo:
    return RunInfo(ref, "p", name, status, 0.0, 1.0)


def stalled(ref: RunRef) -> Alert:
    return Alert(ref, "stalled", "warning", "stalled after step 7", 7, 1.0)


def test_each_alert_and_end_is_notified_once_per_onset(qtbot):
    parent = QWidget()
    qtbot.addWidget(parent)
    said: list[str] = []
    notifier = Notifier(parent, say=said.append)
    runs = [info(A, "alpha", "running"), info(B, "beta", "running")]
    assert notifier.update({A: [stalled(A)]}, runs) == []  # the baseline at start
    assert notifier.update({A: [stalled(A)]}, runs) == []  # still the same stall
    [note] = notifier.update({A: [stalled(A)], B: [stalled(B)]}, runs)
    assert (note.run, note.kind, note.title) == (B, "stalled", "beta: stalled")
    assert notifier.update({}, runs) == []  # both cleared: nothing to say
    [again] = notifier.update({A: [stalled(A)]}, runs)  # a new stall of alpha: a new onset
    assert again.run == A
    [end] = notifier.update({}, [info(A, "alpha", "finished"), info(B, "beta", "running")])
    assert (end.kind, end.title) == ("finished", "alpha finished")
    assert notifier.tray is None  # offscreen: no system tray, and the status bar says so once
    # The status bar says the kind once ("beta: stalled: stalled after step 7" was cut off
    # sooner in a narrow bar); a message that does not start with it keeps the title's.
    assert said[0].startswith("beta: stalled after step 7 (no system tray")
    assert [s for s in said if "no system tray" in s] == [said[0]]
    assert said[1:] == ["alpha: stalled after step 7", "alpha finished"]
    notifier.update({B: [Alert(B, "nan", "error", "train/loss is NaN at step 9", 9, 1.0)]}, runs)
    assert said[-1] == "beta: nan: train/loss is NaN at step 9"


def test_muting_per_run_and_kind(qtbot):
    parent = QWidget()
    qtbot.addWidget(parent)
    notifier = Notifier(parent, muted=[(A.uid, "stalled")])
    runs = [info(A, "alpha", "running"), info(B, "beta", "running")]
    notifier.update({}, runs)
    notes = notifier.update({A: [stalled(A)], B: [stalled(B)]}, runs)
    assert [n.run for n in notes] == [B]
    notifier.set_muted(B, ALL_KINDS, True)
    assert notifier.update({}, [info(A, "alpha", "failed"), info(B, "beta", "failed")]) == [
        notes[0].__class__(A, "failed", "alpha failed", "")
    ]
    notifier.set_muted(A, "stalled", False)
    assert not notifier.is_muted(A, "stalled") and notifier.is_muted(B, "nan")


def test_kinds_muted_under_their_earlier_names_stay_muted(qtbot):
    """Settings saved before the watch's and the viewer's kinds took one name each."""
    parent = QWidget()
    qtbot.addWidget(parent)
    saved = [(A.uid, "nan_loss"), (A.uid, "gpu_throttle"), (B.uid, "logged"), (B.uid, "quiet")]
    notifier = Notifier(parent, muted=saved)
    assert notifier.muted == {
        (A.uid, "nan"),
        (A.uid, "throttled"),
        (B.uid, "alert"),
        (B.uid, "quiet"),
    }
    assert notifier.is_muted(A, "nan") and not notifier.is_muted(B, "nan")
