"""The window under pytest-qt (offscreen) on a real SQLite store, read by the real Poller
through a local agent: the charts ask for tiles and the poller fetches them, as in use.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import numpy as np
import pyarrow.parquet as pq
import pytest

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.sources.spec import parse_spec
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow, make_poller
from schema.store import read
from schema.store.connect import open_store
from tests.fixtures.stores import BASE_TIME, add_points, make_run, new_store
from tests.fixtures.windows import settle

pytestmark = pytest.mark.integration

N = 400


def _points(offset: float, nan_at: int | None = None):
    steps = range(0, N)
    loss = [(s, 4.0 * np.exp(-s / 150) + 2 + offset + 0.05 * np.sin(s)) for s in steps]
    if nan_at is not None:
        loss[nan_at] = (nan_at, float("nan"))
    return {
        "train/loss": loss,
        "valid/loss": [(s, 2.5 + offset) for s in range(0, N, 50)],
        "train/lr": [(s, 3e-4 * min(1, s / 50)) for s in steps],
        "train/tokens": [(s, 8192.0 * (s + 1)) for s in steps],
        "train/tokens_per_s": [(s, 40_000.0 + 10 * (s % 7)) for s in steps],
        "time/data": [(s, 0.01) for s in steps],
        "time/forward": [(s, 0.1) for s in steps],
        "time/backward": [(s, 0.2) for s in steps],
        "time/optimizer": [(s, 0.03) for s in steps],
        "time/step": [(s, 0.4) for s in steps],
        "sys/gpu0/util": [(s, 97.0) for s in steps],
        "sys/gpu0/temp_c": [(s, 71.0) for s in steps],
    }


@pytest.fixture
def store(store_path):
    engine = new_store(store_path)
    # lr-3e-4 chose "trainer/global_step" as its x axis (define_metric, as Lightning does)
    metric = ("metric", "*", None, "info", '{"step_metric": "trainer/global_step"}')
    global_step = {"trainer/global_step": [(s, 10.0 * s) for s in range(N)]}
    make_run(
        engine,
        name="lr-3e-4",
        config={"lr": 3e-4, "schedule": "cosine"},
        points={**_points(0.0), **global_step},
        events=[("checkpoint", "step 200", 200), metric],
    )
    make_run(
        engine,
        name="lr-1e-3",
        config={"lr": 1e-3, "schedule": "cosine"},
        points=_points(0.3, nan_at=300),
        created_at=BASE_TIME + 10,
    )
    engine.dispose()
    return store_path


@pytest.fixture
def window(qtbot, store, tmp_path):
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    win.state.set_poll_interval(0.2)
    win.attach_poller(make_poller(cache, 0.2, win.ask_host_key))
    win.add_source(str(store))
    qtbot.waitUntil(lambda: len(cache.runs()) == 2, timeout=20_000)
    settle(qtbot, win, 0)
    win.schedule_redraw()  # once more at the final layout: its widths may want other tiles
    settle(qtbot, win)
    yield win
    win.close()


def refs_by_name(win) -> dict[str, RunRef]:
    return {r.name: r.ref for r in win.cache.runs()}


def wait_redraw(qtbot, win):
    settle(qtbot, win)


def line(win, panel, name, key):
    return win.current_page().lines()[(panel, refs_by_name(win)[name], key)]


def test_runs_are_listed_ticked_and_plotted(window):
    assert {r.name for r in window.cache.runs()} == {"lr-3e-4", "lr-1e-3"}
    assert window.model.rowCount() == 2
    assert "lr" in window.model.headers  # the config key that differs
    assert "schedule" not in window.model.headers
    refs = refs_by_name(window)
    lines = window.current_page().lines()
    assert ("Loss", refs["lr-3e-4"], "train/loss") in lines
    assert len(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata()) == N
    tree_item = window.tree.run_item(refs["lr-1e-3"])
    assert tree_item.text(1) == "finished" and "ago" in tree_item.text(2)


def test_unticking_in_the_table_removes_the_lines(window, qtbot):
    ref = refs_by_name(window)["lr-1e-3"]
    index = window.model.index_of(ref)
    from PyQt5.QtCore import Qt

    assert window.model.data(index, Qt.CheckStateRole) == Qt.Checked
    window.model.setData(index, Qt.Unchecked, Qt.CheckStateRole)
    wait_redraw(qtbot, window)
    keys = window.current_page().lines()
    assert not any(k[1] == ref for k in keys)
    assert window.state.ticked == [refs_by_name(window)["lr-3e-4"]]


def test_switching_pages_draws_that_page(window, qtbot):
    window.tabs.setCurrentIndex(1)
    wait_redraw(qtbot, window)
    assert window.state.page == "system"
    titles = {k[0] for k in window.current_page().lines()}
    assert titles == {"GPU utilisation", "GPU temperature"}
    window.tabs.setCurrentIndex(2)
    wait_redraw(qtbot, window)
    page = window.current_page()
    assert [s.kind for s in page.specs[:2]] == ["stacked", "stacked"]
    window.set_custom_keys("train/lr")
    window.tabs.setCurrentIndex(3)
    wait_redraw(qtbot, window)
    assert {k[2] for k in window.current_page().lines()} == {"train/lr"}


def test_smoothing_changes_the_line_and_zero_shows_raw(window, qtbot):
    raw = np.array([p[1] for p in _points(0.0)["train/loss"]])
    window.smooth_spin.setValue(0.0)
    wait_redraw(qtbot, window)
    np.testing.assert_allclose(line(window, "Loss", "lr-3e-4", "train/loss").get_ydata(), raw)
    window.smooth_spin.setValue(0.9)
    wait_redraw(qtbot, window)
    smoothed = np.asarray(line(window, "Loss", "lr-3e-4", "train/loss").get_ydata())
    assert smoothed.shape == raw.shape and not np.allclose(smoothed, raw)
    assert np.std(np.diff(smoothed)) < np.std(np.diff(raw))


def test_x_axis_modes_move_the_points(window, qtbot):
    window.x_combo.setCurrentText("tokens")
    wait_redraw(qtbot, window)
    # A run's tokens come from its tokens series: a redraw before that series' tiles are in
    # places nothing (seen in full suites on a loaded machine); the next one places it all.
    qtbot.waitUntil(
        lambda: len(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata()) > 0, timeout=30_000
    )
    x = np.asarray(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata())
    np.testing.assert_allclose(x[:3], [8192.0, 16384.0, 24576.0])
    window.x_combo.setCurrentText("relative")
    wait_redraw(qtbot, window)
    x = np.asarray(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata())
    assert x[1] == pytest.approx(1 / 3600)  # the fixture logs one step per second


def test_the_metric_x_axis_is_the_step_metric_a_run_defined(window, qtbot):
    window.x_combo.setCurrentText("metric")
    wait_redraw(qtbot, window)
    lines = window.current_page().lines()
    x = np.asarray(lines[("Loss", refs_by_name(window)["lr-3e-4"], "train/loss")].get_xdata())
    np.testing.assert_allclose(x[:3], [0.0, 10.0, 20.0])
    other = lines.get(("Loss", refs_by_name(window)["lr-1e-3"], "train/loss"))
    assert other is None or len(other.get_xdata()) == 0  # it defined none: not placed
    # The toolbar names the axis in the window (snapshots label it under the charts).
    assert window.current_page().x_label == "step metric (define_metric)"


def test_nan_loss_raises_an_alert_in_table_and_status_bar(window):
    assert "lr-1e-3" in window.alert_label.text() and "NaN" in window.alert_label.text()
    ref = refs_by_name(window)["lr-1e-3"]
    alert_col = window.model.headers.index("alerts")
    assert "NaN at step 300" in window.model.data(window.model.index_of(ref, alert_col))
    other = refs_by_name(window)["lr-3e-4"]
    assert window.model.data(window.model.index_of(other, alert_col)) == ""
    # The NaN is marked on the chart, not dropped.
    bad = line(window, "Loss", "lr-1e-3", "train/loss").axes.lines
    markers = [ln for ln in bad if ln.get_marker() == "x" and len(ln.get_xdata())]
    assert [list(m.get_xdata()) for m in markers] == [[300.0]]


def test_arrivals_coalesce_into_one_redraw(window, qtbot):
    before = window.redraw_count
    for _ in range(20):
        window.on_data_arrived(set())
    qtbot.wait(300)
    assert window.redraw_count == before + 1


def test_zoom_redecimates_for_the_visible_range(window, qtbot):
    window.set_x_axis("step")  # lr-3e-4 defined a step metric: "auto" would place it by that
    wait_redraw(qtbot, window)
    page = window.current_page()
    ax = line(window, "Loss", "lr-3e-4", "train/loss").axes
    ax.set_xlim(100, 150)  # what the zoom tool does
    wait_redraw(qtbot, window)
    x = np.asarray(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata())
    assert x.min() >= 99 and x.max() <= 151 and not page.follow
    window.reset_view()
    wait_redraw(qtbot, window)
    assert len(line(window, "Loss", "lr-3e-4", "train/loss").get_xdata()) == N


def test_export_from_the_window(window, tmp_path):
    # Points come raw from the store, on a worker thread (the GUI thread does no I/O).
    window.export_points(tmp_path / "long.csv", "csv").wait()
    rows = list(csv.DictReader(io.StringIO((tmp_path / "long.csv").read_text())))
    assert {r["run"] for r in rows} == {"lr-3e-4", "lr-1e-3"}
    assert sum(r["key"] == "train/loss" for r in rows) == 2 * N  # full resolution
    window.export_points(tmp_path / "wide.csv", "csv-wide").wait()
    header = next(csv.reader(io.StringIO((tmp_path / "wide.csv").read_text())))
    assert "train/loss" in header
    window.export_points(tmp_path / "points.parquet", "parquet").wait()
    assert pq.read_table(tmp_path / "points.parquet").num_rows == len(rows)
    window.export_table(tmp_path / "table.md", "md")
    md = (tmp_path / "table.md").read_text()
    assert "lr-3e-4" in md and "| lr" in md
    window.export_table(tmp_path / "table.tex", "latex")
    assert "\\begin{tabular}" in (tmp_path / "table.tex").read_text()
    window.export_table(tmp_path / "table.csv", "csv")
    assert len(list(csv.reader(io.StringIO((tmp_path / "table.csv").read_text())))) == 3
    window.export_chart(tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_report_from_the_window(window, tmp_path):
    # File > Export > HTML report: the runs shown, read afresh on a worker thread through the
    # same path as `resplot report`; the page shown comes first. (The page itself is tested in
    # a browser in tests/resplot/test_report.py.)
    import json
    import re

    from PyQt5.QtWidgets import QMenu

    from resplot.ui.export_menu import start_report_export

    menus = {m.title(): m for m in window.findChildren(QMenu)}
    assert "HTML report…" in [a.text() for a in menus["&Export"].actions()], menus.keys()
    window.set_page("system")
    worker = start_report_export(window, tmp_path / "report.html")
    worker.wait()
    assert worker.error is None
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    data = json.loads(
        re.search(r'id="report-data" type="application/json">(.*?)</script>', html, re.S).group(1)
    )
    shown = {r.name for r in window.cache.runs() if r.ref in window.export_refs()}
    assert {r["name"] for r in data["runs"]} == shown
    assert [p["name"] for p in data["pages"]] == ["system", "training"]
    loss = [
        i
        for p in data["pages"]
        for panel in p.get("panels", [])
        for i in panel["items"]
        if panel["title"] == "Loss"
    ]
    assert loss and all(data["series"][i["s"]]["cols"] for i in loss)
    window.export_chart(tmp_path / "chart.svg")
    assert ET.parse(tmp_path / "chart.svg").getroot().tag.endswith("svg")
    window.export_chart(tmp_path / "chart.pdf")
    assert (tmp_path / "chart.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match=r"\.png, \.svg or \.pdf"):
        window.export_chart(tmp_path / "chart.bmp")


def test_settings_persist_across_two_windows(window, qtbot, tmp_path):
    refs = refs_by_name(window)
    window.tick(refs["lr-1e-3"], False)
    window.set_page("timing")
    window.smooth_spin.setValue(0.8)
    window.log_check.setChecked(False)
    window.poll_spin.setValue(5.0)
    window.pause_action.setChecked(True)
    window.table.set_filter("lr-3")
    window.poller.stop()
    window.close()
    path = tmp_path / "settings.json"
    loaded = settings_mod.load(path)
    assert loaded.problem is None
    second = MainWindow(window.cache, loaded, path)
    qtbot.addWidget(second)
    assert second.state.ticked == [refs["lr-3e-4"]]
    assert second.state.page == "timing" and second.tabs.currentIndex() == 2
    assert second.smooth_spin.value() == pytest.approx(0.8)
    assert not second.log_check.isChecked() and second.pause_action.isChecked()
    assert second.poll_spin.value() == pytest.approx(5.0)
    assert second.table.filter.text() == "lr-3" and second.table.proxy.rowCount() == 1


def test_corrupt_settings_file_opens_with_defaults_and_says_so(qtbot, tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{oops")
    win = MainWindow(SeriesCache(), settings_mod.load(path), path)
    qtbot.addWidget(win)
    assert "unreadable" in win.statusBar().currentMessage()
    assert list(tmp_path.glob("settings.json.corrupt-*"))


def test_live_data_through_the_real_poller(qtbot, store, tmp_path):
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    win.state.set_poll_interval(0.2)
    poller = make_poller(cache, 0.2, win.ask_host_key)
    with qtbot.waitSignal(poller.runsChanged, timeout=10_000):
        win.attach_poller(poller)
        win.add_source(str(store))
    qtbot.waitUntil(lambda: len(cache.runs()) == 2, timeout=10_000)
    qtbot.waitUntil(
        lambda: any(len(ln.get_xdata()) == N for ln in win.current_page().lines().values()),
        timeout=10_000,
    )
    # A writer appends: the poller fetches it and the redraw extends the existing line.
    engine = open_store(store)
    with engine.connect() as conn:
        run_id = read.list_runs(conn, source="local", store=str(store))[0][0]
    add_points(engine, run_id, {"train/loss": [(N + i, 2.0) for i in range(5)]})
    engine.dispose()
    qtbot.waitUntil(
        lambda: any(len(ln.get_xdata()) == N + 5 for ln in win.current_page().lines().values()),
        timeout=10_000,
    )
    assert win.state.sources == [str(store)]
    win.close()


def test_source_states_show_in_tree_and_status_bar(window):
    from resplot.sources.base import SourceState

    window.tree.add_source_label("gpu-box")
    window.on_source_state("gpu-box", SourceState("retrying", None, "Connection refused", 4.0))
    host = window.tree._hosts["gpu-box"]
    assert host.text(1) == "retrying in 4 s: Connection refused"
    window.on_source_state("local", SourceState("live", 3.2))
    assert "local: live, 3 ms" in window.sources_label.text()
    assert "gpu-box: retrying" in window.sources_label.text()


def test_host_key_question_from_a_worker_thread_runs_on_the_gui_thread(window, qtbot):
    import threading

    from resplot.ui.dialogs import HostKeyAsker

    seen = []
    asker = HostKeyAsker(
        window, answer=lambda h, t, f: seen.append(threading.current_thread()) or h == "trusted"
    )
    results = {}

    def worker():
        results["trusted"] = asker("trusted", "ssh-ed25519", "SHA256:abc")
        results["other"] = asker("other", "ssh-ed25519", "SHA256:def")

    thread = threading.Thread(target=worker)
    thread.start()
    qtbot.waitUntil(lambda: len(results) == 2, timeout=5000)
    thread.join()
    assert results == {"trusted": True, "other": False}
    assert seen == [threading.main_thread()] * 2
    assert [a[0] for a in asker.asked] == ["trusted", "other"]


# ---- chart layout (drawn headless with the same ChartPage the window uses) -------------------


@pytest.fixture
def one_run(tmp_path):
    """A store with one run of the given points, read into a cache: (cache, ref, state,
    fetch). `fetch` reads the tiles the charts ask for."""
    from resplot.data.state import ViewState
    from resplot.sources.polling import Loaded

    opened = []

    def make(points: dict[str, list[tuple[int, float]]]):
        path = tmp_path / f"one{len(opened)}.db"
        engine = new_store(path)
        make_run(engine, name="one", points=points)
        engine.dispose()
        loaded = Loaded([parse_spec(str(path))])
        opened.append(loaded)
        return loaded.cache, loaded.cache.runs()[0].ref, ViewState(), loaded.fetch

    yield make
    for loaded in opened:
        loaded.close()


def test_log_axis_spanning_decades_keeps_its_tick_labels_apart(one_run):
    from resplot.draw.charts import render

    # A gradient norm that dips to 1e-4 once: four decades on a log axis.
    norms = [(s, 1.0 + 0.2 * np.sin(s)) for s in range(500)]
    norms[100] = (100, 2e-4)
    cache, ref, state, fetch = one_run({"train/grad_norm": norms})
    page = render(cache, state, [ref], fetch=fetch)
    ax = page.axes[0]
    page.figure.canvas.draw()
    lo, hi = ax.get_ylim()
    fmt = ax.yaxis.get_major_formatter()
    locs = [v for v in ax.yaxis.get_majorticklocs() if lo <= v <= hi]
    shown = [fmt(v, i) for i, v in enumerate(locs) if fmt(v, i)]
    assert 3 <= len(shown) <= 8, shown


def test_legend_goes_where_the_data_is_not(one_run):
    from resplot.draw.charts import render

    # Rising curves: the upper right corner is full of data, the upper left is empty.
    cache, ref, state, fetch = one_run({"train/tokens_per_s": [(s, float(s)) for s in range(1000)]})
    state.smoothing = 0.0
    page = render(cache, state, [ref], fetch=fetch)
    legend = page.axes[0].get_legend()
    assert legend is not None
    assert legend._loc in (2, "upper left"), legend._loc


def test_after_a_zoom_the_legend_moves_at_once_to_the_new_empty_corner(one_run):
    from resplot.draw.charts import render

    cache, ref, state, fetch = one_run({"train/tokens_per_s": [(s, float(s)) for s in range(1000)]})
    state.smoothing = 0.0
    page = render(cache, state, [ref], fetch=fetch)
    ax = page.axes[0]
    assert ax.get_legend()._loc in (2, "upper left")
    # The user zooms into the start: the data now runs along the bottom, the top is empty.
    page.follow = False
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 1000)
    page.refresh(cache, state, [ref])
    assert ax.get_legend()._loc in (1, "upper right"), ax.get_legend()._loc


def test_timing_stack_parts_are_named_above_the_charts_not_on_them(one_run):
    from resplot.draw.charts import render

    steps = range(300)
    cache, ref, state, fetch = one_run(
        {
            "time/forward": [(s, 0.3) for s in steps],
            "time/backward": [(s, 0.6) for s in steps],
            "time/step": [(s, 1.0) for s in steps],
        }
    )
    state.page = "timing"
    page = render(cache, state, [ref], fetch=fetch)
    page.figure.canvas.draw()
    strip = page.strip.legend
    names = [t.get_text() for t in strip.get_texts()]
    assert {"data", "forward", "backward", "optimizer", "other"} <= set(names)
    box = strip.get_window_extent()
    for ax in page.axes:
        assert (
            ax.get_legend() is None
            or ax.get_legend().get_visible() is False
            or (page.specs[page.axes.index(ax)].kind == "line")
        )
        title = ax.title.get_window_extent()
        assert box.y0 >= title.y1 - 1, (box, title)
