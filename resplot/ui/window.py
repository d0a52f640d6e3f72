"""The main window: sources tree, chart pages, run table, toolbar, status bar, exports.

The GUI thread never touches a store or a socket: the Poller's worker fills the SeriesCache and
reports through signals, and every signal only (re)starts one single-shot redraw timer, so a
burst of arrivals costs one redraw. A redraw refreshes the visible page's existing artists
(`set_data`) and presents them: drawn over the page's saved axes when no limit, size or style
changed, else a full draw (resplot/ui/layers.py); zooming, panning and resizing re-decimate the
same way. When and how it redraws: resplot/ui/window_redraw.py.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from PyQt5.QtCore import Qt, QTimer
from PyQt5.QtWidgets import (
    QMainWindow,
    QSplitter,
    QTabWidget,
)

from resplot.data import alerts as alerts_mod
from resplot.data.cache import SeriesCache
from resplot.data.key_roles import counter_keys, rising_keys
from resplot.data.model import RunRef
from resplot.data.selection import default_selection
from resplot.data.state import PAGES, ViewState
from resplot.draw import fonts
from resplot.draw.charts import ChartPage
from resplot.draw.ranks import RanksPage
from resplot.sources.spec import parse_spec
from resplot.ssh.options import SSHOptions
from resplot.ui import controls, ranks_view, shortcuts, status_bar, window_layout
from resplot.ui import settings as settings_mod
from resplot.ui.dialogs import AddSourceDialog, HostKeyAsker
from resplot.ui.export_menu import ExportWorker, ask_export, start_points_export
from resplot.ui.exports import export_table
from resplot.ui.heap_trim import HeapTrim
from resplot.ui.notify import Notifier
from resplot.ui.page_view import PageView
from resplot.ui.poller import Poller
from resplot.ui.ranks_view import RanksView
from resplot.ui.redraw_turns import RedrawTurns
from resplot.ui.run_menu import attach_run_menus
from resplot.ui.run_table import RunTable
from resplot.ui.run_table_model import RunTableModel
from resplot.ui.sources_tree import SourcesTree, source_state_text
from resplot.ui.tile_wait import TileWait
from resplot.ui.window_redraw import REDRAW_DELAY_MS, WindowRedraws

SIDE_REFRESH_MS = 1000  # ages and "stalled" change with time alone


def make_poller(cache: SeriesCache, interval: float, ask_host_key) -> Poller:
    return Poller(cache, interval=interval, ssh=SSHOptions(ask_host_key=ask_host_key))


class MainWindow(WindowRedraws, QMainWindow):
    def __init__(
        self,
        cache: SeriesCache,
        settings: settings_mod.Settings | None = None,
        settings_path: Path | None = None,
        poller=None,
    ) -> None:
        super().__init__()
        self.setWindowTitle("resplot")
        self.cache = cache
        self.settings = settings or settings_mod.Settings()
        self.settings_path = settings_path
        self.state: ViewState = self.settings.state
        self.poller = None
        self.alerts: dict[RunRef, list[alerts_mod.Alert]] = {}
        self.source_labels: dict[str, str] = {}  # spec -> poller label
        self._source_texts: dict[str, str] = {}  # poller label -> its state, as shown
        self.redraw_count = 0
        self.ahead_page: ChartPage | None = None  # whose series the poller works ahead
        self.ask_host_key = HostKeyAsker(self)
        self.exports: list[ExportWorker] = []
        self.local_copies = None  # resplot.ui.local_copies.LocalCopies, when attached
        self.cache.set_tile_limit(self.state.tile_cache_mb << 20)

        self._runs_laid_out = False  # a refresh has laid out runs: later runs are coalesced
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(REDRAW_DELAY_MS)
        self._redraw_timer.timeout.connect(self._redraw_due)
        self._last_redraw = 0.0  # time.monotonic() of the last redraw_now
        self.redraw_turns = RedrawTurns()  # a redraw due, run over turns of the event loop
        self._view_redraw_posted = False  # a zoom or pan's redraw is posted (view_changed)
        self._side_due = True  # the next redraw refreshes the side too (not a zoom's alone)
        self._closed = False
        self.tile_wait = TileWait(self)
        self.heap_trim = HeapTrim(self, before=self.cache.expire_detail)  # each minute
        self._side_timer = QTimer(self)
        self._side_timer.setInterval(SIDE_REFRESH_MS)
        self._side_timer.timeout.connect(self._refresh_side)

        self._build_widgets()
        self.notifier = Notifier(
            self,
            muted=[(uid, kind) for uid, kind in self.state.muted],
            say=lambda text: self.statusBar().showMessage(text, 15000),
        )
        controls.build_toolbar(self)
        controls.build_menus(self)
        self._apply_state_to_widgets()
        self._restore_window()
        if self.settings.problem:
            self.statusBar().showMessage(self.settings.problem, 15000)
        if poller is not None:
            self.attach_poller(poller)
        self._side_timer.start()
        self._refresh_side()
        self.schedule_redraw()

    # -- construction ---------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.tree = SourcesTree(self)
        self.tree.runActivated.connect(lambda ref: self.tick(ref, not self.state.is_ticked(ref)))
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)  # no frame around the pages: their pixels go to charts
        self.tabs.setStyleSheet("QTabBar::tab { padding: 3px 10px; }")
        self.pages: dict[str, PageView] = {}  # the chart pages
        for name in PAGES:
            if name == "ranks":
                self.ranks = ranks_view.attach(self)
                self.tabs.addTab(self.ranks, shortcuts.TITLES[name])
                continue
            view = PageView(name, self.view_changed, self)
            view.canvas.hold_pieces = lambda page=view.page: self._refresh_due(page)
            view.crosshair.runClicked.connect(self.highlight)
            view.pinRequested.connect(self.pin_keys)
            view.sectionToggled.connect(self.toggle_section)
            if view.search is not None:
                view.search.setText(self.state.metric_filter)
                view.search.textChanged.connect(self.set_metric_filter)
            if view.keys_edit is not None:
                self.keys_edit = edit = view.keys_edit
                edit.editingFinished.connect(lambda e=edit: self.set_custom_keys(e.text()))
            self.pages[name] = view
            self.tabs.addTab(view, shortcuts.TITLES.get(name, name.capitalize()))
        self.tabs.currentChanged.connect(lambda i: self.set_page(PAGES[i]))
        for name in PAGES:
            self.tile_wait.watch(name, self.page_view(name))
        self.model = RunTableModel(self.cache, self.state)
        self.model.tickedChanged.connect(lambda _ref, _on: self._ticks_changed())
        self.table = RunTable(self.model, self)
        self.table.columnsChanged.connect(self.save_settings)
        self.table.view.selectionModel().selectionChanged.connect(self._selection_changed)
        attach_run_menus(self)
        # Sizes follow the window (window_layout.follow_size) until the user drags a split.
        self.splits_by_hand = False
        self.top_split = QSplitter(Qt.Horizontal, self)
        self.top_split.addWidget(self.tree)
        self.top_split.addWidget(self.tabs)
        self.top_split.setStretchFactor(1, 4)
        self.main_split = QSplitter(Qt.Vertical, self)
        self.main_split.addWidget(self.top_split)
        self.main_split.addWidget(self.table)
        self.main_split.setStretchFactor(0, 3)
        for split in (self.top_split, self.main_split):
            split.splitterMoved.connect(lambda *_a: setattr(self, "splits_by_hand", True))
        self.setCentralWidget(self.main_split)
        self.setStatusBar(status_bar.StatusBar(self))
        status_bar.build(self, self.statusBar())

    def _apply_state_to_widgets(self) -> None:
        s = self.state
        widgets = (
            self.poll_spin,
            self.pause_action,
            self.x_combo,
            self.smooth_spin,
            self.log_check,
            self.keys_edit,
            self.tabs,
            self.outliers_check,
        )
        for w in widgets:
            w.blockSignals(True)
        self.poll_spin.setValue(s.poll_interval)
        self.pause_action.setChecked(s.paused)
        self._offer_x_axes([s.x_axis])
        self.x_combo.setCurrentText(s.x_axis)
        self.smooth_spin.setValue(s.smoothing)
        self.log_check.setChecked(s.log_y)
        self.outliers_check.setChecked(s.ignore_outliers)
        self.keys_edit.setText(" ".join(s.custom_keys))
        self.tabs.setCurrentIndex(PAGES.index(s.page))
        for w in widgets:
            w.blockSignals(False)
        self.table.set_filter(s.filter_text)
        self.set_hover_order(s.hover_order)
        for kind, action in self.event_actions.items():
            action.setChecked(kind not in s.hidden_events)
        self.set_page(s.page)  # its toolbar in the tab bar's corner

    def _restore_window(self) -> None:
        window_layout.restore(self, self.settings.window)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        window_layout.follow_size(self)

    # -- poller ---------------------------------------------------------------------------
    def attach_poller(self, poller) -> None:
        self.poller = poller
        poller.ahead = self.work_ahead
        poller.runsChanged.connect(self.on_runs_changed)
        poller.dataArrived.connect(self.on_data_arrived)
        poller.eventsArrived.connect(self.on_events_arrived)
        poller.sourceState.connect(self.on_source_state)
        poller.errored.connect(self.on_error)
        poller.set_interval(self.state.poll_interval)
        poller.set_paused(self.state.paused)
        for spec in list(self.state.sources):
            self._start_source(spec)
        poller.start()

    def _start_source(self, spec: str) -> bool:
        if self.poller is None or spec in self.source_labels:
            return spec in self.source_labels
        ssh = self.poller.ssh
        if ssh.ask_host_key is None:  # unknown host keys are asked in a dialog
            ssh = replace(ssh, ask_host_key=self.ask_host_key)
        try:
            label = self.poller.add_source(parse_spec(spec), ssh)
        except Exception as exc:  # a bad spec must not take the window down: say why
            self.on_error(f"cannot add source {spec!r}: {exc}")
            return False
        self.source_labels[spec] = label
        self.tree.add_source_label(label)
        return True

    def add_source(self, spec: str) -> None:
        if self._start_source(spec) or self.poller is None:
            self.state.add_source(spec)
            self.save_settings()
        self.schedule_redraw()

    def remove_source(self, spec: str) -> None:
        label = self.source_labels.pop(spec, None)
        if label is not None and self.poller is not None:
            self.poller.remove_source(label)
        self.cache.drop_source(label or spec)
        self.state.remove_source(spec)
        self.save_settings()
        self.schedule_redraw()

    def _offer_x_axes(self, modes: list[str]) -> None:
        """Add x-axis choices (logged counters) the combo does not list yet."""
        have = {self.x_combo.itemText(i) for i in range(self.x_combo.count())}
        new = [m for m in modes if m not in have]
        if new:
            blocked = self.x_combo.blockSignals(True)
            self.x_combo.addItems(new)
            self.x_combo.blockSignals(blocked)

    def on_runs_changed(self) -> None:
        aggs = [
            (k, s.agg) for r in self.cache.runs() for k, s in self.cache.summaries(r.ref).items()
        ]
        keys = sorted({*counter_keys(self.cache.all_keys()), *rising_keys(aggs)})
        self._offer_x_axes([f"key:{k}" for k in keys])
        ranks_view.show_tab(self)
        runs = self.cache.runs()
        note = fonts.missing_note([r.name for r in runs] + self.cache.all_keys())
        if note:
            self.statusBar().showMessage(note, 60000)
        if self.state.auto_tick:
            # Every store alike: the choice is remade over all runs as sources report them.
            self.state.ticked = default_selection(self.cache.runs())
            self.model.looks_changed()
        if self._runs_laid_out:
            self.schedule_redraw()
        else:  # the window's first runs: lay them out and ask for their tiles now
            self._side_due = True
            self._redraw_timer.start(0)

    def on_data_arrived(self, _refs=None) -> None:
        if self.redraw_turns.busy:
            self.redraw_turns.again = True
        if self.tile_wait.awaiting:
            self._side_due = True  # (a live run's new points with them: its row too)
            self._redraw_timer.start(0)  # the tiles a view waits for: draw them at once
        else:
            self.schedule_redraw()

    def on_events_arrived(self, _events=None) -> None:
        self.schedule_redraw()

    def on_source_state(self, label: str, st) -> None:
        text, is_error = source_state_text(st)
        self.tree.set_source_state(label, text, is_error)
        self._source_texts[label] = text
        self.sources_label.setText("  ·  ".join(f"{k}: {v}" for k, v in self._source_texts.items()))
        status_bar.tidy(self)

    def on_error(self, message: str) -> None:
        self.statusBar().showMessage(message, 15000)

    # -- view changes (also what the toolbar calls) ----------------------------------------
    def set_page(self, page: str) -> None:
        self.state.set_page(page)
        if self.tabs.currentIndex() != PAGES.index(page):
            self.tabs.setCurrentIndex(PAGES.index(page))
        ranks_view.show_tab(self)
        toolbar = self.page_view(page).toolbar
        if self.tabs.cornerWidget(Qt.TopRightCorner) is not toolbar:
            self.tabs.setCornerWidget(toolbar, Qt.TopRightCorner)
            toolbar.show()
        self.schedule_redraw()

    def set_x_axis(self, mode: str) -> None:
        self.state.set_x_axis(mode)
        if self.x_combo.currentText() != mode:
            self._offer_x_axes([mode])
            self.x_combo.setCurrentText(mode)
        self.schedule_redraw()

    def set_smoothing(self, weight: float) -> None:
        self.state.set_smoothing(weight)
        if abs(self.smooth_spin.value() - weight) > 1e-9:
            self.smooth_spin.setValue(weight)
        self.schedule_redraw()

    def set_log_y(self, on: bool) -> None:
        self.state.log_y = bool(on)
        if self.log_check.isChecked() != bool(on):
            self.log_check.setChecked(bool(on))
        self.schedule_redraw()

    def set_ignore_outliers(self, on: bool) -> None:
        self.state.ignore_outliers = bool(on)
        if self.outliers_check.isChecked() != bool(on):
            self.outliers_check.setChecked(bool(on))
        self.schedule_redraw()

    def set_metric_filter(self, text: str) -> None:
        self.state.metric_filter = text
        self.schedule_redraw()

    def toggle_section(self, name: str) -> None:
        """Fold or unfold one section (key prefix) of the All page (kept in the settings)."""
        folded = self.state.collapsed_sections
        self.state.collapsed_sections = (
            [s for s in folded if s != name] if name in folded else [*folded, name]
        )
        self.schedule_redraw()

    def pin_keys(self, keys: list[str]) -> None:
        """Add a chart's keys to the Custom page's globs (kept in the settings)."""
        globs = [*self.state.custom_keys, *(k for k in keys if k not in self.state.custom_keys)]
        self.set_custom_keys(globs)
        self.keys_edit.setText(" ".join(globs))
        self.save_settings()
        self.statusBar().showMessage(f"pinned {', '.join(keys)} to the Custom page", 5000)

    def set_custom_keys(self, globs: str | list[str]) -> None:
        self.state.set_custom_keys(globs)
        self.schedule_redraw()

    def set_poll_interval(self, seconds: float) -> None:
        self.state.set_poll_interval(seconds)
        if self.poller is not None:
            self.poller.set_interval(seconds)

    def set_paused(self, paused: bool) -> None:
        self.state.paused = bool(paused)
        if self.pause_action.isChecked() != bool(paused):
            self.pause_action.setChecked(bool(paused))
        if self.poller is not None:
            self.poller.set_paused(bool(paused))
        self.statusBar().showMessage("paused" if paused else "live", 3000)

    def tick(self, ref: RunRef, on: bool = True) -> None:
        self.model.set_ticked(ref, on)  # its rows repainted; tickedChanged -> _ticks_changed

    def highlight(self, ref: RunRef | None) -> None:
        """Bring one run forward on every page (the others faded) and select its table row;
        None clears it."""
        for view in self.pages.values():
            view.page.highlighted = ref
        if ref is not None:
            self.table.select(ref)
        self.schedule_redraw()

    def set_notifications_muted(self, ref: RunRef, kind: str, muted: bool) -> None:
        """Mute (or not) the desktop notifications of one kind for a run ("*": every kind)."""
        self.notifier.set_muted(ref, kind, muted)
        self.state.muted = sorted([uid, k] for uid, k in self.notifier.muted)
        self.save_settings()

    def set_run_color(self, ref: RunRef, color: str | None) -> None:
        """Pin a run's colour ("#rrggbb"), or with None give it a free slot again."""
        if color is None:
            self.state.colors.pop(ref.uid, None)
        else:
            self.state.set_color(ref, color)
        self.save_settings()
        self.model.looks_changed()
        self.schedule_redraw()

    def _ticks_changed(self) -> None:
        self.state.auto_tick = False  # the user chooses from now on (kept in the settings)
        # The tick boxes were repainted by the model; colours follow in the redraw
        # (assign_looks).
        self.schedule_redraw()

    def set_hover_order(self, order: str) -> None:
        """The hover readout's order after the hovered run: "value" or "name"."""
        self.state.set_hover_order(order)
        for view in self.pages.values():
            view.crosshair.order = order
        if self.by_name_action.isChecked() != (order == "name"):
            self.by_name_action.setChecked(order == "name")

    def show_events(self, kind: str, on: bool) -> None:
        """Draw the vertical lines of one event kind (checkpoint, resume, alert) or not."""
        hidden = [k for k in self.state.hidden_events if k != kind]
        self.state.hidden_events = hidden if on else [*hidden, kind]
        action = self.event_actions.get(kind)
        if action is not None and action.isChecked() != on:
            action.setChecked(on)
        self.schedule_redraw()

    def _selection_changed(self) -> None:
        """The table's selected runs: their events show on crowded charts."""
        selected = set(self.table.selected_refs())
        for view in self.pages.values():
            view.page.selected = selected
        self.schedule_redraw()

    def toggle_hover_order(self) -> None:
        self.set_hover_order("name" if self.state.hover_order == "value" else "value")

    def toggle_table(self) -> None:
        self.table.setVisible(not self.table.isVisible())

    def toggle_tree(self) -> None:
        window_layout.toggle_tree(self)

    def ask_export(self, what: str, fmt: str) -> None:
        ask_export(self, what, fmt)

    def reset_view(self) -> None:
        self.current_page().reset_view()
        self.schedule_redraw()

    def page_view(self, page: str | None = None) -> PageView | RanksView:
        """The widget of a page (the current one by default)."""
        page = page or self.state.page
        return self.ranks if page == "ranks" else self.pages[page]

    def current_page(self) -> ChartPage | RanksPage:
        return self.page_view().page

    def plotted_refs(self) -> list[RunRef]:
        return [r for r in self.state.ticked if self.cache.run(r) is not None]

    def _refresh_side(self) -> None:
        now = time.time()
        self.alerts = alerts_mod.check_all(self.cache, now=now)
        self.notifier.update(self.alerts, self.cache.runs())
        self.model.refresh(self.alerts, now)
        self.tree.refresh(self.cache, now, self.state)
        names = {r.ref: r.name for r in self.cache.runs()}
        status_bar.show_alert(self, alerts_mod.summary(self.alerts, names))

    # -- export -----------------------------------------------------------------------------
    def export_refs(self) -> list[RunRef]:
        """Ticked runs (all visible runs when none is ticked)."""
        return self.plotted_refs() or self.table.visible_refs()

    def export_points(self, path: str | Path, fmt: str) -> ExportWorker:
        return start_points_export(self, path, fmt)

    def export_table(self, path: str | Path, fmt: str) -> None:
        export_table(self.cache, self.export_refs(), path, fmt, self.state.table_metrics)

    def export_chart(self, path: str | Path) -> None:
        page = self.current_page()
        if isinstance(page, ChartPage) and page.behind:  # charts out of a zoomed view: all drawn
            page.refresh(self.cache, self.state, self.plotted_refs(), every=True)
        page.save(path)  # PNG, SVG or PDF by its extension

    # -- sources UI ---------------------------------------------------------------------------
    def _ask_add_source(self) -> None:
        spec = AddSourceDialog.ask(self)
        if spec:
            self.add_source(spec)

    def _remove_selected_source(self) -> None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        if item is None:
            return
        label = item.data(0, Qt.UserRole)
        spec = next((s for s, lab in self.source_labels.items() if lab == label), label)
        self.remove_source(spec)

    # -- local copies -------------------------------------------------------------------------
    def attach_local_copies(self, copies) -> None:
        """ "Keep a local copy" of a source: resplot.ui.local_copies.ShownCopies adds the menu
        entry and shows a copy, marked, while its source does not answer."""
        from resplot.ui.local_copies import ShownCopies

        self.local_copies = ShownCopies(self, copies)

    # -- settings -----------------------------------------------------------------------------
    def save_settings(self) -> None:
        self.settings.window = window_layout.saved(self)
        try:
            settings_mod.save(self.settings, self.settings_path)
        except OSError as exc:
            self.on_error(f"cannot save settings: {exc}")

    def showEvent(self, event) -> None:
        self._closed = False
        super().showEvent(event)

    def closeEvent(self, event) -> None:
        self._closed = True
        self._side_timer.stop()
        self._redraw_timer.stop()
        self.redraw_turns.forget()
        self.tile_wait.stand_in.stop()
        for worker in list(self.exports):
            worker.wait()  # a half-written export is removed by the writer, never kept
        if self.poller is not None:
            self.poller.stop()
        self.save_settings()
        super().closeEvent(event)
