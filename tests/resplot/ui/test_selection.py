"""Which runs are plotted by default, and that the window says so: every store alike, the
newest project's runs up to 20, "showing 20 of 25 runs"; select all, none, invert."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.model import RunInfo, RunRef
from resplot.data.selection import default_selection
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration


def _info(uid: str, project: str, at: float) -> RunInfo:
    return RunInfo(RunRef("local", "/s.db", uid), project, uid, "finished", at, at)


def test_the_newest_projects_runs_newest_first_up_to_the_limit():
    runs = [_info(f"old{i}", "old", i) for i in range(5)]
    runs += [_info(f"new{i}", "new", 10 + i) for i in range(30)]
    chosen = default_selection(runs)
    assert len(chosen) == 20
    assert [r.uid for r in chosen[:2]] == ["new29", "new28"]
    assert all(r.uid.startswith("new") for r in chosen)


def _store(path, n: int, t0: float) -> None:
    engine = new_store(path)
    for i in range(n):
        loss = [(s, 3.0 + 0.01 * i + np.exp(-s / 30)) for s in range(0, 60, 3)]
        make_run(engine, name=f"{path.stem}{i}", points={"train/loss": loss}, created_at=t0 + i)
    engine.dispose()


def test_both_stores_runs_are_ticked_and_the_status_bar_says_how_many(qtbot, tmp_path):
    a, b = tmp_path / "alpha.db", tmp_path / "beta.db"
    _store(a, 15, BASE_TIME)  # older runs, loaded first
    _store(b, 10, BASE_TIME + 100)
    win = open_window(qtbot, [a, b], tmp_path / "settings.json", runs=25)
    ticked = {win.cache.run(r).name for r in win.state.ticked}
    assert len(ticked) == 20
    assert {f"beta{i}" for i in range(10)} <= ticked  # the second store's runs are not left out
    assert win.shown_label.text().startswith("showing 20 of 25 runs")
    assert "newest 20" in win.shown_label.text()

    before = win.redraw_count
    win.table.tick_visible("invert")
    settle(qtbot, win, before)
    assert len(win.state.ticked) == 5 and not win.state.auto_tick  # the user chose now
    assert win.shown_label.text() == "showing 5 of 25 runs"
    win.table.set_filter("beta")
    win.table.tick_visible("all")
    win.table.set_filter("")
    settle(qtbot, win)
    assert len(win.state.ticked) == 15
    win.table.tick_visible("none")
    settle(qtbot, win)
    assert win.state.ticked == []
    win.close()
