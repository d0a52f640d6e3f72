"""The hover readout and click-to-highlight, in the real window (pytest-qt, offscreen) on a
real store: the values it lists are the stored ones."""

from __future__ import annotations

import numpy as np
import pytest
from PyQt5.QtCore import QPoint, Qt

from resplot.data.smoothing import smooth
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

STEPS = np.arange(0, 300, 3)


def _loss(i: int) -> np.ndarray:
    return 2.0 + 0.5 * i + np.exp(-STEPS / 80.0) + 0.05 * np.sin(STEPS * (i + 1))


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "sweep.db"
    engine = new_store(path)
    for i in range(3):
        pts = {"train/loss": list(zip(STEPS.tolist(), _loss(i).tolist(), strict=True))}
        make_run(engine, name=f"run-{i}", points=pts, created_at=BASE_TIME + i)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=3)
    yield w
    w.close()


def _qt_pos(page, ax, x: float, y: float) -> QPoint:
    """Where data point (x, y) of `ax` is on the canvas widget."""
    px, py = ax.transData.transform((x, y))
    ratio = page.figure.canvas.device_pixel_ratio or 1.0
    return QPoint(round(px / ratio), round((page.figure.bbox.height - py) / ratio))


def _loss_axes(win):
    page = win.current_page()
    return page, page.axes[[s.title for s in page.specs].index("Loss")]


def test_hovering_lists_every_runs_stored_value_at_that_step(win, qtbot):
    win.set_smoothing(0.0)
    settle(qtbot, win)
    page, ax = _loss_axes(win)
    view = win.pages["training"]
    step = int(STEPS[40])
    qtbot.mouseMove(view.canvas, _qt_pos(page, ax, step, float(np.mean(ax.get_ylim()))))
    qtbot.waitUntil(lambda: view.crosshair.label.isVisible(), timeout=5000)
    found = view.crosshair.found
    names = {win.cache.run(r.item.ref).name: r for r in found}
    assert set(names) == {"run-0", "run-1", "run-2"}
    for i in range(3):
        reading = names[f"run-{i}"]
        # The pointer is within a pixel of the step: the nearest point is that step's or a
        # neighbour's, and the value is exactly what was stored there.
        k = int(np.flatnonzero(np.equal(STEPS, reading.step))[0])
        assert abs(reading.step - step) <= 3
        assert reading.raw == _loss(i)[k]
        assert reading.smoothed is None
    # Sorted by value, highest first, and shown in the runs' colours.
    assert [r.raw for r in found] == sorted((r.raw for r in found), reverse=True)
    text = view.crosshair.label.text()
    for r in found:
        assert r.item.color in text and f"{r.raw:.4g}" in text


def test_with_smoothing_the_readout_gives_smoothed_and_raw(win, qtbot):
    win.set_smoothing(0.6)
    settle(qtbot, win)
    page, ax = _loss_axes(win)
    view = win.pages["training"]
    view.crosshair.show_at(page.axes.index(ax), float(STEPS[50]))
    for r in view.crosshair.found:
        i = int(win.cache.run(r.item.ref).name.split("-")[1])
        k = int(np.flatnonzero(np.equal(STEPS, r.step))[0])
        assert r.raw == _loss(i)[k]
        assert r.smoothed == pytest.approx(smooth(STEPS, _loss(i), 0.6)[k], rel=1e-12)
    assert "raw" in view.crosshair.label.text()


def test_clicking_a_line_highlights_its_run_and_selects_its_row(win, qtbot):
    win.set_smoothing(0.0)
    settle(qtbot, win)
    page, ax = _loss_axes(win)
    view = win.pages["training"]
    ref = next(r.ref for r in win.cache.runs() if r.name == "run-1")
    step = int(STEPS[60])
    pos = _qt_pos(page, ax, step, float(_loss(1)[60]))
    qtbot.mouseMove(view.canvas, pos)
    qtbot.mouseClick(view.canvas, Qt.LeftButton, pos=pos)
    settle(qtbot, win)
    assert page.highlighted == ref
    assert win.table.selected_refs() == [ref]
    faded = {t.item.ref: t.faded for tracks in page.tracks for t in tracks.values()}
    assert faded[ref] is False and sum(faded.values()) == 2
    # A click away from every line clears it.
    away = _qt_pos(page, ax, step, ax.get_ylim()[1] * 0.999)
    qtbot.mouseClick(view.canvas, Qt.LeftButton, pos=away)
    settle(qtbot, win)
    assert page.highlighted is None
