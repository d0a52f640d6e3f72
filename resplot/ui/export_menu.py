"""The window's Export menu: file dialogs for points, the comparison table and charts, and the
worker thread that writes a points export (it reads raw points from the stores)."""

from __future__ import annotations

from pathlib import Path

from PyQt5.QtCore import QThread, pyqtSignal
from PyQt5.QtWidgets import QFileDialog, QMenu, QMessageBox

from resplot.ui.exports import export_points

POINT_FILTERS = {
    "csv": "CSV, long (*.csv)",
    "csv-wide": "CSV, wide (*.csv)",
    "parquet": "Parquet (*.parquet)",
}
TABLE_FILTERS = {"csv": "CSV (*.csv)", "md": "Markdown (*.md)", "latex": "LaTeX (*.tex)"}
CHART_FILTER = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"
REPORT_FILTER = "HTML report (*.html)"


class ExportWorker(QThread):
    """Writes a points export off the GUI thread: it reads raw points from the stores."""

    failed = pyqtSignal(str)
    done = pyqtSignal(str)

    def __init__(self, write, path: str, parent=None) -> None:
        super().__init__(parent)
        self.write, self.path = write, path
        self.error: str | None = None

    def run(self) -> None:
        try:
            self.write()
        except Exception as exc:  # shown to the user: a store, a connection, the disk
            self.error = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
            self.failed.emit(self.error)
        else:
            self.done.emit(self.path)


def start_points_export(win, path: str | Path, fmt: str) -> ExportWorker:
    """Start writing the raw points of the window's export runs (a worker thread reads them
    from the stores); the status bar says when it is done or why it failed."""
    if win.poller is None:
        raise ValueError("no sources to read points from")
    refs = win.export_refs()
    poller = win.poller

    def reader_of(ref):
        return poller.source(ref.source).reader(ref)

    return start_worker(
        win,
        lambda: export_points(win.cache, reader_of, refs, path, fmt),
        path,
        ("exporting", "exported", "Export failed"),
    )


def start_worker(win, write, path: str | Path, words: tuple[str, str, str]) -> ExportWorker:
    """Run `write` on a worker thread kept by the window; the status bar says it started
    (words[0]) and ended (words[1]), a dialog titled words[2] why it failed."""
    going, done, failed = words
    worker = ExportWorker(write, str(path), win)
    worker.done.connect(lambda p: win.statusBar().showMessage(f"{done} {p}", 5000))
    worker.failed.connect(lambda m: QMessageBox.warning(win, failed, m))
    worker.finished.connect(lambda: win.exports.remove(worker))
    win.exports.append(worker)
    win.statusBar().showMessage(f"{going} {path}…")
    worker.start()
    return worker


def report_pages(page: str) -> tuple[str, ...]:
    """The report's pages for the window's: the page shown first when a report has it, then
    Training."""
    from resplot.report import REPORT_PAGES

    return tuple(dict.fromkeys([*([page] if page in REPORT_PAGES else []), "training"]))


def write_report(
    specs,
    ssh,
    uids: list[str],
    colors: dict,
    path: str | Path,
    pages: tuple[str, ...],
    metrics=None,
) -> None:
    """The report of the runs `uids` (in the window's order), read afresh from their sources
    through the same path as `resplot report` (resplot.sources.polling.Loaded): the window's
    cache and poller are left alone. Runs on a worker thread."""
    from resplot.data.state import ViewState
    from resplot.report import build_report
    from resplot.sources.polling import Loaded

    with Loaded(specs, ssh=ssh) as loaded:
        by_uid = {r.ref.uid: r.ref for r in loaded.cache.runs()}
        refs = [by_uid[u] for u in uids if u in by_uid]
        if not refs:
            raise ValueError("none of the runs shown were found in their sources")
        state = ViewState()
        state.colors = dict(colors)
        report = build_report(loaded.cache, refs, loaded.fetch, pages, metrics=metrics, state=state)
    report.write(path)


def start_report_export(win, path: str | Path) -> ExportWorker:
    """Write an HTML report of the window's export runs (resplot.report) on a worker thread,
    with the page shown first when the report has it; the status bar says when it is done."""
    if win.poller is None:
        raise ValueError("no sources to read the runs from")
    refs = win.export_refs()
    if not refs:
        raise ValueError("no runs to report")
    poller = win.poller
    specs = list(dict.fromkeys(poller.source(label).spec for label in {r.source for r in refs}))
    pages = report_pages(win.state.page)
    args = (
        specs,
        poller.ssh,
        [r.uid for r in refs],
        dict(win.state.colors),
        path,
        pages,
        win.state.table_metrics,
    )
    return start_worker(
        win,
        lambda: write_report(*args),
        path,
        ("writing report", "wrote report", "Report failed"),
    )


def add_export_menu(self, export: QMenu) -> None:
    """Fill the menu with one action per export (`self`: the MainWindow)."""
    for fmt, label in POINT_FILTERS.items():
        export.addAction(
            f"Ticked runs' points as {label.split(' (')[0]}…",
            lambda f=fmt: ask_export(self, "points", f),
        )
    export.addSeparator()
    for fmt, label in TABLE_FILTERS.items():
        export.addAction(
            f"Comparison table as {label.split(' (')[0]}…",
            lambda f=fmt: ask_export(self, "table", f),
        )
    export.addSeparator()
    export.addAction("Chart as PNG/SVG/PDF…", lambda: ask_export(self, "chart", ""))
    export.addSeparator()
    export.addAction("HTML report…", lambda: ask_export(self, "report", ""))


def ask_export(self, what: str, fmt: str) -> None:
    """Ask for a file name and write the export there (points: on a worker thread)."""
    if what == "chart":
        path, _ = QFileDialog.getSaveFileName(self, "Export chart", "chart.png", CHART_FILTER)
    elif what == "report":
        path, _ = QFileDialog.getSaveFileName(self, "HTML report", "report.html", REPORT_FILTER)
    else:
        filt = (POINT_FILTERS if what == "points" else TABLE_FILTERS)[fmt]
        ext = {"csv-wide": "csv", "latex": "tex"}.get(fmt, fmt)
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"{what}.{ext}", filt)
    if not path:
        return
    try:
        if what == "points":
            self.export_points(path, fmt)  # reports when done
            return
        if what == "report":
            start_report_export(self, path)  # reports when done
            return
        if what == "table":
            self.export_table(path, fmt)
        else:
            self.export_chart(path)
    except (OSError, ValueError) as exc:
        QMessageBox.warning(self, "Export failed", str(exc))
        return
    self.statusBar().showMessage(f"exported {path}", 5000)
