"""The run table's model announces every change as Qt documents it: rows that come and go with
begin/endInsertRows and begin/endRemoveRows, a change of columns or order as a reset, tick boxes
and colours as dataChanged; never a bare layoutChanged (issue 21: one without
layoutAboutToBeChanged left the filter proxy stale persistent indexes, and the next click on a
row crashed the window). Checked on the model with Qt's own model tester attached, through the
sorting filter proxy and a view with a selection, as the window uses it.
"""

from __future__ import annotations

import dataclasses

import pytest
from PyQt5.QtCore import QItemSelectionModel, Qt
from PyQt5.QtTest import QAbstractItemModelTester

from resplot.data.alerts import Alert
from resplot.data.cache import SeriesCache
from resplot.data.model import RunInfo, RunRef
from resplot.data.state import ViewState
from resplot.ui.run_table import RunTable
from resplot.ui.run_table_model import RunTableModel

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
    assert widget.selected_refs() == [widget.ref_at(index)]


def test_a_refresh_announces_only_the_cells_that_changed(table):
    """A poll refreshes the table: announcing every row made the view read every cell again
    and fit its columns to them each time, and a change of more than one cell makes Qt's view
    repaint its whole viewport. Only a cell that shows something new is announced, one at a
    time; a row whose run's alerts changed (a quiet run's alert says for how long: new each
    poll), its alerts cell (its colour; tooltips are read when shown)."""
    cache, _state, model, _widget, log = table
    runs = [_run(n, lr=n) for n in range(5)]
    cache.set_runs(runs)
    model.refresh({}, now=T0 + 100)
    changed: list[tuple[int, int, int, int]] = []
    model.dataChanged.connect(
        lambda a, b, _roles=None: changed.append((a.row(), b.row(), a.column(), b.column()))
    )
    model.refresh({}, now=T0 + 100)
    assert changed == []  # nothing new: nothing announced
    cache.set_runs([dataclasses.replace(runs[3], status="finished")])
    model.refresh({}, now=T0 + 100)
    row = [r.ref for r in model.runs].index(runs[3].ref)
    status = model.headers.index("status")
    assert changed == [(row, row, status, status)]
    assert model.data(model.index(row, status)) == "finished"
    alerted = [r.ref for r in model.runs].index(runs[0].ref)
    column = model.headers.index("alerts")
    for seconds in (60, 61):
        changed.clear()
        alert = Alert(runs[0].ref, "quiet", "warning", f"no new step for {seconds} s")
        model.refresh({runs[0].ref: [alert]}, now=T0 + 100)
        assert changed == [(alerted, alerted, column, column)]  # its colour, its text
        alerts = model.index(alerted, column)
        assert model.data(alerts, Qt.ToolTipRole) == f"[warning] no new step for {seconds} s"
    log.assert_paired()


def test_a_live_row_repaints_its_changed_cells_not_the_table(table, qtbot):
    """The view paints only the cells a refresh announced (a poll's live rows), not the whole
    viewport as it does for a change of several cells at once."""
    from PyQt5.QtCore import QEvent, QObject, QRect

    cache, _state, model, widget, _log = table
    widget.resize(900, 400)
    runs = [_run(n, lr=n) for n in range(8)]
    cache.set_runs(runs)
    model.refresh({}, now=T0 + 100)
    qtbot.wait(50)  # its first paint
    painted: list[QRect] = []

    class Paints(QObject):
        def eventFilter(self, _obj, event) -> bool:
            if event.type() == QEvent.Paint:
                painted.append(event.region().boundingRect())
            return False

    viewport = widget.view.viewport()
    spy = Paints()
    viewport.installEventFilter(spy)
    cache.set_runs([dataclasses.replace(runs[2], status="crashed")])
    model.refresh({}, now=T0 + 100)
    qtbot.waitUntil(lambda: bool(painted))
    viewport.removeEventFilter(spy)
    row = [r.ref for r in model.runs].index(runs[2].ref)
    cell = widget.view.visualRect(
        widget.proxy.mapFromSource(model.index(row, model.headers.index("status")))
    )
    assert painted and all(cell.contains(rect) for rect in painted), (cell, painted)


def test_a_change_in_the_first_row_repaints_its_cell_without_measuring_the_row(
    table, qtbot, monkeypatch
):
    """A live run shown on top: QTreeView measured its whole row again (a size hint a column)
    at each changed cell there, half the table's cost a poll. Every row is a line high
    (CompactDelegate), so the cell is repainted with its new value and nothing is measured."""
    from resplot.ui import run_table

    cache, _state, model, widget, _log = table
    widget.resize(900, 400)
    runs = [_run(n, lr=n) for n in range(8)]
    cache.set_runs(runs)
    model.refresh({}, now=T0 + 100)
    qtbot.wait(50)
    top = widget.proxy.index(0, model.headers.index("status"))
    run = next(r for r in runs if r.ref == model.ref_at(widget.proxy.mapToSource(top)))
    viewport = widget.view.viewport()
    cell = widget.view.visualRect(top)
    before = viewport.grab(cell).toImage()
    measured = []
    hint = run_table.CompactDelegate.sizeHint
    monkeypatch.setattr(
        run_table.CompactDelegate,
        "sizeHint",
        lambda self, option, index: measured.append(index.row()) or hint(self, option, index),
    )
    cache.set_runs([dataclasses.replace(run, status="crashed")])
    model.refresh({}, now=T0 + 100)
    qtbot.wait(50)
    shown = viewport.grab(cell).toImage()
    assert measured == []
    assert shown != before  # the new status painted
    viewport.update()  # the whole viewport painted again: the same cell
    qtbot.wait(50)
    assert viewport.grab(cell).toImage() == shown


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


@pytest.mark.integration
def test_the_window_pairs_its_signals_while_runs_arrive_and_ticks_change(qtbot, tmp_path):
    from resplot.ui import settings as settings_mod
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


def _rank(rank: int, status: str = "running", group: str = "job-1") -> RunInfo:
    ref = RunRef("gpu-a" if rank < 2 else "gpu-b", f"/{rank // 2}.db", f"rank{rank:03d}")
    return RunInfo(
        ref,
        "p",
        f"ddp-rank{rank}",
        status,
        T0 + 10 + rank,
        T0 + 10 + rank,
        host="gpu-a" if rank < 2 else "gpu-b",
        rank=rank,
        world_size=4,
        group=group,
        config={"lr": 1},
    )


def _tree(model, parent=None, depth=0) -> list[tuple[int, str]]:
    """(depth, the run column's text) of every row, depth first."""
    from PyQt5.QtCore import QModelIndex

    parent = parent if parent is not None else QModelIndex()
    out = []
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        out.append((depth, model.data(index)))
        out += _tree(model, index, depth + 1)
    return out


def test_a_jobs_runs_are_one_row_that_unfolds_into_hosts_and_ranks(table, qtbot):
    cache, state, model, widget, log = table
    cache.set_runs([_run(0, lr=1), _rank(0), _rank(1), _run(1, lr=2), _rank(2), _rank(3)])
    model.refresh({})
    assert _tree(model) == [
        (0, "run-0"),
        (0, "run-1"),
        (0, "ddp (4 ranks, 2 hosts)"),  # where the job's first run comes in the cache's order
        (1, "gpu-a · ranks 0, 1"),
        (2, "ddp-rank0"),
        (2, "ddp-rank1"),
        (1, "gpu-b · ranks 2, 3"),
        (2, "ddp-rank2"),
        (2, "ddp-rank3"),
    ]
    job = model.index(2, 0)
    status = model.headers.index("status")
    assert model.data(model.index(2, status)) == "running"
    # The job's tick box ticks every rank's run; one untick leaves it partly ticked.
    ticked = []
    model.tickedChanged.connect(lambda ref, on: ticked.append((ref, on)))
    assert model.setData(job, Qt.Checked, Qt.CheckStateRole)
    assert sorted(r for r, on in ticked if on) == [_rank(r).ref for r in range(4)]
    assert model.data(job, Qt.CheckStateRole) == Qt.Checked
    model.set_ticked(_rank(3).ref, False)
    assert model.data(job, Qt.CheckStateRole) == Qt.PartiallyChecked
    host_b = model.index(1, 0, job)
    assert model.data(host_b, Qt.CheckStateRole) == Qt.PartiallyChecked
    assert model.data(model.index(0, 0, job), Qt.CheckStateRole) == Qt.Checked
    # Colours per run: a rank has its swatch, a job's or host's row none.
    state.assign_looks(state.ticked)
    assert model.data(model.index_of(_rank(2).ref), Qt.DecorationRole) is not None
    assert model.data(job, Qt.DecorationRole) is None
    # A rank's row is selected (its job unfolded) and a selected job stands for its runs.
    widget.select(_rank(2).ref)
    assert widget.selected_refs() == [_rank(2).ref]
    assert widget.view.isExpanded(widget.proxy.mapFromSource(job))
    rows = QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows
    widget.view.selectionModel().select(widget.proxy.mapFromSource(job), rows)
    assert widget.selected_refs() == [_rank(r).ref for r in range(4)]
    log.assert_paired()


def test_ranks_arriving_and_leaving_are_rows_inserted_and_removed_under_their_job(table):
    cache, _state, model, widget, log = table
    cache.set_runs([_run(0, lr=1), _rank(0), _rank(1)])
    model.refresh({})
    widget.select(_rank(1).ref)
    log.seen.clear()
    cache.set_runs([_rank(2, status="stalled"), _rank(3)])  # host b's store answers later
    model.refresh({})
    assert log.seen == ["rowsAboutToBeInserted", "rowsInserted"]  # the host row, with its ranks
    job = model.index(1, 0)
    assert model.rowCount(job) == 2 and model.rowCount(model.index(1, 0, job)) == 2
    assert model.data(model.index(1, model.headers.index("status"))) == "1 stalled, 3 running"
    assert widget.selected_refs() == [_rank(1).ref]  # the selection stayed on its run
    cache.drop_store("gpu-a", "/0.db")  # host a's source removed: its ranks and host row go
    model.refresh({})
    assert [text for _d, text in _tree(model)] == [
        "run-0",
        "ddp (2 of 4 ranks, 1 host)",
        "gpu-b · ranks 2, 3",
        "ddp-rank2",
        "ddp-rank3",
    ]
    assert "rowsRemoved" in log.seen and "modelReset" not in log.seen
    log.assert_paired()


def test_the_filter_finds_ranks_and_hosts_inside_a_job(table):
    cache, _state, model, widget, _log = table
    cache.set_runs([_run(0, lr=1), _rank(0), _rank(1), _rank(2), _rank(3)])
    model.refresh({})
    widget.set_filter("gpu-b")  # a host: its job shows, with that host's ranks only
    assert widget.visible_refs() == [_rank(2).ref, _rank(3).ref]
    widget.set_filter("rank1")  # one rank: its job and host show, around it
    assert widget.visible_refs() == [_rank(1).ref]
    widget.set_filter("ddp gpu-a")  # the job's words and its host's
    assert widget.visible_refs() == [_rank(0).ref, _rank(1).ref]
    widget.set_filter("run-0")
    assert widget.visible_refs() == [_run(0).ref]
    widget.tick_visible("all")
    assert _state.ticked == [_run(0).ref]


@pytest.mark.slow
def test_each_host_row_carries_its_gpus_telemetry(table, tmp_path):
    from resplot.sources.local import LocalSource
    from resplot.sources.spec import parse_spec
    from tests.fixtures.job import make_job

    cache, _state, model, _widget, _log = table
    cache.set_runs([_run(0, lr=1)])
    model.refresh({})
    assert model.GPUS not in model.headers  # no job: no telemetry column
    make_job({h: tmp_path / f"{h}.db" for h in ("gpu-a", "gpu-b")}, steps=200)
    for host in ("gpu-a", "gpu-b"):
        LocalSource(parse_spec(str(tmp_path / f"{host}.db"))).poll(cache)
    model.refresh({})
    col = model.headers.index(model.GPUS)
    job = next(
        model.index(r, 0) for r in range(model.rowCount()) if model.rowCount(model.index(r, 0))
    )
    texts = [model.data(model.index(h, col, job)) for h in range(model.rowCount(job))]
    # tests/fixtures/job.py: 2 GPUs a host at ~96 % and ~94 %, 600 W, up to ~70 °C.
    assert [t.split(" · ")[0] for t in texts] == ["2× 96 %", "2× 94 %"], texts
    assert all(t.endswith("°C") and " W · " in t for t in texts)
    assert model.data(job.siblingAtColumn(col)).startswith("4× ")  # ... and the job's: all four
    detail = model.data(model.index(0, col, job), Qt.ToolTipRole)
    assert detail.splitlines()[0] == "mean over the run:" and "gpu-a gpu1: " in detail
    hours = model.data(job.siblingAtColumn(model.headers.index("GPU-hours")), Qt.UserRole)
    per_host = [
        model.data(model.index(h, model.headers.index("GPU-hours"), job), Qt.UserRole)
        for h in range(2)
    ]
    assert hours == pytest.approx(sum(per_host)) and hours > 0


def test_a_jobs_per_rank_settings_show_per_rank_not_as_differing_config(table):
    cache, _state, model, _widget, _log = table

    def rank(r: int) -> RunInfo:
        run = _rank(r)
        config = {
            "lr": 1,
            "logging": {"store": f"runs/{run.host}.db"},
            "runtime": {"local_rank": r % 2},
        }
        return dataclasses.replace(run, config=config)

    cache.set_runs([rank(r) for r in range(4)])
    model.refresh({})
    assert model.config_keys == []  # nothing differs in how the job was run
    column = model.headers.index("per-rank settings")
    job = model.index(0, 0)
    assert model.data(model.index(0, column)) == "by rank: logging.store, runtime.local_rank"
    host_b = model.index(1, 0, job)
    rank3 = model.index(1, column, host_b)
    assert model.data(rank3) == "logging.store=runs/gpu-b.db; runtime.local_rank=1"


def test_the_step_column_counts_the_runs_own_step_axis(table, tmp_path):
    """nanoGPT logs `iter` with the logging call as its step (20 calls for 5,000 iterations),
    Hugging Face `train/global_step` (611 calls for 6,000 steps): the charts place them by
    those counters, so the table's step column says 5,000 and 6,000, not 19 and 610. A run
    that logs no counter shows its highest step."""
    from resplot.sources.local import LocalSource
    from resplot.sources.spec import parse_spec
    from tests.fixtures.stores import make_run, new_store

    cache, _state, model, _widget, _log = table
    engine = new_store(tmp_path / "s.db")
    calls = range(20)
    make_run(
        engine,
        name="nano",
        points={"iter": [(c, 250.0 * (c + 1)) for c in calls], "loss": [(c, 3.0) for c in calls]},
    )
    make_run(
        engine,
        name="hf",
        points={
            "train/global_step": [(c, min(6_000.0, 10.0 * (c + 1))) for c in range(611)],
            "train/loss": [(c, 2.0) for c in range(611)],
        },
    )
    make_run(engine, name="plain", points={"train/loss": [(s, 2.0) for s in range(0, 700, 7)]})
    engine.dispose()
    LocalSource(parse_spec(str(tmp_path / "s.db"))).poll(cache)
    model.refresh({})
    col = model.headers.index("step")
    got = {
        model.data(model.index(r, 0)): model.data(model.index(r, col), Qt.UserRole)
        for r in range(model.rowCount())
    }
    assert got == {"nano": 5_000, "hf": 6_000, "plain": 693}, got


def test_a_refresh_makes_again_only_the_rows_whose_runs_changed(table, tmp_path, monkeypatch):
    """A poll refreshes the table: a finished run's row is what it was (its run, alerts,
    summaries, events and the columns the same), so its cells are not worked out again; a run
    with a new point, a new alert or a new column is."""
    from resplot.sources.local import LocalSource
    from resplot.sources.spec import parse_spec
    from schema.store.rollup import STEP_HI
    from tests.fixtures.stores import make_run, new_store

    cache, state, model, _widget, _log = table
    engine = new_store(tmp_path / "s.db")
    for name in ("a", "b", "c"):
        make_run(engine, name=name, points={"train/loss": [(s, 2.0) for s in range(50)]})
    engine.dispose()
    LocalSource(parse_spec(str(tmp_path / "s.db"))).poll(cache)
    made: list[str] = []
    run_cells = RunTableModel._run_cells

    def counted(self, run, now):
        made.append(run.name)
        return run_cells(self, run, now)

    monkeypatch.setattr(RunTableModel, "_run_cells", counted)
    model.refresh({})
    assert sorted(made) == ["a", "b", "c"]
    made.clear()
    model.refresh({})
    assert made == []  # nothing changed: every row kept
    b = next(r for r in cache.runs() if r.name == "b")
    summary = cache.summary(b.ref, "train/loss")
    agg = list(summary.agg)
    agg[STEP_HI] = 99
    cache.set_summaries(b.ref, {"train/loss": summary._replace(agg=tuple(agg))})
    model.refresh({})
    assert made == ["b"]
    row = [r.name for r in model.runs].index("b")
    assert model.data(model.index(row, model.headers.index("step")), Qt.UserRole) == 99
    made.clear()
    alert = Alert(b.ref, "quiet", "warning", "no new step for 60 s")
    model.refresh({b.ref: [alert]})
    assert made == ["b"]
    assert model.data(model.index(row, model.headers.index("alerts"))) == alert.message
    made.clear()
    state.table_metrics = [*state.table_metrics, "train/loss"]
    model.refresh({b.ref: [alert]})
    assert sorted(made) == ["a", "b", "c"]  # a new column: every row
    column = model.headers.index("train/loss last")
    assert [model.data(model.index(r, column), Qt.UserRole) for r in range(3)] == [2.0] * 3
