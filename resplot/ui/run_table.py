"""The window's run table: one row per run (tick box and colour, status, step, the page's
metrics, then the config keys that differ), filtered by text and by status. It reads the cache
and the view state only (never a store), so a refresh is cheap and runs on the GUI thread.
"""

from __future__ import annotations

import math
import time
from typing import Any

from PyQt5.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QSortFilterProxyModel,
    Qt,
    pyqtSignal,
)
from PyQt5.QtGui import QBrush, QColor
from PyQt5.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLineEdit,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from reslog.tools.export import format_cell
from resplot.data.alerts import LEVELS, Alert
from resplot.data.cache import SeriesCache
from resplot.data.colors import status_color
from resplot.data.model import RunInfo, RunRef
from resplot.data.names import distinct_part
from resplot.data.state import ViewState
from schema.compare import (
    differing_config,
    duration_s,
    family_keys,
    flatten,
    gpu_hours,
    last_step,
    metric_stats,
)

MAX_COLUMN_PX = 240
MAX_NAME_PX = 320  # the run's name: the column that tells runs apart gets the most room


def _stats(cache: SeriesCache, ref: RunRef, key: str) -> tuple[float | None, float | None]:
    """(last value, smallest finite value) of a series, from its summary."""
    summary = cache.summary(ref, key)
    last, low, _at = metric_stats(summary.agg if summary is not None else None)
    return last, (None if low is not None and math.isnan(low) else low)


class RunTableModel(QAbstractTableModel):
    """One row per run in the cache; column 0 holds the tick box and the run's colour."""

    tickedChanged = pyqtSignal(object, bool)  # RunRef, ticked

    # How each run is doing comes first (status, step, the page's metrics, alerts), then the
    # config keys that differ: runs of mixed projects differ in 29 of them, which pushed every
    # metric out of sight. The column chooser (right-click a column head) hides any column.
    HEAD = ("run", "status", "step")
    MIDDLE = ("alerts",)
    TAIL = ("tokens/s", "duration", "GPU-hours", "host")

    def __init__(self, cache: SeriesCache, state: ViewState) -> None:
        super().__init__()
        self.cache, self.state = cache, state
        self.runs: list[RunInfo] = []
        self.headers: list[str] = [*self.HEAD, *self.MIDDLE]
        self.rows: list[list[Any]] = []
        self.alerts: dict[RunRef, list[Alert]] = {}
        self.config_keys: list[str] = []
        # Each name without the words every run's name shares (RunNameDelegate's second try).
        self.short_names: dict[str, str] = {}

    def refresh(self, alerts: dict[RunRef, list[Alert]], now: float | None = None) -> None:
        now = time.time() if now is None else now
        runs = self.cache.runs()
        self.alerts = alerts
        ticked = [r for r in runs if self.state.is_ticked(r.ref)]
        self.config_keys = differing_config(ticked if len(ticked) >= 2 else runs)
        headers = list(self.HEAD)
        for m in self.state.table_metrics:
            headers += [f"{m} last", f"{m} min"]
        headers += [*self.MIDDLE, *self.config_keys, *self.TAIL]
        rows = [self._row(run, now, headers) for run in runs]
        names = [run.name for run in runs]
        self.short_names = {n: distinct_part(n, names) for n in names}
        if headers != self.headers:
            self.beginResetModel()
            self.runs, self.headers, self.rows = runs, headers, rows
            self.endResetModel()
            return
        if not self._move_rows(runs, rows):
            self.beginResetModel()
            self.runs, self.rows = runs, rows
            self.endResetModel()
            return
        self.runs, self.rows = runs, rows
        if rows:
            last = self.index(len(rows) - 1, len(headers) - 1)
            self.dataChanged.emit(self.index(0, 0), last)

    def _move_rows(self, runs: list[RunInfo], rows: list[list[Any]]) -> bool:
        """Go from the rows shown to `runs` by removing and inserting rows, each announced as
        Qt's model rules say (begin/endRemoveRows, begin/endInsertRows), so that a selection
        and the filter's sorted order survive a run arriving; False when the runs that stay
        changed their order (the caller resets instead)."""
        new = [r.ref for r in runs]
        wanted = set(new)
        for i in reversed(range(len(self.runs))):
            if self.runs[i].ref not in wanted:
                self.beginRemoveRows(QModelIndex(), i, i)
                del self.runs[i], self.rows[i]
                self.endRemoveRows()
        kept = {r.ref for r in self.runs}
        if [r.ref for r in self.runs] != [ref for ref in new if ref in kept]:
            return False
        for i, ref in enumerate(new):
            if ref not in kept:
                self.beginInsertRows(QModelIndex(), i, i)
                self.runs.insert(i, runs[i])
                self.rows.insert(i, rows[i])
                self.endInsertRows()
        return True

    def looks_changed(self) -> None:
        """Tick boxes or colours changed (the view state's, not the model's rows): repaint
        column 0. A bare layoutChanged here (what this replaced) told the filter proxy that
        rows had moved without layoutAboutToBeChanged first, leaving it stale persistent
        indexes: a click on a row then crashed the window (SIGSEGV)."""
        if self.rows:
            roles = [Qt.CheckStateRole, Qt.DecorationRole]
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, 0), roles)

    def _row(self, run: RunInfo, now: float, headers: list[str]) -> list[Any]:
        ref = run.ref
        alerts = self.alerts.get(ref, [])
        summaries = self.cache.summaries(ref)
        cells: dict[str, Any] = {
            "run": run.name,
            "status": run.status,
            "alerts": alerts[0].message if alerts else "",
            "step": last_step({k: s.agg for k, s in summaries.items()}),
            "tokens/s": _stats(self.cache, ref, "train/tokens_per_s")[0],
            "duration": f"{duration_s(run) / 3600.0:.2f} h",
            # The export's rule (schema.compare): GPUs seen in telemetry, else no GPU-hours.
            "GPU-hours": gpu_hours(run, summaries),
            "host": run.host or ref.source,
        }
        for m in self.state.table_metrics:
            # "valid/loss" shows the run's val/, eval/ or validation/ loss when that is what it has
            key = next(iter(family_keys(m, summaries)), m)
            cells[f"{m} last"], cells[f"{m} min"] = _stats(self.cache, ref, key)
        flat = flatten(run.config)
        cells.update({k: flat.get(k) for k in self.config_keys})
        return [cells.get(h) for h in headers]

    # -- Qt model API -------------------------------------------------------------------------
    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return self.headers[section]
        return None

    def flags(self, index: QModelIndex):
        if not index.isValid():
            return Qt.NoItemFlags  # the root (Qt's model tester holds us to it)
        base = Qt.ItemIsEnabled | Qt.ItemIsSelectable
        return base | Qt.ItemIsUserCheckable if index.column() == 0 else base

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole):
        if not index.isValid():
            return None
        run, value = self.runs[index.row()], self.rows[index.row()][index.column()]
        col = index.column()
        if role == Qt.DisplayRole:
            if isinstance(value, float) and self.headers[col] == "tokens/s":
                return f"{value:,.0f}"  # 440,312 rather than 4.403e+05
            return "" if value is None else value if isinstance(value, str) else format_cell(value)
        if role == Qt.UserRole:  # sort key: numbers as numbers
            return value if isinstance(value, (int, float)) else str(value or "")
        if role == Qt.CheckStateRole and col == 0:
            return Qt.Checked if self.state.is_ticked(run.ref) else Qt.Unchecked
        if role == Qt.DecorationRole and col == 0:
            return QColor(self.state.look(run.ref).color)
        header = self.headers[col]
        if role == Qt.ForegroundRole and header == "status":
            return QBrush(QColor(status_color(run.status)))
        if role == Qt.ToolTipRole and col == 0:
            return f"{run.name}\n{run.ref.uid}\n{run.ref.source}: {run.ref.store}"
        alerts = self.alerts.get(run.ref, [])
        if role == Qt.ToolTipRole and header == "alerts" and alerts:
            return "\n".join(
                f"[{a.level}] {a.message}" + (f"\n{a.detail}" if a.detail else "") for a in alerts
            )
        if role == Qt.BackgroundRole and header == "alerts" and alerts:
            worst = max(LEVELS.get(a.level, 1) for a in alerts)
            return QBrush(QColor("#f8d0d0" if worst >= 2 else "#fbe9c8"))
        return None

    def setData(self, index: QModelIndex, value, role: int = Qt.EditRole) -> bool:
        if role != Qt.CheckStateRole or index.column() != 0:
            return False
        ref = self.runs[index.row()].ref
        on = value == Qt.Checked or value is True
        self.state.set_ticked(ref, on)
        self.dataChanged.emit(index, index, [Qt.CheckStateRole])
        self.tickedChanged.emit(ref, on)
        return True

    def row_of(self, ref: RunRef) -> int:
        return next(i for i, r in enumerate(self.runs) if r.ref == ref)


class RunNameDelegate(QStyledItemDelegate):
    """The run column: a name that does not fit loses the words every run's name shares before
    anything else, and only then its middle. Eliding the end (or the middle) of
    `llama-125m-wsd-lr3e-4-wd0.1-seed3-bs512-ctx2048` cut the part that tells sweep runs apart,
    even at 1920 px."""

    def __init__(self, model: RunTableModel, parent: QWidget) -> None:
        super().__init__(parent)
        self.model = model

    def initStyleOption(self, option, index) -> None:
        super().initStyleOption(option, index)
        name = option.text
        if not name or option.rect.width() <= 0:
            return  # measured for its size hint (the column fits the whole name), not painted
        style = option.widget.style() if option.widget is not None else None
        text_rect = (
            style.subElementRect(QStyle.SE_ItemViewItemText, option, option.widget)
            if style is not None else option.rect
        )  # fmt: skip
        room = text_rect.width() - 2
        metrics = option.fontMetrics
        if metrics.horizontalAdvance(name) <= room:
            return
        short = self.model.short_names.get(name, name)
        option.text = metrics.elidedText(short, Qt.ElideMiddle, room)


class _Filter(QSortFilterProxyModel):
    """Rows whose name, host, status, alerts or config values contain every word typed."""

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:
        words = self.filterRegExp().pattern().lower().split()
        if not words:
            return True
        model: RunTableModel = self.sourceModel()
        text = " ".join(str(v) for v in model.rows[row] if v is not None).lower()
        run = model.runs[row]
        text += f" {run.ref.uid} {run.project} {' '.join(run.tags)}".lower()
        return all(w in text for w in words)


class RunTable(QWidget):
    """Filter box + table of runs."""

    columnsChanged = pyqtSignal()  # the column chooser hid or showed a column

    def __init__(self, model: RunTableModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.proxy = _Filter(self)
        self.proxy.setSourceModel(model)
        self.proxy.setSortRole(Qt.UserRole)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("filter runs (name, host, status, config values)…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.set_filter)
        buttons = QHBoxLayout()
        buttons.addWidget(self.filter, 1)
        for text, how, tip in (
            ("All", "all", "plot every run the filter shows"),
            ("None", "none", "hide every run the filter shows"),
            ("Invert", "invert", "swap plotted and hidden among the runs the filter shows"),
        ):
            button = QToolButton(self)
            button.setText(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _c=False, h=how: self.tick_visible(h))
            buttons.addWidget(button)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.view.verticalHeader().setVisible(False)
        self.view.horizontalHeader().setStretchLastSection(True)
        self.view.setAlternatingRowColors(True)
        self.view.setTextElideMode(Qt.ElideMiddle)  # sweep names differ at both ends
        self.view.setItemDelegateForColumn(0, RunNameDelegate(model, self.view))
        header = self.view.horizontalHeader()
        header.setContextMenuPolicy(Qt.CustomContextMenu)
        header.customContextMenuRequested.connect(lambda pos: self.column_menu().exec_(
            header.mapToGlobal(pos)))  # fmt: skip
        # Compact rows: at 1280×800 the default height showed 4 runs of a 9-run sweep.
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        model.modelReset.connect(self._fit_columns)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.view)

    def height_for(self, rows: int) -> int:
        """The pane's height that shows `rows` runs (filter box, column heads, rows)."""
        header = self.view.horizontalHeader().sizeHint().height()
        row = self.view.verticalHeader().defaultSectionSize()
        # The columns of a sweep overflow a laptop's width: room for the scroll bar too.
        scrollbar = self.view.horizontalScrollBar().sizeHint().height()
        frame = 2 * self.view.frameWidth()
        spacing = max(0, self.layout().spacing())
        return self.filter.sizeHint().height() + spacing + header + rows * row + scrollbar + frame

    def focus_filter(self) -> None:
        self.filter.setFocus()
        self.filter.selectAll()

    def _fit_columns(self) -> None:
        """Columns as wide as their contents, but none wider than MAX_COLUMN_PX (an alert's
        message or a long name is elided; its tooltip has all of it); the hidden ones hidden."""
        self.view.resizeColumnsToContents()
        hidden = set(self.model.state.hidden_columns)
        for col, name in enumerate(self.model.headers):
            self.view.setColumnHidden(col, name in hidden and col > 0)
            widest = MAX_NAME_PX if col == 0 else MAX_COLUMN_PX
            if self.view.columnWidth(col) > widest:
                self.view.setColumnWidth(col, widest)

    def column_menu(self) -> QMenu:
        """The column chooser: every column but the run's name, ticked when shown."""
        menu = QMenu(self)
        hidden = set(self.model.state.hidden_columns)
        for name in self.model.headers[1:]:
            action = menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(name not in hidden)
            action.toggled.connect(lambda on, n=name: self.show_column(n, on))
        menu.addSeparator()
        menu.addAction("Show every column", lambda: self.show_column(None, True))
        return menu

    def show_column(self, name: str | None, on: bool) -> None:
        """Show or hide a column by its head (None: every column), kept in the view state."""
        state = self.model.state
        if name is None:
            state.hidden_columns = []
        elif on:
            state.hidden_columns = [h for h in state.hidden_columns if h != name]
        elif name not in state.hidden_columns:
            state.hidden_columns = [*state.hidden_columns, name]
        self._fit_columns()
        self.columnsChanged.emit()

    def set_filter(self, text: str) -> None:
        self.model.state.filter_text = text
        self.proxy.setFilterRegExp(text)
        if self.filter.text() != text:
            self.filter.setText(text)

    def visible_refs(self) -> list[RunRef]:
        rows = (
            self.proxy.mapToSource(self.proxy.index(i, 0)).row()
            for i in range(self.proxy.rowCount())
        )
        return [self.model.runs[r].ref for r in rows]

    def tick_visible(self, how: str) -> None:
        """Tick ("all"), untick ("none") or flip ("invert") every run the filter shows."""
        for ref in self.visible_refs():
            on = {"all": True, "none": False}.get(how, not self.model.state.is_ticked(ref))
            if on != self.model.state.is_ticked(ref):
                index = self.model.index(self.model.row_of(ref), 0)
                self.model.setData(index, Qt.Checked if on else Qt.Unchecked, Qt.CheckStateRole)

    def select(self, ref: RunRef) -> None:
        """Select and show the run's row (when the filter shows it)."""
        try:
            row = self.model.row_of(ref)
        except StopIteration:
            return
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if index.isValid():
            self.view.selectRow(index.row())
            self.view.scrollTo(index)

    def selected_refs(self) -> list[RunRef]:
        rows = {self.proxy.mapToSource(i).row() for i in self.view.selectionModel().selectedRows()}
        return [self.model.runs[r].ref for r in sorted(rows)]
