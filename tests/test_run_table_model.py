"""The run table's model announces every change as Qt documents it: rows that come and go with
begin/endInsertRows and begin/endRemoveRows, a change of columns or order as a reset, tick boxes
and colours as dataChanged; never a bare layoutChanged (issue 21: one without
layoutAboutToBeChanged left the filter proxy stale persistent indexes, and the next click on a
row crashed the window). Checked on the model with Qt's own model tester attached, through the
sorting filter proxy and a view with a selection, as the window uses it.
"""

from __future__ import annotations

import pytest
from PyQt5.QtCore import QItemSelectionModel, Qt
from PyQt5.QtTest import QAbstractItemModelTester

from resplot.data.cache import SeriesCache
from resplot.data.model import RunInfo, RunRef
from resplot.data.state import ViewState
from resplot.ui.run_table import RunTable, RunTableModel

T0 = 1_700_000_000.0
# The model tester reports through Qt warnings: any warning fails a test (but the platform's
# notes about itself).
pytestmark = [
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("XDG_RUNTIME_DIR", "propagateSizeHints"),
]


def _run(n: int, **config) -> RunInfo:
    ref = RunRef("local", "/s.db", f"uid{n:03d}")
    return RunInfo(ref, "p", f"run-{n}", "running", T0 + n, T0 + n, config=config)


# Each "done" signal of a model, and the "about to" signal Qt requires before it.
PAIRS = {
    "layoutChanged": "layoutAboutToBeChanged",
    "modelReset": "modelAboutToBeReset",
    "rowsInserted": "rowsAboutToBeInserted",
    "rowsRemoved": "rowsAboutToBeRemoved",
}


class SignalLog:
    """Every structural signal of a model, in order."""

    def __init__(self, model) -> None:
        self.seen: list[str] = []
        for name in (*PAIRS, *PAIRS.values()):
            getattr(model, name).connect(lambda *_a, n=name: self.seen.append(n))

    def assert_paired(self) -> None:
        """Each "done" signal right after its own "about to" signal, never alone."""
        opened: list[str] = []
        for name in self.seen:
            if name in PAIRS:
                start = opened.pop() if opened else None
                assert start == PAIRS[name], f"{name} without its start: {self.seen}"
            else:
                opened.append(name)
        assert not opened, self.seen


@pytest.fixture
def table(qtbot):
    cache, state = SeriesCache(), ViewState()
    model = RunTableModel(cache, state)
    tester = QAbstractItemModelTester(model, QAbstractItemModelTester.FailureReportingMode.Warning)
    widget = RunTable(model)
    qtbot.addWidget(widget)
    widget.show()
    log = SignalLog(model)
    yield cache, state, model, widget, log
    del tester


def test_runs_arriving_are_inserted_and_keep_the_selection(table):
    cache, _state, model, widget, log = table
    cache.set_runs([_run(0, lr=1), _run(1, lr=2)])
    model.refresh({})
    widget.select(_run(1).ref)
    cache.set_runs([_run(2, lr=3)])  # a new run, same columns
    model.refresh({})
    assert "rowsInserted" in log.seen and [r.ref for r in model.runs][-1] == _run(2).ref
    assert widget.selected_refs() == [_run(1).ref]  # the selection stayed on its run
    log.assert_paired()


def test_ticks_and_colours_are_data_changes_not_layout_changes(table, qtbot):
    cache, state, model, widget, log = table
    cache.set_runs([_run(n, lr=n) for n in range(4)])
    model.refresh({})
    log.seen.clear()
    changed = []
    model.dataChanged.connect(lambda a, b, roles: changed.append((a.column(), b.column(), roles)))
    state.ticked = [_run(1).ref]
    state.assign_looks(state.ticked)
    model.looks_changed()
    assert changed == [(0, 0, [Qt.CheckStateRole, Qt.DecorationRole])]
    assert log.seen == []
    # A click on a row after it works (the crash of issue 21 was here).
    view = widget.view
    index = widget.proxy.index(2, 1)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(index).center())
    assert widget.selected_refs() == [model.runs[widget.proxy.mapToSource(index).row()].ref]


def test_a_sorted_and_filtered_view_follows_removals_and_resets(table):
    cache, _state, model, widget, log = table
    cache.set_runs([_run(n, lr=n % 2) for n in range(6)])
    model.refresh({})
    widget.view.sortByColumn(0, Qt.DescendingOrder)
    widget.set_filter("run")
    widget.view.selectionModel().select(
        widget.proxy.index(0, 0), QItemSelectionModel.Select | QItemSelectionModel.Rows
    )
    # A store dropped: its runs go (rows removed, the rest stay in place).
    cache.drop_store("local", "/s.db")
    cache.set_runs([_run(n, lr=n % 2) for n in (1, 3, 4)])
    model.refresh({})
    assert [r.name for r in model.runs] == ["run-1", "run-3", "run-4"]
    assert "rowsRemoved" in log.seen
    # Columns change (another config key differs): a reset.
    cache.set_runs([_run(7, lr=0, wd=0.1)])
    model.refresh({})
    assert "modelReset" in log.seen and "wd" in model.headers
    assert widget.proxy.rowCount() == 4
    log.assert_paired()


def test_the_window_pairs_its_signals_while_runs_arrive_and_ticks_change(qtbot, tmp_path):
    from resplot import settings as settings_mod
    from resplot.ui.window import MainWindow

    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.show()
    logs = [SignalLog(win.model), SignalLog(win.table.proxy)]
    for n in range(3):  # runs arrive while nothing is ticked by hand (the default selection)
        cache.set_runs([_run(n, lr=n)])
        win.on_runs_changed()
        win.redraw_now()
    assert win.state.auto_tick and len(win.state.ticked) == 3
    win.table.select(_run(1).ref)
    win.tick(_run(0).ref, False)
    win.set_run_color(_run(2).ref, "#123456")
    win.redraw_now()
    try:
        for log in logs:
            log.assert_paired()
    except AssertionError:
        # What the stale indexes would do next is crash the runner: detach the view first.
        win.table.view.setModel(None)
        raise
    view = win.table.view
    index = win.table.proxy.index(0, 1)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(index).center())
    assert len(win.table.selected_refs()) == 1
    win.close()
