"""The window used as a person uses it while a run logs: run by tests/resplot/ui/test_gui_soak.py in
a child pytest process, so that a crash (SIGSEGV) fails that test instead of killing the runner.
Not collected by itself (its name does not start with test_).

For RESPLOT_SOAK_S seconds (default 60), with a real process logging through reslog into a real
store (tests/fixtures/live_logger.py: a new run every few seconds) next to a 12-run sweep and a
4-rank job over two hosts (tests/fixtures/job.py: a store and a source per host), it clicks every
row of the run table (the job's row unfolded: its hosts and ranks too) and of the sources tree,
hovers and clicks every chart (and a line on it) and the Ranks page's map, switches every page,
zooms and drag-pans with the toolbar and follows the data again, and resizes the window to
1280×800 and back; real mouse and key events (QTest), under whatever platform the parent chose
(offscreen, or xcb under Xvfb). The first part leaves every tick box to the default selection (a
user who has not ticked anything: how the crash of issue 21 was met); the second half also ticks
and unticks by hand.
"""

from __future__ import annotations

import os
import time

from PyQt5.QtCore import QModelIndex, QPersistentModelIndex, QPoint, Qt
from PyQt5.QtTest import QTest

from resplot.data.cache import SeriesCache
from resplot.data.state import PAGES
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow, make_poller
from tests.fixtures import live_logger
from tests.fixtures.job import make_job
from tests.fixtures.sweep import PROJECT, make_sweep

SOAK_S = float(os.environ.get("RESPLOT_SOAK_S", "60"))
POLL_S = 0.5  # twice the default poll rate
PAUSE_MS = 15  # between actions: events (arrivals, redraws) run in between, as for a person
SIZES = ((1280, 800), (1920, 1080))


class Soak:
    """Actions in turns: each turn takes the next page, the next rows of the table and tree,
    and every chart of the page, so that a minute on a loaded machine (a redraw with live data
    costs 0.2-0.5 s of the GUI thread here) still reaches every row, chart and page."""

    def __init__(self, qtbot, win: MainWindow, deadline: float) -> None:
        self.qtbot, self.win, self.deadline = qtbot, win, deadline
        self.done: dict[str, int] = {}
        self.rows_clicked: set = set()  # RunRefs (and job or host keys) whose row was clicked
        self.pages_seen: set[str] = set()
        self.table_at = self.tree_at = 0

    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def count(self, what: str) -> None:
        self.done[what] = self.done.get(what, 0) + 1
        self.qtbot.wait(PAUSE_MS)

    # -- the run table and the sources tree ---------------------------------------------------
    def click_table_rows(self, n: int, tick: bool) -> None:
        """Click `n` rows, those not clicked yet first."""
        table, model = self.win.table, self.win.model
        view, proxy = table.view, table.proxy
        for _ in range(n):
            table.unfold_jobs()  # a job's hosts and ranks are rows to click too
            rows = table._all_rows()
            if not rows or self.over():
                return
            keys = [self._key(model, proxy, index) for index in rows]
            fresh = [i for i, key in enumerate(keys) if key not in self.rows_clicked]
            at = fresh[0] if fresh else self.table_at % len(keys)
            self.table_at += 1
            index = rows[at].siblingAtColumn(1)
            # The row as the model goes on (runs arrive while it is clicked: a plain index
            # into a model that changed since is dangling, and Qt crashes on it).
            row = QPersistentModelIndex(rows[at])
            view.scrollTo(index)
            QTest.mouseClick(
                view.viewport(), Qt.LeftButton, Qt.NoModifier, view.visualRect(index).center()
            )
            self.rows_clicked.add(keys[at])
            self.count("table row clicks")
            if isinstance(keys[at], tuple) and keys[at][0] in ("job", "host"):
                self.count("job row clicks")
            if tick and row.isValid():
                view.setCurrentIndex(QModelIndex(row))
                QTest.keyClick(view, Qt.Key_Space)  # the tick box of the current row
                self.count("ticks by hand")

    @staticmethod
    def _key(model, proxy, index):
        """A run's row by its RunRef, a job's or host's by its entry key."""
        entry = model.entry_at(proxy.mapToSource(index))
        if entry is None:
            return ("gone",)
        return entry.run.ref if entry.run is not None else entry.key

    def click_tree_items(self, n: int) -> None:
        tree = self.win.tree
        items = []
        for i in range(tree.topLevelItemCount()):
            stack = [tree.topLevelItem(i)]
            while stack:
                item = stack.pop()
                items.append(item)
                stack.extend(item.child(c) for c in range(item.childCount()))
        for item in items[self.tree_at % len(items) :][:n] if items else []:
            self.tree_at += 1
            if self.over():
                return
            try:
                tree.scrollToItem(item)
                rect = tree.visualItemRect(item)
            except RuntimeError:  # the tree was rebuilt (a run arrived): its items are gone
                return
            QTest.mouseClick(tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
            self.count("tree clicks")

    # -- charts --------------------------------------------------------------------------------
    def _to_widget(self, canvas, fx: float, fy: float) -> QPoint:
        """Figure pixels (origin bottom left, device pixels) to the canvas widget's points."""
        ratio = canvas.device_pixel_ratio or 1.0
        return QPoint(int(fx / ratio), int((canvas.figure.bbox.height - fy) / ratio))

    def hover_and_click_ranks(self) -> None:
        """The Ranks page's map: hover cells across it (each shows its rank's breakdown) and
        click one."""
        view = self.win.ranks
        page, canvas = view.page, view.canvas
        # The job is in the sources: its map comes with the first redraw after the switch.
        self.qtbot.waitUntil(lambda: bool(page.axes), timeout=30_000)
        if self.over():
            return
        box = page.ax.bbox
        for fx, fy in ((0.2, 0.2), (0.5, 0.5), (0.8, 0.7), (0.95, 0.95)):
            at = self._to_widget(canvas, box.x0 + fx * box.width, box.y0 + fy * box.height)
            QTest.mouseMove(canvas, at)
            self.count("ranks hovers")
            try:  # a cell outside the job's data shows nothing; a loaded machine shows it late
                self.qtbot.waitUntil(view.hover.isVisible, timeout=1_000)
                self.count("ranks hovers shown")
            except self.qtbot.TimeoutError:
                pass
        QTest.mouseClick(canvas, Qt.LeftButton, Qt.NoModifier, at)
        self.count("chart clicks")

    def hover_and_click_charts(self) -> None:
        """Every chart of the page: hover at two places, click away from the lines, click on
        one line (which highlights its run and selects its table row)."""
        if self.win.state.page == "ranks":
            self.hover_and_click_ranks()
            return
        view = self.win.pages[self.win.state.page]
        canvas, page = view.canvas, view.page
        for n in range(len(page.axes)):
            if n >= len(page.axes) or self.over():
                return  # the page was laid out again meanwhile, or time is up
            ax = page.axes[n]
            box = ax.bbox
            view.scroll.ensureVisible(int(box.x0), int(canvas.figure.bbox.height - box.y1))
            for frac in (0.3, 0.8):
                at = self._to_widget(canvas, box.x0 + frac * box.width, box.y0 + 0.5 * box.height)
                QTest.mouseMove(canvas, at)
                self.count("hovers")
            QTest.mouseClick(canvas, Qt.LeftButton, Qt.NoModifier, at)
            self.count("chart clicks")
            tracks = page.tracks[n] if n < len(page.tracks) else {}
            for track in list(tracks.values())[:1]:
                x, y = track.line.get_xdata(), track.line.get_ydata()
                if len(x) == 0:
                    continue
                fx, fy = ax.transData.transform((float(x[len(x) // 2]), float(y[len(y) // 2])))
                if box.x0 < fx < box.x1 and box.y0 < fy < box.y1:
                    QTest.mouseClick(
                        canvas, Qt.LeftButton, Qt.NoModifier, self._to_widget(canvas, fx, fy)
                    )
                    self.count("line clicks")

    def zoom(self) -> None:
        """A rubber-band zoom with the toolbar's zoom tool on the first chart, a drag-pan with
        its pan tool, a hover in the zoomed view, then "Follow data" (the window's reset)."""
        view = self.win.page_view()
        page, canvas = view.page, view.canvas
        if not page.axes or self.over():
            return
        box = page.axes[0].bbox
        if view is not self.win.ranks:  # a chart page scrolls; the Ranks page fills its tab
            view.scroll.ensureVisible(0, 0)
        a = self._to_widget(canvas, box.x0 + 0.3 * box.width, box.y0 + 0.7 * box.height)
        b = self._to_widget(canvas, box.x0 + 0.6 * box.width, box.y0 + 0.3 * box.height)
        view.toolbar.zoom()
        QTest.mousePress(canvas, Qt.LeftButton, Qt.NoModifier, a)
        QTest.mouseMove(canvas, b)
        QTest.mouseRelease(canvas, Qt.LeftButton, Qt.NoModifier, b)
        view.toolbar.zoom()  # the tool off again
        self.count("zooms")
        # A drag-pan whose moves and release come together (as a real X server batches them):
        # the release overtakes the last queued move.
        view.toolbar.pan()
        QTest.mousePress(canvas, Qt.LeftButton, Qt.NoModifier, b)
        for k in (1, 2, 3):
            QTest.mouseMove(canvas, QPoint(b.x() - 15 * k, b.y()))
        QTest.mouseRelease(canvas, Qt.LeftButton, Qt.NoModifier, QPoint(b.x() - 45, b.y()))
        view.toolbar.pan()  # the tool off again
        self.count("pans")
        QTest.mouseMove(canvas, a)
        self.count("hovers")
        self.win.reset_view()
        self.count("follow data")

    def switch_page(self, page: str) -> None:
        bar = self.win.tabs.tabBar()
        before, was = self.win.redraw_count, self.win.state.page
        QTest.mouseClick(bar, Qt.LeftButton, Qt.NoModifier, bar.tabRect(PAGES.index(page)).center())
        assert self.win.state.page == page
        self.pages_seen.add(page)
        self.count("page switches")
        # Its charts drawn before they are hovered or zoomed (a loaded machine took longer than
        # a pause, and a short soak then never zoomed).
        if page != was:
            self.qtbot.waitUntil(lambda: self.win.redraw_count > before, timeout=30_000)

    def resize(self, size: tuple[int, int]) -> None:
        self.win.resize(*size)
        self.count("resizes")


def test_the_window_survives_a_person_clicking_while_runs_log(qtbot, tmp_path):
    store = tmp_path / "runs.db"
    make_sweep(store, steps=2000)
    hosts = {h: tmp_path / f"job-{h}.db" for h in ("gpu-a", "gpu-b")}
    make_job(hosts, steps=2000)
    logger = live_logger.start(store, PROJECT, every=6)
    try:
        cache = SeriesCache()
        win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
        qtbot.addWidget(win)
        win.resize(*SIZES[1])
        win.show()
        win.state.set_poll_interval(POLL_S)
        win.attach_poller(make_poller(cache, POLL_S, win.ask_host_key))
        win.add_source(str(store))
        for path in hosts.values():
            win.add_source(str(path))
        qtbot.waitUntil(lambda: len(cache.runs()) >= 17, timeout=60_000)
        assert win.state.auto_tick  # nothing ticked by hand: the default selection plots
        runs_at_start = [r.ref for r in cache.runs()]
        redraws_at_start = win.redraw_count
        start = time.monotonic()
        soak = Soak(qtbot, win, start + SOAK_S)
        turn = 0
        # For the soak's time, then until every page and table row had its turn (on a loaded
        # machine a minute may not reach them all: the rest is done, and only the rest).
        while time.monotonic() < start + SOAK_S:
            by_hand = time.monotonic() - start > 0.5 * SOAK_S
            soak.click_table_rows(4, tick=by_hand)
            soak.switch_page(PAGES[turn % len(PAGES)])
            soak.hover_and_click_charts()
            if turn % 2 == 0 or win.state.page == "ranks":  # (its turn is odd)
                soak.zoom()
            soak.click_tree_items(4)
            if turn % 3 == 2:
                soak.resize(SIZES[(turn // 3) % 2])
            turn += 1
        soak.deadline = float("inf")
        for page in PAGES:
            if page not in soak.pages_seen:
                soak.switch_page(page)
                soak.hover_and_click_charts()
        # A short soak on a loaded machine may not have reached every kind of action in its
        # time: each one it names is done once at least.
        if not soak.done.get("zooms"):
            soak.zoom()
        if not soak.done.get("tree clicks"):
            soak.click_tree_items(4)
        if not all(soak.done.get(w) for w in ("hovers", "chart clicks", "line clicks")):
            soak.switch_page(PAGES[0])
            soak.hover_and_click_charts()
        if not soak.done.get("ranks hovers shown"):
            soak.switch_page("ranks")
            soak.hover_and_click_ranks()
        soak.click_table_rows(len(runs_at_start), tick=False)
        soak.resize(SIZES[1])
        qtbot.wait(500)
        done = soak.done
        print(f"soak: {turn} turns in {time.monotonic() - start:.0f} s: {done}")
        # It did what it says, while runs came and data arrived.
        assert soak.pages_seen == set(PAGES)
        assert set(runs_at_start) <= soak.rows_clicked
        for what in (
            "tree clicks",
            "hovers",
            "chart clicks",
            "line clicks",
            "zooms",
            "pans",
            "job row clicks",
            "ranks hovers shown",
        ):
            assert done.get(what, 0) > 0, what
        assert win.redraw_count > redraws_at_start
        assert win.isVisible()
        assert logger.poll() is None, "the logging process died"
        qtbot.waitUntil(lambda: len(cache.runs()) > len(runs_at_start), timeout=30_000)
        win.close()
    finally:
        logger.kill()
        logger.wait()
