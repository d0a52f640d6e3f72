"""The window at laptop size (1280×800) and full HD: no text on the charts overlaps other text
or leaves the figure (checked from the drawn text extents), the run table shows the sweep's
differing config first and enough rows, and the keyboard shortcuts work."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PyQt5.QtCore import Qt

from resplot.ui import shortcuts
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle


def _sweep(path) -> None:
    engine = new_store(path)
    steps = range(0, 3000)  # dense enough to be drawn as bucket envelopes (with a note)
    for i in range(9):
        lr = [1e-4, 3e-4, 1e-3][i % 3]
        gpu = {
            f"sys/gpu{g}/{leaf}": [(s, 50.0 + g + i) for s in steps[::50]]
            for g in range(2)
            for leaf in ("util", "temp_c", "power_w", "mem_used_gib")
        }
        make_run(
            engine, name="学习率扫描-运行" if i == 8 else f"lr{lr:g}-wd{i // 3}-seed{i}",
            created_at=BASE_TIME + i,
            config={"lr": lr, "wd": i // 3, "seed": i, "model": {"layers": 12}},
            points={
                "train/loss": [(s, 2.5 + 0.1 * i + 2 * np.exp(-s / 300)) for s in steps],
                "valid/loss": [(s, 2.6 + 0.1 * i) for s in steps[::50]],
                "train/lr": [(s, lr) for s in steps],
                "train/grad_norm": [(s, 1000.0 + s) for s in steps],
                "train/tokens_per_s": [(s, 40000.0 + 100 * i) for s in steps],
                "train/mfu": [(s, 0.4 + 0.01 * i) for s in steps],
                "valid/ppl": [(s, 14.0 - i * 0.1) for s in steps[::50]],
                **gpu,
                **{f"time/{p}": [(s, t) for s in steps[::25]] for p, t in
                   (("data", 0.01), ("forward", 0.1), ("backward", 0.2), ("step", 0.35))},
            },
        )  # fmt: skip
    engine.dispose()


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "sweep.db"
    _sweep(path)
    return path


def _texts(page):
    """(owner, bbox) of every text the page draws outside the plotting areas."""
    renderer = page.figure.canvas.get_renderer()
    out = []
    for n, ax in enumerate(page.axes):
        for part in (ax.title, ax.xaxis.label, ax.yaxis.label):
            if part.get_visible() and part.get_text():
                out.append((f"axes{n} {part.get_text()!r}", part.get_window_extent(renderer)))
        for axis, (vlo, vhi) in (
            (ax.xaxis, sorted(ax.get_xlim())),
            (ax.yaxis, sorted(ax.get_ylim())),
        ):
            for tick, loc in zip(axis.get_ticklabels(), axis.get_ticklocs(), strict=False):
                if tick.get_visible() and tick.get_text() and vlo <= loc <= vhi:
                    out.append(
                        (f"axes{n} tick {tick.get_text()!r}", tick.get_window_extent(renderer))
                    )
        note = page._notes[n]
        if note.get_text():
            out.append((f"axes{n} note", note.get_window_extent(renderer)))
    if page.strip.legend is not None:
        out.append(("run strip", page.strip.legend.get_window_extent(renderer)))
    return out


def _assert_no_overlap(page) -> None:
    page.figure.canvas.draw()
    texts = _texts(page)
    fig = page.figure.bbox
    for name, box in texts:
        assert box.x0 >= fig.x0 - 1 and box.x1 <= fig.x1 + 1, f"{name} clipped left/right"
        assert box.y0 >= fig.y0 - 1 and box.y1 <= fig.y1 + 1, f"{name} clipped top/bottom"
    for n, ax in enumerate(page.axes):  # a chart's note stays inside its chart
        for name, box in texts:
            if name == f"axes{n} note":
                assert ax.bbox.x0 - 1 <= box.x0 and box.x1 <= ax.bbox.x1 + 1, f"{name} leaves it"
    for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
        if a.split(" ")[0] == b.split(" ")[0] and "tick" in a and "tick" in b:
            continue  # one axis's own tick labels: matplotlib spaces those
        assert not box_a.overlaps(box_b), f"{a} overlaps {b}"


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)])
@pytest.mark.parametrize("page", ["training", "system", "timing"])
def test_no_chart_text_overlaps_or_is_clipped(qtbot, sweep, tmp_path, size, page):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=9, size=size)
    win.set_page(page)
    settle(qtbot, win)
    assert win.current_page().axes
    _assert_no_overlap(win.current_page())
    win.close()


def test_the_run_table_fits_a_laptop(qtbot, sweep, tmp_path):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=9, size=(1280, 800))
    headers = win.model.headers
    # What tells the sweep apart comes right after the name and status.
    assert headers[:2] == ["run", "status"] and set(headers[2:5]) == {"lr", "seed", "wd"}
    view = win.table.view
    rows_shown = view.viewport().height() // view.verticalHeader().defaultSectionSize()
    assert rows_shown >= 6, rows_shown
    for col in range(len(headers)):
        assert view.columnWidth(col) <= 240
    from PyQt5.QtGui import QFontMetrics

    metrics = QFontMetrics(win.tree.font())
    for run in win.cache.runs():  # every run's name is shown whole in the tree
        item = win.tree.run_item(run.ref)
        rect = win.tree.visualItemRect(item)
        assert win.tree.columnWidth(0) - rect.x() >= metrics.horizontalAdvance(run.name)
    store_item = win.tree.run_item(win.cache.runs()[0].ref).parent()
    assert store_item.text(0) == "sweep.db" and store_item.toolTip(0) == str(sweep)
    win.close()


def test_keyboard_shortcuts_switch_pages_hide_the_table_and_are_listed(qtbot, sweep, tmp_path):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=9)
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=5000)
    qtbot.keyClick(win, Qt.Key_2, Qt.ControlModifier)
    assert win.state.page == "system"
    qtbot.keyClick(win, Qt.Key_T, Qt.ControlModifier)
    assert not win.table.isVisible()
    qtbot.keyClick(win, Qt.Key_T, Qt.ControlModifier)
    assert win.table.isVisible()
    paused = win.state.paused
    qtbot.keyClick(win, Qt.Key_P, Qt.ControlModifier)
    assert win.state.paused is not paused
    qtbot.keyClick(win, Qt.Key_F, Qt.ControlModifier)
    assert win.table.filter.hasFocus()
    text = shortcuts.help_text()
    for keys, what, _ in shortcuts.table():
        assert keys in text and what in text
    win.close()
