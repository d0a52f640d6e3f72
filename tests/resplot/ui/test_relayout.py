"""A resize that changes a page's grid (its columns) moves the charts to their new cells, their
series, artists and view kept (ChartPage._relayout), and draws what the page built anew at that
size draws. The real MainWindow (offscreen) over a real SQLite store, as in test_layers.py.
"""
# ruff: noqa: F811 (test_layers.py's fixtures, imported, are the tests' arguments)

from __future__ import annotations

import pytest

from resplot.draw import legends
from tests.resplot.ui.test_layers import (  # noqa: F401 (loaded, window: the fixtures)
    _assert_same_pixels,
    _full_draw_rows,
    _shown_rows,
    loaded,
    show,
    window,
)

pytestmark = pytest.mark.integration


def _lines(page) -> list:
    return [t.line for tracks in page.tracks for t in tracks.values()]


def test_a_resize_to_another_grid_moves_the_charts_and_draws_them_as_built_anew(
    window, loaded, monkeypatch
):
    # A live chart's legend is re-placed at most every LEGEND_REPLACE_S as it moves: resized
    # in more than one step (Qt's layout), its corner would be that of the size before.
    monkeypatch.setattr(legends, "LEGEND_REPLACE_S", 0.0)
    show(window, loaded, "all")
    view = window.page_view()
    page = view.page
    grid, axes, lines = page.grid, list(page.axes), _lines(page)
    window.resize(900, 800)  # (the fixture's 1280×800: 3 columns)
    show(window, loaded)
    assert page.grid.cols != grid.cols
    assert page.axes == axes and _lines(page) == lines  # the same charts and series
    moved = _full_draw_rows(view)
    labels = [ax.get_xlabel() for ax in page.axes]
    page.release()  # built anew at this size, in the same scroll
    show(window, loaded)
    assert page.axes[0] is not axes[0]
    _assert_same_pixels(moved, _full_draw_rows(view))
    assert [ax.get_xlabel() for ax in page.axes] == labels


def test_a_resize_to_another_grid_keeps_a_zoomed_view(window, loaded):
    """A page built anew followed the data again: a resize past a column's width lost the
    user's zoom."""
    show(window, loaded, "all")
    view = window.page_view()
    page = view.page
    ax = page.chart_axes()[0]
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo + 0.2 * (hi - lo), lo + 0.7 * (hi - lo))
    show(window, loaded)
    grid, xlim = page.grid, ax.get_xlim()
    window.resize(900, 800)
    show(window, loaded)
    assert page.grid.cols != grid.cols
    assert not page.follow and page.chart_axes()[0] is ax and ax.get_xlim() == xlim
    shown = [i for i in view.layers.in_view() if page.specs[i].kind != "section"]
    for i in shown:  # the charts in view refreshed for the zoomed range at their new width
        views = [t.view for t in page.tracks[i].values() if t.view is not None]
        assert views and all(v.steps[0] >= xlim[0] - 50 for v in views)
    _assert_same_pixels(_shown_rows(view), _full_draw_rows(view))
