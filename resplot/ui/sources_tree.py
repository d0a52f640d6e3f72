"""The window's sources tree: hosts → stores → runs, with connection state, run status and the
age of each run's newest point. It reads the cache and the view state only (never a store), so a
refresh is cheap and runs on the GUI thread.
"""

from __future__ import annotations

import time

from PyQt5.QtCore import (
    Qt,
    pyqtSignal,
)
from PyQt5.QtGui import QBrush, QColor
from PyQt5.QtWidgets import (
    QHeaderView,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from reslog.text import age, safe
from resplot.data.cache import SeriesCache
from resplot.data.colors import NEUTRAL, status_color
from resplot.data.model import RunRef
from resplot.data.names import distinct_parts
from resplot.data.state import ViewState
from resplot.sources.base import SourceState
from schema.store.rollup import WALL_HI


def short_paths(paths: set[str]) -> dict[str, str]:
    """Each path's shortest ending (its file name at least) that no other path shares:
    `a/runs/reslog.db` and `b/runs/reslog.db` become `a/runs/reslog.db` and `b/runs/reslog.db`,
    a lone `/data/x/runs/reslog.db` stays `reslog.db`."""
    parts = {p: p.rstrip("/").split("/") for p in paths}
    out = {}
    for path, mine in parts.items():
        for n in range(1, len(mine) + 1):
            tail = mine[-n:]
            if all(other[-n:] != tail for q, other in parts.items() if q != path):
                break
        out[path] = "/".join(tail) or path
    return out


def newest_wall(cache: SeriesCache, ref: RunRef) -> float | None:
    """When the run's newest point was logged (from its series summaries)."""
    walls = [s.agg[WALL_HI] for s in cache.summaries(ref).values()]
    return max(walls) if walls else None


def source_state_text(st: SourceState) -> tuple[str, bool]:
    """(text, is_error) for a poller SourceState(state, rtt_ms, error, next_retry_s)."""
    state, rtt, error, retry = st.state, st.rtt_ms, st.error, st.next_retry_s
    if state == "live":
        return (f"live, {rtt:.0f} ms" if rtt is not None else "live"), False
    if state == "retrying":
        when = f" in {retry:.0f} s" if retry is not None else ""
        return f"retrying{when}: {error or 'connection lost'}", True
    if error:
        return f"{state}: {error}", True
    return state, False


class SourcesTree(QTreeWidget):
    """source (host) → store → run, with connection state, run status and newest-point age."""

    runActivated = pyqtSignal(object)  # RunRef (double click: toggle plotting)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setHeaderLabels(["source / run", "status", "newest point"])
        self.setColumnCount(3)
        # Store paths are long and their file name is the informative end.
        self.setTextElideMode(Qt.ElideMiddle)
        self.setIndentation(12)  # three levels deep: every pixel of indent is taken from names
        # Names whole, as the part that tells a sweep's runs apart (`…lr0.0006-wd0.2-seed11…`,
        # as the run table and the strip show them; the whole name is the tooltip): whole
        # names (`llama-125m-wsd-lr…`) pushed the status column out of the ~300 px panel at
        # 1920, two letters of it showing. The age column scrolls sideways when it must.
        self.header().setStretchLastSection(True)
        for col in range(3):
            self.header().setSectionResizeMode(col, QHeaderView.ResizeToContents)
        self._hosts: dict[str, QTreeWidgetItem] = {}
        self._host_state: dict[str, str] = {}
        self._runs: dict[RunRef, QTreeWidgetItem] = {}
        self._layout: tuple = ()
        self.itemDoubleClicked.connect(self._on_double_click)

    def _on_double_click(self, item: QTreeWidgetItem, _column: int) -> None:
        ref = item.data(0, Qt.UserRole)
        if isinstance(ref, RunRef):
            self.runActivated.emit(ref)

    def set_source_state(self, label: str, text: str, error: bool = False) -> None:
        self._host_state[label] = text
        item = self._hosts.get(label)
        if item is not None:
            item.setText(1, text)
            item.setForeground(1, QBrush(QColor("#d62728" if error else "#444444")))

    def add_source_label(self, label: str) -> None:
        """Show a source before it has any run (e.g. while connecting)."""
        if label not in self._hosts:
            self._layout = ()
            self._hosts[label] = self._host_item(label)

    def _host_item(self, label: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem(self, [safe(label), self._host_state.get(label, ""), ""])
        item.setData(0, Qt.UserRole, label)
        item.setExpanded(True)
        return item

    def sources(self) -> list[str]:
        return list(self._hosts)

    def refresh(
        self, cache: SeriesCache, now: float | None = None, state: ViewState | None = None
    ) -> None:
        now = time.time() if now is None else now
        runs = cache.runs()
        labels = list(dict.fromkeys([*self._hosts, *(r.ref.source for r in runs)]))
        layout = (tuple(labels), tuple(r.ref for r in runs))
        if layout != self._layout:
            self._layout = layout
            self.clear()
            self._hosts, self._runs = {}, {}
            stores: dict[tuple[str, str], QTreeWidgetItem] = {}
            for label in labels:
                self._hosts[label] = self._host_item(label)
            names = short_paths({r.ref.store for r in runs})
            by_store: dict[tuple[str, str], list[str]] = {}
            for run in runs:
                by_store.setdefault((run.ref.source, run.ref.store), []).append(run.name)
            parts = {key: distinct_parts(n) for key, n in by_store.items()}
            for run in runs:
                host = self._hosts[run.ref.source]
                key = (run.ref.source, run.ref.store)
                if key not in stores:
                    # The end of the path that tells stores apart; the full path is the tooltip.
                    stores[key] = QTreeWidgetItem(host, [safe(names[run.ref.store]), "", ""])
                    stores[key].setToolTip(0, safe(run.ref.store))
                    stores[key].setExpanded(True)
                item = QTreeWidgetItem(stores[key], [safe(parts[key][run.name]), "", ""])
                item.setData(0, Qt.UserRole, run.ref)
                item.setToolTip(0, f"{safe(run.name)} ({run.ref.uid})")
                self._runs[run.ref] = item
        for run in runs:
            item = self._runs[run.ref]
            color = state.look(run.ref).color if state is not None else NEUTRAL
            item.setForeground(0, QBrush(QColor(color)))
            item.setText(1, safe(run.status))
            item.setForeground(1, QBrush(QColor(status_color(run.status))))
            newest = newest_wall(cache, run.ref)
            item.setText(2, "no points" if newest is None else age(newest, now))

    def run_item(self, ref: RunRef) -> QTreeWidgetItem | None:
        return self._runs.get(ref)
