"""Run colours are assigned, not hashed: distinct on screen, kept across launches."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data import colors
from resplot.data.state import ViewState
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window


def test_twenty_runs_get_twenty_colours_then_line_styles_tell_the_rest_apart():
    book: dict = {}
    colors.assign(book, [f"run{i}" for i in range(25)])
    looks = [colors.look_of(book[f"run{i}"]) for i in range(25)]
    assert len({look.color for look in looks[:20]}) == 20
    assert len(set(looks)) == 25  # the 21st on reuses a colour with another line style
    assert looks[20].color == looks[0].color and looks[20].style != looks[0].style


def test_a_run_keeps_its_slot_and_newcomers_take_free_ones():
    book: dict = {"a": 0, "b": 1}
    colors.assign(book, ["b", "c"])  # a is off screen: its slot is free for c
    assert book == {"a": 0, "b": 1, "c": 0}
    changed = colors.assign(book, ["b", "c"])
    assert not changed


def test_two_runs_holding_one_slot_are_split_when_shown_together():
    book: dict = {"a": 0, "b": 1}
    colors.assign(book, ["b", "c"])  # c gets 0, a's slot, while a is hidden
    colors.assign(book, ["a", "c", "b"])
    assert book["a"] == 0  # assigned first: keeps it
    assert len({book["a"], book["b"], book["c"]}) == 3


def test_a_picked_colour_survives_settings_and_bad_ones_are_refused():
    from resplot.data.model import RunRef

    state = ViewState()
    ref = RunRef("local", "/x.db", "u1")
    state.set_color(ref, "#00FF00")
    again = ViewState.from_dict(state.to_dict())
    assert again.look(ref).color == "#00ff00"
    with pytest.raises(ValueError, match="#1f77b4"):
        state.set_color(ref, "green")


def _sweep(path, n: int, offset: float = 0.0, project: str = "proj"):
    engine = new_store(path)
    for i in range(n):
        loss = [(s, 3.0 + offset + 0.1 * i + np.exp(-s / 50)) for s in range(0, 200, 2)]
        make_run(
            engine,
            name=f"{path.stem}-{i}",
            project=project,
            points={"train/loss": loss},
            created_at=BASE_TIME + i,
        )
    engine.dispose()


@pytest.fixture
def two_stores(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _sweep(a, 10)
    _sweep(b, 10, offset=1.0)
    return a, b


def _colors(win) -> dict[str, tuple[str, str]]:
    """Run name -> (colour, line style) of its loss line as drawn."""
    page = win.current_page()
    out = {}
    for (title, ref, _key), line in page.lines().items():
        if title == "Loss":
            out[win.cache.run(ref).name] = (line.get_color(), line.get_linestyle())
    return out


@pytest.mark.integration
def test_twenty_runs_in_the_window_have_twenty_colours_kept_across_source_order(
    qtbot, two_stores, tmp_path
):
    a, b = two_stores
    settings = tmp_path / "settings.json"
    win = open_window(qtbot, [a, b], settings, runs=20)
    first = _colors(win)
    assert len(first) == 20
    assert len({c for c, _ in first.values()}) == 20
    # The table shows the same colour as the chart.
    model = win.model
    for run in model.runs:
        swatch = model.data(model.index_of(run.ref), role=1)  # Qt.DecorationRole
        assert swatch.name() == first[run.name][0]
    win.close()
    # Reopened with the sources the other way round: the labels differ, the colours do not.
    again = open_window(qtbot, [b, a], settings, runs=20)
    assert _colors(again) == first
    again.close()


@pytest.mark.integration
def test_right_click_a_run_to_pick_its_colour(qtbot, two_stores, tmp_path):
    from PyQt5.QtCore import QTimer
    from PyQt5.QtGui import QColor
    from PyQt5.QtWidgets import QApplication, QColorDialog

    from resplot.ui.run_menu import run_menu
    from tests.fixtures.windows import settle

    a, _b = two_stores
    settings = tmp_path / "settings.json"
    win = open_window(qtbot, [a], settings, runs=10)
    ref = next(r.ref for r in win.cache.runs() if r.name == "a-3")
    menu = run_menu(win, ref)
    action = next(a for a in menu.actions() if a.text() == "Colour…")
    answered = []

    def answer() -> None:  # the real modal dialog, answered as a user would
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, QColorDialog):
            QTimer.singleShot(20, answer)
            return
        dialog.setCurrentColor(QColor("#123456"))
        answered.append(True)
        dialog.accept()

    QTimer.singleShot(20, answer)
    action.trigger()
    assert answered
    before = win.redraw_count
    settle(qtbot, win, before)
    assert _colors(win)["a-3"][0] == "#123456"
    win.close()
    assert '"#123456"' in settings.read_text()
