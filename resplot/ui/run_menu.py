"""The right-click menu of a run (in the run table and the sources tree): plot or hide it, pick
its colour, give it back its assigned one; and of a job's or host's row in the run table: plot or
hide its runs, show the job on the Ranks page."""

from __future__ import annotations

from PyQt5.QtCore import Qt
from PyQt5.QtGui import QColor
from PyQt5.QtWidgets import QColorDialog, QMenu, QWidget

from reslog.text import safe
from resplot.data.model import RunRef
from resplot.ui.notify import ALL_KINDS


def pick_color(parent: QWidget, initial: str, title: str) -> str | None:
    """A colour from the user, as "#rrggbb"; None when cancelled."""
    color = QColorDialog.getColor(QColor(initial), parent, title)
    return color.name() if color.isValid() else None


def run_menu(win, ref: RunRef) -> QMenu:
    """The menu for one run of `win` (a MainWindow)."""
    run = win.cache.run(ref)
    name = safe(run.name) if run is not None else ref.uid[:8]
    menu = QMenu(win)
    ticked = win.state.is_ticked(ref)
    menu.addAction("Hide" if ticked else "Plot", lambda: win.tick(ref, not ticked))

    def choose() -> None:
        chosen = pick_color(win, win.state.look(ref).color, f"Colour of {name}")
        if chosen is not None:
            win.set_run_color(ref, chosen)

    menu.addAction("Colour…", choose)
    reset = menu.addAction("Assigned colour", lambda: win.set_run_color(ref, None))
    reset.setEnabled(isinstance(win.state.colors.get(ref.uid), str))
    menu.addSeparator()
    notifier = win.notifier
    every = menu.addAction("Mute notifications")
    every.setCheckable(True)
    every.setChecked(notifier.is_muted(ref, ALL_KINDS))
    every.toggled.connect(lambda on: win.set_notifications_muted(ref, ALL_KINDS, on))
    for kind in sorted({a.kind for a in win.alerts.get(ref, [])}):
        one = menu.addAction(f"Mute {kind.replace('_', ' ')} notifications")
        one.setCheckable(True)
        one.setChecked(notifier.is_muted(ref, kind))
        one.toggled.connect(lambda on, k=kind: win.set_notifications_muted(ref, k, on))
    return menu


def job_menu(win, index) -> QMenu:
    """The menu of a job's (or a host's) row: plot or hide all its runs, see it on the Ranks
    page."""
    refs = win.model.refs_at(win.table.proxy.mapToSource(index))
    entry = win.model.entry_at(win.table.proxy.mapToSource(index))
    menu = QMenu(win)
    shown = all(win.state.is_ticked(r) for r in refs)
    menu.addAction(
        f"{'Hide' if shown else 'Plot'} its {len(refs)} runs",
        lambda: win.model.set_ticked_many(refs, not shown),
    )
    group = entry.members[0].group if entry is not None and entry.members else ""
    menu.addAction("Show on the Ranks page", lambda: show_job(win, group))
    return menu


def show_job(win, group: str) -> None:
    """The Ranks page of one job."""
    win.ranks.page.reset_view()
    win.state.ranks_job = group
    win.set_page("ranks")


def attach_run_menus(win) -> None:
    """Right-click a run in the window's table or sources tree: its menu."""

    def from_table(pos) -> None:
        index = win.table.view.indexAt(pos)
        ref = win.table.ref_at(index) if index.isValid() else None
        if ref is not None:
            run_menu(win, ref).exec_(win.table.view.viewport().mapToGlobal(pos))
        elif index.isValid():  # a job's or a host's row
            job_menu(win, index).exec_(win.table.view.viewport().mapToGlobal(pos))

    def from_tree(pos) -> None:
        item = win.tree.itemAt(pos)
        ref = item.data(0, Qt.UserRole) if item is not None else None
        if isinstance(ref, RunRef):
            run_menu(win, ref).exec_(win.tree.viewport().mapToGlobal(pos))

    for view, handler in ((win.table.view, from_table), (win.tree, from_tree)):
        view.setContextMenuPolicy(Qt.CustomContextMenu)
        view.customContextMenuRequested.connect(handler)
