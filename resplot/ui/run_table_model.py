"""The run table's model: a row per run (tick box and colour, status, step, the page's metrics,
alerts, the config keys that differ, ...), except that the runs of a multi-rank job are one row
that unfolds into its hosts (each with its GPUs' telemetry) and their ranks' runs
(resplot/data/job_rows.py). It reads the cache and the view state only (never a store), so a
refresh is cheap and runs on the GUI thread.

A tree behind the window's sort/filter proxy. Every change is announced as Qt documents it:
rows that come and go at any level with begin/endInsertRows and begin/endRemoveRows, a change of
columns or of order as a reset, tick boxes and colours as dataChanged (one range per parent);
never a bare layoutChanged (issue 21: one without layoutAboutToBeChanged left the proxy stale
persistent indexes, and the next click crashed the window). tests/resplot/ui/test_run_table_model.py
holds it to Qt's own model tester.
"""

from __future__ import annotations

import math
import time
from typing import Any

from PyQt5.QtCore import QAbstractItemModel, QModelIndex, Qt, pyqtSignal
from PyQt5.QtGui import QBrush, QColor

from reslog.text import safe
from reslog.tools.export import format_cell
from resplot.data import job_rows
from resplot.data.alerts import LEVELS, Alert
from resplot.data.cache import SeriesCache
from resplot.data.colors import status_color
from resplot.data.job_rows import Entry
from resplot.data.model import RunInfo, RunRef
from resplot.data.names import distinct_parts
from resplot.data.state import ViewState
from resplot.data.xaxis import own_step
from schema.rules.compare import (
    PER_RANK,
    differing_config,
    duration_s,
    family_keys,
    flatten,
    gpu_hours,
    metric_stats,
    per_rank_config,
    rank_settings,
)


def _stats(cache: SeriesCache, ref: RunRef, key: str) -> tuple[float | None, float | None]:
    """(last value, smallest finite value) of a series, from its summary."""
    summary = cache.summary(ref, key)
    last, low, _at = metric_stats(summary.agg if summary is not None else None)
    return last, (None if low is not None and math.isnan(low) else low)


class _Node:
    """A row of the live tree: its entry, its cells (one per header) and its place."""

    __slots__ = ("cells", "children", "entry", "id", "parent", "search")

    def __init__(self, entry: Entry | None, node_id: int) -> None:
        self.entry = entry
        self.id = node_id
        self.cells: list[Any] = []
        self.search = ""  # its own text, for the filter
        self.children: list[_Node] = []
        self.parent: _Node | None = None

    @property
    def key(self) -> tuple:
        return self.entry.key if self.entry is not None else ()

    @property
    def row(self) -> int:
        return self.parent.children.index(self) if self.parent is not None else 0


class RunTableModel(QAbstractItemModel):
    """Runs, and jobs that unfold into hosts and ranks; column 0 holds the tick box and the
    run's colour (a job's and a host's tick box ticks all its runs, and shows partly ticked)."""

    tickedChanged = pyqtSignal(object, bool)  # RunRef, ticked

    # How each run is doing comes first (status, step, the page's metrics, alerts), then the
    # config keys that differ: runs of mixed projects differ in 29 of them, which pushed every
    # metric out of sight. The column chooser (right-click a column head) hides any column.
    HEAD = ("run", "status", "step")
    MIDDLE = ("alerts",)
    GPUS = "GPUs"  # a host's telemetry: shown while the table holds a job
    TAIL = ("tokens/s", "duration", "GPU-hours", "host")

    def __init__(self, cache: SeriesCache, state: ViewState) -> None:
        super().__init__()
        self.cache, self.state = cache, state
        self.runs: list[RunInfo] = []  # every run in the table, in the cache's order
        self.headers: list[str] = [*self.HEAD, *self.MIDDLE]
        self.alerts: dict[RunRef, list[Alert]] = {}
        self.config_keys: list[str] = []
        self.per_rank: list[str] = []
        # Each name without the words every run's name shares (RunNameDelegate's second try).
        self.short_names: dict[str, str] = {}
        self._ids: dict[tuple, int] = {}  # entry key -> node id, kept across refreshes
        self._root = _Node(None, 0)
        self._nodes: dict[int, _Node] = {0: self._root}
        self._run_nodes: dict[RunRef, _Node] = {}
        self._details: dict[int, str] = {}  # node id -> the GPUs cell's tooltip
        # node id -> (what a run's row was made from, its cells, search text and tooltip), as
        # the last refresh made them (_node)
        self._rows: dict[int, tuple] = {}

    # -- refresh ----------------------------------------------------------------------------
    def refresh(self, alerts: dict[RunRef, list[Alert]], now: float | None = None) -> None:
        now = time.time() if now is None else now
        runs = self.cache.runs()
        # What data() reads besides a row's cells, as the rows now show it.
        shown_before = (self.alerts, self._details, self.short_names)
        self.alerts = alerts
        ticked = [r for r in runs if self.state.is_ticked(r.ref)]
        compared = ticked if len(ticked) >= 2 else runs
        self.config_keys = differing_config(compared)
        self.per_rank = per_rank_config(compared)  # one column, each rank's own values
        top = job_rows.entries(runs)
        headers = list(self.HEAD)
        for m in self.state.table_metrics:
            headers += [f"{m} last", f"{m} min"]
        headers += [*self.MIDDLE]
        if any(e.kind == "job" for e in top):
            headers.append(self.GPUS)
        headers += [*self.config_keys, *([PER_RANK] if self.per_rank else []), *self.TAIL]
        # Among the runs of the same project: a sweep's names share their ends, a job beside
        # it shares nothing with them, and would leave every sweep name whole (then elided).
        by_project: dict[str, list[str]] = {}
        for run in runs:
            by_project.setdefault(run.project, []).append(run.name)
        self.short_names = {  # by the name as shown (escaped)
            safe(n): safe(short)
            for names in by_project.values()
            for n, short in distinct_parts(names).items()
        }
        self._details = {}
        before, self._rows = self._rows, {}
        fresh = [self._node(e, now, headers, before) for e in top]
        changed: list[tuple[_Node, list[int]]] = []  # rows and their changed columns
        if headers != self.headers or not self._sync(self._root, fresh, changed):
            self.beginResetModel()
            self.headers = headers
            self._root.children = []
            self._adopt(self._root, fresh)
            self._reindex()
            self.runs = runs
            self.endResetModel()
            return
        self._reindex()
        self.runs = runs
        if (self._details, self.short_names) != shown_before[1:]:
            # What data() reads besides a row's cells for every row (the GPU tooltips, the
            # names' shared words the name column elides) changed: every row.
            self._changed(self._root, range(len(headers)))
            return
        # Only the cells that changed (a live run's step, its age) and the alerts cell of the
        # rows whose runs' alerts did (its colour; a quiet run's alert says for how long, so it
        # changes each poll; tooltips are read when shown), not every row of every column each
        # poll: the sorting proxy and the view then look again at those rows only (refresh()
        # 11 -> 9 ms a poll with 14 runs, two live). A cell at a time: Qt's item views repaint
        # the whole viewport for a change of more than one cell (5.5 ms a poll for two live
        # rows at 1280x800), a cell's rect for one.
        old_alerts = shown_before[0]
        alerted = {r for r in {*alerts, *old_alerts} if alerts.get(r) != old_alerts.get(r)}
        if alerted:
            column = [headers.index("alerts")]
            changed += [
                (n, column)
                for n in self._nodes.values()
                if n.entry is not None and any(m.ref in alerted for m in n.entry.members)
            ]
        cells: dict[int, tuple[_Node, set[int]]] = {}
        for node, columns in changed:
            cells.setdefault(id(node), (node, set()))[1].update(columns)
        for node, columns in cells.values():
            for column in sorted(columns):
                index = self.createIndex(node.row, column, node.id)
                self.dataChanged.emit(index, index)

    def _node(
        self, entry: Entry, now: float, headers: list[str], before: dict[int, tuple]
    ) -> _Node:
        """The entry's node and its subtree, with cells (not yet in the live tree); a run's
        row as `before` (the last refresh's rows) has it where it was made from the same."""
        node_id = self._ids.setdefault(entry.key, len(self._ids) + 1)
        node = _Node(entry, node_id)
        asked = self._row_inputs(entry, headers)
        kept = before.get(node_id) if asked is not None else None
        if kept is not None and kept[0] == asked:
            # A run whose row shows what it showed (a finished run's, at every poll).
            node.cells, node.search, detail = list(kept[1]), kept[2], kept[3]
            if detail is not None:
                self._details[node_id] = detail
        else:
            node.cells = self._cells(entry, now, headers, node_id)
            node.search = self._search_text(entry, headers, node.cells)
        if asked is not None:
            self._rows[node_id] = (asked, list(node.cells), node.search, self._details.get(node_id))
        for child in entry.children:
            sub = self._node(child, now, headers, before)
            sub.parent = node
            node.children.append(sub)
        return node

    def _search_text(self, entry: Entry, headers: list[str], cells: list[Any]) -> str:
        """A row's own text, for the filter."""
        # A job's own text leaves its hosts out: "gpu-b" finds that host's row and ranks,
        # not the whole job through its host column.
        own = [
            v
            for h, v in zip(headers, cells, strict=True)
            if v is not None and not (entry.kind == "job" and h == "host")
        ]
        search = " ".join(str(v) for v in own).lower()
        if entry.run is not None:
            run = entry.run
            return search + f" {run.ref.uid} {run.project} {' '.join(run.tags)}".lower()
        return search + " " + " ".join(r.group for r in entry.members[:1]).lower()

    def _row_inputs(self, entry: Entry, headers: list[str]) -> tuple | None:
        """What a run's row (its cells, search text and GPUs tooltip) is made from, all of it
        (_run_cells): the same inputs give the same row. None: a job's or a host's row, made
        each time (its members' rows are kept)."""
        run = entry.run
        if run is None or entry.children:
            return None
        ref = run.ref
        return (
            entry.kind,
            run,
            tuple(self.alerts.get(ref, ())),
            self.cache.summaries(ref),  # the step, metrics, GPUs, GPU-hours
            self.cache.event_changes(ref),  # the step counter's events
            tuple(headers),  # the page's metrics, the config keys that differ
            tuple(self.per_rank),
        )

    def _sync(
        self, parent: _Node, fresh: list[_Node], changed: list[tuple[_Node, list[int]]]
    ) -> bool:
        """Make `parent`'s live children `fresh` by removing and inserting rows, each announced
        (recursively, at every level), the rows that stay and show other cells or another
        search text added to `changed` with those cells' columns (another search text alone:
        the first, for the filter to look again); False when the rows that stay changed their
        order (the caller resets instead)."""
        live = parent.children
        at = self._index(parent)
        wanted = {n.key for n in fresh}
        for i in reversed(range(len(live))):
            if live[i].key not in wanted:
                self.beginRemoveRows(at, i, i)
                del live[i]
                self.endRemoveRows()
        kept = {n.key for n in live}
        if [n.key for n in live] != [n.key for n in fresh if n.key in kept]:
            return False
        for i, node in enumerate(fresh):
            if i < len(live) and live[i].key == node.key:
                old = live[i]
                columns = [
                    c for c, (a, b) in enumerate(zip(old.cells, node.cells, strict=True)) if a != b
                ]
                if not columns and old.search != node.search:
                    columns = [0]
                if columns:
                    changed.append((old, columns))
                old.entry, old.cells, old.search = node.entry, node.cells, node.search
                if not self._sync(old, node.children, changed):
                    return False
                continue
            self._register(node)
            self.beginInsertRows(at, i, i)
            live.insert(i, node)
            node.parent = parent
            self.endInsertRows()
        return True

    def _adopt(self, parent: _Node, nodes: list[_Node]) -> None:
        for node in nodes:
            node.parent = parent
            parent.children.append(node)

    def _register(self, node: _Node) -> None:
        self._nodes[node.id] = node
        for child in node.children:
            self._register(child)

    def _reindex(self) -> None:
        """The node and run lookups from the live tree."""
        self._nodes = {0: self._root}
        self._run_nodes = {}
        stack = list(self._root.children)
        while stack:
            node = stack.pop()
            self._nodes[node.id] = node
            if node.entry is not None and node.entry.run is not None:
                self._run_nodes[node.entry.run.ref] = node
            stack.extend(node.children)

    def _changed(self, parent: _Node, columns: range, roles: list[int] | None = None) -> None:
        """dataChanged over `columns` of every row, one range per parent (Qt's rule)."""
        if parent.children:
            first = self.createIndex(0, columns.start, parent.children[0].id)
            last = self.createIndex(
                len(parent.children) - 1, columns.stop - 1, parent.children[-1].id
            )
            if roles is None:
                self.dataChanged.emit(first, last)
            else:
                self.dataChanged.emit(first, last, roles)
        for child in parent.children:
            self._changed(child, columns, roles)

    def looks_changed(self) -> None:
        """Tick boxes or colours changed (the view state's, not the model's rows): repaint
        column 0. A bare layoutChanged here (what this replaced) told the filter proxy that
        rows had moved without layoutAboutToBeChanged first, leaving it stale persistent
        indexes: a click on a row then crashed the window (SIGSEGV)."""
        self._changed(self._root, range(1), [Qt.CheckStateRole, Qt.DecorationRole])

    # -- cells ------------------------------------------------------------------------------
    def _cells(self, entry: Entry, now: float, headers: list[str], node_id: int) -> list[Any]:
        if entry.run is not None:
            cells = self._run_cells(entry.run, now)
        else:
            cells = self._group_cells(entry, now)
        if self.GPUS in headers:  # a run's own GPUs, a host's, or every host's of a job
            found = job_rows.gpus(self.cache, entry.members)
            cells[self.GPUS] = job_rows.gpus_text(found)
            if found:
                self._details[node_id] = job_rows.gpus_detail(found)
        return [cells.get(h) for h in headers]

    def _run_cells(self, run: RunInfo, now: float) -> dict[str, Any]:
        ref = run.ref
        alerts = self.alerts.get(ref, [])
        summaries = self.cache.summaries(ref)
        cells: dict[str, Any] = {
            "run": run.name,
            "status": run.status,
            "alerts": alerts[0].message if alerts else "",
            "step": own_step(
                {k: s.agg for k, s in summaries.items()}, self.cache.events(ref, "metric")
            ),
            "tokens/s": _stats(self.cache, ref, "train/tokens_per_s")[0],
            "duration": f"{duration_s(run) / 3600.0:.2f} h",
            # The export's rule (schema.rules.compare): GPUs seen in telemetry, else no GPU-hours.
            "GPU-hours": gpu_hours(run, summaries),
            "host": run.host or ref.source,
        }
        for m in self.state.table_metrics:
            # "valid/loss" shows the run's val/, eval/ or validation/ loss when that is what it has
            key = next(iter(family_keys(m, summaries)), m)
            cells[f"{m} last"], cells[f"{m} min"] = _stats(self.cache, ref, key)
        flat = flatten(run.config)
        cells.update({k: flat.get(k) for k in self.config_keys})
        cells[PER_RANK] = rank_settings(run, self.per_rank)
        return cells

    def _group_cells(self, entry: Entry, now: float) -> dict[str, Any]:
        """A job's or a host's row: the lowest rank's metrics and config (rank 0 logs the
        losses), the newest step, every status, GPU-hours and alerts of all its runs."""
        members = entry.members
        first = self._run_cells(members[0], now)  # by rank
        alerts = [a for r in members for a in self.alerts.get(r.ref, [])]
        hours = [h for r in members if (h := gpu_hours(r, self.cache.summaries(r.ref)))]
        steps = [
            s
            for r in members
            if (
                s := own_step(
                    {k: v.agg for k, v in self.cache.summaries(r.ref).items()},
                    self.cache.events(r.ref, "metric"),
                )
            )
            is not None
        ]
        hosts = list(dict.fromkeys(r.host or r.ref.source for r in members))
        return {
            **first,
            "run": entry.label,
            "status": job_rows.status_of(members),
            "alerts": (alerts[0].message + (f" (+{len(alerts) - 1})" if len(alerts) > 1 else ""))
            if alerts
            else "",
            "step": max(steps) if steps else None,
            "duration": f"{max(duration_s(r) for r in members) / 3600.0:.2f} h",
            "GPU-hours": sum(hours) if hours else None,
            "host": ", ".join(hosts),
            # The settings that differ by rank, named: each rank's row has its own values.
            PER_RANK: f"by rank: {', '.join(self.per_rank)}" if self.per_rank else "",
        }

    # -- lookups ----------------------------------------------------------------------------
    def entry_at(self, index: QModelIndex) -> Entry | None:
        node = self._nodes.get(index.internalId()) if index.isValid() else None
        return node.entry if node is not None else None

    def ref_at(self, index: QModelIndex) -> RunRef | None:
        """The run of a row (None for a job's or a host's row)."""
        entry = self.entry_at(index)
        return entry.run.ref if entry is not None and entry.run is not None else None

    def refs_at(self, index: QModelIndex) -> list[RunRef]:
        """The runs a row stands for: its run, or every run of its job or host."""
        entry = self.entry_at(index)
        return entry.refs if entry is not None else []

    def index_of(self, ref: RunRef, column: int = 0) -> QModelIndex:
        """The run's row (at whatever depth), or an invalid index."""
        node = self._run_nodes.get(ref)
        return self._index(node, column) if node is not None else QModelIndex()

    def search_text(self, row: int, parent: QModelIndex) -> str:
        """The row's text and its ancestors' (the filter's words may match either)."""
        node = self._parent_node(parent).children[row]
        parts = []
        while node is not None and node is not self._root:
            parts.append(node.search)
            node = node.parent
        return " ".join(parts)

    def _parent_node(self, parent: QModelIndex) -> _Node:
        return self._nodes[parent.internalId()] if parent.isValid() else self._root

    def _index(self, node: _Node, column: int = 0) -> QModelIndex:
        if node is self._root or node.parent is None:
            return QModelIndex()
        return self.createIndex(node.row, column, node.id)

    # -- Qt model API -------------------------------------------------------------------------
    def index(self, row: int, column: int, parent: QModelIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        if parent.isValid() and parent.column() != 0:
            return QModelIndex()
        node = self._nodes.get(parent.internalId()) if parent.isValid() else self._root
        if node is None or not (0 <= row < len(node.children)):
            return QModelIndex()
        if not 0 <= column < len(self.headers):
            return QModelIndex()
        return self.createIndex(row, column, node.children[row].id)

    def parent(self, index: QModelIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        if not index.isValid():
            return QModelIndex()
        node = self._nodes.get(index.internalId())
        if node is None or node.parent is None or node.parent is self._root:
            return QModelIndex()
        return self._index(node.parent)

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        if parent.isValid() and parent.column() != 0:
            return 0
        node = self._nodes.get(parent.internalId()) if parent.isValid() else self._root
        return len(node.children) if node is not None else 0

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return len(self.headers)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return safe(self.headers[section])  # a config key's name, from the store
        return None

    def flags(self, index: QModelIndex):
        if not index.isValid():
            return Qt.NoItemFlags  # the root (Qt's model tester holds us to it)
        base = Qt.ItemIsEnabled | Qt.ItemIsSelectable
        return base | Qt.ItemIsUserCheckable if index.column() == 0 else base

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole):
        node = self._nodes.get(index.internalId()) if index.isValid() else None
        if node is None or node.entry is None or index.column() >= len(node.cells):
            return None
        entry, col = node.entry, index.column()
        value, header = node.cells[col], self.headers[col]
        if role == Qt.DisplayRole:
            if isinstance(value, float) and header == "tokens/s":
                return f"{value:,.0f}"  # 440,312 rather than 4.403e+05
            if isinstance(value, str):
                return safe(value)  # names, hosts, config values: controls shown, not obeyed
            return "" if value is None else safe(format_cell(value))
        if role == Qt.UserRole:  # sort key: numbers as numbers
            return value if isinstance(value, (int, float)) else str(value or "")
        if role == Qt.CheckStateRole and col == 0:
            return self._check_state(entry)
        if role == Qt.DecorationRole and col == 0 and entry.run is not None:
            return QColor(self.state.look(entry.run.ref).color)
        members = entry.members
        if role == Qt.ForegroundRole and header == "status":
            return QBrush(QColor(status_color(job_rows.worst_status(members))))
        if role == Qt.ToolTipRole and col == 0:
            return self._tooltip(entry)
        if role == Qt.ToolTipRole and header == self.GPUS:
            return self._details.get(node.id)
        if header != "alerts" or role not in (Qt.ToolTipRole, Qt.BackgroundRole):
            return None  # a job row's alerts are gathered only where they are shown
        alerts = [(r, a) for r in members for a in self.alerts.get(r.ref, [])]
        if role == Qt.ToolTipRole and alerts:
            named = entry.run is None  # a job's or host's row: say which rank's run
            return "\n".join(
                (f"{safe(r.name)}: " if named else "")
                + f"[{a.level}] {safe(a.message)}"
                + (f"\n{safe(a.detail, lines=True)}" if a.detail else "")
                for r, a in alerts
            )
        if role == Qt.BackgroundRole and alerts:
            worst = max(LEVELS.get(a.level, 1) for _r, a in alerts)
            return QBrush(QColor("#f8d0d0" if worst >= 2 else "#fbe9c8"))
        return None

    def _tooltip(self, entry: Entry) -> str:
        if entry.run is not None:
            run = entry.run
            return f"{safe(run.name)}\n{run.ref.uid}\n{safe(run.ref.source)}: {safe(run.ref.store)}"
        group = entry.members[0].group
        runs = len(entry.members)
        what = "job" if entry.kind == "job" else "host of job"
        return f"{safe(entry.label)}\n{what} {safe(group)}: {runs} run{'s' if runs != 1 else ''}"

    def _check_state(self, entry: Entry):
        ticked = sum(1 for r in entry.members if self.state.is_ticked(r.ref))
        if ticked == 0:
            return Qt.Unchecked
        return Qt.Checked if ticked == len(entry.members) else Qt.PartiallyChecked

    def setData(self, index: QModelIndex, value, role: int = Qt.EditRole) -> bool:
        if role != Qt.CheckStateRole or index.column() != 0:
            return False
        refs = self.refs_at(index)
        if not refs:
            return False
        self.set_ticked_many(refs, value == Qt.Checked or value is True)
        return True

    def set_ticked(self, ref: RunRef, on: bool) -> None:
        self.set_ticked_many([ref], on)

    def set_ticked_many(self, refs: list[RunRef], on: bool) -> None:
        """Tick or untick runs: their rows and the rows above them (their boxes count them)
        change, each said once (a job of 64 ranks ticked at once: its row once, not 64 times)."""
        changed: dict[int, _Node] = {}
        for ref in refs:
            self.state.set_ticked(ref, on)
            node = self._run_nodes.get(ref)
            while node is not None and node is not self._root:
                changed[id(node)] = node
                node = node.parent
        for node in changed.values():
            at = self._index(node)
            self.dataChanged.emit(at, at, [Qt.CheckStateRole])
        for ref in refs:
            self.tickedChanged.emit(ref, on)
