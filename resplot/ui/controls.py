"""The window's toolbar and menus (File, Export, View, Help), built on a MainWindow whose
methods they call; kept apart from the window's own logic (resplot/ui/window.py)."""

from __future__ import annotations

from PyQt5.QtCore import Qt
from PyQt5.QtWidgets import (
    QAction,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QToolBar,
)

from resplot.data.marks import EVENT_KINDS, EVENT_RUNS_MAX
from resplot.data.state import X_AXES
from resplot.ui import shortcuts
from resplot.ui.export_menu import add_export_menu


def build_toolbar(win) -> None:
    """The view controls of `win` (a MainWindow): polling, x axis, smoothing, y axis, follow
    data. They sit in the menu bar's row, right of the menus: a toolbar row of its own took
    30 px of a laptop's height from the charts. (Adding a source is in the File menu; the
    Custom page's key globs are on that page.)"""
    bar = QToolBar("View", win)
    bar.setObjectName("view-toolbar")
    bar.setStyleSheet("QToolBar { padding: 0px; spacing: 2px; border: 0px; }")
    win.menuBar().setCornerWidget(bar, Qt.TopRightCorner)
    win.view_toolbar = bar
    bar.addWidget(QLabel(" Poll every ", win))
    win.poll_spin = QDoubleSpinBox(win)
    win.poll_spin.setRange(0.2, 3600.0)
    win.poll_spin.setDecimals(1)
    win.poll_spin.setSuffix(" s")
    win.poll_spin.valueChanged.connect(win.set_poll_interval)
    bar.addWidget(win.poll_spin)
    win.pause_action = bar.addAction("Pause")
    win.pause_action.setCheckable(True)
    win.pause_action.toggled.connect(win.set_paused)
    bar.addSeparator()
    bar.addWidget(QLabel(" x: ", win))
    win.x_combo = QComboBox(win)
    win.x_combo.addItems(X_AXES)
    win.x_combo.setToolTip(
        "x axis: auto (each run's define_metric step metric or step counter — train/global_step,"
        " iter — else its step), step, time, tokens, or a logged counter (key:iter…)"
    )
    win.x_combo.currentTextChanged.connect(win.set_x_axis)
    bar.addWidget(win.x_combo)
    bar.addWidget(QLabel(" smoothing: ", win))
    win.smooth_spin = QDoubleSpinBox(win)
    win.smooth_spin.setRange(0.0, 0.999)
    win.smooth_spin.setDecimals(3)
    win.smooth_spin.setSingleStep(0.05)
    win.smooth_spin.valueChanged.connect(win.set_smoothing)
    bar.addWidget(win.smooth_spin)
    win.log_check = QCheckBox("log y", win)
    win.log_check.toggled.connect(win.set_log_y)
    bar.addWidget(win.log_check)
    win.outliers_check = QCheckBox("ignore outliers", win)
    win.outliers_check.setToolTip("Loss charts: y range without the top 1 % of values")
    win.outliers_check.toggled.connect(win.set_ignore_outliers)
    bar.addWidget(win.outliers_check)
    bar.addSeparator()
    bar.addAction("Follow data", win.reset_view).setToolTip(
        "Autoscale to all data again after zooming or panning"
    )


def build_menus(win) -> None:
    """File, Export, View and Help."""
    file_menu = win.file_menu = win.menuBar().addMenu("&File")
    win.add_source_action = file_menu.addAction("Add source…", win._ask_add_source)
    win.add_source_action.setShortcut("Ctrl+O")
    remove = QAction("Remove selected source", win)
    remove.triggered.connect(win._remove_selected_source)
    file_menu.addAction(remove)
    add_export_menu(win, win.menuBar().addMenu("&Export"))
    file_menu.addSeparator()
    file_menu.addAction("Quit", win.close)
    view = win.view_menu = win.menuBar().addMenu("&View")
    view.addAction("Sources tree (Ctrl+B)", win.toggle_tree)
    view.addAction("Run table (Ctrl+T)", win.toggle_table)
    view.addSeparator()
    events = view.addMenu("Event markers")
    events.setToolTipsVisible(True)
    win.event_actions = {}
    for kind in EVENT_KINDS:
        action = events.addAction(f"{kind.capitalize()}s")
        action.setCheckable(True)
        action.setToolTip(
            f"vertical lines at {kind}s; with more than {EVENT_RUNS_MAX} runs on a "
            "chart, of the highlighted or selected runs only"
        )
        action.toggled.connect(lambda on, k=kind: win.show_events(k, on))
        win.event_actions[kind] = action
    win.by_name_action = view.addAction("Hover readout sorted by name (Ctrl+R)")
    win.by_name_action.setCheckable(True)
    win.by_name_action.setToolTip("otherwise by value, as the lines cross the pointer")
    win.by_name_action.toggled.connect(lambda on: win.set_hover_order("name" if on else "value"))
    shortcuts.install(win, win.menuBar().addMenu("&Help"))
