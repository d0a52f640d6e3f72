"""The hover readout and click-to-highlight, in the real window (pytest-qt, offscreen) on a
real store: the values it lists are the stored ones."""

from __future__ import annotations

import numpy as np
import pytest
from PyQt5.QtCore import QPoint, Qt

from resplot.data.smoothing import smooth
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

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
    text = view.crosshair.label.plain()
    colors = {row.color for row in view.crosshair.readout.rows}
    for r in found:
        assert r.item.color in colors and f"{r.raw:.4g}" in text


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
    # The readout says its values are smoothed, and gives the hovered run's raw value too.
    hovered = view.crosshair.found[1]
    _x, py = ax.transData.transform((hovered.x, hovered.smoothed))
    view.crosshair.show_at(page.axes.index(ax), float(STEPS[50]), None, py)
    readout = view.crosshair.readout
    assert readout.rows[0].ref == hovered.item.ref and readout.rows[0].hovered
    text = view.crosshair.label.plain()
    assert "smoothed" in text and f"{hovered.raw:.4g}" in text


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


def test_a_click_makes_no_tick_artists(win, qtbot):
    """matplotlib picks through every artist of the figure at each press, and an axis asked
    for its children makes a Tick (six artists) for each tick its locator gives: resplot draws
    none of them (AxisArt) and the collector traversed them all day (page_figure.py)."""
    page, ax = _loss_axes(win)
    view = win.pages["training"]

    def ticks() -> list[tuple[int, int]]:
        return [(len(a.xaxis.majorTicks), len(a.yaxis.majorTicks)) for a in page.axes]

    before = ticks()
    ref = next(r.ref for r in win.cache.runs() if r.name == "run-2")
    pos = _qt_pos(page, ax, int(STEPS[30]), float(_loss(2)[30]))
    qtbot.mouseMove(view.canvas, pos)
    qtbot.mouseClick(view.canvas, Qt.LeftButton, pos=pos)
    settle(qtbot, win)
    assert page.highlighted == ref  # the click still picks its run
    assert ticks() == before
    assert max(n for pair in before for n in pair) <= 1


@pytest.fixture
def sweep_win(qtbot, tmp_path):
    from tests.fixtures.sweep import make_sweep

    path = tmp_path / "sweep.db"
    make_sweep(path, steps=2000)
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=12, size=(1280, 800))
    yield w
    w.close()


def test_with_a_sweep_the_readout_has_a_row_per_run_and_stays_inside_its_chart(sweep_win, qtbot):
    win = sweep_win
    view = win.pages["training"]
    page, crosshair = view.page, view.crosshair
    visible = crosshair.visible_rect()
    ratio = view.canvas.device_pixel_ratio or 1.0
    for n, ax in enumerate(page.axes):
        for frac in (0.02, 0.98):  # near either edge: the readout flips to the other side
            x0, x1 = ax.get_xlim()
            px = ax.bbox.x0 + frac * ax.bbox.width
            crosshair.show_at(n, x0 + frac * (x1 - x0), px, ax.bbox.y0 + 2)
            label = crosshair.label
            assert label.isVisible()
            geo = label.geometry()
            assert visible.contains(geo), (page.specs[n].title, geo, visible)
            assert geo.width() <= max(120, ax.bbox.width / ratio) + 1, page.specs[n].title
            readout = crosshair.readout
            runs = {r.item.ref for r in crosshair.found}
            assert len(readout.rows) + readout.more == len(runs)  # one row per run
    # Train and valid of a run share its row on the loss chart.
    loss = [s.title for s in page.specs].index("Loss")
    crosshair.show_at(loss, 1000.0)
    assert crosshair.readout.columns == ["train", "valid"]
    assert len(crosshair.readout.rows) == 12


def test_a_short_window_says_how_many_runs_the_readout_leaves_out(sweep_win, qtbot):
    win = sweep_win
    win.resize(1280, 520)
    settle(qtbot, win)
    view = win.pages["training"]
    loss = [s.title for s in view.page.specs].index("Loss")
    view.crosshair.show_at(loss, 1000.0)
    readout = view.crosshair.readout
    assert readout.more > 0 and len(readout.rows) + readout.more == 12
    assert f"+{readout.more} more" in view.crosshair.label.plain()
    assert view.crosshair.visible_rect().contains(view.crosshair.label.geometry())


def test_the_readout_is_painted_once_a_readout_and_copied_after(win, qtbot):
    """A move may paint the readout twice (a blit's strip under it, then its own move): the
    text is painted once per readout into an image that later paints copy; a new readout
    paints its text again."""
    page, ax = _loss_axes(win)
    view = win.pages["training"]
    label = view.crosshair.label
    mid = float(np.mean(ax.get_ylim()))
    qtbot.mouseMove(view.canvas, _qt_pos(page, ax, int(STEPS[30]), mid))
    qtbot.waitUntil(lambda: label.isVisible() and label.renders > 0, timeout=5000)
    first, renders = label.grab().toImage(), label.renders
    label.repaint()
    label.repaint()
    again = label.grab().toImage()
    assert label.renders == renders and again == first
    qtbot.mouseMove(view.canvas, _qt_pos(page, ax, int(STEPS[60]), mid))
    qtbot.waitUntil(lambda: label.renders > renders, timeout=5000)
    assert label.grab().toImage() != first  # another step: other values, painted anew


def test_the_readout_keeps_its_recent_texts_laid_out_and_gives_them_back(qtbot):
    """Bounded (each kept text is a wrapper the collector traverses): a run's name painted at
    every move stays laid out, a value seen once goes first; a page given back keeps none."""
    from PyQt5.QtWidgets import QWidget

    from resplot.ui.readout_view import STATICS_KEPT, ReadoutView

    parent = QWidget()
    qtbot.addWidget(parent)
    view = ReadoutView(parent)
    font = view.font_
    name, first = view._static("run-07 lr3e-4", font), view._static("2.000", font)
    for k in range(STATICS_KEPT + 10):  # a move: the name again, a new value
        assert view._static("run-07 lr3e-4", font) is name
        view._static(f"{3 + k / 1e4:.4f}", font)
    assert len(view._statics) == STATICS_KEPT
    assert view._static("2.000", font) is not first  # laid out again
    view.release()
    assert not view._statics and not view.isVisible()
    assert view._static("run-07 lr3e-4", font) is not name


def test_the_readout_draws_its_texts_as_drawtext_does(qtbot):
    """The readout lays each text out once (QStaticText, kept per text and font) and draws it
    at the baseline drawText uses: the same pixels."""
    from PyQt5.QtGui import QImage, QPainter
    from PyQt5.QtWidgets import QWidget

    from resplot.ui.readout_view import ReadoutView

    parent = QWidget()
    qtbot.addWidget(parent)
    view = ReadoutView(parent)
    texts = ["run-07 lr3e-4", "2.964", "@11,967", "NaN", "zoomed out: bucket min/max"]
    for font in (view.font_, view.bold, view.italic):
        for text in texts:
            images = []
            for draw in (True, False, False):  # drawText; ours, laid out; ours, kept
                image = QImage(200, 30, QImage.Format_ARGB32_Premultiplied)
                image.fill(Qt.white)
                p = QPainter(image)
                p.setPen(Qt.black)
                if draw:
                    p.setFont(font)
                    p.drawText(5, 20, text)
                else:
                    view._draw(p, 5, 20, text, font)
                p.end()
                images.append(image)
            assert images[0] == images[1] == images[2], (text, font.bold(), font.italic())
            blank = QImage(images[0].size(), images[0].format())
            blank.fill(Qt.white)
            assert images[0] != blank  # something was drawn
