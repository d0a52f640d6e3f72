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

pytestmark = pytest.mark.integration


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
            engine,
            name="学习率扫描-运行" if i == 8 else f"lr{lr:g}-wd{i // 3}-seed{i}",
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
                **{
                    f"time/{p}": [(s, t) for s in steps[::25]]
                    for p, t in (
                        ("data", 0.01),
                        ("forward", 0.1),
                        ("backward", 0.2),
                        ("step", 0.35),
                    )
                },
            },
        )
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
        for axis in (ax.xaxis, ax.yaxis):
            offset = axis.get_offset_text()
            if offset.get_visible() and offset.get_text():
                out.append(
                    (f"axes{n} offset {offset.get_text()!r}", offset.get_window_extent(renderer))
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


@pytest.mark.parametrize("page", ["training", "system", "timing"])
def test_a_sweeps_long_names_never_run_into_other_text(qtbot, tmp_path, page):
    from tests.fixtures.sweep import make_sweep

    make_sweep(tmp_path / "sweep.db", steps=500)
    win = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    win.set_page(page)
    settle(qtbot, win)
    _assert_no_overlap(win.current_page())
    titles = [ax.get_title(loc="left") for ax in win.current_page().axes]
    if page == "timing":  # each stack's title still names its run by what sets it apart
        assert {t for t in titles if t.startswith("Step time: ")} == {
            f"Step time: …lr{lr}-wd0.2-seed{i}…"
            for i, lr in ((11, "0.0006"), (10, "0.0003"), (9, "0.0002"), (8, "0.0001"))
        }
    win.close()


def test_the_run_table_fits_a_laptop(qtbot, sweep, tmp_path):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=9, size=(1280, 800))
    headers = win.model.headers
    # How each run is doing first (status, step, the losses, alerts), then what tells the
    # sweep apart.
    assert headers[:3] == ["run", "status", "step"]
    assert headers[3:8] == [
        "train/loss last",
        "train/loss min",
        "valid/loss last",
        "valid/loss min",
        "alerts",
    ]
    assert set(headers[8:11]) == {"lr", "seed", "wd"}
    view = win.table.view
    rows_shown = view.viewport().height() // win.table.row_height()
    assert rows_shown >= 6, rows_shown
    assert view.columnWidth(0) <= 320  # the run's name
    for col in range(1, len(headers)):
        assert view.columnWidth(col) <= 240
    store_item = win.tree.run_item(win.cache.runs()[0].ref).parent()
    assert store_item.text(0) == "sweep.db" and store_item.toolTip(0) == str(sweep)
    win.close()


def test_the_sources_tree_shows_each_runs_status_whole_at_full_hd(qtbot, tmp_path):
    """At 1920 the tree's panel is ~300 px: each run's status is shown whole (names whole
    pushed it out: two letters of it showed) and each name as the part that tells the sweep's
    runs apart, whole too (the full name is its tooltip)."""
    from PyQt5.QtGui import QFontMetrics

    from resplot.data.names import distinct_parts
    from tests.fixtures.sweep import make_sweep

    path = tmp_path / "long-names.db"
    make_sweep(path, steps=400)  # llama-125m-wsd-lr0.0001-wd0.0-seed0-bs512-ctx2048, ...
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=12, size=(1920, 1080))
    tree = win.tree
    metrics = QFontMetrics(tree.font())
    room = tree.viewport().width()
    parts = distinct_parts([r.name for r in win.cache.runs()])
    for run in win.cache.runs():
        item = tree.run_item(run.ref)
        status = tree.visualRect(tree.indexFromItem(item, 1))
        shown = (
            min(status.right(), room)
            - status.x()
            - 2 * tree.style().pixelMetric(tree.style().PM_FocusFrameHMargin)
        )
        assert shown >= metrics.horizontalAdvance(item.text(1)), (item.text(1), status, room)
        name = tree.visualRect(tree.indexFromItem(item, 0))
        assert item.text(0) == parts[run.name] and item.toolTip(0).startswith(run.name)
        indent = name.x() - tree.visualItemRect(item).x()
        assert name.width() - indent >= metrics.horizontalAdvance(item.text(0)), item.text(0)
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


def test_at_1280_by_800_a_training_chart_is_300_by_180_and_six_runs_show(qtbot, tmp_path):
    from tests.fixtures.sweep import make_sweep

    make_sweep(tmp_path / "sweep.db", steps=1000)
    win = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    page = win.current_page()
    for ax, spec in zip(page.axes, page.specs, strict=True):
        assert ax.bbox.width >= 300 and ax.bbox.height >= 180, (spec.title, ax.bbox.bounds)
    view = win.table.view
    assert view.viewport().height() // win.table.row_height() >= 6
    assert win.top_split.sizes()[0] == 0  # the sources tree folded away at laptop width
    win.resize(1920, 1080)
    settle(qtbot, win)
    assert win.top_split.sizes()[0] > 0  # and back at full HD (no split dragged by hand)
    for ax in page.axes:
        assert ax.bbox.width >= 400 and ax.bbox.height >= 250
    win.close()


def test_a_first_window_fits_the_screen_and_dragged_splits_are_kept(qtbot, tmp_path):
    from PyQt5.QtWidgets import QApplication

    from resplot.data import layout
    from resplot.data.cache import SeriesCache
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow

    assert layout.window_size(1280, 770) == (1256, 746)  # a laptop's free area
    assert layout.window_size(2560, 1400) == layout.PREFERRED_WINDOW
    area = QApplication.primaryScreen().availableGeometry()
    win = MainWindow(SeriesCache(), settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    assert area.contains(win.frameGeometry()) or (
        win.width() <= area.width() and win.height() <= area.height()
    )
    win.resize(1280, 800)
    win.show()
    win.top_split.setSizes([200, 1080])
    win.top_split.splitterMoved.emit(200, 1)  # what a drag emits
    win.resize(1300, 800)
    assert win.top_split.sizes()[0] > 0  # a drag by hand is kept over the default
    win.toggle_tree()
    assert win.top_split.sizes()[0] == 0
    win.save_settings()
    again = MainWindow(
        SeriesCache(), settings_mod.load(tmp_path / "settings.json"), tmp_path / "settings.json"
    )
    qtbot.addWidget(again)
    again.show()
    assert again.splits_by_hand and again.top_split.sizes()[0] == 0
    win.close()
    again.close()


def test_run_names_keep_what_tells_a_sweep_apart_and_columns_can_be_hidden(qtbot, tmp_path):
    from tests.fixtures.sweep import make_sweep, sweep_name

    make_sweep(tmp_path / "sweep.db", steps=500)
    win = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    view, proxy = win.table.view, win.table.proxy
    view.setColumnWidth(0, 220)
    delegate = view.itemDelegateForColumn(0)
    shown = set()
    for row in range(proxy.rowCount()):
        index = proxy.index(row, 0)
        option = view.viewOptions()
        option.rect = view.visualRect(index)
        delegate.initStyleOption(option, index)
        shown.add(option.text)
        assert "seed" in option.text  # the differing words stay; the shared ones went
        assert not option.text.startswith("llama")
    assert len(shown) == 12
    view.setColumnWidth(0, 600)  # room enough: whole names
    option = view.viewOptions()
    option.rect = view.visualRect(proxy.index(0, 0))
    delegate.initStyleOption(option, proxy.index(0, 0))
    assert option.text in {sweep_name(i) for i in range(12)}
    # The column chooser: hide "host", kept in the settings, shown again.
    menu = win.table.column_menu()
    host = next(a for a in menu.actions() if a.text() == "host")
    host.setChecked(False)
    col = win.model.headers.index("host")
    assert view.isColumnHidden(col) and win.state.hidden_columns == ["host"]
    saved = (tmp_path / "settings.json").read_text()
    assert '"hidden_columns": [\n      "host"' in saved or '"host"' in saved
    win.table.show_column(None, True)
    assert not view.isColumnHidden(col) and win.state.hidden_columns == []
    win.close()


@pytest.fixture
def scales(tmp_path):
    """Series whose ranges gave matplotlib's offset texts (`1e9`, `1e-5`, `1e-15+3.6e-1`) and a
    loss inside one decade (a log axis with one tick label)."""
    path = tmp_path / "scales.db"
    engine = new_store(path)
    steps = range(0, 2000, 10)
    for i in range(3):
        make_run(
            engine,
            name=f"scale-{i}",
            created_at=BASE_TIME + i,
            points={
                "train/loss": [(s, 2.45 + 0.4 * np.exp(-s / 500) + 0.01 * i) for s in steps],
                "train/lr": [(s, 3.0e-5 + 1e-7 * (s % 7)) for s in steps],
                "train/tokens": [(s, 1.0e9 + 524_288.0 * s) for s in steps],
                "train/tokens_per_s": [(s, 1_500_000.0 + 1000.0 * i) for s in steps],
                "time/step": [(s, 0.36) for s in steps],
                "time/forward": [(s, 0.1) for s in steps],
            },
        )
    engine.dispose()
    return path


def _labelled(ax, axis) -> list[str]:
    lo, hi = sorted(axis.get_view_interval())
    return [
        t.get_text()
        for t, loc in zip(axis.get_ticklabels(), axis.get_ticklocs(), strict=False)
        if t.get_text() and lo <= loc <= hi
    ]


@pytest.mark.parametrize("page_name", ["training", "timing", "custom"])
def test_scales_live_in_the_tick_labels_in_the_window_and_in_snapshots(
    qtbot, scales, tmp_path, page_name
):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from resplot.data.state import ViewState
    from resplot.draw.charts import render

    win = open_window(qtbot, [scales], tmp_path / "settings.json", runs=3, size=(1280, 800))
    win.set_custom_keys("train/tokens train/lr")
    win.set_page(page_name)
    settle(qtbot, win)
    state = ViewState(page=page_name, custom_keys=["train/tokens", "train/lr"])
    snapshot = render(win.cache, state, list(win.state.ticked), size=(12.8, 8.0), dpi=100)
    FigureCanvasAgg(snapshot.figure)  # what savefig draws with
    for page in (win.current_page(), snapshot):
        assert page.axes
        page.figure.canvas.draw()
        _assert_no_overlap(page)
        labels = []
        for ax in page.axes:
            assert ax.yaxis.get_offset_text().get_text() == ""  # no `1e9` above the axis
            assert ax.xaxis.get_offset_text().get_text() == ""
            ticks = _labelled(ax, ax.yaxis)
            assert len(ticks) >= 2, (ax.get_title(), ticks)  # log loss axes too
            labels += ticks
        if page_name == "custom":  # the scale is in the labels
            assert any(t.endswith("G") for t in labels) and any("e-5" in t for t in labels)
    win.close()


def test_status_bar_fields_never_run_into_each_other(qtbot, tmp_path):
    from tests.fixtures.sweep import make_sweep

    make_sweep(tmp_path / "sweep.db", steps=300)
    win = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    # No poll meanwhile: each says the source's round trip ("live, 8 ms" -> "live, 48 ms"), and
    # a longer text measured before the status bar lays it out again read as cut (a loaded CI)
    win.set_paused(True)
    qtbot.wait(300)  # a poll in flight lands
    win.statusBar().clearMessage()  # a passing message hides the alert field while it shows
    win._side_timer.stop()  # they would put the sweep's own alert back meanwhile
    win._refresh_side = lambda: None
    win.alert_label.setText("x" * 400 + " a very long alert")
    qtbot.wait(50)
    fields = [
        w
        for w in (win.alert_label, win.shown_label, win.loading_label, win.sources_label)
        if w.isVisible()
    ]
    assert len(fields) >= 3
    for a, b in itertools.combinations(fields, 2):
        assert not a.geometry().intersects(b.geometry()), (a.text()[:20], b.text()[:20])
    # The alert is cut to its room (its tooltip has all of it); the others are whole.
    shown = win.alert_label.shown_text()
    assert shown.endswith("…") and win.alert_label.fontMetrics().horizontalAdvance(shown) <= (
        win.alert_label.contentsRect().width()
    )
    assert win.alert_label.toolTip().endswith("a very long alert")
    for label in fields[1:]:
        assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()
    win.close()


def test_a_passing_message_too_long_for_the_status_bar_is_cut_with_an_ellipsis(qtbot, tmp_path):
    """A crash notification (no system tray: it shows in the status bar) longer than its room
    was clipped mid-word (`...-ctx2048: quiet: no new step fo`). Painted cut with "…": the bar
    looks exactly as it does showing that cut text, which fits."""
    from PyQt5.QtGui import QImage

    from tests.fixtures.sweep import make_sweep

    make_sweep(tmp_path / "sweep.db", steps=300)
    win = open_window(
        qtbot, [tmp_path / "sweep.db"], tmp_path / "settings.json", runs=12, size=(1280, 800)
    )
    win.set_paused(True)
    qtbot.wait(300)
    win._side_timer.stop()
    win._refresh_side = lambda: None
    bar = win.statusBar()
    long = (
        "llama-125m-wsd-lr0.0006-wd0.2-seed11-bs512-ctx2048: crashed: crashed after step "
        "19999: its process is gone or sent no heartbeat for 55s " * 3
    )
    bar.showMessage(long)
    qtbot.wait(50)
    assert bar.currentMessage() == long  # the whole text is kept (and is the tooltip)
    # Where QStatusBar puts a message: from 6 px to 6 px before the first permanent field.
    fields = [w for w in (win.shown_label, win.loading_label, win.sources_label) if w.isVisible()]
    right = min(w.geometry().left() for w in fields) - 6
    metrics = bar.fontMetrics()
    cut = metrics.elidedText(long, Qt.ElideRight, right - 6)
    assert cut.endswith("…") and len(cut) < len(long)

    def image() -> QImage:
        return bar.grab().toImage()

    shown = image()
    bar.showMessage(cut)
    qtbot.wait(50)
    assert image() == shown, "the long message is not painted as its cut text"
    win.close()
