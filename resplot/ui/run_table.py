"""The window's run table: one row per run (tick box and colour, status, step, the page's
metrics, then the config keys that differ), a multi-rank job one row that unfolds into its hosts
and ranks (resplot/ui/run_table_model.py), filtered by text. It reads the cache and the view
state only (never a store), so a refresh is cheap and runs on the GUI thread.
"""

from __future__ import annotations

from PyQt5.QtCore import (
    QItemSelectionModel,
    QModelIndex,
    QSize,
    QSortFilterProxyModel,
    Qt,
    pyqtSignal,
)
from PyQt5.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLineEdit,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from reslog.text import safe
from resplot.data.model import RunRef
from resplot.ui.run_table_model import RunTableModel

MAX_COLUMN_PX = 240
MAX_NAME_PX = 320  # the run's name: the column that tells runs apart gets the most room


# Size hints kept per delegate (by what they are measured from); past this many, forgotten.
HINTS_KEPT = 4096


class CompactDelegate(QStyledItemDelegate):
    """Rows a line of text high: at 1280×800 the default height showed 4 runs of a 9-run sweep.

    A cell's size hint is kept by what it is measured from (its column, text, tick box and
    font): the view asks for every cell of its first row again at each change in that row
    (Qt's QTreeView refits its uniform row height there), ~0.1 ms a cell measured anew."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._hints: dict[tuple, QSize] = {}

    def sizeHint(self, option, index) -> QSize:
        key = (
            index.column(),
            index.data(Qt.DisplayRole),
            index.data(Qt.CheckStateRole),
            option.font.key(),
        )
        hint = self._hints.get(key)
        if hint is None:
            if len(self._hints) >= HINTS_KEPT:
                self._hints.clear()
            size = super().sizeHint(option, index)
            hint = self._hints[key] = QSize(size.width(), option.fontMetrics.height() + 4)
        return QSize(hint)


class RunNameDelegate(CompactDelegate):
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
            if style is not None
            else option.rect
        )
        room = text_rect.width() - 2
        metrics = option.fontMetrics
        if metrics.horizontalAdvance(name) <= room:
            return
        short = self.model.short_names.get(name)
        if short is None and name.endswith(")") and " (" in name:
            # A job's row, `NAME (4 ranks, 2 hosts)`: its name gives way, not its size.
            head, tail = name.rsplit(" (", 1)
            tail = f" ({tail}"
            left = room - metrics.horizontalAdvance(tail)
            if left > metrics.horizontalAdvance("…") * 4:
                option.text = metrics.elidedText(head, Qt.ElideMiddle, left) + tail
                return
        option.text = metrics.elidedText(short or name, Qt.ElideMiddle, room)


class RunTreeView(QTreeView):
    """The table's view. A cell's new value repaints that cell: QTreeView measured the whole
    row again first where the row was the view's first (its uniform row height is taken
    there): ~15 size hints for each changed cell of a live run shown on top, half the table's
    cost a poll. Every row here is one line of text high (CompactDelegate), whatever it
    holds, so a cell's change cannot change it; the first column (a job's unfolding) and
    changes of more than one cell go the whole way."""

    def dataChanged(self, top_left, bottom_right, roles=()) -> None:
        if top_left == bottom_right and top_left.isValid() and top_left.column() > 0:
            QAbstractItemView.dataChanged(self, top_left, bottom_right, roles)
            return
        super().dataChanged(top_left, bottom_right, roles)


class _Filter(QSortFilterProxyModel):
    """Rows whose name, host, status, alerts or config values contain every word typed, or
    whose job or host does (a job's row shows while any row under it is shown)."""

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:
        words = self.filterRegExp().pattern().lower().split()
        if not words:
            return True
        model: RunTableModel = self.sourceModel()
        text = model.search_text(row, parent)
        return all(w in text for w in words)


class RunTable(QWidget):
    """Filter box + table of runs (a tree: a job's row unfolds into its hosts and ranks)."""

    columnsChanged = pyqtSignal()  # the column chooser hid or showed a column

    def __init__(self, model: RunTableModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.proxy = _Filter(self)
        self.proxy.setSourceModel(model)
        self.proxy.setSortRole(Qt.UserRole)
        self.proxy.setRecursiveFilteringEnabled(True)  # a job's row shows for a rank that matches
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
        self.view = RunTreeView(self)
        self.view.setModel(self.proxy)
        # The cache's order (a job's hosts and ranks in rank order) until a column's head is
        # clicked; Qt's default indicator sorted by name, descending, ranks 3, 2, 1, 0.
        self.view.header().setSortIndicator(-1, Qt.AscendingOrder)
        self.view.setSortingEnabled(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.view.setUniformRowHeights(True)
        self.view.setIndentation(12)  # a rank's name loses no more than that to its job
        self.view.setAllColumnsShowFocus(True)
        self.view.header().setStretchLastSection(True)
        self.view.setAlternatingRowColors(True)
        self.view.setTextElideMode(Qt.ElideMiddle)  # sweep names differ at both ends
        self.view.setItemDelegate(CompactDelegate(self.view))
        self.view.setItemDelegateForColumn(0, RunNameDelegate(model, self.view))
        header = self.view.header()
        header.setContextMenuPolicy(Qt.CustomContextMenu)
        header.customContextMenuRequested.connect(
            lambda pos: self.column_menu().exec_(header.mapToGlobal(pos))
        )
        # A reset (the columns changed: another config key differs) folds every row: the jobs
        # unfolded by hand are unfolded again.
        self.expanded: set[tuple] = set()
        self.view.expanded.connect(lambda i: self._on_fold(i, True))
        self.view.collapsed.connect(lambda i: self._on_fold(i, False))
        model.modelReset.connect(self._after_reset)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.view)

    def height_for(self, rows: int) -> int:
        """The pane's height that shows `rows` runs (filter box, column heads, rows)."""
        header = self.view.header().sizeHint().height()
        row = self.row_height()
        # The columns of a sweep overflow a laptop's width: room for the scroll bar too.
        scrollbar = self.view.horizontalScrollBar().sizeHint().height()
        frame = 2 * self.view.frameWidth()
        spacing = max(0, self.layout().spacing())
        return self.filter.sizeHint().height() + spacing + header + rows * row + scrollbar + frame

    def row_height(self) -> int:
        return self.fontMetrics().height() + 4

    def _on_fold(self, index: QModelIndex, unfolded: bool) -> None:
        entry = self.model.entry_at(self.proxy.mapToSource(index))
        if entry is not None:
            (self.expanded.add if unfolded else self.expanded.discard)(entry.key)
        if unfolded:  # the names under it are indented: the name column may need more room
            self.view.resizeColumnToContents(0)
            self.view.setColumnWidth(0, min(self.view.columnWidth(0), MAX_NAME_PX))

    def _after_reset(self) -> None:
        keep = set(self.expanded)
        for index in self._all_rows():
            entry = self.model.entry_at(self.proxy.mapToSource(index))
            if entry is not None and entry.key in keep:
                self.view.expand(index)
        self.expanded = keep
        self._fit_columns()

    def _all_rows(self, parent: QModelIndex = QModelIndex()) -> list[QModelIndex]:  # noqa: B008
        """Every row the filter shows (column 0 of the proxy), folded away or not, in order."""
        out = []
        for row in range(self.proxy.rowCount(parent)):
            index = self.proxy.index(row, 0, parent)
            out.append(index)
            out += self._all_rows(index)
        return out

    def ref_at(self, index: QModelIndex) -> RunRef | None:
        """The run of a row of the view (None for a job's or a host's row)."""
        return self.model.ref_at(self.proxy.mapToSource(index))

    def unfold_jobs(self) -> None:
        """Unfold every job and host (their ranks' rows shown)."""
        self.view.expandAll()

    def focus_filter(self) -> None:
        self.filter.setFocus()
        self.filter.selectAll()

    def _fit_columns(self) -> None:
        """Columns as wide as their contents, but none wider than MAX_COLUMN_PX (an alert's
        message or a long name is elided; its tooltip has all of it); the hidden ones hidden."""
        for col in range(len(self.model.headers)):
            self.view.resizeColumnToContents(col)
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
            action = menu.addAction(safe(name))
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
        """The runs the filter shows, a job's ranks included (folded away or not)."""
        refs = (self.ref_at(index) for index in self._all_rows())
        return list(dict.fromkeys(r for r in refs if r is not None))

    def tick_visible(self, how: str) -> None:
        """Tick ("all"), untick ("none") or flip ("invert") every run the filter shows."""
        flips: dict[bool, list[RunRef]] = {True: [], False: []}
        for ref in self.visible_refs():
            on = {"all": True, "none": False}.get(how, not self.model.state.is_ticked(ref))
            if on != self.model.state.is_ticked(ref):
                flips[on].append(ref)
        for on, refs in flips.items():
            if refs:
                self.model.set_ticked_many(refs, on)

    def select(self, ref: RunRef) -> None:
        """Select and show the run's row (when the filter shows it; its job unfolded)."""
        index = self.proxy.mapFromSource(self.model.index_of(ref))
        if not index.isValid():
            return
        parent = index.parent()
        while parent.isValid():
            self.view.expand(parent)
            parent = parent.parent()
        self.view.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows
        )
        self.view.scrollTo(index)

    def selected_refs(self) -> list[RunRef]:
        """The runs of the selected rows (a job's or a host's row: all its runs)."""
        rows = self.view.selectionModel().selectedRows()
        refs = [r for index in rows for r in self.model.refs_at(self.proxy.mapToSource(index))]
        order = {run.ref: i for i, run in enumerate(self.model.runs)}
        return sorted(set(refs), key=lambda r: order.get(r, len(order)))
