"""No silent limits on what a page shows: every matching key gets a chart (the page scrolls),
and an empty page says what is loading or what to do."""

from __future__ import annotations

import pytest

from resplot.data.cache import SeriesCache
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow
from tests.fixtures.stores import make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration


def test_sixty_keys_give_sixty_charts_on_a_scrolling_page(qtbot, tmp_path):
    path = tmp_path / "wide.db"
    engine = new_store(path)
    keys = [f"group{g}/metric{m}" for g in range(6) for m in range(10)]
    points = {k: [(s, float(s + i)) for s in range(0, 50, 5)] for i, k in enumerate(keys)}
    points["train/loss"] = [(s, 3.0) for s in range(0, 50, 5)]
    make_run(engine, name="wide", points=points)
    engine.dispose()
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1, size=(1280, 800))
    win.set_custom_keys("*")
    win.set_page("custom")
    settle(qtbot, win)
    page = win.current_page()
    assert len(page.specs) == 61 and len(page.axes) == 61
    assert {s.title for s in page.specs} == {*keys, "train/loss"}
    view = win.pages["custom"]
    # Taller than the window: the scroll area scrolls rather than squeeze 21 rows of charts.
    assert view.canvas.minimumHeight() > view.scroll.viewport().height()
    assert view.scroll.verticalScrollBar().maximum() > 0
    rows = page.grid.rows
    heights = {round(ax.bbox.height) for ax in page.axes}
    assert rows == 21 and min(heights) >= 100, heights
    win.close()


def test_an_empty_page_says_what_is_loading_then_what_to_do(qtbot, tmp_path):
    settings = settings_mod.Settings()
    settings.state.add_source(str(tmp_path / "not-yet.db"))
    win = MainWindow(SeriesCache(), settings, tmp_path / "settings.json")  # no poller yet
    qtbot.addWidget(win)
    win.redraw_now()
    text = win.current_page().message.get_text()
    assert text.startswith("Loading runs from") and "not-yet.db" in text
    assert "No series" not in text
    win.close()


def test_with_no_run_ticked_the_page_says_how_to_plot_one(qtbot, tmp_path):
    path = tmp_path / "one.db"
    engine = new_store(path)
    make_run(engine, name="r", points={"train/loss": [(0, 3.0), (1, 2.9)]})
    engine.dispose()
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    win.table.tick_visible("none")
    settle(qtbot, win)
    assert "tick runs" in win.current_page().message.get_text()
    win.close()


def test_a_chart_is_pinned_to_the_custom_page_and_stays_there(qtbot, tmp_path):
    path = tmp_path / "pin.db"
    engine = new_store(path)
    make_run(
        engine,
        name="r",
        points={
            "train/loss": [(s, 3.0 - 0.01 * s) for s in range(50)],
            "train/grad_norm": [(s, 1.0) for s in range(50)],
        },
    )
    engine.dispose()
    settings = tmp_path / "settings.json"
    win = open_window(qtbot, [path], settings, runs=1)
    win.set_custom_keys("sys/*")
    page = win.current_page()
    index = [s.title for s in page.specs].index("Gradient norm")
    menu = win.pages["training"].chart_menu(index)
    (action,) = menu.actions()
    assert "train/grad_norm" in action.text()
    action.trigger()
    assert win.state.custom_keys == ["sys/*", "train/grad_norm"]
    win.set_page("custom")
    settle(qtbot, win)
    assert [s.title for s in win.current_page().specs] == ["train/grad_norm"]
    win.close()
    assert settings_mod.load(settings).state.custom_keys == ["sys/*", "train/grad_norm"]


def _charts(win) -> list[str]:
    return [s.title for s in win.current_page().specs if s.kind != "section"]


def _cards(win) -> list[str]:
    return [s.title for s in win.current_page().specs if s.kind == "section"]


def test_the_all_metrics_page_shows_every_key_in_sections_and_searches_them(qtbot, tmp_path):
    from PyQt5.QtCore import QPoint, Qt

    from resplot.ui import settings as settings_mod

    path = tmp_path / "many.db"
    engine = new_store(path)
    keys = [f"{g}/metric{m}" for g in ("eval", "sys", "train") for m in range(8)] + ["epoch"]
    make_run(
        engine, name="many", points={k: [(s, float(s)) for s in range(0, 30, 3)] for k in keys}
    )
    engine.dispose()
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    win.set_page("all")
    settle(qtbot, win)
    view, page = win.pages["all"], win.current_page()
    assert _charts(win) == sorted(keys, key=lambda k: ("/" not in k, k))
    assert _cards(win) == [
        "▾ eval · 8 charts",
        "▾ sys · 8 charts",
        "▾ train · 8 charts",
        "▾ (no prefix) · 1 chart",
    ]
    # Each section's card begins a row of the grid, its charts follow it.
    for ax, spec in zip(page.axes, page.specs, strict=True):
        if spec.kind == "section":
            assert ax.get_subplotspec().colspan.start == 0, spec.title
    assert view.count.text() == "showing 25 of 25 keys"
    # A click on a card folds its section (kept in the settings), another unfolds it.
    card = page.axes[[s.title for s in page.specs].index("▾ sys · 8 charts")]
    ratio = view.canvas.device_pixel_ratio or 1.0
    x, y = card.bbox.x0 + card.bbox.width / 2, card.bbox.y0 + card.bbox.height / 2
    at = QPoint(int(x / ratio), int((page.figure.bbox.height - y) / ratio))
    view.scroll.ensureVisible(at.x(), at.y())
    qtbot.mouseClick(view.canvas, Qt.LeftButton, pos=at)
    settle(qtbot, win)
    assert "▸ sys · 8 charts" in _cards(win) and not any(c.startswith("sys/") for c in _charts(win))
    win.save_settings()
    assert settings_mod.load(tmp_path / "settings.json").state.collapsed_sections == ["sys"]
    win.toggle_section("sys")
    settle(qtbot, win)
    # The search: a regular expression per word, every one of which a key must match.
    view.search.setText("TRAIN metric1")
    settle(qtbot, win)
    assert _charts(win) == ["train/metric1"]
    view.search.setText("^(eval|sys)/metric[0-2]$")
    settle(qtbot, win)
    assert _charts(win) == [f"{g}/metric{m}" for g in ("eval", "sys") for m in range(3)]
    view.search.setText("metric[")  # not a regex: matched as text, and said
    settle(qtbot, win)
    assert "not a regex" in view.count.text() and "showing 0 of 0 keys" in view.count.text()
    view.search.setText("nothing-like-this")
    settle(qtbot, win)
    assert "No key of the plotted runs contains" in win.current_page().message.get_text()
    assert win.tabs.tabText(win.tabs.currentIndex()) == "All metrics"
    win.close()


def test_more_keys_than_the_all_page_draws_are_counted_not_hidden(qtbot, tmp_path):
    from resplot.data.pages import MAX_ALL_PANELS

    path = tmp_path / "wider.db"
    engine = new_store(path)
    keys = [f"k/{i:03d}" for i in range(MAX_ALL_PANELS + 5)]
    make_run(engine, name="w", points={k: [(0, 1.0), (1, 2.0)] for k in keys})
    engine.dispose()
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    win.set_page("all")
    settle(qtbot, win)
    assert len(_charts(win)) == MAX_ALL_PANELS
    total = MAX_ALL_PANELS + 5
    assert win.pages["all"].count.text() == (
        f"showing {MAX_ALL_PANELS} of {total} keys; search to narrow"
    )
    win.close()


def test_a_section_card_is_a_band_above_its_charts_not_a_chart_slot(tmp_path):
    """On All metrics each section's card took a whole chart's cell (180 px of a 1280x800
    page for one line of text). It is a band across the page, BAND_PX high, above its charts;
    the charts keep their height (the page scrolls from the same minimum height a chart)."""
    from matplotlib.figure import Figure

    from resplot.data import layout
    from resplot.data.cache import SeriesCache
    from resplot.data.state import ViewState
    from resplot.draw.charts import ChartPage
    from resplot.sources import open_source, parse_spec

    path = tmp_path / "many.db"
    engine = new_store(path)
    keys = [f"{g}/metric{m}" for g in ("eval", "sys", "train") for m in range(5)]
    make_run(engine, name="r", points={k: [(s, float(s)) for s in range(0, 30, 3)] for k in keys})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="all")
        state.assign_looks(refs)
        page = ChartPage("all", Figure(figsize=(12.8, 8), dpi=100), strip_in_figure=False)
        page.refresh(cache, state, refs)
        # The window gives the canvas the page's minimum height (it scrolls): the same here.
        page.figure.set_size_inches(12.8, max(8, page.min_height() / 100))
        page.replace_axes()
        page.refresh(cache, state, refs)
        cards = [ax for ax, s in zip(page.axes, page.specs, strict=True) if s.kind == "section"]
        charts = page.chart_axes()
        assert len(cards) == 3 and len(charts) == 15
        chart_h = min(ax.get_window_extent().height for ax in charts)
        assert chart_h >= layout.MIN_ROW_PX - 1
        left = min(ax.get_window_extent().x0 for ax in charts)
        right = max(ax.get_window_extent().x1 for ax in charts)
        for card, spec in zip(cards, [s for s in page.specs if s.kind == "section"], strict=True):
            box = card.get_window_extent()
            assert box.height <= 40, (spec.title, box.height, chart_h)  # a line of text
            assert abs(box.height - layout.BAND_PX) <= 1
            assert box.x0 <= left + 1 and box.x1 >= right - 1  # across the page
            # Its charts are below it, none beside it.
            mine = [
                ax
                for ax, s in zip(page.axes, page.specs, strict=True)
                if s.kind == "line" and s.section == spec.section
            ]
            assert mine and all(ax.get_window_extent().y1 < box.y0 for ax in mine)
            assert all(
                ax.get_window_extent().y1 < box.y0 or ax.get_window_extent().y0 > box.y1
                for ax in charts
            )
    finally:
        source.close()
