"""A chart page's back and forward views, bounded (resplot/ui/view_history.py): matplotlib's
toolbar kept a view of every axes at each zoom and pan for as long as the page was shown."""

from __future__ import annotations

import gc
import weakref

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PyQt5.QtCore import QPoint, Qt
from PyQt5.QtTest import QTest
from PyQt5.QtWidgets import QWidget

from resplot.ui.page_view import page_toolbar
from resplot.ui.view_history import ViewHistory


def _figure():
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    a, b = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    hidden = fig.add_axes((0, 0, 1, 1))
    hidden.set_navigate(False)
    for ax in (a, b):
        ax.plot(np.arange(100), np.arange(100))
    return fig, a, b, hidden


def test_the_history_keeps_home_and_the_last_views_only():
    fig, a, b, _hidden = _figure()
    history = ViewHistory(held=5)
    history.push(fig)
    home = a.get_xlim()
    for k in range(1, 21):
        a.set_xlim(k, k + 10)
        history.push(fig)
        history.push(fig)  # the same view again: not a second entry
    assert len(history.views) == 6 and history.at == 5
    assert all(len(view) == 2 for view in history.views)  # the navigable axes only
    assert history.back() and a.get_xlim() == (19, 29)
    assert history.forward() and a.get_xlim() == (20, 30)
    assert not history.can_forward()
    assert history.home() and a.get_xlim() == home and not history.can_back()
    # A view pushed after going back drops the views forward of it.
    history.forward()
    a.set_xlim(50, 60)
    history.push(fig)
    assert history.at == 2 and not history.can_forward()
    # An axes taken out of the figure since is left alone, and not kept alive.
    fig.delaxes(b)
    b.set_xlim(-5, -1)
    assert history.home() and b.get_xlim() == (-5, -1) and a.get_xlim() == home
    gone = weakref.ref(b)
    del b
    gc.collect()
    assert gone() is None and len(history.views[0]) == 2  # held weakly
    history.clear()
    assert not history.home() and history.views == []


def test_the_toolbar_zooms_into_its_bounded_history(qtbot):
    from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg

    parent = QWidget()
    qtbot.addWidget(parent)
    fig = Figure(figsize=(6, 4), dpi=100)
    canvas = FigureCanvasQTAgg(fig)
    canvas.setParent(parent)
    ax = fig.add_subplot()
    ax.plot(np.arange(100), np.arange(100))
    toolbar = page_toolbar(canvas, parent, page=None)
    assert not hasattr(toolbar, "history")  # the Ranks page's: matplotlib's own
    from resplot.ui.page_view import ChartToolbar

    toolbar = ChartToolbar(canvas, parent, coordinates=False)
    toolbar.history.held = 3
    parent.resize(600, 400)
    canvas.resize(600, 400)
    parent.show()
    qtbot.waitExposed(parent)
    canvas.draw()
    back = next(a for a in toolbar.actions() if a.text() == "Back")
    assert not back.isEnabled()

    def drag_zoom(x0: int, x1: int) -> None:
        y = canvas.height() // 2
        QTest.mousePress(canvas, Qt.LeftButton, Qt.NoModifier, QPoint(x0, y))
        QTest.mouseMove(canvas, QPoint(x1, y + 40))
        QTest.mouseRelease(canvas, Qt.LeftButton, Qt.NoModifier, QPoint(x1, y + 40))

    toolbar.zoom()
    start = ax.get_xlim()
    for k in range(6):
        drag_zoom(150 + 10 * k, 420 - 10 * k)
    zoomed = ax.get_xlim()
    assert zoomed[1] - zoomed[0] < start[1] - start[0]
    assert len(toolbar.history.views) == 4  # Home and the last three zooms
    assert back.isEnabled()
    toolbar.home()
    assert ax.get_xlim() == start and not back.isEnabled()
    toolbar.forward()
    assert ax.get_xlim() != start
    toolbar.release()  # the page given back: no view held
    assert toolbar.history.views == [] and not back.isEnabled()
