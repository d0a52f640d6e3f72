"""Names from a store are shown, never obeyed, in resplot's window and snapshots: a bidi override
(U+202E showed a name reversed), terminal escapes (ESC sequences, BEL) in a run's name, project,
host, config value, metric key and alert text come out as visible escapes (`\\u202e`, `\\x1b`:
reslog/text.py's safe(), as the CLI prints them) in the run table, the sources tree, chart
titles, legends and the run strip, the hover readout, the run menu, notifications and the status
bar; the stored values themselves are untouched."""

from __future__ import annotations

import pytest
from matplotlib.text import Text
from PyQt5.QtCore import QModelIndex, Qt

from reslog.text import safe
from resplot.cli import main
from resplot.data.cache import SeriesCache
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from tests.fixtures.stores import add_events, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

BIDI = "\u202e"
HOSTILE = f"evil{BIDI}gnp.exe\x1b[2J\x1b]0;pwned\x07"
NAME = f"lr3e-4-{HOSTILE}"
KEY = f"train/{BIDI}ssol\x1b[0m"
RAW = (BIDI, "\x1b", "\x07")


def shown_safely(text: str | None) -> bool:
    return text is None or not any(c in text for c in RAW)


@pytest.fixture
def hostile_store(tmp_path):
    path = tmp_path / "hostile.db"
    engine = new_store(path)
    points = {
        "train/loss": [(s, 4.0 - s / 100) for s in range(100)],
        KEY: [(s, 1.0 + s / 100) for s in range(100)],
    }
    bad = make_run(
        engine,
        name=NAME,
        project=f"proj{BIDI}x",
        host=f"gpu{BIDI}b",
        config={"lr": 3e-4, "note": f"x\x1b[31mred{BIDI}"},
        points=points,
    )
    make_run(
        engine,
        name="lr1e-3-plain",
        project=f"proj{BIDI}x",
        config={"lr": 1e-3, "note": ""},
        points=points,
        created_at=1_700_000_001.0,
    )
    engine.dispose()
    return path, bad


def _model_texts(model, parent=QModelIndex()) -> list[str]:  # noqa: B008
    out = []
    for row in range(model.rowCount(parent)):
        for col in range(model.columnCount(parent)):
            index = model.index(row, col, parent)
            for role in (Qt.DisplayRole, Qt.ToolTipRole):
                value = model.data(index, role)
                if isinstance(value, str):
                    out.append(value)
        out += _model_texts(model, model.index(row, 0, parent))
    return out


def _figure_texts(figure) -> list[str]:
    return [t.get_text() for t in figure.findobj(Text) if t.get_text()]


def test_the_window_shows_hostile_names_as_escapes(qtbot, tmp_path, hostile_store, monkeypatch):
    path, bad = hostile_store
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=2)
    ref = next(r.ref for r in win.cache.runs() if r.ref.uid == bad.uid)
    assert win.cache.run(ref).name == NAME  # the value itself is kept as stored
    # The run table: every cell and tooltip, the column heads and the column chooser.
    texts = _model_texts(win.model)
    assert texts and all(shown_safely(t) for t in texts)
    assert safe(NAME) in texts and "\\u202e" in safe(NAME) and "\\x1b[2J" in safe(NAME)
    heads = [win.model.headerData(c, Qt.Horizontal) for c in range(win.model.columnCount())]
    assert all(shown_safely(h) for h in heads)
    assert all(shown_safely(a.text()) for a in win.table.column_menu().actions())
    # The sources tree.
    item = win.tree.run_item(ref)
    assert item.text(0) == safe(NAME) and shown_safely(item.toolTip(0))
    # Charts: titles, legends, the run strip (a Qt label), on the page that draws the key.
    win.set_custom_keys(["train/*"])
    win.set_page("custom")
    settle(qtbot, win)
    page = win.current_page()
    titles = [ax.get_title(loc="left") for ax in page.axes]
    assert safe(KEY) in titles
    assert all(shown_safely(t) for t in _figure_texts(page.figure))
    strip = win.pages["custom"].strip.text()
    assert shown_safely(strip) and "evil\\u202egnp.exe" in strip
    # The hover readout on the hostile key's chart.
    view = win.pages["custom"]
    index = titles.index(safe(KEY))
    view.crosshair.show_at(index, 50.0)
    readout = view.crosshair.readout
    assert readout is not None and readout.title == safe(KEY)
    assert {r.name for r in readout.rows} == {safe(NAME), "lr1e-3-plain"}
    # The run menu's colour dialog names the run.
    asked = []
    monkeypatch.setattr("resplot.ui.run_menu.pick_color", lambda _w, _c, title: asked.append(title))
    from resplot.ui.run_menu import run_menu

    menu = run_menu(win, ref)
    next(a for a in menu.actions() if a.text() == "Colour…").trigger()
    assert asked == [f"Colour of {safe(NAME)}"]
    # A notification of an alert logged with escapes in its text, and the status bar.
    engine = new_store(path)
    add_events(
        engine,
        bad.id,
        [("alert", f"loss{BIDI} \x1b]52;c;ZXZpbA==\x07", 99, "error")],
        wall0=1_700_000_000.0,
    )
    engine.dispose()
    qtbot.waitUntil(lambda: len(win.notifier.shown) == 1, timeout=30_000)
    (note,) = win.notifier.shown
    assert (
        note.title.startswith(safe(NAME)) and note.message == "loss\\u202e \\x1b]52;c;ZXZpbA==\\x07"
    )
    assert shown_safely(win.statusBar().currentMessage())
    assert shown_safely(win.alert_label.text()) and "\\u202e" in win.alert_label.text()
    assert all(shown_safely(t) for t in _model_texts(win.model))  # the alerts cell too
    win.close()


def test_a_snapshot_draws_hostile_names_as_escapes(tmp_path, hostile_store, capsys):
    path, _bad = hostile_store
    cache = SeriesCache()
    source = LocalSource(parse_spec(str(path)))
    try:
        source.poll(cache)
        state = ViewState(page="custom")
        state.set_custom_keys(["train/*"])
        refs = [r.ref for r in cache.runs()]
        page = render(cache, state, refs, fetch=lambda: source.poll(cache))
    finally:
        source.close()
    texts = _figure_texts(page.figure)
    assert all(shown_safely(t) for t in texts), [t for t in texts if not shown_safely(t)]
    assert safe(KEY) in texts  # a chart's title
    assert any("evil\\u202egnp.exe" in t for t in texts)  # the run strip and legends
    out = tmp_path / "hostile.png"
    assert main(["snapshot", str(path), "--keys", "train/*", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
