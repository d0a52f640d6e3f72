"""The chart page's canvas (resplot/ui/page_view.py, PageCanvas) where it replaces
matplotlib's own code: which axes a mouse event is in."""

from __future__ import annotations

import numpy as np
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure

from resplot.ui.page_view import PageCanvas


def test_the_axes_under_the_pointer_are_matplotlibs(qtbot):
    """By each axes' box instead of its patch's path test: the same axes (or none) at every
    point of a page of charts, a hidden chart and two overlapping ones included."""
    figure = Figure(figsize=(8, 6), dpi=100)
    grid = figure.add_gridspec(3, 2)
    axes = [figure.add_subplot(grid[r, c]) for r in range(3) for c in range(2)]
    axes[3].set_visible(False)
    over = figure.add_axes((0.3, 0.3, 0.3, 0.3), zorder=axes[0].zorder)  # a tie: drawn last
    under = figure.add_axes((0.5, 0.5, 0.3, 0.3), zorder=-1)
    canvas = PageCanvas(figure)
    qtbot.addWidget(canvas)
    canvas.draw()
    xs = np.linspace(-5, 805, 55) + 0.37  # off every box's edge: they are fractional pixels
    ys = np.linspace(-5, 605, 41) + 0.29
    seen = set()
    for x in xs:
        for y in ys:
            mine = canvas.inaxes((x, y))
            assert mine is FigureCanvasBase.inaxes(canvas, (x, y)), (x, y)
            seen.add(id(mine))
    assert {id(over), id(under), id(None), id(axes[0])} <= seen
    assert id(axes[3]) not in seen  # hidden
