"""Notifications in the real window: a run's NaN loss said once (status bar: offscreen Qt has no
system tray), muting kept in the settings file, a muted run's end not said."""

from __future__ import annotations

import json

import pytest

import reslog
from resplot.ui import settings as settings_mod
from tests.fixtures.windows import open_window

pytestmark = pytest.mark.integration


def test_the_window_notifies_an_alert_once_and_keeps_mutes(qtbot, tmp_path, store_path):
    run = reslog.init(store=store_path, name="nan-run", system=False, flush_interval=0.1)
    for step in range(10):
        run.log({"train/loss": 4.0 - 0.1 * step}, step=step)
    settings_path = tmp_path / "settings.json"
    try:
        win = open_window(qtbot, [store_path], settings_path, runs=1)
        [ref] = [r.ref for r in win.cache.runs()]
        assert win.notifier.shown == []  # what was so at start is not news
        run.log({"train/loss": float("nan")}, step=10)
        qtbot.waitUntil(lambda: len(win.notifier.shown) == 1, timeout=30_000)
        [note] = win.notifier.shown
        assert (note.run, note.kind, note.title) == (ref, "nan", "nan-run: nan")
        assert "no system tray" in win.statusBar().currentMessage()
        win.set_notifications_muted(ref, "*", True)
        saved = json.loads(settings_path.read_text())
        assert saved["state"]["muted"] == [[ref.uid, "*"]]
        assert settings_mod.load(settings_path).state.muted == [[ref.uid, "*"]]
    finally:
        run.finish()
    qtbot.waitUntil(lambda: win.cache.run(ref).status == "finished", timeout=30_000)
    win._refresh_side()
    assert [n.kind for n in win.notifier.shown] == ["nan"]  # the end of a muted run
