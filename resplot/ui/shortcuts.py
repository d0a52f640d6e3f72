"""The window's keyboard shortcuts, in one table: the keys, what they do, and the Help menu's
list of them (made from the same table, so it cannot go stale)."""

from __future__ import annotations

from collections.abc import Callable

from PyQt5.QtWidgets import QAction, QMenu, QMessageBox

from resplot.data.state import PAGES

TITLES = {"all": "All metrics", "ranks": "Ranks"}


def _pages() -> list[tuple[str, str, Callable]]:
    return [
        (
            f"Ctrl+{n}",
            f"{TITLES.get(page, page.capitalize())} page",
            lambda w, p=page: w.set_page(p),
        )
        for n, page in enumerate(PAGES, start=1)
    ]


def table() -> list[tuple[str, str, Callable]]:
    """(keys, what it does, action taking the MainWindow)."""
    return [
        ("Ctrl+F", "Filter runs (focus the filter box)", lambda w: w.table.focus_filter()),
        *_pages(),
        ("Ctrl+0", "Reset zoom: follow all data again", lambda w: w.reset_view()),
        ("Ctrl+P", "Pause / resume polling", lambda w: w.set_paused(not w.state.paused)),
        ("Ctrl+L", "Log / linear loss axis", lambda w: w.set_log_y(not w.state.log_y)),
        ("Ctrl+T", "Show / hide the run table", lambda w: w.toggle_table()),
        ("Ctrl+B", "Show / hide the sources tree", lambda w: w.toggle_tree()),
        ("Ctrl+R", "Hover readout: by value / by name", lambda w: w.toggle_hover_order()),
        ("Ctrl+E", "Export the page as PNG/SVG/PDF", lambda w: w.ask_export("chart", "")),
        ("Esc", "Clear the highlighted run", lambda w: w.highlight(None)),
        ("Ctrl+Q", "Quit", lambda w: w.close()),
    ]


def install(win, help_menu: QMenu) -> list[QAction]:
    """Add every shortcut to the window, and "Keyboard shortcuts" (F1) to `help_menu`."""
    actions = []
    for keys, text, run in table():
        action = QAction(text, win)
        action.setShortcut(keys)
        action.triggered.connect(lambda _c=False, r=run: r(win))
        win.addAction(action)
        actions.append(action)
    show = help_menu.addAction("Keyboard shortcuts", lambda: show_help(win))
    show.setShortcut("F1")
    return actions


def help_text() -> str:
    rows = "".join(f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{t}</td></tr>" for k, t, _ in table())
    return f"<table>{rows}</table>"


def show_help(win) -> None:
    QMessageBox.information(win, "Keyboard shortcuts", help_text())
