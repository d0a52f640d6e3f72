"""A sweep on one chart without clutter: event lines per kind switchable and, with more than a
few runs, only the highlighted or selected runs'; validation dots only while few are in view;
snapshots name every run (the run strip) at any run count."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from resplot.data import marks
from resplot.data.state import ViewState
from resplot.draw.charts import render
from tests.fixtures.sweep import make_sweep, sweep_name
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

STEPS = 1000  # checkpoints at 200, 400, 600, 800; validation every 25 steps (40 points)


def test_which_runs_show_events_and_when_points_are_marked():
    refs = list(range(8))
    assert marks.event_runs(refs[:5], None, set()) == (refs[:5], False)
    assert marks.event_runs(refs, None, set()) == ([], True)
    assert marks.event_runs(refs, 3, {5, 6}) == ([3, 5, 6], True)
    assert marks.markers_shown([10, 12, 30])
    assert not marks.markers_shown([41])  # one series too dense
    assert not marks.markers_shown([40] * 12)  # 480 dots in all
    assert not marks.markers_shown([])


@pytest.fixture
def win(qtbot, tmp_path):
    make_sweep(tmp_path / "sweep.db", steps=STEPS)
    w = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    yield w
    w.close()


def _event_lines(win) -> int:
    # events placed (the runs' checkpoints share steps: one line a pixel column draws them)
    return win.current_page()._events[0].placed()


def test_a_sweeps_events_show_for_the_highlighted_or_selected_runs(win, qtbot):
    page = win.current_page()
    assert _event_lines(win) == 0  # 12 runs × 4 checkpoints would be 48 lines
    assert "events: >5 runs" in page._notes[0].get_text()  # said, not silently dropped
    runs = {r.name: r.ref for r in win.cache.runs()}
    win.highlight(runs[sweep_name(2)])
    settle(qtbot, win)
    assert _event_lines(win) == 4
    win.table.select(runs[sweep_name(4)])
    settle(qtbot, win)
    assert _event_lines(win) == 8  # the highlighted run's and the selected run's
    assert page._events[0].count() == 4  # at the same steps: a line each
    win.show_events("checkpoint", False)  # View → Event markers → Checkpoints
    settle(qtbot, win)
    assert _event_lines(win) == 0 and win.state.hidden_events == ["checkpoint"]
    assert not win.event_actions["checkpoint"].isChecked()
    win.show_events("checkpoint", True)
    win.highlight(None)
    win.table.tick_visible("none")
    for i in range(3):  # a few runs: every run's events
        win.tick(runs[sweep_name(i)], True)
    settle(qtbot, win)
    assert _event_lines(win) == 12
    assert "events" not in page._notes[0].get_text()


def test_validation_points_are_marked_only_when_few_are_in_view(win, qtbot):
    page = win.current_page()
    loss = [s.title for s in page.specs].index("Loss")

    def marked() -> list[str]:
        return [t.line.get_marker() for t in page.tracks[loss].values() if t.item.marker]

    assert marked() and set(marked()) == {"None"}  # 12 runs × 40 validation points
    page.axes[loss].set_xlim(0, 150)  # a zoom: 6 points each
    settle(qtbot, win)
    assert set(marked()) == {"o"}


def test_a_snapshot_names_every_run_at_any_count(win):
    refs = list(win.state.ticked)
    page = render(win.cache, ViewState(), refs, size=(12.8, 8.0), dpi=100)
    FigureCanvasAgg(page.figure)
    labels = [t.get_text() for t in page.strip.legend.get_texts()]
    assert len(labels) == len(refs) == 12
    for i in range(12):  # each by the part of its name that tells it apart
        assert any(f"seed{i}…" in label for label in labels), i
